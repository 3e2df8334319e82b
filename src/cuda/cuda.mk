# CUDA backend: .cu files compiled by nvcc (suffix rule in Makefile.am),
# only when configure found nvcc and cuBLAS.
noinst_HEADERS += include/merak/cuda.h
EXTRA_DIST += src/cuda/device.cu
if HAVE_CUDA
libmerak_a_SOURCES += src/cuda/device.cu
endif
