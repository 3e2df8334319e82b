/* Shared flag parsing for all subcommands (getopt_long).  One table lists
 * every flag of the command-line contract with the group it belongs to; a
 * subcommand passes the groups it accepts and any other flag is rejected. */
#include "config.h"
#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "merak/limits.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


static const mk_flag_t *flag_by_id(int id)
{
    for (size_t i = 0; i < MK_NFLAGS; i++)
        if (mk_flags[i].id == id) return &mk_flags[i];
    return NULL;
}

int mk_cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "merak %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return MK_EXIT_USAGE;
}

/* Strict integer parse: the whole string, within [lo, max]; messages name
 * the flag as typed (name: an alias or the flag).  Too large
 * (including beyond 64 bits) is told apart from "not an integer". */
static int parse_int(const char *cmd, const mk_flag_t *f, const char *name, const char *s, int *out)
{
    long long v = 0;
    int why = mk_parse_int64(s, f->lo, (long long)f->max, &v);
    if (why == MK_PARSE_ABOVE) {
        mk_cli_fail(cmd, "--%s must be at most %.0f, got %s", name, f->max, s);
        return -1;
    }
    if (why) {
        if (f->lo > 0)
            mk_cli_fail(cmd, "--%s must be an integer >= %d, got '%s'", name, f->lo, s);
        else
            mk_cli_fail(cmd, "--%s must be a non-negative integer, got '%s'", name, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A flag's maximum as %g prints it, with more digits only where %g would
 * round it to another number (0.9999999, not 1). */
static const char *real_max(const mk_flag_t *f, char buf[32])
{
    for (int p = 6; p < 17; p++) {
        snprintf(buf, 32, "%.*g", p, f->max);
        if (strtod(buf, NULL) == f->max) break;
    }
    return buf;
}

/* A real: 0, or from MK_MIN_POSITIVE_REAL to the flag's maximum; from lo
 * when the flag has one (lo > 0). */
static int parse_double(const char *cmd, const mk_flag_t *f, const char *name, const char *s, double *out)
{
    char *end, mx[32];
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0.0)) {
        mk_cli_fail(cmd, "--%s must be a non-negative number, got '%s'", name, s);
        return -1;
    }
    if (v > f->max) {
        mk_cli_fail(cmd, "--%s must be at most %s, got %s", name, real_max(f, mx), s);
        return -1;
    }
    if (f->lo > 0 && v < f->lo) {
        mk_cli_fail(cmd, "--%s must be from %d to %s, got %s", name, f->lo, real_max(f, mx), s);
        return -1;
    }
    if (v > 0 && v < MK_MIN_POSITIVE_REAL) {
        mk_cli_fail(cmd, "--%s %s is out of range: use 0 or a value from %g to %s", name, s,
                    MK_MIN_POSITIVE_REAL, real_max(f, mx));
        return -1;
    }
    *out = v;
    return 0;
}

/* "--pp, --pipeline-model-parallel-size": flag f and its aliases that take a value. */
static void flag_names(const mk_flag_t *f, char *names, size_t cap)
{
    int n = snprintf(names, cap, "--%s", f->name);
    for (size_t j = 0; j < MK_NALIASES && n < (int)cap; j++)
        if (mk_aliases[j].id == f->id && !mk_aliases[j].value && !mk_aliases[j].values)
            n += snprintf(names + n, cap - n, ", --%s", mk_aliases[j].name);
}

/* Under --help: every numeric flag the subcommand takes with its range. */
static void print_limits(unsigned groups)
{
    int any = 0;
    for (size_t i = 0; i < MK_NFLAGS; i++) {
        const mk_flag_t *f = &mk_flags[i];
        if (!(f->group & groups) || (f->kind != I && f->kind != R)) continue;
        if (!any++) printf("\nNumeric limits (out of range: exit 2):\n");
        char names[128], mx[32];
        flag_names(f, names, sizeof names);
        if (f->kind == I) printf("  %-44s %d to %.0f\n", names, f->lo, f->max);
        else if (f->lo > 0) printf("  %-44s %d to %s\n", names, f->lo, real_max(f, mx));
        else printf("  %-44s 0, or %g to %s\n", names, MK_MIN_POSITIVE_REAL, real_max(f, mx));
    }
}

/* Under --help: the Megatron-LM / DeepSpeed names the subcommand takes. */
static void print_aliases(unsigned groups)
{
    int any = 0;
    for (size_t i = 0; i < MK_NALIASES; i++) {
        const mk_alias_t *al = &mk_aliases[i];
        const mk_flag_t *f = flag_by_id(al->id);
        if (!(f->group & groups)) continue;
        if (!any++) printf("\nOther tools' names (Megatron-LM, DeepSpeed), the same flags:\n");
        char alias[64];
        snprintf(alias, sizeof alias, "--%s%s%s", al->name, al->values ? " " : "", al->values ? al->values : "");
        printf("  %-44s --%s%s%s\n", alias, f->name, al->value ? " " : "", al->value ? al->value : "");
    }
}

/* The @key@ fields of mk_cli_defaults_t, for --help. */
#define D_STR(f) {#f, offsetof(mk_cli_defaults_t, f), S}
#define D_INT(f) {#f, offsetof(mk_cli_defaults_t, f), I}
static const struct {
    const char *key;
    size_t off;
    int kind;
} mk_default_keys[] = {
    D_STR(model), D_STR(cluster), D_INT(gbs), D_STR(schedule), D_STR(recompute), D_STR(partition),
    D_INT(vpp), D_INT(gpus), D_INT(top), D_INT(steps), D_INT(seed), D_STR(lr), D_STR(weight_decay),
    D_STR(clip_grad), D_STR(adam_eps), D_STR(adam_beta1), D_STR(adam_beta2), D_STR(out),
};
#undef D_STR
#undef D_INT

/* Print the value of default `key` (n characters); 0 if there is no such key. */
static int print_default(const mk_cli_defaults_t *d, const char *key, size_t n)
{
    for (size_t i = 0; d && i < sizeof mk_default_keys / sizeof *mk_default_keys; i++) {
        const char *at = (const char *)d + mk_default_keys[i].off;
        if (strlen(mk_default_keys[i].key) != n || strncmp(mk_default_keys[i].key, key, n)) continue;
        if (mk_default_keys[i].kind == I) printf("%d", *(const int *)at);
        else fputs(*(const char *const *)at ? *(const char *const *)at : "", stdout);
        return 1;
    }
    return 0;
}

/* The usage text with each @key@ replaced by the subcommand's default. */
static void print_usage(const char *u, const mk_cli_defaults_t *d)
{
    for (const char *c = u; *c; c++) {
        const char *end = *c == '@' ? strchr(c + 1, '@') : NULL;
        if (end && print_default(d, c + 1, (size_t)(end - c - 1))) c = end;
        else putchar(*c);
    }
}

static void args_init(mk_args_t *a, const char *cmd)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    mk_model_overrides_init(&a->ov);
    a->lr = a->min_lr = a->weight_decay = a->clip_grad = a->adam_eps = a->adam_beta1 = a->adam_beta2 = -1.0;
    a->timeout_min = -1.0;
    a->loss_scale = a->initial_loss_scale = a->min_loss_scale = -1.0;
    a->lr_warmup_iters = a->seed = a->eval_interval = -1;
    a->steps = -1;
    a->top = -1;
    a->tp_overlap = -1;
    a->overlap_grad_reduce = -1;
    a->zero3_prefetch = -1;
    a->recompute_num_layers = -1; /* not given (0 is a value: block 0)  */
}

