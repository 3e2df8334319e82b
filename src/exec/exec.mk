# exec module: backends, kernels, the GPT, MPI runtime, stream interpreter,
# sub-pipelined TP, checkpoints, ZeRO; the checkpoint files and token data it
# reads and writes.  `merak run` is in cli/.
libmerak_la_SOURCES += src/exec/backend_cpu.c src/exec/kernels_cpu.c src/exec/cpu_par.c src/exec/kernels_llama_cpu.c src/exec/gpt.c src/exec/gpt_layers.c \
	src/exec/comm.c src/exec/runtime.c src/exec/exec.c src/exec/exec_setup.c src/exec/exec_stream.c \
	src/exec/exec_trace.c src/exec/exec_ckpt.c src/exec/exec_zero.c src/exec/exec_fsdp.c src/exec/exec_faults.c src/exec/exec_tp.c \
	src/exec/exec_cp.c src/exec/kernels_cp_cpu.c src/exec/kernels_moe_cpu.c src/exec/gpt_moe.c src/exec/exec_ep.c \
	src/exec/backend_dl.c
merakinclude_HEADERS += include/merak/backend.h include/merak/gpt.h include/merak/exec.h
noinst_HEADERS += src/exec/kernels_cpu.h src/exec/comm.h src/exec/exec_internal.h src/exec/cp.h src/exec/gpt_moe.h src/exec/backend_dl.h

# Checkpoint files and token data.
libmerak_la_SOURCES += src/exec/safetensors.c src/exec/ckpt_meta.c src/exec/data.c
merakinclude_HEADERS += include/merak/safetensors.h include/merak/ckpt.h include/merak/data.h
check_PROGRAMS += tests/test_io
tests_test_io_SOURCES = tests/test_io.c tests/check.h
TESTS += tests/test_io tests/io-python.sh tests/llama-numpy.sh
check_PROGRAMS += tests/test_readers
tests_test_readers_SOURCES = tests/test_readers.c tests/check.h
TESTS += tests/test_readers
EXTRA_DIST += tests/io-python.sh tests/st_read.py tests/llama-numpy.sh tests/llama_ref.py

check_PROGRAMS += tests/test_kernels tests/test_gpt tests/test_gpt_gradcmp tests/test_kernels_par
tests_test_kernels_SOURCES = tests/test_kernels.c tests/check.h
tests_test_kernels_par_SOURCES = tests/test_kernels_par.c tests/check.h
tests_test_gpt_SOURCES = tests/test_gpt.c tests/check.h
tests_test_gpt_gradcmp_SOURCES = tests/test_gpt_gradcmp.c
TESTS += tests/test_kernels tests/test_gpt tests/test_kernels_par
EXTRA_DIST += experiments/bench-exec.sh
TESTS += tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh tests/mpi-exec-llama.sh tests/run-errors.sh tests/mpi-run-errors.sh \
	tests/mpi-run-trace.sh tests/mpi-ckpt.sh tests/mpi-ckpt-llama.sh tests/mpi-zero.sh tests/mpi-zero23.sh tests/mpi-fail.sh tests/mpi-timeout.sh \
	tests/mpi-run-data.sh tests/mpi-memory.sh tests/mpi-cp.sh tests/mpi-sp.sh tests/mpi-moe.sh tests/mpi-trace-nesting.sh
EXTRA_DIST += tests/mpi-exec-lib.sh tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh tests/mpi-exec-llama.sh \
	tests/run-errors.sh tests/mpi-run-errors.sh tests/mpi-run-trace.sh tests/mpi-memory.sh \
	tests/mpi-ckpt.sh tests/mpi-ckpt-llama.sh tests/st_edit.py tests/mpi-zero.sh tests/mpi-zero23.sh tests/mpi-fail.sh tests/mpi-timeout.sh \
	tests/mpi-run-data.sh tests/mpi-cp.sh tests/mpi-sp.sh tests/mpi-moe.sh tests/mpi-trace-nesting.sh \
	experiments/train-shakespeare/tinyshakespeare.txt experiments/train-shakespeare/README.md \
	experiments/train-shakespeare/run.sh experiments/train-shakespeare/plot.py
