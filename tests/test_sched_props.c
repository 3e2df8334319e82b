/* Properties of every schedule over p in 1..16, m in 1..64 (interleaved: m
 * a multiple of p, v in 2..4), recompute none and full: complete and
 * deadlock-free, in-flight maxima as theory, unit-cost makespans as the
 * closed forms (src/sched/README.md "Pipeline schedules"). */
#include "check.h"
#include "merak/sched.h"

#include <stdlib.h>

static int rendezvous_seen[MK_SCHED_COUNT][2]; /* [kind][ok] */

/* Build and verify; returns the makespan (-1 on failure, reported). */
static double run(mk_sched_kind_t k, int p, int m, int v, mk_recompute_kind_t rk, int *inflight)
{
    mk_sched_spec_t sp = {.kind = k, .pp = p, .m = m, .vpp = v, .recompute = {rk, 0},
                          .grad_buckets = 1, .tied = 1};
    mk_sched_t *s = mk_sched_build(&sp);
    mk_sched_report_t rep = {0};
    double ms = -1;
    if (!s)
        CHECK(0, "%s p=%d m=%d v=%d: build: %s", mk_sched_kind_name(k), p, m, v, mk_error_last());
    else if (mk_sched_verify(s, &rep) < 0)
        CHECK(0, "%s p=%d m=%d v=%d rc=%d: %s", mk_sched_kind_name(k), p, m, v, rk, mk_error_last());
    else {
        ms = rep.makespan;
        rendezvous_seen[k][rep.rendezvous_ok]++;
        for (int i = 0; i < p && inflight; i++) inflight[i] = rep.max_inflight[i];
    }
    free(rep.max_inflight);
    mk_sched_free(s);
    return ms;
}

static int imin(int a, int b) { return a < b ? a : b; }

static void check_flat(int p, int m, mk_recompute_kind_t rk)
{
    int fl[16], fl1[16];
    double t1 = run(MK_SCHED_1F1B, p, m, 1, rk, fl1);
    for (int i = 0; i < p; i++)
        CHECK(fl1[i] == imin(m, p - i), "1f1b p=%d m=%d stage %d in flight %d", p, m, i, fl1[i]);
    double tg = run(MK_SCHED_GPIPE, p, m, 1, rk, fl);
    for (int i = 0; i < p; i++) CHECK(fl[i] == m, "gpipe p=%d m=%d in flight %d", p, m, fl[i]);
    if (rk == MK_RECOMPUTE_NONE) {
        CHECK(t1 == 3.0 * (m + p - 1), "1f1b p=%d m=%d makespan %g", p, m, t1);
        CHECK(tg == 3.0 * (m + p - 1), "gpipe p=%d m=%d makespan %g", p, m, tg);
    }
    double tz = run(MK_SCHED_ZB_H1, p, m, 1, rk, fl);
    for (int i = 0; i < p; i++)
        CHECK(fl[i] <= imin(m, p), "zb-h1 p=%d m=%d stage %d in flight %d > 1F1B peak", p, m, i, fl[i]);
    if (p >= 2) CHECK(tz < t1, "zb-h1 p=%d m=%d rc=%d: %g not below 1f1b %g", p, m, rk, tz, t1);
    mk_sched_kind_t mk[3] = {MK_SCHED_MERAK_PRE, MK_SCHED_MERAK_LAST, MK_SCHED_MERAK};
    for (int j = 0; j < 3; j++) {
        double tm = run(mk[j], p, m, 1, rk, fl);
        for (int i = 0; i < p; i++)
            CHECK(fl[i] <= imin(m, p - i + (mk[j] == MK_SCHED_MERAK)), "%s p=%d m=%d stage %d "
                  "in flight %d", mk_sched_kind_name(mk[j]), p, m, i, fl[i]);
        CHECK(tm <= t1, "%s p=%d m=%d rc=%d slower than 1f1b (%g > %g)", mk_sched_kind_name(mk[j]),
              p, m, rk, tm, t1);
        if (mk[j] == MK_SCHED_MERAK && rk == MK_RECOMPUTE_FULL && p >= 4 && m >= p)
            CHECK(tm < t1, "merak p=%d m=%d: %g not below 1f1b %g", p, m, tm, t1);
    }
}

/* Interleaved with F, B per chunk scaled by 1/v: bubble (p-1)/(v m) of ideal. */
static void check_interleaved(int p, int m, int v, mk_recompute_kind_t rk)
{
    mk_sched_spec_t sp = {.kind = MK_SCHED_INTERLEAVED, .pp = p, .m = m, .vpp = v,
                          .recompute = {rk, 0}};
    run(MK_SCHED_INTERLEAVED, p, m, v, rk, NULL);
    if (rk != MK_RECOMPUTE_NONE) return;
    mk_sched_t *s = mk_sched_build(&sp);
    mk_sched_costs_t c;
    mk_sched_costs_unit(&c);
    c.f /= v;
    c.b /= v;
    mk_sched_timeline_t tl;
    if (!s || mk_sched_timeline(s, &c, &tl) < 0) {
        CHECK(0, "interleaved p=%d m=%d v=%d timeline: %s", p, m, v, mk_error_last());
    } else {
        double ideal = 3.0 * m;
        CHECK_REL(tl.makespan, ideal * (1 + (p - 1.0) / (v * m)), 1e-9, "interleaved makespan");
        mk_sched_timeline_free(&tl);
    }
    mk_sched_free(s);
}

