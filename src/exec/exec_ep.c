/* Expert parallelism in the executor (src/graph/README.md "Mixture of experts"; the
 * MoE layer: gpt_moe.c).  The EP group: ep consecutive data-parallel
 * replicas with the same TP and pipeline coordinates; EP rank r = replica mod ep holds
 * experts [r E/ep, (r+1) E/ep).  With sequence parallelism (tp > 1) the
 * MoE layers run on each TP rank's own rows (gpt_moe.c), and the groups are
 * cut from the stage's tp x dp ranks in rank order (d * tp + t): ep
 * consecutive ranks, TP peers included, and the experts' gradients summed
 * over every ep-th one -- Megatron-Core's MoE parallel folding with expert
 * tensor parallelism 1, the layout merak sim and merak plan model
 * (sim/README.md); ep == 1 then still sums the experts over all tp x dp.
 * Its all-to-alls are MPI_Ialltoall(v),
 * completed politely (mk_comm_wait_for) and traced as A2A.ep on the TP stream
 * (as the simulator draws them); a failed MPI call fails the run on every
 * rank (MPI's default handler aborts the job).  The experts' gradients are
 * summed over the ranks holding the same experts (REDUCE_GRADS);
 * the dense tensors over the whole DP group as before (exec_stream.c).
 * The traced step records each MoE layer's tokens per expert as counters
 * ("tokens.expert.E", the micro-batch's before drops). */
#include "config.h"
#include "exec/exec_internal.h"
#include "exec/gpt_moe.h"
#include "merak/trace.h"

#include <stdio.h>
#include <stdlib.h>

static int ep_counts(void *ctx, const int *send, int *recv, int n)
{
    mk_exec_t *e = ctx;
    return mk_comm_alltoall(&e->comm, e->ep.c, send, n, recv, MPI_INT, "the expert all-to-all");
}

/* Rows of width floats to and from each peer; counts and displacements in
 * floats (mk_exec_check keeps ep * N * k * C within an int). */
