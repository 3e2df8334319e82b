/* The merak command line: shared option parsing for every subcommand.
 *
 * Each subcommand declares which option groups it takes; any other flag is
 * an error (exit 2).  Model flags are collected as overrides and applied
 * after parsing, so they win over --model whatever their order. */
#ifndef MERAK_CLI_H
#define MERAK_CLI_H

#include <stdio.h>
#include "merak/limits.h"
#include "merak/fileio.h"
#include "merak/model.h"
#include "merak/plan.h"

/* Option groups a subcommand accepts. */
enum {
    MK_OPTG_MODEL   = 1 << 0,  /* --model and Megatron model-size flags, --dtype */
    MK_OPTG_LAYOUT  = 1 << 1,  /* --dp --pp --tp --mbs --gbs --vpp */
    MK_OPTG_SCHED   = 1 << 2,  /* --schedule --recompute --micro-batches --verify */
    MK_OPTG_SIM     = 1 << 3,  /* --cluster --tp-overlap --zero --sequence-parallel --[no-]overlap-grad-reduce --attention-backend --partition --plan --trace */
    MK_OPTG_PLAN    = 1 << 4,  /* --gpus --top --save-plan */
    MK_OPTG_RUN     = 1 << 5,  /* --steps --backend --data --save --load --lr ... */
    MK_OPTG_OUT     = 1 << 6,  /* --out */
    MK_OPTG_JSON    = 1 << 7,  /* --json */
    MK_OPTG_BATCH   = 1 << 8,  /* --tp --mbs --gbs alone (merak model) */
    MK_OPTG_EXPLAIN = 1 << 9   /* --explain (merak sim, merak plan) */
};

