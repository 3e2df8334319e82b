# CUDA backend: a libtool module, merak_cuda.so in $(pkglibdir), that
# libmerak loads at run time (src/backend/backend_dl.c; interface
# include/merak/cuda_module.h), so that neither libmerak nor a program using it links
# cuBLAS.  Built only when configure found nvcc and cuBLAS; the .cu files go
# through nvcc (suffix rule in Makefile.am).  --fmad=false: no FMA
# contraction in our kernels, so each entry is computed with the same
# roundings as the CPU kernels (src/cpu/kernels_cpu.c); cuBLAS is unaffected.
NVCCFLAGS += --fmad=false
CUDA_SRCS = src/cuda/device.cu src/cuda/backend_cuda.cu src/cuda/linear.cu src/cuda/layernorm.cu \
	src/cuda/attention.cu src/cuda/attention_fused.cu src/cuda/elementwise.cu src/cuda/xent.cu src/cuda/adamw.cu \
	src/cuda/rmsnorm.cu src/cuda/rope.cu src/cuda/swiglu.cu src/cuda/half.cu
# nvcc's objects have no automatic header dependencies: name them
$(CUDA_SRCS:.cu=.lo): src/cuda/common.cuh include/merak/cuda_module.h include/merak/backend.h include/merak/rope.h include/merak/cuda.h \
	include/merak/common.h include/merak/model.h include/merak/half_rule.h config.h
noinst_HEADERS += include/merak/cuda.h
noinst_HEADERS += src/cuda/common.cuh
EXTRA_DIST += $(CUDA_SRCS) src/cuda/module.c tests/gpu/check.sh tests/gpu/README.md
if HAVE_CUDA
pkglib_LTLIBRARIES = src/cuda/merak_cuda.la
src_cuda_merak_cuda_la_SOURCES = $(CUDA_SRCS) src/cuda/module.c
src_cuda_merak_cuda_la_LIBADD = $(CUDA_LIBS)
# Only the entry point is exported: the module's mk_cuda_* and error
# functions bind inside it, never to libmerak's of the same names; -z defs:
# the module needs nothing of the program that loads it.
src_cuda_merak_cuda_la_LDFLAGS = -module -avoid-version -shared \
	-export-symbols-regex '^mk_cuda_module_entry$$' -Wl,-z,defs
endif

# Backend-vs-CPU kernel tests: built everywhere; exit 77 (SKIP) without a
# CUDA build or without a visible device.
check_PROGRAMS += tests/test_backend_cuda
tests_test_backend_cuda_SOURCES = tests/test_backend_cuda.c tests/check.h
TESTS += tests/test_backend_cuda
# `merak run --backend cuda`: exit 2 and one line without a GPU; equal to
# the CPU losses with one.
TESTS += tests/cuda-run.sh tests/cuda-module.sh
EXTRA_DIST += tests/cuda-run.sh tests/cuda-module.sh
