/* The CPU kernels' threads: a loop's range split over the rank's cores
 * (mk_runtime_bind sets their number: the cores hwloc bound the rank to, 1
 * when ranks outnumber cores).  Threads are created per call and inherit
 * the rank's binding; callers pass a grain large enough (>= ~100 us of
 * work) that creating them costs little.  Every range is computed by the
 * same code as the serial loop, so the results do not depend on the
 * thread count. */
#include "config.h"
#include "exec/kernels_cpu.h"

#include <pthread.h>

static int n_threads = 1;

void mk_cpu_set_threads(int n) { n_threads = n < 1 ? 1 : n > MK_CPU_MAX_THREADS ? MK_CPU_MAX_THREADS : n; }

int mk_cpu_threads(void) { return n_threads; }

typedef struct {
    mk_cpu_range_fn fn;
    void *arg;
    size_t lo, hi;
} job_t;

static void *run_job(void *p)
{
    job_t *j = p;
    j->fn(j->arg, j->lo, j->hi);
    return NULL;
}

void mk_cpu_par(size_t n, size_t grain, mk_cpu_range_fn fn, void *arg)
{
    size_t k = (size_t)n_threads, most = n / (grain ? grain : 1);
    if (k > most) k = most;
    if (k <= 1) {
        if (n) fn(arg, 0, n);
        return;
    }
    job_t job[MK_CPU_MAX_THREADS];
    pthread_t th[MK_CPU_MAX_THREADS];
    int up[MK_CPU_MAX_THREADS];
    for (size_t i = 0; i < k; i++) job[i] = (job_t){fn, arg, n * i / k, n * (i + 1) / k};
    for (size_t i = 1; i < k; i++) up[i] = pthread_create(&th[i], NULL, run_job, &job[i]) == 0;
    run_job(&job[0]);
    for (size_t i = 1; i < k; i++) {
        if (up[i]) pthread_join(th[i], NULL);
        else run_job(&job[i]);  /* no thread: the range runs here */
    }
}
