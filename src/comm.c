/* The rank grid and polite waiting (see comm.h). */
#include "config.h"
#include "comm.h"
#include "merak/common.h"

#include <time.h>

int mk_comm_rank_of(const mk_comm_t *c, int d, int p, int t)
{
    return (p * c->dp + d) * c->tp + t;
}

int mk_comm_init(mk_comm_t *c, MPI_Comm world, int dp, int pp, int tp)
{
    c->world = world;
    MPI_Comm_rank(world, &c->rank);
    MPI_Comm_size(world, &c->size);
    if (dp * pp * tp != c->size)
        return mk_error_set("dp*pp*tp = %d*%d*%d = %d does not match %d ranks", dp, pp, tp,
                            dp * pp * tp, c->size);
    c->dp = dp; c->pp = pp; c->tp = tp;
    c->tp_rank = c->rank % tp;
    c->dp_rank = (c->rank / tp) % dp;
    c->pp_rank = c->rank / (tp * dp);
    c->sleep_ns = 20000;
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

int mk_comm_waitall(const mk_comm_t *c, int n, MPI_Request *r)
{
    for (;;) {
        int done = 0;
        if (MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return mk_error_set("MPI request failed");
        if (done) return 0;
        if (c->polite) nap(c);
    }
}

int mk_comm_wait(const mk_comm_t *c, MPI_Request *r) { return mk_comm_waitall(c, 1, r); }

int mk_comm_allreduce(const mk_comm_t *c, MPI_Comm comm, void *buf, int n, MPI_Datatype t, MPI_Op op)
{
    MPI_Request r;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, n, t, op, comm, &r) != MPI_SUCCESS)
        return mk_error_set("MPI_Iallreduce failed");
    return mk_comm_wait(c, &r);
}

int mk_comm_tp_allreduce(void *ctx, float *buf, int n, int is_max)
{
    const mk_comm_t *c = ctx;
    return mk_comm_allreduce(c, c->tpc, buf, n, MPI_FLOAT, is_max ? MPI_MAX : MPI_SUM);
}
