/* The planner over MPI ranks (merak/run.h), what `merak plan` runs under
 * mpiexec and any program linking libmerak can call.
 *
 * The main search: each rank searches its share of the (layout,
 * micro-batch, schedule) triples (planner_gen.c) and prunes at the K-th best step time of all ranks,
 * which they exchange while they search: one MPI_Iallreduce at a time,
 * posted with the rank's K best so far and tested between candidates, its
 * user op merging two sorted lists of K.  A round costs one allreduce of
 * K + 1 doubles (latency alpha log2 R); a rank posts the next one only when
 * the last completed, so the exchange never holds a rank up.  A rank whose
 * queue is empty goes on taking part (politely: MPI_Test and a 100 us nap)
 * until a round reports every rank done.  Then the top-K lists go to rank
 * 0 (MPI_Gatherv), which merges them.
 *
 * The alternative searches are independent: job j runs on rank j % R,
 * each rank's jobs on threads over its cores, and the results are
 * gathered on rank 0. */
#include "config.h"
#include "merak/common.h"
#include "merak/run.h"

#include <hwloc.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* threads for the alternative searches: at most this many per rank */
#define MK_PAR_MAX_THREADS 256

struct mk_planner_share {
    int top;
    MPI_Comm comm;
    MPI_Datatype t;   /* top + 1 doubles */
    MPI_Op op;
    MPI_Request req;  /* MPI_REQUEST_NULL: no round posted */
    double *send, *recv; /* [0, top) K best ascending, +inf past the known; [top] ranks not done */
    int fail_once;    /* MK_TEST_PLAN_FAIL */
};

/* The user op: the K smallest of two sorted lists of K, and the sum of
 * the ranks not done.  Commutative and associative. */
static void merge_best(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int bytes;
    MPI_Type_size(*dt, &bytes);
    int k = bytes / (int)sizeof(double) - 1;
    double *a = in, *b = inout, m[MK_MAX_TOP];
    for (int l = 0; l < *len; l++, a += k + 1, b += k + 1) {
        for (int o = 0, i = 0, j = 0; o < k; o++) m[o] = j >= k || (i < k && a[i] <= b[j]) ? a[i++] : b[j++];
        memcpy(b, m, (size_t)k * sizeof *m);
        b[k] += a[k];
    }
}

/* The communicator a void * names (NULL: MPI_COMM_WORLD). */
static MPI_Comm comm_of(void *mpi_comm) { return mpi_comm ? *(MPI_Comm *)mpi_comm : MPI_COMM_WORLD; }

mk_planner_share_t *mk_planner_share_new(int top, void *mpi_comm)
{
    MPI_Comm comm = comm_of(mpi_comm);
    mk_planner_share_t *s = calloc(1, sizeof *s);
    if (!s || top < 1 || top > MK_MAX_TOP) return free(s), mk_error_set("out of memory"), NULL;
    s->top = top, s->comm = comm;
    s->req = MPI_REQUEST_NULL;
    s->send = malloc(2 * (size_t)(top + 1) * sizeof *s->send);
    if (!s->send) return free(s), mk_error_set("out of memory"), NULL;
    s->recv = s->send + top + 1;
    MPI_Type_contiguous(top + 1, MPI_DOUBLE, &s->t);
    MPI_Type_commit(&s->t);
    MPI_Op_create(merge_best, 1, &s->op);
    /* MK_TEST_PLAN_FAIL=RANK (tests/mpi-plan.sh): that rank's first
       exchange reports an error, so its search fails midway; the planner
       must still take part in the last exchange, and every rank stop */
    long long f;
    int rank;
    MPI_Comm_rank(comm, &rank);
    s->fail_once = mk_test_env("MK_TEST_PLAN_FAIL", NULL, &f) && f == rank;
    return s;
}

