/* Context parallelism in the simulator and the planner (issue 18) against
 * closed forms: a CP rank's activations and p2p tensors are 1/cp, its
 * work (attention included) 1/cp under `ideal`, the K/V ring moves
 * 2 b (s/cp) kv_width dtype bytes per forward step and twice that per
 * backward step, cp-1 steps per attention layer; gradients are reduced
 * over dp x cp; the planner picks cp > 1 for a sequence that does not fit
 * without it. */
#include "config.h"
#include "merak/cost.h"
#include "merak/partition.h"
#include "merak/planner.h"
#include "merak/sim.h"
#include "tests/check.h"

#include <string.h>

static mk_sim_result_t res;

static mk_graph_t *setup(int cp, int tp, int pp, int mbs, int m, const char *rc, mk_plan_t *p)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    mk_plan_init(p);
    if (mk_model_resolve("gpt-tiny", &ov, &p->model) < 0) return NULL;
    p->cp = cp, p->tp = tp, p->pp = pp, p->mbs = mbs, p->gbs = mbs * m;
    p->attention = MK_ATTN_FLASH; /* CP's core is fused (plan.c check_cp_comm); cp 1 alike, to compare */
    if (mk_recompute_parse(rc, &p->recompute) < 0) return NULL;
    mk_graph_t *g = mk_plan_graph(p);
    if (g && (mk_plan_partition_uniform(p, g) < 0 || mk_plan_check(p, g) < 0)) {
        fprintf(stderr, "setup: %s\n", mk_error_last());
        mk_graph_free(g);
        return NULL;
    }
    return g;
}

static int run_on(const mk_cluster_t *c, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_sim_t *s = mk_sim_new(c);
    mk_plan_resolve_opts_t ro = {.cluster = c, .graph = g, .resolve_auto = mk_sim_auto};
    mk_plan_ctx_t ctx;
    int rc = mk_plan_resolve(&ctx, p, &ro);
    if (rc == 0) rc = mk_sim_run(s, &ctx, NULL, &res);
    mk_plan_ctx_free(&ctx);
    mk_sim_free(s);
    if (rc < 0) fprintf(stderr, "sim: %s\n", mk_error_last());
    return rc;
}

static int run(const char *cluster, const mk_plan_t *p, const mk_graph_t *g)
{
    mk_cluster_t c;
    return mk_cluster_get(cluster, &c) < 0 ? -1 : run_on(&c, p, g);
}

/* Activations, working set and p2p buffers 1/cp; two K/V blocks added. */
static void test_memory(void)
{
    const char *rcs[] = {"none", "full", "selective"};
    for (int t = 1; t <= 2; t++)
        for (int i = 0; i < 3; i++) {
            mk_plan_t p1, p2;
            mk_graph_t *g1 = setup(1, t, 4, 2, 8, rcs[i], &p1), *g2 = setup(2, t, 4, 2, 8, rcs[i], &p2);
            CHECK(g1 && g2, "setup");
            if (!g1 || !g2) continue;
            CHECK(run("dgx-a100", &p1, g1) == 0, "run cp 1");
            mk_mem_breakdown_t a = res.mem[1];
            CHECK(run("dgx-a100", &p2, g2) == 0, "run cp 2");
            const mk_mem_breakdown_t *b = &res.mem[1];
            char w[96];
            snprintf(w, sizeof w, "tp %d %s", t, rcs[i]);
            CHECK_REL(b->activations, a.activations / 2, 1e-12, w);
            CHECK_REL(b->working, a.working / 2, 1e-12, w);
            CHECK_REL(b->weights, a.weights, 1e-12, w);
            CHECK_REL(b->optimizer, a.optimizer, 1e-12, w);
            /* K and V of b x s/cp tokens, h/t wide (MHA), bf16; two in flight */
            double blk = 2.0 * 2 * (64 / 2) * (64.0 / t) * 2;
            CHECK_REL(b->buffers, a.buffers / 2 + 2 * blk, 1e-12, w);
            mk_cluster_t c;
            mk_cluster_get("dgx-a100", &c);
            mk_mem_breakdown_t cf;
            CHECK(mk_sim_stage_memory(&c, &p2, g2, 1, NULL, -1, NULL, &cf) == 0, "closed form");
            CHECK_REL(cf.total, res.peak_memory_bytes[1], 0.01, w);
            mk_graph_free(g1), mk_graph_free(g2);
        }
}

