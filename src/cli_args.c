/* Shared flag parsing for all subcommands (getopt_long).  One table lists
 * every flag of the command-line contract with the group it belongs to; a
 * subcommand passes the groups it accepts and any other flag is rejected. */
#include "config.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum {
    O_MODEL = 256, O_NUM_LAYERS, O_HIDDEN, O_HEADS, O_SEQ, O_VOCAB, O_FFN, O_DTYPE,
    O_DP, O_PP, O_TP, O_MBS, O_GBS, O_VPP, O_VPP_LAYERS,
    O_SCHEDULE, O_RECOMPUTE, O_MICRO_BATCHES, O_VERIFY,
    O_CLUSTER, O_TP_OVERLAP, O_ZERO, O_SEQPAR, O_PARTITION, O_PLAN, O_TRACE,
    O_GPUS, O_TOP, O_SAVE_PLAN,
    O_STEPS, O_BACKEND, O_DATA, O_SAVE, O_LOAD, O_LR, O_MIN_LR, O_WARMUP, O_WD,
    O_CLIP, O_EPS, O_SEED, O_EVAL_INTERVAL,
    O_BASELINE, O_OUT, O_JSON, O_HELP
};

typedef struct {
    const char *name;
    int has_arg;
    int id;
    unsigned group;
} mk_flag_t;

static const mk_flag_t mk_flags[] = {
    {"model", 1, O_MODEL, MK_OPTG_MODEL},
    {"num-layers", 1, O_NUM_LAYERS, MK_OPTG_MODEL},
    {"hidden-size", 1, O_HIDDEN, MK_OPTG_MODEL},
    {"num-attention-heads", 1, O_HEADS, MK_OPTG_MODEL},
    {"seq-length", 1, O_SEQ, MK_OPTG_MODEL},
    {"vocab-size", 1, O_VOCAB, MK_OPTG_MODEL},
    {"ffn-hidden-size", 1, O_FFN, MK_OPTG_MODEL},
    {"dtype", 1, O_DTYPE, MK_OPTG_MODEL},
    {"dp", 1, O_DP, MK_OPTG_LAYOUT},
    {"data-parallel-size", 1, O_DP, MK_OPTG_LAYOUT},
    {"pp", 1, O_PP, MK_OPTG_LAYOUT | MK_OPTG_SCHED},
    {"pipeline-model-parallel-size", 1, O_PP, MK_OPTG_LAYOUT | MK_OPTG_SCHED},
    {"tp", 1, O_TP, MK_OPTG_LAYOUT | MK_OPTG_BATCH},
    {"tensor-model-parallel-size", 1, O_TP, MK_OPTG_LAYOUT | MK_OPTG_BATCH},
    {"mbs", 1, O_MBS, MK_OPTG_LAYOUT | MK_OPTG_BATCH},
    {"micro-batch-size", 1, O_MBS, MK_OPTG_LAYOUT | MK_OPTG_BATCH},
    {"gbs", 1, O_GBS, MK_OPTG_LAYOUT | MK_OPTG_PLAN | MK_OPTG_BATCH},
    {"global-batch-size", 1, O_GBS, MK_OPTG_LAYOUT | MK_OPTG_PLAN | MK_OPTG_BATCH},
    {"vpp", 1, O_VPP, MK_OPTG_LAYOUT | MK_OPTG_SCHED},
    {"num-layers-per-virtual-pipeline-stage", 1, O_VPP_LAYERS, MK_OPTG_LAYOUT},
    {"schedule", 1, O_SCHEDULE, MK_OPTG_SCHED},
    {"recompute", 1, O_RECOMPUTE, MK_OPTG_SCHED},
    {"micro-batches", 1, O_MICRO_BATCHES, MK_OPTG_SCHED},
    {"verify", 0, O_VERIFY, MK_OPTG_SCHED},
    {"cluster", 1, O_CLUSTER, MK_OPTG_SIM | MK_OPTG_PLAN},
    {"tp-overlap", 1, O_TP_OVERLAP, MK_OPTG_SIM},
    {"zero", 1, O_ZERO, MK_OPTG_SIM},
    {"sequence-parallel", 0, O_SEQPAR, MK_OPTG_SIM},
    {"partition", 1, O_PARTITION, MK_OPTG_SIM},
    {"plan", 1, O_PLAN, MK_OPTG_SIM},
    {"trace", 1, O_TRACE, MK_OPTG_SIM | MK_OPTG_PLAN | MK_OPTG_RUN},
    {"gpus", 1, O_GPUS, MK_OPTG_PLAN},
    {"top", 1, O_TOP, MK_OPTG_PLAN},
    {"save-plan", 1, O_SAVE_PLAN, MK_OPTG_PLAN},
    {"baseline", 1, O_BASELINE, MK_OPTG_PLAN},
    {"steps", 1, O_STEPS, MK_OPTG_RUN},
    {"backend", 1, O_BACKEND, MK_OPTG_RUN},
    {"data", 1, O_DATA, MK_OPTG_RUN},
    {"save", 1, O_SAVE, MK_OPTG_RUN},
    {"load", 1, O_LOAD, MK_OPTG_RUN},
    {"lr", 1, O_LR, MK_OPTG_RUN},
    {"min-lr", 1, O_MIN_LR, MK_OPTG_RUN},
    {"lr-warmup-iters", 1, O_WARMUP, MK_OPTG_RUN},
    {"weight-decay", 1, O_WD, MK_OPTG_RUN},
    {"clip-grad", 1, O_CLIP, MK_OPTG_RUN},
    {"adam-eps", 1, O_EPS, MK_OPTG_RUN},
    {"seed", 1, O_SEED, MK_OPTG_RUN},
    {"eval-interval", 1, O_EVAL_INTERVAL, MK_OPTG_RUN},
    {"out", 1, O_OUT, MK_OPTG_OUT},
    {"json", 0, O_JSON, MK_OPTG_JSON},
    {"help", 0, O_HELP, ~0u},
};
#define MK_NFLAGS (sizeof mk_flags / sizeof mk_flags[0])

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

