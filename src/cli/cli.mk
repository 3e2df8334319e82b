# cli module: the `merak` program; one file per subcommand, argument parsing
# and the model/plan/file options shared by them.  Only this module prints.
merak_SOURCES += src/cli/cli.c src/cli/cli_args.c src/cli/cli_flags.c src/cli/cli_argv.c src/cli/cli_files.c src/cli/cli_model.c \
	src/cli/cli_plan.c src/cli/cli_sched.c src/cli/cli_sim.c src/cli/cli_plan_cmd.c \
	src/cli/cli_run.c src/cli/cli_profile.c src/cli/cli_trace.c src/cli/cli_fmt.c src/cli/cli_plot.c \
	src/cli/cli_blas.c
noinst_HEADERS += src/cli/cli.h src/cli/cli_flags.h
merak_LDADD = $(LDADD)

TESTS += tests/cli-model.sh tests/cli-errors.sh tests/cli-help.sh tests/cli-llama.sh tests/cli-format.sh tests/mpi-blas.sh
EXTRA_DIST += tests/cli-model.sh tests/cli-errors.sh tests/cli-help.sh tests/cli-llama.sh tests/cli-format.sh tests/mpi-blas.sh

# Megatron-LM / DeepSpeed names and repeated flags; messages naming a plan
# file's fields and trace ranks; merak run's log on stderr, --quiet, the
# Adam betas and the default warm-up.
TESTS += tests/cli-aliases.sh tests/cli-messages.sh tests/mpi-run-log.sh
EXTRA_DIST += tests/cli-aliases.sh tests/cli-messages.sh tests/mpi-run-log.sh

# Bounds: sizes past their maxima, and every numeric flag of every
# subcommand swept with edge values (merak run and profile start MPI).
TESTS += tests/bounds.sh tests/flag-sweep.sh tests/mpi-run-sweep.sh
EXTRA_DIST += tests/bounds.sh tests/flag-sweep.sh tests/mpi-run-sweep.sh tests/sweep-lib.sh \
	tests/models/bounds-vocab.json
# issue 21: --explain, --what-if, cost and scaling (merak sim, merak plan)
merak_SOURCES += src/cli/cli_explain.c
noinst_HEADERS += src/cli/cli_explain.h

# The plotting scripts behind `merak plot` (src/cli/cli_plot.c).
plotdir = $(pkgdatadir)/plot
dist_plot_DATA = experiments/plot_timeline.py experiments/plot_memory.py experiments/plot_scaling.py
