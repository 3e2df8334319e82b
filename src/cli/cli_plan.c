/* The plan behind `merak sim` and `merak run`: from flags or a plan file,
 * then resolved once (merak/plan_ctx.h). */
#include "config.h"
#include "cli/cli.h"
#include "merak/checked.h"
#include "merak/limits.h"
#include "merak/plan_ctx.h"

#include <string.h>

/* --micro-batches M (DeepSpeed's --gradient_accumulation_steps): the global
 * batch dp x mbs x M. */
int mk_args_micro_batches(mk_args_t *a)
{
    if (!a->micro_batches) return 0;
    if (a->gbs) return mk_cli_fail(a->cmd, "give --gbs or --micro-batches, not both");
    int64_t gbs;
    if (MK_PROD_WITHIN(MK_MAX_GBS, &gbs, a->dp ? a->dp : 1, a->mbs ? a->mbs : 1, a->micro_batches) < 0)
        return mk_cli_fail(a->cmd, "dp x mbs x --micro-batches %d is a global batch above %d sequences, "
                           "the most --gbs may be", a->micro_batches, MK_MAX_GBS);
    a->gbs = (int)gbs;
    return 0;
}

/* --vpp, or --num-layers-per-virtual-pipeline-stage, or the subcommand's
 * default for the interleaved schedules (2 for zb-v and dualpipev, which
 * run no other). */
static int vpp_from_flags(const mk_args_t *a, const mk_cli_defaults_t *d, mk_plan_t *p)
{
    p->vpp = a->vpp ? a->vpp : 1;
    if (a->vpp_layers) {
        int per = p->pp * a->vpp_layers;
        if (p->model.num_layers % per)
            return mk_cli_fail(a->cmd, "--num-layers-per-virtual-pipeline-stage %d does not divide "
                               "%d blocks over pp %d", a->vpp_layers, p->model.num_layers, p->pp), -1;
        p->vpp = p->model.num_layers / per;
    }
    const mk_sched_traits_t *tr = mk_sched_traits(p->schedule);
    if (!a->vpp && !a->vpp_layers && d->vpp && tr->interleaved) p->vpp = d->vpp;
    if (!a->vpp && !a->vpp_layers && tr->max_vpp) p->vpp = tr->max_vpp; /* the V's two chunks: its only value */
    if (p->vpp > 1 && !a->schedule) p->schedule = MK_SCHED_INTERLEAVED;
    return 0;
}

