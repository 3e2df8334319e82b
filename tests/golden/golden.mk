# Golden outputs (issue 14): the scheduler's streams, `merak sim` and `merak
# plan` results and the executor's losses, recorded in tests/golden/*.jsonl.gz
# by tests/golden/record.sh, and tests that compare the current build with
# them.  tests/golden/batch runs many merak command lines in one process (it
# is built from merak's own sources, main renamed) so that thousands of
# cases take seconds instead of a 0.15 s program start each.
check_PROGRAMS += tests/golden/batch
tests_golden_batch_SOURCES = tests/golden/batch.c $(merak_SOURCES)
tests_golden_batch_CPPFLAGS = $(AM_CPPFLAGS) -Dmain=mk_merak_main
tests_golden_batch_LDADD = $(LDADD)
TESTS += tests/golden-sched.sh tests/golden-sim.sh tests/mpi-golden.sh
EXTRA_DIST += tests/golden-sched.sh tests/golden-sim.sh tests/mpi-golden.sh \
	tests/golden/golden.py tests/golden/record.sh tests/golden/README.md \
	tests/golden/sched.jsonl.gz tests/golden/sim-ideal.jsonl.gz \
	tests/golden/sim-clusters.jsonl.gz tests/golden/plan.jsonl.gz tests/golden/run.jsonl.gz
# a deliberately wrong cblas_sgemm (LD_PRELOAD) that mpi-golden.sh must catch
check_LTLIBRARIES += tests/golden/sgemm_scale.la
tests_golden_sgemm_scale_la_SOURCES = tests/golden/sgemm_scale.c
tests_golden_sgemm_scale_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_golden_sgemm_scale_la_LIBADD = $(DL_LIBS)
