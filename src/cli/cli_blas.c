/* The BLAS kernels the cpu backend runs (issue 37).  Debian 12's OpenBLAS
 * (0.3.21, a DYNAMIC_ARCH build) picks its kernels by CPU model when it
 * loads, and does not know recent Xeons (family 6, model 207): it falls
 * back to its SSE3 "Prescott" kernels, sgemm at 40-50 GFLOP/s where its
 * SkylakeX kernels reach 195-200 on the same two cores (issue 37's
 * measurements), and every training step is ~3.8x slower without a word.
 * OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so when its own
 * choice is one of its pre-AVX families and the CPU has AVX2 or AVX-512,
 * merak executes itself again, before MPI starts, with the best family the
 * CPU supports set there.  A user's OPENBLAS_CORETYPE always wins;
 * MERAK_OPENBLAS_CHOICE remembers what OpenBLAS chose, for the report.
 *
 * Under mpiexec the same re-execution sets OPENBLAS_THREAD_TIMEOUT (where
 * the user has not): OpenBLAS starts its worker threads when it loads and
 * they spin (sched_yield) for their first 2^28 cycles, about 0.1 s, on
 * the cores the other ranks run on; merak never gives them work (run sets
 * OpenBLAS to one thread, its kernels have their own pool; the other
 * commands run no BLAS), so they sleep at once (2^4 cycles): two ranks of
 * `merak plan --model gpt-tiny` on two cores took 0.13 s, 0.05 s so.
 * Where OpenBLAS runs one thread (OPENBLAS_NUM_THREADS=1, as job scripts
 * and merak's tests set it) there are no workers, and no re-execution. */
#include "config.h"
#include "cli/cli.h"
#include "merak/common.h"
#include "merak/kernels_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS's SSE-era families (driver/others/dynamic.c's corename list):
   its fallback for a CPU it does not know */
static int pre_avx(const char *core)
{
    static const char *const old[] = {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Core2", "Penryn",
                                      "Dunnington", "Nehalem", "Atom", "Athlon", "Opteron", "Opteron_SSE3",
                                      "Barcelona", "Nano", "Bobcat", "Unknown", NULL};
    for (int i = 0; old[i]; i++)
        if (!strcasecmp(core, old[i])) return 1;
    return 0;
}

/* The best OpenBLAS family for this CPU's instruction sets (GCC's CPUID
   view), or NULL where nothing beats the SSE kernels */
static const char *best_core(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    if (__builtin_cpu_supports("avx")) return "Sandybridge";
    return NULL;
}

/* What OpenBLAS chose by itself (MK_TEST_BLAS_GENERIC=1: as if the SSE3
   fallback, so that tests reach the re-execution on any CPU) */
static const char *own_choice(void)
{
    long long v;
    if (mk_test_env("MK_TEST_BLAS_GENERIC", NULL, &v) && v) return "Prescott";
    return mk_cpu_blas_core();
}

/* Under valgrind (its preload in LD_PRELOAD) a new image would run outside
   it, and valgrind's CPUID hides AVX-512: the program stays as it is */
static int under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
}

/* Whether OpenBLAS starts no worker threads: its thread count, from
   OPENBLAS_NUM_THREADS, else GOTO_NUM_THREADS, else OMP_NUM_THREADS (its
   order), is 1; then none can spin and no re-execution is worth its cost
   (0.02-0.05 s of a second process image per rank) */
static int blas_single_thread(void)
{
    static const char *const vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v) == 1;
    }
    return 0;
}

int mk_cli_under_mpiexec(void)
{
    return getenv("PMI_RANK") || getenv("PMI_SIZE") || getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
}

void mk_cli_blas_select(char **argv)
{
    if (under_valgrind()) return;
    /* the user's settings, or ours after the re-execution, stay */
    const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : own_choice(), *best = core ? best_core() : NULL;
    int kernels = core && pre_avx(core) && best;
    int sleep = mk_cli_under_mpiexec() && !getenv("OPENBLAS_THREAD_TIMEOUT") && !blas_single_thread();
    if (!kernels && !sleep) return;
    if (kernels) {
        setenv("OPENBLAS_CORETYPE", best, 1);
        setenv("MERAK_OPENBLAS_CHOICE", core, 1);
        unsetenv("MK_TEST_BLAS_GENERIC");
    }
    if (sleep) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    execv("/proc/self/exe", argv);
    if (kernels)
        fprintf(stderr, "merak: warning: could not run again with OPENBLAS_CORETYPE=%s: OpenBLAS's %s kernels run\n",
                best, core);
    if (kernels) unsetenv("OPENBLAS_CORETYPE"), unsetenv("MERAK_OPENBLAS_CHOICE");
    if (sleep) unsetenv("OPENBLAS_THREAD_TIMEOUT");
}

void mk_cli_blas_describe(char *buf, size_t n)
{
    const char *own = getenv("MERAK_OPENBLAS_CHOICE"), *set = getenv("OPENBLAS_CORETYPE");
    const char *core = mk_cpu_blas_core();
    const char *sleep = getenv("OPENBLAS_THREAD_TIMEOUT");
    char idle[96] = "";
    if (sleep) snprintf(idle, sizeof idle, ", idle threads asleep after 2^%s cycles", sleep);
    if (own && set) snprintf(buf, n, "%s kernels (merak's choice: OpenBLAS chose %s)%s", core, own, idle);
    else if (set) snprintf(buf, n, "%s kernels (OPENBLAS_CORETYPE=%s)%s", core, set, idle);
    else snprintf(buf, n, "%s kernels (OpenBLAS's choice)%s", core, idle);
}
