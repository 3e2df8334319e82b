/* Plans: layout checks, uniform partitioning, scheduler specs, JSON. */
#include "merak/plan.h"
#include "merak/checked.h"
#include "merak/limits.h"
#include "merak/partition.h"
#include "merak/sched.h"
#include "merak/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mk_plan_init(mk_plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->dtype = MK_DTYPE_BF16;
    p->dp = p->pp = p->tp = p->cp = p->ep = p->vpp = p->mbs = 1;
    p->moe_imbalance = 1.0;
    p->gbs = 1;
    p->schedule = MK_SCHED_1F1B;
    p->recompute.kind = MK_RECOMPUTE_FULL;
    p->overlap_grad_reduce = 1;
    p->zero3_prefetch = 1;
    mk_strlcpy(p->partition, "uniform", sizeof p->partition);
}

static int check_bounds(const mk_plan_t *p, const mk_graph_t *g)
{
    if (p->bounds[0] != 0 || p->bounds[p->n_vstages] != g->n_layers)
        return mk_error_set("stage bounds must start at layer 0 and end at layer %d", g->n_layers);
    for (int k = 0; k < p->n_vstages; k++)
        if (p->bounds[k + 1] <= p->bounds[k])
            return mk_error_set("stage bounds must increase: virtual stage %d is empty", k);
    return 0;
}

int mk_plan_micro_batches(const mk_plan_t *p)
{
    int64_t rep = (int64_t)p->dp * p->mbs; /* ints: no overflow in 64 bits */
    return rep > 0 && p->gbs % rep == 0 ? (int)(p->gbs / rep) : 0;
}

int64_t mk_plan_vstages(const mk_plan_t *p) { return mk_vstages(p->pp, p->vpp); }

int mk_plan_vstage(const mk_plan_t *p, int s, int c)
{
    return mk_sched_vstage(mk_sched_traits(p->schedule)->vshape, p->pp, s, c);
}

int mk_plan_ends_apart(const mk_plan_t *p) { return mk_sched_ends_apart(p->schedule, p->pp, p->vpp); }

int mk_plan_head_stage(const mk_plan_t *p)
{
    return mk_sched_vstage_stage(mk_sched_traits(p->schedule)->vshape, p->pp, p->pp * p->vpp - 1);
}

int mk_plan_dp_cp(const mk_plan_t *p) { return p->dp * (p->cp > 1 ? p->cp : 1); }

int mk_plan_zero(const mk_plan_t *p) { return mk_plan_dp_cp(p) > 1 ? p->zero : 0; }

int mk_plan_zero_group(const mk_plan_t *p)
{
    return (p->zero_shard > 0 ? p->zero_shard : p->dp) * (p->cp > 1 ? p->cp : 1);
}

int64_t mk_plan_gpus(const mk_plan_t *p) { return (int64_t)p->dp * (p->cp > 1 ? p->cp : 1) * p->pp * p->tp; }

mk_plan_layout_str_t mk_plan_layout_str(const mk_plan_t *p, const char *sep)
{
    mk_plan_layout_str_t r;
    if (p->cp > 1) snprintf(r.s, sizeof r.s, "dp %d%scp %d%spp %d%stp %d", p->dp, sep, p->cp, sep, p->pp, sep, p->tp);
    else snprintf(r.s, sizeof r.s, "dp %d%spp %d%stp %d", p->dp, sep, p->pp, sep, p->tp);
    if (p->ep > 1) { /* the EP ranks fold the stage's: named after the layout, not a factor of it */
        size_t n = strlen(r.s);
        snprintf(r.s + n, sizeof r.s - n, " (ep %d%s%s)", p->ep, p->moe_deepep ? ", DeepEP" : "",
                 p->moe_a2a_overlap ? ", a2a overlap" : "");
    }
    return r;
}

