/* The CPU kernels' threads: a loop's range split over the rank's cores.
 * The pool is the CPU backend's context (mk_backend_new("cpu") creates
 * it, mk_backend_free joins it); the executor sets its size to what
 * mk_runtime_bind returns (the cores hwloc bound the rank to, 1 when
 * ranks outnumber cores).  Its threads start at the first split call and
 * inherit the rank's binding; a NULL context runs every loop serially.  Between calls
 * a worker spins briefly (the next kernel usually follows within
 * microseconds), then sleeps on a condition variable, so an idle rank takes
 * no CPU from its neighbours.  Every range is computed by the same code as
 * the serial loop, so the results do not depend on the thread count. */
#include "config.h"
#include "merak/kernels_cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    size_t lo, hi;
} range_t;

typedef struct {
    struct mk_cpu_pool *pool;
    size_t me;
} seat_t;

/* One job at a time: `gen` counts posted jobs; every started worker
 * acknowledges each job (`pending`), running its range when it has one. */
struct mk_cpu_pool {
    int threads;  /* the kernels' thread count, workers + the caller */
    int gemm_dtype;       /* the GEMMs' operands: MK_DTYPE_FP32 (0), _BF16 or _FP16 (merak/model.h) */
    float *scr;           /* their rounded copies (mk_cpu_pool_scratch) */
    size_t scr_n;
    size_t gemm16_cap;    /* the most floats of copies one 16-bit GEMM panel takes (0: the default) */
    struct { const float *w; const uint16_t *h; size_t n; } view[MK_CPU_VIEWS16]; /* mk_cpu_pool_view16 */
    int n_view;
    pthread_mutex_t dispatch, mu;
    pthread_cond_t go, done;
    atomic_ulong gen;
    atomic_int pending;
    int started, quit;
    size_t k;
    mk_cpu_range_fn fn;
    void *arg;
    range_t r[MK_CPU_MAX_THREADS];
    seat_t seat[MK_CPU_MAX_THREADS];
    pthread_t th[MK_CPU_MAX_THREADS];
};

