/* ZeRO's layout (--zero 1|2|3): the rank's parameter block is cut into
 * units (exec_internal.h, mk_zunit_t), each into `group` pieces, one per
 * rank of the sharding group (the DP group, or k consecutive DP ranks of
 * a hybrid group; the dp/k groups replicate each other).  This rank keeps
 * the Adam moments of its pieces (ZeRO-1), their summed gradients too
 * (ZeRO-2) and their parameters (ZeRO-3); the full blocks go.
 *
 * ZeRO-1: one unit, the whole block.  OPT_STEP reduce-scatters the
 * gradients over the sharding group in place (instead of the per-layer
 * all-reduces; this rank's piece lands at the block's start, zero.grads;
 * a hybrid group then sums its piece over the replicas), runs
 * AdamW on this rank's piece only, and all-gathers the updated parameters.
 * ZeRO-2/3 reduce during the step (exec_fsdp.c). */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Unit [off, off + n) of layer l sharded over a group of G ranks (this
 * rank the gi-th, over c): its pieces and this rank's. */
static void add_unit_in(mk_exec_t *e, size_t off, size_t n, int l, int tied, int G, int gi, MPI_Comm c,
                        MPI_Comm rc)
{
    mk_zunit_t *u = &e->zero.u[e->zero.n_units++];
    memset(u, 0, sizeof *u);
    u->off = off, u->n = n, u->layer = l, u->tied = tied, u->G = G, u->gi = gi;
    u->c = c != MPI_COMM_NULL ? c : MPI_COMM_SELF; /* a group of one: its collectives copy */
    u->rc = rc;
    u->S = (n + G - 1) / G;
    u->cnt = calloc(G, sizeof *u->cnt);
    u->dsp = calloc(G, sizeof *u->dsp);
    for (int i = 0; i < G; i++) {
        size_t lo = i * u->S < n ? i * u->S : n, hi = lo + u->S < n ? lo + u->S : n;
        u->dsp[i] = (int)lo, u->cnt[i] = (int)(hi - lo);
    }
    u->soff = e->zero.ns;
    e->zero.ns += u->cnt[gi];
    u->rs = u->ag = MPI_REQUEST_NULL;
}

/* A unit over the ZeRO sharding group. */
static void add_unit(mk_exec_t *e, size_t off, size_t n, int l, int tied)
{
    add_unit_in(e, off, n, l, tied, e->zero.group, e->zero.gi, e->zero.zsc, e->zero.zrc);
}

/* A run of dense tensors (over the sharding group) or of this rank's routed
 * experts (ex: over the ranks holding them, exec_ep.c; a hybrid group's
 * share of them, its replicas in the other groups). */
static void add_run(mk_exec_t *e, size_t off, size_t n, int l, int ex)
{
    if (ex && e->ep.zrc != MPI_COMM_NULL) add_unit_in(e, off, n, l, 0, e->ep.zn, e->ep.zi, e->ep.zdc, e->ep.zrc);
    else if (ex) add_unit_in(e, off, n, l, 0, e->ep.edpn, e->ep.edp, e->ep.dc, MPI_COMM_NULL);
    else add_unit(e, off, n, l, 0);
}

/* ZeRO-1 with expert parallelism (or MoE folded over TP ranks): the block
 * in its runs of dense tensors, each a unit over the DP group as before,
 * and of this rank's routed experts, each over the ranks holding the same
 * experts (exec_ep.c's ep.dc, ep.edpn of them: Megatron-Core's distributed
 * optimizer shards the experts over the expert-data-parallel group), whose
 * pieces would otherwise mix different experts. */
static void expert_units(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    size_t a = 0, n = 0;
    int ex = 0;
    for (int k = 0; k <= g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = k < g->n_tensors ? &g->t[k] : NULL;
        if (t && !t->owned) continue;
        int tx = t && t->expert >= 0;
        if (n && (!t || tx != ex)) add_run(e, a, n, -1, ex), n = 0;
        if (!t) break;
        if (!n) a = t->off, ex = tx;
        n += (size_t)t->lrows * t->lcols;
    }
}

/* ZeRO-2/3: each owned layer's tensors a unit; with a tied pair across
 * stages (mk_plan_ends_apart), wte and the head's copy of it one each. */
