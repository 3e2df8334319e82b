/* The scheduler against src/sched/README.md "Pipeline schedules": golden compute orders and makespans of
 * the 1F1B family (S=4, M=8, recompute full), stage-aware ratios, p2p and
 * tail instructions, and spec errors. */
#include "check.h"
#include "merak/sched.h"

#include <stdlib.h>
#include <string.h>

static mk_sched_t *build(mk_sched_kind_t k, int p, int m, int v, mk_recompute_kind_t rk)
{
    mk_sched_spec_t sp = {.kind = k, .pp = p, .m = m, .vpp = v, .recompute = {rk, 0}};
    mk_sched_t *s = mk_sched_build(&sp);
    if (!s) {
        fprintf(stderr, "build %s p=%d m=%d: %s\n", mk_sched_kind_name(k), p, m, mk_error_last());
        exit(1);
    }
    return s;
}

/* "F0 F*5 R5 B5 ..." for one stage's compute ops. */
static void order(const mk_sched_t *s, int st, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < s->streams[st].n && len + 16 < n; i++) {
        const mk_instr_t *in = &s->streams[st].v[i];
        const char *tag = in->op == MK_INSTR_F ? "F" : in->op == MK_INSTR_F_PRE ? "F*"
                        : in->op == MK_INSTR_R ? "R" : in->op == MK_INSTR_B ? "B" : NULL;
        if (tag) len += (size_t)snprintf(buf + len, n - len, "%s%s%d", len ? " " : "", tag, in->mb);
    }
}

static const char *golden[4][4] = {
    {"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
     "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
     "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
     "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"},
    {"F0 F1 F2 F3 B0 F4 B1 F*5 B2 F*6 B3 F*7 B4 R5 B5 R6 B6 R7 B7",
     "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F*6 B4 F*7 B5 R6 B6 R7 B7",
     "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F*7 B6 R7 B7",
     "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"},
    {"F0 F1 F2 F3 B0 F4 B1 F*5 B2 F*6 B3 F*7 B4 R5 B5 R6 B6 R7 B7",
     "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F*6 B4 F*7 B5 R6 B6 R7 B7",
     "F*0 F1 R0 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
     "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"},
    {"F0 F1 F2 F3 B0 F4 B1 F*5 B2 F*6 B3 F*7 B4 R5 B5 R6 B6 R7 B7",
     "F*0 F1 F2 R0 B0 F3 B1 F4 B2 F5 B3 F*6 B4 F*7 B5 R6 B6 R7 B7",
     "F*0 F*1 F2 R0 B0 R1 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
     "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"},
};

static void test_golden(void)
{
    mk_sched_kind_t kinds[4] = {MK_SCHED_1F1B, MK_SCHED_MERAK_PRE, MK_SCHED_MERAK_LAST, MK_SCHED_MERAK};
    double makespans[4] = {44, 41, 39, 38};
    char buf[1024];
    for (int k = 0; k < 4; k++) {
        mk_sched_t *s = build(kinds[k], 4, 8, 1, MK_RECOMPUTE_FULL);
        for (int st = 0; st < 4; st++) {
            order(s, st, buf, sizeof buf);
            CHECK(!strcmp(buf, golden[k][st]), "%s s%d:\n  got  %s\n  want %s",
                  mk_sched_kind_name(kinds[k]), st, buf, golden[k][st]);
        }
        mk_sched_report_t rep;
        CHECK(mk_sched_verify(s, &rep) == 0, "%s verify: %s", mk_sched_kind_name(kinds[k]), mk_error_last());
        CHECK(rep.makespan == makespans[k], "%s makespan %g want %g", mk_sched_kind_name(kinds[k]),
              rep.makespan, makespans[k]);
        free(rep.max_inflight);
        mk_sched_free(s);
    }
}