int mk_args_attention(const mk_args_t *a, mk_attn_backend_t *out)
{
    if (mk_attn_backend_parse(a->attention ? a->attention : "auto", out) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    return 0;
}

int mk_args_xent(const mk_args_t *a, mk_xent_t *out)
{
    *out = MK_XENT_VOCAB_PARALLEL;
    if (a->cross_entropy && mk_xent_parse(a->cross_entropy, out) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    return 0;
}

int mk_args_elementwise(const mk_args_t *a, int *eager)
{
    *eager = 0;
    if (a->elementwise && mk_elementwise_parse(a->elementwise, eager) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    return 0;
}

int mk_args_fp8_recipe(const mk_args_t *a, mk_fp8_recipe_t *out)
{
    *out = MK_FP8_DELAYED;
    if (a->fp8_recipe && mk_fp8_recipe_parse(a->fp8_recipe, out) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    return 0;
}

const char *mk_cli_fp8_note(mk_fp8_recipe_t r)
{
    return r == MK_FP8_TENSORWISE ? " (tensorwise scaling)"
           : r == MK_FP8_TORCHAO  ? " (torchao's Float8, tensorwise scaling)"
                                  : "";
}

/* Megatron-Core's dispatcher flags as it pairs them: --moe-enable-deepep
 * is the flex dispatcher's backend (--moe-token-dispatcher-type flex, or
 * the type left out); flex without a backend, or alltoall with DeepEP, is
 * refused rather than guessed at. */
int mk_args_deepep(const mk_args_t *a, int *deepep)
{
    int flex = a->moe_dispatcher && !strcmp(a->moe_dispatcher, "flex");
    *deepep = a->moe_deepep;
    if (flex && !a->moe_deepep)
        return mk_cli_fail(a->cmd, "--moe-token-dispatcher-type flex needs its backend: --moe-enable-deepep"), -1;
    if (a->moe_deepep && a->moe_dispatcher && !flex)
        return mk_cli_fail(a->cmd, "--moe-enable-deepep is the flex dispatcher's backend, not %s's "
                           "(--moe-token-dispatcher-type flex, or leave it out)", a->moe_dispatcher), -1;
    return 0;
}

/* --overlap-moe-expert-parallel-comm, and Megatron-Core's
 * --delay-wgrad-compute, which needs it ("overlap_moe_expert_parallel_comm
 * must be enabled when enabling delay_wgrad_compute") and whose split of
 * the weight gradients the overlap's model takes in (sim_step.c). */
int mk_args_a2a_overlap(const mk_args_t *a, int *out)
{
    if (a->delay_wgrad && !a->moe_a2a_overlap)
        return mk_cli_fail(a->cmd, "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm (Megatron-Core's "
                           "rule)"), -1;
    *out = a->moe_a2a_overlap;
    return 0;
}

/* Megatron-LM's --recompute-method / --recompute-num-layers (-1: not
 * given; Megatron's default 1) with --recompute-granularity full: uniform
 * 1 is merak's full recompute, block 0 none (the first 0 blocks of each
 * stage); other counts have no counterpart. */
static int recompute_method(const mk_args_t *a, mk_plan_t *p)
{
    int block = a->recompute_method && !strcmp(a->recompute_method, "block");
    int n = a->recompute_num_layers >= 0 ? a->recompute_num_layers : 1;
    if (!a->recompute_method && a->recompute_num_layers < 0) return 0;
    if (p->recompute.kind != MK_RECOMPUTE_FULL)
        return mk_cli_fail(a->cmd, "--recompute-method and --recompute-num-layers need --recompute-granularity full"), -1;
    if (block && n == 0) return p->recompute.kind = MK_RECOMPUTE_NONE, 0;
    if (!block && n == 1) return 0;
    return mk_cli_fail(a->cmd, "--recompute-method %s --recompute-num-layers %d: merak checkpoints every block "
                       "(uniform 1) or none (block 0)", block ? "block" : "uniform", n), -1;
}

int mk_args_grad_dtype(const mk_args_t *a, int *out)
{
    mk_dtype_t dt;
    if (a->grad_dtype && (mk_dtype_parse(a->grad_dtype, &dt) < 0 || dt == MK_DTYPE_FP8))
        return mk_cli_fail(a->cmd, "--grad-reduce-dtype must be fp32, bf16 or fp16, not '%s'", a->grad_dtype), -1;
    if (a->grad_dtype) *out = (int)dt + 1;
    else if (a->grad_reduce_dtype) *out = a->grad_reduce_dtype;
    return 0;
}

static int plan_from_flags(const mk_args_t *a, const mk_cli_defaults_t *d, int world, int dtype, mk_plan_t *p)
{
    mk_plan_init(p);
    if (mk_args_model(a, d->model, &p->model) < 0) return -1;
    mk_strlcpy(p->cluster, a->cluster ? a->cluster : d->cluster, sizeof p->cluster);
    p->dtype = (mk_dtype_t)dtype;
    if (a->dtype && mk_dtype_parse(a->dtype, &p->dtype) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    p->pp = a->pp ? a->pp : 1;
    p->tp = a->tp ? a->tp : 1;
    p->cp = a->cp ? a->cp : 1;
    p->ep = a->ep ? a->ep : 1;
    if (a->moe_imbalance > 0) p->moe_imbalance = a->moe_imbalance;
    if (mk_args_deepep(a, &p->moe_deepep) < 0) return -1;
    if (a->etp > 1)
        return mk_cli_fail(a->cmd, "--expert-tensor-parallel-size %d: only 1 is supported (the experts are "
                           "not split over tensor-parallel ranks yet)", a->etp), -1;
    p->mbs = a->mbs ? a->mbs : 1;
    if (a->dp) p->dp = a->dp;
    else if (world > 0 && world % (p->pp * p->tp * p->cp) == 0) p->dp = world / (p->pp * p->tp * p->cp);
    else p->dp = 1;
    p->gbs = a->gbs ? a->gbs : d->gbs ? d->gbs : 2 * p->dp * p->mbs * p->pp;
    if (mk_sched_kind_parse(a->schedule ? a->schedule : d->schedule, &p->schedule) < 0 ||
        mk_recompute_parse(a->recompute ? a->recompute : d->recompute, &p->recompute) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    if (vpp_from_flags(a, d, p) < 0) return -1;
    p->tp_overlap = a->tp_overlap > 0 ? a->tp_overlap : 0;
    p->zero = a->zero;
    p->seqpar = a->seqpar;
    if (mk_args_attention(a, &p->attention) < 0 || mk_args_xent(a, &p->cross_entropy) < 0 ||
        mk_args_elementwise(a, &p->eager) < 0 || mk_args_fp8_recipe(a, &p->fp8_recipe) < 0)
        return -1;
    if (a->reshard && mk_reshard_parse(a->reshard, &p->reshard) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    if (a->cp_comm && mk_cp_comm_parse(a->cp_comm, &p->cp_comm) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    /* a flag that would do nothing (merak plan's candidates with cp > 1 take it) */
    if (a->cp_comm && p->cp <= 1 && strcmp(a->cmd, "plan"))
        return mk_cli_fail(a->cmd, "--cp-comm-type %s needs --cp 2 or more", a->cp_comm), -1;
    p->optimizer_offload = a->optimizer_offload;
    p->tp_comm_overlap = a->tp_comm_overlap;
    p->overlap_param_gather = a->overlap_param_gather;
    p->scatter_gather_p2p = a->scatter_gather_p2p;
    if (mk_args_a2a_overlap(a, &p->moe_a2a_overlap) < 0) return -1;
    p->cpu_offload_layers = a->cpu_offload_layers > 0 ? a->cpu_offload_layers : 0;
    p->first_stage_layers = a->first_stage_layers > 0 ? a->first_stage_layers : 0;
    p->last_stage_layers = a->last_stage_layers > 0 ? a->last_stage_layers : 0;
    if (a->overlap_grad_reduce >= 0) p->overlap_grad_reduce = a->overlap_grad_reduce;
    if (a->zero3_prefetch >= 0) p->zero3_prefetch = a->zero3_prefetch;
    /* a flag that would do nothing (merak plan's ZeRO-3 candidates take it) */
    if (a->zero3_per_param) p->zero3_per_param = 1;
    if (strcmp(a->cmd, "plan") && mk_plan_check_zero3(p) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    if (mk_args_grad_dtype(a, &p->grad_reduce_dtype) < 0) return -1;
    return recompute_method(a, p);
}

int mk_args_plan(const mk_args_t *a, const mk_cli_defaults_t *d, int world, int dtype, mk_plan_t *p)
{
    if (!a->plan_file) return plan_from_flags(a, d, world, dtype, p);
    if (a->layout_given || a->dtype)
        return mk_cli_fail(a->cmd, "--plan takes the model and layout from the plan file; "
                           "do not combine it with model or layout flags"), -1;
    if (mk_plan_load(a->plan_file, p) < 0) return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    if (a->cluster) mk_strlcpy(p->cluster, a->cluster, sizeof p->cluster);
    if (mk_args_grad_dtype(a, &p->grad_reduce_dtype) < 0) return -1; /* a precision choice, not the layout's */
    return 0;
}

/* --zero-shard-group dp (the whole DP group, the default) or node (the DP
 * ranks of one node of the cluster, or for run of the ranks MPI places on
 * one node: hybrid sharding). */
static int zero_shard_group(const mk_args_t *a, const mk_cluster_t *c, mk_plan_t *p)
{
    const char *g = a->zero_shard_group;
    if (!g) return 0;
    if (!strcmp(g, "dp")) return p->zero_shard = 0, 0;
    if (strcmp(g, "node")) return mk_error_set("--zero-shard-group must be dp or node, not '%s'", g);
    int per_node = c ? c->gpus_per_node : a->node_ranks;
    if (per_node < 0) return mk_error_set("--zero-shard-group node: the nodes hold different numbers of ranks");
    if (!per_node) return mk_error_set("--zero-shard-group node needs a cluster");
    return mk_plan_zero_shard_node(p, per_node);
}

int mk_args_resolve(const mk_args_t *a, const mk_cli_defaults_t *d, const mk_plan_t *p, mk_plan_resolve_opts_t *ro,
                    mk_plan_ctx_t *ctx)
{
    /* a plan file carries its bounds */
    ro->partition = a->plan_file ? NULL : a->partition ? a->partition : d->partition;
    mk_plan_t q = *p;
    if (zero_shard_group(a, ro->cluster, &q) < 0 || mk_plan_resolve(ctx, &q, ro) < 0)
        return mk_cli_fail(a->cmd, "%s", mk_error_last()), -1;
    return 0;
}
