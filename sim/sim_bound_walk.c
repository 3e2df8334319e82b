/* The pipeline walk's bound (mk_sim_bound_walk; DESIGN-NOTES.md "The
 * planner's lower bound"): the run's streams under buffered sends with
 * every compute op at its mk_sim_bound_chunk_ops duration (the run's,
 * whatever the other streams do), a send arriving mk_sim_send_cost after
 * it is issued (the run queues it no earlier), REDUCE_TIED waiting for
 * both ends, everything else free: each stage's clock is then no later
 * than the run's at every instruction (stages run their streams in
 * order), and the stage ends no sooner than after[s] past it nor before
 * dp[s] + after[s].
 *
 * The walk is split in two (issue 35): the walker's decoding, readiness
 * and slot rules depend only on the streams, so one walk records what the
 * clocks read, event by event in the order it took them (a program,
 * mk_sim_bound_prog_t), and the bound of each plan on those streams runs
 * the program: ~20 instructions an event where the walker takes ~150, and
 * a search walks the same streams for many plans (ZeRO variants, layouts
 * with the same pipeline and micro-batch count).  Running a program
 * performs the very additions and maxima the walk's hooks made, in the
 * same order, so its bound is the walk's to the bit. */
#include "sim/sim_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { EV_COMPUTE, EV_SEND, EV_RECV, EV_TIED };

/* One event, 8 bytes (a search keeps many programs): what the walk's
 * clocks read of the walker's mk_walk_ev_t.  Compute ops and sends name
 * their duration in the program's tables (a search's streams have few
 * distinct ones), so that running a program looks each up once per plan,
 * not per event. */
typedef struct {
    unsigned short sk;            /* stage << 3 | flag << 2 | kind; flag: REDUCE_TIED completes first */
    unsigned short id;            /* compute: its op (ops); SEND: its transfer (xfer); REDUCE_TIED: the other stage */
    unsigned int key;             /* SEND, RECV: the message key */
} bw_ev_t;
#define BW_MAX_STAGES (1 << 13)
#define BW_MAX_IDS (1 << 16)

typedef struct {
    int k, ck;                    /* the virtual stage, its checkpoint count */
    unsigned char op, rec;        /* the instruction, B/B_IN replays its forward first */
} bw_op_t;

typedef struct {
    int s, peer, vpeer, act;      /* mk_sim_send_cost's arguments */
} bw_xfer_t;

struct mk_sim_bound_prog {
    int pp, V, nkeys, n, cap, nop, capop, nx, capx;
    bw_ev_t *ev;
    bw_op_t *op;
    bw_xfer_t *x;
};

/* Room for one more of n in *v (cap), doubling. */
static int grow(void *pv, int n, int *cap, size_t size)
{
    if (n < *cap) return 0;
    int c = *cap ? 2 * *cap : 64;
    void *v = realloc(*(void **)pv, (size_t)c * size);
    if (!v) return mk_error_set("out of memory");
    *(void **)pv = v, *cap = c;
    return 0;
}

/* The id of x (size bytes) in table *v of *n entries, added where new;
 * *hint: the last id found for x's slot (-1: none), tried first (a slot
 * is a (virtual stage, op) or a transfer's direction: its entries differ
 * in rare fields), else a search from the end. */
static int table_id(void *v, int *n, int *cap, const void *x, size_t size, int *hint)
{
    char *t = *(char **)v;
    if (*hint >= 0 && !memcmp(t + (size_t)*hint * size, x, size)) return *hint;
    for (int i = *n - 1; i >= 0; i--)
        if (!memcmp(t + (size_t)i * size, x, size)) return *hint = i;
    if (grow(v, *n, cap, size) < 0) return -1;
    memcpy(*(char **)v + (size_t)*n * size, x, size);
    return *hint = (*n)++;
}

/* The recording walk's context: the program and the tables' hints. */
typedef struct {
    mk_sim_bound_prog_t *q;
    int *op_hint;   /* [V][MK_INSTR_COUNT][2]: by (virtual stage, op, replays) */
    int *x_hint;    /* [V + 1][2]: by (the receiving virtual stage + 1, act) */
} recorder_t;

