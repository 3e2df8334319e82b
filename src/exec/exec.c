/* The executor: validation of a layout, the schedule it runs, AdamW with
 * global-norm clipping, the synthetic data, and the testing gradient dump
 * (setup and the training loop: exec_setup.c). */
#include "config.h"
#include "exec/exec_internal.h"
#include "exec/gpt_moe.h"
#include "merak/checked.h"
#include "merak/data.h"
#include "merak/fileio.h"
#include "merak/trace.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mk_exec_opts_init(mk_exec_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->steps = 10;
    o->lr = 6e-4;
    o->min_lr = -1.0;             /* lr / 10 */
    o->weight_decay = 0.1;
    o->clip_grad = 1.0;
    o->adam_eps = 1e-8;
    o->adam_beta1 = 0.9;
    o->adam_beta2 = 0.95;
    o->seed = 1234;
    o->timeout_s = 600;           /* Megatron-LM's --distributed-timeout-minutes default, 10 */
}

/* The scheduler's streams for the plan, from the context's spec. */
mk_sched_t *mk_exec_build_sched(const mk_plan_ctx_t *ctx)
{
    mk_sched_spec_t spec = ctx->spec;
    /* selective recompute (the attention core only) has no instruction of
       its own: a layer's backward remakes its core's probabilities
       (gpt.h drop_core), so the streams are those without recompute */
    if (spec.recompute.kind == MK_RECOMPUTE_SELECTIVE) spec.recompute.kind = MK_RECOMPUTE_NONE;
    return mk_sched_build(&spec);
}

/* The biggest buffers one rank allocates, per micro-batch of N = mbs*seq
 * tokens: attention scores 4*mbs*(heads/tp)*seq^2 bytes (the fused
 * attention and CP: 4*mbs*(heads/tp)*seq log-sum-exps), logits
 * 4*N*Vp/tp, and the step's tokens 8*m*N; each product in 64 bits
 * against this machine's memory, so a run that cannot fit is refused
 * before anything is allocated (and N stays an int). */
static int exec_fits_host(const mk_plan_t *p)
{
    const mk_model_config_t *c = &p->model;
    int64_t mem = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE), x;
    int64_t vp = mk_model_padded_vocab(c, p->tp) / p->tp, hl = c->heads / p->tp;
    int64_t keys = p->attention == MK_ATTN_FLASH || p->attention == MK_ATTN_FUSED || p->cp > 1 ? 1 : c->seq;
    if (MK_PROD_WITHIN(INT_MAX, &x, p->mbs, c->seq) < 0 ||
        MK_PROD_WITHIN(mem, &x, 4, p->mbs, hl, c->seq, keys) < 0 ||
        MK_PROD_WITHIN(mem, &x, 4, p->mbs, c->seq, vp) < 0 || MK_PROD_WITHIN(mem, &x, 8, p->m, p->mbs, c->seq) < 0) {
        double gib = 4.0 * p->mbs * c->seq * (hl * (double)keys > vp ? hl * (double)keys : vp) / (1 << 30);
        return mk_error_set("a micro-batch of %d sequences of %d tokens needs %.4g GiB for one buffer on a rank "
                            "(attention scores or logits), more than this machine's %.1f GiB", p->mbs, c->seq,
                            gib, mem / (double)(1 << 30));
    }
    return 0;
}

/* The model's state on one rank, at least: its share of the parameters
 * (tp x pp x ep split them; more where the split is uneven) in fp32, each
 * with its gradient and two Adam moments (16 bytes), ZeRO's shards over
 * dp; a model that cannot fit is refused before anything is allocated. */
