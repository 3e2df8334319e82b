/* The maximum of every user-facing number, in one table shared by the
 * command line (src/cli/cli_args.c prints them under --help and refuses what
 * is above), the model and plan checks and the JSON readers, so a file
 * gets the same limits as a flag.
 *
 * Each maximum admits every configuration of the published runs the
 * simulator is validated on (shared/published-runs: up to 3072 GPUs,
 * hidden 25,600, 128 blocks, tp 16, pp 64, mbs 64, gbs 3072, 1120
 * micro-batches per replica) scaled to 100,000 GPUs with sequences of
 * 131072 tokens, a 250,680-token vocabulary, vpp 20 and thousands of
 * micro-batches, and refuses what cannot be a real run (a step of 2^31
 * micro-batches, a micro-batch of 2^30 sequences).  All of them fit in an
 * int; products of them are computed with merak/checked.h. */
#ifndef MERAK_LIMITS_H
#define MERAK_LIMITS_H

#include "merak/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Model sizes (flags, presets, model and plan files). */
#define MK_MAX_LAYERS   1024      /* blocks: 8x the deepest published (128) */
#define MK_MAX_HIDDEN   131072    /* 5x the widest published (25,600) */
#define MK_MAX_HEADS    16384     /* 100x the most published (160) */
#define MK_MAX_HEAD_DIM 4096      /* --kv-channels: 16x the widest published (256, Gemma) */
#define MK_MAX_MTP_LAYERS 16      /* --mtp-num-layers: 16x DeepSeek-V3's 1 */
#define MK_MAX_SEQ      1048576   /* 8x a 131072-token context */
#define MK_MAX_VOCAB    4194304   /* 16x a 250,680-token vocabulary */
#define MK_MAX_FFN      (4 * MK_MAX_HIDDEN) /* the default 4h of the widest model */
#define MK_MAX_WIDTH    MK_MAX_FFN /* any op width of a JSON model */
#define MK_MAX_ROPE_THETA 1e12   /* rotary base: 10^6x Llama-3's 500,000 */
#define MK_MAX_NORM_EPS 1.0       /* normalization epsilon (--norm-epsilon) */
/* Mixture of experts: 64x the most routed experts published (DeepSeek-V3,
 * 256); top-k at most the experts; the capacity factor beyond E/k drops
 * nothing, so 1024 admits every E/k up to it; the aux-loss coefficient is
 * 1e-3 to 1e-2 in the published runs (Switch, Mixtral, DeepSeek). */
#define MK_MAX_EXPERTS  16384
#define MK_MAX_MOE_FFN  MK_MAX_FFN /* expert and shared-expert widths */
#define MK_MAX_MOE_CAPACITY 1024.0
#define MK_MAX_MOE_AUX_COEFF 100.0
/* Expert parallelism: ep divides the experts, so MK_MAX_EXPERTS bounds it;
 * the imbalance factor at most E (every token on one expert) of the most
 * experts: the busiest expert's load over the mean. */
#define MK_MAX_EP       MK_MAX_EXPERTS
#define MK_MAX_MOE_IMBALANCE ((double)MK_MAX_EXPERTS)
#define MK_MAX_GRAPH_OPS 32768    /* ops of one graph: 1024 GPT blocks have 16,384 */

/* Layout and batch (flags and plan files). */
#define MK_MAX_GPUS     1048576   /* 10x 100,000 GPUs; also dp and dp*pp*tp */
#define MK_MAX_TP       1024      /* 64x the widest published (16); must divide the heads */
#define MK_MAX_CP       1024      /* context parallel: 2*cp chunks must divide the sequence */
#define MK_MAX_VSTAGES  512       /* pp x vpp: virtual pipeline stages (plan arrays) */
#define MK_MAX_MBS      65536     /* 1000x the largest published micro-batch (64) */
#define MK_MAX_GBS      268435456 /* 2^28 sequences: 100,000 replicas x 2,684 micro-batches */
#define MK_MAX_MICRO_BATCHES 65536 /* per replica and step: 58x the most published (1120) */
/* A step's schedule size, pp x vpp x micro-batches: each unit is a few
 * instructions per stage in the streams and a few words in the simulator
 * (2^21 units: about 300 MB and 2 s to simulate a GPT-175B step here). */
#define MK_MAX_SCHED_UNITS (1 << 21)
/* What `merak sched` prints (text or JSON: about 5 KB of JSON per unit). */
#define MK_MAX_SCHED_PRINT_UNITS (1 << 15)
#define MK_MAX_TOP      1000      /* plans merak plan reports */
/* merak plan's cost and scaling (issue 21): a GPU-hour at 1000x today's
 * cloud list prices (about $2-10 for an H100); 10^16 tokens, 600x the
 * largest published pretraining run (Llama 3: 15.6T); GPU counts of one
 * --gpus sweep (each a search of its own). */
#define MK_MAX_GPU_HOUR_PRICE 10000.0
#define MK_MAX_TRAIN_TOKENS 1e16
#define MK_MAX_GPU_COUNTS 16
#define MK_MAX_PLAN_CANDIDATES (1L << 18) /* candidates the planner keeps (~0.2 KB each with their stage arrays: about 55 MB) */

/* Training (merak run). */
#define MK_MAX_STEPS    10000000  /* 20x the longest published schedules (~500k steps) */
#define MK_MAX_EVAL_BATCHES 100000
/* Real-valued hyperparameters: 0, or from MK_MIN_POSITIVE_REAL (the
 * executor computes in fp32, whose normal range ends near 1e-38) to the
 * flag's maximum. */
#define MK_MIN_POSITIVE_REAL 1e-30
#define MK_MAX_LR       10.0      /* learning rates (--lr, --min-lr) */
#define MK_MAX_WEIGHT_DECAY 10.0
#define MK_MAX_CLIP_GRAD 1e6
#define MK_MAX_TIMEOUT_MINUTES 10080.0 /* --distributed-timeout-minutes: a week */
#define MK_MAX_ADAM_EPS 1.0
/* Loss scales (--loss-scale, --initial-loss-scale, --min-loss-scale): 2^64.
 * Megatron starts its dynamic scale at 2^32; fp32 gradients ~1e-3 times
 * 2^64 are ~1e16, far inside fp32's range (3.4e38), so a larger scale
 * could only overflow. */
#define MK_MAX_LOSS_SCALE 18446744073709551616.0
#define MK_MAX_LOSS_SCALE_WINDOW 1000000 /* --loss-scale-window: steps (Megatron's default 1000) */
#define MK_MAX_HYSTERESIS 1000000        /* --hysteresis: overflows (Megatron's default 2) */
/* Adam's betas: below 1, or the bias correction 1 - beta^t is 0; 1 - 1e-7
 * is the largest fp32 value under 1 that stays distinct from it (fp32's
 * spacing below 1 is 6e-8). */
#define MK_MAX_ADAM_BETA 0.9999999

/* Record "WHAT must be at most MAX, got V" when v > max; returns 0 or -1. */
static inline int mk_limit_check(const char *what, long long v, long long max)
{
    return v > max ? mk_error_set("%s must be at most %lld, got %lld", what, max, v) : 0;
}

#ifdef __cplusplus
}
#endif
#endif
