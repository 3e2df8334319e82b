/* The verifier: completeness, p2p matching, the step's tail, in-flight
 * maxima, and deadlock freedom under buffered sends (the unit-cost
 * timeline, which must finish) and under rendezvous sends (reported).
 *
 * Completeness, per stage and chunk and micro-batch: exactly one F or
 * F_PRE and one B (zb-h1: one B_IN then one B_W, never B), B after F; at
 * most one R, only for an F_PRE, between it and its B; a RECV before the
 * compute that consumes it and a SEND after the one that produces it; every
 * SEND with exactly one RECV on its peer; LOAD once per micro-batch on the
 * first and last stage, before its forward; REDUCE_TIED / REDUCE_GRADS
 * after the last backward work, OPT_STEP last; an overlapped op is a B_IN
 * whose stage's compute op before it is another slot's forward.
 *
 * The scan decodes each stage through the stream walker (merak/walk.h, one
 * stage, lenient): mb/chunk ranges, the peer a p2p must name, in-flight
 * counts and the last backward come from it; the rules here only count. */
#include "config.h"
#include "sched/sched_internal.h"
#include "merak/walk.h"

#include <stdlib.h>
#include <string.h>

enum { P_F, P_B, P_BW, P_R, P_LOAD, P_RA, P_SA, P_RG, P_SG, P_N };

typedef struct {
    const mk_sched_t *s;
    int st, nmc;
    int *pos[P_N], *cnt[P_N];   /* [nmc] position (last seen) and count per kind */
    unsigned char *pre;
    int last_bwd, most;         /* last backward work, most micro-batches in flight */
    int bad_peer, want_peer;    /* first p2p naming a wrong peer, and the right one */
    int prev_op, prev_slot;     /* the last compute op seen (an overlapped B_IN pairs with it) */
} stage_chk_t;

static int which(mk_instr_op_t op)
{
    switch (op) {
    case MK_INSTR_F: case MK_INSTR_F_PRE: return P_F;
    case MK_INSTR_B: case MK_INSTR_B_IN: return P_B;
    case MK_INSTR_B_W: return P_BW;
    case MK_INSTR_R: return P_R;
    case MK_INSTR_LOAD: return P_LOAD;
    case MK_INSTR_RECV_ACT: return P_RA;
    case MK_INSTR_SEND_ACT: return P_SA;
    case MK_INSTR_RECV_GRAD: return P_RG;
    case MK_INSTR_SEND_GRAD: return P_SG;
    default: return -1;
    }
}

/* Record each per-micro-batch instruction the walker decoded (it has
 * checked mb and chunk); SEND peers must name the stage that receives,
 * RECV peers the sender (reported after the scan). */
static int scan_ev(void *ctx, const mk_walk_ev_t *ev)
{
    stage_chk_t *c = ctx;
    const mk_sched_t *s = c->s;
    const mk_instr_t *in = ev->in;
    int w = which(in->op), zb = mk_sched_traits(s->spec.kind)->split_backward;
    if (ev->inflight > c->most) c->most = ev->inflight;
    if (ev->last_bwd) c->last_bwd = ev->index;
    if (in->overlap && (in->op != MK_INSTR_B_IN || (c->prev_op != MK_INSTR_F && c->prev_op != MK_INSTR_F_PRE) ||
                        c->prev_slot == ev->slot))
        return mk_error_set("stage %d instruction %d: an overlapped %s must be a B_IN right after another "
                            "micro-batch's F", c->st, ev->index, mk_instr_op_name(in->op));
    if (mk_instr_is_compute(in->op)) c->prev_op = in->op, c->prev_slot = ev->slot;
    if (w < 0) return MK_WALK_GO;
    if (w >= P_RA && in->peer != ev->peer && c->bad_peer < 0)
        c->bad_peer = ev->index, c->want_peer = ev->peer;
    if ((in->op == MK_INSTR_B && zb) || ((in->op == MK_INSTR_B_IN || in->op == MK_INSTR_B_W) && !zb))
        return mk_error_set("stage %d: %s does not belong in %s", c->st,
                            mk_instr_op_name(in->op), mk_sched_kind_name(s->spec.kind));
    int sl = w == P_LOAD ? in->mb * s->spec.vpp : ev->slot; /* one LOAD per micro-batch */
    c->cnt[w][sl]++;
    c->pos[w][sl] = ev->index;
    if (in->op == MK_INSTR_F_PRE) c->pre[sl] = 1;
    return MK_WALK_GO;
}