void mk_plan_trace_meta(const mk_plan_t *p, mk_trace_t *t)
{
    char v[64];
    mk_trace_meta(t, "model", p->model.name);
    mk_trace_meta(t, "layout", mk_plan_layout_str(p, " x ").s);
    if (p->vpp > 1) snprintf(v, sizeof v, "%s, vpp %d", mk_sched_kind_name(p->schedule), p->vpp);
    else snprintf(v, sizeof v, "%s", mk_sched_kind_name(p->schedule));
    mk_trace_meta(t, "schedule", v);
    snprintf(v, sizeof v, "%d", mk_plan_micro_batches(p));
    mk_trace_meta(t, "micro_batches", v);
}

int mk_plan_zero_shard_node(mk_plan_t *p, int gpus_per_node)
{
    int tc = p->tp * (p->cp > 1 ? p->cp : 1); /* a DP rank's tp x cp GPUs */
    int k = tc > 0 && gpus_per_node > tc ? gpus_per_node / tc : 1;
    if (k > p->dp) k = p->dp;
    if (p->dp % k)
        return mk_error_set("--zero-shard-group node: the %d data-parallel ranks of a node (%d GPUs / tp %d) "
                            "do not divide dp %d", k, gpus_per_node, p->tp, p->dp);
    p->zero_shard = k < p->dp ? k : 0;
    return 0;
}

int mk_plan_check_sizes(mk_plan_t *p)
{
    if (p->dp < 1 || p->pp < 1 || p->tp < 1 || p->cp < 1 || p->ep < 1 || p->vpp < 1 || p->mbs < 1 || p->gbs < 1)
        return mk_error_set("dp, pp, tp, cp, ep, vpp, mbs and gbs must all be >= 1");
    if (mk_limit_check("dp", p->dp, MK_MAX_GPUS) < 0 || mk_limit_check("pp", p->pp, MK_MAX_VSTAGES) < 0 ||
        mk_limit_check("tp", p->tp, MK_MAX_TP) < 0 || mk_limit_check("cp", p->cp, MK_MAX_CP) < 0 ||
        mk_limit_check("ep", p->ep, MK_MAX_EP) < 0 ||
        mk_limit_check("vpp", p->vpp, MK_MAX_VSTAGES) < 0 ||
        mk_limit_check("mbs", p->mbs, MK_MAX_MBS) < 0 || mk_limit_check("gbs", p->gbs, MK_MAX_GBS) < 0)
        return -1;
    int64_t n, nv = mk_plan_vstages(p);
    if (MK_PROD_WITHIN(MK_MAX_GPUS, &n, p->dp, p->cp, p->pp, p->tp) < 0)
        return mk_error_set("%s is more than %d GPUs, the most a plan may use", mk_plan_layout_str(p, " x ").s,
                            MK_MAX_GPUS);
    if (nv > MK_MAX_VSTAGES)
        return mk_error_set("pp %d x vpp %d = %lld virtual stages; at most %d are supported", p->pp, p->vpp,
                            (long long)nv, MK_MAX_VSTAGES);
    p->n_vstages = (int)nv;
    if (!(p->m = mk_plan_micro_batches(p)))
        return mk_error_set("global batch %d is not divisible by dp %d x micro-batch %d", p->gbs, p->dp, p->mbs);
    if (p->m > MK_MAX_MICRO_BATCHES)
        return mk_error_set("%d micro-batches per replica (gbs %d / (dp %d x mbs %d)); a step may have at most %d",
                            p->m, p->gbs, p->dp, p->mbs, MK_MAX_MICRO_BATCHES);
    if (mk_plan_check_grad_dtype(p) < 0) return -1;
    return mk_sched_check_size(p->pp, p->vpp, p->m);
}

int mk_plan_check_gpus(const mk_plan_t *p, const mk_cluster_t *c)
{
    long gpus = (long)mk_plan_gpus(p);
    if (c->max_nodes > 0 && gpus > (long)c->max_nodes * c->gpus_per_node)
        return mk_error_set("the layout needs %ld GPUs (%s) but cluster '%s' has %d", gpus,
                            mk_plan_layout_str(p, " x ").s, c->name, c->max_nodes * c->gpus_per_node);
    return 0;
}

/* Megatron-Core's distributed optimizer instances cut the expert
 * data-parallel group too (intra_partial_expert_data_parallel_size =
 * expert_data_parallel_size / num_distributed_optimizer_instances): a
 * hybrid ZeRO group's ranks, x tp (the EP groups fold them), hold whole
 * EP groups. */
