/* The schedules' traits (merak/sched.h mk_sched_traits, mk_sched_warmup,
 * mk_sched_peak_inflight, mk_sched_tail_bw) equal what the generated
 * streams do, for every schedule x pp 1..8 x micro-batches 1..16 x vpp
 * 1..4 x recompute (none, full, stage-aware 0.5, selective): the facts the
 * memory model, the bound, the planner and the verifier read from one
 * place are the streams' own. */
#include "check.h"
#include "merak/sched.h"

#include <stdlib.h>
#include <string.h>

static const mk_recompute_t rcs[] = {{MK_RECOMPUTE_NONE, 0}, {MK_RECOMPUTE_FULL, 0},
                                     {MK_RECOMPUTE_STAGE_AWARE, 0.5}, {MK_RECOMPUTE_SELECTIVE, 0}};
static long checked, early_seen[MK_SCHED_COUNT], ls_stages, ls_at_cap, counts_compared;

static int is_bwd(mk_instr_op_t op) { return op == MK_INSTR_B || op == MK_INSTR_B_IN; }

/* Stage st's stream against the traits. */
static void check_stage(const mk_sched_t *s, const mk_sched_report_t *rep, int st)
{
    const mk_sched_spec_t *sp = &s->spec;
    const mk_sched_traits_t *t = mk_sched_traits(sp->kind);
    const mk_stream_t *q = &s->streams[st];
    int ck = 0, warm = 0, seen_b = 0, last_bin = -1, tail = 0, split = 0, early = 0;
    for (int c = 0; c < sp->vpp; c++) ck |= s->ckpt[st * sp->vpp + c] > 0;
    for (int i = 0; i < q->n; i++) {
        mk_instr_op_t op = q->v[i].op;
        if (is_bwd(op)) seen_b = 1;
        if (!seen_b && (op == MK_INSTR_F || op == MK_INSTR_F_PRE)) warm++;
        if (op == MK_INSTR_B_IN) last_bin = i, split = 1;
    }
    for (int i = last_bin + 1; last_bin >= 0 && i < q->n; i++) tail += q->v[i].op == MK_INSTR_B_W;
    /* an R before the RECV_GRAD of its own (mb, chunk): replayed early */
    for (int i = 0; i < q->n && !early; i++) {
        if (q->v[i].op != MK_INSTR_R) continue;
        for (int j = i + 1; j < q->n && !early; j++)
            early = q->v[j].op == MK_INSTR_RECV_GRAD && q->v[j].mb == q->v[i].mb && q->v[j].chunk == q->v[i].chunk;
    }
    early_seen[sp->kind] += early;
    const char *k = mk_sched_kind_name(sp->kind);
    int p = sp->pp, m = sp->m, v = sp->vpp, rk = sp->recompute.kind;
    int ls = t->list_scheduled;
    CHECK(ls ? mk_sched_warmup(sp->kind, p, m, v, st, ck) == -1 : warm == mk_sched_warmup(sp->kind, p, m, v, st, ck),
          "%s p %d m %d v %d rc %d stage %d: warm-up %d, traits %d",
          k, p, m, v, rk, st, warm, mk_sched_warmup(sp->kind, p, m, v, st, ck));
    /* list-scheduled: the cap, reached but where the clock's mixed costs
       (a stage-aware policy's recomputing B_INs) leave a slot free */
    int peak = mk_sched_peak_inflight(sp->kind, p, m, v, st, ck);
    if (ls) ls_stages++, ls_at_cap += rep->max_inflight[st] == peak;
    CHECK(ls ? rep->max_inflight[st] <= peak : rep->max_inflight[st] == peak,
          "%s p %d m %d v %d rc %d stage %d: peak in flight %d, traits %d", k, p, m, v, rk, st, rep->max_inflight[st],
          mk_sched_peak_inflight(sp->kind, p, m, v, st, ck));
    CHECK(ls ? tail <= mk_sched_tail_bw(sp->kind, p, m, st) : tail == mk_sched_tail_bw(sp->kind, p, m, st),
          "%s p %d m %d stage %d: %d B_W after the last B_IN, traits %d",
          k, p, m, st, tail, mk_sched_tail_bw(sp->kind, p, m, st));
    CHECK(split == t->split_backward, "%s: B_IN %s, traits split_backward %d", k, split ? "present" : "absent",
          t->split_backward);
    CHECK(!early || t->replays_early, "%s p %d m %d rc %d stage %d: an R before its gradient, traits say none", k, p,
          m, rk, st);
    checked++;
}

static void check_one(mk_sched_kind_t k, int p, int m, int v, const mk_recompute_t *rc)
{
    mk_sched_spec_t sp = {.kind = k, .pp = p, .m = m, .vpp = v, .recompute = *rc, .grad_buckets = 1, .tied = 1};
    const mk_sched_traits_t *t = mk_sched_traits(k);
    mk_sched_t *s = mk_sched_build(&sp);
    int runs = v == 1 ? (!t->interleaved || p == 1) && t->min_vpp <= 1
                      : t->interleaved && (!t->m_per_pp || m % p == 0) && (!t->max_vpp || v <= t->max_vpp);
    if (m < t->min_m_per_pp * p) runs = 0; /* dualpipev: DeepSeek's dualpipev.py asserts m >= 2p */
    if (!s) {
        /* only what the traits rule out fails to build */
        CHECK(!runs, "%s p %d m %d v %d: refused: %s", mk_sched_kind_name(k), p, m, v,
              mk_error_last());
        return;
    }
    CHECK(v == 1 || t->interleaved, "%s built with vpp %d", mk_sched_kind_name(k), v);
    mk_sched_report_t rep = {0};
    if (mk_sched_verify(s, &rep) < 0)
        CHECK(0, "%s p %d m %d v %d: %s", mk_sched_kind_name(k), p, m, v, mk_error_last());
    else
        for (int st = 0; st < p; st++) check_stage(s, &rep, st);
    free(rep.max_inflight);
    mk_sched_free(s);
}

