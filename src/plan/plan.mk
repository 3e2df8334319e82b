# plan module: clusters, plans (read, written, checked) and partitioning
# (shared by sim, plan and run).
libmerak_a_SOURCES += src/plan/cluster.c src/plan/plan.c src/plan/plan_json.c src/plan/partition.c \
	src/plan/plan_ctx.c
noinst_HEADERS += include/merak/cluster.h include/merak/plan.h include/merak/plan_ctx.h include/merak/partition.h
TESTS += tests/plan-format.sh
EXTRA_DIST += tests/plan-format.sh
