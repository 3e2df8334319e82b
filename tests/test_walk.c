/* The stream walker: decoded events against hand-computed values for
 * small 1F1B, interleaved, zb-h1 and merak-pre schedules; the four
 * drivers (sweep, rendezvous, event-driven with yield/block/wake, one
 * stage alone); deadlocks and malformed streams reported. */
#include "merak/walk.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define MAXN 64

typedef struct {
    mk_walk_ev_t ev[4][MAXN];
    int seen[4][MAXN], blocks, wakes, wake_stage[4], wake_from[4][2];
    int yield_compute, block_first_recv, recv_calls;
} rec_t;

static int rec(void *ctx, const mk_walk_ev_t *ev)
{
    rec_t *r = ctx;
    r->ev[ev->stage][ev->index] = *ev;
    r->seen[ev->stage][ev->index]++;
    if (mk_instr_is_compute(ev->in->op) && r->yield_compute) return MK_WALK_YIELD;
    return MK_WALK_GO;
}

static int rec_recv(void *ctx, const mk_walk_ev_t *ev)
{
    rec_t *r = ctx;
    r->recv_calls++;
    /* the first visit of every RECV says "not yet": the walker must retry it */
    if (r->block_first_recv && !r->seen[ev->stage][ev->index]++) return MK_WALK_BLOCK;
    r->ev[ev->stage][ev->index] = *ev;
    return MK_WALK_GO;
}

static int rec_block(void *ctx, const mk_walk_ev_t *ev)
{
    (void)ev;
    ((rec_t *)ctx)->blocks++;
    return 0;
}

static int rec_wake(void *ctx, int stage, const mk_walk_ev_t *ev)
{
    rec_t *r = ctx;
    if (r->wakes < 4) {
        r->wake_stage[r->wakes] = stage;
        r->wake_from[r->wakes][0] = ev->stage, r->wake_from[r->wakes][1] = ev->index;
    }
    r->wakes++;
    return 0;
}

static mk_walk_hooks_t hooks_of(rec_t *r)
{
    return (mk_walk_hooks_t){.ctx = r, .compute = rec, .send = rec, .recv = rec, .collective = rec,
                             .load = rec, .block = rec_block, .wake = rec_wake};
}

static mk_sched_t *build(mk_sched_kind_t k, int pp, int m, int vpp, mk_recompute_kind_t rc,
                         int buckets, int tied)
{
    mk_sched_spec_t sp = {.kind = k, .pp = pp, .m = m, .vpp = vpp, .recompute = {rc, 0},
                          .grad_buckets = buckets, .tied = tied};
    mk_sched_t *s = mk_sched_build(&sp);
    CHECK(s != NULL, "build %s: %s", mk_sched_kind_name(k), mk_error_last());
    return s;
}

/* Sweep with buffered sends, recording every event. */
static int sweep(const mk_sched_t *s, rec_t *r, mk_walk_mode_t mode)
{
    memset(r, 0, sizeof *r);
    mk_walk_opts_t o = {.mode = mode};
    mk_walk_hooks_t h = hooks_of(r);
    mk_walk_t w;
    if (mk_walk_init(&w, s, &o, &h) < 0) return -1;
    int rc = mk_walk_run(&w);
    mk_walk_free(&w);
    return rc;
}

#define EV(st, i) (&r.ev[st][i])

/* 1F1B, pp 2, m 2, full recompute, tied, 2 buckets.
 * s0: LOAD0 F0 SEND_ACT0 LOAD1 F1 SEND_ACT1 RECV_GRAD0 B0 RECV_GRAD1 B1 TIED RG RG OPT
 * s1: LOAD0 RECV_ACT0 F0 B0 SEND_GRAD0 LOAD1 RECV_ACT1 F1 B1 SEND_GRAD1 TIED RG RG OPT
 * keys (grad*m + mb)*V + dst, V = 2: act0 -> 1, act1 -> 3, grad0 -> 4, grad1 -> 6. */