int mk_plan_zero_ep_ok(const mk_plan_t *p)
{
    return !(p->zero && p->zero_shard && p->ep > 1 && ((int64_t)mk_plan_zero_group(p) * p->tp) % p->ep);
}

/* Expert parallelism: ep divides the stage's tp x cp x dp ranks (Megatron-
 * Core's MoE parallel folding with expert tensor parallelism 1: the EP
 * groups are ep consecutive ranks of the stage, tp fastest) and the
 * experts; > 1 needs experts; a hybrid ZeRO group holds whole EP groups
 * (mk_plan_zero_ep_ok);
 * the imbalance factor from 1 to its maximum, other than 1 only with experts. */
int mk_plan_check_zero3(const mk_plan_t *p)
{
    if (!p->zero3_prefetch && p->zero != 3)
        return mk_error_set("--no-zero3-prefetch (zero3_prefetch false) needs --zero 3 (got --zero %d)", p->zero);
    if (p->zero3_per_param && p->zero != 3)
        return mk_error_set("--zero3-per-param-collectives (zero3_per_param_collectives) needs --zero 3 (got --zero %d)",
                            p->zero);
    return 0;
}

int mk_plan_check_ep(const mk_plan_t *p)
{
    int E = p->model.num_experts;
    if (!(p->moe_imbalance >= 1.0 && p->moe_imbalance <= MK_MAX_MOE_IMBALANCE))
        return mk_error_set("--moe-imbalance must be from 1 to %g, got %g", MK_MAX_MOE_IMBALANCE, p->moe_imbalance);
    if (p->moe_imbalance != 1.0 && E <= 0)
        return mk_error_set("--moe-imbalance %g needs a model with experts (this one is dense)", p->moe_imbalance);
    if (p->moe_deepep && E <= 0) return mk_error_set("--moe-enable-deepep needs a model with experts (this one is dense)");
    if (p->ep == 1) return 0;
    if (E <= 0) return mk_error_set("--ep %d needs a model with experts (this one is dense)", p->ep);
    int64_t ranks = (int64_t)p->tp * (p->cp > 1 ? p->cp : 1) * p->dp;
    if (ranks % p->ep)
        return mk_error_set("--ep %d does not divide a stage's tp x cp x dp = %lld ranks (the EP groups fold them: "
                            "expert tensor parallelism 1)", p->ep, (long long)ranks);
    if (E % p->ep) return mk_error_set("--ep %d does not divide the %d experts", p->ep, E);
    if (!mk_plan_zero_ep_ok(p))
        return mk_error_set("--ep %d must divide the %lld ranks of a hybrid ZeRO group (%d DP ranks x tp %d%s): "
                            "Megatron-Core's optimizer instances split the expert data-parallel group", p->ep,
                            (long long)mk_plan_zero_group(p) * p->tp, mk_plan_zero_group(p), p->tp,
                            p->cp > 1 ? ", cp included" : "");
    return 0;
}

const char *mk_plan_moe_a2a_overlap_why(const mk_plan_t *p)
{
    if (p->ep <= 1) return "expert parallelism (--ep 2 or more)";
    if (p->schedule != MK_SCHED_INTERLEAVED && !(p->schedule == MK_SCHED_1F1B && p->pp == 1))
        return "1f1b at pp 1 or the interleaved schedule (virtual stages where pp > 1)";
    if (p->recompute.kind != MK_RECOMPUTE_NONE && p->recompute.kind != MK_RECOMPUTE_SELECTIVE)
        return "recompute none or selective (no recompute granularity full, no recompute method)";
    if (p->dtype == MK_DTYPE_FP32) return "a 16-bit model (bf16, fp16 or fp8)";
    return NULL;
}

static int check_cp_comm(const mk_plan_t *p, const mk_graph_t *g);

/* The rules of mk_plan_check that need the graph, on a plan whose sizes
 * are checked (n_vstages and m filled). */
