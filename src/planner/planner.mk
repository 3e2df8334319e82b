# planner module: the search behind `merak plan` (needs the simulator).
libmerak_la_SOURCES += src/planner/planner.c
merakinclude_HEADERS += include/merak/planner.h
check_PROGRAMS += tests/test_planner
tests_test_planner_SOURCES = tests/test_planner.c tests/check.h
TESTS += tests/test_planner tests/plan-cli.sh tests/plan-zero.sh tests/mpi-plan.sh
EXTRA_DIST += tests/plan-cli.sh tests/plan-zero.sh tests/mpi-plan.sh
