/* CUDA backend entry points (C linkage; implemented in src/cuda/ (.cu files) and
 * built only when configure finds nvcc and cuBLAS: MK_HAVE_CUDA). */
#ifndef MERAK_CUDA_H
#define MERAK_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 when there is no GPU or no driver
 * (the runtime links everywhere and fails only here, at run time). */
int mk_cuda_device_count(void);
/* Name of device i into buf; returns 0 or -1. */
int mk_cuda_device_name(int i, char *buf, int n);

#ifdef __cplusplus
}
#endif
#endif