static void test_1f1b(void)
{
    mk_sched_t *s = build(MK_SCHED_1F1B, 2, 2, 1, MK_RECOMPUTE_FULL, 2, 1);
    rec_t r;
    CHECK(s && sweep(s, &r, MK_WALK_BUFFERED) == 0, "1f1b sweep: %s", mk_error_last());
    if (!s) return;
    CHECK(s->streams[0].n == 14 && s->streams[1].n == 14, "stream lengths %d %d", s->streams[0].n,
          s->streams[1].n);
    CHECK(EV(0, 2)->key == 1 && EV(0, 2)->vpeer == 1 && EV(0, 2)->peer == 1, "s0 SEND_ACT0 key %d",
          EV(0, 2)->key);
    CHECK(EV(1, 1)->key == 1 && EV(1, 1)->vpeer == 0 && EV(1, 1)->peer == 0, "s1 RECV_ACT0 key %d",
          EV(1, 1)->key);
    CHECK(EV(0, 5)->key == 3 && EV(1, 6)->key == 3, "act1 keys %d %d", EV(0, 5)->key, EV(1, 6)->key);
    CHECK(EV(1, 4)->key == 4 && EV(0, 6)->key == 4, "grad0 keys %d %d", EV(1, 4)->key, EV(0, 6)->key);
    CHECK(EV(1, 9)->key == 6 && EV(0, 8)->key == 6, "grad1 keys %d %d", EV(1, 9)->key, EV(0, 8)->key);
    CHECK(EV(0, 1)->ckpt == 1 && EV(0, 1)->holds && EV(0, 1)->inflight == 1, "s0 F0");
    CHECK(EV(0, 4)->inflight == 2 && EV(0, 4)->slot == 1, "s0 F1 inflight %d", EV(0, 4)->inflight);
    CHECK(EV(0, 7)->recomputes && EV(0, 7)->releases && EV(0, 7)->inflight == 1 && EV(0, 7)->ckpt == 1,
          "s0 B0 recomputes %d inflight %d", EV(0, 7)->recomputes, EV(0, 7)->inflight);
    CHECK(EV(0, 9)->inflight == 0 && EV(0, 9)->last_bwd && !EV(0, 7)->last_bwd, "s0 B1 last");
    CHECK(EV(1, 8)->last_bwd && EV(1, 3)->inflight == 0 && EV(1, 7)->inflight == 1, "s1 B1 last");
    CHECK(EV(0, 11)->bucket == 0 && EV(0, 12)->bucket == 1 && EV(0, 13)->bucket == -1, "buckets");
    CHECK(EV(0, 10)->peer == 1 && EV(1, 10)->peer == 0, "tied peers");
    /* the sweep runs s0 to RECV_GRAD0, then s1 to its REDUCE_TIED: s0 completes it first */
    CHECK(EV(0, 10)->tied_first == 1 && EV(1, 10)->tied_first == 0, "tied_first %d %d",
          EV(0, 10)->tied_first, EV(1, 10)->tied_first);
    CHECK(r.blocks == 2 && r.wakes == 2, "blocks %d wakes %d", r.blocks, r.wakes);
    CHECK(r.wake_stage[0] == 0 && r.wake_from[0][0] == 1 && r.wake_from[0][1] == 4,
          "SEND_GRAD0 wakes s0 (%d by %d:%d)", r.wake_stage[0], r.wake_from[0][0], r.wake_from[0][1]);
    CHECK(r.wake_stage[1] == 1 && r.wake_from[1][0] == 0 && r.wake_from[1][1] == 10,
          "s0's REDUCE_TIED wakes s1 (%d by %d:%d)", r.wake_stage[1], r.wake_from[1][0],
          r.wake_from[1][1]);
    for (int st = 0; st < 2; st++)
        for (int i = 0; i < s->streams[st].n; i++)
            CHECK(r.seen[st][i] == 1, "s%d instruction %d ran %d times", st, i, r.seen[st][i]);
    /* 1F1B's steady state is not rendezvous-safe: SEND_ACT1 meets s1 at SEND_GRAD0 */
    CHECK(sweep(s, &r, MK_WALK_RENDEZVOUS) < 0 && strstr(mk_error_last(), "stage 0 waits forever at "
                                                         "instruction 5 (SEND_ACT mb 1"),
          "1f1b rendezvous: %s", mk_error_last());
    mk_sched_free(s);
}

/* Interleaved, pp 2, vpp 2, m 2, no recompute: V = 4, s0 holds chunks at
 * vstages 0 and 2.  s0: 6 RECV_ACT0.1 from vstage 1 (key 2), 8 SEND_ACT0.1
 * to vstage 3 (key 3), 14 SEND_GRAD0.1 to vstage 1 (key (2+0)*4+1 = 9),
 * 20 RECV_GRAD1.0 at vstage 0 (key (2+1)*4 = 12); four in flight. */
