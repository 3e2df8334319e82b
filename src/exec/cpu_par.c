/* The CPU kernels' threads: a loop's range split over the rank's cores
 * (mk_runtime_bind sets their number: the cores hwloc bound the rank to, 1
 * when ranks outnumber cores).  The threads are a persistent pool created
 * at the first split call; they inherit the rank's binding.  Between calls
 * a worker spins briefly (the next kernel usually follows within
 * microseconds), then sleeps on a condition variable, so an idle rank takes
 * no CPU from its neighbours.  Every range is computed by the same code as
 * the serial loop, so the results do not depend on the thread count. */
#include "config.h"
#include "exec/kernels_cpu.h"

#include <pthread.h>
#include <stdatomic.h>

static int n_threads = 1;

void mk_cpu_set_threads(int n) { n_threads = n < 1 ? 1 : n > MK_CPU_MAX_THREADS ? MK_CPU_MAX_THREADS : n; }

int mk_cpu_threads(void) { return n_threads; }

typedef struct {
    size_t lo, hi;
} range_t;

/* One job at a time: `gen` counts posted jobs; every started worker
 * acknowledges each job (`pending`), running its range when it has one. */
static struct {
    pthread_mutex_t dispatch, mu;
    pthread_cond_t go, done;
    atomic_ulong gen;
    atomic_int pending;
    int started;
    size_t k;
    mk_cpu_range_fn fn;
    void *arg;
    range_t r[MK_CPU_MAX_THREADS];
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, NULL, NULL, {{0, 0}}};

static _Thread_local int in_pool;  /* a kernel run by the pool splits no further */

/* Polls before sleeping: ~10-50 us, the gap between consecutive kernels. */
#define SPINS 4096

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *p)
{
    size_t me = (size_t)p;
    unsigned long seen = 0;
    in_pool = 1;
    for (;;) {
        for (int i = 0; i < SPINS && atomic_load(&pool.gen) == seen; i++) relax();
        if (atomic_load(&pool.gen) == seen) {
            pthread_mutex_lock(&pool.mu);
            while (atomic_load(&pool.gen) == seen) pthread_cond_wait(&pool.go, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = atomic_load(&pool.gen);
        if (me < pool.k) pool.fn(pool.arg, pool.r[me].lo, pool.r[me].hi);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* Workers 1 .. k-1 (worker 0 is the caller); returns how many exist. */
static size_t grow(size_t k)
{
    while ((size_t)pool.started + 1 < k) {
        pthread_t th;
        if (pthread_create(&th, NULL, worker, (void *)(size_t)(pool.started + 1)) != 0) break;
        pthread_detach(th);
        pool.started++;
    }
    return (size_t)pool.started + 1;
}

static void run_pool(size_t n, size_t k, mk_cpu_range_fn fn, void *arg)
{
    size_t have = grow(k);
    pool.fn = fn, pool.arg = arg, pool.k = k < have ? k : have;
    for (size_t i = 0; i < k; i++) pool.r[i] = (range_t){n * i / k, n * (i + 1) / k};
    atomic_store(&pool.pending, pool.started);
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    in_pool = 1;
    fn(arg, pool.r[0].lo, pool.r[0].hi);
    for (size_t i = pool.k; i < k; i++) fn(arg, pool.r[i].lo, pool.r[i].hi);  /* no thread for it */
    in_pool = 0;
    for (int i = 0; i < SPINS && atomic_load(&pool.pending) > 0; i++) relax();
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

void mk_cpu_par(size_t n, size_t grain, mk_cpu_range_fn fn, void *arg)
{
    size_t k = (size_t)n_threads, most = n / (grain ? grain : 1);
    if (k > most) k = most;
    /* one thread, a call from inside the pool, or another caller using it:
       the whole range here (the same result) */
    if (k <= 1 || in_pool || pthread_mutex_trylock(&pool.dispatch) != 0) {
        if (n) fn(arg, 0, n);
        return;
    }
    run_pool(n, k, fn, arg);
    pthread_mutex_unlock(&pool.dispatch);
}