mk_cpu_pool_t *mk_cpu_pool_new(void)
{
    mk_cpu_pool_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = 1;
    pthread_mutex_init(&p->dispatch, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    return p;
}

void mk_cpu_pool_set_threads(mk_cpu_pool_t *p, int n)
{
    if (p) p->threads = n < 1 ? 1 : n > MK_CPU_MAX_THREADS ? MK_CPU_MAX_THREADS : n;
}

int mk_cpu_pool_threads(const mk_cpu_pool_t *p) { return p ? p->threads : 1; }

void mk_cpu_pool_set_gemm_dtype(mk_cpu_pool_t *p, int dtype)
{
    if (p) p->gemm_dtype = dtype;
}

int mk_cpu_pool_gemm_dtype(const mk_cpu_pool_t *p) { return p ? p->gemm_dtype : 0; }

void mk_cpu_pool_set_gemm16_cap(mk_cpu_pool_t *p, size_t floats)
{
    if (p) p->gemm16_cap = floats;
}

size_t mk_cpu_pool_gemm16_cap(const mk_cpu_pool_t *p)
{
    return p && p->gemm16_cap ? p->gemm16_cap : MK_CPU_GEMM16_CAP;
}

void mk_cpu_pool_view16(mk_cpu_pool_t *p, const float *w, const uint16_t *h, size_t n)
{
    if (!p) return;
    for (int i = 0; i < p->n_view; i++)
        if (p->view[i].w == w) { p->view[i] = p->view[--p->n_view]; break; }
    if (!h || !n || p->n_view == MK_CPU_VIEWS16) return;
    p->view[p->n_view].w = w, p->view[p->n_view].h = h, p->view[p->n_view++].n = n;
}

const uint16_t *mk_cpu_pool_view16_of(const mk_cpu_pool_t *p, const float *x, size_t extent)
{
    for (int i = 0; p && i < p->n_view; i++)
        if (x >= p->view[i].w && (size_t)(x - p->view[i].w) + extent <= p->view[i].n)
            return p->view[i].h + (x - p->view[i].w);
    return NULL;
}

size_t mk_cpu_pool_scratch_bytes(const mk_cpu_pool_t *p) { return p ? p->scr_n * sizeof(float) : 0; }

float *mk_cpu_pool_scratch(mk_cpu_pool_t *p, size_t n)
{
    if (!p) return NULL;
    if (n > p->scr_n) {
        float *v = realloc(p->scr, n * sizeof *v);
        if (!v) return NULL;
        p->scr = v, p->scr_n = n;
    }
    return p->scr;
}

static _Thread_local int in_pool;  /* a kernel run by a pool splits no further */

/* Polls before sleeping: ~10-50 us, the gap between consecutive kernels. */
#define SPINS 4096

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker(void *arg)
{
    seat_t *seat = arg;
    mk_cpu_pool_t *pool = seat->pool;
    size_t me = seat->me;
    unsigned long seen = 0;
    in_pool = 1;
    for (;;) {
        for (int i = 0; i < SPINS && atomic_load(&pool->gen) == seen; i++) relax();
        if (atomic_load(&pool->gen) == seen) {
            pthread_mutex_lock(&pool->mu);
            while (atomic_load(&pool->gen) == seen) pthread_cond_wait(&pool->go, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        seen = atomic_load(&pool->gen);
        if (pool->quit) return NULL;
        if (me < pool->k) pool->fn(pool->arg, pool->r[me].lo, pool->r[me].hi);
        if (atomic_fetch_sub(&pool->pending, 1) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

/* Workers 1 .. k-1 (worker 0 is the caller); returns how many exist. */
static size_t grow(mk_cpu_pool_t *pool, size_t k)
{
    while ((size_t)pool->started + 1 < k) {
        seat_t *seat = &pool->seat[pool->started + 1];
        *seat = (seat_t){pool, (size_t)pool->started + 1};
        if (pthread_create(&pool->th[pool->started + 1], NULL, worker, seat) != 0) break;
        pool->started++;
    }
    return (size_t)pool->started + 1;
}

static void run_pool(mk_cpu_pool_t *pool, size_t n, size_t k, mk_cpu_range_fn fn, void *arg)
{
    size_t have = grow(pool, k);
    pool->fn = fn, pool->arg = arg, pool->k = k < have ? k : have;
    for (size_t i = 0; i < k; i++) pool->r[i] = (range_t){n * i / k, n * (i + 1) / k};
    atomic_store(&pool->pending, pool->started);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add(&pool->gen, 1);
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    in_pool = 1;
    fn(arg, pool->r[0].lo, pool->r[0].hi);
    for (size_t i = pool->k; i < k; i++) fn(arg, pool->r[i].lo, pool->r[i].hi);  /* no thread for it */
    in_pool = 0;
    for (int i = 0; i < SPINS && atomic_load(&pool->pending) > 0; i++) relax();
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(&pool->pending) > 0) pthread_cond_wait(&pool->done, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}

void mk_cpu_par(void *ctx, size_t n, size_t grain, mk_cpu_range_fn fn, void *arg)
{
    mk_cpu_pool_t *pool = ctx;
    size_t k = (size_t)mk_cpu_pool_threads(pool), most = n / (grain ? grain : 1);
    if (k > most) k = most;
    /* one thread, a call from inside the pool, or another caller using it:
       the whole range here (the same result) */
    if (k <= 1 || in_pool || pthread_mutex_trylock(&pool->dispatch) != 0) {
        if (n) fn(arg, 0, n);
        return;
    }
    run_pool(pool, n, k, fn, arg);
    pthread_mutex_unlock(&pool->dispatch);
}

/* The workers leave at the next job they see (quit), and are joined. */
void mk_cpu_pool_free(mk_cpu_pool_t *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->quit = 1;
    atomic_fetch_add(&pool->gen, 1);
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i <= pool->started; i++) pthread_join(pool->th[i], NULL);
    pthread_mutex_destroy(&pool->dispatch);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->go);
    pthread_cond_destroy(&pool->done);
    free(pool->scr);
    free(pool);
}
