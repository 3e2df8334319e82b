/* The command line's flags (cli_flags.c): their ids, the table that gives
 * each its name, groups, value kind and limits, and other tools' names for
 * them.  Private to the cli module (cli_args.c parses with them). */
#ifndef MERAK_CLI_FLAGS_H
#define MERAK_CLI_FLAGS_H

#include <stddef.h>

enum {
    O_MODEL = 256, O_NUM_LAYERS, O_HIDDEN, O_HEADS, O_SEQ, O_VOCAB, O_FFN, O_DTYPE,
    O_NORM, O_SWIGLU, O_POS, O_ROPE_BASE, O_GQA, O_KV_GROUPS, O_KV_CHANNELS, O_UNTIE, O_NO_BIAS, O_QKV_BIAS,
    O_QK_NORM, O_WINDOW, O_ROPE_SCALING, O_ROPE_FACTOR, O_MLA, O_Q_LORA, O_KV_LORA, O_QK_DIM, O_QK_POS_DIM,
    O_V_DIM, O_MOE_ROUTER_BIAS, O_MOE_SCORE, O_MOE_TOPK_SCALE, O_MOE_GROUPS, O_MOE_GROUP_TOPK, O_MTP,
    O_ATT_DROP, O_HID_DROP, O_NORM_EPS,
    O_EXPERTS, O_MOE_TOPK, O_MOE_FFN, O_MOE_SHARED, O_MOE_PRE_SOFTMAX, O_MOE_SHARED_GATE, O_MOE_AUX, O_MOE_CAPACITY,
    O_MOE_FREQ,
    O_DP, O_PP, O_TP, O_CP, O_EP, O_ETP, O_MOE_IMBALANCE, O_MOE_DEEPEP, O_MOE_DISPATCHER, O_MBS, O_GBS, O_VPP, O_VPP_LAYERS,
    O_SCHEDULE, O_RECOMPUTE, O_MICRO_BATCHES, O_VERIFY,
    O_CLUSTER, O_TP_OVERLAP, O_ZERO, O_ZERO_SHARD, O_SEQPAR, O_OVERLAP_GRAD, O_NO_OVERLAP_GRAD, O_ZERO3_PREFETCH, O_NO_ZERO3_PREFETCH, O_ZERO3_PER_PARAM, O_ATTN, O_XENT, O_ELEMENTWISE, O_FP8_RECIPE, O_RESHARD, O_CP_COMM, O_OFFLOAD, O_TP_COMM_OVERLAP, O_PARAM_GATHER, O_SCATTER_GATHER, O_MOE_A2A_OVERLAP, O_DELAY_WGRAD, O_ACT_OFFLOAD, O_FIRST_LAYERS, O_LAST_LAYERS, O_PARTITION, O_PLAN, O_TRACE,
    O_GPUS, O_TOP, O_SAVE_PLAN,
    O_STEPS, O_BACKEND, O_DATA, O_SAVE, O_SAVE_HF, O_HF_SHARD, O_RESET_POS, O_RESET_MASK,
    O_LOAD, O_LR, O_MIN_LR, O_WARMUP, O_WD,
    O_CLIP, O_EPS, O_SEED, O_EVAL_INTERVAL, O_SAVE_INTERVAL, O_DECAY, O_EVAL_BATCHES,
    O_BETA1, O_BETA2, O_LOSS_SCALE, O_INIT_LOSS_SCALE, O_MIN_LOSS_SCALE, O_LOSS_SCALE_WINDOW, O_HYSTERESIS,
    O_LOG_INTERVAL, O_QUIET, O_ACCUM_FP32, O_GRAD_DTYPE, O_MAX_POS, O_RECOMPUTE_METHOD,
    O_BASELINE, O_SCHEDULES, O_EXPORT, O_RECOMPUTE_NUM_LAYERS, O_OUT, O_JSON, O_HELP, O_DIST_TIMEOUT,
    O_EXPLAIN, O_WHAT_IF, O_GPU_HOUR_PRICE, O_TRAIN_TOKENS, O_OBJECTIVE, /* issue 21 */
    O_END /* one past the last flag: sizes the repeat check */
};

/* A flag: its value kind (I integer, R real, S string, N none), whether
 * it is part of the model/layout a --plan file replaces, and for numbers
 * the range [lo, max] (merak/limits.h says why each maximum). */
enum { N = 0, S, I, R };

typedef struct {
    const char *name;
    int id;
    unsigned group;
    int kind, layout;
    int lo;
    double max;
} mk_flag_t;

/* Other tools' names for our flags (Megatron-LM, DeepSpeed; src/cli/README.md
 * "other tools' names"), in this one table: an alias takes
 * its canonical flag's value and limits, or stands for the flag with a
 * fixed value (--bf16 is --dtype bf16), or restricts it to the values the
 * other tool has (--recompute-granularity is --recompute selective|full).
 * An alias and its flag count as the same flag when repeated. */
typedef struct {
    const char *name;
    int id;                 /* the canonical flag */
    const char *value;      /* fixed value (the alias takes none), or NULL */
    const char *values;     /* the values allowed ("a|b"), or NULL: the canonical's */
} mk_alias_t;

extern const mk_flag_t mk_flags[];
extern const size_t mk_nflags;
extern const mk_alias_t mk_aliases[];
extern const size_t mk_naliases;
#define MK_NFLAGS mk_nflags
#define MK_NALIASES mk_naliases

#endif
