# sim module: the discrete-event simulator, its cost model (compute,
# collectives, sub-pipelined TP), the memory tracker; `merak sim` is in cli/.
libmerak_la_SOURCES += sim/cost.c sim/collective.c sim/tp.c sim/memory.c sim/memory_auto.c sim/memory_act.c sim/memory_scratch.c sim/opsac.c sim/offload.c sim/evq.c \
	sim/sim.c sim/sim_chunk.c sim/sim_step.c sim/sim_result.c sim/zero.c sim/explain.c sim/dp_share.c \
	sim/sim_cache.c sim/sim_bound.c sim/sim_bound_walk.c
noinst_HEADERS += include/merak/cost.h include/merak/sim_search.h
noinst_HEADERS += sim/sim_internal.h sim/evq.h

check_PROGRAMS += tests/test_sim tests/test_evq tests/test_sim_cp
tests_test_sim_SOURCES = tests/test_sim.c tests/check.h
tests_test_sim_cp_SOURCES = tests/test_sim_cp.c tests/check.h
tests_test_evq_SOURCES = tests/test_evq.c tests/check.h
TESTS += tests/test_sim tests/test_evq tests/test_sim_cp tests/sim-cp.sh tests/sim-cli.sh tests/sim-errors.sh tests/sim-merak.sh \
	tests/sim-valgrind.sh tests/sim-memory.sh tests/sim-fp8.sh tests/sim-xent.sh tests/sim-eager.sh tests/sim-plots.sh tests/sim-quant.sh tests/sim-zero.sh
EXTRA_DIST += tests/sim-cp.sh tests/sim-cli.sh tests/sim-zero.sh tests/sim-errors.sh tests/sim-merak.sh tests/sim-valgrind.sh \
	tests/sim-memory.sh tests/sim-fp8.sh tests/sim-xent.sh tests/sim-eager.sh \
	tests/sim-plots.sh tests/sim-quant.sh traces/README.md experiments/bench-sim.sh
# cluster files, installed beside the model files (found by name: readfile.h)
dist_pkgdata_DATA += traces/clusters/rtx3090-pcie.json traces/clusters/ideal-8.json
# expert parallelism (issue 19)
TESTS += tests/sim-moe.sh tests/sim-explain.sh
EXTRA_DIST += tests/sim-moe.sh tests/sim-explain.sh
