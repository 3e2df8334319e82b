/* The constructor of every backend, by name (src/cpu/ the CPU table,
 * src/backend/backend_dl.c the CUDA module's), and their one destructor. */
#include "config.h"
#include "merak/backend.h"
#include "merak/exec.h"
#include "merak/cuda.h"
#include "merak/kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

/* NULL (no --backend): cuda when its module loads and a device is visible,
 * else cpu.  "cuda" without either is an error saying which is missing. */
mk_backend_t *mk_backend_new(const char *name)
{
    if (!name) return mk_cuda_device_count() > 0 ? mk_backend_cuda_new() : mk_backend_cpu_new();
    if (!strcmp(name, "cpu")) return mk_backend_cpu_new();
    if (!strcmp(name, "cuda")) {
        if (mk_cuda_device_count() > 0) return mk_backend_cuda_new();
        const char *why = mk_cuda_unavailable();
        mk_error_set("--backend cuda: %s; use --backend cpu", why ? why : "no CUDA device is visible");
        return NULL;
    }
    mk_error_set("unknown backend '%s' (cpu or cuda)", name);
    return NULL;
}

void mk_backend_free(mk_backend_t *be)
{
    if (!be) return;
    if (be->destroy) be->destroy(be->ctx);
    free(be);
}

const char *mk_backend_name(const mk_backend_t *be) { return be ? be->name : "none"; }