typedef struct mk_args {
    const char *cmd;               /* subcommand name */
    const char *model;             /* preset or JSON path (NULL: default) */
    mk_model_overrides_t ov;
    const char *dtype;             /* NULL: the subcommand's default */
    const char *cluster;
    int dp, pp, tp, cp, mbs, gbs, vpp; /* 0: not given */
    int ep, etp;                   /* --ep, --expert-tensor-parallel-size (0: not given) */
    double moe_imbalance;          /* --moe-imbalance (0: not given) */
    int moe_deepep;                /* --moe-enable-deepep */
    const char *moe_dispatcher;    /* --moe-token-dispatcher-type alltoall|flex (NULL: alltoall) */
    int micro_batches;
    const char *schedule, *recompute, *partition;
    const char *zero_shard_group;  /* --zero-shard-group dp|node (NULL: dp) */
    int node_ranks;                /* merak run: ranks per node (the node of --zero-shard-group node
                                      without a cluster); 0 unknown, -1 nodes differ */
    int tp_overlap, zero, seqpar, verify, json;
    const char *attention;         /* --attention-backend (--use-flash-attn: flash); NULL: auto */
    const char *cross_entropy;     /* --cross-entropy; NULL: vocab-parallel */
    const char *elementwise;       /* --elementwise fused|eager; NULL: fused */
    const char *reshard;           /* --fsdp-reshard-after-forward; NULL: always */
    const char *cp_comm;           /* --cp-comm-type; NULL: p2p */
    const char *fp8_recipe;        /* --fp8-recipe delayed|tensorwise; NULL: delayed */
    const char *grad_dtype;        /* --grad-reduce-dtype (mk_args_grad_dtype); NULL: not given */
    int optimizer_offload;         /* --optimizer-cpu-offload */
    int tp_comm_overlap;           /* --tp-comm-overlap */
    int overlap_param_gather;      /* --overlap-param-gather */
    int scatter_gather_p2p;        /* --scatter-gather-tensors-in-pipeline */
    int moe_a2a_overlap;           /* --overlap-moe-expert-parallel-comm */
    int delay_wgrad;               /* --delay-wgrad-compute (needs the overlap: Megatron-Core's rule) */
    int cpu_offload_layers;        /* --cpu-offloading-num-layers (0: none) */
    int first_stage_layers, last_stage_layers; /* --decoder-first/last-pipeline-num-layers (0: even) */
    int overlap_grad_reduce;       /* -1: not given (the plan's default, on), else 0 / 1 (the last one given) */
    int zero3_prefetch;            /* --[no-]zero3-prefetch: -1 not given (on), else 0 / 1 */
    int zero3_per_param;           /* --zero3-per-param-collectives */
    const char *plan_file, *trace_file, *save_plan, *out;
    const char *baseline;          /* merak plan: restrict the space to a system's choices */
    const char *schedules;         /* merak plan: the schedules searched (comma-separated names) */
    const char *save_hf;           /* merak run: the weights as a Hugging Face model directory */
    int64_t hf_max_shard;          /* its shards' size at most (--hf-max-shard-size; 0: 5 GB) */
    int reset_pos, reset_mask;     /* --reset-position-ids, --reset-attention-mask */
    const char *export_to;         /* merak sim/plan --export: megatron (the plan as its launch command) */
    int recompute_num_layers;      /* Megatron-LM's --recompute-num-layers: 1 (uniform, every block) */
    int gpus, top;
    int vpp_layers;                /* --num-layers-per-virtual-pipeline-stage */
    int steps;
    const char *backend, *data, *save, *load;
    const char *dump_grads;        /* merak run --dump-grads (taken out of argv before parsing) */
    double timeout_min;            /* --distributed-timeout-minutes (-1: not given) */
    double lr, min_lr, weight_decay, clip_grad, adam_eps, adam_beta1, adam_beta2; /* -1: not given */
    double loss_scale, initial_loss_scale, min_loss_scale; /* Megatron's loss scaling (-1: not given) */
    int loss_scale_window, hysteresis;                     /* (0: not given) */
    int lr_warmup_iters, seed, eval_interval;
    int lr_decay_iters, eval_batches, save_interval; /* 0: not given */
    int log_interval;              /* merak run: a step line every N steps (0: not given, every step) */
    int quiet;                     /* merak run --quiet: no step or file lines on stderr */
    int grad_reduce_dtype;         /* --grad-reduce-dtype, or fp32 by --accumulate-allreduce-grads-in-fp32 (Megatron's):
                                      mk_plan_t.grad_reduce_dtype (mk_dtype_t + 1; 0: not given) */
    const char *recompute_method;  /* --recompute-method uniform (checked; merak's full recompute) */
    int layout_given;              /* any layout/model flag was given (for --plan checks) */
    int npos;                      /* positional arguments after the options */
    char **pos;
    /* issue 21 (src/cli/cli_explain.c) */
    int explain, what_if;          /* --explain, --what-if */
    double gpu_hour_price, train_tokens; /* 0: not given */
    const char *objective;         /* --objective time|cost (NULL: time) */
    int n_gpus_list;               /* --gpus N1,N2,...: the counts (gpus = the first); 0: one count */
    int gpus_list[MK_MAX_GPU_COUNTS];
} mk_args_t;

/* A subcommand's defaults: one static table per subcommand (in its
 * cli_*.c), read by the parser (mk_args_plan, the subcommand's own code)
 * and by --help, whose usage text names each value as @key@ (the field's
 * name: @model@, @gbs@, ...; mk_args_parse fills them in).  Unused fields
 * stay 0 / NULL. */
typedef struct mk_cli_defaults {
    const char *model;             /* --model */
    const char *cluster;           /* --cluster */
    int dtype;                     /* --dtype: MK_DTYPE_*, or -1: the cluster's 16-bit type */
    int gbs;                       /* --gbs; 0: 2 x dp x mbs x pp (merak run) */
    const char *schedule, *recompute, *partition;
    int vpp;                       /* --vpp when the schedule is interleaved and none is given (0: 1) */
    int gpus, top;                 /* merak plan */
    int steps, seed;               /* merak run */
    const char *lr, *weight_decay, *clip_grad, *adam_eps; /* merak run, as typed on the command line */
    const char *adam_beta1, *adam_beta2;
    const char *out;               /* merak profile */
} mk_cli_defaults_t;

/* Parse argv (argv[0] = subcommand) accepting the given groups.  Prints
 * one line to stderr and returns -1 on a bad flag or value; returns 1 when
 * --help was printed (usage text with the @key@ defaults of d filled in),
 * 0 otherwise. */
