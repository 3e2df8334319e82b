/* CUDA backend entry points (C linkage; implemented in src/cuda/ (.cu files) and
 * built only when configure finds nvcc and cuBLAS: MK_HAVE_CUDA).  See
 * README.md "The CUDA backend" for the math modes and the status of this backend. */
#ifndef MERAK_CUDA_H
#define MERAK_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mk_backend;

/* Number of usable CUDA devices; 0 when there is no GPU or no driver
 * (the runtime links everywhere and fails only here, at run time). */
int mk_cuda_device_count(void);
/* Name of device i into buf; returns 0 or -1. */
int mk_cuda_device_name(int i, char *buf, int n);

/* The CUDA backend table (include/merak/backend.h).  Creating it touches no
 * device; the context (streams, cuBLAS handle) is made on first use, on the
 * device chosen by mk_cuda_bind() or else device 0.  Math mode of the GEMMs
 * from MK_CUDA_MATH = fp32 (default) | tf32 | bf16, read at context creation. */
const struct mk_backend *mk_backend_cuda(void);  /* NULL (mk_error_set): bad MK_CUDA_MATH */
/* Nonzero once mk_backend_cuda() has been handed out (the run uses the GPU). */
int mk_cuda_active(void);
/* One GPU per rank: device local_rank mod device count, where local_rank is
 * the rank within the node (MPI_COMM_TYPE_SHARED).  Call before the first
 * allocation.  Returns the device, or -1 with no device. */
int mk_cuda_bind(int local_rank, int local_size);
/* "fp32", "tf32" or "bf16": the GEMM math mode in effect (or to be;
 * "invalid" for a bad MK_CUDA_MATH). */
const char *mk_cuda_math_name(void);

/* Host staging for MPI (no CUDA-aware MPI): */
/* nonzero when p is device memory (cudaMalloc'd; not managed, not host) */
int mk_cuda_is_device(const void *p);
/* host <- dev after all compute work queued so far (copy on the staging
 * stream, ordered by an event); returns when host holds the data */
void mk_cuda_stage_d2h(void *host, const void *dev, size_t bytes);
/* dev <- host on the staging stream; compute work queued after this call
 * waits for it (event); host may be reused when this returns */
void mk_cuda_stage_h2d(void *dev, const void *host, size_t bytes);
/* wait for all queued compute work */
void mk_cuda_sync(void);

#ifdef __cplusplus
}
#endif
#endif