/* Where an integer flag's value goes (NULL: not an integer flag). */
static int *int_slot(mk_args_t *a, int id)
{
    switch (id) {
    case O_NUM_LAYERS: return &a->ov.num_layers;
    case O_HIDDEN: return &a->ov.hidden;
    case O_HEADS: return &a->ov.heads;
    case O_SEQ: return &a->ov.seq;
    case O_VOCAB: return &a->ov.vocab;
    case O_FFN: return &a->ov.ffn;
    case O_KV_GROUPS: return &a->ov.kv_heads;
    case O_KV_CHANNELS: return &a->ov.kv_channels;
    case O_Q_LORA: return &a->ov.q_lora_rank;
    case O_KV_LORA: return &a->ov.kv_lora_rank;
    case O_QK_DIM: return &a->ov.qk_head_dim;
    case O_QK_POS_DIM: return &a->ov.qk_pos_emb_head_dim;
    case O_V_DIM: return &a->ov.v_head_dim;
    case O_MTP: return &a->ov.mtp_layers;
    case O_EXPERTS: return &a->ov.num_experts;
    case O_MOE_TOPK: return &a->ov.moe_topk;
    case O_MOE_FFN: return &a->ov.moe_ffn;
    case O_MOE_SHARED: return &a->ov.moe_shared_ffn;
    case O_MOE_GROUPS: return &a->ov.moe_groups;
    case O_MOE_GROUP_TOPK: return &a->ov.moe_group_topk;
    case O_DP: return &a->dp;
    case O_PP: return &a->pp;
    case O_TP: return &a->tp;
    case O_CP: return &a->cp;
    case O_EP: return &a->ep;
    case O_ETP: return &a->etp;
    case O_MBS: return &a->mbs;
    case O_GBS: return &a->gbs;
    case O_VPP: return &a->vpp;
    case O_VPP_LAYERS: return &a->vpp_layers;
    case O_MICRO_BATCHES: return &a->micro_batches;
    case O_TP_OVERLAP: return &a->tp_overlap;
    case O_ACT_OFFLOAD: return &a->cpu_offload_layers;
    case O_FIRST_LAYERS: return &a->first_stage_layers;
    case O_LAST_LAYERS: return &a->last_stage_layers;
    case O_ZERO: return &a->zero;
    case O_GPUS: return &a->gpus;
    case O_RECOMPUTE_NUM_LAYERS: return &a->recompute_num_layers;
    case O_TOP: return &a->top;
    case O_STEPS: return &a->steps;
    case O_WARMUP: return &a->lr_warmup_iters;
    case O_DECAY: return &a->lr_decay_iters;
    case O_SEED: return &a->seed;
    case O_LOSS_SCALE_WINDOW: return &a->loss_scale_window;
    case O_HYSTERESIS: return &a->hysteresis;
    case O_EVAL_INTERVAL: return &a->eval_interval;
    case O_EVAL_BATCHES: return &a->eval_batches;
    case O_SAVE_INTERVAL: return &a->save_interval;
    case O_LOG_INTERVAL: return &a->log_interval;
    case O_MAX_POS: return &a->ov.max_pos;
    }
    return NULL;
}

