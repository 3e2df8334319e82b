# sim module: the discrete-event simulator, its cost model, traces, `merak sim`.
libmerak_a_SOURCES += sim/cost.c sim/collective.c sim/tp.c sim/memory.c sim/sim.c sim/trace.c
noinst_HEADERS += include/merak/sim.h include/merak/cost.h include/merak/trace.h sim/sim_internal.h
merak_SOURCES += src/cli_sim.c

check_PROGRAMS += tests/test_sim
tests_test_sim_SOURCES = tests/test_sim.c tests/check.h
TESTS += tests/test_sim tests/sim-cli.sh tests/sim-errors.sh tests/sim-merak.sh tests/sim-valgrind.sh \
	tests/sim-plots.sh
EXTRA_DIST += tests/sim-cli.sh tests/sim-errors.sh tests/sim-merak.sh tests/sim-valgrind.sh \
	tests/sim-plots.sh traces/README.md experiments/plot_timeline.py \
	experiments/plot_memory.py experiments/bench-sim.sh traces/clusters/rtx3090-pcie.json \
	traces/clusters/ideal-8.json
