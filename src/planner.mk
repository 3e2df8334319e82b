# The planner: `merak plan` (needs the simulator).
libmerak_a_SOURCES += src/planner.c
noinst_HEADERS += include/merak/planner.h
merak_SOURCES += src/cli_plan_cmd.c