static int exec_fits_params(const mk_plan_t *p, const mk_graph_t *g)
{
    double mem = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE), dp = p->dp > 0 ? p->dp : 1;
    double per = mk_graph_params(g) / ((double)p->tp * p->pp * (p->ep > 1 ? p->ep : 1));
    double bytes = per * (p->zero >= 3 ? 16 / dp : p->zero == 2 ? 4 + 12 / dp : p->zero == 1 ? 8 + 8 / dp : 16);
    if (bytes <= mem) return 0;
    return mk_error_set("the model's %.4g parameters need at least %.4g GiB on a rank (fp32 weights, gradients and "
                        "Adam moments, split by tp %d x pp %d%s), more than this machine's %.1f GiB",
                        mk_graph_params(g), bytes / (1 << 30), p->tp, p->pp, p->zero ? " and ZeRO" : "",
                        mem / (1 << 30));
}

/* What the executor's MoE layers (src/exec/gpt_moe.c) do not cover yet. */
static int exec_check_moe(const mk_plan_t *p)
{
    if (!mk_model_is_moe(&p->model)) return 0;
    if (mk_gpt_moe_check(&p->model, NULL) < 0) return -1;
    if (p->cp > 1 && p->model.moe_capacity > 0) /* the chunks are not in token order: the drops would differ */
        return mk_error_set("a capacity factor with --cp %d is not supported by run (dropless MoE is)", p->cp);
    int cp = p->cp > 1 ? p->cp : 1, fold = p->seqpar && p->tp > 1, ranks = (fold ? p->tp : 1) * p->dp * cp;
    int zg = p->zero ? mk_plan_zero_group(p) : 0, zr = zg * (fold ? p->tp : 1); /* a hybrid group's ranks */
    if ((fold || p->ep > 1) && zg && zg < mk_plan_dp_cp(p) && zr % (p->ep > 1 ? p->ep : 1))
        return mk_error_set("--ep %d must divide the %d ranks of a hybrid ZeRO group (%d DP ranks%s) under run",
                            p->ep, zr, zg, fold ? " x tp" : "");
    int64_t x;  /* the all-to-all's floats from one rank: up to ep * mbs * seq * k rows of hidden */
    if (p->moe_deepep)
        return mk_error_set("--moe-enable-deepep is for merak sim and merak plan: run's all-to-alls are MPI's");
    if (p->ep > 1 && ranks % p->ep)
        return mk_error_set(fold ? "--ep %d must divide tp x cp x dp = %d (the stage's ranks EP groups are cut from)"
                                 : "--ep %d over tensor-parallel ranks (MoE parallel folding) needs --sequence-parallel "
                                   "in run (Megatron-Core's MoE with TP; without it EP ranks are data- and context-"
                                   "parallel ranks: ep divides dp x cp %d)",
                            p->ep, ranks);
    if (MK_PROD_WITHIN(INT_MAX, &x, p->ep, p->mbs, p->model.seq, p->model.moe_topk, p->model.hidden) < 0)
        return mk_error_set("a micro-batch's expert all-to-all (ep x mbs x seq x top-k x hidden) is over %d floats",
                            INT_MAX);
    return 0;
}

/* What the executor's multi-head latent attention (src/exec/gpt_mla.c) does not cover yet. */
static int exec_check_mla(const mk_plan_t *p)
{
    if (!mk_model_is_mla(&p->model)) return 0;
    if (p->cp > 1) return mk_error_set("multi-latent attention with --cp %d is not supported by run", p->cp);
    if (p->seqpar && p->tp > 1)
        return mk_error_set("multi-latent attention with --sequence-parallel is not supported by run");
    return 0;
}

