/* The CPU backend: fills the backend table with the OpenBLAS/C kernels. */
#include "config.h"
#include "merak/backend.h"
#include "exec/kernels_cpu.h"
#ifdef MK_HAVE_CUDA
#include "merak/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>

static void *cpu_alloc(size_t bytes)
{

    /* 64-byte alignment for vector loads; calloc semantics (zeroed) */
    void *p = NULL;
    size_t n = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
    memset(p, 0, n ? n : 64);
    return p;
}

static void cpu_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void cpu_copy(void *d, const void *s, size_t bytes) { memmove(d, s, bytes); }

static const mk_backend_t mk_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = free,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .linear_fwd = mk_cpu_linear_fwd,
    .linear_bwd_in = mk_cpu_linear_bwd_in,
    .linear_bwd_w = mk_cpu_linear_bwd_w,
    .embed_fwd = mk_cpu_embed_fwd,
    .embed_bwd = mk_cpu_embed_bwd,
    .layernorm_fwd = mk_cpu_layernorm_fwd,
    .layernorm_bwd = mk_cpu_layernorm_bwd,
    .attention_fwd = mk_cpu_attention_fwd,
    .attention_bwd = mk_cpu_attention_bwd,
    .gelu_fwd = mk_cpu_gelu_fwd,
    .gelu_bwd = mk_cpu_gelu_bwd,
    .add = mk_cpu_add,
    .acc = mk_cpu_acc,
    .xent_max = mk_cpu_xent_max,
    .xent_exp = mk_cpu_xent_exp,
    .xent_loss = mk_cpu_xent_loss,
    .xent_bwd = mk_cpu_xent_bwd,
    .adamw = mk_cpu_adamw,
    .sumsq = mk_cpu_sumsq,
};

const mk_backend_t *mk_backend_cpu(void) { return &mk_cpu; }

/* NULL (no --backend): cuda when built with CUDA and a device is visible,
 * else cpu.  "cuda" without a device or without CUDA built in is an error. */
const mk_backend_t *mk_backend_get(const char *name)
{
#ifdef MK_HAVE_CUDA
    if (!name) return mk_cuda_device_count() > 0 ? mk_backend_cuda() : &mk_cpu;
#endif
    if (!name || !strcmp(name, "cpu")) return &mk_cpu;
    if (!strcmp(name, "cuda")) {
#ifdef MK_HAVE_CUDA
        if (mk_cuda_device_count() > 0) return mk_backend_cuda();
        mk_error_set("--backend cuda: no CUDA device is visible (use --backend cpu)");
#else
        mk_error_set("--backend cuda: merak was built without CUDA (configure --with-cuda, "
                     "or use --backend cpu)");
#endif
        return NULL;
    }
    mk_error_set("unknown backend '%s' (cpu or cuda)", name);
    return NULL;
}