int mk_plan_check_layout(const mk_plan_t *p, const mk_graph_t *g)
{
    int blocks = g->cfg.family == MK_FAMILY_CUSTOM ? g->n_layers : g->cfg.num_layers;
    if (p->pp > blocks)
        return mk_error_set("pipeline size %d exceeds the model's %d blocks", p->pp, blocks);
    if (p->n_vstages > g->n_layers)
        return mk_error_set("%d virtual stages (pp %d x vpp %d) exceed the model's %d layers",
                            p->n_vstages, p->pp, p->vpp, g->n_layers);
    const mk_sched_traits_t *tr = mk_sched_traits(p->schedule);
    if (tr->interleaved) {
        if (p->vpp < 2) return mk_error_set("the %s schedule needs --vpp >= 2", mk_sched_kind_name(p->schedule));
        if (tr->max_vpp && p->vpp > tr->max_vpp)
            return mk_error_set("the %s schedule runs --vpp %d (two chunks per stage in a V), not %d",
                                mk_sched_kind_name(p->schedule), tr->max_vpp, p->vpp);
        if (p->m < tr->min_m_per_pp * p->pp)
            return mk_error_set("%s needs at least %d x pp = %d micro-batches per replica (got %d)",
                                mk_sched_kind_name(p->schedule), tr->min_m_per_pp, tr->min_m_per_pp * p->pp, p->m);
        if (mk_sched_traits(p->schedule)->m_per_pp && p->m % p->pp)
            return mk_error_set("interleaved needs micro-batches (%d) to be a multiple of pp (%d)",
                                p->m, p->pp);
    } else if (p->vpp != 1) {
        return mk_error_set("--vpp %d needs the interleaved schedule", p->vpp);
    }
    if (p->cp > 1 && mk_model_window_share(&g->cfg) < 1)
        return mk_error_set("--cp %d with a sliding attention window of %d: Megatron-Core's ring (p2p) context "
                            "parallelism does not run windowed attention, so merak neither models nor runs it",
                            p->cp, g->cfg.window);
    if (p->cp > 1 && g->cfg.seq % (2 * p->cp))
        return mk_error_set("--cp %d: the sequence (%d) must split into 2 x cp = %d equal chunks", p->cp, g->cfg.seq,
                            2 * p->cp);
    if (mk_plan_check_ep(p) < 0 || check_cp_comm(p, g) < 0) return -1;
    if (p->zero < 0 || p->zero > 3) return mk_error_set("--zero must be 0, 1, 2 or 3");
    if (p->zero_shard < 0 || p->zero_shard > p->dp || (p->zero_shard && p->dp % p->zero_shard))
        return mk_error_set("ZeRO sharding group %d does not divide dp %d", p->zero_shard, p->dp);
    if (p->zero_shard && !p->zero) return mk_error_set("a ZeRO sharding group needs --zero 1, 2 or 3");
    if (p->cpu_offload_layers && (p->pp > 1 || p->recompute.kind != MK_RECOMPUTE_NONE ||
                                  p->cpu_offload_layers < 0 || p->cpu_offload_layers >= g->cfg.num_layers))
        return mk_error_set("--cpu-offloading-num-layers %d needs pp 1, --recompute none and fewer layers than the "
                            "model's %d blocks (Megatron-Core's rules)", p->cpu_offload_layers, g->cfg.num_layers);
    if (p->reshard == MK_RESHARD_NEVER && p->zero != 3)
        return mk_error_set("--fsdp-reshard-after-forward never needs --zero 3 (got --zero %d)", p->zero);
    if (p->tp_overlap < 0 || p->tp_overlap > 3) return mk_error_set("--tp-overlap must be 0..3");
    const char *why = p->moe_a2a_overlap ? mk_plan_moe_a2a_overlap_why(p) : NULL;
    if (why) return mk_error_set("--overlap-moe-expert-parallel-comm needs %s (Megatron-Core's rule)", why);
    if (p->fp8_recipe != MK_FP8_DELAYED && p->dtype != MK_DTYPE_FP8)
        return mk_error_set("--fp8-recipe %s needs --dtype fp8 (this plan is %s)", mk_fp8_recipe_name(p->fp8_recipe),
                            mk_dtype_name(p->dtype));
    if (p->overlap_param_gather && (p->zero != 1 || !p->overlap_grad_reduce))
        return mk_error_set("--overlap-param-gather needs --zero 1 (the distributed optimizer) and the gradient "
                            "reduction's overlap (Megatron-Core's rule; got --zero %d%s)", p->zero,
                            p->overlap_grad_reduce ? "" : ", --no-overlap-grad-reduce");
    if (p->tp_comm_overlap && (p->tp < 2 || !p->seqpar || p->tp_overlap))
        return mk_error_set("--tp-comm-overlap needs --tp 2 or more and --sequence-parallel, and no --tp-overlap "
                            "(Megatron-Core's rule; got tp %d%s%s)", p->tp, p->seqpar ? "" : ", no sequence parallelism",
                            p->tp_overlap ? ", --tp-overlap" : "");
    return check_bounds(p, g);
}

