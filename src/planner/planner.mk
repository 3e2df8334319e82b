# planner module: the search behind `merak plan` (needs the simulator).
libmerak_la_SOURCES += src/planner/planner.c src/planner/planner_gen.c src/planner/planner_prune.c src/planner/planner_fam.c src/planner/planner_queue.c \
	src/planner/planner_explain.c src/planner/whatif.c src/planner/planner_mpi.c
noinst_HEADERS += src/planner/planner_internal.h
noinst_HEADERS += include/merak/whatif.h
check_PROGRAMS += tests/test_planner tests/test_planner_mpi
tests_test_planner_mpi_SOURCES = tests/test_planner_mpi.c tests/check.h
tests_test_planner_SOURCES = tests/test_planner.c tests/check.h
TESTS += tests/test_planner tests/mpi-planner-lib.sh tests/plan-cli.sh tests/plan-zero.sh tests/mpi-plan.sh tests/plan-progress.sh
# issue 21: --explain, --what-if, cost, scaling
TESTS += tests/plan-explain.sh
EXTRA_DIST += tests/plan-explain.sh
EXTRA_DIST += tests/mpi-planner-lib.sh tests/plan-cli.sh tests/plan-zero.sh tests/mpi-plan.sh tests/plan-progress.sh
