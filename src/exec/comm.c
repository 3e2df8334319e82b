/* The rank grid and polite waiting (see comm.h). */
#include "config.h"
#include "exec/comm.h"
#include "merak/backend.h"
#include "merak/common.h"
#include "merak/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int mk_comm_rank_of(const mk_comm_t *c, int d, int p, int t)
{
    return (p * c->dp + d) * c->tp + t;
}

/* MPI takes device pointers only when it says so (MPICH: MPIX_GPU_query_support);
   MK_CUDA_AWARE_MPI=0|1 overrides. */
static int mpi_cuda_aware(void)
{
    const char *env = getenv("MK_CUDA_AWARE_MPI");
    if (env && *env) return atoi(env) > 0;
#if defined(MK_HAVE_CUDA) && defined(MPIX_GPU_SUPPORT_CUDA)
    int s = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &s) == MPI_SUCCESS) return s != 0;
#endif
    return 0;
}

int mk_comm_init(mk_comm_t *c, MPI_Comm world, int dp, int pp, int tp, int ends_apart)
{
    c->world = world;
    MPI_Comm_rank(world, &c->rank);
    MPI_Comm_size(world, &c->size); /* dp*pp*tp == size: the caller's plan context (mk_plan_resolve) */
    c->dp = dp; c->pp = pp; c->tp = tp;
    c->tp_rank = c->rank % tp;
    c->dp_rank = (c->rank / tp) % dp;
    c->pp_rank = c->rank / (tp * dp);
    c->sleep_ns = 20000;
    c->timeout_s = 0;
    c->at.op = NULL;
    c->be = NULL;
    c->mpi_device_aware = mpi_cuda_aware();
    MPI_Comm_split(world, c->pp_rank * dp + c->dp_rank, c->tp_rank, &c->tpc);
    MPI_Comm_split(world, c->pp_rank * tp + c->tp_rank, c->dp_rank, &c->dpc);
    int ends = ends_apart && (c->pp_rank == 0 || c->pp_rank == pp - 1);
    MPI_Comm_split(world, ends ? c->dp_rank * tp + c->tp_rank : MPI_UNDEFINED, c->pp_rank, &c->tied);
    return 0;
}

void mk_comm_free(mk_comm_t *c)
{
    MPI_Comm *cs[3] = {&c->tpc, &c->dpc, &c->tied};
    for (int i = 0; i < 3; i++)
        if (*cs[i] != MPI_COMM_NULL) MPI_Comm_free(cs[i]);
}