int mk_exec_check(const mk_plan_t *p, const mk_graph_t *g)
{
    if (mk_gpt_block_kind(&p->model) < 0 || exec_check_moe(p) < 0 || exec_check_mla(p) < 0) return -1;
    if (g->n_layers != mk_gpt_n_layers(&p->model))
        return mk_error_set("the graph has %d layers, the executor expects %d", g->n_layers,
                            mk_gpt_n_layers(&p->model));
    if (p->model.ffn % p->tp) return mk_error_set("--tp %d does not divide the MLP width %d", p->tp, p->model.ffn);
    if (p->eager) /* a framework's kernels, not the executor's */
        return mk_error_set("elementwise eager is for merak sim and merak plan: run has its own kernels");
    /* its loss keeps what vocab-parallel keeps and makes fused's passes; torch's memory and TE's
       kernels are not the executor's */
    if (p->cross_entropy != MK_XENT_VOCAB_PARALLEL && p->cross_entropy != MK_XENT_FUSED)
        return mk_error_set("cross_entropy %s is for merak sim and merak plan: run computes the "
                            "vocab-parallel cross entropy with fused passes (vocab-parallel or fused)",
                            mk_xent_name(p->cross_entropy));
    if (p->cpu_offload_layers)
        return mk_error_set("--cpu-offloading-num-layers is for merak sim: run keeps activations on its backend");
    if (p->optimizer_offload)
        return mk_error_set("--optimizer-cpu-offload is for merak sim and merak plan: run keeps the optimizer "
                            "on its backend");
    if (p->overlap_param_gather)
        return mk_error_set("--overlap-param-gather is for merak sim and merak plan: run gathers the updated "
                            "weights after the optimizer step");
    if (p->scatter_gather_p2p)
        return mk_error_set("--scatter-gather-tensors-in-pipeline is for merak sim and merak plan: run sends whole "
                            "activations between stages");
    if (p->tp_comm_overlap)
        return mk_error_set("--tp-comm-overlap (Transformer Engine's userbuffers) is for merak sim: run's sequence "
                            "parallelism gathers and reduce-scatters whole tensors");
    if (p->zero3_per_param)
        return mk_error_set("--zero3-per-param-collectives is for merak sim: run gathers each ZeRO-3 unit by one "
                            "MPI_Iallgatherv, no copies per rank");
    if (p->reshard == MK_RESHARD_NEVER)
        return mk_error_set("--fsdp-reshard-after-forward never is for merak sim: run's ZeRO-3 gathers every "
                            "layer per use");
    if (p->recompute.kind == MK_RECOMPUTE_SELECTIVE_OP)
        return mk_error_set("--recompute selective-op (torchtitan's op-level policy) is for merak sim: run "
                            "checkpoints whole blocks (none, full, selective, stage-aware:R)");
    if (p->recompute.kind == MK_RECOMPUTE_AUTO && !p->has_ckpt)
        return mk_error_set("--recompute auto needs a plan with checkpoint counts (--plan FILE)");
    if (p->seqpar && p->tp > 1 && p->tp_overlap > 0)  /* the halves' all-reduces have no SP form here */
        return mk_error_set("--sequence-parallel with --tp-overlap %d is not supported by run (use one of them)",
                            p->tp_overlap);
    if (p->seqpar && p->tp > 1 && ((long)p->mbs * p->model.seq) % p->tp)
        return mk_error_set("--sequence-parallel: --tp %d does not divide the %ld tokens of a micro-batch "
                            "(micro-batch size x sequence length)", p->tp, (long)p->mbs * p->model.seq);
    return exec_fits_host(p) < 0 || exec_fits_params(p, g) < 0 ? -1 : 0;
}

int mk_exec_validate(const mk_plan_ctx_t *ctx)
{
    mk_sched_t *s = mk_exec_build_sched(ctx);
    if (!s) return -1;
    mk_sched_free(s);
    return 0;
}

/* A learnable synthetic stream: a seeded cycle of 16 tokens; each sequence
 * starts at a place drawn from (seed, step, global sequence index), so the
 * global batch of a step is the same whatever the layout. */
static uint32_t hash32(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return (uint32_t)(x ^ (x >> 33));
}