static void layer_units(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    int pair = !g->cfg.untied && mk_plan_ends_apart(&e->o->ctx->plan);
    e->zero.lu = calloc(g->n_layers + 1, sizeof *e->zero.lu);
    e->zero.wte_unit = g->t[0].owned ? 0 : -1;  /* wte opens layer 0's first unit */
    for (int l = 0; l < g->n_layers; l++) {
        e->zero.lu[l] = e->zero.n_units;
        size_t a = 0, n = 0;
        int ex = 0;
        for (int k = g->first[l]; k < g->first[l + 1]; k++) {
            const mk_gpt_tensor_t *t = &g->t[k];
            size_t tn = (size_t)t->lrows * t->lcols;
            int tx = t->expert >= 0 && (e->ep.n > 1 || e->ep.fold);
            if (!t->owned) continue;
            if (pair && t->id == 0) {  /* wte, or the head's copy of it */
                if (n) add_unit(e, a, n, l, 0), n = 0;
                add_unit(e, t->off, tn, l, 1);
                continue;
            }
            if (n && tx != ex) add_run(e, a, n, l, ex), n = 0; /* with EP the experts a unit of their own */
            if (!n) a = t->off, ex = tx;
            n += tn;
        }
        if (n) add_run(e, a, n, l, ex);
    }
    e->zero.lu[g->n_layers] = e->zero.n_units;
}

/* The sharding group and its replicas: dpc, or consecutive DP ranks; with
 * experts (EP, or MoE folded over TP) also the holders of this rank's
 * experts in its group (the group's G, or G tp folded, ranks in order of
 * mk_exec_ep_index hold ep-wide EP groups whole: exec.c checks ep divides
 * them) and in the others (Megatron-Core's expert data-parallel group cut
 * by its distributed optimizer instances, as merak sim's
 * mk_sim_expert_zero_group). */
static void split_groups(mk_exec_t *e)
{
    int G = mk_plan_zero_group(&e->o->ctx->plan), d = e->comm.dp_rank;
    e->zero.group = G, e->zero.gi = d % G, e->zero.ri = d / G;
    e->zero.zsc = e->comm.dpc, e->zero.zrc = MPI_COMM_NULL;
    e->ep.zdc = e->ep.zrc = MPI_COMM_NULL;
    if (G == e->comm.dp) return;
    MPI_Comm_split(e->comm.dpc, e->zero.ri, e->zero.gi, &e->zero.zsc);
    MPI_Comm_split(e->comm.dpc, e->zero.gi, e->zero.ri, &e->zero.zrc);
    if (e->ep.n <= 1 && !e->ep.fold) return;
    int zn = G * (e->ep.fold ? e->comm.tp : 1) / e->ep.n; /* the holders of my experts in my group */
    e->ep.zn = zn, e->ep.zi = e->ep.edp % zn;
    MPI_Comm_split(e->ep.dc, e->ep.edp / zn, e->ep.zi, &e->ep.zdc);
    MPI_Comm_split(e->ep.dc, e->ep.zi, e->ep.edp / zn, &e->ep.zrc);
}

/* The full blocks this stage shards go (their bytes leave the counters);
 * ZeRO-3 (and 16-bit weights' masters) keeps its pieces of the initialised
 * parameters. */
static int shard_blocks(mk_exec_t *e, size_t s)
{
    mk_gpt_t *g = e->g;
    int st = e->zero.on;
    size_t full = (g->n_params ? g->n_params : 1) * sizeof(float);
    float **blk[4] = {&g->m, &g->v, &g->grads, &g->params};
    float **mine[4] = {&e->zero.m, &e->zero.v, &e->zero.grads, &e->zero.params};
    for (int i = 0; i < 4; i++) {
        if (i == 3 && !mk_exec_zero_params_sharded(e)) break;
        if (i == 2 && st < 2) { /* ZeRO-1: the full gradients stay, the reduced piece at their start */
            *mine[i] = g->grads;
            continue;
        }
        if (!(*mine[i] = mk_gpt_alloc(&e->run, g, s))) return -1;
        if (i == 3)
            for (int j = 0; j < e->zero.n_units; j++) {
                const mk_zunit_t *u = &e->zero.u[j];
                g->be->copy(g->be->ctx, e->zero.params + u->soff, g->params + u->off + u->dsp[u->gi],
                            u->cnt[u->gi] * sizeof(float));
            }
        g->be->free(g->be->ctx, *blk[i]);
        *blk[i] = NULL;
        e->run.mem_cur -= full;
    }
    return 0;
}