/* Under `ideal` only matmuls cost and every op of a CP rank (the attention
 * cores' FLOPs too) is 1/cp of the sequence's: the step is 1/cp. */
static void test_ideal_work(void)
{
    const char *rcs[] = {"none", "full", "selective"};
    for (int cp = 2; cp <= 4; cp *= 2)
        for (int i = 0; i < 3; i++) {
            mk_plan_t p1, p2;
            mk_graph_t *g1 = setup(1, 2, 2, 1, 8, rcs[i], &p1), *g2 = setup(cp, 2, 2, 1, 8, rcs[i], &p2);
            CHECK(g1 && g2, "setup");
            if (!g1 || !g2) continue;
            CHECK(run("ideal", &p1, g1) == 0, "ideal cp 1");
            double t1 = res.step_time_s;
            CHECK(run("ideal", &p2, g2) == 0, "ideal cp");
            char w[64];
            snprintf(w, sizeof w, "ideal step cp %d %s", cp, rcs[i]);
            CHECK_REL(res.step_time_s, t1 / cp, 1e-12, w);
            CHECK(res.exposed_comm_s[MK_COMM_CP] == 0 && res.overlapped_comm_s[MK_COMM_CP] == 0, "ideal ring free");
            mk_graph_free(g1), mk_graph_free(g2);
        }
}

static int attention_layers(const mk_graph_t *g)
{
    int n = 0;
    for (int l = 0; l < g->n_layers; l++)
        for (int i = g->layers[l].first_op; i < g->layers[l].first_op + g->layers[l].n_ops; i++)
            n += g->ops[i].kind == MK_OPK_ATTENTION;
    return n;
}

/* The ring's time: per micro-batch and attention layer, cp-1 steps of one
 * K/V block forward (and in a recompute), of K, V, dK, dV backward. */
static void test_ring_bytes(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    for (int cp = 2; cp <= 4; cp *= 2)
        for (int full = 0; full <= 1; full++) {
            mk_plan_t p;
            int m = 4, b = 2;
            mk_graph_t *g = setup(cp, 1, 1, b, m, full ? "full" : "none", &p);
            CHECK(g != NULL, "setup");
            if (!g) continue;
            CHECK(run_on(&c, &p, g) == 0, "run");
            double blk = 2.0 * b * (64.0 / cp) * 64 * 2; /* K and V, bf16 */
            double fwd = mk_cost_p2p(&c, 0, 1, blk), bwd = mk_cost_p2p(&c, 0, 1, 2 * blk);
            double want = (double)m * attention_layers(g) * (cp - 1) * ((1 + full) * fwd + bwd);
            char w[64];
            snprintf(w, sizeof w, "ring time cp %d recompute %s", cp, full ? "full" : "none");
            CHECK_REL(res.exposed_comm_s[MK_COMM_CP] + res.overlapped_comm_s[MK_COMM_CP], want, 1e-9, w);
            double fast = res.step_time_s, hidden = res.exposed_comm_s[MK_COMM_CP], dp = res.exposed_comm_s[MK_COMM_DP];
            /* a slow link: the transfers outlast their blocks' attention */
            mk_cluster_t slow = c;
            slow.intra.beta_Bps = 1e6;
            CHECK(run_on(&slow, &p, g) == 0, "run slow");
            CHECK(res.exposed_comm_s[MK_COMM_CP] > hidden && res.step_time_s > fast, "slow ring exposed");
            /* one stage: the step grows by the exposed ring and gradient
               reduction (dp x cp = 2 ranks on the same slow link) */
            double grow = res.exposed_comm_s[MK_COMM_CP] - hidden + res.exposed_comm_s[MK_COMM_DP] - dp;
            CHECK_REL(res.step_time_s - fast, grow, 1e-6, "exposure is the step's growth");
            mk_graph_free(g);
        }
}

