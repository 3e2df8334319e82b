/* The CUDA module's entry point (include/merak/cuda_module.h) and its error functions:
 * the .cu files call mk_error_set/mk_error_last as libmerak code does; here
 * they forward to the host's, so the message lands in the program's one
 * error slot.  The module exports only mk_cuda_module_entry (cuda.mk), so
 * these definitions and the module's mk_cuda_* never interpose on
 * libmerak's symbols of the same names, nor those on them. */
#include "merak/cuda_module.h"
#include "merak/common.h"
#include "merak/cuda.h"

#include <stdarg.h>
#include <stdio.h>

static const mk_cuda_host_t *host;

int mk_error_set(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host->error_set("%s", msg);
}

const char *mk_error_last(void) { return host->error_last(); }

static const mk_cuda_module_t table = {
    .abi = MK_CUDA_MODULE_ABI,
    .device_count = mk_cuda_device_count,
    .device_name = mk_cuda_device_name,
    .backend_new = mk_backend_cuda_new,
    .math_name = mk_cuda_math_name,
};

/* NULL for a host of another ABI (the loader then reports the mismatch). */
const mk_cuda_module_t *mk_cuda_module_entry(const mk_cuda_host_t *h)
{
    if (!h || h->abi != MK_CUDA_MODULE_ABI) return NULL;
    host = h;
    return &table;
}
