/* The interface between libmerak and the CUDA backend module (merak_cuda.so,
 * a libtool module built from src/cuda/ and linked against cuBLAS and the
 * CUDA runtime).  libmerak does not link CUDA: its loader
 * (src/backend/backend_dl.c) dlopens the module on first use and calls its one
 * exported symbol, MK_CUDA_MODULE_ENTRY.  The module links nothing of
 * libmerak either (a program may hold libmerak statically, unexported), so
 * the loader hands it the error functions it needs.  Not a public header. */
#ifndef MERAK_CUDA_MODULE_H
#define MERAK_CUDA_MODULE_H

#ifdef __cplusplus
extern "C" {
#endif

struct mk_backend;

/* Raised whenever either table below or the backend table (merak/backend.h)
 * changes: a module left installed by another build is refused instead of
 * called through a wrong layout.  2: the backend table's set_threads; 3:
 * its column gathers (cols_gather, cols_scatter) and DeepSeek-V3's
 * router (moe_route_sig, moe_route_sig_bwd); 4: the fused attention; 5:
 * set_gemm_dtype, scratch_bytes (issue 37, which did not raise it) and
 * round16; 6: attention16_fwd/bwd (16-bit probabilities); 7: moe_rowdot
 * gone (the MoE layer weighs the activation), linear_bwd_w takes a NULL
 * weight gradient (a split backward's bias gradients, in B_IN); 8:
 * host_alloc, host_free (pinned staging buffers). */
#define MK_CUDA_MODULE_ABI 8
#define MK_CUDA_MODULE_ENTRY "mk_cuda_module_entry"

typedef struct mk_cuda_host {
    int abi;
    int (*error_set)(const char *fmt, ...);
    const char *(*error_last)(void);
} mk_cuda_host_t;

/* The entry points of include/merak/cuda.h, as the module implements them. */
typedef struct mk_cuda_module {
    int abi;
    int (*device_count)(void);
    int (*device_name)(int i, char *buf, int n);
    struct mk_backend *(*backend_new)(void);
    const char *(*math_name)(const struct mk_backend *be);
} mk_cuda_module_t;

typedef const mk_cuda_module_t *(*mk_cuda_module_entry_fn)(const mk_cuda_host_t *host);
const mk_cuda_module_t *mk_cuda_module_entry(const mk_cuda_host_t *host);

#ifdef __cplusplus
}
#endif
#endif
