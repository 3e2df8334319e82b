/* The discrete-event engine (see include/merak/sim.h): one run sets up
 * the plan's streams and per-chunk costs (sim_chunk.c) and the stream
 * walker (merak/walk.h) with the instruction handlers as its hooks
 * (sim_step.c), queues every stage at time 0 on the event queue (evq.c)
 * and runs events until the queue is empty; the result is then read off
 * the stages (sim_result.c). */
#include "sim/sim_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A handle holding a copy of the cluster and the buffers of the streams
 * its runs built (merak/sched.h's pool: the planner runs one handle over
 * thousands of candidates, and fresh stream memory for each run cost more
 * in page faults than the build), and the per-layer costs its runs
 * computed (sim_cache.c: with the search space of issue 19 building the
 * chunk costs was 17% of `merak plan`'s time on GPT-20B / 64 GPUs, perf;
 * issue 22). */
struct mk_sim {
    mk_cluster_t c;
    mk_sched_pool_t pool;
    mk_layer_caches_t lc;  /* per-layer pieces across runs (sim_cache.c) */
};

void mk_sim_opts_init(mk_sim_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

mk_sim_t *mk_sim_new(const mk_cluster_t *c)
{
    mk_sim_t *s = calloc(1, sizeof *s);
    if (!s) return mk_error_set("out of memory"), NULL;
    s->c = *c;
    return s;
}

void mk_sim_free(mk_sim_t *s)
{
    if (s) mk_sched_pool_free(&s->pool), mk_layer_caches_free(&s->lc);
    free(s);
}

/* Static memory of every stage, and the DP buckets (sized by the stage
 * with the most gradient bytes, 1 to 64). */
int mk_sim_setup_statics(mk_sim_state_t *R)
{
    const mk_plan_t *p = R->p;
    R->st = calloc(p->pp, sizeof *R->st);
    if (!R->st) return mk_error_set("out of memory");
    double gmax = 0;
    for (int s = 0; s < p->pp; s++) {
        mk_sim_stage_static(p, R->g, s, R->o, &R->st[s].ss);
        if (R->st[s].ss.grad_comm_bytes > gmax) gmax = R->st[s].ss.grad_comm_bytes;
    }
    R->nb = 0;
    if (mk_plan_dp_cp(p) > 1) {
        R->nb = (int)ceil(gmax / mk_sim_bucket_bytes(R->o));
        if (R->nb < 1) R->nb = 1;
        if (R->nb > 64) R->nb = 64;
    }
    return 0;
}

/* The streams: the caller's (which then fix the buckets), or built from
 * the context's spec with this run's bucket count. */
static int setup_streams(mk_sim_state_t *R, const mk_plan_ctx_t *ctx, mk_sched_pool_t *pool)
{
    const mk_plan_t *p = R->p;
    const mk_sched_t *sch = R->o->sched;
    if (!sch) {
        mk_sched_spec_t spec = ctx->spec;
        spec.grad_buckets = R->nb;
        if (!(R->own = mk_sched_build_pooled(&spec, pool))) return -1;
        sch = R->own;
    } else {
        R->nb = sch->spec.grad_buckets;
        if (sch->spec.pp != p->pp || sch->spec.m != p->m || sch->spec.vpp != p->vpp)
            return mk_error_set("the given streams do not match the plan (pp, micro-batches, vpp)");
    }
    R->sch = sch;
    return 0;
}

/* The stages' ranks: tp fastest, then cp, then dp (merak/plan.h); a
 * stage's ranks all share its node's links (sh in the groups below). */
static int stage_sharers(const mk_cluster_t *c, const mk_plan_t *p)
{
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1, stage_ranks = mk_plan_dp_cp(p) * p->tp;
    return stage_ranks < gpn ? stage_ranks : gpn;
}

void mk_sim_layer_groups(const mk_cluster_t *c, const mk_plan_t *p, mk_group_t *tpg, mk_group_t *cpg,
                         mk_group_t *epg)
{
    int sh = stage_sharers(c, p), ep = p->ep > 1 ? p->ep : 1;
    *tpg = mk_group_make(c, 0, 1, p->tp, p->tp);
    *cpg = mk_group_make(c, 0, p->tp, p->cp > 1 ? p->cp : 1, sh);
    /* EP: ep consecutive ranks of the stage (MoE parallel folding, expert
       tensor parallelism 1: Megatron-Core's expert grid, tp-cp-ep-dp-pp
       with etp 1) */
    *epg = mk_group_make(c, 0, 1, ep, sh);
}

/* Communication groups, message and NIC tables, chunk costs, the walker. */
void mk_sim_setup_groups(mk_sim_state_t *R)
{
    const mk_plan_t *p = R->p;
    const mk_cluster_t *c = R->c;
    int dcp = mk_plan_dp_cp(p), sh = stage_sharers(c, p);
    mk_sim_layer_groups(c, p, &R->tpg, &R->cpg, &R->epg);
    R->dpg = mk_group_make(c, 0, p->tp, dcp, sh);
    R->tiedg = mk_group_make(c, 0, mk_plan_ends_apart(p) ? (mk_plan_head_stage(p)) * dcp * p->tp : 1, 2, sh);
    /* an expert's gradient is reduced over the tp*dp*cp/ep ranks holding
       it (the expert data-parallel group: every ep-th rank of the stage) */
    int ep = p->ep > 1 ? p->ep : 1, ke = mk_sim_expert_zero_group(p);
    R->edpg = mk_group_make(c, 0, ep, p->tp * dcp / ep, sh);
    /* ZeRO: k consecutive DP x CP ranks shard, the dp*cp/k groups replicate */
    R->zk = mk_plan_zero(p) ? mk_plan_zero_group(p) : dcp;
    R->nrep = dcp / R->zk;
    R->zg = mk_group_make(c, 0, p->tp, R->zk, sh);
    R->ezg = mk_group_make(c, 0, ep, ke, sh);
    R->rg = mk_group_make(c, 0, p->tp * R->zk, R->nrep, sh);
}

static int setup_shared(mk_sim_state_t *R, mk_layer_caches_t *lc)
{
    const mk_plan_t *p = R->p;
    int gpn = R->c->gpus_per_node > 0 ? R->c->gpus_per_node : 1;
    mk_sim_setup_groups(R);
    R->lc = mk_layer_cache_find(lc, R);
    R->ch = calloc(R->V, sizeof *R->ch);
    long nmsg = mk_walk_n_keys(R->sch);
    R->arrival = malloc(nmsg * sizeof *R->arrival);
    R->xfer = malloc(nmsg * sizeof *R->xfer);
    R->nodes = (int)((mk_plan_gpus(p) + gpn - 1) / gpn);
    R->nic_free = calloc(R->nodes, sizeof *R->nic_free);
    if (!R->ch || !R->arrival || !R->xfer || !R->nic_free) return mk_error_set("out of memory");
    for (long i = 0; i < nmsg; i++) R->arrival[i] = -1, R->xfer[i] = 0;
    for (int k = 0; k < R->V; k++)
        if (mk_chunk_cost_build(R, k, &R->ch[k]) < 0) return -1;
    /* a forward checkpoints at most its chunk's checkpointable layers */
    for (int s = 0; s < p->pp; s++)
        for (int k = 0; k < p->vpp; k++) R->ckpt_cap[s * p->vpp + k] = R->ch[mk_plan_vstage(p, s, k)].nck;
    mk_walk_opts_t wo = {.mode = MK_WALK_BUFFERED, .ckpt_cap = R->ckpt_cap};
    mk_walk_hooks_t h;
    mk_sim_hooks(R, &h);
    return mk_walk_init(&R->w, R->sch, &wo, &h);
}

/* Stage s before its first instruction; queued at time 0. */
static int setup_stage(mk_sim_state_t *R, int s)
{
    const mk_plan_t *p = R->p;
    mk_sim_stage_t *S = &R->st[s];
    int nmc = p->m * p->vpp;
    S->rank = mk_sim_stage_rank(p, s);
    S->node = mk_sim_stage_node(R->c, p, s);
    S->stat = S->ss.weights + S->ss.grads + S->ss.optimizer + S->ss.buffers;
    S->final_bytes = S->ss.grad_comm_bytes;
    S->mb_stored = calloc(nmc, sizeof *S->mb_stored);
    S->bucket_end = malloc((R->nb + 1) * sizeof *S->bucket_end);
    if (!S->mb_stored || !S->bucket_end) return mk_error_set("out of memory");
    for (int i = 0; i <= R->nb; i++) S->bucket_end[i] = -1;
    mk_sim_mem_note(R, s, 0, 0);
    if (R->tr) {
        char label[64];
        snprintf(label, sizeof label, "rank %d (stage %d)", S->rank, s);
        mk_trace_rank(R->tr, S->rank, label);
        if (p->cp > 1) mk_trace_stream(R->tr, S->rank, MK_TRACE_CP);
        mk_sim_mem_trace(R, s, 0);
    }
    if (p->overlap_param_gather && !R->o->unit_costs) mk_sim_param_gather_start(R, s);
    return mk_sim_wake(R, s, 0);
}

/* Run the events; *step = the makespan.  A stage left short of its
 * stream's end is a deadlock (streams that do not match).  0 or -1. */
static int run_events(mk_sim_state_t *R, double *step)
{
    if (mk_evq_run(&R->q) < 0) return -1;
    *step = 0;
    for (int s = 0; s < R->p->pp; s++) {
        const mk_sim_stage_t *S = &R->st[s];
        if (R->w.pos[s] < R->sch->streams[s].n) {
            const mk_instr_t *in = &R->sch->streams[s].v[R->w.pos[s]];
            return mk_error_set("simulation deadlock: stage %d stuck at %s mb %d", s, mk_instr_op_name(in->op),
                                in->mb);
        }
        if (S->now > *step) *step = S->now;
    }
    return 0;
}

static void state_free(mk_sim_state_t *R, mk_sched_pool_t *pool)
{
    if (R->ch)
        for (int k = 0; k < R->V; k++) mk_chunk_cost_free(&R->ch[k]);
    if (R->st)
        for (int s = 0; s < R->p->pp; s++) {
            free(R->st[s].mb_stored), free(R->st[s].bucket_end);
        }
    free(R->ch), free(R->st), free(R->arrival), free(R->xfer), free(R->nic_free);
    mk_evq_free(&R->q);
    mk_walk_free(&R->w);
    mk_sched_recycle(R->own, pool);
}

int mk_sim_run(mk_sim_t *sim, const mk_plan_ctx_t *ctx, const mk_sim_opts_t *opts, mk_sim_result_t *out)
{
    mk_sim_opts_t dflt;
    if (!opts) mk_sim_opts_init(&dflt), opts = &dflt;
    if (!sim || !ctx || !out) return mk_error_set("mk_sim_run: NULL argument");
    const mk_plan_t p = ctx->plan; /* resolved: checked, auto settled (mk_plan_resolve) */
    const mk_graph_t *g = ctx->g;
    if ((p.optimizer_offload || p.cpu_offload_layers) && !(sim->c.host.link_Bps > 0) && !sim->c.ideal)
        return mk_error_set("%s: cluster '%s' gives no host memory and link (its \"host\" figures: link_Bps, "
                            "mem_bytes, mem_bw_Bps)", p.optimizer_offload ? "--optimizer-cpu-offload"
                            : "--cpu-offloading-num-layers", sim->c.name);

    mk_sim_state_t R;
    memset(&R, 0, sizeof R);
    R.c = &sim->c, R.p = &p, R.g = g, R.o = opts, R.tr = opts->trace, R.V = p.n_vstages;
    mk_evq_init(&R.q);
    double step;
    int rc = -1;
    if (mk_sim_setup_statics(&R) < 0 || setup_streams(&R, ctx, &sim->pool) < 0 || setup_shared(&R, &sim->lc) < 0) goto done;
    for (int s = 0; s < p.pp; s++)
        if (setup_stage(&R, s) < 0) goto done;
    if (run_events(&R, &step) < 0) goto done;
    mk_sim_result_fill(&R, step, out);
    rc = 0;
done:
    state_free(&R, &sim->pool);
    return rc;
}