static void test_interleaved(void)
{
    mk_sched_t *s = build(MK_SCHED_INTERLEAVED, 2, 2, 2, MK_RECOMPUTE_NONE, 0, 0);
    rec_t r;
    CHECK(s && sweep(s, &r, MK_WALK_BUFFERED) == 0, "interleaved sweep: %s", mk_error_last());
    if (!s) return;
    CHECK(EV(0, 6)->in->op == MK_INSTR_RECV_ACT && EV(0, 6)->vstage == 2 && EV(0, 6)->vpeer == 1 &&
          EV(0, 6)->key == 2 && EV(0, 6)->slot == 1, "s0 RECV_ACT0.1 key %d slot %d", EV(0, 6)->key,
          EV(0, 6)->slot);
    CHECK(EV(1, 2)->in->op == MK_INSTR_SEND_ACT && EV(1, 2)->vpeer == 2 && EV(1, 2)->peer == 0 &&
          EV(1, 2)->key == 2, "s1 SEND_ACT0.0 key %d", EV(1, 2)->key);
    CHECK(EV(0, 8)->key == 3 && EV(0, 8)->vpeer == 3 && EV(0, 8)->peer == 1, "s0 SEND_ACT0.1");
    CHECK(EV(0, 14)->in->op == MK_INSTR_SEND_GRAD && EV(0, 14)->key == 9, "s0 SEND_GRAD0.1 key %d",
          EV(0, 14)->key);
    CHECK(EV(0, 20)->in->op == MK_INSTR_RECV_GRAD && EV(0, 20)->key == 12 && EV(0, 20)->slot == 2,
          "s0 RECV_GRAD1.0 key %d", EV(0, 20)->key);
    int most = 0;
    for (int i = 0; i < s->streams[0].n; i++)
        if (EV(0, i)->inflight > most) most = EV(0, i)->inflight;
    CHECK(most == 4 && EV(0, 10)->inflight == 4 && EV(0, 21)->inflight == 0, "s0 in flight %d", most);
    CHECK(!EV(0, 13)->recomputes && EV(0, 13)->ckpt == 0, "no recompute");
    CHECK(EV(0, 21)->last_bwd && !EV(0, 19)->last_bwd, "s0 last backward");
    CHECK(mk_walk_n_keys(s) == 16, "keys %d", mk_walk_n_keys(s));
    mk_sched_free(s);
}

/* zb-h1, pp 2, m 2, full: B_IN recomputes and keeps the activations, B_W frees them.
 * s1: LOAD0 RECV_ACT0 F0 B_IN0 SEND_GRAD0 LOAD1 RECV_ACT1 F1 B_IN1 SEND_GRAD1 B_W0 B_W1 RG OPT */
static void test_zbh1(void)
{
    mk_sched_t *s = build(MK_SCHED_ZB_H1, 2, 2, 1, MK_RECOMPUTE_FULL, 1, 0);
    rec_t r;
    CHECK(s && sweep(s, &r, MK_WALK_BUFFERED) == 0, "zb-h1 sweep: %s", mk_error_last());
    if (!s) return;
    CHECK(EV(1, 3)->in->op == MK_INSTR_B_IN && EV(1, 3)->recomputes && !EV(1, 3)->releases &&
          EV(1, 3)->inflight == 1, "s1 B_IN0");
    CHECK(EV(1, 8)->inflight == 2, "s1 B_IN1 inflight %d", EV(1, 8)->inflight);
    CHECK(EV(1, 10)->in->op == MK_INSTR_B_W && EV(1, 10)->releases && !EV(1, 10)->recomputes &&
          EV(1, 10)->ckpt == 1 && EV(1, 10)->inflight == 1, "s1 B_W0");
    CHECK(EV(1, 11)->last_bwd && EV(1, 11)->inflight == 0 && !EV(1, 8)->last_bwd, "s1 B_W1 last");
    CHECK(EV(0, 11)->last_bwd && EV(0, 12)->bucket == 0, "s0 last B_W and bucket");
    mk_sched_free(s);
}

/* merak-pre, pp 2, m 2, full: s0's F_PRE1 keeps all (1) layer, R1 regrows, B1 then does not recompute. */
static void test_pre(void)
{
    mk_sched_t *s = build(MK_SCHED_MERAK_PRE, 2, 2, 1, MK_RECOMPUTE_FULL, 0, 0);
    rec_t r;
    CHECK(s && sweep(s, &r, MK_WALK_BUFFERED) == 0, "merak-pre sweep: %s", mk_error_last());
    if (!s) return;
    CHECK(EV(0, 4)->in->op == MK_INSTR_F_PRE && EV(0, 4)->ckpt == 1 && EV(0, 4)->holds, "F_PRE1");
    CHECK(EV(0, 7)->in->op == MK_INSTR_B && EV(0, 7)->recomputes, "B0 recomputes");
    CHECK(EV(0, 8)->in->op == MK_INSTR_R && EV(0, 8)->regrows && EV(0, 8)->ckpt == 1, "R1");
    CHECK(EV(0, 10)->in->op == MK_INSTR_B && !EV(0, 10)->recomputes, "B1 after R1");
    mk_sched_free(s);
}