static void make_whole(mk_exec_t *e, int64_t step)
{
    const mk_exec_opts_t *o = e->o;
    int T = o->ctx->plan.model.seq, V = o->ctx->plan.model.vocab < 256 ? o->ctx->plan.model.vocab : 256, pat[16];
    if (e->data) {  /* the file: training batch `step`, or validation batch -1-step */
        int32_t *buf = malloc((size_t)o->ctx->plan.mbs * (T + 1) * sizeof *buf);
        mk_data_split_t split = step >= 0 ? MK_DATA_TRAIN : MK_DATA_VAL;
        long k = step >= 0 ? (long)step : (long)(-1 - step);
        for (int mb = 0; mb < e->pipe.n_micro; mb++) {
            int first = (mk_exec_replica(e) * e->pipe.n_micro + mb) * o->ctx->plan.mbs;
            mk_data_batch(e->data, split, k, o->ctx->plan.gbs, first, o->ctx->plan.mbs, buf);
            if (e->pipe.docs)
                mk_data_batch_docs(e->data, split, k, o->ctx->plan.gbs, first, o->ctx->plan.mbs, e->pipe.docs[mb]);
            for (int b = 0; b < o->ctx->plan.mbs; b++)
                for (int t = 0; t < T; t++) {
                    e->pipe.tokens[mb][b * T + t] = buf[b * (T + 1) + t];
                    e->pipe.targets[mb][b * T + t] = buf[b * (T + 1) + t + 1];
                }
        }
        free(buf);
        return;
    }
    for (int i = 0; i < 16; i++) pat[i] = (int)(hash32(o->seed * 31 + i) % (uint32_t)V);
    for (int mb = 0; mb < e->pipe.n_micro; mb++)
        for (int b = 0; b < o->ctx->plan.mbs; b++) {
            long gseq = ((long)mk_exec_replica(e) * e->pipe.n_micro + mb) * o->ctx->plan.mbs + b;
            int off = (int)(hash32(((uint64_t)o->seed << 40) ^ ((uint64_t)step << 24) ^ (uint64_t)gseq) % 16);
            for (int t = 0; t < T; t++) {
                e->pipe.tokens[mb][b * T + t] = pat[(off + t) % 16];
                e->pipe.targets[mb][b * T + t] = pat[(off + t + 1) % 16];
            }
        }
}

/* The micro-batches' whole sequences, then this rank's chunks of them. */
void mk_exec_make_batch(mk_exec_t *e, int64_t step)
{
    make_whole(e, step);
    mk_exec_cp_select(e);
}

/* The default warm-up: linear over 2 / (1 - beta2) steps, the "untuned"
 * rule of Ma & Yarats, "On the adequacy of untuned warmup for adaptive
 * optimization" (AAAI 2021): Adam's second-moment estimate averages over
 * about 1 / (1 - beta2) steps, and until it has, its steps are too large.
 * 40 steps at beta2 0.95.  Not shortened for a short run: gpt2-124m at lr
 * 6e-4 spikes at step 3 without warm-up (11.0, 8.0, 14.1) and still with
 * a 3-step one (11.0, 7.8, 11.9); a run shorter than the warm-up never
 * reaches the peak lr, as in Megatron-LM when --lr-warmup-iters exceeds
 * --train-iters.  Independent of the horizon, so a resumed run keeps it. */
int64_t mk_exec_default_warmup(double beta2)
{
    return (int64_t)ceil(2.0 / (1.0 - beta2) - 1e-9); /* 1 - 0.95 is 0.05000000000000004 */
}

double mk_exec_lr_at(const mk_exec_t *e, int64_t updates)
{
    const mk_exec_opts_t *o = e->o;
    int64_t warmup = e->warmup, horizon = e->horizon;
    double min = o->min_lr < 0 ? o->lr / 10 : o->min_lr;
    if (updates < warmup) return o->lr * (double)(updates + 1) / (double)warmup;
    double p = horizon > warmup ? (double)(updates - warmup) / (double)(horizon - warmup) : 0.0;
    if (p > 1.0) p = 1.0;
    return min + 0.5 * (o->lr - min) * (1.0 + cos(M_PI * p));
}

