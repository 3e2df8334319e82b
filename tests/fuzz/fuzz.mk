# Fuzzing the file readers (tests/fuzz/README.md).
#
# `make check` replays the committed corpus (tests/fuzz/corpus/READER/)
# through each harness with the normal compiler (no clang needed):
# tests/fuzz/replay-READER = replay.c + the harness + libmerak.a.
# `make fuzz` builds the same harnesses with clang's libFuzzer and the
# sanitizers and runs each for FUZZ_SECONDS (tests/fuzz/fuzz.sh).
FUZZ_READERS = model cluster plan trace safetensors data hfdir
FUZZ_COMMON = tests/fuzz/replay.c tests/fuzz/fuzz_common.c tests/fuzz/fuzz.h
check_PROGRAMS += tests/fuzz/replay-model tests/fuzz/replay-cluster tests/fuzz/replay-plan \
	tests/fuzz/replay-trace tests/fuzz/replay-safetensors tests/fuzz/replay-data tests/fuzz/replay-hfdir
tests_fuzz_replay_model_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_model.c
tests_fuzz_replay_cluster_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_cluster.c
tests_fuzz_replay_plan_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_plan.c
tests_fuzz_replay_trace_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_trace.c
tests_fuzz_replay_safetensors_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_safetensors.c
tests_fuzz_replay_data_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_data.c
tests_fuzz_replay_hfdir_SOURCES = $(FUZZ_COMMON) tests/fuzz/fuzz_hfdir.c
TESTS += tests/fuzz-replay.sh
EXTRA_DIST += tests/fuzz-replay.sh tests/fuzz/fuzz.sh tests/fuzz/json.dict tests/fuzz/README.md \
	tests/fuzz/mkcorpus.py tests/fuzz/corpus

CLANG = clang
FUZZ_SECONDS = 60
FUZZ_MAX_LEN = 65536
FUZZ_RSS_MB = 2048
FUZZ_TIMEOUT = 10
FUZZ_WORK = $(abs_top_builddir)/tests/fuzz/work
fuzz: $(top_builddir)/config.h
	$(AM_V_at)CLANG='$(CLANG)' FUZZ_SRCDIR='$(top_srcdir)' FUZZ_BUILD='$(top_builddir)/tests/fuzz/build' \
	FUZZ_WORK='$(FUZZ_WORK)' FUZZ_CPPFLAGS='$(subst ','\'',$(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS))' \
	FUZZ_LIBS='$(MK_DEP_LIBS) $(LIBS)' FUZZ_LIBSRCS='$(libmerak_la_SOURCES)' \
	FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_MAX_LEN='$(FUZZ_MAX_LEN)' FUZZ_RSS_MB='$(FUZZ_RSS_MB)' \
	FUZZ_TIMEOUT='$(FUZZ_TIMEOUT)' FUZZ_READERS='$(FUZZ_READERS)' \
	$(SHELL) $(top_srcdir)/tests/fuzz/fuzz.sh
.PHONY: fuzz
clean-local: clean-fuzz
clean-fuzz:
	-rm -rf tests/fuzz/build
.PHONY: clean-fuzz
