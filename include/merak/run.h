/* The entry points that run over MPI: the executor (mk_exec_train,
 * mk_exec_bind, the backend as an opaque handle) and the planner's search
 * split over ranks.
 * The umbrella <merak/merak.h> does not include this header, so a program
 * that only plans needs no MPI; one that includes it is built with mpicc.
 * Every function here is collective over the communicator it is given, a
 * void * to an MPI_Comm (the planner's: NULL for MPI_COMM_WORLD), so that
 * this header needs no mpi.h; mk_planner_mpi_jobs' threads call no MPI. */
#ifndef MERAK_RUN_H
#define MERAK_RUN_H

#include "merak/loss_scale.h"
#include "merak/plan.h"
#include "merak/planner.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The training executor: runs each pipeline stage's instruction
 * stream (sched.h) with real kernels (a backend) and MPI, for a dp x pp
 * x tp layout of the model.  One call trains `steps` steps. ---- */

/* A compute backend, opaque here (its table is merak/backend.h, not
 * installed): "cpu", "cuda", or NULL for cuda where a device is visible,
 * else cpu.  NULL with mk_error_last() when unknown or unavailable. */
struct mk_backend;
MK_API struct mk_backend *mk_backend_new(const char *name);
MK_API void mk_backend_free(struct mk_backend *be);
/* "cpu" or "cuda". */
MK_API const char *mk_backend_name(const struct mk_backend *be);
/* Nonzero when a 16-bit run on be keeps its weights (and fp16's gradient
 * buffers) in 16-bit stores over fp32 masters: a backend whose buffers are
 * host memory (the CPU; src/exec/exec_p16.c, whose stores MPI and the
 * host read directly).  A device backend keeps fp32 weights and gradients
 * (the GEMMs round the weights as they read them). */
MK_API int mk_exec_store16(const struct mk_backend *be);

typedef struct mk_exec_opts {
    const mk_plan_ctx_t *ctx;     /* the plan, resolved (mk_plan_resolve with world = the rank
                                     count and check = mk_exec_check): model, layout, schedule,
                                     recompute, ZeRO, stage bounds, the scheduler's spec; the one
                                     source of every plan field (a --plan file's too) */
    struct mk_backend *be;        /* the run's backend, caller-owned (mk_backend_new) */
    int steps;
    double lr, min_lr, weight_decay, clip_grad, adam_eps;
    double adam_beta1, adam_beta2; /* Adam's moment decays (0.9, 0.95: GPT-3's, Megatron-LM's GPT examples) */
    int warmup;                   /* linear warm-up steps; < 0: mk_exec_default_warmup */
    uint64_t seed;
    const char *dump_grads;       /* testing: write full step-1 gradients here (rank 0) */
    int log_interval;             /* rank 0 logs (mk_log: the CLI writes to stderr): a step line every N steps and at the
                                     last, validation losses, each file written (0: silent) */
    const char *trace;            /* Chrome trace of the last step (all ranks, written by rank 0) */
    const char *data;             /* token file (merak/data.h), or NULL: the synthetic stream */
    const char *save, *load;      /* checkpoint files (safetensors, src/exec/README.md "Checkpoints");
                                     load may be a Hugging Face model directory */
    const char *save_hf;          /* also write the weights at the end as a Hugging Face model directory */
    const char *first_line;       /* logged (rank 0, unless quiet) once the run is set up, before step 1:
                                     merak run names the cpu backend's kernels there; NULL: none */
    int64_t hf_max_shard_bytes;   /* its safetensors shards at most this big (max_shard_size; 0: 5 GB) */
    int gemm_dtype;               /* the linears' GEMM operands (mk_dtype_t; 0: fp32): a backend with
                                     set_gemm_dtype rounds them to it (mixed precision's matmuls) */
    mk_loss_scaler_t loss_scaler; /* loss scaling's kind and first state (merak/loss_scale.h; kind 0: none) */
    int grad_dtype;               /* the gradient buffers and their DP reduction (mk_dtype_t; 0: fp32): fp16 for
                                     --fp16 without --accumulate-allreduce-grads-in-fp32, as Megatron-LM (its
                                     bf16 forces fp32); a backend with round16 rounds each accumulation and
                                     each reduced sum to it, and one that packs 16-bit values also holds and
                                     reduces them 16-bit (without ZeRO and with ZeRO-1: exec_g16.c) */
    int hf_dtype;                 /* its weights' type: MK_ST_F32 (0), MK_ST_BF16 or MK_ST_F16 (merak/safetensors.h;
                                     rounded to nearest even), config.json's torch_dtype saying which */
    int reset_position_ids;       /* Megatron's: positions restart at each document of the data */
    int reset_attention_mask;     /* Megatron's: attention stays inside each document */
    int save_interval;            /* also save every N steps (0: at the end only) */
    int eval_interval;            /* validation loss every N steps and at the end (0: never) */
    int eval_batches;             /* global batches per validation (0: up to 8) */
    int lr_decay_steps;           /* cosine horizon (0: the checkpoint's, else the run's last step) */
    double timeout_s;             /* --distributed-timeout-minutes x 60: a wait on a collective or a
                                     p2p message that completes nothing for this long ends the job
                                     (res.abort_exit); 0: never */
} mk_exec_opts_t;