/* Whether this rank's copy of tensor t counts once in global sums: of
 * gradients summed over DP, DP rank 0's; of ZeRO's pieces, every rank of
 * the first sharding group counts its own. */
static int counts_once(const mk_exec_t *e, const mk_gpt_tensor_t *t, int pieces)
{
    /* an expert's gradient is summed over the ranks holding it: the first EP group's (folded:
       TP ranks hold different experts) */
    int first = t->expert >= 0 ? e->ep.edp == 0 : e->comm.dp_rank == 0;
    return t->owned && !t->tied_copy && (pieces ? e->zero.ri == 0 : first) &&
           (t->split_dim >= 0 || e->comm.tp_rank == 0 || (t->expert >= 0 && e->ep.fold));
}

static size_t clip_to(const mk_opt_range_t *r, const mk_gpt_tensor_t *t, size_t *a)
{
    size_t o = t->off, b = o + (size_t)t->lrows * t->lcols;
    *a = o > r->lo ? o : r->lo;
    if (b > r->hi) b = r->hi;
    return b > *a ? b - *a : 0;
}

/* The gradients' reduction before the update (ZeRO-1's reduce-scatter;
 * ZeRO-2/3 finish theirs; folded experts at dp 1) and the sum of squares of
 * this rank's share. */
static int grads16(const mk_exec_t *e)
{
    return e->o->grad_dtype && e->g->be->round16 ? e->o->grad_dtype : 0;
}

void mk_exec_grads16_layer(mk_exec_t *e, int l)
{
    mk_gpt_t *g = e->g;
    int dt = grads16(e);
    if (!dt || (e->g16.dt && e->zero.on < 2)) return; /* (16-bit buffers: rounded as the pass ends, exec_g16.c) */
    for (int k = g->first[l]; k < g->first[l + 1]; k++) {
        float *gr = g->t[k].owned ? mk_gpt_grad(g, k) : NULL;
        if (gr) g->be->round16(g->be->ctx, gr, (size_t)g->t[k].lrows * g->t[k].lcols, dt);
    }
}

static int reduced_sumsq(mk_exec_t *e, double *sumsq)
{
    mk_gpt_t *g = e->g;
    if (e->zero.on == 1 && mk_exec_zero_scatter(e) < 0) return -1;
    if (mk_exec_fsdp_reduce(e) < 0) return -1;
    /* folded MoE at dp 1: the experts over the TP ranks (the stream has no REDUCE_GRADS without DP;
       ZeRO-1's reduce-scatter did it) */
    if (e->comm.dp == 1 && !e->zero.on && mk_exec_ep_reduce(e) < 0) return -1;
    if (mk_exec_g16_widen(e) < 0) return -1; /* 16-bit buffers: the reduced range in fp32 */
    for (int i = 0; i < mk_exec_zero_n_ranges(e); i++) {
        mk_opt_range_t r;
        mk_exec_zero_range(e, i, &r);
        if (grads16(e)) g->be->round16(g->be->ctx, r.g, r.hi - r.lo, grads16(e)); /* the reduced sums */
        for (int k = 0; k < g->n_tensors; k++) {
            size_t a, n = counts_once(e, &g->t[k], e->zero.on) ? clip_to(&r, &g->t[k], &a) : 0;
            if (n) *sumsq += g->be->sumsq(g->be->ctx, r.g + (a - r.lo), n);
        }
    }
    return 0;
}

/* The step's gradients go (ZeRO-2/3: this rank's pieces). */
static void zero_grads(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (e->g16.dt) mk_exec_g16_clear(e);
    else if (e->zero.on >= 2) g->be->zero(g->be->ctx, e->zero.grads, (e->zero.ns ? e->zero.ns : 1) * sizeof(float));
    else g->be->zero(g->be->ctx, g->grads, g->n_params * sizeof(float));
}

/* The fp32 block ZeRO-1's dump gathers into: the gradients' own, or
 * (16-bit buffers, exec_g16.c: the pieces are fp32 apart) one for it. */