/* "[0, 5, 10]" into buf (n bytes; cut short with "...") */
static const char *bounds_str(const int *b, int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i <= n && k + 16 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? ", " : "[", b[i]);
    snprintf(buf + k, len - k, k + 16 < len ? "]" : "...]");
    return buf;
}

int mk_plan_check_partition(const mk_plan_t *p, const mk_graph_t *g)
{
    if (strcmp(p->partition, "uniform") && strcmp(p->partition, "parameters")) return 0;
    mk_plan_t q = *p;
    if (mk_partition(&q, g, p->partition) < 0 ||
        !memcmp(q.bounds, p->bounds, (size_t)(p->n_vstages + 1) * sizeof *p->bounds))
        return 0;
    char want[256], got[256];
    return mk_error_set("partition '%s' splits the layers %s, but stage_bounds are %s: give "
                        "\"partition\": \"explicit\" with bounds of your own", p->partition,
                        bounds_str(q.bounds, p->n_vstages, want, sizeof want),
                        bounds_str(p->bounds, p->n_vstages, got, sizeof got));
}

int mk_plan_check(mk_plan_t *p, const mk_graph_t *g)
{
    if (mk_plan_check_sizes(p) < 0 || mk_model_check_tp(&g->cfg, p->tp) < 0) return -1;
    return mk_plan_check_layout(p, g);
}

/* Blocks per virtual stage of the uniform split into share[0..nv): Megatron-
 * Core's rule with a first or last stage's count given (the rest shared
 * evenly by the others, who must divide it, each at least one), else
 * nblocks/nv each with the remainder past the first stage. */
static int uniform_shares(const mk_plan_t *p, int nblocks, int nv, int *share)
{
    int f = p->first_stage_layers, l = p->last_stage_layers;
    if (!f && !l) {
        for (int k = 0; k < nv; k++) share[k] = nblocks / nv + (k >= 1 && k <= nblocks % nv);
        return 0;
    }
    if (nv != p->pp || p->pp < 2 || f < 0 || l < 0)
        return mk_error_set("--decoder-first/last-pipeline-num-layers need pp >= 2 and vpp 1");
    int given = (f > 0) + (l > 0), rest = nblocks - f - l, others = nv - given;
    if (rest < others || (others == 0 ? rest != 0 : rest % others))
        return mk_error_set("%d blocks do not split into first %d, last %d and %d equal stages between", nblocks,
                            f, l, others);
    for (int k = 0; k < nv; k++) share[k] = others ? rest / others : 0;
    if (f) share[0] = f;
    if (l) share[nv - 1] = l;
    return 0;
}