int mk_args_parse(mk_args_t *a, int argc, char **argv, unsigned groups, const char *usage,
                  const mk_cli_defaults_t *d);

/* --micro-batches M given: set a->gbs to dp x mbs x M (both must not be
 * given).  Prints the error and returns MK_EXIT_USAGE, or 0. */
int mk_args_micro_batches(mk_args_t *a);

/* Resolve the model from --model and the overrides (default: deflt). */
int mk_args_model(const mk_args_t *a, const char *deflt, mk_model_config_t *cfg);

/* Check, before any work, the files the flags name (--save, --trace,
 * --save-plan, --out, --dump-grads against each other and against --data,
 * --load, --plan, a --model or --cluster file and standard output, by
 * identity: mk_cli_check_files), and that each output can be written
 * (fileio.h: mk_file_check_output).  Prints one line and returns -1, or 0.  mpi:
 * MPI is initialised; rank 0 (the writer) checks, every rank returns its
 * answer (collective over MPI_COMM_WORLD). */
int mk_args_check_outputs(const mk_args_t *a, int mpi);
/* A file a command line names (src/cli/cli_files.c): what is NULL for an
 * input, else what the output is ("checkpoint") for messages. */
#define MK_CLI_FILES_MAX 16
typedef struct mk_cli_file {
    const char *flag, *path, *what;
    mk_file_id_t id;
} mk_cli_file_t;
/* Append FLAG PATH to f[0..n) (nothing when path is NULL); the new count. */
int mk_cli_file_add(mk_cli_file_t *f, int n, const char *flag, const char *path, const char *what);
/* Refuse (one line for CMD, -1) an output that is the same file as an
 * input or another output (--save over --load excepted) or as standard
 * output, then check that each output can be written; 0 when all is well. */
int mk_cli_check_files(const char *cmd, const mk_cli_file_t *f, int n);

/* --gpus N1,N2,...: the GPU counts of a scaling sweep (cli_explain.c).
 * Prints the error and returns -1, or 0. */
int mk_args_gpus_list(mk_args_t *a, const char *v);

/* Print "merak CMD: MESSAGE" on stderr and return MK_EXIT_USAGE. */
int mk_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Subcommands: each returns the process exit status. */
/* Human-readable numbers in the unit that fits the magnitude (cli_fmt.c):
 * seconds with 4 significant digits as ns/µs/ms/s (min/h past a minute:
 * 0.0007 -> "700 µs", 20.62 -> "20.62 s"); with 3, bytes as
 * B/KiB/MiB/GiB/TiB (binary: 0.01 GiB -> "10.2 MiB"), counts as K/M/B/T
 * (decimal: 220544 -> "221 K", 1.558e9 -> "1.56 B").  Return buf. */
char *mk_fmt_seconds(char *buf, size_t n, double s);
char *mk_fmt_bytes(char *buf, size_t n, double bytes);
char *mk_fmt_count(char *buf, size_t n, double x);
/* A table column in one unit, picked by a reference value (its largest
 * or first entry): mk_unit_*(ref), the decimals that give ref `digits`
 * significant digits (mk_unit_decimals), then each cell as mk_fmt_in (the
 * number alone, those decimals) under a header naming u.name. */
typedef struct {
    double f;          /* the unit in base units (s, B, 1) */
    const char *name;  /* "ms", "MiB", "K"; "" for a plain count */
} mk_unit_t;
mk_unit_t mk_unit_seconds(double ref);
mk_unit_t mk_unit_bytes(double ref);
mk_unit_t mk_unit_count(double ref);
int mk_unit_decimals(double ref, mk_unit_t u, int digits);
char *mk_fmt_in(char *buf, size_t n, double v, mk_unit_t u, int dec);
/* The printf field width that pads s to w columns ("µ" is 2 bytes, 1 column). */
int mk_fmt_width(const char *s, int w);