static double *real_slot(mk_args_t *a, int id)
{
    switch (id) {
    case O_LR: return &a->lr;
    case O_MIN_LR: return &a->min_lr;
    case O_WD: return &a->weight_decay;
    case O_CLIP: return &a->clip_grad;
    case O_DIST_TIMEOUT: return &a->timeout_min;
    case O_EPS: return &a->adam_eps;
    case O_BETA1: return &a->adam_beta1;
    case O_BETA2: return &a->adam_beta2;
    case O_LOSS_SCALE: return &a->loss_scale;
    case O_INIT_LOSS_SCALE: return &a->initial_loss_scale;
    case O_MIN_LOSS_SCALE: return &a->min_loss_scale;
    case O_ROPE_BASE: return &a->ov.rope_theta;
    case O_ROPE_FACTOR: return &a->ov.rope_scaling_factor;
    case O_NORM_EPS: return &a->ov.norm_eps;
    case O_ATT_DROP: return &a->ov.attention_dropout;
    case O_HID_DROP: return &a->ov.hidden_dropout;
    case O_MOE_AUX: return &a->ov.moe_aux_coeff;
    case O_MOE_CAPACITY: return &a->ov.moe_capacity;
    case O_MOE_TOPK_SCALE: return &a->ov.moe_topk_scale;
    case O_MOE_IMBALANCE: return &a->moe_imbalance;
    case O_GPU_HOUR_PRICE: return &a->gpu_hour_price;
    case O_TRAIN_TOKENS: return &a->train_tokens;
    }
    return NULL;
}