static float *dump_block(mk_exec_t *e)
{
    return e->g->grads ? e->g->grads : mk_gpt_alloc(&e->run, e->g, e->g->n_params ? e->g->n_params : 1);
}

static void dump_block_done(mk_exec_t *e, float *gr)
{
    if (gr != e->g->grads) mk_gpt_release(&e->run, e->g, gr, e->g->n_params ? e->g->n_params : 1);
}

/* ZeRO-1 with the experts' units (exec_zero.c expert_units): the pieces'
 * run (zero.grads: at the block's start) copied out, each unit's pieces
 * gathered over its group into the block and dumped, the run put back
 * for Adam. */
static int dump_units(mk_exec_t *e, float *gr)
{
    const mk_backend_t *be = e->g->be;
    size_t ns = e->zero.ns;
    float *pieces = mk_gpt_alloc(&e->run, e->g, ns ? ns : 1);
    int rc = pieces ? 0 : -1;
    if (pieces) be->copy(be->ctx, pieces, e->zero.grads, ns * sizeof(float));
    for (int j = 0; rc == 0 && j < e->zero.n_units; j++) {
        const mk_zunit_t *u = &e->zero.u[j];
        size_t c = (size_t)u->cnt[u->gi];
        if (u->G == 1) be->copy(be->ctx, gr + u->off, pieces + u->soff, c * sizeof(float));
        else rc = mk_comm_allgatherv(&e->comm, u->c, pieces + u->soff, (int)c, gr + u->off, u->cnt, u->dsp, MPI_FLOAT,
                                     "the gradient dump's gather");
    }
    if (rc == 0) rc = mk_exec_dump_grads(e, e->o->dump_grads, gr);
    if (pieces) be->copy(be->ctx, e->zero.grads, pieces, ns * sizeof(float));
    if (pieces) mk_gpt_release(&e->run, e->g, pieces, ns ? ns : 1);
    return rc;
}

/* ZeRO-1: the pieces gathered into the full block and dumped; this
 * rank's piece, which the in-place reduce-scatter left at the block's
 * start and Adam reads there, is put back after. */
static int dump_zero1(mk_exec_t *e, float *gr)
{
    if (e->zero.n_units > 1) return dump_units(e, gr);
    const mk_zunit_t *u = &e->zero.u[0];
    const mk_backend_t *be = e->g->be;
    size_t c = (size_t)u->cnt[e->zero.gi];
    float *piece = mk_gpt_alloc(&e->run, e->g, c ? c : 1);
    if (!piece) return -1;
    be->copy(be->ctx, piece, e->zero.grads, c * sizeof(float));
    int rc = mk_comm_allgatherv(&e->comm, e->zero.zsc, piece, (int)c, gr, u->cnt, u->dsp, MPI_FLOAT,
                                "the gradient dump's gather");
    if (rc == 0) rc = mk_exec_dump_grads(e, e->o->dump_grads, gr);
    be->copy(be->ctx, e->zero.grads, piece, c * sizeof(float));
    mk_gpt_release(&e->run, e->g, piece, c ? c : 1);
    return rc;
}

/* --dump-grads at the run's first step: the summed gradients (ZeRO-1:
 * the sharding group's reduced pieces gathered into the full gradient
 * block, zeroed after the step; ZeRO-2/3: assembled from the pieces). */
static int dump_first(mk_exec_t *e)
{
    if (e->zero.on == 1) {
        float *gr = dump_block(e);
        int rc = gr ? dump_zero1(e, gr) : -1;
        if (gr) dump_block_done(e, gr);
        return rc;
    }
    if (e->zero.on < 2) return mk_exec_dump_grads(e, e->o->dump_grads, e->g->grads);
    float *full = mk_exec_fsdp_full_grads(e);
    int rc = full ? mk_exec_dump_grads(e, e->o->dump_grads, full) : mk_error_set("out of memory");
    free(full);
    return rc;
}

