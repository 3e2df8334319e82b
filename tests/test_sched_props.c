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

int main(void)
{
    mk_recompute_kind_t rks[2] = {MK_RECOMPUTE_NONE, MK_RECOMPUTE_FULL};
    for (int r = 0; r < 2; r++)
        for (int p = 1; p <= 16; p++)
            for (int m = 1; m <= 64; m++) {
                check_flat(p, m, rks[r]);
                for (int v = 2; v <= 4 && m % p == 0; v++) check_interleaved(p, m, v, rks[r]);
            }
    for (int k = 0; k < MK_SCHED_COUNT; k++)
        printf("%-12s rendezvous-safe in %d of %d cases\n", mk_sched_kind_name(k),
               rendezvous_seen[k][1], rendezvous_seen[k][0] + rendezvous_seen[k][1]);
    CHECK_DONE();
}
