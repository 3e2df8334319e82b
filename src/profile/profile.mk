# Profiling this machine (`merak profile`), the validation experiment and
# sub-pipelined TP tests (issue 8).
libmerak_la_SOURCES += src/profile/profile.c src/profile/profile_step.c
noinst_HEADERS += include/merak/profile.h
TESTS += tests/profile-errors.sh tests/mpi-profile.sh tests/mpi-exec-overlap.sh
EXTRA_DIST += tests/profile-errors.sh tests/mpi-profile.sh tests/mpi-exec-overlap.sh
EXTRA_DIST += experiments/validate/run.sh experiments/validate/plot.py \
	traces/profiles/vm-2core-epyc-2ranks.json
