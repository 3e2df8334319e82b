# formats module: the files a run reads and writes: safetensors
# (safetensors.c), the checkpoint's merak metadata (ckpt_meta.c), token
# data (data.c: llm.c .bin, raw uint16, bytes; data_megatron.c: Megatron-LM
# indexed datasets); used by exec/ and cli/.
libmerak_la_SOURCES += src/formats/safetensors.c src/formats/ckpt_meta.c src/formats/data.c src/formats/data_megatron.c \
	src/formats/data_blend.c
noinst_HEADERS += include/merak/safetensors.h include/merak/ckpt.h include/merak/data.h src/formats/data_internal.h
check_PROGRAMS += tests/test_io
tests_test_io_SOURCES = tests/test_io.c tests/check.h
TESTS += tests/test_io tests/io-python.sh tests/llama-numpy.sh
check_PROGRAMS += tests/test_readers
tests_test_readers_SOURCES = tests/test_readers.c tests/check.h
TESTS += tests/test_readers
EXTRA_DIST += tests/io-python.sh tests/st_read.py tests/llama-numpy.sh tests/llama_ref.py tests/megatron_write.py

# Megatron-LM indexed datasets (issue 36)
TESTS += tests/data-megatron.sh
EXTRA_DIST += tests/data-megatron.sh