static int record(void *ctx, const mk_walk_ev_t *ev)
{
    recorder_t *R = ctx;
    mk_sim_bound_prog_t *q = R->q;
    mk_instr_op_t op = ev->in->op;
    int kind, flag = 0, id = 0, key = 0;
    if (mk_instr_is_compute(op)) {
        bw_op_t o;
        memset(&o, 0, sizeof o); /* compared bytewise */
        o.k = ev->vstage, o.ck = ev->ckpt, o.op = (unsigned char)op, o.rec = (unsigned char)ev->recomputes;
        int *h = &R->op_hint[((size_t)o.k * MK_INSTR_COUNT + op) * 2 + o.rec];
        kind = EV_COMPUTE, id = table_id(&q->op, &q->nop, &q->capop, &o, sizeof o, h);
    } else if (op == MK_INSTR_SEND_ACT || op == MK_INSTR_SEND_GRAD) {
        bw_xfer_t x = {ev->stage, ev->peer, ev->vpeer, op == MK_INSTR_SEND_ACT};
        if (ev->vpeer < -1 || ev->vpeer > q->V) return mk_error_set("bound walk: a send to virtual stage %d", ev->vpeer);
        int *h = &R->x_hint[(size_t)(ev->vpeer + 1) * 2 + x.act];
        kind = EV_SEND, id = table_id(&q->x, &q->nx, &q->capx, &x, sizeof x, h), key = ev->key;
    } else if (op == MK_INSTR_RECV_ACT || op == MK_INSTR_RECV_GRAD) {
        kind = EV_RECV, key = ev->key;
    } else if (op == MK_INSTR_REDUCE_TIED) {
        kind = EV_TIED, id = ev->peer, flag = ev->tied_first != 0;
    } else {
        return MK_WALK_GO; /* free: changes no clock */
    }
    if (id < 0 || grow(&q->ev, q->n, &q->cap, sizeof *q->ev) < 0) return -1;
    if (id >= BW_MAX_IDS) return mk_error_set("bound walk: %d distinct ops", id);
    q->ev[q->n++] = (bw_ev_t){(unsigned short)(ev->stage << 3 | flag << 2 | kind), (unsigned short)id,
                              (unsigned int)key};
    return MK_WALK_GO;
}

void mk_sim_bound_prog_free(mk_sim_bound_prog_t *q)
{
    if (!q) return;
    free(q->ev), free(q->op), free(q->x), free(q);
}

mk_sim_bound_prog_t *mk_sim_bound_prog_new(const mk_sched_t *sch)
{
    if (sch->spec.pp > BW_MAX_STAGES) return mk_error_set("bound walk: %d stages", sch->spec.pp), NULL;
    mk_sim_bound_prog_t *q = calloc(1, sizeof *q);
    size_t V = (size_t)sch->n_vstages, nop = V * MK_INSTR_COUNT * 2, nx = (V + 2) * 2;
    recorder_t R = {q, malloc(nop * sizeof(int)), malloc(nx * sizeof(int))};
    mk_walk_t w;
    int rc = -1;
    if (!q || !R.op_hint || !R.x_hint) {
        mk_error_set("out of memory");
    } else {
        for (size_t i = 0; i < nop; i++) R.op_hint[i] = -1;
        for (size_t i = 0; i < nx; i++) R.x_hint[i] = -1;
        q->pp = sch->spec.pp, q->V = sch->n_vstages, q->nkeys = mk_walk_n_keys(sch);
        mk_walk_hooks_t h = {.ctx = &R, .compute = record, .send = record, .recv = record, .collective = record};
        mk_walk_opts_t wo = {.mode = MK_WALK_BUFFERED, .ckpt_cap = sch->layers};
        if (mk_walk_init(&w, sch, &wo, &h) == 0) rc = mk_walk_run(&w), mk_walk_free(&w);
    }
    free(R.op_hint), free(R.x_hint);
    if (rc < 0) return mk_sim_bound_prog_free(q), NULL;
    bw_ev_t *v = q->n ? realloc(q->ev, (size_t)q->n * sizeof *v) : q->ev; /* the exact size: programs are kept */
    if (v) q->ev = v, q->cap = q->n;
    return q;
}

size_t mk_sim_bound_prog_bytes(const mk_sim_bound_prog_t *q)
{
    return q ? sizeof *q + (size_t)q->cap * sizeof *q->ev + (size_t)q->capop * sizeof *q->op +
                   (size_t)q->capx * sizeof *q->x
             : 0;
}

/* One run's clocks for one TP overlap level (a lane): a program runs once
 * for one or two levels (a candidate's two overlaps share every op but
 * their durations). */
typedef struct {
    double *clock, *sent, tied_t; /* [pp], [nkeys] arrivals */
    double *dur;                  /* [nop] each compute op's seconds at this level */
} walk_lane_t;

/* Op o's duration: the chunk's ops at its count (ops[k] made once, ck[k] its count). */
static double op_time(const mk_sim_bound_t *b, const mk_plan_t *p, const bw_op_t *o, mk_chunk_ops_t *ops,
                      int *ck)
{
    int k = o->k;
    if (ck[k] != o->ck) mk_sim_bound_chunk_ops(b, p, k, o->ck, &ops[k]), ck[k] = o->ck;
    const mk_chunk_ops_t *c = &ops[k];
    switch (o->op) {
    case MK_INSTR_F:
    case MK_INSTR_F_PRE: return c->f;
    case MK_INSTR_R: return c->rec;
    case MK_INSTR_B: return c->b + c->sel + (o->rec ? c->rec : 0);
    case MK_INSTR_B_IN: return c->bi + c->sel + (o->rec ? c->rec : 0);
    case MK_INSTR_B_W: return c->bw;
    default: return 0;
    }
}