/* What Adam multiplies the summed gradients by: 1 / the loss scale they
 * carry (Megatron's unscale), times global-norm clipping's factor on the
 * unscaled norm.  The scale is a power of two by default, so the product
 * is the unscaled run's factor times 2^-k, exactly. */
static double clip_factor(const mk_exec_t *e, double sumsq)
{
    double inv = 1.0 / e->scaler.scale, norm = sqrt(sumsq) * inv, clip = e->o->clip_grad;
    return clip > 0 && norm > clip ? clip / norm * inv : inv;
}

/* Adam's update number e->updates + 1 (its bias corrections) at the lr
 * of the updates before it. */
static void adam_ranges(mk_exec_t *e, double scale)
{
    const mk_exec_opts_t *o = e->o;
    mk_gpt_t *g = e->g;
    int64_t t = e->updates + 1;
    float lr = (float)e->lr;
    float b1 = (float)o->adam_beta1, b2 = (float)o->adam_beta2;
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    for (int i = 0; i < mk_exec_zero_n_ranges(e); i++) {
        mk_opt_range_t r;
        mk_exec_zero_range(e, i, &r);
        for (int k = 0; k < g->n_tensors; k++) {
            const mk_gpt_tensor_t *t = &g->t[k];
            size_t a, n = t->owned ? clip_to(&r, t, &a) : 0;
            if (!n) continue;
            g->be->adamw(g->be->ctx, r.p + (a - r.lo), r.g + (a - r.lo), r.m + (a - r.lo), r.v + (a - r.lo), n, lr,
                         b1, b2, bc1, bc2, (float)o->adam_eps,
                         t->decay ? (float)o->weight_decay : 0.0f, (float)scale);
        }
    }
}

int mk_exec_opt_step(mk_exec_t *e, int64_t step, double *loss_out)
{
    const mk_exec_opts_t *o = e->o;
    mk_gpt_t *g = e->g;
    double sums[3] = {0.0, 0.0, 0.0};  /* squared gradient norm, token losses, aux losses (TP rank 0) */
    if (reduced_sumsq(e, &sums[0]) < 0) return -1;
    if (mk_fault_grad_inf(e->comm.rank, step)) sums[0] = INFINITY;
    double t0 = e->trace.on ? mk_exec_now(e) : 0.0;
    int head = g->t[g->first[g->n_layers - 1]].owned;
    if (head && e->comm.tp_rank == 0) sums[1] = e->loss;
    /* the micro-batches' aux losses: the same on each TP and CP rank of a replica (gpt_moe.c sums their counts) */
    if (e->comm.tp_rank == 0 && (e->cp.n <= 1 || e->cp.rank == 0)) sums[2] = e->run.aux;
    if (mk_comm_allreduce(&e->comm, e->comm.world, sums, 3, MPI_DOUBLE, MPI_SUM, "the step's loss and norm sums") < 0)
        return -1;
    e->step_loss = sums[1] / ((double)o->ctx->plan.gbs * o->ctx->plan.model.seq);
    e->step_aux = sums[2];
    if (e->eval) {  /* validation: the loss only */
        zero_grads(e);
        if (g->moe_load) memset(g->moe_load, 0, (size_t)g->n_layers * g->E * sizeof *g->moe_load);
        return 0;
    }
    if (step == e->step0 && o->dump_grads) {
        if (dump_first(e) < 0) return -1;
        mk_exec_log(e, "wrote gradients %s", o->dump_grads);
    }
    /* the sums are all-reduced: every rank finds the same inf and skips alike;
       a skipped step moves neither the lr schedule nor Adam's step count */
    e->step_skipped = mk_loss_scaler_update(&e->scaler, e->scaler.kind && !isfinite(sums[0]));
    e->lr = mk_exec_lr_at(e, e->updates);
    if (!e->step_skipped) adam_ranges(e, clip_factor(e, sums[0])), e->updates++;
    else e->skipped++;
    e->run.grad_scale = (float)(e->run.loss_scale * e->scaler.scale);
    mk_exec_trace_ev(e, MK_TRACE_COMPUTE, "OPT", t0, -1, 0, -1);
    if (e->p16.dt) { /* the 16-bit weights from the updated masters (ZeRO-1/2: gathered in 16 bits) */
        if (mk_exec_p16_refresh(e) < 0) return -1;
    } else if ((e->zero.on == 1 && mk_exec_zero_gather(e) < 0) || mk_exec_fsdp_gather(e) < 0) {
        return -1;
    }
    /* DeepSeek-V3's score biases: the step's load per expert over every DP replica (a TP group's ranks
       route the same tokens), then the same move on every rank holding them */
    if (g->moe_load) {
        if (mk_comm_allreduce(&e->comm, e->comm.dpc, g->moe_load, g->n_layers * g->E, MPI_FLOAT, MPI_SUM,
                              "the experts' load") < 0)
            return -1;
        mk_gpt_moe_bias_step(g);
        mk_exec_moe_bias_push(e);
    }
    zero_grads(e);
    if (loss_out) *loss_out = e->step_loss;
    return 0;
}