static int scan(stage_chk_t *c, mk_walk_t *w)
{
    c->last_bwd = c->bad_peer = c->prev_op = c->prev_slot = -1;
    c->most = 0;
    if (mk_walk_stage(w, c->st) < 0) return -1;
    if (c->bad_peer < 0) return 0;
    const mk_instr_t *in = &c->s->streams[c->st].v[c->bad_peer];
    return mk_error_set("stage %d instruction %d: %s mb %d names peer %d, want %d", c->st,
                        c->bad_peer, mk_instr_op_name(in->op), in->mb, in->peer, c->want_peer);
}

#define FAIL(...) return mk_error_set(__VA_ARGS__)

/* The per-(mb, chunk) rules of the top comment. */
static int check_slot(const stage_chk_t *c, int mb, int ch)
{
    const mk_sched_t *s = c->s;
    int p = s->spec.pp, V = s->n_vstages, k = mk_sched_vstage(s->vshape, p, c->st, ch), sl = mb * s->spec.vpp + ch;
    int st = c->st, zb = mk_sched_traits(s->spec.kind)->split_backward;
    int pf = c->pos[P_F][sl], pb = c->pos[P_B][sl];
    if (c->cnt[P_F][sl] != 1 || c->cnt[P_B][sl] != 1 || c->cnt[P_BW][sl] != zb)
        FAIL("stage %d chunk %d mb %d: %d forwards, %d backwards, %d B_W (want 1, 1, %d)", st,
             ch, mb, c->cnt[P_F][sl], c->cnt[P_B][sl], c->cnt[P_BW][sl], zb);
    if (pb < pf) FAIL("stage %d chunk %d mb %d: backward before forward", st, ch, mb);
    if (zb && c->pos[P_BW][sl] < pb) FAIL("stage %d chunk %d mb %d: B_W before B_IN", st, ch, mb);
    if (c->cnt[P_R][sl] > 1 || (c->cnt[P_R][sl] && (!c->pre[sl] || c->pos[P_R][sl] < pf ||
                                                     c->pos[P_R][sl] > pb)))
        FAIL("stage %d chunk %d mb %d: R must follow its F_PRE and precede its backward", st,
             ch, mb);
    int remote_prev = k > 0 && mk_sched_vstage_stage(s->vshape, p, k - 1) != st;
    int remote_next = k < V - 1 && mk_sched_vstage_stage(s->vshape, p, k + 1) != st;
    if (c->cnt[P_RA][sl] != remote_prev || c->cnt[P_SA][sl] != remote_next ||
        c->cnt[P_RG][sl] != remote_next || c->cnt[P_SG][sl] != remote_prev)
        FAIL("stage %d chunk %d mb %d: p2p count wrong (recv act %d, send act %d, recv grad %d,"
             " send grad %d)", st, ch, mb, c->cnt[P_RA][sl], c->cnt[P_SA][sl], c->cnt[P_RG][sl],
             c->cnt[P_SG][sl]);
    if ((remote_prev && (c->pos[P_RA][sl] > pf || c->pos[P_SG][sl] < pb)) ||
        (remote_next && (c->pos[P_SA][sl] < pf || c->pos[P_RG][sl] > pb)))
        FAIL("stage %d chunk %d mb %d: a RECV after its consumer or a SEND before its producer",
             st, ch, mb);
    return 0;
}

/* Local hand-offs (chunks on one stage), LOADs and peers. */
static int check_links(const stage_chk_t *c, int mb)
{
    const mk_sched_t *s = c->s;
    int p = s->spec.pp, v = s->spec.vpp, st = c->st, b = mb * v;
    int last = mk_sched_vstage_stage(s->vshape, p, s->n_vstages - 1); /* the head's stage */
    int loads = st == 0 || st == last;
    if (c->cnt[P_LOAD][b] != loads)
        FAIL("stage %d mb %d: %d LOADs (want %d)", st, mb, c->cnt[P_LOAD][b], loads);
    if (loads && c->pos[P_LOAD][b] > c->pos[P_F][b + (st == 0 ? 0 : v - 1)])
        FAIL("stage %d mb %d: LOAD after its forward", st, mb);
    if (p == 1)
        for (int ch = 1; ch < v; ch++)
            if (c->pos[P_F][b + ch] < c->pos[P_F][b + ch - 1] ||
                c->pos[P_B][b + ch] > c->pos[P_B][b + ch - 1])
                FAIL("stage 0 mb %d: chunk %d out of order with chunk %d", mb, ch, ch - 1);
    return 0;
}

