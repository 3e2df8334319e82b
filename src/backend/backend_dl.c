/* The CUDA backend as a separately loaded module (merak_cuda.so, see
 * include/merak/cuda_module.h): libmerak links neither cuBLAS nor the CUDA runtime,
 * whose libraries cost ~220 MB of resident memory once mapped, so the
 * planner, the simulator and the CPU backend never pay for them.  The
 * include/merak/cuda.h entry points load the module the first time any of
 * them is called, and only after the CUDA driver (libcuda.so.1, small, and
 * needed by any device anyway) reports a device: a machine without a GPU
 * never maps cuBLAS.  Without the driver, a device or a loadable module the
 * calls behave as on a machine without a GPU (0 devices), and
 * mk_cuda_unavailable says why. */
#include "config.h"
#include "merak/cuda_module.h"
#include "merak/common.h"
#include "merak/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE_FILE "merak_cuda.so"

static const mk_cuda_module_t *mod;
static char why[768], path[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Devices the driver reports; 0 with the reason in why.  MERAK_CUDA_DRIVER
 * names another driver library (tests stand in a fake one). */
static int driver_devices(void)
{
    const char *lib = getenv("MERAK_CUDA_DRIVER");
    void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "no CUDA device is visible; no CUDA driver: %s", dlerror());
        return 0;
    }
    /* the driver stays loaded: the CUDA runtime uses it in turn */
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0, rc = -1;
    if (!init || !count) {
        snprintf(why, sizeof why, "no CUDA device is visible (the driver lacks cuInit)");
        return 0;
    }
    if ((rc = init(0)) != 0 || (rc = count(&n)) != 0 || n < 1) {
        snprintf(why, sizeof why, "no CUDA device is visible%s", rc ? " (cuInit failed)" : "");
        return 0;
    }
    return n;
}

/* Whether path lies inside the build tree (both resolved). */
static int in_tree(const char *p)
{
    char real[4096], tree[4096];
    if (!realpath(p, real) || !realpath(MK_BUILDDIR, tree)) return 0;
    size_t n = strlen(tree);
    return strncmp(real, tree, n) == 0 && real[n] == '/';
}

/* This code runs from the build tree: the program (the uninstalled merak,
 * the tests) or the libmerak it was loaded from.  An installed merak must
 * not take a build tree's module, nor a build tree's merak a stale
 * installed one (the interface check does not catch a changed kernel). */
static int from_build_tree(void)
{
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0 && (exe[k] = '\0', in_tree(exe))) return 1;
    Dl_info info;
    return dladdr((void *)mk_cuda_unavailable, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
           in_tree(info.dli_fname);
}

/* The module's file: $MERAK_CUDA_MODULE alone when set (an explicit choice
 * is reported, never replaced); else, run from the build tree, the build
 * tree's module, then the installed one; else the installed one in
 * $(pkglibdir) alone.  0, or -1 with why set when none exists. */
static int find_module(void)
{
    const char *env = getenv("MERAK_CUDA_MODULE");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
        return 0;
    }
    const char *dirs[] = {MK_BUILDDIR "/src/cuda/.libs", MK_PKGLIBDIR};
    int first = from_build_tree() ? 0 : 1;
    for (int i = first; i < 2; i++) {
        snprintf(path, sizeof path, "%s/" MODULE_FILE, dirs[i]);
        if (access(path, F_OK) == 0) return 0;
    }
    if (first) snprintf(why, sizeof why, "the CUDA module " MODULE_FILE " is not installed (looked in %s;"
                        " MERAK_CUDA_MODULE names another)", dirs[1]);
    else snprintf(why, sizeof why, "the CUDA module " MODULE_FILE " is not built or installed (looked in %s and %s;"
                  " MERAK_CUDA_MODULE names another)", dirs[0], dirs[1]);
    path[0] = '\0';
    return -1;
}

static const mk_cuda_host_t host = {MK_CUDA_MODULE_ABI, mk_error_set, mk_error_last};

/* Runs once: the driver, then the module and its entry point.  The module
 * is never closed: backend tables point into it. */
static void load(void)
{
#ifndef MK_HAVE_CUDA
    snprintf(why, sizeof why, "merak was built without CUDA (configure --with-cuda)");
    return;
#endif
    if (driver_devices() < 1 || find_module() < 0) return;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "the CUDA module could not be loaded: %s", dlerror());
        return;
    }
    mk_cuda_module_entry_fn entry;
    *(void **)&entry = dlsym(h, MK_CUDA_MODULE_ENTRY);  /* POSIX: object to function pointer */
    const mk_cuda_module_t *m = entry ? entry(&host) : NULL;
    if (!m || m->abi != MK_CUDA_MODULE_ABI) {
        snprintf(why, sizeof why, "the CUDA module %s is of another build (no " MK_CUDA_MODULE_ENTRY
                 " for interface %d): reinstall merak", path, MK_CUDA_MODULE_ABI);
        dlclose(h);
        return;
    }
    mod = m;
}

static const mk_cuda_module_t *loaded(void)
{
    pthread_once(&once, load);
    return mod;
}

const char *mk_cuda_unavailable(void) { return loaded() ? NULL : why; }
const char *mk_cuda_module_path(void) { return loaded() ? path : NULL; }

int mk_cuda_device_count(void) { return loaded() ? mod->device_count() : 0; }

int mk_cuda_device_name(int i, char *buf, int n)
{
    if (loaded()) return mod->device_name(i, buf, n);
    return mk_error_set("%s", why);
}

struct mk_backend *mk_backend_cuda_new(void)
{
    if (loaded()) return mod->backend_new();
    mk_error_set("%s", why);
    return NULL;
}

/* be can only be a CUDA table when the module is loaded */
const char *mk_cuda_math_name(const struct mk_backend *be) { return loaded() ? mod->math_name(be) : "invalid"; }