/* Testing: full unsharded gradients (grads: the DP-summed block, on the
 * device or the host), summed over TP and PP to rank 0.  Format: "MKGRAD1\n",
 * int32 count, then per tensor int32 name length, name, int64 n, n float32. */
int mk_exec_dump_grads(mk_exec_t *e, const char *path, const float *grads)
{
    mk_gpt_t *g = e->g;
    size_t total = 0, *off = calloc(g->n_tensors, sizeof *off);
    int count = 0;
    for (int k = 0; k < g->n_tensors; k++)
        if (!g->t[k].tied_copy) { off[k] = total; total += mk_gpt_full_size(&g->t[k]); count++; }
    float *full = calloc(total, sizeof *full);
    /* the gradients may live on a device: read them through the backend */
    float *gr = malloc((g->n_params ? g->n_params : 1) * sizeof *gr);
    g->be->copy(g->be->ctx, gr, grads, g->n_params * sizeof *gr);
    float inv = (float)(1.0 / e->scaler.scale); /* the loss scale's factor out (exact: a power of two) */
    for (int k = 0; k < g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        if (!counts_once(e, t, 0)) continue;
        for (size_t i = 0; i < (size_t)t->lrows * t->lcols; i++) {
            long f = mk_gpt_full_index(g, t, i);
            if (f >= 0) full[off[k] + f] = gr[t->off + i] * inv;
        }
    }
    free(gr);
    int rc = 0;
    MPI_Request req;
    MPI_Ireduce(e->comm.rank ? full : MPI_IN_PLACE, full, (int)total, MPI_FLOAT, MPI_SUM, 0, e->comm.world, &req);
    if (mk_comm_wait_for(&e->comm, &req, "the gradient dump's reduction", -1) < 0) rc = -1;
    else if (e->comm.rank == 0) {
        mk_file_out_t out;
        FILE *f = mk_file_begin(&out, path, "gradient dump");
        if (!f) rc = -1;
        else {
            fwrite("MKGRAD1\n", 1, 8, f);
            fwrite(&count, 4, 1, f);
            for (int k = 0; k < g->n_tensors; k++) {
                if (g->t[k].tied_copy) continue;
                int32_t len = (int32_t)strlen(g->t[k].name);
                int64_t n = (int64_t)mk_gpt_full_size(&g->t[k]);
                fwrite(&len, 4, 1, f); fwrite(g->t[k].name, 1, len, f); fwrite(&n, 8, 1, f);
                fwrite(full + off[k], sizeof(float), n, f);
            }
            rc = mk_file_commit(&out);
        }
    }
    free(full);
    free(off);
    return rc;
}