int mk_exec_zero_init(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (g->n_params >= INT_MAX)  /* MPI counts are ints */
        return mk_error_set("ZeRO: a rank's %zu parameters exceed MPI's count limit (%d)", g->n_params, INT_MAX);
    split_groups(e);
    e->zero.u = calloc(g->n_tensors + 1, sizeof *e->zero.u);
    e->zero.pre = e->zero.fly = -1;
    if (e->zero.on == 1 && (e->ep.n > 1 || e->ep.fold)) expert_units(e);
    else if (e->zero.on == 1) add_unit(e, 0, g->n_params, -1, 0);
    else layer_units(e);
    size_t s = e->zero.ns ? e->zero.ns : 1;
    if (e->zero.on >= 2) {
        g->gw = calloc(g->n_tensors, sizeof *g->gw);
        if (e->zero.on == 3) g->pw = calloc(g->n_tensors, sizeof *g->pw);
    }
    if (shard_blocks(e, s) < 0) return -1;
    e->run.mem_peak = e->run.mem_cur;  /* nothing transient so far */
    return 0;
}

void mk_exec_zero_free(mk_exec_t *e)
{
    size_t s = e->zero.ns ? e->zero.ns : 1;
    if (e->g) {
        mk_exec_fsdp_free(e);
        float *a[4] = {e->zero.grads == e->g->grads ? NULL : e->zero.grads, e->zero.m, e->zero.v, e->zero.params};
        for (int i = 0; i < 4; i++) mk_gpt_release(&e->run, e->g, a[i], s);
        free(e->g->pw); free(e->g->gw);
        e->g->pw = e->g->gw = NULL;
    }
    for (int j = 0; e->zero.u && j < e->zero.n_units; j++) { free(e->zero.u[j].cnt); free(e->zero.u[j].dsp); }
    free(e->zero.u); free(e->zero.lu);
    if (e->zero.zrc != MPI_COMM_NULL) { MPI_Comm_free(&e->zero.zsc); MPI_Comm_free(&e->zero.zrc); }
    if (e->ep.zrc != MPI_COMM_NULL) { MPI_Comm_free(&e->ep.zdc); MPI_Comm_free(&e->ep.zrc); }
}

int mk_exec_zero_n_ranges(const mk_exec_t *e) { return e->zero.on ? e->zero.n_units : 1; }

void mk_exec_zero_range(const mk_exec_t *e, int i, mk_opt_range_t *r)
{
    mk_gpt_t *g = e->g;
    if (!e->zero.on) { *r = (mk_opt_range_t){0, g->n_params, g->params, g->grads, g->m, g->v}; return; }
    const mk_zunit_t *u = &e->zero.u[i];
    r->lo = u->off + u->dsp[u->gi];
    r->hi = r->lo + u->cnt[u->gi];
    r->p = mk_exec_zero_params_sharded(e) ? e->zero.params + u->soff : g->params + r->lo;
    r->g = e->zero.grads + u->soff, r->m = e->zero.m + u->soff, r->v = e->zero.v + u->soff;
}

/* ZeRO-1 with experts' units (expert_units): each unit reduce-scattered in
 * place over its group, this rank's piece moved down to its place in the
 * pieces' run at the block's start (soff <= off: the units in order, a
 * piece never reaching a later unit's range).  MoE runs on the CPU
 * backend (mk_gpt_moe_check), its blocks host memory: memmove. */
static int scatter_units(mk_exec_t *e)
{
    for (int j = 0; j < e->zero.n_units; j++) {
        const mk_zunit_t *u = &e->zero.u[j];
        mk_grad_buf_t at = mk_exec_grad_buf(e, u->off), to = mk_exec_grad_buf(e, u->soff);
        if (u->G > 1 &&
            mk_comm_reduce_scatter(&e->comm, u->c, at.p, u->cnt, at.t, at.op, "the ZeRO gradient reduce-scatter") < 0)
            return -1;
        if (u->soff != u->off) memmove(to.p, at.p, (size_t)u->cnt[u->gi] * at.size);
        if (u->rc != MPI_COMM_NULL && /* hybrid: the replicas' sum of this piece */
            mk_comm_allreduce(&e->comm, u->rc, to.p, u->cnt[u->gi], to.t, to.op, "the replicas' gradient all-reduce") < 0)
            return -1;
    }
    return 0;
}