static void nap(const mk_comm_t *c)
{
    struct timespec ts = {0, c->sleep_ns};
    nanosleep(&ts, NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* " (peer rank P; stage S's stream, instruction I: OP mb B chunk C)", or
 * the part of it that is known, or "". */
static void where(const mk_comm_t *c, int peer, char *buf, size_t n)
{
    char p[32] = "", a[160] = "";
    if (peer >= 0) snprintf(p, sizeof p, "peer rank %d", peer);
    if (c->at.op && c->at.mb >= 0)
        snprintf(a, sizeof a, "stage %d's stream, instruction %d: %s mb %d chunk %d", c->at.stage, c->at.index,
                 c->at.op, c->at.mb, c->at.chunk);
    else if (c->at.op)
        snprintf(a, sizeof a, "stage %d's stream, instruction %d: %s", c->at.stage, c->at.index, c->at.op);
    if (!*p && !*a) *buf = '\0';
    else snprintf(buf, n, " (%s%s%s)", p, *p && *a ? "; " : "", a);
}

/* The first wait that failed (timed out, interrupted): the job is ending,
 * so every later wait fails at once with this message, and a caller that
 * could not pass the failure on (a kernel's hook) cannot start a second
 * timeout.  Process-wide, as the signal it may come from. */
static char failure[512];

const char *mk_comm_failure(void) { return failure[0] ? failure : NULL; }

static int fail_for_good(void)
{
    snprintf(failure, sizeof failure, "%s", mk_error_last());
    return -1;
}

int mk_comm_check(const mk_comm_t *c, long long step)
{
    int sig = mk_file_interrupted();
    if (failure[0]) return mk_error_set("%s", failure);
    if (!sig) return 0;
    mk_error_set("interrupted by %s before step %lld", mk_file_signal_name(sig), step + 1);
    return fail_for_good();
}

int mk_comm_watch(const mk_comm_t *c, mk_comm_watch_t *w, const char *what, int peer)
{
    char at[192];
    int sig = mk_file_interrupted();
    if (failure[0]) return mk_error_set("%s", failure);
    if (sig) {
        where(c, peer, at, sizeof at);
        mk_error_set("interrupted by %s while waiting for %s%s", mk_file_signal_name(sig),
                     what ? what : "an MPI request", at);
        return fail_for_good();
    }
    if (c->timeout_s > 0) {
        double t = now_s();
        if (w->t0 == 0) w->t0 = t;
        else if (t - w->t0 > c->timeout_s) {
            where(c, peer, at, sizeof at);
            mk_error_set("timed out after %g min (--distributed-timeout-minutes) waiting for %s%s",
                         c->timeout_s / 60, what ? what : "an MPI request", at);
            return fail_for_good();
        }
    }
    if (c->polite) nap(c);
    return 0;
}

/* One request at a time with MPI_Test: MPI_Testall's status argument is an
 * array parameter, and MPICH's MPI_STATUSES_IGNORE is the sentinel pointer
 * (MPI_Status *)1, which GCC's -Wstringop-overflow reads as an array of no
 * elements.  Progress is global in MPI, so testing the first pending
 * request drives all of them; a completed request becomes
 * MPI_REQUEST_NULL, which tests as done. */
int mk_comm_waitall_for(const mk_comm_t *c, int n, MPI_Request *r, const char *what, int peer)
{
    mk_comm_watch_t w = {0};
    for (int i = 0; i < n;) {
        int done = 0;
        if (MPI_Test(&r[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return mk_error_set("MPI request failed");
        if (done) i++, w.t0 = 0;
        else if (mk_comm_watch(c, &w, what, peer) < 0) return -1;
    }
    return 0;
}

int mk_comm_wait_for(const mk_comm_t *c, MPI_Request *r, const char *what, int peer)
{
    return mk_comm_waitall_for(c, 1, r, what, peer);
}


void *mk_comm_stage(const mk_comm_t *c, void *buf, size_t bytes, int copy_in)
{
    const mk_backend_t *be = c->be;
    if (!bytes || !be || !be->to_host || !be->is_device(be->ctx, buf)) return buf;
    if (c->mpi_device_aware) {
        be->sync(be->ctx);  /* MPI reads and writes buf itself: queued kernels first */
        return buf;
    }
    void *h = be->host_alloc ? be->host_alloc(be->ctx, bytes) : malloc(bytes);
    if (!h) return buf;  /* unreachable in practice; MPI then sees the device pointer */
    if (copy_in) be->to_host(be->ctx, h, buf, bytes);
    return h;
}

void mk_comm_unstage(const mk_comm_t *c, void *buf, void *host, size_t bytes, int copy_out)
{
    if (host == buf || !host) return;
    if (copy_out) c->be->to_device(c->be->ctx, buf, host, bytes);
    if (c->be->host_free) c->be->host_free(c->be->ctx, host);
    else free(host);
}

/* The elements a count/displacement vector over comm's ranks spans. */
static size_t extent_of(MPI_Comm comm, const int *cnt, const int *dsp)
{
    int n = 0;
    size_t e = 0, at = 0;
    MPI_Comm_size(comm, &n);
    for (int i = 0; i < n; i++) {
        size_t end = (dsp ? (size_t)dsp[i] : at) + (size_t)cnt[i];
        at += (size_t)cnt[i];
        if (end > e) e = end;
    }
    return e;
}

static size_t type_bytes(MPI_Datatype t)
{
    int s = 0;
    MPI_Type_size(t, &s);
    return (size_t)s;
}

/* Wait for r (issued as `rc`), then end both stagings: the send side
 * dropped, the received `out` bytes copied back when it completed. */
static int finish(const mk_comm_t *c, int rc, MPI_Request *r, const char *call, const char *what, const void *send,
                  void *hs, void *recv, void *hr, size_t out)
{
    if (rc != MPI_SUCCESS) rc = mk_error_set("%s failed", call);
    else rc = mk_comm_wait_for(c, r, what, -1);
    if (send) mk_comm_unstage(c, (void *)send, hs, 0, 0);
    mk_comm_unstage(c, recv, hr, out, rc == 0);
    return rc;
}

int mk_comm_allreduce(const mk_comm_t *c, MPI_Comm comm, void *buf, int n, MPI_Datatype t, MPI_Op op,
                      const char *what)
{
    MPI_Request r;
    size_t bytes = (size_t)n * type_bytes(t);
    void *h = mk_comm_stage(c, buf, bytes, 1);  /* device buffers through host memory */
    int rc = MPI_Iallreduce(MPI_IN_PLACE, h, n, t, op, comm, &r);
    return finish(c, rc, &r, "MPI_Iallreduce", what, NULL, NULL, buf, h, bytes);
}

int mk_comm_reduce_scatter(const mk_comm_t *c, MPI_Comm comm, void *buf, const int *cnt, MPI_Datatype t,
                           MPI_Op op, const char *what)
{
    MPI_Request r;
    int me = 0;
    MPI_Comm_rank(comm, &me);
    size_t tb = type_bytes(t);
    void *h = mk_comm_stage(c, buf, extent_of(comm, cnt, NULL) * tb, 1);
    int rc = MPI_Ireduce_scatter(MPI_IN_PLACE, h, cnt, t, op, comm, &r);
    return finish(c, rc, &r, "MPI_Ireduce_scatter", what, NULL, NULL, buf, h, (size_t)cnt[me] * tb);
}

int mk_comm_allgatherv(const mk_comm_t *c, MPI_Comm comm, const void *send, int n, void *recv, const int *cnt,
                       const int *dsp, MPI_Datatype t, const char *what)
{
    MPI_Request r;
    size_t tb = type_bytes(t), rb = extent_of(comm, cnt, dsp) * tb;
    int inplace = send == MPI_IN_PLACE;
    void *hs = inplace ? MPI_IN_PLACE : mk_comm_stage(c, (void *)send, (size_t)n * tb, 1);
    void *hr = mk_comm_stage(c, recv, rb, inplace);
    int rc = MPI_Iallgatherv(hs, inplace ? 0 : n, t, hr, cnt, dsp, t, comm, &r);
    return finish(c, rc, &r, "MPI_Iallgatherv", what, inplace ? NULL : send, hs, recv, hr, rb);
}

int mk_comm_alltoall(const mk_comm_t *c, MPI_Comm comm, const void *send, int n, void *recv, MPI_Datatype t,
                     const char *what)
{
    MPI_Request r;
    int g = 0;
    MPI_Comm_size(comm, &g);
    size_t b = (size_t)n * g * type_bytes(t);
    void *hs = mk_comm_stage(c, (void *)send, b, 1), *hr = mk_comm_stage(c, recv, b, 0);
    int rc = MPI_Ialltoall(hs, n, t, hr, n, t, comm, &r);
    return finish(c, rc, &r, "MPI_Ialltoall", what, send, hs, recv, hr, b);
}

int mk_comm_alltoallv(const mk_comm_t *c, MPI_Comm comm, const void *send, const int *scnt, const int *sdsp,
                      void *recv, const int *rcnt, const int *rdsp, MPI_Datatype t, const char *what)
{
    MPI_Request r;
    size_t tb = type_bytes(t), sb = extent_of(comm, scnt, sdsp) * tb, rb = extent_of(comm, rcnt, rdsp) * tb;
    void *hs = mk_comm_stage(c, (void *)send, sb, 1), *hr = mk_comm_stage(c, recv, rb, 0);
    int rc = MPI_Ialltoallv(hs, scnt, sdsp, t, hr, rcnt, rdsp, t, comm, &r);
    return finish(c, rc, &r, "MPI_Ialltoallv", what, send, hs, recv, hr, rb);
}

int mk_comm_bcast(const mk_comm_t *c, void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm, const char *what)
{
    MPI_Request r;
    if (MPI_Ibcast(buf, n, t, root, comm, &r) != MPI_SUCCESS) return mk_error_set("MPI_Ibcast failed");
    return mk_comm_wait_for(c, &r, what, root == 0 ? -1 : root);
}

int mk_comm_tp_allreduce(void *ctx, float *buf, int n, int is_max)
{
    const mk_comm_t *c = ctx;
    return mk_comm_allreduce(c, c->tpc, buf, n, MPI_FLOAT, is_max ? MPI_MAX : MPI_SUM, "the TP all-reduce");
}
