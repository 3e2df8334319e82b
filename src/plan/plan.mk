# plan module: clusters, plans (read, written, checked) and partitioning
# (shared by sim, plan and run).
libmerak_la_SOURCES += src/plan/cluster.c src/plan/plan.c src/plan/plan_json.c src/plan/plan_export.c src/plan/partition.c \
	src/plan/plan_ctx.c
noinst_HEADERS += include/merak/plan_ctx.h include/merak/partition.h
TESTS += tests/plan-format.sh tests/flash-attn.sh
EXTRA_DIST += tests/plan-format.sh tests/flash-attn.sh
# The plan resolved once (plan_ctx.h): sizes, order of the checks, hooks.
check_PROGRAMS += tests/test_plan_ctx
tests_test_plan_ctx_SOURCES = tests/test_plan_ctx.c tests/check.h
TESTS += tests/test_plan_ctx

# --export megatron and its round trip (issue 36)
TESTS += tests/export-megatron.sh
EXTRA_DIST += tests/export-megatron.sh
