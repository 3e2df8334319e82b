# Core: errors, models, proxy graph, clusters, the CLI.
libmerak_a_SOURCES += src/error.c src/fileio.c src/model.c src/graph.c src/graph_shard.c \
	src/graph_gpt.c src/graph_json.c src/cluster.c
noinst_HEADERS += include/merak/common.h include/merak/fileio.h include/merak/model.h include/merak/graph.h \
	include/merak/cluster.h src/cli.h
merak_SOURCES += src/cli.c src/cli_args.c src/cli_files.c src/cli_model.c
merak_LDADD = $(LDADD)

dist_pkgdata_DATA += traces/models/gpt-small.json traces/models/bert-small.json \
	traces/models/stack.json
EXTRA_DIST += traces/models/README.md tests/models/skip2.json tests/models/bad-syntax.json \
	tests/models/missing-field.json tests/models/wrong-type.json tests/models/unknown-op.json \
	tests/models/cycle.json tests/models/undefined-input.json tests/models/width-mismatch.json \
	tests/models/unknown-field.json

check_PROGRAMS += tests/test_graph
tests_test_graph_SOURCES = tests/test_graph.c tests/check.h
TESTS += tests/test_graph tests/cli-model.sh tests/cli-errors.sh
EXTRA_DIST += tests/cli-model.sh tests/cli-errors.sh tests/lib.sh
noinst_HEADERS += include/merak/limits.h include/merak/checked.h

# Bounds: sizes past their maxima, and every numeric flag of every
# subcommand swept with edge values (merak run and profile start MPI).
TESTS += tests/bounds.sh tests/flag-sweep.sh tests/mpi-run-sweep.sh
EXTRA_DIST += tests/bounds.sh tests/flag-sweep.sh tests/mpi-run-sweep.sh tests/sweep-lib.sh \
	tests/models/bounds-vocab.json

# Files written (fileio.c): refusals, symlinks, stale temporaries, signals, full disk.
check_PROGRAMS += tests/test_fileio
tests_test_fileio_SOURCES = tests/test_fileio.c tests/check.h
TESTS += tests/test_fileio tests/files.sh tests/files-full.sh
EXTRA_DIST += tests/files.sh tests/files-full.sh

# Plans and partitioning (shared by sim, plan and run).
libmerak_a_SOURCES += src/plan.c src/plan_json.c src/partition.c src/jsonio.c \
	src/readfile.c
noinst_HEADERS += include/merak/plan.h include/merak/partition.h include/merak/sched.h \
	include/merak/jsonio.h include/merak/readfile.h
merak_SOURCES += src/cli_plan.c
TESTS += tests/plan-format.sh
EXTRA_DIST += tests/plan-format.sh

# Checkpoint files and token data (used by the executor).
libmerak_a_SOURCES += src/safetensors.c src/ckpt_meta.c src/data.c
noinst_HEADERS += include/merak/safetensors.h include/merak/ckpt.h include/merak/data.h
check_PROGRAMS += tests/test_io
tests_test_io_SOURCES = tests/test_io.c tests/check.h
TESTS += tests/test_io tests/io-python.sh
check_PROGRAMS += tests/test_readers
tests_test_readers_SOURCES = tests/test_readers.c tests/check.h
TESTS += tests/test_readers
EXTRA_DIST += tests/io-python.sh tests/st_read.py

# Reading traces: `merak trace summary|diff`.
libmerak_a_SOURCES += src/tracefile.c src/json_stream.c
noinst_HEADERS += include/merak/tracefile.h
merak_SOURCES += src/cli_trace.c
TESTS += tests/cli-trace.sh tests/trace-format.sh
EXTRA_DIST += tests/cli-trace.sh tests/trace-format.sh tests/traces/a.json tests/traces/b.json tests/traces/other.json