/* --cp-comm-type (Transformer Engine's other kernels), neither hidden:
 * allgather moves, per micro-batch and attention layer, an all-gather of
 * the sequence's K/V (cp blocks) forward (and in a recompute), an
 * all-gather and a reduce-scatter of dK/dV backward; a2a an all-to-all of
 * the rank's Q|K|V and one of its output each way (gpt-tiny: Q as wide as
 * K).  All of it is exposed: the step is the ring's (hidden here) plus
 * it; the buffers hold 2 cp blocks (allgather) or Q, K, V and the output
 * (a2a) where the ring holds 2 blocks.  Run refuses both. */
static void test_collectives(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    for (int cp = 2; cp <= 4; cp *= 2)
        for (int full = 0; full <= 1; full++) {
            mk_plan_t p;
            int m = 4, b = 2, dp = 2;
            mk_graph_t *g = setup(cp, 1, 1, b, m, full ? "full" : "none", &p);
            CHECK(g != NULL, "setup");
            if (!g) continue;
            p.dp = dp, p.gbs = dp * b * m;
            CHECK(run_on(&c, &p, g) == 0, "run ring");
            double ring_step = res.step_time_s, ring_buf = res.mem[0].buffers;
            CHECK(res.exposed_comm_s[MK_COMM_CP] == 0, "the ring hidden here");
            mk_group_t cg = mk_group_make(&c, 0, 1, cp, dp * cp < c.gpus_per_node ? dp * cp : c.gpus_per_node);
            double blk = 2.0 * b * (64.0 / cp) * 64 * 2, n = (double)m * attention_layers(g), q = blk / 2;
            double ag = mk_cost_coll(&c, MK_COLL_ALLGATHER, &cg, cp * blk);
            double rs = mk_cost_coll(&c, MK_COLL_REDUCE_SCATTER, &cg, cp * blk);
            double a2a = mk_cost_coll(&c, MK_COLL_ALLTOALL, &cg, q + blk) + mk_cost_coll(&c, MK_COLL_ALLTOALL, &cg, q);
            double want[3] = {0, n * ((1 + full) * ag + ag + rs), n * (2 + full) * a2a};
            double buf[3] = {0, 2.0 * cp * blk - 2 * blk, blk + 2 * q - 2 * blk};
            for (int k = MK_CP_COMM_ALLGATHER; k <= MK_CP_COMM_A2A; k++) {
                char w[80];
                p.cp_comm = (mk_cp_comm_t)k;
                CHECK(run_on(&c, &p, g) == 0, "run %s", mk_cp_comm_name(p.cp_comm));
                snprintf(w, sizeof w, "%s cp %d recompute %s", mk_cp_comm_name(p.cp_comm), cp, full ? "full" : "none");
                CHECK_REL(res.exposed_comm_s[MK_COMM_CP], want[k], 1e-9, w);
                CHECK(res.overlapped_comm_s[MK_COMM_CP] == 0, "%s: nothing hidden", w);
                CHECK_REL(res.step_time_s - ring_step, want[k], 1e-6, w);
                CHECK_REL(res.mem[0].buffers - ring_buf, buf[k], 1e-9, w);
            }
            mk_graph_free(g);
        }
    /* a2a splits each TP rank's heads (gpt-tiny: 4) over cp */
    mk_plan_t p;
    mk_graph_t *g = setup(8, 1, 1, 1, 2, "none", &p);
    if (g) {
        p.cp_comm = MK_CP_COMM_A2A;
        CHECK(mk_plan_check(&p, g) < 0 && strstr(mk_error_last(), "heads"), "a2a over cp 8 of 4 heads refused");
        p.cp_comm = MK_CP_COMM_ALLGATHER;
        CHECK(mk_plan_check(&p, g) == 0, "allgather at cp 8");
        mk_graph_free(g);
    }
}