int mk_cmd_models(int argc, char **argv);
int mk_cmd_model(int argc, char **argv);
int mk_cmd_sim(int argc, char **argv);
int mk_cmd_trace(int argc, char **argv);
int mk_cmd_sched(int argc, char **argv);
int mk_cmd_plan(int argc, char **argv);
int mk_cmd_run(int argc, char **argv);
int mk_cmd_profile(int argc, char **argv);
int mk_cmd_plot(int argc, char **argv);

/* The plan a subcommand runs, from its flags (defaults d) or loaded from
 * --plan (then model and layout flags are an error); not yet checked.
 * world > 0 (merak run) lets --dp default to world/(pp*tp).  dtype
 * applies when neither --dtype nor the plan gives one.  Prints the error
 * and returns -1 on bad input. */
struct mk_plan;
struct mk_plan_ctx;
struct mk_plan_resolve_opts;
int mk_args_plan(const mk_args_t *a, const mk_cli_defaults_t *d, int world, int dtype, struct mk_plan *p);
/* --attention-backend (or --use-flash-attn) into *out, the CLI's default
 * auto when neither is given; -1 with the message printed. */
int mk_args_attention(const mk_args_t *a, mk_attn_backend_t *out);
/* --cross-entropy into *out (vocab-parallel when not given); -1 with the
 * message printed. */
int mk_args_xent(const mk_args_t *a, mk_xent_t *out);
int mk_args_elementwise(const mk_args_t *a, int *eager);
/* --fp8-recipe into *out (MK_FP8_DELAYED when not given); -1 with a message. */
int mk_args_fp8_recipe(const mk_args_t *a, mk_fp8_recipe_t *out);
/* What a headline says after an fp8 plan's dtype: "" for the default
 * (delayed) recipe, " (tensorwise scaling)", " (torchao's Float8, ...)". */
const char *mk_cli_fp8_note(mk_fp8_recipe_t r);
/* --overlap-moe-expert-parallel-comm (and --delay-wgrad-compute) into mk_plan_t.moe_a2a_overlap (-1: printed) */
int mk_args_a2a_overlap(const mk_args_t *a, int *out);
/* --moe-enable-deepep / --moe-token-dispatcher-type into mk_plan_t.moe_deepep (-1: printed) */
int mk_args_deepep(const mk_args_t *a, int *deepep);
/* --grad-reduce-dtype D or --accumulate-allreduce-grads-in-fp32 into *out
 * (mk_plan_t.grad_reduce_dtype's encoding), left as it is when neither is
 * given; 0, or -1 with the message printed. */
int mk_args_grad_dtype(const mk_args_t *a, int *out);
/* Resolve it (mk_plan_resolve with ro; stage bounds by --partition, or
 * d's, unless the plan came from a file).  Prints the error and returns
 * -1 on failure; on success free ctx with mk_plan_ctx_free. */
int mk_args_resolve(const mk_args_t *a, const mk_cli_defaults_t *d, const struct mk_plan *p,
                    struct mk_plan_resolve_opts *ro, struct mk_plan_ctx *ctx);

/* cli_argv.c: the tokens after a --data-path whose first is a number
 * joined into its one value, in argv (returns the new argc, or -1); a
 * size such as 5GB, 500MB or 2GiB into *out (0 or -1; mk_error_last) */
int mk_cli_join_blend(int argc, char **argv);
int mk_cli_parse_size(const char *s, int64_t *out);

/* cli_blas.c: OpenBLAS's kernel family.  mk_cli_blas_select: where
 * OpenBLAS fell back to its pre-AVX kernels on a CPU with AVX2/AVX-512
 * and OPENBLAS_CORETYPE is not set, execute argv again with the best
 * family set, and under mpiexec with OPENBLAS_THREAD_TIMEOUT set so that
 * OpenBLAS's idle workers sleep (returns only if nothing is to be done or
 * the exec failed); call it first, before MPI.  mk_cli_blas_describe: which family runs and
 * who chose it, one phrase. */
void mk_cli_blas_select(char **argv);
void mk_cli_blas_describe(char *buf, size_t n);
/* Whether mpiexec (MPICH's PMI, Open MPI, PMIx) started this process. */
int mk_cli_under_mpiexec(void);

#endif
