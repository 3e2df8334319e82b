# sched module: the shared pipeline scheduler (plan -> per-stage streams),
# its verifier and unit-cost timeline; `merak sched` is in cli/.
libmerak_la_SOURCES += src/sched/sched.c src/sched/sched_recompute.c src/sched/sched_1f1b.c src/sched/sched_gpipe.c \
	src/sched/sched_merak.c src/sched/sched_interleaved.c src/sched/sched_zbh1.c src/sched/sched_looped_bfs.c src/sched/sched_zb_list.c src/sched/sched_dualpipev.c src/sched/sched_timeline.c \
	src/sched/sched_verify.c src/sched/sched_rendezvous.c src/sched/sched_json.c \
	src/sched/walk.c src/sched/sched_traits.c
noinst_HEADERS += include/merak/walk.h include/merak/hash.h
noinst_HEADERS += src/sched/sched_internal.h

check_PROGRAMS += tests/test_sched tests/test_sched_props tests/test_walk tests/test_sched_traits
tests_test_sched_traits_SOURCES = tests/test_sched_traits.c tests/check.h
tests_test_walk_SOURCES = tests/test_walk.c tests/check.h
tests_test_sched_SOURCES = tests/test_sched.c tests/check.h
tests_test_sched_props_SOURCES = tests/test_sched_props.c tests/check.h
TESTS += tests/test_sched tests/test_sched_props tests/test_walk tests/test_sched_traits tests/sched-cli.sh tests/sched-errors.sh
EXTRA_DIST += tests/sched-cli.sh tests/sched-errors.sh
