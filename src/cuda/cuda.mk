# CUDA backend: .cu files compiled by nvcc (suffix rule in Makefile.am),
# only when configure found nvcc and cuBLAS.  --fmad=false: no FMA
# contraction in our kernels, so each entry is computed with the same
# roundings as the CPU kernels (src/exec/kernels_cpu.c); cuBLAS is unaffected.
NVCCFLAGS += --fmad=false
CUDA_SRCS = src/cuda/device.cu src/cuda/backend_cuda.cu src/cuda/linear.cu src/cuda/layernorm.cu \
	src/cuda/attention.cu src/cuda/elementwise.cu src/cuda/xent.cu src/cuda/adamw.cu \
	src/cuda/rmsnorm.cu src/cuda/rope.cu src/cuda/swiglu.cu
merakinclude_HEADERS += include/merak/cuda.h
noinst_HEADERS += src/cuda/common.cuh
EXTRA_DIST += $(CUDA_SRCS) tests/gpu/check.sh tests/gpu/README.md
if HAVE_CUDA
libmerak_la_SOURCES += $(CUDA_SRCS)
endif

# Backend-vs-CPU kernel tests: built everywhere; exit 77 (SKIP) without a
# CUDA build or without a visible device.
check_PROGRAMS += tests/test_backend_cuda
tests_test_backend_cuda_SOURCES = tests/test_backend_cuda.c tests/check.h
TESTS += tests/test_backend_cuda
# `merak run --backend cuda`: exit 2 and one line without a GPU; equal to
# the CPU losses with one.
TESTS += tests/cuda-run.sh
EXTRA_DIST += tests/cuda-run.sh
