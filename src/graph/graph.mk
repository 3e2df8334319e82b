# graph module: model descriptions (JSON or built-in GPT), the proxy graph,
# its sharding for tensor parallelism.
libmerak_la_SOURCES += src/graph/dtype.c src/graph/model_arch.c src/graph/model.c src/graph/graph.c src/graph/graph_shard.c \
	src/graph/graph_gpt.c src/graph/graph_json.c src/graph/model_hf.c
noinst_HEADERS += include/merak/model_json.h src/graph/model_hf.h

dist_pkgdata_DATA += traces/models/gpt-small.json traces/models/bert-small.json \
	traces/models/stack.json traces/models/llama-small.json
EXTRA_DIST += traces/models/README.md tests/models/skip2.json tests/models/bad-syntax.json \
	tests/models/missing-field.json tests/models/wrong-type.json tests/models/unknown-op.json \
	tests/models/cycle.json tests/models/undefined-input.json tests/models/width-mismatch.json \
	tests/models/unknown-field.json

check_PROGRAMS += tests/test_graph
tests_test_graph_SOURCES = tests/test_graph.c tests/check.h
TESTS += tests/test_graph

check_PROGRAMS += tests/test_graph_llama
tests_test_graph_llama_SOURCES = tests/test_graph_llama.c tests/check.h
TESTS += tests/test_graph_llama

# mixture of experts, the model description (issue 19)
TESTS += tests/cli-moe.sh
EXTRA_DIST += tests/cli-moe.sh

# Hugging Face config.json as --model (issue 36)
TESTS += tests/model-hf.sh
EXTRA_DIST += tests/model-hf.sh