static void test_stage_ratio(void)
{
    double want8[8] = {0.8, 0.76667, 0.72, 0.65, 0.53333, 0.3, 0, 0};
    for (int i = 0; i < 8; i++)
        CHECK(fabs(mk_recompute_stage_ratio(0.8, 8, i) - want8[i]) < 1e-4, "S=8 r_%d = %g", i,
              mk_recompute_stage_ratio(0.8, 8, i));
    double want4[4] = {0.5, 0.25, 0, 0};
    for (int i = 0; i < 4; i++)
        CHECK(fabs(mk_recompute_stage_ratio(0.5, 4, i) - want4[i]) < 1e-12, "S=4 r_%d", i);
    int layers[4] = {8, 8, 8, 8};
    mk_sched_spec_t sp = {.kind = MK_SCHED_1F1B, .pp = 4, .m = 4, .vpp = 1,
                          .recompute = {MK_RECOMPUTE_STAGE_AWARE, 0.5}, .layers = layers};
    mk_sched_t *s = mk_sched_build(&sp);
    CHECK(s && s->ckpt[0] == 4 && s->ckpt[1] == 2 && s->ckpt[2] == 0 && s->ckpt[3] == 0,
          "stage-aware counts %d %d %d %d", s->ckpt[0], s->ckpt[1], s->ckpt[2], s->ckpt[3]);
    mk_sched_free(s);
    sp.kind = MK_SCHED_MERAK; /* stage p-2 takes stage p-3's ratio, the last none */
    s = mk_sched_build(&sp);
    CHECK(s && s->ckpt[0] == 4 && s->ckpt[1] == 2 && s->ckpt[2] == 2 && s->ckpt[3] == 0,
          "merak stage-aware counts %d %d %d %d", s->ckpt[0], s->ckpt[1], s->ckpt[2], s->ckpt[3]);
    mk_sched_free(s);
}

static void test_errors(void)
{
    mk_sched_spec_t sp = {.kind = MK_SCHED_1F1B, .pp = 4, .m = 8, .vpp = 1,
                          .recompute = {MK_RECOMPUTE_AUTO, 0}};
    CHECK(!mk_sched_build(&sp) && strstr(mk_error_last(), "auto"), "auto without ckpt: %s",
          mk_error_last());
    sp.recompute.kind = MK_RECOMPUTE_FULL;
    sp.pp = 0;
    CHECK(!mk_sched_build(&sp) && strstr(mk_error_last(), "stages"), "pp 0: %s", mk_error_last());
    sp.pp = 4;
    sp.m = 0;
    CHECK(!mk_sched_build(&sp) && strstr(mk_error_last(), "micro-batches"), "m 0");
    sp.m = 6;
    sp.kind = MK_SCHED_INTERLEAVED;
    sp.vpp = 2;
    CHECK(!mk_sched_build(&sp) && strstr(mk_error_last(), "multiple"), "interleaved m 6 p 4");
    mk_sched_kind_t k;
    mk_recompute_t r;
    CHECK(mk_sched_kind_parse("2f2b", &k) < 0, "unknown schedule");
    CHECK(mk_recompute_parse("stage-aware:1.5", &r) < 0, "ratio > 1");
    CHECK(mk_recompute_parse("stage-aware:0.25", &r) == 0 && r.ratio == 0.25, "stage-aware parse");
}

/* LOAD, p2p, REDUCE_TIED, REDUCE_GRADS and OPT_STEP where the streams need them. */
static void test_tail_and_p2p(void)
{
    mk_sched_spec_t sp = {.kind = MK_SCHED_ZB_H1, .pp = 3, .m = 4, .vpp = 1,
                          .recompute = {MK_RECOMPUTE_FULL, 0}, .grad_buckets = 2, .tied = 1};
    mk_sched_t *s = mk_sched_build(&sp);
    mk_sched_report_t rep;
    CHECK(s && mk_sched_verify(s, &rep) == 0, "zb-h1 tied verify: %s", mk_error_last());
    const mk_stream_t *s0 = &s->streams[0];
    CHECK(s0->v[0].op == MK_INSTR_LOAD && s0->v[1].op == MK_INSTR_F && s0->v[2].op == MK_INSTR_SEND_ACT,
          "stage 0 starts LOAD F SEND_ACT");
    CHECK(s0->v[s0->n - 1].op == MK_INSTR_OPT_STEP && s0->v[s0->n - 2].op == MK_INSTR_REDUCE_GRADS &&
          s0->v[s0->n - 4].op == MK_INSTR_REDUCE_TIED, "stage 0 tail");
    CHECK(s->streams[1].v[s->streams[1].n - 3].op != MK_INSTR_REDUCE_TIED, "no tied on stage 1");
    free(rep.max_inflight);
    /* Break it: drop stage 1's first RECV_ACT -> the verifier must say so. */
    mk_stream_t *s1 = &s->streams[1];
    memmove(s1->v, s1->v + 1, (size_t)(s1->n - 1) * sizeof *s1->v);
    s1->n--;
    CHECK(mk_sched_verify(s, &rep) < 0, "verifier accepts a missing RECV_ACT");
    mk_sched_free(s);
}

/* The chunks a schedule runs with in these loops (layers[8] holds p x v
 * counts): interleaved 2 up to p 4, looped-bfs, zb-v and dualpipev 2 (they
 * need them) up to p 4 and -1 (skip) above, else 1. */