typedef struct mk_exec_result {
    int steps;
    double *losses;               /* [steps] mean loss over the global batch */
    double *aux_losses;           /* [steps] MoE models: the load-balancing losses (summed over the
                                     MoE layers, mean over the micro-batches); NULL for dense ones */
    double *step_times;           /* [steps] seconds */
    double tokens_per_s;          /* from the median step after the first */
    double step_time;             /* that median */
    size_t *peak_mem;             /* [pp] bytes: params, grads, Adam state, activations, scratch */
    size_t *state_mem;            /* [pp] bytes of the model's state: weights (16-bit and fp32 masters),
                                     gradients, Adam moments, as held between steps */
    int64_t first_step;           /* global index of losses[0] (after --load) */
    int load_unverified;          /* --load's file had no checksums (the CLI notes it) */
    double loss_scale;            /* loss scaling's scale after the last step (1: none) */
    int64_t skipped_steps;        /* steps skipped for inf/NaN gradients (loss scaling only) */
    int n_val;
    int64_t *val_steps;           /* [n_val] steps done when measured */
    double *val_losses;           /* [n_val] mean validation loss */
    int fail_exit;                /* train returned -1 on every rank alike: exit with this
                                     (message on rank 0 in mk_error_last()) */
    int abort_exit;               /* train returned -1 because a wait timed out or a deferred
                                     signal came (mk_file_defer_signals): the peers cannot be
                                     relied on, so end the job with MPI_Abort and this code (1,
                                     or 128 + the signal); mk_error_last() says what happened */
} mk_exec_result_t;

/* Defaults for the optimizer fields (lr 6e-4, ...; no warm-up). */
MK_API void mk_exec_opts_init(mk_exec_opts_t *o);
/* The warm-up when opts.warmup < 0 (merak run's default), for Adam's
 * beta2: 2 / (1 - beta2) steps, 40 at 0.95 (exec.c says why). */
MK_API int64_t mk_exec_default_warmup(double beta2);
/* The executor's rules beyond the plan's (GPT only, MLP width divisible by
 * tp, checkpoint counts for auto, ZeRO-1 at most, no sequence parallelism,
 * buffers within this machine's memory): the check of
 * mk_plan_resolve_opts_t.  Every rank runs it identically, so all ranks
 * agree on failure before any collective.  Returns 0 or -1. */
MK_API int mk_exec_check(const mk_plan_t *p, const mk_graph_t *g);
/* The streams of a resolved plan build (without MPI, like mk_exec_check).
 * Returns 0 or -1. */
MK_API int mk_exec_validate(const mk_plan_ctx_t *ctx);
/* Train.  Collective over world.  Fills res on rank 0 (free with
 * mk_exec_result_free).  Returns 0, or -1 (message in mk_error_last()). */
MK_API int mk_exec_train(const mk_exec_opts_t *o, void *mpi_world_comm, mk_exec_result_t *res);
MK_API void mk_exec_result_free(mk_exec_result_t *res);
/* Place this rank as mk_exec_train does: bind it to its share of the
 * node's cores (hwloc), a device backend to its device, size be's thread
 * pool (set_threads) to those cores.  Collective over *(MPI_Comm *)
 * mpi_comm.  Returns the OpenBLAS thread count (OPENBLAS_NUM_THREADS wins);
 * *kernel_threads (may be NULL) the kernels' (at most the cores). */
MK_API int mk_exec_bind(void *mpi_comm, struct mk_backend *be, int *kernel_threads);
/* Fault injection for the tests (MK_TEST_FAIL, MK_TEST_NAN,
 * MK_TEST_SAVE_DIE_AFTER): environment variables read by src/exec/exec_faults.c,
 * documented at its top. */


/* ---- The planner over MPI ranks ---- */

/* The search of mk_planner_search with o->rank, o->size the communicator's: each
 * rank searches every size-th (layout, micro-batch, schedule), the ranks share
 * their K best while they search (pruning at the K-th best of all), and
 * rank 0 gets the merged top K and counters in r.  0, or -1 on every rank
 * with the lowest failing rank's message ("rank R: ..." for R > 0). */
MK_API int mk_planner_search_mpi(const mk_model_config_t *m, const mk_cluster_t *cl, mk_planner_opts_t *o,
                                 void *mpi_comm, mk_planner_result_t *r);

/* Its parts. The K-best exchange behind mk_planner_opts_t.share
 * (MPI_Iallreduce of the ranks' K best step times, merged by a user op);
 * opaque.  NULL on failure (mk_error_last). */
typedef struct mk_planner_share mk_planner_share_t;
MK_API mk_planner_share_t *mk_planner_share_new(int top, void *mpi_comm);
MK_API void mk_planner_share_free(mk_planner_share_t *s);
/* The planner's share callback; ctx is an mk_planner_share_t. */
MK_API int mk_planner_share(void *ctx, const double *mine, int n, int done, double *all);
/* Whether any rank's search failed (failed: this one's).  Returns 1 and,
 * on every rank, the lowest failing rank's message in err ("rank R: ..."
 * for R > 0), or 0 when none failed. */
MK_API int mk_planner_mpi_failed(int failed, char *err, size_t n, void *mpi_comm);
/* Rank 0 receives every rank's top-K list and the counters, merged into r. */
MK_API int mk_planner_mpi_merge(mk_planner_result_t *r, int top, void *mpi_comm);

/* Run fn(ctx, j, out + j * item) for every job j < n: job j on rank
 * j % size (MPI, when initialised; else all here), a rank's jobs over
 * its cores (threads).  Rank 0 then holds every job's item in out.  fn
 * must be thread-safe.  Returns 0, or -1 (mk_error_last). */
MK_API int mk_planner_mpi_jobs(int n, void (*fn)(void *ctx, int j, void *out), void *ctx, void *out, size_t item,
                               void *mpi_comm);
/* The cores this process may use: those of its binding (hwloc), divided
 * among the MPI ranks of its node; at least 1. */
MK_API int mk_planner_mpi_cores(void *mpi_comm);

#ifdef __cplusplus
}
#endif
#endif