/* Strict integer parse: the whole string, within [lo, INT_MAX]. */
static int parse_int(const char *cmd, const char *flag, const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > INT_MAX) {
        if (lo > 0)
            mk_cli_fail(cmd, "--%s must be an integer >= %d, got '%s'", flag, lo, s);
        else
            mk_cli_fail(cmd, "--%s must be a non-negative integer, got '%s'", flag, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_double(const char *cmd, const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0.0) || v > 1e30) {
        mk_cli_fail(cmd, "--%s must be a non-negative number, got '%s'", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

static void args_init(mk_args_t *a, const char *cmd)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    mk_model_overrides_init(&a->ov);
    a->lr = a->min_lr = a->weight_decay = a->clip_grad = a->adam_eps = -1.0;
    a->lr_warmup_iters = a->seed = a->eval_interval = -1;
    a->steps = -1;
    a->top = -1;
    a->tp_overlap = -1;
}

/* Store one parsed flag; returns 0 or -1 (message printed). */
static int args_store(mk_args_t *a, int id, const char *name, const char *v)
{
    const char *c = a->cmd;
    switch (id) {
    case O_MODEL: a->model = v; a->layout_given = 1; return 0;
    case O_NUM_LAYERS: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.num_layers);
    case O_HIDDEN: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.hidden);
    case O_HEADS: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.heads);
    case O_SEQ: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.seq);
    case O_VOCAB: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.vocab);
    case O_FFN: a->layout_given = 1; return parse_int(c, name, v, 1, &a->ov.ffn);
    case O_DTYPE: a->dtype = v; return 0;
    case O_DP: a->layout_given = 1; return parse_int(c, name, v, 1, &a->dp);
    case O_PP: a->layout_given = 1; return parse_int(c, name, v, 1, &a->pp);
    case O_TP: a->layout_given = 1; return parse_int(c, name, v, 1, &a->tp);
    case O_MBS: a->layout_given = 1; return parse_int(c, name, v, 1, &a->mbs);
    case O_GBS: a->layout_given = 1; return parse_int(c, name, v, 1, &a->gbs);
    case O_VPP: a->layout_given = 1; return parse_int(c, name, v, 1, &a->vpp);
    case O_VPP_LAYERS: a->layout_given = 1; return parse_int(c, name, v, 1, &a->vpp_layers);
    case O_SCHEDULE: a->schedule = v; a->layout_given = 1; return 0;
    case O_RECOMPUTE: a->recompute = v; a->layout_given = 1; return 0;
    case O_MICRO_BATCHES: return parse_int(c, name, v, 1, &a->micro_batches);
    case O_VERIFY: a->verify = 1; return 0;
    case O_CLUSTER: a->cluster = v; return 0;
    case O_TP_OVERLAP: a->layout_given = 1; return parse_int(c, name, v, 0, &a->tp_overlap);
    case O_ZERO: a->layout_given = 1; return parse_int(c, name, v, 0, &a->zero);
    case O_SEQPAR: a->seqpar = 1; a->layout_given = 1; return 0;
    case O_PARTITION: a->partition = v; a->layout_given = 1; return 0;
    case O_PLAN: a->plan_file = v; return 0;
    case O_TRACE: a->trace_file = v; return 0;
    case O_GPUS: return parse_int(c, name, v, 1, &a->gpus);
    case O_TOP: return parse_int(c, name, v, 1, &a->top);
    case O_SAVE_PLAN: a->save_plan = v; return 0;
    case O_BASELINE: a->baseline = v; return 0;
    case O_STEPS: return parse_int(c, name, v, 0, &a->steps);
    case O_BACKEND: a->backend = v; return 0;
    case O_DATA: a->data = v; return 0;
    case O_SAVE: a->save = v; return 0;
    case O_LOAD: a->load = v; return 0;
    case O_LR: return parse_double(c, name, v, &a->lr);
    case O_MIN_LR: return parse_double(c, name, v, &a->min_lr);
    case O_WARMUP: return parse_int(c, name, v, 0, &a->lr_warmup_iters);
    case O_WD: return parse_double(c, name, v, &a->weight_decay);
    case O_CLIP: return parse_double(c, name, v, &a->clip_grad);
    case O_EPS: return parse_double(c, name, v, &a->adam_eps);
    case O_SEED: return parse_int(c, name, v, 0, &a->seed);
    case O_EVAL_INTERVAL: return parse_int(c, name, v, 1, &a->eval_interval);
    case O_OUT: a->out = v; return 0;
    case O_JSON: a->json = 1; return 0;
    }
    return -1;
}

int mk_args_parse(mk_args_t *a, int argc, char **argv, unsigned groups, const char *usage)
{
    struct option opts[MK_NFLAGS + 1];
    int n = 0;
    args_init(a, argv[0]);
    for (size_t i = 0; i < MK_NFLAGS; i++) {
        if (!(mk_flags[i].group & groups)) continue;
        opts[n].name = mk_flags[i].name;
        opts[n].has_arg = mk_flags[i].has_arg ? required_argument : no_argument;
        opts[n].flag = NULL;
        opts[n].val = mk_flags[i].id;
        n++;
    }
    memset(&opts[n], 0, sizeof opts[n]);
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = -1;
        int c = getopt_long(argc, argv, "h", opts, &idx);
        if (c == -1) break;
        if (c == 'h' || c == O_HELP) {
            fputs(usage, stdout);
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
        if (args_store(a, c, opts[idx].name, optarg) < 0) return -1;
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