int mk_exec_zero_scatter(mk_exec_t *e)
{
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    const mk_zunit_t *u = &e->zero.u[0];
    if (e->zero.n_units > 1) {
        int rc = scatter_units(e);
        mk_exec_trace_ev(e, MK_TRACE_DP, "RS.dp", t, -1, 0, -1);
        return rc;
    }
    /* in place, as Megatron's distributed optimizer: this rank's summed piece at the block's start (zero.grads);
       a device's block through host memory (comm.c), the piece copied back */
    mk_grad_buf_t b = mk_exec_grad_buf(e, 0);
    if (mk_comm_reduce_scatter(&e->comm, e->zero.zsc, b.p, u->cnt, b.t, b.op, "the ZeRO gradient reduce-scatter") < 0)
        return -1;
    mk_exec_trace_ev(e, MK_TRACE_DP, "RS.dp", t, -1, 0, -1);
    if (u->rc == MPI_COMM_NULL) return 0;
    t = e->trace.on ? mk_exec_now(e) : 0.0;  /* hybrid: the replicas' sum of this piece */
    int rc = mk_comm_allreduce(&e->comm, u->rc, b.p, u->cnt[e->zero.gi], b.t, b.op, "the replicas' gradient all-reduce");
    mk_exec_trace_ev(e, MK_TRACE_DP, "AR.dp", t, -1, 0, -1);
    return rc;
}

int mk_exec_zero_gather(mk_exec_t *e)
{
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    for (int j = 0; j < e->zero.n_units; j++) { /* each unit's pieces, in place, over its group */
        const mk_zunit_t *u = &e->zero.u[j];
        if (u->G > 1 && mk_comm_allgatherv(&e->comm, u->c, MPI_IN_PLACE, 0, e->g->params + u->off, u->cnt, u->dsp,
                                           MPI_FLOAT, "the ZeRO weight all-gather") < 0)
            return -1;
    }
    mk_exec_trace_ev(e, MK_TRACE_DP, "AG.dp", t, -1, 0, -1);
    return 0;
}

/* The unit holding tensor k, and the part [a, b) of the tensor's range
 * that sharding-group rank d holds. */
static const mk_zunit_t *unit_of(const mk_exec_t *e, int k)
{
    size_t o = e->g->t[k].off;
    for (int j = 0; j < e->zero.n_units; j++)
        if (o >= e->zero.u[j].off && o < e->zero.u[j].off + e->zero.u[j].n) return &e->zero.u[j];
    return &e->zero.u[0];  /* an empty tensor at the end of the block */
}

static void isect(const mk_exec_t *e, const mk_zunit_t *u, int k, int d, size_t *a, size_t *b)
{
    const mk_gpt_tensor_t *t = &e->g->t[k];
    size_t lo = u->off + u->dsp[d], hi = lo + u->cnt[d], o = t->off, n = (size_t)t->lrows * t->lcols;
    *a = o > lo ? o : lo;
    *b = o + n < hi ? o + n : hi;
    if (*b < *a) *b = *a;
}

static float *kind_base(const mk_exec_t *e, int kind)
{
    return kind == 0 ? e->zero.params : kind == 1 ? e->zero.m : e->zero.v;
}

/* Tensor k's state `kind`, assembled from its unit's group (collective over
 * it; a group of one: this rank's copy). */
int mk_exec_zero_get(mk_exec_t *e, int k, int kind, float *host)
{
    const mk_zunit_t *u = unit_of(e, k);
    int G = u->G;
    int *cnt = calloc(G, sizeof *cnt), *dsp = calloc(G, sizeof *dsp);
    for (int d = 0; d < G; d++) {
        size_t a, b;
        isect(e, u, k, d, &a, &b);
        cnt[d] = (int)(b - a);
        dsp[d] = (int)(a - e->g->t[k].off);
    }
    size_t a, b;
    isect(e, u, k, u->gi, &a, &b);
    float *src = kind_base(e, kind) + u->soff + (a - u->off - u->dsp[u->gi]);
    int rc = 0;
    if (G == 1) {
        void *h = mk_comm_stage(&e->comm, src, (b - a) * sizeof(float), 1);
        memcpy(host, h, (b - a) * sizeof(float));
        mk_comm_unstage(&e->comm, src, h, (b - a) * sizeof(float), 0);
    } else
        rc = mk_comm_allgatherv(&e->comm, u->c, src, (int)(b - a), host, cnt, dsp, MPI_FLOAT,
                                "the ZeRO gather of a checkpointed tensor");
    free(cnt); free(dsp);
    return rc;
}

void mk_exec_zero_set(mk_exec_t *e, int k, int kind, const float *host)
{
    size_t a, b;
    const mk_zunit_t *u = unit_of(e, k);
    isect(e, u, k, u->gi, &a, &b);
    e->g->be->copy(e->g->be->ctx, kind_base(e, kind) + u->soff + (a - u->off - u->dsp[u->gi]),
                   host + (a - e->g->t[k].off), (b - a) * sizeof(float));
}