static int ep_a2a(void *ctx, const float *send, const int *scount, float *recv, const int *rcount, int width)
{
    mk_exec_t *e = ctx;
    int n = e->ep.n, *v = malloc(4 * (size_t)n * sizeof *v), rc;
    if (!v) return mk_error_set("out of memory");
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    for (int r = 0, so = 0, ro = 0; r < n; r++) {
        v[r] = scount[r] * width, v[n + r] = so, so += v[r];
        v[2 * n + r] = rcount[r] * width, v[3 * n + r] = ro, ro += v[2 * n + r];
    }
    rc = mk_comm_alltoallv(&e->comm, e->ep.c, send, v, v + n, recv, v + 2 * n, v + 3 * n, MPI_FLOAT,
                           "the expert all-to-all");
    free(v);
    mk_exec_trace_ev(e, MK_TRACE_TP, "A2A.ep", t, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    return rc;
}

static void ep_tokens(void *ctx, const float *count, int E)
{
    mk_exec_t *e = ctx;
    char name[32];
    for (int j = 0; e->trace.on && j < E; j++) {
        snprintf(name, sizeof name, "tokens.expert.%d", j);
        mk_exec_trace_count(e, name, count[j]);
    }
}

int mk_exec_ep_index(const mk_exec_t *e, int d, int t) { return e->ep.fold ? d * e->comm.tp + t : d; }

static int tok_allreduce(void *ctx, float *buf, int n)
{
    mk_exec_t *e = ctx;
    return mk_comm_allreduce(&e->comm, e->ep.tc, buf, n, MPI_FLOAT, MPI_SUM, "the MoE layer's micro-batch sums");
}

/* The ranks holding one micro-batch's tokens, when an MoE layer sees only
 * some of them: the replica's CP ranks (consecutive DP ranks, exec_cp.c),
 * and folded (sequence parallelism) their TP ranks too, in rank order. */
static void token_group(mk_exec_t *e, int cp)
{
    int dr = e->comm.dp_rank / cp, cr = e->comm.dp_rank % cp, tp = e->comm.tp;
    if (cp == 1 && !e->ep.fold) return;
    if (e->ep.fold) MPI_Comm_split(e->comm.world, e->comm.pp_rank * (e->comm.dp / cp) + dr, cr * tp + e->comm.tp_rank,
                                   &e->ep.tc);
    else MPI_Comm_split(e->comm.dpc, dr, cr, &e->ep.tc);
    e->run.tok_allreduce = tok_allreduce;
    e->run.tok_rank = e->ep.fold ? cr * tp + e->comm.tp_rank : cr;
    e->run.tok_size = e->ep.fold ? cp * tp : cp;
}

int mk_exec_ep_init(mk_exec_t *e)
{
    const mk_plan_t *p = &e->o->ctx->plan;
    int ep = p->ep > 1 ? p->ep : 1;  /* cp 1 with MoE */
    e->ep.fold = mk_model_is_moe(&p->model) && p->seqpar && p->tp > 1;
    int i = mk_exec_ep_index(e, e->comm.dp_rank, e->comm.tp_rank), n = e->ep.fold ? e->comm.dp * e->comm.tp : e->comm.dp;
    e->ep.n = ep, e->ep.rank = i % ep, e->ep.edp = i / ep, e->ep.edpn = n / ep;
    e->ep.c = e->ep.dc = e->ep.tc = MPI_COMM_NULL;
    if (mk_model_is_moe(&p->model)) token_group(e, p->cp > 1 ? p->cp : 1);
    if (ep == 1 && !e->ep.fold) return 0;
    /* the stage's groups: colours unique over the stages (every rank of the world takes part) */
    MPI_Comm in = e->ep.fold ? e->comm.world : e->comm.dpc;
    int s = e->ep.fold ? e->comm.pp_rank : 0;
    if (ep > 1) MPI_Comm_split(in, s * (n / ep) + i / ep, i % ep, &e->ep.c);  /* ep consecutive ones */
    if (n / ep > 1) MPI_Comm_split(in, s * ep + i % ep, i / ep, &e->ep.dc);   /* those with my experts */
    e->run.ep_counts = ep_counts;
    e->run.ep_a2a = ep_a2a;
    e->run.ep_tokens = ep_tokens;
    return 0;
}

void mk_exec_ep_free(mk_exec_t *e)
{
    if (e->ep.c != MPI_COMM_NULL) MPI_Comm_free(&e->ep.c);
    if (e->ep.dc != MPI_COMM_NULL) MPI_Comm_free(&e->ep.dc);
    if (e->ep.tc != MPI_COMM_NULL) MPI_Comm_free(&e->ep.tc);
}

/* The experts' gradients of every owned MoE layer, summed over ep.dc. */
int mk_exec_ep_reduce(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (e->ep.dc == MPI_COMM_NULL) return 0;
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    for (int l = 0; l < g->n_layers; l++) {
        size_t off, n;
        if (!mk_gpt_layer_is_moe(g, l) || !g->t[g->first[l]].owned) continue;
        mk_gpt_moe_expert_range(g, l, &off, &n);
        mk_grad_buf_t b = mk_exec_grad_buf(e, off);
        if (mk_comm_allreduce(&e->comm, e->ep.dc, b.p, (int)n, b.t, b.op, "the expert gradient all-reduce") < 0)
            return -1;
    }
    mk_exec_trace_ev(e, MK_TRACE_DP, "AR.dp.experts", t, -1, 0, -1);
    return 0;
}

/* DeepSeek-V3's score biases (gpt.h moe_bias): the router reads every
 * rank's whole copy, as Megatron-Core's expert_bias buffer, which ZeRO does
 * not shard; the tensor e_score_correction_bias (checkpoints, --save-hf)
 * holds the same values in the masters: the whole fp32 block, or with
 * sharded masters (ZeRO-3, 16-bit runs with ZeRO) the sharding group's
 * pieces.  Pull: the copy from the masters after a load (or the init),
 * collective over each tensor's sharding group; push: the masters from
 * the copy after its step (each rank its own pieces). */
int mk_exec_moe_bias_pull(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    for (int l = 0; l < g->n_layers; l++) {
        int k = mk_gpt_moe_bias_tensor(g, l);
        float *b = k >= 0 ? g->moe_bias + (size_t)l * g->E : NULL;
        if (!b) continue;
        if (mk_exec_zero_params_sharded(e)) { /* implies ZeRO */
            if (mk_exec_zero_get(e, k, 0, b) < 0) return -1;
        } else {
            g->be->copy(g->be->ctx, b, g->params + g->t[k].off, (size_t)g->E * sizeof *b);
        }
    }
    return 0;
}

void mk_exec_moe_bias_push(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    for (int l = 0; l < g->n_layers; l++) {
        int k = mk_gpt_moe_bias_tensor(g, l);
        const float *b = k >= 0 ? g->moe_bias + (size_t)l * g->E : NULL;
        if (b && mk_exec_zero_params_sharded(e)) mk_exec_zero_set(e, k, 0, b);
        else if (b) g->be->copy(g->be->ctx, g->params + g->t[k].off, b, (size_t)g->E * sizeof *b);
    }
}
