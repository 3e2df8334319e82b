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
    int kernel_threads;            /* the backend's threads (mk_runtime_bind) */
    int mpi_device_aware;          /* MPI takes device pointers itself (mk_comm_init) */
    /* --distributed-timeout-minutes in seconds: a wait in which nothing
       completes for this long fails (0: never); set after mk_comm_init */
    double timeout_s;
    /* the instruction being run, for a timeout's message (op NULL: none) */
    struct { const char *op; int stage, index, mb, chunk; } at;
} mk_comm_t;

/* One wait's progress: started by the first poll that completes nothing. */
typedef struct mk_comm_watch {
    double t0;                     /* 0: not waiting yet */
} mk_comm_watch_t;

/* Split world into the grid; collective over world.  dp*pp*tp must be the
 * size of world (checked by mk_plan_resolve, opts.world).  Returns 0 or -1. */
/* ends_apart: the embedding and the head on different stages (the first
 * and the last: mk_plan_ends_apart), which then share a tied-embedding
 * communicator. */
int mk_comm_init(mk_comm_t *c, MPI_Comm world, int dp, int pp, int tp, int ends_apart);
void mk_comm_free(mk_comm_t *c);
/* Global rank of (dp_rank, pp_rank, tp_rank). */
int mk_comm_rank_of(const mk_comm_t *c, int dp_rank, int pp_rank, int tp_rank);
/* Call after each poll of a wait that completed nothing (w zeroed when the
 * wait starts or something completes): naps when polite; -1 with "timed
 * out after M min waiting for WHAT (from/for rank PEER; stage S's stream,
 * instruction I: OP mb B chunk C)" once c->timeout_s has passed since the
 * first such poll, or with "interrupted by SIGINT while waiting for WHAT"
 * after a deferred signal (mk_file_interrupted).  peer -1: none. */
int mk_comm_watch(const mk_comm_t *c, mk_comm_watch_t *w, const char *what, int peer);
/* At a step boundary: -1 with "interrupted by SIGINT before step N" after
 * a deferred signal, or with the standing failure; else 0. */
int mk_comm_check(const mk_comm_t *c, long long step);
/* The message of the first wait that timed out or was interrupted (the
 * job must end: merak run aborts it), or NULL. */
const char *mk_comm_failure(void);
/* Complete one request, or several, politely and watched (what: for the
 * messages, as mk_comm_watch).  Returns 0 or -1. */
int mk_comm_wait_for(const mk_comm_t *c, MPI_Request *r, const char *what, int peer);
int mk_comm_waitall_for(const mk_comm_t *c, int n, MPI_Request *r, const char *what, int peer);
/* In-place all-reduce (sum or max) on comm, completed politely. */
int mk_comm_allreduce(const mk_comm_t *c, MPI_Comm comm, void *buf, int n, MPI_Datatype t, MPI_Op op,
                      const char *what);
/* The blocking collectives of the executor, over host or device buffers
 * (staged through host memory as mk_comm_stage says), completed politely:
 * each returns 0 or -1 with the error set.  Counts and displacements in
 * elements of t, as MPI's; the buffers' extents are the largest
 * displacement + count.
 * reduce_scatter: in place, buf holds the sum of cnt over comm; this
 * rank's reduced piece (cnt[rank]) ends at buf's start, the rest is
 * undefined (Megatron's distributed optimizer keeps it there).
 * allgatherv: send == MPI_IN_PLACE gathers in place (this rank's piece
 * already at its displacement in recv). */
int mk_comm_reduce_scatter(const mk_comm_t *c, MPI_Comm comm, void *buf, const int *cnt, MPI_Datatype t,
                           MPI_Op op, const char *what);
int mk_comm_allgatherv(const mk_comm_t *c, MPI_Comm comm, const void *send, int n, void *recv, const int *cnt,
                       const int *dsp, MPI_Datatype t, const char *what);
int mk_comm_alltoall(const mk_comm_t *c, MPI_Comm comm, const void *send, int n, void *recv, MPI_Datatype t,
                     const char *what);
int mk_comm_alltoallv(const mk_comm_t *c, MPI_Comm comm, const void *send, const int *scnt, const int *sdsp,
                      void *recv, const int *rcnt, const int *rdsp, MPI_Datatype t, const char *what);
/* Broadcast of host memory from root over comm, watched (waiting for WHAT). */
int mk_comm_bcast(const mk_comm_t *c, void *buf, int n, MPI_Datatype t, int root, MPI_Comm comm, const char *what);
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
