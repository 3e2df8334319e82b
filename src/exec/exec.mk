# exec module: the training engine: the GPT's layers (dense, MoE, CP
# attention), the MPI runtime, the stream interpreter, sub-pipelined TP,
# ZeRO/FSDP, checkpoints and traces of a run.  Kernels come through a
# backend (src/cpu/, src/cuda/; src/backend/ makes one), files through
# src/formats/.  `merak run` is in cli/.
libmerak_la_SOURCES += src/exec/gpt.c src/exec/gpt_layers.c src/exec/gpt_act.c \
	src/exec/comm.c src/exec/runtime.c src/exec/exec.c src/exec/exec_setup.c src/exec/exec_stream.c \
	src/exec/exec_trace.c src/exec/exec_ckpt.c src/exec/exec_hf.c src/exec/gpt_attn.c src/exec/gpt_mla.c src/exec/exec_zero.c src/exec/exec_fsdp.c src/exec/exec_faults.c src/exec/exec_tp.c \
	src/exec/exec_p16.c src/exec/exec_g16.c \
	src/exec/exec_cp.c src/exec/exec_cp_a2a.c src/exec/kernels_cp_cpu.c src/exec/gpt_moe.c src/exec/gpt_moe_bwd.c src/exec/exec_ep.c \
	src/exec/loss_scale.c
noinst_HEADERS += include/merak/gpt.h include/merak/exec.h
noinst_HEADERS += src/exec/comm.h src/exec/exec_internal.h src/exec/cp.h src/exec/gpt_moe.h src/exec/gpt_moe_layout.h src/exec/gpt_attn.h src/exec/gpt_mla.h

check_PROGRAMS += tests/test_gpt tests/test_gpt_gradcmp
tests_test_gpt_SOURCES = tests/test_gpt.c tests/check.h
tests_test_gpt_gradcmp_SOURCES = tests/test_gpt_gradcmp.c
TESTS += tests/test_gpt tests/ckpt-hf.sh
# Loss scaling (loss_scale.c) against Megatron-LM's DynamicGradScaler, step by step.
check_PROGRAMS += tests/test_loss_scale
tests_test_loss_scale_SOURCES = tests/test_loss_scale.c tests/check.h
TESTS += tests/test_loss_scale
EXTRA_DIST += tests/ckpt-hf.sh
EXTRA_DIST += experiments/bench-exec.sh
TESTS += tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh tests/mpi-exec-llama.sh tests/run-errors.sh tests/mpi-run-errors.sh \
	tests/mpi-run-trace.sh tests/mpi-ckpt.sh tests/mpi-ckpt-llama.sh tests/mpi-zero.sh tests/mpi-zero23.sh tests/mpi-fail.sh tests/mpi-timeout.sh \
	tests/mpi-run-data.sh tests/mpi-memory.sh tests/mpi-cp.sh tests/mpi-sp.sh tests/mpi-moe.sh tests/mpi-trace-nesting.sh \
	tests/mpi-loss-scale.sh tests/mpi-mixed.sh tests/mpi-weights16.sh tests/mpi-staged.sh
EXTRA_DIST += tests/mpi-loss-scale.sh tests/mpi-mixed.sh tests/mpi-weights16.sh tests/mpi-staged.sh
# an MPI profiling shim (LD_PRELOAD) that refuses the staged backend's device buffers (tests/mpi-staged.sh)
check_LTLIBRARIES += tests/mpi_guard.la
tests_mpi_guard_la_SOURCES = tests/mpi_guard.c
tests_mpi_guard_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
EXTRA_DIST += tests/mpi-exec-lib.sh tests/mpi-exec-layouts.sh tests/mpi-exec-schedules.sh tests/mpi-exec-llama.sh \
	tests/run-errors.sh tests/mpi-run-errors.sh tests/mpi-run-trace.sh tests/mpi-memory.sh \
	tests/mpi-ckpt.sh tests/mpi-ckpt-llama.sh tests/st_edit.py tests/mpi-zero.sh tests/mpi-zero23.sh tests/mpi-fail.sh tests/mpi-timeout.sh \
	tests/mpi-run-data.sh tests/mpi-cp.sh tests/mpi-sp.sh tests/mpi-moe.sh tests/mpi-trace-nesting.sh \
	experiments/train-shakespeare/tinyshakespeare.txt experiments/train-shakespeare/README.md \
	experiments/train-shakespeare/run.sh experiments/train-shakespeare/plot.py