int mk_plan_partition_uniform(mk_plan_t *p, const mk_graph_t *g)
{
    int64_t n = mk_plan_vstages(p);
    if (p->pp < 1 || p->vpp < 1 || n > MK_MAX_VSTAGES)
        return mk_error_set("pp %d x vpp %d virtual stages: from 1 to %d are supported", p->pp, p->vpp,
                            MK_MAX_VSTAGES);
    int nv = p->n_vstages = (int)n;
    if (nv > g->n_layers)
        return mk_error_set("%d virtual stages do not fit the model's %d layers", nv, g->n_layers);
    int first = -1, last = -1, nblocks = 0;
    for (int l = 0; l < g->n_layers; l++)
        if (g->layers[l].block >= 0) {
            if (first < 0) first = l;
            last = l;
            if (l == first || g->layers[l].block != g->layers[l - 1].block) nblocks++;
        }
    mk_strlcpy(p->partition, "uniform", sizeof p->partition);
    p->bounds[0] = 0;
    p->bounds[nv] = g->n_layers;
    if (nblocks < nv) { /* no blocks to share: split the layers evenly */
        for (int k = 1; k < nv; k++) p->bounds[k] = (int)((long)g->n_layers * k / nv);
        return check_bounds(p, g);
    }
    int share[MK_PLAN_MAX_VSTAGES], l = first;
    if (uniform_shares(p, nblocks, nv, share) < 0) return -1;
    for (int k = 0; k < nv - 1; k++) {
        for (int t = 0; t < share[k]; t++) {
            int b = g->layers[l].block;
            while (l <= last && g->layers[l].block == b) l++;
        }
        p->bounds[k + 1] = l;
    }
    return check_bounds(p, g);
}

void mk_plan_ckpt_layers(const mk_plan_t *p, const mk_graph_t *g, int *layers)
{
    for (int s = 0; s < p->pp; s++)
        for (int c = 0; c < p->vpp; c++) {
            int k = mk_plan_vstage(p, s, c), n = 0;
            for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++)
                n += mk_layer_checkpointable(g, l);
            layers[s * p->vpp + c] = n;
        }
}

void mk_plan_sched_spec(const mk_plan_t *p, const mk_graph_t *g, int grad_buckets, int *layers,
                        mk_sched_spec_t *spec)
{
    memset(spec, 0, sizeof *spec);
    mk_plan_ckpt_layers(p, g, layers);
    spec->kind = p->schedule;
    spec->pp = p->pp;
    spec->m = p->m;
    spec->vpp = p->vpp;
    spec->recompute = p->recompute;
    spec->layers = layers;
    spec->ckpt = p->has_ckpt ? p->ckpt : NULL;
    spec->grad_buckets = grad_buckets;
    spec->tied = mk_plan_ends_apart(p) && g->cfg.family != MK_FAMILY_CUSTOM && !g->cfg.untied;
}

void mk_plan_graph_opts(const mk_plan_t *p, mk_graph_opts_t *o)
{
    mk_graph_opts_init(o);
    o->mbs = p->mbs;
    o->dtype = p->dtype;
    o->tp = p->tp;
    o->dropout = mk_plan_dropout(p->dtype);
    o->flash_attn = p->attention == MK_ATTN_FLASH || p->attention == MK_ATTN_FUSED; /* auto: settle first */
    o->moe_imbalance = p->moe_imbalance;
    o->ep = p->ep;
    o->moe_deepep = p->moe_deepep;
    o->xent = p->cross_entropy;
    o->eager = p->eager;
    o->fp8_current = p->dtype == MK_DTYPE_FP8 && mk_fp8_recipe_current(p->fp8_recipe);
    o->fp8_weight_cast = p->dtype == MK_DTYPE_FP8 && p->fp8_recipe == MK_FP8_TORCHAO;
}

int mk_plan_dropout(mk_dtype_t dt) { return dt != MK_DTYPE_FP32; }

mk_dtype_t mk_plan_grad_dtype(const mk_plan_t *p)
{
    if (p->grad_reduce_dtype > 0 && p->grad_reduce_dtype <= MK_DTYPE_COUNT) return (mk_dtype_t)(p->grad_reduce_dtype - 1);
    return p->dtype == MK_DTYPE_FP16 ? MK_DTYPE_FP16 : MK_DTYPE_FP32;
}

int mk_plan_scatter_gathers(const mk_plan_t *p)
{
    return p->scatter_gather_p2p && p->tp > 1 && !p->seqpar;
}