/* tp 4 x cp 4 = 16 ranks > a node's 8: the ring crosses nodes, rank i's
 * CP neighbours 4 apart, 2 of a ring per node, 4 rings sharing its NICs. */
static void test_ring_inter(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    mk_plan_t p;
    int m = 2, b = 1, cp = 4, t = 4;
    mk_graph_t *g = setup(cp, t, 1, b, m, "none", &p);
    CHECK(g != NULL, "setup");
    if (!g) return;
    CHECK(run_on(&c, &p, g) == 0, "run");
    double blk = 2.0 * b * (64.0 / cp) * (64.0 / t) * 2;
    double want = (double)m * attention_layers(g) * (cp - 1) * (mk_cost_p2p(&c, 1, 4, blk) + mk_cost_p2p(&c, 1, 4, 2 * blk));
    CHECK_REL(res.exposed_comm_s[MK_COMM_CP] + res.overlapped_comm_s[MK_COMM_CP], want, 1e-9, "inter-node ring");
    mk_graph_free(g);
}

/* Gradients are reduced over dp x cp: dp 1, cp 2 reduces, ZeRO shards by 2. */
static void test_grad_group(void)
{
    mk_plan_t p;
    mk_graph_t *g = setup(2, 1, 2, 1, 8, "full", &p);
    CHECK(g != NULL, "setup");
    if (!g) return;
    CHECK(run("dgx-a100", &p, g) == 0, "run");
    CHECK(res.exposed_comm_s[MK_COMM_DP] + res.overlapped_comm_s[MK_COMM_DP] > 0, "dp 1 x cp 2 reduces gradients");
    p.zero = 1;
    CHECK(run("dgx-a100", &p, g) == 0, "run zero");
    CHECK(res.zero == 1 && res.zero_group == 2, "ZeRO-1 over dp x cp = 2 (got %d over %d)", res.zero, res.zero_group);
    CHECK_REL(res.mem[0].optimizer, 6 * res.mem[0].weights / 2, 1e-12, "ZeRO-1 optimizer / (dp cp)");
    mk_graph_free(g);
}

/* llama-3-8b at 64K tokens on 16 H100s: the attention's working set alone
 * outgrows a GPU at cp 1 (merak sim: 103 GiB at dp 2, tp 8); the planner
 * must split the sequence.  A short sequence never gets CP. */
static void test_planner(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-h100", &c);
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    ov.seq = 65536;
    mk_model_config_t m;
    CHECK(mk_model_resolve("llama-3-8b", &ov, &m) == 0, "model");
    mk_planner_opts_t o;
    mk_planner_opts_init(&o);
    o.gpus = 16, o.gbs = 8, o.top = 3;
    mk_planner_result_t r;
    CHECK(mk_planner_search(&m, &c, &o, &r) == 0, "search: %s", mk_error_last());
    CHECK(r.n > 0, "a plan fits");
    for (int i = 0; i < r.n; i++) {
        const mk_plan_t *p = &r.best[i].plan;
        CHECK(p->cp > 1 && 65536 % (2 * p->cp) == 0, "plan %d has cp %d", i, p->cp);
        CHECK(mk_plan_gpus(p) == 16, "plan %d: %lld GPUs", i, (long long)mk_plan_gpus(p));
    }
    CHECK(r.bound_violations == 0, "bound violations %ld", r.bound_violations);
    mk_planner_result_free(&r);
    mk_model_overrides_init(&ov);
    CHECK(mk_model_resolve("gpt-tiny", &ov, &m) == 0, "gpt-tiny");
    o.gpus = 4, o.gbs = 8, o.exhaustive = 1, o.top = 1000;
    CHECK(mk_planner_search(&m, &c, &o, &r) == 0, "search tiny");
    for (int i = 0; i < r.n; i++) CHECK(r.best[i].plan.cp == 1, "seq 64: cp %d searched", r.best[i].plan.cp);
    mk_planner_result_free(&r);
}

int main(void)
{
    test_memory();
    test_ideal_work();
    test_ring_bytes();
    test_ring_inter();
    test_collectives();
    test_grad_group();
    test_planner();
    CHECK_DONE();
}