/* Makespan of kind k (v chunks) with every compute cost divided by v, so
 * a micro-batch's work through a stage is F + B = 3 as in the flat ones. */
static double scaled_makespan(mk_sched_kind_t k, int p, int m, int v, mk_recompute_kind_t rk)
{
    mk_sched_spec_t sp = {.kind = k, .pp = p, .m = m, .vpp = v, .recompute = {rk, 0}};
    mk_sched_t *s = mk_sched_build(&sp);
    mk_sched_costs_t c;
    mk_sched_costs_unit(&c);
    c.f /= v, c.b /= v, c.b_in /= v, c.b_w /= v, c.r /= v, c.recompute /= v;
    mk_sched_timeline_t tl;
    double ms = -1;
    if (s && mk_sched_timeline(s, &c, &tl) == 0) ms = tl.makespan, mk_sched_timeline_free(&tl);
    mk_sched_free(s);
    return ms;
}

/* The zero-bubble family (issue 35): zb-h2 takes zb-h1's unit-cost step,
 * 3m + p - 1 without recompute (m >= p), never more; zb-v and dualpipev
 * (two chunks in a V, each half a stage) have less bubble than 1f1b from
 * p 2 and m >= p, zb-v than zb-h1 too without recompute; each holds its
 * stated peak. */
static void check_zb(int p, int m, mk_recompute_kind_t rk)
{
    int fl[16];
    double t1 = run(MK_SCHED_1F1B, p, m, 1, rk, NULL), tz1 = run(MK_SCHED_ZB_H1, p, m, 1, rk, NULL);
    double tz2 = run(MK_SCHED_ZB_H2, p, m, 1, rk, fl);
    for (int i = 0; i < p; i++)
        CHECK(fl[i] == mk_sched_peak_inflight(MK_SCHED_ZB_H2, p, m, 1, i, 0) && fl[i] <= imin(m, 2 * p - 1),
              "zb-h2 p=%d m=%d stage %d in flight %d", p, m, i, fl[i]);
    CHECK(tz2 <= tz1, "zb-h2 p=%d m=%d rc=%d: %g above zb-h1 %g", p, m, rk, tz2, tz1);
    if (rk == MK_RECOMPUTE_NONE) /* with m < p: the first forward to the end and back, then m - 1 more B_IN + B_W */
        CHECK(tz2 == (m >= p ? 3.0 * m + p - 1 : 2.0 * (m + p) - 1), "zb-h2 p=%d m=%d makespan %g", p, m, tz2);
    double tv = run(MK_SCHED_ZB_V, p, m, 2, rk, fl), sv = scaled_makespan(MK_SCHED_ZB_V, p, m, 2, rk);
    for (int i = 0; i < p; i++)
        CHECK(fl[i] == imin(2 * p, 2 * m), "zb-v p=%d m=%d stage %d in flight %d", p, m, i, fl[i]);
    /* (with full recompute a B_IN takes twice a forward, and 2p slots no
       longer cover micro-batch 0's way back: below 1f1b, not always zb-h1) */
    if (p >= 2 && m >= p)
        CHECK(tv > 0 && sv < t1 && (rk != MK_RECOMPUTE_NONE || sv < tz1), "zb-v p=%d m=%d rc=%d: %g, zb-h1 %g, 1f1b %g",
              p, m, rk, sv, tz1, t1);
    if (m < 2 * p) return;
    double td = run(MK_SCHED_DUALPIPEV, p, m, 2, rk, fl), sd = scaled_makespan(MK_SCHED_DUALPIPEV, p, m, 2, rk);
    for (int i = 0; i < p; i++) CHECK(fl[i] == 2 * p + 1, "dualpipev p=%d m=%d stage %d in flight %d", p, m, i, fl[i]);
    if (p >= 2) CHECK(td > 0 && sd < t1, "dualpipev p=%d m=%d rc=%d: %g not below 1f1b %g", p, m, rk, sd, t1);
}

int main(void)
{
    mk_recompute_kind_t rks[2] = {MK_RECOMPUTE_NONE, MK_RECOMPUTE_FULL};
    for (int r = 0; r < 2; r++)
        for (int p = 1; p <= 16; p++)
            for (int m = 1; m <= 64; m++) {
                check_flat(p, m, rks[r]);
                check_zb(p, m, rks[r]);
                for (int v = 2; v <= 4 && m % p == 0; v++) check_interleaved(p, m, v, rks[r]);
            }
    for (int k = 0; k < MK_SCHED_COUNT; k++)
        printf("%-12s rendezvous-safe in %d of %d cases\n", mk_sched_kind_name(k),
               rendezvous_seen[k][1], rendezvous_seen[k][0] + rendezvous_seen[k][1]);
    CHECK_DONE();
}
