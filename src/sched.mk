# sched module: the shared pipeline scheduler (plan -> per-stage streams),
# its verifier and unit-cost timeline, and `merak sched`.
libmerak_a_SOURCES += src/sched.c src/sched_recompute.c src/sched_1f1b.c src/sched_gpipe.c \
	src/sched_merak.c src/sched_interleaved.c src/sched_zbh1.c src/sched_timeline.c \
	src/sched_verify.c src/sched_rendezvous.c src/sched_json.c
noinst_HEADERS += include/merak/sched.h src/sched_internal.h
merak_SOURCES += src/cli_sched.c

check_PROGRAMS += tests/test_sched tests/test_sched_props
tests_test_sched_SOURCES = tests/test_sched.c tests/check.h
tests_test_sched_props_SOURCES = tests/test_sched_props.c tests/check.h
TESTS += tests/test_sched tests/test_sched_props tests/sched-cli.sh tests/sched-errors.sh
EXTRA_DIST += tests/sched-cli.sh tests/sched-errors.sh
