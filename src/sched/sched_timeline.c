/* Unit-cost timeline: run the streams under buffered-send semantics.
 * Each stage executes in order; compute ops take their cost, a RECV waits
 * for the time its matching SEND was issued, sends take no time, and
 * REDUCE_TIED waits for both the first and the last stage.  The result
 * does not depend on the order stages are visited in (each RECV waits on
 * one known SEND), so the walker's sweep (merak/walk.h, buffered) finds
 * every time, or a deadlock; this file only adds the clocks. */
#include "config.h"
#include "sched/sched_internal.h"
#include "merak/walk.h"

#include <stdlib.h>
#include <string.h>

void mk_sched_costs_unit(mk_sched_costs_t *c)
{
    *c = (mk_sched_costs_t){.f = 1, .b = 2, .r = 1, .b_in = 1, .b_w = 1, .recompute = 1};
}

static double op_cost(const mk_sched_costs_t *c, const mk_walk_ev_t *ev)
{
    switch (ev->in->op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE: return c->f;
    case MK_INSTR_R: return c->r;
    case MK_INSTR_B: return c->b + (ev->recomputes ? c->recompute : 0);
    case MK_INSTR_B_IN: return c->b_in + (ev->recomputes ? c->recompute : 0);
    case MK_INSTR_B_W: return c->b_w;
    default: return 0;
    }
}

typedef struct {
    const mk_sched_costs_t *c;
    mk_sched_timeline_t *tl;
    double *clock, *sent, tied_t; /* [pp], [mk_walk_n_keys] SEND times, the REDUCE_TIED time */
} timing_t;

/* Every instruction: start when the stage is free (a RECV also when its
 * SEND was issued, REDUCE_TIED when both ends arrived), take its cost. */
static int timed(void *ctx, const mk_walk_ev_t *ev)
{
    timing_t *x = ctx;
    int st = ev->stage, i = ev->index;
    double t = x->clock[st];
    switch (ev->in->op) {
    case MK_INSTR_SEND_ACT:
    case MK_INSTR_SEND_GRAD: x->sent[ev->key] = t; break;
    case MK_INSTR_RECV_ACT:
    case MK_INSTR_RECV_GRAD: if (x->sent[ev->key] > t) t = x->sent[ev->key]; break;
    case MK_INSTR_REDUCE_TIED:
        /* the other end waits at its REDUCE_TIED: its clock is its arrival */
        if (ev->tied_first) x->tied_t = t > x->clock[ev->peer] ? t : x->clock[ev->peer];
        t = x->tied_t;
        break;
    default: break;
    }
    double cost = op_cost(x->c, ev);
    x->tl->start[st][i] = t;
    x->tl->end[st][i] = t + cost;
    if (mk_instr_is_compute(ev->in->op)) x->tl->busy[st] += cost;
    x->clock[st] = t + cost;
    return MK_WALK_GO;
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

int mk_sched_timeline(const mk_sched_t *s, const mk_sched_costs_t *costs, mk_sched_timeline_t *tl)
{
    mk_sched_costs_t unit;
    if (!costs) mk_sched_costs_unit(&unit);
    int p = s->spec.pp;
    timing_t x = {costs ? costs : &unit, tl, calloc((size_t)p, sizeof(double)),
                  calloc((size_t)mk_walk_n_keys(s), sizeof(double)), 0};
    mk_walk_hooks_t h = {.ctx = &x, .compute = timed, .send = timed, .recv = timed,
                         .collective = timed, .load = timed};
    mk_walk_t w;
    int rc = -1;
    if (alloc_timeline(s, tl) < 0 || !x.clock || !x.sent) {
        mk_error_set("sched timeline: out of memory");
    } else if (mk_walk_init(&w, s, NULL, &h) == 0) {
        rc = mk_walk_run(&w);
        mk_walk_free(&w);
    }
    for (int st = 0; rc == 0 && st < p; st++)
        if (x.clock[st] > tl->makespan) tl->makespan = x.clock[st];
    free(x.clock);
    free(x.sent);
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