/* The caps and the plain-F override the memory tracker searches with. */
static void test_ckpt_opts(void)
{
    int layers[2] = {3, 3}, cap[2] = {2, 2}, f5[2] = {5, 5}, f1[2] = {1, 1};
    mk_sched_spec_t sp = {.kind = MK_SCHED_1F1B, .pp = 2, .m = 2, .vpp = 1,
                          .recompute = {MK_RECOMPUTE_FULL, 0}, .layers = layers};
    mk_sched_t *s = mk_sched_build(&sp);
    CHECK(s != NULL, "build: %s", mk_error_last());
    if (!s) return;
    struct { const int *cap, *f; int want; } cases[] = {{NULL, NULL, 3}, {NULL, f1, 1}, {cap, f5, 2}, {cap, NULL, 2}};
    for (int c = 0; c < 4; c++) {
        rec_t r = {0};
        mk_walk_opts_t o = {.mode = MK_WALK_LOCAL, .ckpt_cap = cases[c].cap, .ckpt_f = cases[c].f};
        mk_walk_hooks_t h = hooks_of(&r);
        mk_walk_t w;
        CHECK(mk_walk_init(&w, s, &o, &h) == 0 && mk_walk_stage(&w, 0) == s->streams[0].n,
              "local walk: %s", mk_error_last());
        CHECK(EV(0, 1)->ckpt == cases[c].want && EV(0, 7)->ckpt == cases[c].want,
              "case %d: F0 ckpt %d B0 ckpt %d want %d", c, EV(0, 1)->ckpt, EV(0, 7)->ckpt, cases[c].want);
        CHECK(mk_walk_state(&w, 0) == MK_WALK_ENDED && mk_walk_stage(&w, 0) == 0, "ended");
        mk_walk_free(&w);
    }
    mk_sched_free(s);
}

/* An event-driven driver as the simulator has one: a FIFO of stages to
 * run; every compute op yields (re-queue), the wake hook queues the stage
 * it readies.  Everything must run exactly once and finish. */
typedef struct {
    rec_t r;
    int q[1024], head, tail, yields;
} evd_t;

static int evd_wake(void *ctx, int stage, const mk_walk_ev_t *ev)
{
    evd_t *d = ctx;
    (void)ev;
    d->q[d->tail++ % 1024] = stage;
    return rec_wake(&d->r, stage, ev);
}

static void test_event_driven(void)
{
    mk_sched_t *s = build(MK_SCHED_1F1B, 3, 4, 1, MK_RECOMPUTE_FULL, 1, 1);
    if (!s) return;
    evd_t *d = calloc(1, sizeof *d);
    d->r.yield_compute = 1;
    mk_walk_hooks_t h = hooks_of(&d->r);
    h.ctx = d, h.wake = evd_wake;
    mk_walk_t w;
    CHECK(mk_walk_init(&w, s, NULL, &h) == 0, "init");
    for (int st = 0; st < 3; st++) d->q[d->tail++] = st;
    int ncompute = 0, steps = 0;
    while (d->head < d->tail && steps++ < 10000) {
        int st = d->q[d->head++ % 1024];
        CHECK(mk_walk_stage(&w, st) >= 0, "stage %d: %s", st, mk_error_last());
        if (mk_walk_state(&w, st) == MK_WALK_YIELDED) d->q[d->tail++ % 1024] = st, d->yields++;
    }
    CHECK(mk_walk_done(&w) == 0, "event-driven: %s", mk_error_last());
    for (int st = 0; st < 3; st++)
        for (int i = 0; i < s->streams[st].n; i++) {
            ncompute += mk_instr_is_compute(s->streams[st].v[i].op);
            CHECK(d->r.seen[st][i] == 1, "s%d instruction %d ran %d times", st, i, d->r.seen[st][i]);
        }
    CHECK(d->yields == ncompute, "yields %d, compute ops %d", d->yields, ncompute);
    CHECK(d->r.wakes > 0 && d->r.blocks == d->r.wakes, "blocks %d wakes %d", d->r.blocks, d->r.wakes);
    mk_walk_free(&w);
    free(d);
    mk_sched_free(s);
}