static const char **str_slot(mk_args_t *a, int id)
{
    switch (id) {
    case O_MODEL: return &a->model;
    case O_DTYPE: return &a->dtype;
    case O_SCHEDULE: return &a->schedule;
    case O_RECOMPUTE: return &a->recompute;
    case O_RECOMPUTE_METHOD: return &a->recompute_method;
    case O_MOE_DISPATCHER: return &a->moe_dispatcher;
    case O_CLUSTER: return &a->cluster;
    case O_PARTITION: return &a->partition;
    case O_ZERO_SHARD: return &a->zero_shard_group;
    case O_PLAN: return &a->plan_file;
    case O_TRACE: return &a->trace_file;
    case O_SAVE_PLAN: return &a->save_plan;
    case O_BASELINE: return &a->baseline;
    case O_SCHEDULES: return &a->schedules;
    case O_EXPORT: return &a->export_to;
    case O_BACKEND: return &a->backend;
    case O_DATA: return &a->data;
    case O_SAVE: return &a->save;
    case O_SAVE_HF: return &a->save_hf;
    case O_LOAD: return &a->load;
    case O_OUT: return &a->out;
    case O_OBJECTIVE: return &a->objective;
    case O_ATTN: return &a->attention;
    case O_XENT: return &a->cross_entropy;
    case O_ELEMENTWISE: return &a->elementwise;
    case O_FP8_RECIPE: return &a->fp8_recipe;
    case O_RESHARD: return &a->reshard;
    case O_CP_COMM: return &a->cp_comm;
    case O_GRAD_DTYPE: return &a->grad_dtype;
    }
    return NULL;
}