int mk_plan_check_grad_dtype(const mk_plan_t *p)
{
    int g = p->grad_reduce_dtype - 1;
    if (p->grad_reduce_dtype == 0 || g == MK_DTYPE_FP32) return 0;
    int sixteen = p->dtype == MK_DTYPE_FP16 ? MK_DTYPE_FP16 : MK_DTYPE_BF16; /* fp8: bf16 parameters */
    if (g != MK_DTYPE_FP16 && g != MK_DTYPE_BF16)
        return mk_error_set("gradient reduce dtype must be fp32, bf16 or fp16");
    if (p->dtype == MK_DTYPE_FP32)
        return mk_error_set("%s gradients do not go with an fp32 plan (its gradients are fp32)", mk_dtype_name((mk_dtype_t)g));
    if (g != sixteen)
        return mk_error_set("%s gradients do not go with a %s plan (its gradients are fp32 or %s)",
                            mk_dtype_name((mk_dtype_t)g), mk_dtype_name(p->dtype), mk_dtype_name((mk_dtype_t)sixteen));
    return 0;
}

mk_graph_t *mk_plan_graph(const mk_plan_t *p)
{
    mk_graph_opts_t o;
    mk_plan_graph_opts(p, &o);
    return mk_graph_build(&p->model, &o);
}

void mk_recompute_format(const mk_recompute_t *r, char *buf, size_t n)
{
    switch (r->kind) {
    case MK_RECOMPUTE_NONE: snprintf(buf, n, "none"); break;
    case MK_RECOMPUTE_FULL: snprintf(buf, n, "full"); break;
    case MK_RECOMPUTE_SELECTIVE: snprintf(buf, n, "selective"); break;
    case MK_RECOMPUTE_STAGE_AWARE: snprintf(buf, n, "stage-aware:%g", r->ratio); break;
    case MK_RECOMPUTE_AUTO: snprintf(buf, n, "auto"); break;
    case MK_RECOMPUTE_SELECTIVE_OP: snprintf(buf, n, "selective-op"); break;
    default: snprintf(buf, n, "explicit"); break;
    }
}

static const char *const attn_names[] = {"unfused", "flash", "fused", "auto"};

const char *mk_attn_backend_name(mk_attn_backend_t a)
{
    return a >= MK_ATTN_UNFUSED && a <= MK_ATTN_AUTO ? attn_names[a] : "?";
}

int mk_attn_backend_parse(const char *s, mk_attn_backend_t *out)
{
    for (int i = 0; i <= MK_ATTN_AUTO; i++)
        if (s && !strcmp(s, attn_names[i])) return *out = (mk_attn_backend_t)i, 0;
    return mk_error_set("--attention-backend must be flash, fused, unfused or auto, not '%s'", s ? s : "");
}

static const char *const xent_names[] = {"vocab-parallel", "torch", "fused", "fused-te"};

const char *mk_xent_name(mk_xent_t x)
{
    return x >= MK_XENT_VOCAB_PARALLEL && x <= MK_XENT_FUSED_TE ? xent_names[x] : "?";
}

int mk_xent_parse(const char *s, mk_xent_t *out)
{
    for (int i = 0; i <= MK_XENT_FUSED_TE; i++)
        if (s && !strcmp(s, xent_names[i])) return *out = (mk_xent_t)i, 0;
    return mk_error_set("--cross-entropy must be vocab-parallel, torch, fused or fused-te, not '%s'", s ? s : "");
}

static const char *const fp8_recipe_names[] = {"delayed", "tensorwise", "torchao"};

const char *mk_fp8_recipe_name(mk_fp8_recipe_t r)
{
    return r >= MK_FP8_DELAYED && r <= MK_FP8_TORCHAO ? fp8_recipe_names[r] : "?";
}

int mk_fp8_recipe_current(mk_fp8_recipe_t r)
{
    return r == MK_FP8_TENSORWISE || r == MK_FP8_TORCHAO;
}

int mk_fp8_recipe_parse(const char *s, mk_fp8_recipe_t *out)
{
    for (int i = 0; i <= MK_FP8_TORCHAO; i++)
        if (s && !strcmp(s, fp8_recipe_names[i])) return *out = (mk_fp8_recipe_t)i, 0;
    return mk_error_set("--fp8-recipe must be delayed, tensorwise or torchao (mxfp8 and blockwise are not modelled), "
                        "not '%s'", s ? s : "");
}

