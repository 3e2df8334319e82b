/* Unit-cost timeline: run the streams under buffered-send semantics.
 * Each stage executes in order; compute ops take their cost, a RECV waits
 * for the time its matching SEND was issued, sends take no time, and
 * REDUCE_TIED waits for both the first and the last stage.  The result
 * does not depend on the order stages are visited in (each RECV waits on
 * one known SEND), so a sweep that advances stages until none can move
 * finds every time, or a deadlock. */
#include "config.h"
#include "sched/sched_internal.h"

#include <stdlib.h>
#include <string.h>

void mk_sched_costs_unit(mk_sched_costs_t *c)
{
    *c = (mk_sched_costs_t){.f = 1, .b = 2, .r = 1, .b_in = 1, .b_w = 1, .recompute = 1};
}

/* Message slot: (act or grad, micro-batch, receiving virtual stage); -1 if
 * the instruction names an impossible one. */
int mk_sched_msg_key(const mk_sched_t *s, int stage, const mk_instr_t *in)
{
    int p = s->spec.pp, V = p * s->spec.vpp, k = in->chunk * p + stage, dst;
    switch (in->op) {
    case MK_INSTR_SEND_ACT: dst = k + 1; break;
    case MK_INSTR_RECV_ACT: dst = k; break;
    case MK_INSTR_SEND_GRAD: dst = k - 1; break;
    case MK_INSTR_RECV_GRAD: dst = k; break;
    default: return -1;
    }
    int grad = in->op == MK_INSTR_SEND_GRAD || in->op == MK_INSTR_RECV_GRAD;
    if (in->mb < 0 || in->mb >= s->spec.m || in->chunk < 0 || in->chunk >= s->spec.vpp ||
        dst < 0 || dst >= V)
        return -1;
    return (grad * s->spec.m + in->mb) * V + dst;
}

static double op_cost(const mk_sched_costs_t *c, const mk_instr_t *in, int recomputes)
{
    switch (in->op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE: return c->f;
    case MK_INSTR_R: return c->r;
    case MK_INSTR_B: return c->b + (recomputes ? c->recompute : 0);
    case MK_INSTR_B_IN: return c->b_in + (recomputes ? c->recompute : 0);
    case MK_INSTR_B_W: return c->b_w;
    default: return 0;
    }
}

typedef struct {
    const mk_sched_t *s;
    const mk_sched_costs_t *c;
    mk_sched_timeline_t *tl;
    int *pos;
    double *clock, *sent, tied_t;
    int tied_n;
    int *ck, *rran;             /* [pp][m*vpp]: F's ckpt, R ran */
} sim_t;

/* Advance one stage as far as it can; returns how many instructions ran. */
static int advance(sim_t *x, int st)
{
    const mk_sched_t *s = x->s;
    const mk_stream_t *str = &s->streams[st];
    int nmc = s->spec.m * s->spec.vpp, ran = 0;
    while (x->pos[st] < str->n) {
        int i = x->pos[st];
        const mk_instr_t *in = &str->v[i];
        double t = x->clock[st];
        int key = mk_sched_msg_key(s, st, in);
        int slot = st * nmc + in->mb * s->spec.vpp + in->chunk;
        switch (in->op) {
        case MK_INSTR_SEND_ACT:
        case MK_INSTR_SEND_GRAD:
            if (key < 0) return mk_error_set("stage %d instruction %d: bad %s", st, i,
                                             mk_instr_op_name(in->op)), -1;
            if (x->sent[key] >= 0)
                return mk_error_set("stage %d: %s mb %d chunk %d sent twice", st,
                                    mk_instr_op_name(in->op), in->mb, in->chunk), -1;
            x->sent[key] = t;
            break;
        case MK_INSTR_RECV_ACT:
        case MK_INSTR_RECV_GRAD:
            if (key < 0) return mk_error_set("stage %d instruction %d: bad %s", st, i,
                                             mk_instr_op_name(in->op)), -1;
            if (x->sent[key] < 0) return ran; /* blocked: its send is not issued yet */
            if (x->sent[key] > t) t = x->sent[key];
            break;
        case MK_INSTR_REDUCE_TIED:
            if (x->pos[st] == i && x->tl->start[st][i] < 0) { /* first visit: arrive */
                x->tl->start[st][i] = t;
                x->tied_n++;
                if (t > x->tied_t) x->tied_t = t;
            }
            if (x->tied_n < 2) return ran;
            t = x->tied_t;
            break;
        case MK_INSTR_F:
        case MK_INSTR_F_PRE:
        case MK_INSTR_R:
        case MK_INSTR_B:
        case MK_INSTR_B_IN:
            if (in->mb < 0 || in->mb >= s->spec.m || in->chunk < 0 || in->chunk >= s->spec.vpp)
                return mk_error_set("stage %d instruction %d: %s with bad mb %d / chunk %d", st,
                                    i, mk_instr_op_name(in->op), in->mb, in->chunk), -1;
            if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) x->ck[slot] = in->ckpt;
            if (in->op == MK_INSTR_R) x->rran[slot] = 1;
            break;
        default:
            break;
        }
        int recomputes = (in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && x->ck[slot] > 0 &&
                         !x->rran[slot];
        double cost = op_cost(x->c, in, recomputes);
        x->tl->start[st][i] = t;
        x->tl->end[st][i] = t + cost;
        if (mk_instr_is_compute(in->op)) x->tl->busy[st] += cost;
        x->clock[st] = t + cost;
        x->pos[st]++;
        ran++;
    }
    return ran;
}