/* The order of a stream's forwards and backwards: F_PRE as F, B_IN as B,
   R and B_W (what recompute and the split change) left out; n in *n. */
static int fb_order(const mk_sched_t *s, int *out, int cap)
{
    int n = 0;
    for (int i = 0; i < s->streams[0].n && n < cap; i++) {
        const mk_instr_t *in = &s->streams[0].v[i];
        if (in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) out[n++] = in->mb;
        else if (is_bwd(in->op)) out[n++] = -1 - in->mb;
    }
    return n;
}

/* A schedule searched only from pp min_pp has nothing to schedule at pp 1:
   its forwards and backwards come in 1F1B's order (or it is refused). */
static void check_min_pp(mk_sched_kind_t k, int m)
{
    mk_sched_spec_t a = {.kind = k, .pp = 1, .m = m, .vpp = 1, .recompute = {MK_RECOMPUTE_FULL, 0}};
    mk_sched_spec_t b = a;
    b.kind = MK_SCHED_1F1B;
    mk_sched_t *x = mk_sched_build(&a), *y = mk_sched_build(&b);
    int ox[64], oy[64], nx = x ? fb_order(x, ox, 64) : 0, ny = y ? fb_order(y, oy, 64) : 0;
    if (mk_sched_traits(k)->min_pp > 1)
        CHECK(!x || (nx == ny && !memcmp(ox, oy, nx * sizeof *ox)), "%s at pp 1, m %d: neither refused nor 1F1B's order",
              mk_sched_kind_name(k), m);
    mk_sched_free(x), mk_sched_free(y);
}

/* reads_counts 0: the streams of explicit checkpoint counts equal, but for
 * the counts themselves, those of counts 0/1 with the same zeros and no
 * layer counts (what the planner's walk programs and auto's memory walks
 * build instead, planner_prune.c prog_spec, memory_auto.c round_spec). */
static int same_but_counts(const mk_sched_t *a, const mk_sched_t *b)
{
    for (int st = 0; st < a->spec.pp; st++) {
        const mk_stream_t *x = &a->streams[st], *y = &b->streams[st];
        if (x->n != y->n) return 0;
        for (int i = 0; i < x->n; i++) {
            mk_instr_t u = x->v[i], w = y->v[i];
            u.ckpt = w.ckpt = 0;
            if (memcmp(&u, &w, sizeof u)) return 0;
        }
    }
    return 1;
}

static void check_counts_read(mk_sched_kind_t k, int p, int m, int v)
{
    int layers[64], ck[64], ck01[64], n = p * v;
    for (int i = 0; i < n; i++) layers[i] = 2 + i % 3, ck[i] = i % 4 == 1 ? 0 : 1 + i % layers[i], ck01[i] = ck[i] > 0;
    mk_sched_spec_t a = {k, p, m, v, {MK_RECOMPUTE_EXPLICIT, 0}, layers, ck, 1, 0}, b = a;
    b.layers = NULL, b.ckpt = ck01;
    mk_sched_t *x = mk_sched_build(&a), *y = x ? mk_sched_build(&b) : NULL;
    if (x && !mk_sched_traits(k)->reads_counts && ++counts_compared)
        CHECK(y && same_but_counts(x, y), "%s p %d m %d v %d: the streams read the counts' values, traits say not",
              mk_sched_kind_name(k), p, m, v);
    mk_sched_free(x), mk_sched_free(y);
}

int main(void)
{
    for (int k = 0; k < MK_SCHED_COUNT; k++) {
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 16; m++)
                for (int v = 1; v <= 4; v++)
                    for (size_t r = 0; r < sizeof rcs / sizeof *rcs; r++) check_one((mk_sched_kind_t)k, p, m, v, &rcs[r]);
        for (int m = 1; m <= 8; m++) check_min_pp((mk_sched_kind_t)k, m);
        for (int p = 2; p <= 8; p += 2)
            for (int v = 1; v <= 2; v++)
                for (int m = p; m <= 4 * p; m += p) check_counts_read((mk_sched_kind_t)k, p, m, v);
        /* the trait is not vacuous: the grid has an early R wherever it says so */
        CHECK(!mk_sched_traits((mk_sched_kind_t)k)->replays_early || early_seen[k] > 0,
              "%s: replays_early, but no early R in the grid", mk_sched_kind_name((mk_sched_kind_t)k));
    }
    CHECK(checked > 10000, "%ld stages checked", checked);
    CHECK(counts_compared > 100, "%ld stream pairs compared for reads_counts", counts_compared);
    printf("reads_counts: %ld stream pairs compared\n", counts_compared);
    /* the cap is what they hold, all but rarely (the memory model takes it: never under) */
    CHECK(ls_stages > 1000 && ls_at_cap >= 0.99 * ls_stages, "list-scheduled stages at their cap: %ld of %ld",
          ls_at_cap, ls_stages);
    printf("list-scheduled stages at their cap: %ld of %ld\n", ls_at_cap, ls_stages);
    CHECK_DONE();
}
