/* CUDA backend entry points (C linkage).  libmerak always provides them and
 * forwards to the CUDA module (merak_cuda.so in $(pkglibdir), built from
 * src/cuda/ when configure finds nvcc and cuBLAS), loaded on the first call
 * once the CUDA driver reports a device; without driver, device or module
 * they behave as on a machine without a GPU.  See src/cuda/README.md "The CUDA
 * backend" for the module's search order, the math modes and the status. */
#ifndef MERAK_CUDA_H
#define MERAK_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mk_backend;

/* Number of usable CUDA devices; 0 when there is no GPU, no driver or no
 * loadable CUDA module. */
int mk_cuda_device_count(void);
/* Name of device i into buf; returns 0 or -1. */
int mk_cuda_device_name(int i, char *buf, int n);

/* A new CUDA backend table (include/merak/backend.h) with its own context
 * (mk_backend_t.ctx), freed by mk_backend_free.  Creating it touches no
 * device; the context's streams and cuBLAS handle are made on first use,
 * on the device chosen by the table's bind entry or else device 0.  Math
 * mode of the GEMMs from MK_CUDA_MATH = fp32 (default) | tf32 | bf16, read
 * at context creation.  Host staging for MPI (no CUDA-aware MPI) goes
 * through the table's device entries (is_device, to_host, to_device, sync). */
struct mk_backend *mk_backend_cuda_new(void);  /* NULL (mk_error_set): bad MK_CUDA_MATH */
/* "fp32", "tf32" or "bf16": the GEMM math mode of be (a CUDA table) in
 * effect, or to be; "invalid" for a bad MK_CUDA_MATH. */
const char *mk_cuda_math_name(const struct mk_backend *be);
/* NULL once the CUDA module is loaded, else the reason it is not (no
 * driver, no device, module missing or unloadable, built without CUDA):
 * for `merak version` and the --backend cuda error. */
const char *mk_cuda_unavailable(void);
/* The loaded module's file, or NULL. */
const char *mk_cuda_module_path(void);

#ifdef __cplusplus
}
#endif
#endif