void mk_planner_share_free(mk_planner_share_t *s)
{
    if (!s) return;
    if (s->req != MPI_REQUEST_NULL) MPI_Wait(&s->req, MPI_STATUS_IGNORE);
    MPI_Op_free(&s->op);
    MPI_Type_free(&s->t);
    free(s->send);
    free(s);
}

int mk_planner_share(void *ctx, const double *mine, int n, int done, double *all)
{
    mk_planner_share_t *s = ctx;
    MPI_Comm comm = s->comm;
    if (s->fail_once && !done) return s->fail_once = 0, mk_error_set("MK_TEST_PLAN_FAIL: this rank's search fails");
    if (s->req == MPI_REQUEST_NULL) {
        for (int i = 0; i < s->top; i++) s->send[i] = i < n ? mine[i] : INFINITY;
        s->send[s->top] = done ? 0 : 1;
        if (MPI_Iallreduce(s->send, s->recv, 1, s->t, s->op, comm, &s->req) != MPI_SUCCESS)
            return mk_error_set("sharing the search's best plans: MPI_Iallreduce failed");
    }
    for (;;) {
        int flag = 0;
        if (MPI_Test(&s->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return mk_error_set("sharing the search's best plans: MPI_Test failed");
        if (flag) break;
        if (!done) return 0;
        struct timespec ts = {0, 100000}; /* nothing left to search: leave the core to others */
        nanosleep(&ts, NULL);
    }
    memcpy(all, s->recv, (size_t)s->top * sizeof *all);
    return s->recv[s->top] == 0 ? 2 : 1;
}

/* The user op of merge_closest: the (shortfall, candidate index) pair
 * that is least, shortfall first. */
static void least_closest(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    double *a = in, *b = inout;
    for (int l = 0; l < *len; l++, a += 2, b += 2)
        if (a[0] < b[0] || (a[0] == b[0] && a[1] < b[1])) b[0] = a[0], b[1] = a[1];
}

int mk_planner_mpi_failed(int failed, char *err, size_t n, void *mpi_comm)
{
    MPI_Comm comm = comm_of(mpi_comm);
    int me, who, mine;
    MPI_Comm_rank(comm, &me);
    mine = failed ? me : INT_MAX;
    MPI_Allreduce(&mine, &who, 1, MPI_INT, MPI_MIN, comm);
    if (who == INT_MAX) return 0;
    char msg[512] = "";
    if (me == who) mk_strlcpy(msg, mk_error_last(), sizeof msg);
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, who, comm);
    if (who) snprintf(err, n, "rank %d: %s", who, msg);
    else mk_strlcpy(err, msg, n);
    return 1;
}

/* Rank r's items among n jobs dealt round-robin over size ranks. */
static int jobs_of(int n, int r, int size) { return r < n ? (n - r + size - 1) / size : 0; }

/* Rank 0 receives each rank's `mine` items of `item` bytes (counts and
 * displacements in items: no int overflow in bytes); `all` on rank 0. */
static int gather_items(const void *mine, int k, void *all, size_t item, const int *counts, int size, MPI_Comm comm)
{
    MPI_Datatype t;
    int *displs = calloc((size_t)size, sizeof *displs), rank, rc = 0;
    MPI_Comm_rank(comm, &rank);
    for (int r = 1; displs && r < size; r++) displs[r] = displs[r - 1] + counts[r - 1];
    MPI_Type_contiguous((int)item, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    if (MPI_Gatherv(mine, k, t, all, counts, displs ? displs : counts, t, 0, comm) != MPI_SUCCESS)
        rc = mk_error_set("gathering the ranks' results failed");
    MPI_Type_free(&t);
    free(displs);
    return !displs ? mk_error_set("out of memory") : rc;
}

/* The no-fit report's candidate: the least shortfall of all ranks', ties
 * to the lower candidate index (as one rank picks it), sent to rank 0. */
static void merge_closest(mk_planner_result_t *r, int rank, MPI_Comm comm)
{
    struct {
        double shortfall, index;
    } mine = {r->have_closest ? r->closest_shortfall : INFINITY, (double)r->closest_index}, best;
    MPI_Datatype t;
    MPI_Op op;
    MPI_Type_contiguous(2, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    MPI_Op_create(least_closest, 1, &op);
    MPI_Allreduce(&mine, &best, 1, t, op, comm);
    MPI_Op_free(&op);
    MPI_Type_free(&t);
    int holder = r->have_closest && mine.shortfall == best.shortfall && mine.index == best.index ? rank : INT_MAX, who;
    MPI_Allreduce(&holder, &who, 1, MPI_INT, MPI_MIN, comm);
    if (who == INT_MAX || who == 0) return; /* none, or rank 0's own */
    if (rank == who) {
        MPI_Send(&r->closest, (int)sizeof r->closest, MPI_BYTE, 0, 0, comm);
        MPI_Send(&r->closest_mem, (int)sizeof r->closest_mem, MPI_BYTE, 0, 1, comm);
        MPI_Send(&r->closest_stage, 1, MPI_INT, 0, 2, comm);
    } else if (rank == 0) {
        MPI_Recv(&r->closest, (int)sizeof r->closest, MPI_BYTE, who, 0, comm, MPI_STATUS_IGNORE);
        MPI_Recv(&r->closest_mem, (int)sizeof r->closest_mem, MPI_BYTE, who, 1, comm, MPI_STATUS_IGNORE);
        MPI_Recv(&r->closest_stage, 1, MPI_INT, who, 2, comm, MPI_STATUS_IGNORE);
        r->have_closest = 1, r->closest_shortfall = best.shortfall, r->closest_index = (long)best.index;
    }
}

int mk_planner_mpi_merge(mk_planner_result_t *r, int top, void *mpi_comm)
{
    MPI_Comm comm = comm_of(mpi_comm);
    int rank, size, total = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *counts = calloc((size_t)size, sizeof *counts);
    MPI_Gather(&r->n, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    for (int i = 0; counts && rank == 0 && i < size; i++) total += counts[i];
    mk_planner_entry_t *all = rank == 0 ? malloc((size_t)(total > 0 ? total : 1) * sizeof *all) : NULL;
    int rc = gather_items(r->best, r->n, all, sizeof *all, counts, size, comm);
    long c[7] = {r->simulated, r->pruned_bound, r->candidates, r->pruned_memory, r->layouts, r->settled, r->duplicates};
    long sum[7];
    MPI_Reduce(c, sum, 7, MPI_LONG, MPI_SUM, 0, comm);
    if (rank == 0 && rc == 0) {
        r->n = 0;
        mk_planner_merge(r, all, total, top);
        r->simulated = sum[0], r->pruned_bound = sum[1], r->candidates = sum[2];
        r->pruned_memory = sum[3], r->layouts = sum[4], r->settled = sum[5], r->duplicates = sum[6];
    }
    free(all), free(counts);
    merge_closest(r, rank, comm);
    return rc;
}

int mk_planner_mpi_cores(void *mpi_comm)
{
    hwloc_topology_t topo;
    int cores = 1, machine = 1, init = 0;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            hwloc_bitmap_t set = hwloc_bitmap_alloc();
            machine = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
            cores = set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0
                        ? hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE)
                        : machine;
            hwloc_bitmap_free(set);
        }
        hwloc_topology_destroy(topo);
    }
    MPI_Initialized(&init);
    if (init) { /* every rank of the node sees the whole machine: a share each (collective) */
        MPI_Comm node, comm = comm_of(mpi_comm);
        int lsize = 1;
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &lsize);
        MPI_Comm_free(&node);
        if (cores >= machine) cores /= lsize;
    }
    return cores < 1 ? 1 : cores > MK_PAR_MAX_THREADS ? MK_PAR_MAX_THREADS : cores;
}