static int lane_init(walk_lane_t *x, const mk_sim_bound_t *b, const mk_plan_t *p, int lvl,
                     const mk_sim_bound_prog_t *q)
{
    mk_plan_t lp = *p;
    lp.tp_overlap = lvl, x->tied_t = 0;
    x->clock = calloc(q->pp, sizeof *x->clock), x->sent = malloc(q->nkeys * sizeof *x->sent);
    x->dur = malloc((q->nop + 1) * sizeof *x->dur);
    mk_chunk_ops_t *ops = malloc(q->V * sizeof *ops);
    int *ck = malloc(q->V * sizeof *ck);
    int ok = x->clock && x->sent && x->dur && ops && ck;
    for (int k = 0; ok && k < q->V; k++) ck[k] = -1;
    for (int i = 0; ok && i < q->nop; i++) x->dur[i] = op_time(b, &lp, &q->op[i], ops, ck);
    free(ops), free(ck);
    return ok ? 0 : -1;
}

static void lane_free(walk_lane_t *x)
{
    free(x->clock), free(x->sent), free(x->dur);
}

/* Event e on one lane: the addition or maximum the walk's hook made. */
static inline void run_event(const bw_ev_t *e, walk_lane_t *x, const double *xfer)
{
    int st = e->sk >> 3;
    double t = x->clock[st];
    switch (e->sk & 3) {
    case EV_SEND: x->sent[e->key] = t + xfer[e->id]; break;
    case EV_RECV: t = fmax(t, x->sent[e->key]); break;
    case EV_TIED:
        if (e->sk & 4) x->tied_t = fmax(t, x->clock[e->id]);
        t = x->tied_t;
        break;
    default: t += x->dur[e->id]; break;
    }
    x->clock[st] = t;
}

/* The program on n lanes (1 or 2), each event's additions and maxima as
 * the walk's hooks made them; a loop per lane count (the loop over lanes
 * inside each event took 405B's search 0.84 G instructions, 0.49 G so). */
static void run_program(const mk_sim_bound_prog_t *q, walk_lane_t *lane, int n, const double *xfer)
{
    const bw_ev_t *e = q->ev, *end = q->ev + q->n;
    if (n == 1)
        for (walk_lane_t *x = &lane[0]; e < end; e++) run_event(e, x, xfer);
    else
        for (; e < end; e++) run_event(e, &lane[0], xfer), run_event(e, &lane[1], xfer);
}

void mk_sim_bound_walk_prog(const mk_sim_bound_t *b, const mk_plan_t *p, const mk_sim_bound_prog_t *q,
                            const double *after, const double *dp, const int lvl[2], double out[2])
{
    out[0] = out[1] = 0; /* 0 bounds every step: the search only simulates */
    if (b->o.unit_costs || !q || q->pp != p->pp || q->V != p->n_vstages) return;
    int n = lvl[1] >= 0 ? 2 : 1, ok = 1, inter;
    walk_lane_t lane[2];
    memset(lane, 0, sizeof lane);
    double *xfer = malloc((q->nx + 1) * sizeof *xfer);
    for (int j = 0; j < n; j++) ok &= lane_init(&lane[j], b, p, lvl[j], q) == 0;
    ok &= xfer != NULL;
    for (int i = 0; ok && i < q->nx; i++) /* a transfer reads no TP overlap */
        xfer[i] = mk_sim_send_cost(b->c, p, b->g, &b->o, q->x[i].s, q->x[i].peer, q->x[i].vpeer, q->x[i].act, &inter);
    if (ok) run_program(q, lane, n, xfer);
    for (int j = 0; j < n; j++) {
        for (int s = 0; ok && s < p->pp; s++) {
            double lb = fmax(lane[j].clock[s] + after[s], dp[s] + after[s]);
            if (lb * MK_BOUND_SHAVE > out[j]) out[j] = lb * MK_BOUND_SHAVE;
        }
        lane_free(&lane[j]);
    }
    free(xfer);
}

void mk_sim_bound_walk(const mk_sim_bound_t *b, const mk_plan_t *p, const mk_sched_t *sch, const double *after,
                       const double *dp, const int lvl[2], double out[2])
{
    out[0] = out[1] = 0;
    if (b->o.unit_costs) return;
    mk_sim_bound_prog_t *q = mk_sim_bound_prog_new(sch);
    mk_sim_bound_walk_prog(b, p, q, after, dp, lvl, out);
    mk_sim_bound_prog_free(q);
}
