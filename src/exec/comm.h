/* Executor communication: the rank grid (TP fastest, then DP, then PP),
 * its communicators, and polite waiting (MPI_Test + a short sleep when
 * ranks outnumber cores, so waiting ranks leave the cores to working ones). */
#ifndef MERAK_COMM_H
#define MERAK_COMM_H

#include <mpi.h>
#include <stddef.h>

struct mk_backend;

typedef struct mk_comm {
    MPI_Comm world, tpc, dpc, tied; /* tied: first+last stage of one (dp, tp); else MPI_COMM_NULL */
    int rank, size;
    int dp, pp, tp;                /* degrees */
    int dp_rank, pp_rank, tp_rank; /* this rank's coordinates */
    int polite;                    /* sleep between polls (oversubscribed) */
    long sleep_ns;
    /* The backend whose device memory MPI gets through host copies (its
       device entries), NULL: host memory only.  Set by the owner after
       mk_comm_init (which clears it), before mk_runtime_bind. */
    const struct mk_backend *be;
    int mpi_device_aware;          /* MPI takes device pointers itself (mk_comm_init) */
} mk_comm_t;

/* Split world into the grid; collective over world.  dp*pp*tp must be the
 * size of world (checked by mk_plan_resolve, opts.world).  Returns 0 or -1. */
int mk_comm_init(mk_comm_t *c, MPI_Comm world, int dp, int pp, int tp);
void mk_comm_free(mk_comm_t *c);
/* Global rank of (dp_rank, pp_rank, tp_rank). */
int mk_comm_rank_of(const mk_comm_t *c, int dp_rank, int pp_rank, int tp_rank);
/* Complete one request, or several, politely.  Returns 0 or -1. */
int mk_comm_wait(const mk_comm_t *c, MPI_Request *r);
int mk_comm_waitall(const mk_comm_t *c, int n, MPI_Request *r);
/* In-place all-reduce (sum or max) on comm, completed politely. */
int mk_comm_allreduce(const mk_comm_t *c, MPI_Comm comm, void *buf, int n, MPI_Datatype t, MPI_Op op);
/* The TP all-reduce callback of mk_gpt_run_t (ctx = mk_comm_t). */
int mk_comm_tp_allreduce(void *ctx, float *buf, int n, int is_max);

/* Host staging of device buffers for MPI (c->be a device backend, MPI not
 * CUDA-aware).  mk_comm_stage returns the pointer to hand MPI: buf itself
 * when buf is host memory, when c->be has no device entries, or when MPI
 * reports CUDA support; else a new host buffer, holding a copy of buf when
 * copy_in.  mk_comm_unstage ends it: when host != buf, copies host back
 * into buf (copy_out) and frees host.  On the CPU both are no-ops. */
void *mk_comm_stage(const mk_comm_t *c, void *buf, size_t bytes, int copy_in);
void mk_comm_unstage(const mk_comm_t *c, void *buf, void *host, size_t bytes, int copy_out);

/* Bind this rank to a device (c->be's bind entry, from the node-local
 * rank) and with hwloc to its share of the node's cores, set OpenBLAS
 * threads to that share (unless OPENBLAS_NUM_THREADS is set), and turn on
 * polite waiting when ranks outnumber cores.  Never fails the run: returns
 * the thread count chosen. */
int mk_runtime_bind(mk_comm_t *c);

#endif