static int alloc_timeline(const mk_sched_t *s, mk_sched_timeline_t *tl)
{
    int p = s->spec.pp;
    memset(tl, 0, sizeof *tl);
    tl->pp = p;
    tl->start = calloc((size_t)p, sizeof *tl->start);
    tl->end = calloc((size_t)p, sizeof *tl->end);
    tl->busy = calloc((size_t)p, sizeof *tl->busy);
    if (!tl->start || !tl->end || !tl->busy) return -1;
    for (int st = 0; st < p; st++) {
        int n = s->streams[st].n;
        tl->start[st] = malloc((size_t)(n + 1) * sizeof **tl->start);
        tl->end[st] = malloc((size_t)(n + 1) * sizeof **tl->end);
        if (!tl->start[st] || !tl->end[st]) return -1;
        for (int i = 0; i < n; i++) tl->start[st][i] = tl->end[st][i] = -1;
    }
    return 0;
}

static int run_sim(sim_t *x)
{
    const mk_sched_t *s = x->s;
    int p = s->spec.pp, moved = 1;
    while (moved) {
        moved = 0;
        for (int st = 0; st < p; st++) {
            int r = advance(x, st);
            if (r < 0) return -1;
            moved |= r > 0;
        }
    }
    for (int st = 0; st < p; st++)
        if (x->pos[st] < s->streams[st].n) {
            const mk_instr_t *in = &s->streams[st].v[x->pos[st]];
            return mk_error_set("deadlock: stage %d waits forever at instruction %d (%s mb %d "
                                "chunk %d peer %d)", st, x->pos[st], mk_instr_op_name(in->op),
                                in->mb, in->chunk, in->peer);
        }
    for (int st = 0; st < p; st++)
        if (x->clock[st] > x->tl->makespan) x->tl->makespan = x->clock[st];
    return 0;
}

int mk_sched_timeline(const mk_sched_t *s, const mk_sched_costs_t *costs, mk_sched_timeline_t *tl)
{
    mk_sched_costs_t unit;
    if (!costs) mk_sched_costs_unit(&unit);
    int p = s->spec.pp, nmc = s->spec.m * s->spec.vpp, nkey = 2 * s->spec.m * p * s->spec.vpp;
    sim_t x = {s, costs ? costs : &unit, tl, calloc((size_t)p, sizeof(int)),
               calloc((size_t)p, sizeof(double)), malloc((size_t)nkey * sizeof(double)), 0, 0,
               calloc((size_t)(p * nmc), sizeof(int)), calloc((size_t)(p * nmc), sizeof(int))};
    int rc = -1;
    if (alloc_timeline(s, tl) < 0 || !x.pos || !x.clock || !x.sent || !x.ck || !x.rran) {
        mk_error_set("sched timeline: out of memory");
        goto out;
    }
    for (int i = 0; i < nkey; i++) x.sent[i] = -1;
    rc = run_sim(&x);
out:
    free(x.pos); free(x.clock); free(x.sent); free(x.ck); free(x.rran);
    if (rc < 0) mk_sched_timeline_free(tl);
    return rc;
}

void mk_sched_timeline_free(mk_sched_timeline_t *tl)
{
    for (int st = 0; st < tl->pp; st++) {
        if (tl->start) free(tl->start[st]);
        if (tl->end) free(tl->end[st]);
    }
    free(tl->start);
    free(tl->end);
    free(tl->busy);
    memset(tl, 0, sizeof *tl);
}
