/* The rank grid and polite waiting (see comm.h). */
#include "config.h"
#include "exec/comm.h"
#include "merak/backend.h"
#include "merak/common.h"

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

int mk_comm_init(mk_comm_t *c, MPI_Comm world, int dp, int pp, int tp)
{
    c->world = world;
    MPI_Comm_rank(world, &c->rank);
    MPI_Comm_size(world, &c->size); /* dp*pp*tp == size: the caller's plan context (mk_plan_resolve) */
    c->dp = dp; c->pp = pp; c->tp = tp;
    c->tp_rank = c->rank % tp;
    c->dp_rank = (c->rank / tp) % dp;
    c->pp_rank = c->rank / (tp * dp);
    c->sleep_ns = 20000;
    c->be = NULL;
    c->mpi_device_aware = mpi_cuda_aware();
    MPI_Comm_split(world, c->pp_rank * dp + c->dp_rank, c->tp_rank, &c->tpc);
    MPI_Comm_split(world, c->pp_rank * tp + c->tp_rank, c->dp_rank, &c->dpc);
    int ends = pp > 1 && (c->pp_rank == 0 || c->pp_rank == pp - 1);
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

/* One request at a time with MPI_Test: MPI_Testall's status argument is an
 * array parameter, and MPICH's MPI_STATUSES_IGNORE is the sentinel pointer
 * (MPI_Status *)1, which GCC's -Wstringop-overflow reads as an array of no
 * elements.  Progress is global in MPI, so testing the first pending
 * request drives all of them; a completed request becomes
 * MPI_REQUEST_NULL, which tests as done. */
int mk_comm_waitall(const mk_comm_t *c, int n, MPI_Request *r)
{
    for (int i = 0; i < n;) {
        int done = 0;
        if (MPI_Test(&r[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return mk_error_set("MPI request failed");
        if (done) i++;
        else if (c->polite) nap(c);
    }
    return 0;
}

int mk_comm_wait(const mk_comm_t *c, MPI_Request *r) { return mk_comm_waitall(c, 1, r); }

void *mk_comm_stage(const mk_comm_t *c, void *buf, size_t bytes, int copy_in)
{
    const mk_backend_t *be = c->be;
    if (!bytes || !be || !be->to_host || !be->is_device(be->ctx, buf)) return buf;
    if (c->mpi_device_aware) {
        be->sync(be->ctx);  /* MPI reads and writes buf itself: queued kernels first */
        return buf;
    }
    void *h = malloc(bytes);
    if (!h) return buf;  /* unreachable in practice; MPI then sees the device pointer */
    if (copy_in) be->to_host(be->ctx, h, buf, bytes);
    return h;
}

void mk_comm_unstage(const mk_comm_t *c, void *buf, void *host, size_t bytes, int copy_out)
{
    if (host == buf || !host) return;
    if (copy_out) c->be->to_device(c->be->ctx, buf, host, bytes);
    free(host);
}

int mk_comm_allreduce(const mk_comm_t *c, MPI_Comm comm, void *buf, int n, MPI_Datatype t, MPI_Op op)
{
    MPI_Request r;
    int tsize = 0;
    MPI_Type_size(t, &tsize);
    size_t bytes = (size_t)n * tsize;
    void *h = mk_comm_stage(c, buf, bytes, 1);  /* device buffers through host memory */
    if (MPI_Iallreduce(MPI_IN_PLACE, h, n, t, op, comm, &r) != MPI_SUCCESS) {
        mk_comm_unstage(c, buf, h, bytes, 0);
        return mk_error_set("MPI_Iallreduce failed");
    }
    int rc = mk_comm_wait(c, &r);
    mk_comm_unstage(c, buf, h, bytes, rc == 0);
    return rc;
}

int mk_comm_tp_allreduce(void *ctx, float *buf, int n, int is_max)
{
    const mk_comm_t *c = ctx;
    return mk_comm_allreduce(c, c->tpc, buf, n, MPI_FLOAT, is_max ? MPI_MAX : MPI_SUM);
}
