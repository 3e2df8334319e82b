# Executor: backends, kernels, the GPT, MPI runtime, stream interpreter, `merak run`.
libmerak_a_SOURCES += src/backend_cpu.c src/kernels_cpu.c src/gpt.c src/gpt_layers.c \
	src/comm.c src/runtime.c src/exec.c src/exec_setup.c src/exec_stream.c src/exec_trace.c \
	src/exec_ckpt.c src/exec_zero.c src/exec_faults.c
noinst_HEADERS += include/merak/backend.h include/merak/gpt.h include/merak/exec.h \
	src/kernels_cpu.h src/comm.h src/exec_internal.h
merak_SOURCES += src/cli_run.c

check_PROGRAMS += tests/test_kernels tests/test_gpt tests/test_gpt_gradcmp
tests_test_kernels_SOURCES = tests/test_kernels.c tests/check.h
tests_test_gpt_SOURCES = tests/test_gpt.c tests/check.h
tests_test_gpt_gradcmp_SOURCES = tests/test_gpt_gradcmp.c
TESTS += tests/test_kernels tests/test_gpt
EXTRA_DIST += experiments/bench-exec.sh
TESTS += tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh tests/run-errors.sh tests/mpi-run-errors.sh \
	tests/mpi-run-trace.sh tests/mpi-ckpt.sh tests/mpi-zero.sh tests/mpi-fail.sh tests/mpi-run-data.sh
EXTRA_DIST += tests/mpi-exec-lib.sh tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh \
	tests/run-errors.sh tests/mpi-run-errors.sh tests/mpi-run-trace.sh \
	tests/mpi-ckpt.sh tests/st_edit.py tests/mpi-zero.sh tests/mpi-fail.sh tests/mpi-run-data.sh \
	experiments/train-shakespeare/tinyshakespeare.txt experiments/train-shakespeare/README.md \
	experiments/train-shakespeare/run.sh experiments/train-shakespeare/plot.py