static int test_vpp(int k, int p)
{
    if (mk_sched_traits(k)->min_vpp > 1) return p <= 4 ? 2 : -1;
    return k == MK_SCHED_INTERLEAVED && p <= 4 ? 2 : 1;
}

/* Stage-aware and explicit counts through every schedule still verify. */
static void test_policies(void)
{
    int layers[8] = {4, 4, 4, 4, 4, 4, 4, 4}, ck[8] = {4, 3, 2, 1, 0, 0, 1, 2};
    for (int k = 0; k < MK_SCHED_COUNT; k++)
        for (int p = 1; p <= 8; p++)
            for (int m = p; m <= 2 * p; m += p) {
                int v = test_vpp(k, p);
                if (v < 0 || m < mk_sched_traits(k)->min_m_per_pp * p) continue;
                mk_sched_spec_t sp = {.kind = k, .pp = p, .m = m, .vpp = v,
                                      .recompute = {MK_RECOMPUTE_STAGE_AWARE, 0.5},
                                      .layers = layers, .grad_buckets = 3, .tied = 1};
                for (int e = 0; e < 2; e++) {
                    if (e) sp.recompute.kind = MK_RECOMPUTE_EXPLICIT, sp.ckpt = ck;
                    mk_sched_t *s = mk_sched_build(&sp);
                    mk_sched_report_t rep = {0};
                    CHECK(s && mk_sched_verify(s, &rep) == 0, "%s p=%d m=%d %s: %s",
                          mk_sched_kind_name(k), p, m, e ? "explicit" : "stage-aware", mk_error_last());
                    free(rep.max_inflight);
                    mk_sched_free(s);
                }
            }
}

static int same_streams(const mk_sched_t *a, const mk_sched_t *b)
{
    if (a->spec.pp != b->spec.pp || memcmp(a->ckpt, b->ckpt, (size_t)a->n_vstages * sizeof *a->ckpt)) return 0;
    for (int st = 0; st < a->spec.pp; st++)
        if (a->streams[st].n != b->streams[st].n ||
            memcmp(a->streams[st].v, b->streams[st].v, (size_t)a->streams[st].n * sizeof *a->streams[st].v))
            return 0;
    return 1;
}

/* mk_sched_ckpt_counts gives the build's counts (merak's adjustments
 * included) without streams, and a build from a pool that earlier builds
 * of other shapes filled gives the streams of a fresh build. */
static void test_counts_and_pool(void)
{
    int layers[8] = {4, 4, 4, 4, 4, 4, 4, 4};
    mk_recompute_kind_t rks[] = {MK_RECOMPUTE_NONE, MK_RECOMPUTE_FULL, MK_RECOMPUTE_STAGE_AWARE};
    mk_sched_pool_t pool = {0};
    for (int k = 0; k < MK_SCHED_COUNT; k++)
        for (int p = 1; p <= 8; p++)
            for (int r = 0; r < 3; r++) {
                int v = test_vpp(k, p), ck[8] = {-1};
                if (v < 0) continue;
                mk_sched_spec_t sp = {.kind = k, .pp = p, .m = 2 * p, .vpp = v, .recompute = {rks[r], 0.5},
                                      .layers = layers, .grad_buckets = 2, .tied = 1};
                mk_sched_t *s = mk_sched_build(&sp), *q = mk_sched_build_pooled(&sp, &pool);
                CHECK(s && q && mk_sched_ckpt_counts(&sp, ck) == 0, "%s p=%d: %s", mk_sched_kind_name(k), p,
                      mk_error_last());
                if (!s || !q) exit(1);
                CHECK(!memcmp(ck, s->ckpt, (size_t)s->n_vstages * sizeof *ck), "%s p=%d r=%d: counts differ",
                      mk_sched_kind_name(k), p, r);
                CHECK(same_streams(s, q), "%s p=%d r=%d: pooled streams differ", mk_sched_kind_name(k), p, r);
                mk_sched_free(s);
                mk_sched_recycle(q, &pool);
            }
    CHECK(pool.n > 0, "the pool kept no buffer");
    mk_sched_spec_t bad = {.kind = MK_SCHED_INTERLEAVED, .pp = 4, .m = 6, .vpp = 2};
    int ck[8];
    CHECK(mk_sched_ckpt_counts(&bad, ck) < 0 && strstr(mk_error_last(), "multiple"), "bad spec: %s",
          mk_error_last());
    mk_sched_pool_free(&pool);
}

int main(void)
{
    test_policies();
    test_counts_and_pool();
    test_golden();
    test_stage_ratio();
    test_errors();
    test_tail_and_p2p();
    CHECK_DONE();
}