static int check_tail(const mk_sched_t *s, int st, int last_bwd)
{
    const mk_stream_t *str = &s->streams[st];
    int p = s->spec.pp, apart = mk_sched_ends_apart(s->spec.kind, p, s->spec.vpp);
    int tied = s->spec.tied && apart && (st == 0 || st == p - 1);
    int ntied = 0, ngrads = 0, nopt = 0;
    for (int i = 0; i < str->n; i++) {
        mk_instr_op_t op = str->v[i].op;
        if (op != MK_INSTR_REDUCE_TIED && op != MK_INSTR_REDUCE_GRADS && op != MK_INSTR_OPT_STEP)
            continue;
        if (i < last_bwd) FAIL("stage %d: %s before the last backward", st, mk_instr_op_name(op));
        ntied += op == MK_INSTR_REDUCE_TIED;
        ngrads += op == MK_INSTR_REDUCE_GRADS;
        nopt += op == MK_INSTR_OPT_STEP;
    }
    if (ntied != tied || ngrads != s->spec.grad_buckets || nopt != 1 ||
        str->v[str->n - 1].op != MK_INSTR_OPT_STEP)
        FAIL("stage %d: tail has %d REDUCE_TIED, %d REDUCE_GRADS, %d OPT_STEP (want %d, %d, 1 "
             "last)", st, ntied, ngrads, nopt, tied, s->spec.grad_buckets);
    return 0;
}

static int check_stage(const mk_sched_t *s, int st, stage_chk_t *c, mk_walk_t *w)
{
    for (int k = 0; k < P_N; k++) {
        memset(c->pos[k], 0, (size_t)c->nmc * sizeof(int));
        memset(c->cnt[k], 0, (size_t)c->nmc * sizeof(int));
    }
    memset(c->pre, 0, (size_t)c->nmc);
    c->st = st;
    if (scan(c, w) < 0 || check_tail(s, st, c->last_bwd) < 0) return -1;
    for (int mb = 0; mb < s->spec.m; mb++) {
        if (check_links(c, mb) < 0) return -1;
        for (int ch = 0; ch < s->spec.vpp; ch++)
            if (check_slot(c, mb, ch) < 0) return -1;
    }
    return 0;
}

int mk_sched_verify(const mk_sched_t *s, mk_sched_report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    int p = s->spec.pp, rc = 0;
    stage_chk_t c = {.s = s, .nmc = s->spec.m * s->spec.vpp};
    for (int w = 0; w < P_N; w++) {
        c.pos[w] = malloc((size_t)c.nmc * sizeof(int));
        c.cnt[w] = malloc((size_t)c.nmc * sizeof(int));
        if (!c.pos[w] || !c.cnt[w]) rc = -1;
    }
    c.pre = malloc((size_t)c.nmc);
    rep->max_inflight = calloc((size_t)p, sizeof(int));
    /* the scan: each stage alone, decode only (the checks below name what is wrong) */
    mk_walk_opts_t wo = {.mode = MK_WALK_LOCAL, .lenient = 1};
    mk_walk_hooks_t h = {.ctx = &c, .compute = scan_ev, .send = scan_ev, .recv = scan_ev,
                         .collective = scan_ev, .load = scan_ev};
    mk_walk_t w = {0};
    if (rc < 0 || !c.pre || !rep->max_inflight || mk_walk_init(&w, s, &wo, &h) < 0)
        rc = mk_error_set("sched verify: out of memory");
    for (int st = 0; st < p && rc == 0; st++) {
        rc = check_stage(s, st, &c, &w);
        rep->max_inflight[st] = c.most;
    }
    mk_walk_free(&w);
    for (int w = 0; w < P_N; w++) { free(c.pos[w]); free(c.cnt[w]); }
    free(c.pre);
    mk_sched_timeline_t tl;
    if (rc == 0 && (rc = mk_sched_timeline(s, NULL, &tl)) == 0) {
        rep->makespan = tl.makespan;
        mk_sched_timeline_free(&tl);
        rep->rendezvous_ok = mk_sched_rendezvous_ok(s);
    }
    if (rc < 0) {
        free(rep->max_inflight);
        rep->max_inflight = NULL;
    }
    return rc;
}