/* One stage alone: every RECV is the hook's; a hook may say BLOCK and be asked again. */
static void test_local(void)
{
    mk_sched_t *s = build(MK_SCHED_1F1B, 2, 2, 1, MK_RECOMPUTE_FULL, 0, 1);
    if (!s) return;
    rec_t r = {0};
    r.block_first_recv = 1;
    mk_walk_opts_t o = {.mode = MK_WALK_LOCAL};
    mk_walk_hooks_t h = hooks_of(&r);
    h.recv = rec_recv;
    mk_walk_t w;
    CHECK(mk_walk_init(&w, s, &o, &h) == 0, "init");
    int total = 0, calls = 0, n;
    while ((n = mk_walk_stage(&w, 1)) >= 0 && mk_walk_state(&w, 1) != MK_WALK_ENDED && calls++ < 100)
        total += n;
    total += n > 0 ? n : 0;
    CHECK(n >= 0 && total == s->streams[1].n, "local stage 1: %d of %d (%s)", total, s->streams[1].n,
          mk_error_last());
    CHECK(r.recv_calls == 4 && calls == 2, "2 RECVs asked twice: %d calls, %d stops", r.recv_calls, calls);
    CHECK(EV(1, 10)->tied_first == 1 && EV(1, 1)->key == 1, "local tied and key");
    mk_walk_reset(&w);
    CHECK(w.pos[1] == 0 && mk_walk_state(&w, 1) == MK_WALK_READY, "reset");
    mk_walk_free(&w);
    mk_sched_free(s);
}

/* Reported: a deadlock, ranges, a second send, a misplaced REDUCE_TIED; rendezvous-safe gpipe. */
static void test_errors(void)
{
    rec_t r;
    mk_sched_t *s = build(MK_SCHED_GPIPE, 2, 2, 1, MK_RECOMPUTE_NONE, 0, 0);
    if (!s) return;
    CHECK(sweep(s, &r, MK_WALK_RENDEZVOUS) == 0, "gpipe is rendezvous-safe: %s", mk_error_last());
    mk_sched_free(s);
    s = build(MK_SCHED_1F1B, 2, 2, 1, MK_RECOMPUTE_FULL, 0, 0);
    mk_stream_t *s0 = &s->streams[0];
    mk_instr_t t = s0->v[2];
    s0->v[2] = s0->v[6], s0->v[6] = t; /* s0 waits for grad 0 before it sends act 0 */
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) < 0 &&
          !strcmp(mk_error_last(), "deadlock: stage 0 waits forever at instruction 2 (RECV_GRAD mb 0 "
                                   "chunk 0 peer 1)"), "deadlock: %s", mk_error_last());
    s0->v[6] = s0->v[2], s0->v[2] = t;
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) == 0, "restored: %s", mk_error_last());
    s0->v[1].mb = 5;
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) < 0 &&
          !strcmp(mk_error_last(), "stage 0 instruction 1: F has mb 5 chunk 0 out of range"), "range: %s",
          mk_error_last());
    s0->v[1].mb = 0;
    s0->v[5].mb = 0;
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) < 0 && strstr(mk_error_last(), "SEND_ACT mb 0 chunk 0 sent twice"),
          "second send: %s", mk_error_last());
    s0->v[5].mb = 1;
    s->streams[1].v[3].chunk = 0, s->streams[1].v[4].op = MK_INSTR_SEND_ACT; /* to vstage 2 of 2 */
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) < 0 && !strcmp(mk_error_last(), "stage 1 instruction 4: bad SEND_ACT"),
          "impossible message: %s", mk_error_last());
    mk_sched_free(s);
    s = build(MK_SCHED_1F1B, 3, 3, 1, MK_RECOMPUTE_FULL, 0, 1);
    mk_stream_t *s1 = &s->streams[1];
    s1->v[s1->n - 1].op = MK_INSTR_REDUCE_TIED;
    CHECK(sweep(s, &r, MK_WALK_BUFFERED) < 0 && strstr(mk_error_last(), "REDUCE_TIED belongs on the first"),
          "tied on stage 1: %s", mk_error_last());
    mk_walk_opts_t o = {.mode = MK_WALK_LOCAL, .lenient = 1};
    mk_walk_t w;
    CHECK(mk_walk_init(&w, s, &o, NULL) == 0 && mk_walk_stage(&w, 1) == s1->n, "lenient decode: %s",
          mk_error_last());
    mk_walk_free(&w);
    mk_sched_free(s);
}

int main(void)
{
    test_1f1b();
    test_interleaved();
    test_zbh1();
    test_pre();
    test_ckpt_opts();
    test_event_driven();
    test_local();
    test_errors();
    CHECK_DONE();
}
