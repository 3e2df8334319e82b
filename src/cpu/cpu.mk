# cpu module: the CPU backend: its table (backend_cpu.c), the OpenBLAS/C
# kernels of the dense, Llama and MoE layers, the linears' GEMMs (gemm_cpu.c:
# split sgemm, 16-bit GEMMs; gemm_dnnl.c: oneDNN), and the thread pool that is
# its context (cpu_par.c).  Each kernel has a double-precision reference in
# tests/test_kernels.c.
libmerak_la_SOURCES += src/cpu/backend_cpu.c src/cpu/kernels_cpu.c src/cpu/gemm_cpu.c src/cpu/gemm_dnnl.c src/cpu/cpu_par.c src/cpu/kernels_llama_cpu.c \
	src/cpu/kernels_moe_cpu.c src/cpu/kernels_attn_cpu.c \
	src/cpu/kernels_attn16_cpu.c
noinst_HEADERS += include/merak/kernels_cpu.h
check_PROGRAMS += tests/test_kernels tests/test_kernels_par
tests_test_kernels_SOURCES = tests/test_kernels.c tests/check.h
tests_test_kernels_par_SOURCES = tests/test_kernels_par.c tests/check.h
TESTS += tests/test_kernels tests/test_kernels_par