int mk_elementwise_parse(const char *s, int *eager)
{
    if (s && !strcmp(s, "fused")) return *eager = 0, 0;
    if (s && !strcmp(s, "eager")) return *eager = 1, 0;
    return mk_error_set("--elementwise must be fused or eager, not '%s'", s ? s : "");
}

const char *mk_cp_comm_name(mk_cp_comm_t c)
{
    return c == MK_CP_COMM_P2P ? "p2p" : c == MK_CP_COMM_ALLGATHER ? "allgather" : c == MK_CP_COMM_A2A ? "a2a" : "?";
}

int mk_cp_comm_parse(const char *s, mk_cp_comm_t *out)
{
    for (int c = MK_CP_COMM_P2P; c <= MK_CP_COMM_A2A; c++)
        if (s && !strcmp(s, mk_cp_comm_name((mk_cp_comm_t)c))) return *out = (mk_cp_comm_t)c, 0;
    if (s && !strcmp(s, "a2a+p2p"))
        return mk_error_set("--cp-comm-type a2a+p2p (hierarchical context parallelism) is not modelled: use p2p, "
                            "allgather or a2a");
    return mk_error_set("--cp-comm-type must be p2p, allgather or a2a, not '%s'", s ? s : "");
}

/* Context parallelism's attention core: every CP implementation runs
 * fused kernels on its blocks (Megatron-Core's local DotProductAttention
 * asserts context_parallel_size == 1, Transformer Engine's CP runs flash or
 * cuDNN's fused attention, torch's ring SDPA the flash or efficient
 * kernels; merak's executor keeps each row's log-sum-exp), never the
 * materialised s x s scores.  Transformer Engine's all-to-all (Ulysses)
 * splits the heads of Q and of K/V over the CP group: each TP rank's count
 * must divide by cp. */
static int check_cp_comm(const mk_plan_t *p, const mk_graph_t *g)
{
    if (p->cp_comm < MK_CP_COMM_P2P || p->cp_comm > MK_CP_COMM_A2A) return mk_error_set("unknown --cp-comm-type");
    if (p->cp > 1 && p->attention == MK_ATTN_UNFUSED)
        return mk_error_set("--cp %d with --attention-backend unfused: context parallelism runs its attention on "
                            "fused kernels (Megatron-Core's TEDotProductAttention; merak's ring): use flash or fused",
                            p->cp);
    if (p->cp_comm == MK_CP_COMM_P2P || p->cp <= 1) return 0; /* (without CP the type does nothing) */
    int tp = p->tp > 1 ? p->tp : 1, h = g->cfg.heads, kv = g->cfg.kv_heads > 0 ? g->cfg.kv_heads : h;
    if (p->cp_comm == MK_CP_COMM_A2A && (h % tp || kv % tp || (h / tp) % p->cp || (kv / tp) % p->cp))
        return mk_error_set("--cp-comm-type a2a splits each TP rank's heads over cp %d: the %d query and %d K/V "
                            "heads over tp %d do not divide by it", p->cp, h, kv, tp);
    if (mk_model_is_mla(&g->cfg))
        return mk_error_set("--cp-comm-type %s with multi-latent attention is not modelled (p2p is)",
                            mk_cp_comm_name(p->cp_comm));
    return 0;
}

const char *mk_reshard_name(mk_reshard_t r)
{
    return r == MK_RESHARD_NEVER ? "never" : r == MK_RESHARD_ALWAYS ? "always" : "?";
}

int mk_reshard_parse(const char *s, mk_reshard_t *out)
{
    if (s && !strcmp(s, "always")) return *out = MK_RESHARD_ALWAYS, 0;
    if (s && !strcmp(s, "never")) return *out = MK_RESHARD_NEVER, 0;
    return mk_error_set("--fsdp-reshard-after-forward must be always or never, not '%s'", s ? s : "");
}

mk_attn_backend_t mk_plan_attention(const mk_plan_t *p, const mk_cluster_t *c)
{
    if (p->attention != MK_ATTN_AUTO) return p->attention;
    return p->cp > 1 || (c && c->dev.flash_attn_flops > 0) ? MK_ATTN_FLASH : MK_ATTN_UNFUSED;
}