typedef struct {
    void (*fn)(void *ctx, int j, void *out);
    void *ctx;
    char *out;
    size_t item;
    int n, rank, size;
    atomic_int next; /* this rank's next job, counted in its own jobs */
} mk_jobs_t;

static void *job_worker(void *p)
{
    mk_jobs_t *J = p;
    for (;;) {
        int j = J->rank + atomic_fetch_add(&J->next, 1) * J->size;
        if (j >= J->n) return NULL;
        J->fn(J->ctx, j, J->out + (size_t)j * J->item);
    }
}

/* This rank's jobs over its threads (the caller is one of them). */
static void run_mine(mk_jobs_t *J, int threads)
{
    pthread_t th[MK_PAR_MAX_THREADS];
    int started = 0;
    while (started + 1 < threads && pthread_create(&th[started], NULL, job_worker, J) == 0) started++;
    job_worker(J);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

int mk_planner_mpi_jobs(int n, void (*fn)(void *ctx, int j, void *out), void *ctx, void *out, size_t item,
                        void *mpi_comm)
{
    MPI_Comm comm = comm_of(mpi_comm);
    int init = 0, rank = 0, size = 1;
    MPI_Initialized(&init);
    if (init) MPI_Comm_rank(comm, &rank), MPI_Comm_size(comm, &size);
    mk_jobs_t J = {fn, ctx, out, item, n, rank, size, 0};
    int cores = mk_planner_mpi_cores(mpi_comm), mine = jobs_of(n, rank, size);
    run_mine(&J, cores < mine ? cores : mine);
    if (size == 1) return 0;
    int *counts = calloc((size_t)size, sizeof *counts);
    char *pack = malloc((size_t)(mine > 0 ? mine : 1) * item), *all = NULL;
    int rc = counts && pack ? 0 : mk_error_set("out of memory");
    for (int r = 0; counts && r < size; r++) counts[r] = jobs_of(n, r, size);
    for (int k = 0; pack && k < mine; k++) memcpy(pack + (size_t)k * item, J.out + (size_t)(rank + k * size) * item, item);
    if (rank == 0 && !(all = malloc((size_t)(n > 0 ? n : 1) * item))) rc = mk_error_set("out of memory");
    int ok = rc == 0, all_ok; /* every rank gathers, or none */
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
    if (all_ok) rc = gather_items(pack, mine, all, item, counts, size, comm);
    else if (rc == 0) rc = mk_error_set("out of memory on another rank");
    /* rank r's k-th item is job r + k size */
    for (int r = 0, at = 0; rc == 0 && rank == 0 && r < size; r++)
        for (int k = 0; k < counts[r]; k++, at++) memcpy(J.out + (size_t)(r + k * size) * item, all + (size_t)at * item, item);
    free(counts), free(pack), free(all);
    return rc;
}

int mk_planner_search_mpi(const mk_model_config_t *m, const mk_cluster_t *cl, mk_planner_opts_t *o, void *mpi_comm,
                          mk_planner_result_t *r)
{
    MPI_Comm comm = comm_of(mpi_comm);
    mk_planner_share_t *sh = NULL;
    memset(r, 0, sizeof *r);
    int ok = o->size == 1 || (sh = mk_planner_share_new(o->top, mpi_comm)) != NULL;
    if (o->size > 1) /* every rank shares, or none searches */
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, comm);
    if (sh) o->share = mk_planner_share, o->share_ctx = sh;
    int failed = !ok || mk_planner_search(m, cl, o, r) < 0;
    if (!ok && sh) mk_error_set("out of memory on another rank");
    mk_planner_share_free(sh);
    o->share = NULL, o->share_ctx = NULL;
    if (o->size == 1) return failed ? -1 : 0;
    char err[600];
    if (mk_planner_mpi_failed(failed, err, sizeof err, mpi_comm)) return mk_error_set("%s", err);
    return mk_planner_mpi_merge(r, o->top, mpi_comm);
}