/* The architecture flags given as names or alone (model.h's overrides). */
static int arch_store(mk_args_t *a, int id, const char *v)
{
    mk_norm_kind_t nk;
    mk_pos_kind_t pk;
    switch (id) {
    case O_NORM:
        if (mk_norm_parse(v, &nk) < 0) return mk_cli_fail(a->cmd, "--normalization: %s", mk_error_last()), -1;
        a->ov.norm = (int)nk;
        return 0;
    case O_MOE_SCORE:
        if (strcmp(v, "softmax") && strcmp(v, "sigmoid"))
            return mk_cli_fail(a->cmd, "--moe-router-score-function: '%s' is not softmax or sigmoid", v), -1;
        a->ov.moe_score_sigmoid = !strcmp(v, "sigmoid");
        return 0;
    case O_POS:
        if (mk_pos_parse(v, &pk) < 0)
            return mk_cli_fail(a->cmd, "--position-embedding-type: %s", mk_error_last()), -1;
        a->ov.pos = (int)pk;
        return 0;
    case O_HF_SHARD:
        if (mk_cli_parse_size(v, &a->hf_max_shard) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
        return 0;
    case O_WINDOW:
        if (mk_window_size_parse(v, &a->ov.window) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
        return 0;
    case O_MOE_FREQ:
        if (mk_moe_layer_freq_parse(v, &a->ov.moe_layer_freq, &a->ov.moe_first_dense, &a->ov.moe_pattern_len) < 0)
            return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
        return 0;
    case O_MOE_PRE_SOFTMAX: a->ov.moe_pre_softmax = 1; return 0;
    case O_MOE_SHARED_GATE: a->ov.moe_shared_gate = 1; return 0;
    case O_SWIGLU: a->ov.swiglu = 1; return 0;
    case O_GQA: a->ov.group_query_attention = 1; return 0;
    case O_UNTIE: a->ov.untied = 1; return 0;
    case O_NO_BIAS: a->ov.bias = 0; return 0;
    case O_QKV_BIAS: a->ov.qkv_bias = 1; return 0;
    case O_QK_NORM: a->ov.qk_norm = 1; return 0;
    case O_RESET_POS: a->reset_pos = 1; return 0;
    case O_RESET_MASK: a->reset_mask = 1; return 0;
    case O_ROPE_SCALING: a->ov.use_rope_scaling = 1; return 0;
    case O_MLA: a->ov.mla = 1; return 0;
    case O_MOE_ROUTER_BIAS: a->ov.moe_router_bias = 1; return 0;
    }
    return 1;
}

/* Values a string flag accepts beyond its slot: --recompute-method is
 * Megatron-LM's, of which merak's full recompute is "uniform" (every
 * block checkpointed, --recompute-num-layers 1) and no recompute "block"
 * with --recompute-num-layers 0 (the first 0 blocks of a stage: what
 * --export megatron writes for none); block with N > 0 has no
 * counterpart (mk_args_plan checks N). */
static int check_string(const mk_args_t *a, int id, const char *name, const char *v)
{
    if (id == O_MOE_DISPATCHER && strcmp(v, "alltoall") && strcmp(v, "flex"))
        return mk_cli_fail(a->cmd, "--%s must be alltoall or flex (merak models the all-to-all dispatch), got '%s'",
                           name, v), -1;
    if (id != O_RECOMPUTE_METHOD || !strcmp(v, "uniform") || !strcmp(v, "block")) return 0;
    return mk_cli_fail(a->cmd, "--%s must be uniform or block, got '%s'", name, v), -1;
}

/* Store one parsed flag (typed as name); returns 0 or -1 (message printed). */
static int args_store(mk_args_t *a, const mk_flag_t *f, const char *name, const char *v)
{
    if (f->layout) a->layout_given = 1;
    if (f->id == O_GPUS && strchr(v, ',')) return mk_args_gpus_list(a, v); /* cli_explain.c */
    int rc = arch_store(a, f->id, v);
    if (rc <= 0) return rc;
    switch (f->kind) {
    case I: return parse_int(a->cmd, f, name, v, int_slot(a, f->id));
    case R: return parse_double(a->cmd, f, name, v, real_slot(a, f->id));
    case S:
        if (check_string(a, f->id, name, v) < 0) return -1;
        *str_slot(a, f->id) = v;
        return 0;
    }
    if (f->id == O_VERIFY) a->verify = 1;
    else if (f->id == O_SEQPAR) a->seqpar = 1;
    else if (f->id == O_MOE_DEEPEP) a->moe_deepep = 1;
    else if (f->id == O_OFFLOAD) a->optimizer_offload = 1;
    else if (f->id == O_TP_COMM_OVERLAP) a->tp_comm_overlap = 1;
    else if (f->id == O_PARAM_GATHER) a->overlap_param_gather = 1;
    else if (f->id == O_SCATTER_GATHER) a->scatter_gather_p2p = 1;
    else if (f->id == O_MOE_A2A_OVERLAP) a->moe_a2a_overlap = 1;
    else if (f->id == O_DELAY_WGRAD) a->delay_wgrad = 1;
    else if (f->id == O_OVERLAP_GRAD || f->id == O_NO_OVERLAP_GRAD) a->overlap_grad_reduce = f->id == O_OVERLAP_GRAD;
    else if (f->id == O_ZERO3_PREFETCH || f->id == O_NO_ZERO3_PREFETCH) a->zero3_prefetch = f->id == O_ZERO3_PREFETCH;
    else if (f->id == O_ZERO3_PER_PARAM) a->zero3_per_param = 1;
    else if (f->id == O_JSON) a->json = 1;
    else if (f->id == O_EXPLAIN) a->explain = 1;
    else if (f->id == O_WHAT_IF) a->what_if = 1;
    else if (f->id == O_QUIET) a->quiet = 1;
    else if (f->id == O_ACCUM_FP32) a->grad_reduce_dtype = MK_DTYPE_FP32 + 1;
    return 0;
}

/* One option as typed: a flag, or an alias of one. */
typedef struct {
    const mk_flag_t *f;
    const mk_alias_t *alias;
} mk_opt_t;

/* getopt_long's table of the flags in groups (--help in every one) and
 * their aliases; returns the count. */
static int build_opts(unsigned groups, struct option *opts, mk_opt_t *which)
{
    int n = 0;
    for (size_t i = 0; i < MK_NFLAGS; i++) {
        if (!(mk_flags[i].group & groups) && mk_flags[i].id != O_HELP) continue;
        opts[n] = (struct option){mk_flags[i].name, mk_flags[i].kind != N ? required_argument : no_argument,
                                  NULL, mk_flags[i].id};
        which[n++] = (mk_opt_t){&mk_flags[i], NULL};
    }
    for (size_t i = 0; i < MK_NALIASES; i++) {
        const mk_flag_t *f = flag_by_id(mk_aliases[i].id);
        if (!(f->group & groups)) continue;
        opts[n] = (struct option){mk_aliases[i].name, mk_aliases[i].value ? no_argument : required_argument,
                                  NULL, f->id};
        which[n++] = (mk_opt_t){f, &mk_aliases[i]};
    }
    memset(&opts[n], 0, sizeof opts[n]);
    return n;
}

/* The slot a flag fills: --overlap-grad-reduce and --no-overlap-grad-reduce
 * set one value, so they count as one flag (and the prefetch's pair). */
static int flag_key(int id)
{
    return (id == O_NO_OVERLAP_GRAD ? O_OVERLAP_GRAD : id == O_NO_ZERO3_PREFETCH ? O_ZERO3_PREFETCH : id) - O_MODEL;
}

/* One option: refused when its flag was given before (under any of its
 * names: no flag is repeatable, so a repeat is a mistake, not "the last
 * wins"); an alias's value checked or implied; then stored. */
static int take_opt(mk_args_t *a, const mk_opt_t *o, const char *arg, const char **seen)
{
    const char *name = o->alias ? o->alias->name : o->f->name;
    const char **prev = &seen[flag_key(o->f->id)];
    if (*prev && !strcmp(*prev, name)) return mk_cli_fail(a->cmd, "--%s is given twice: give it once", name), -1;
    if (*prev)
        return mk_cli_fail(a->cmd, "--%s and --%s are the same flag: give it once", *prev, name), -1;
    *prev = name;
    if (o->alias && o->alias->value) arg = o->alias->value;
    if (o->alias && o->alias->values) {
        const char *vs = o->alias->values;
        size_t n = strlen(arg);
        const char *at = strstr(vs, arg);
        int ok = n && at && (at == vs || at[-1] == '|') && (at[n] == 0 || at[n] == '|');
        if (!ok) return mk_cli_fail(a->cmd, "--%s must be one of %s, got '%s'", name, vs, arg), -1;
    }
    return args_store(a, o->f, name, arg);
}

int mk_args_parse(mk_args_t *a, int argc, char **argv, unsigned groups, const char *usage,
                  const mk_cli_defaults_t *d)
{
    if ((argc = mk_cli_join_blend(argc, argv)) < 0) return mk_cli_fail(argv[0], "%s", mk_error_last()), -1;
    struct option opts[MK_NFLAGS + MK_NALIASES + 1];
    mk_opt_t which[MK_NFLAGS + MK_NALIASES];
    const char *seen[O_END - O_MODEL] = {NULL};
    build_opts(groups, opts, which);
    args_init(a, argv[0]);
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = -1;
        int c = getopt_long(argc, argv, "h", opts, &idx);
        if (c == -1) break;
        if (c == 'h' || c == O_HELP) {
            print_usage(usage, d);
            print_aliases(groups);
            print_limits(groups); /* last: tests/sweep-lib.sh reads it to the end */
            return 1;
        }
        if (c == '?' || c == ':') {
            const char *bad = argv[optind - 1];
            if (optopt && optopt >= 256)
                mk_cli_fail(a->cmd, "option '%s' needs a value", bad);
            else
                mk_cli_fail(a->cmd, "unknown option '%s' (see 'merak %s --help')", bad, a->cmd);
            return -1;
        }
        if (take_opt(a, &which[idx], optarg, seen) < 0) return -1;
    }
    a->npos = argc - optind;
    a->pos = argv + optind;
    return 0;
}

int mk_args_model(const mk_args_t *a, const char *deflt, mk_model_config_t *cfg)
{
    if (mk_model_resolve(a->model ? a->model : deflt, &a->ov, cfg) < 0) {
        mk_cli_fail(a->cmd, "%s", mk_error_last());
        return -1;
    }
    return 0;
}
