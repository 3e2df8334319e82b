/* Simulator tests: exact pipeline invariants under `ideal`, the scheduler's
 * unit-cost makespans, collective formulas, and the memory breakdown
 * against closed forms (sim/README.md "Cost model", "Memory"). */
#include "config.h"
#include "merak/cost.h"
#include "merak/partition.h"
#include "merak/sim.h"
#include "merak/sim_search.h"
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char stack_path[1024];

static mk_graph_t *setup(const char *model, int dp, int pp, int tp, int vpp, int mbs, int gbs, mk_sched_kind_t k,
                         const char *rc, mk_plan_t *p)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    mk_plan_init(p);
    if (mk_model_resolve(model, &ov, &p->model) < 0) return NULL;
    p->dp = dp, p->pp = pp, p->tp = tp, p->vpp = vpp, p->mbs = mbs, p->gbs = gbs, p->schedule = k;
    p->dtype = MK_DTYPE_BF16;
    if (mk_recompute_parse(rc, &p->recompute) < 0) return NULL;
    mk_graph_t *g = mk_plan_graph(p);
    if (!g) return NULL;
    if (mk_plan_partition_uniform(p, g) < 0 || mk_plan_check(p, g) < 0) {
        mk_graph_free(g);
        return NULL;
    }
    return g;
}

static mk_sim_result_t res;
static double run_bucket_bytes; /* run_on's DP bucket size (0: the default) */

static int run_on(const mk_cluster_t *cl, const mk_plan_t *p, const mk_graph_t *g, int unit)
{
    mk_cluster_t c = *cl;
    mk_sim_t *s = mk_sim_new(&c);
    mk_sim_opts_t o;
    mk_sim_opts_init(&o);
    o.unit_costs = unit;
    o.bucket_bytes = run_bucket_bytes;
    mk_plan_resolve_opts_t ro = {.cluster = &c, .graph = g, .resolve_auto = mk_sim_auto};
    mk_plan_ctx_t ctx;
    int rc = mk_plan_resolve(&ctx, p, &ro);
    if (rc == 0) rc = mk_sim_run(s, &ctx, &o, &res);
    mk_plan_ctx_free(&ctx);
    mk_sim_free(s);
    if (rc < 0) fprintf(stderr, "sim: %s\n", mk_error_last());
    return rc;
}

static int run(const char *cluster, const mk_plan_t *p, const mk_graph_t *g, int unit)
{
    mk_cluster_t c;
    return mk_cluster_get(cluster, &c) < 0 ? -1 : run_on(&c, p, g, unit);
}

static void test_pipeline_invariants(void)
{
    mk_plan_t p;
    for (int sched = 0; sched < 2; sched++) {
        mk_sched_kind_t k = sched ? MK_SCHED_GPIPE : MK_SCHED_1F1B;
        for (int pp = 1; pp <= 8; pp *= 2)
            for (int m = 1; m <= 16; m += 5) {
                mk_graph_t *g = setup(stack_path, 1, pp, 1, 1, 1, m, k, "none", &p);
                CHECK(g != NULL, "setup: %s", mk_error_last());
                if (!g) continue;
                double per = 0;
                for (int l = 0; l < g->n_layers; l++) per += g->layers[l].fwd_flops + g->layers[l].bwd_flops;
                double tfb = per / pp / 1e12; /* ideal: 1 TFLOP/s, efficiency 1 */
                CHECK(run("ideal", &p, g, 0) == 0, "run");
                char what[96];
                snprintf(what, sizeof what, "%s p %d m %d step", sched ? "gpipe" : "1f1b", pp, m);
                CHECK_REL(res.step_time_s, (m + pp - 1) * tfb, 1e-9, what);
                for (int s = 0; s < pp; s++) {
                    snprintf(what, sizeof what, "%s p %d m %d bubble %d", sched ? "gpipe" : "1f1b", pp, m, s);
                    double want = (double)(pp - 1) / (m + pp - 1);
                    if (pp == 1) CHECK(fabs(res.bubble_fraction[s]) < 1e-9, "%s", what);
                    else CHECK_REL(res.bubble_fraction[s], want, 1e-9, what);
                }
                mk_graph_free(g);
            }
    }
    /* interleaved: bubble relative to ideal (p-1)/(v m) */
    int cases[][3] = {{2, 2, 4}, {2, 4, 8}, {4, 2, 8}};
    for (int i = 0; i < 3; i++) {
        int pp = cases[i][0], v = cases[i][1], m = cases[i][2];
        mk_graph_t *g = setup(stack_path, 1, pp, 1, v, 1, m, MK_SCHED_INTERLEAVED, "none", &p);
        CHECK(g != NULL, "setup interleaved: %s", mk_error_last());
        if (!g) continue;
        double per = 0;
        for (int l = 0; l < g->n_layers; l++) per += g->layers[l].fwd_flops + g->layers[l].bwd_flops;
        double ideal = m * per / pp / 1e12;
        CHECK(run("ideal", &p, g, 0) == 0, "run interleaved");
        char what[96];
        snprintf(what, sizeof what, "interleaved p %d v %d m %d bubble/ideal", pp, v, m);
        CHECK_REL((res.step_time_s - ideal) / ideal, (double)(pp - 1) / (v * m), 1e-9, what);
        mk_graph_free(g);
    }
}

static void test_unit_costs(void)
{
    struct { mk_sched_kind_t k; double want; } cases[] = {
        {MK_SCHED_1F1B, 44}, {MK_SCHED_MERAK_PRE, 41}, {MK_SCHED_MERAK_LAST, 39}, {MK_SCHED_MERAK, 38}};
    for (int i = 0; i < 4; i++) {
        mk_plan_t p;
        mk_graph_t *g = setup(stack_path, 1, 4, 1, 1, 1, 8, cases[i].k, "full", &p);
        CHECK(g != NULL, "setup");
        if (!g) continue;
        CHECK(run("ideal", &p, g, 1) == 0, "run");
        char what[64];
        snprintf(what, sizeof what, "unit-cost makespan %s", mk_sched_kind_name(cases[i].k));
        CHECK_REL(res.step_time_s, cases[i].want, 1e-12, what);
        mk_graph_free(g);
    }
}

static void test_collectives(void)
{
    mk_cluster_t c;
    mk_cluster_get("rtx3090-pcie", &c);
    double S = 256e6;
    mk_group_t g = mk_group_make(&c, 0, 1, 8, 8);
    CHECK(g.per_node == 8, "one node group");
    double a = c.intra.alpha_s, b = c.intra.beta_Bps;
    /* 256 MB in one node: the ring (bandwidth term 2(n-1)/n S/b) beats the
       tree (2 S/b); a reduce-scatter has only the ring */
    CHECK_REL(mk_cost_coll(&c, MK_COLL_ALLREDUCE, &g, S), 2 * 7 * a + 2.0 * 7 / 8 * S / b, 1e-12,
              "ring all-reduce");
    CHECK_REL(mk_cost_coll(&c, MK_COLL_REDUCE_SCATTER, &g, S), 7 * a + 7.0 / 8 * S / b, 1e-12,
              "ring reduce-scatter");
    /* 8 bytes inside one node: NCCL's tree is a chain there (its latency 2 (n - 1) steps,
       tuning.cc), so the ring's 14 alpha; across 8 nodes, one rank each, the tree's
       2 log2(8) alpha beats the ring's 14 */
    CHECK_REL(mk_cost_coll(&c, MK_COLL_ALLREDUCE, &g, 8), fmax(2 * 7 * a + 2.0 * 7 / 8 * 8 / b, c.dev.host_op_s),
              1e-12, "one node: the ring all-reduce, latency-bound too");
    mk_group_t across = mk_group_make(&c, 0, 8, 8, 1);
    CHECK(across.per_node == 1, "one rank a node");
    CHECK_REL(mk_cost_coll(&c, MK_COLL_ALLREDUCE, &across, 8),
              fmax(2 * 3 * c.inter.alpha_s + 2.0 * 8 / c.inter.beta_Bps, c.dev.host_op_s), 1e-12,
              "tree all-reduce across nodes");
    /* hierarchical: 32 ranks, 8 per node over 4 nodes, one NIC shared by 8 */
    mk_group_t h = mk_group_make(&c, 0, 1, 32, 8);
    CHECK(h.per_node == 8 && h.sharers == 8, "hier group %d %d", h.per_node, h.sharers);
    double ae = c.inter.alpha_s, be = c.inter.beta_Bps * 1.0 / 8;
    double want = 2 * (7 * a + 7.0 / 8 * S / b) + 2 * 3 * ae + 2.0 * 3 / 4 * (S / 8) / be;
    CHECK_REL(mk_cost_coll(&c, MK_COLL_ALLREDUCE, &h, S), want, 1e-12, "hierarchical all-reduce");
    /* its all-gather: NCCL's one flat ring, 31 steps, 3 across nodes
       (tuning.cc), not the two phases' 7 + 3 */
    want = (32 - 4) * a + 3 * ae + 7.0 / 8 * S / b + 3.0 / 4 * (S / 8) / be;
    CHECK_REL(mk_cost_coll(&c, MK_COLL_ALLGATHER, &h, S), want, 1e-12, "all-gather across nodes");
    /* the members on the first one's node, counted by walking them (the
       closed form in mk_group_make must agree) */
    for (int first = 0; first < 20; first += 3)
        for (int stride = 1; stride < 12; stride++)
            for (int n = 1; n < 40; n += 5) {
                int per = 0;
                for (int i = 0; i < n; i++) per += (first + stride * i) / 8 == first / 8;
                mk_group_t q = mk_group_make(&c, first, stride, n, 1);
                CHECK(q.per_node == per, "group (%d, %d, %d) per node %d, want %d", first, stride, n, q.per_node,
                      per);
            }
    /* ideal: free */
    mk_cluster_get("ideal", &c);
    CHECK(mk_cost_coll(&c, MK_COLL_ALLREDUCE, &g, S) == 0, "ideal collectives are free");
    CHECK(mk_cost_p2p(&c, 1, 8, S) == 0, "ideal p2p is free");
}

/* gpt-tiny (4 blocks, h 64, a 4, s 64), pp 4: stage 1 holds exactly one block. */
static void test_memory(void)
{
    const double s = 64, h = 64, a = 4;
    struct { int tp, sp, gpipe; const char *rc; } cases[] = {
        {1, 0, 0, "none"}, {1, 0, 0, "full"}, {2, 0, 0, "none"}, {2, 0, 0, "full"}, {2, 0, 0, "selective"},
        {2, 1, 0, "none"}, {2, 1, 0, "full"}, {4, 1, 0, "selective"}, {1, 0, 1, "none"}, {2, 0, 1, "full"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int t = cases[i].tp, sp = cases[i].sp, b = 2, m = 8, pp = 4;
        mk_plan_t p;
        mk_graph_t *g = setup("gpt-tiny", 1, pp, t, 1, b, b * m, cases[i].gpipe ? MK_SCHED_GPIPE : MK_SCHED_1F1B,
                              cases[i].rc, &p);
        CHECK(g != NULL, "setup");
        if (!g) continue;
        p.seqpar = sp;
        CHECK(run("dgx-a100", &p, g, 0) == 0, "run");
        const mk_mem_breakdown_t *M = &res.mem[1];
        double P = 12 * h * h / t + 7 * h / t + 6 * h;
        double sbh = s * b * h, act;
        int full = !strcmp(cases[i].rc, "full"), sel = !strcmp(cases[i].rc, "selective");
        double tsp = sp ? t : 1;
        /* full: the block keeps its input, 2sbh (Korthikanti et al. 2022, sec. 5) */
        if (full) act = 2 * sbh / tsp;
        else if (sp && sel) act = 34 * sbh / t;
        else if (sp) act = sbh / t * (34 + 5 * a * s / h);
        else if (sel) act = sbh * (10 + 24.0 / t);
        else act = sbh * (10 + 24.0 / t + 5 * a * s / (h * t));
        int inflight = cases[i].gpipe ? m : pp - 1;
        char what[128];
#define MEMCHK(got, want, name)                                                                    \
    snprintf(what, sizeof what, "%s tp %d sp %d %s %s", name, t, sp, cases[i].rc, cases[i].gpipe ? "gpipe" : "1f1b"); \
    CHECK_REL(got, want, 0.01, what)
        MEMCHK(M->weights, 2 * P, "weights");
        MEMCHK(M->grads, 4 * P, "grads"); /* fp32: a bf16 plan's (Megatron-LM forces it) */
        MEMCHK(M->optimizer, 12 * P, "optimizer");
        MEMCHK(M->activations, inflight * act, "activations");
        /* backward gradients: the layer's arriving and leaving ones (2sbh
         * each) and the largest op pair: the attention core's (out 2sbh,
         * in q|k|v 6sbh, scores 2as^2b) or the GELU's (8sbh each), /t */
        double core = 8 * sbh + 2 * a * s * s * b, gelu = 16 * sbh;
        double gbuf = 2 * 2 * sbh / tsp + (core > gelu ? core : gelu) / t;
        double wmax = 0;
        if (full) /* the block's attention and MLP rebuilt at once, less its stored input */
            wmax = mk_layer_act_bytes(g, p.bounds[1], t, sp, 0) + mk_layer_act_bytes(g, p.bounds[1] + 1, t, sp, 0) -
                   2 * sbh / tsp;
        MEMCHK(M->working, wmax + gbuf, "working set");
        /* p2p: activation sent and gradient received at the output, gradient sent at the input */
        MEMCHK(M->buffers, 3 * 2 * sbh / tsp, "p2p buffers");
        MEMCHK(res.peak_memory_bytes[1], 18 * P + inflight * act + wmax + gbuf + 6 * sbh / tsp, "peak");
        /* the closed-form function agrees with the tracker */
        mk_cluster_t c;
        mk_cluster_get("dgx-a100", &c);
        mk_mem_breakdown_t cf;
        CHECK(mk_sim_stage_memory(&c, &p, g, 1, NULL, -1, NULL, &cf) == 0, "stage memory");
        MEMCHK(cf.total, res.peak_memory_bytes[1], "closed form = tracker");
        mk_graph_free(g);
    }
    /* ZeRO-1 divides the 12 optimizer bytes by d; fp32 grads: 18 bytes */
    mk_plan_t p;
    mk_graph_t *g = setup("gpt-tiny", 4, 2, 1, 1, 1, 64, MK_SCHED_1F1B, "full", &p);
    CHECK(g != NULL, "setup zero");
    if (g) {
        p.zero = 1;
        CHECK(run("dgx-a100", &p, g, 0) == 0, "run zero");
        CHECK_REL(res.mem[0].optimizer, 6 * res.mem[0].weights / 4, 1e-9, "ZeRO-1 optimizer / d");
        mk_graph_free(g);
    }
}

static void test_cluster_json(void)
{
    mk_cluster_t c, d;
    mk_cluster_get("dgx-a100", &c);
    char path[] = "/tmp/mk_test_cluster_XXXXXX.json";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps");
    close(fd);
    CHECK(mk_cluster_save(&c, path) == 0, "save: %s", mk_error_last());
    CHECK(mk_cluster_get(path, &d) == 0, "load: %s", mk_error_last());
    CHECK(!strcmp(d.name, c.name) && d.dev.mem_bytes == c.dev.mem_bytes && d.inter.beta_Bps == c.inter.beta_Bps &&
              d.gpus_per_node == c.gpus_per_node && d.dev.matmul_flops[2] == c.dev.matmul_flops[2],
          "round trip");
    /* a Hopper preset's optional figures survive too (fp8 rate, split accumulation) */
    mk_cluster_get("dgx-h100", &c);
    CHECK(mk_cluster_save(&c, path) == 0 && mk_cluster_get(path, &d) == 0, "h100 round trip: %s", mk_error_last());
    CHECK(c.dev.fp8_split_acc_scale > 1 && d.dev.fp8_split_acc_scale == c.dev.fp8_split_acc_scale &&
              d.dev.matmul_flops[MK_DTYPE_FP8] == c.dev.matmul_flops[MK_DTYPE_FP8] &&
              d.dev.flash_attn_flops == c.dev.flash_attn_flops && d.dev.flash_attn_bwd_flops == c.dev.flash_attn_bwd_flops,
          "h100 round trip keeps fp8_split_acc_scale %g and the fused kernel's rates", d.dev.fp8_split_acc_scale);
    CHECK(d.dev.coll_sms == 16 && d.dev.sms == 132, "h100 round trip keeps coll_sms (%d)", d.dev.coll_sms);
    c.dev.coll_sms = c.dev.sms; /* the collective would hold every SM */
    CHECK(mk_cluster_save(&c, path) == 0 && mk_cluster_get(path, &d) < 0 && strstr(mk_error_last(), "coll_sms"),
          "coll_sms >= sms rejected: %s", mk_error_last());
    FILE *f = fopen(path, "w");
    fputs("{\"name\": \"x\", \"gpus_per_node\": 0}", f);
    fclose(f);
    CHECK(mk_cluster_get(path, &d) < 0, "malformed cluster rejected");
    unlink(path);
}

/* Streams given by the caller (opts.sched): the same result as built ones;
 * a SEND taken out leaves its receiver waiting (the walker-driven engine
 * reports the deadlock); streams of another plan are refused. */
static void test_given_streams(void)
{
    mk_plan_t p;
    mk_graph_t *g = setup(stack_path, 1, 4, 1, 1, 1, 8, MK_SCHED_1F1B, "full", &p);
    CHECK(g != NULL, "setup");
    if (!g) return;
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    mk_sim_t *s = mk_sim_new(&c);
    mk_sim_opts_t o;
    mk_sim_opts_init(&o);
    mk_sim_result_t built, given;
    mk_plan_resolve_opts_t ro = {.cluster = &c, .graph = g, .resolve_auto = mk_sim_auto};
    mk_plan_ctx_t ctx, other;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0, "resolve: %s", mk_error_last());
    CHECK(mk_sim_run(s, &ctx, &o, &built) == 0, "built streams: %s", mk_error_last());
    mk_sched_t *sch = mk_sched_build(&ctx.spec);
    CHECK(sch != NULL, "mk_sched_build");
    if (sch) {
        o.sched = sch;
        CHECK(mk_sim_run(s, &ctx, &o, &given) == 0, "given streams: %s", mk_error_last());
        CHECK(given.step_time_s == built.step_time_s && given.events == built.events, "given %.17g built %.17g",
              given.step_time_s, built.step_time_s);
        mk_stream_t *st = &sch->streams[0];
        int i = 0;
        while (i < st->n && st->v[i].op != MK_INSTR_SEND_ACT) i++;
        CHECK(i < st->n, "stage 0 sends");
        for (; i + 1 < st->n; i++) st->v[i] = st->v[i + 1];
        st->n--;
        CHECK(mk_sim_run(s, &ctx, &o, &given) < 0 && strstr(mk_error_last(), "simulation deadlock"),
              "a missing SEND deadlocks: %s", mk_error_last());
        p.gbs = 16;
        CHECK(mk_plan_resolve(&other, &p, &ro) == 0, "resolve gbs 16: %s", mk_error_last());
        CHECK(mk_sim_run(s, &other, &o, &given) < 0 && strstr(mk_error_last(), "do not match"),
              "streams of another plan: %s", mk_error_last());
        mk_plan_ctx_free(&other);
        mk_sched_free(sch);
    }
    mk_plan_ctx_free(&ctx);
    mk_sim_free(s);
    mk_graph_free(g);
}

/* A search's fixed parts (mk_sim_fixed_t: every count's activation
 * figures in one pass each way) give mk_sim_stage_memory's very bytes at
 * every count of every stage, and the state (no activation in flight) its
 * figure with no count and none in flight. */
static void test_memory_fixed(void)
{
    struct { const char *model, *rc; int pp, tp, vpp, sp; mk_sched_kind_t k; } cases[] = {
        {"gpt-tiny", "full", 2, 2, 1, 1, MK_SCHED_1F1B},
        {"gpt-tiny", "selective", 2, 2, 2, 0, MK_SCHED_INTERLEAVED},
        {"llama-tiny", "none", 4, 1, 1, 0, MK_SCHED_1F1B},      {"moe-tiny", "full", 2, 1, 2, 0, MK_SCHED_INTERLEAVED},
        {"llama-tiny", "selective-op", 1, 2, 1, 1, MK_SCHED_1F1B}};
    mk_cluster_t c;
    CHECK(mk_cluster_get("dgx-a100", &c) == 0, "cluster");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mk_plan_t p;
        mk_graph_t *g = setup(cases[i].model, 1, cases[i].pp, cases[i].tp, cases[i].vpp, 1, 8, cases[i].k, cases[i].rc,
                              &p);
        CHECK(g != NULL, "setup %s", cases[i].model);
        if (!g) continue;
        p.seqpar = cases[i].sp;
        mk_sim_fixed_t *F = mk_sim_fixed_new(&p, g, NULL);
        CHECK(F != NULL, "fixed parts");
        int layers[MK_PLAN_MAX_VSTAGES], zero[MK_PLAN_MAX_VSTAGES] = {0}, same = 1, n = 0;
        mk_plan_ckpt_layers(&p, g, layers);
        for (int s = 0; F && s < p.pp; s++) {
            mk_mem_breakdown_t a, b;
            for (int k = 0; k <= 64; k++) { /* every count, and past the most a chunk has */
                int ck[MK_PLAN_MAX_VSTAGES];
                for (int ch = 0; ch < p.vpp; ch++) ck[ch] = k < layers[s * p.vpp + ch] + 2 ? k : 0;
                mk_sim_stage_memory(&c, &p, g, s, ck, -1, NULL, &a);
                mk_sim_stage_memory_fixed(F, &p, g, s, ck, &b);
                same &= !memcmp(&a, &b, sizeof a), n++;
                if (k % 7 == 0) mk_sim_fixed_trim(F); /* remade as asked */
            }
            mk_sim_stage_memory(&c, &p, g, s, zero, 0, NULL, &a);
            mk_sim_stage_state_fixed(F, &p, g, s, &b);
            same &= !memcmp(&a, &b, sizeof a);
        }
        CHECK(same, "%s %s: the fixed parts' figures are mk_sim_stage_memory's (%d counts)", cases[i].model,
              cases[i].rc, n);
        mk_sim_fixed_free(F);
        mk_graph_free(g);
    }
}

/* Preset `model` at sequence length seq in bf16 with attention backend a:
 * its graph (NULL on failure), the plan in *p. */
static mk_graph_t *bf16_graph(const char *model, int seq, mk_attn_backend_t a, mk_plan_t *p)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    ov.seq = seq;
    mk_plan_init(p);
    if (mk_model_resolve(model, &ov, &p->model) < 0) return NULL;
    p->dtype = MK_DTYPE_BF16, p->attention = a;
    return mk_plan_graph(p);
}

/* A fused attention kernel (FlashAttention's tiling) skips the tiles the
 * causal mask covers: its forward on dgx-h100 takes the causal pairs'
 * share, (s+1)/2s, of the full core's FLOPs at the device's flash rate,
 * and its backward 2.5x that (FlashAttention-2's count; sim/cost.c) at the
 * backward's own rate (322/370 of it on the H100: cluster.c); the
 * materialised core (unfused) computes every score. */
static void test_fused_causal(void)
{
    mk_plan_t p;
    mk_graph_t *g = bf16_graph("llama-2-7b", 8192, MK_ATTN_FLASH, &p);
    mk_cluster_t c;
    CHECK(g && mk_cluster_get("dgx-h100", &c) == 0, "graph and cluster");
    if (!g) return;
    int att = mk_graph_find_op(g, "attn.0");
    double s = 8192, tok = s, share = (s + 1) / (2 * s), f = g->ops[att].fwd_flops;
    CHECK_REL(g->ops[att].fwd_flops_causal, f * share, 1e-12, "the graph's causal count");
    double fwd = mk_cost_op_time(&c, g, att, 1, 0, tok, MK_DTYPE_BF16, 0);
    double bwd = mk_cost_op_time(&c, g, att, 1, 0, tok, MK_DTYPE_BF16, 1);
    CHECK_REL(fwd, f * share / c.dev.flash_attn_flops + c.dev.launch_s, 1e-12, "fused causal forward");
    CHECK(c.dev.flash_attn_bwd_flops > 0 && c.dev.flash_attn_bwd_flops < c.dev.flash_attn_flops,
          "dgx-h100: the fused kernel's backward slower than its forward");
    CHECK_REL(bwd, 2.5 * f * share / c.dev.flash_attn_bwd_flops + 2 * c.dev.launch_s, 1e-12, "fused causal backward");
    mk_graph_free(g);
    p.attention = MK_ATTN_UNFUSED;
    g = mk_plan_graph(&p);
    CHECK(g && mk_cost_op_time(&c, g, att, 1, 0, tok, MK_DTYPE_BF16, 0) > 1.9 * fwd, "the materialised core: every score");
    mk_graph_free(g);
}

/* An MoE layer's dispatch, activation and combine are kernels of their own
 * between its experts' GEMMs: their bytes, N (3 k w + w + (act_in + 1) k
 * f) dt (Mixtral-8x7B: k 2, w 4096, f 14336, gated), add to the GEMMs'
 * time at the device's memory bandwidth (twice in the backward), so on
 * dgx-h100, where the GEMMs bound the op, doubling the bandwidth takes
 * half of that time off exactly. */
static void test_moe_passes(void)
{
    mk_plan_t p;
    mk_graph_t *g = bf16_graph("mixtral-8x7b", 4096, MK_ATTN_UNFUSED, &p);
    mk_cluster_t c, c2;
    CHECK(g && mk_cluster_get("dgx-h100", &c) == 0, "graph and cluster");
    if (!g) return;
    c2 = c, c2.dev.mem_bw_Bps *= 2;
    int moe = -1;
    for (int i = 0; i < g->n_ops && moe < 0; i++)
        if (g->ops[i].kind == MK_OPK_MOE) moe = i;
    double N = 4096, w = 4096, f = 14336, passes = N * (3 * 2 * w + w + 3 * 2 * f) * 2;
    for (int bwd = 0; bwd <= 1; bwd++) {
        double t1 = mk_cost_op_time(&c, g, moe, 1, 0, N, MK_DTYPE_BF16, bwd);
        double t2 = mk_cost_op_time(&c2, g, moe, 1, 0, N, MK_DTYPE_BF16, bwd);
        CHECK_REL(t1 - t2, (bwd ? 2 : 1) * passes / (2 * c.dev.mem_bw_Bps), 1e-9, bwd ? "MoE passes, backward" : "MoE passes");
    }
    mk_graph_free(g);
}

/* A default plan of a preset model (seq > 0: its sequence length). */
static int plan_of_model(const char *model, int seq, mk_plan_t *p)
{
    mk_model_overrides_t ov;
    mk_model_overrides_init(&ov);
    if (seq > 0) ov.seq = seq;
    mk_plan_init(p);
    return mk_model_resolve(model, &ov, &p->model);
}

/* Megatron's fused softmax needs the rank's b x heads to be a multiple
 * of 4 (sim/cost.c softmax_unfused): GPT-2 124M (12 heads) at tp 2 has 6
 * at micro-batch 1 and takes the fp32 path, five kernels where the fused
 * kernel is one (with dropout the core launches 9 forward and 12 backward
 * instead of 5 and 8) and 25 + 2 (dt + 4) bytes a score forward, 29 +
 * 2 (dt + 4) backward, where the fused causal softmax moves 1.5 dt and 2
 * dt; at micro-batch 2 (12) the fused kernel runs.  Checked with the
 * device's work, or the host, made negligible. */
static void test_softmax_fallback(void)
{
    mk_cluster_t c, h;
    CHECK(mk_cluster_get("dgx-a100", &c) == 0, "cluster");
    for (int d = 0; d < 3; d++) c.dev.matmul_flops[d] *= 1e6;
    c.dev.vector_flops *= 1e6, c.dev.launch_s = 0, h = c;
    c.dev.host_op_s = 0, h.dev.mem_bw_Bps *= 1e6;
    for (int mbs = 1; mbs <= 2; mbs++) {
        mk_plan_t p;
        CHECK(plan_of_model("gpt2-124m", 0, &p) == 0, "model");
        p.dtype = MK_DTYPE_BF16, p.attention = MK_ATTN_UNFUSED, p.tp = 2, p.mbs = mbs;
        mk_graph_t *g = mk_plan_graph(&p);
        CHECK(g != NULL, "graph");
        if (!g) continue;
        int att = mk_graph_find_op(g, "attn.0");
        double s = g->cfg.seq, N = mbs * s, scores = 12 * s * s * mbs / 2, bw = c.dev.mem_bw_Bps;
        for (int bwd = 0; bwd <= 1; bwd++) {
            double pass = mbs == 1 ? (bwd ? 29 : 25) + 2 * (2 + 4) : (bwd ? 2 : 1.5) * 2;
            double want = (g->ops[att].bytes_moved / 2 * (bwd ? 2 : 1) + scores * (pass + 2 * 2 + 1)) / bw;
            CHECK_REL(mk_cost_op_time(&c, g, att, 2, 0, N, MK_DTYPE_BF16, bwd), want, 1e-12, "softmax passes");
            int k = (bwd ? 8 : 5) + (mbs == 1 ? 4 : 0);
            CHECK_REL(mk_cost_op_time(&h, g, att, 2, 0, N, MK_DTYPE_BF16, bwd), k * h.dev.host_op_s, 1e-12,
                      "softmax kernels");
        }
        mk_graph_free(g);
    }
}

/* A preset whose device work is made negligible (rates a million times
 * higher, no launch gap): an op then takes its host time. */
static int host_only_cluster(const char *name, mk_cluster_t *c)
{
    if (mk_cluster_get(name, c) < 0) return -1;
    for (int d = 0; d < 3; d++) c->dev.matmul_flops[d] *= 1e6;
    c->dev.mem_bw_Bps *= 1e6, c->dev.vector_flops *= 1e6, c->dev.launch_s = 0;
    return 0;
}

/* The kernels a micro-batch's embedding and loss launch (sim/cost.c
 * lookup_kernels, counted in Megatron-LM's VocabParallelEmbedding and
 * cross entropy and PyTorch's embedding backward): with the device's work
 * made negligible each op takes host_op_s times its count.  GPT-2 124M:
 * at tp 2, micro-batch 4 (4096 ids, the sorting backward) the token table
 * launches 8 forward and 13 backward, the position table 1 and 12, the
 * vocabulary-parallel loss 29 and 11 (torch's cross entropy, counted as
 * one kernel, 1 and 1); at tp 1, micro-batch 1 (1024 ids) the token table
 * 1 and 2. */
static void test_head_kernels(void)
{
    static const struct { int tp, mbs, xent, wte_f, wte_b, wpe_b, loss_f, loss_b; } k[] = {
        {2, 4, MK_XENT_VOCAB_PARALLEL, 8, 13, 12, 29, 11},
        {2, 4, MK_XENT_TORCH, 8, 13, 12, 1, 1},
        {1, 1, MK_XENT_VOCAB_PARALLEL, 1, 2, 2, 29, 11}};
    mk_cluster_t c;
    CHECK(host_only_cluster("dgx-a100", &c) == 0, "cluster");
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        mk_plan_t p;
        CHECK(plan_of_model("gpt2-124m", 0, &p) == 0, "model");
        p.dtype = MK_DTYPE_BF16, p.tp = k[i].tp, p.mbs = k[i].mbs, p.cross_entropy = k[i].xent;
        mk_graph_t *g = mk_plan_graph(&p);
        CHECK(g != NULL, "graph");
        if (!g) continue;
        const char *name[3] = {"wte", "wpe", "loss"};
        int want[3][2] = {{k[i].wte_f, k[i].wte_b}, {1, k[i].wpe_b}, {k[i].loss_f, k[i].loss_b}};
        double N = (double)p.mbs * g->cfg.seq;
        for (int j = 0; j < 3; j++)
            for (int bwd = 0; bwd <= 1; bwd++) {
                int op = mk_graph_find_op(g, name[j]);
                double t = op < 0 ? -1 : mk_cost_op_time(&c, g, op, p.tp, 0, N, MK_DTYPE_BF16, bwd);
                CHECK(fabs(t - want[j][bwd] * c.dev.host_op_s) < 1e-12, "%s %s at tp %d, micro-batch %d: %.3g us",
                      name[j], bwd ? "backward" : "forward", p.tp, p.mbs, t * 1e6);
            }
        mk_graph_free(g);
    }
}

/* The host issues an MoE layer's kernels one by one (sim/cost.c
 * moe_kernels, counted in Megatron-Core's MoE layer): with the device's
 * work made negligible the op takes host_op_s times its count.
 * Mixtral-8x7B (E 8, top 2, no shared expert) on dgx-h100: with ep 4 and
 * tp 2 (G 2) the all-to-all dispatcher launches 54 forward (router 19,
 * dispatch 30, experts 5) and 38 backward (12, 17, 9), DeepEP's 36 and 33
 * (dispatch 12 and 12); with neither (G 8) 46 and 53. */
static void test_moe_host(void)
{
    static const struct { int ep, tp, deepep, fwd, bwd; } k[] = {
        {4, 2, 0, 54, 38}, {4, 2, 1, 36, 33}, {1, 1, 0, 46, 53}};
    mk_cluster_t c;
    CHECK(host_only_cluster("dgx-h100", &c) == 0, "cluster");
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        mk_plan_t p;
        CHECK(plan_of_model("mixtral-8x7b", 64, &p) == 0, "model");
        p.dtype = MK_DTYPE_BF16, p.ep = k[i].ep, p.tp = k[i].tp, p.moe_deepep = k[i].deepep;
        mk_graph_t *g = mk_plan_graph(&p);
        CHECK(g != NULL, "graph");
        if (!g) continue;
        int moe = -1;
        for (int j = 0; j < g->n_ops && moe < 0; j++)
            if (g->ops[j].kind == MK_OPK_MOE) moe = j;
        for (int bwd = 0; bwd <= 1; bwd++) {
            double t = mk_cost_op_time(&c, g, moe, p.tp, 0, 64, MK_DTYPE_BF16, bwd);
            CHECK(fabs(t - (bwd ? k[i].bwd : k[i].fwd) * c.dev.host_op_s) < 1e-12,
                  "MoE kernels, ep %d tp %d deepep %d %s: %.3g us", k[i].ep, k[i].tp, k[i].deepep,
                  bwd ? "backward" : "forward", t * 1e6);
        }
        mk_graph_free(g);
    }
}

/* An fp8 linear's casts are kernels of their own before its GEMMs
 * (Transformer Engine as Megatron-Core builds it; graph.c "fp8 plans"):
 * their bytes add to the GEMM's time at the device's memory bandwidth,
 * not under it.  gpt-175b's block (h 12288, N = s = 2048 tokens, dt 2, FP8
 * 1): proj, fed by the attention core, cast-transposes its input forward,
 * N h (2 + 1 + 1), and its output gradient backward, the same; fc1, fed by
 * the norm (which writes the FP8 input itself), nothing forward and
 * backward its output gradient, N 4h (2 + 1 + 1), and the saved input's
 * transpose, 2 N h.  On dgx-h100 the GEMMs bound both ops, so doubling
 * the bandwidth takes half of that time off exactly; bf16 has no such
 * passes. */
static void test_fp8_casts(void)
{
    mk_plan_t p;
    mk_graph_t *g = bf16_graph("gpt-175b", 2048, MK_ATTN_FLASH, &p);
    mk_cluster_t c, c2;
    CHECK(g && mk_cluster_get("dgx-h100", &c) == 0, "graph and cluster");
    if (!g) return;
    int proj = mk_graph_find_op(g, "proj.0"), fc1 = mk_graph_find_op(g, "fc1.0");
    CHECK(g->ops[proj].pass_bytes[0] == 0 && g->ops[fc1].pass_bytes[1] == 0, "bf16: no cast passes");
    mk_graph_free(g);
    p.dtype = MK_DTYPE_FP8;
    g = mk_plan_graph(&p);
    CHECK(g != NULL, "fp8 graph");
    if (!g) return;
    c2 = c, c2.dev.mem_bw_Bps *= 2;
    double N = 2048, h = 12288;
    double want[2][2] = {{N * h * 4, N * h * 4}, {0, N * 4 * h * 4 + 2 * N * h}};
    int ops[2] = {proj, fc1};
    for (int i = 0; i < 2; i++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            double t1 = mk_cost_op_time(&c, g, ops[i], 1, 0, N, MK_DTYPE_FP8, bwd);
            double t2 = mk_cost_op_time(&c2, g, ops[i], 1, 0, N, MK_DTYPE_FP8, bwd);
            const char *what[2][2] = {{"fp8 proj casts", "fp8 proj casts, backward"},
                                      {"fp8 fc1 casts (none)", "fp8 fc1 casts, backward"}};
            CHECK_REL(t1 - t2 + 1e-30, want[i][bwd] / (2 * c.dev.mem_bw_Bps) + 1e-30, 1e-9, what[i][bwd]);
        }
    mk_graph_free(g);
    /* current (tensorwise) scaling: every cast reads its input once more for the amax
       (2 + 2 + 1 + 1), and no norm writes the FP8 input, so fc1 casts its own */
    p.fp8_recipe = MK_FP8_TENSORWISE;
    g = mk_plan_graph(&p);
    CHECK(g != NULL, "tensorwise graph");
    if (!g) return;
    double cur[2][2] = {{N * h * 6, N * h * 6}, {N * h * 6, N * 4 * h * 6}};
    for (int i = 0; i < 2; i++)
        for (int bwd = 0; bwd <= 1; bwd++)
            CHECK_REL(g->ops[ops[i]].pass_bytes[bwd], cur[i][bwd], 1e-12, "tensorwise casts (proj, fc1; fwd, bwd)");
    mk_graph_free(g);
}

/* An fp8 plan's weights term by recipe (sim/memory.c fp8_copies): with
 * Transformer Engine's linears (delayed, tensorwise) the bf16 weights plus
 * an FP8 copy and its transpose, 2 bytes, of every linear-layer parameter
 * (llama-2-7b's stage 0 of 2 on dgx-h100: 16 blocks of
 * 4 h^2 + 3 h f linear parameters); torchao's Float8Linear keeps none, so
 * its weights are bf16's to the byte, and it scales currently (the graph's
 * tensorwise casts) and casts each weight where it uses it (sim/cost.c
 * fp8_weight_pass_bytes). */
static void test_fp8_weight_copies(void)
{
    mk_plan_t p;
    mk_graph_t *g = setup("llama-2-7b", 1, 2, 1, 1, 1, 8, MK_SCHED_1F1B, "none", &p);
    mk_cluster_t c;
    CHECK(g && mk_cluster_get("dgx-h100", &c) == 0, "graph and cluster");
    if (!g) return;
    int zero[MK_PLAN_MAX_VSTAGES] = {0};
    mk_mem_breakdown_t m16, m8[3];
    CHECK(mk_sim_stage_memory(&c, &p, g, 0, zero, 0, NULL, &m16) == 0, "bf16 memory");
    mk_graph_free(g);
    double h = 4096, f = 11008, lin = 16 * (4 * h * h + 3 * h * f), tok = 4096, t[3][2];
    p.dtype = MK_DTYPE_FP8;
    for (int r = MK_FP8_DELAYED; r <= MK_FP8_TORCHAO; r++) {
        p.fp8_recipe = (mk_fp8_recipe_t)r;
        g = mk_plan_graph(&p);
        CHECK(g && mk_sim_stage_memory(&c, &p, g, 0, zero, 0, NULL, &m8[r]) == 0, "fp8 %s memory",
              mk_fp8_recipe_name(p.fp8_recipe));
        CHECK(!g || g->opts.fp8_current == (r != MK_FP8_DELAYED), "fp8 %s: current scaling %d",
              mk_fp8_recipe_name(p.fp8_recipe), g ? g->opts.fp8_current : -1);
        int down = g ? mk_graph_find_op(g, "down.0") : -1;
        for (int bwd = 0; bwd <= 1; bwd++)
            t[r][bwd] = down >= 0 ? mk_cost_op_time(&c, g, down, 1, 0, tok, MK_DTYPE_FP8, bwd) : 0;
        mk_graph_free(g);
    }
    /* torchao casts down's f x h weight where it uses it: forward its amax and cast (2 + 2 + 1
       bytes a parameter), backward the saved FP8 weight's transposed copy (1 + 1), beyond
       tensorwise's passes, whatever the tokens */
    CHECK_REL(t[MK_FP8_TORCHAO][0] - t[MK_FP8_TENSORWISE][0], f * h * 5 / c.dev.mem_bw_Bps, 1e-9,
              "torchao: the weight's cast forward");
    CHECK_REL(t[MK_FP8_TORCHAO][1] - t[MK_FP8_TENSORWISE][1], f * h * 2 / c.dev.mem_bw_Bps, 1e-9,
              "torchao: the FP8 weight's transpose backward");
    CHECK_REL(m8[MK_FP8_DELAYED].weights - m16.weights, 2 * lin, 1e-9, "delayed: + an FP8 weight and transpose");
    CHECK_REL(m8[MK_FP8_TENSORWISE].weights - m16.weights, 2 * lin, 1e-9, "tensorwise: the same copies");
    CHECK(m8[MK_FP8_TORCHAO].weights == m16.weights, "torchao: bf16's weights (%.6g against %.6g)",
          m8[MK_FP8_TORCHAO].weights, m16.weights);
    mk_fp8_recipe_t r;
    CHECK(mk_fp8_recipe_parse("torchao", &r) == 0 && r == MK_FP8_TORCHAO && mk_fp8_recipe_parse("rowwise", &r) < 0 &&
              strstr(mk_error_last(), "delayed, tensorwise or torchao"),
          "--fp8-recipe torchao parses, rowwise is named as refused");
}

/* The GEMM curve is the device's 16-bit GEMMs'; at another math rate a
 * GEMM's fixed costs take the same time, so its half-dimension scales with
 * the rate (sim/cost.c mk_cost_gemm_eff): on dgx-h100 (0.75, 384) FP8 at
 * twice bf16's rate reaches 0.75 d / (d + 768) -- 0.30, 0.50 and 0.545 at
 * d = 512, 1536, 2048, DeepGEMM's measured 0.30, 0.50, 0.52 (pull request
 * 73, H800) -- and TF32 at half the rate 0.75 d / (d + 192). */
static void test_gemm_rate_curve(void)
{
    mk_cluster_t c;
    CHECK(mk_cluster_get("dgx-h100", &c) == 0, "dgx-h100");
    const mk_device_t *d = &c.dev;
    double dims[3] = {512, 1536, 2048}, meas[3] = {0.30, 0.50, 0.52};
    double r8 = d->matmul_flops[MK_DTYPE_FP8] / d->matmul_flops[MK_DTYPE_BF16]; /* 1979 / 989 */
    for (int i = 0; i < 3; i++) {
        double e8 = mk_cost_gemm_eff(d, dims[i], d->matmul_flops[MK_DTYPE_FP8]);
        CHECK_REL(e8, 0.75 * dims[i] / (dims[i] + 384 * r8), 1e-12, "fp8: the half-dimension doubled");
        CHECK(fabs(e8 - meas[i]) <= 0.03, "fp8 at d = %g: %.3f against DeepGEMM's %.2f", dims[i], e8, meas[i]);
        CHECK_REL(mk_cost_gemm_eff(d, dims[i], d->matmul_flops[MK_DTYPE_BF16]), 0.75 * dims[i] / (dims[i] + 384),
                  1e-12, "bf16: the device's curve");
        CHECK_REL(mk_cost_gemm_eff(d, dims[i], 0), 0.75 * dims[i] / (dims[i] + 384), 1e-12, "no rate: the 16-bit curve");
        CHECK_REL(mk_cost_gemm_eff(d, dims[i], d->matmul_flops[MK_DTYPE_FP32]), 0.75 * dims[i] / (dims[i] + 192),
                  1e-3, "tf32: the half-dimension halved");
    }
}

/* Pipeline sends scatter-gathered over TP (--scatter-gather-tensors-in-
 * pipeline: Megatron-LM 2021-22, DeepSpeed's pipeline engine).  gpt-8.3b,
 * pp 2 x tp 8 on two dgx-a100 nodes (no host floor): each stage sends m
 * tensors of B = b s h x 2 bytes across the nodes, its 8 TP ranks at once
 * on the node's 8 NICs.  Whole: m (a_e + B / b_e).  Scatter-gathered: a
 * 1/8 slice each, then the receivers' ring all-gather over NVLink, m (a_e
 * + B / (8 b_e) + 7 a_i + 7/8 B / b_i).  With sequence parallelism the
 * rank's rows go and nothing is gathered, flag or not. */
static void test_scatter_gather_p2p(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    c.dev.host_op_s = 0;
    mk_plan_t p;
    int m = 4;
    mk_graph_t *g = setup("gpt-8.3b", 1, 2, 8, 1, 1, m, MK_SCHED_1F1B, "full", &p);
    CHECK(g != NULL, "setup: %s", mk_error_last());
    if (!g) return;
    double B = 1.0 * p.model.seq * p.model.hidden * 2, pp[4];
    for (int i = 0; i < 4; i++) {
        p.scatter_gather_p2p = i & 1, p.seqpar = i >> 1;
        CHECK(run_on(&c, &p, g, 0) == 0, "run %d", i);
        pp[i] = res.exposed_comm_s[MK_COMM_PP] + res.overlapped_comm_s[MK_COMM_PP];
    }
    double ae = c.inter.alpha_s, be = c.inter.beta_Bps, ai = c.intra.alpha_s, bi = c.intra.beta_Bps;
    CHECK_REL(pp[0], m * (ae + B / be), 1e-9, "whole tensors");
    CHECK_REL(pp[1], m * (ae + B / (8 * be) + 7 * ai + 7.0 / 8 * B / bi), 1e-9, "scatter-gathered");
    CHECK_REL(pp[2], m * (ae + B / (8 * be)), 1e-9, "sequence parallel: the rank's rows");
    CHECK(pp[3] == pp[2], "sequence parallel: the flag does nothing");
    mk_graph_free(g);
}

/* --zero3-per-param-collectives (DeepSpeed's ZeRO-3 before 0.5.7), in
 * closed form over the flat ZeRO-3 step on one dgx-a100 node (8 ranks, no
 * host floor, fp16: 2-byte weights and gradients, m micro-batches, no
 * recompute): a layer with M matrices, V vectors and P parameters adds to
 * each gather (forward; backward but for the embedding's) M - 1
 * collectives' latency L = 7 alpha, M x 8 copy kernels and 3 x 2P bytes at
 * HBM bandwidth, to each reduction M + V - 1 latencies, (M + V) x 8
 * kernels and 2 x 2P bytes; after the step the vectors (VP elements in
 * all, V_all tensors) are gathered once, with V_all x 8 copies.  GPT's
 * blocks hold 2 matrices and 4 vectors a layer (qkv and proj, or fc1 and
 * fc2, their biases and the LayerNorm's two); the embedding's 2 tables;
 * the head's final LayerNorm, and the tied table's copy in its gather. */
static void test_zero3_per_param(void)
{
    mk_cluster_t c;
    mk_cluster_get("dgx-a100", &c);
    c.dev.host_op_s = 0;
    mk_plan_t p;
    int m = 2, n = 8;
    mk_graph_t *g = setup("gpt2-124m", n, 1, 1, 1, 1, n * m, MK_SCHED_1F1B, "none", &p);
    CHECK(g != NULL, "setup: %s", mk_error_last());
    if (!g) return;
    p.dtype = MK_DTYPE_FP16, p.zero = 3, p.zero3_prefetch = 0, p.overlap_grad_reduce = 0;
    double dp[2];
    for (int i = 0; i < 2; i++) {
        p.zero3_per_param = i;
        CHECK(run_on(&c, &p, g, 0) == 0, "run %d: %s", i, mk_error_last());
        dp[i] = res.exposed_comm_s[MK_COMM_DP] + res.overlapped_comm_s[MK_COMM_DP];
    }
    double L = (n - 1) * c.intra.alpha_s, k = n * c.dev.launch_s, bw = c.dev.mem_bw_Bps, want = 0, vp = 0;
    int vall = 0;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *Ly = &g->layers[l];
        int emb = !strcmp(Ly->kind, "embedding"), head = l == g->n_layers - 1, M = emb ? 2 : head ? 0 : 2;
        int V = emb ? 0 : head ? 2 : 4;
        double P = Ly->params, lv = head ? P : 0; /* a block's vectors: its LayerNorm's 2 w, its biases */
        for (int i = Ly->first_op; !emb && !head && i < Ly->first_op + Ly->n_ops; i++) {
            const mk_op_t *o = &g->ops[i];
            lv += o->kind == MK_OPK_LAYERNORM ? 2.0 * o->width : o->kind == MK_OPK_LINEAR ? o->width : 0;
        }
        vall += V, vp += lv;
        double Pg = P + (head ? g->tied_rep + g->tied_split : 0);
        int Mg = M + head;
        want += m * (emb ? 1 : 2) * ((Mg - 1) * L + Mg * k + 3 * 2 * Pg / bw);
        want += m * ((M + V - 1) * L + (M + V) * k + 2 * 2 * P / bw);
    }
    double one = L + (n - 1.0) / n * 2 * vp / c.intra.beta_Bps; /* the after-step gather of the vectors */
    want += one + vall * k + 2 * 2 * vp / bw;
    CHECK(vall == 4 * 24 + 2, "gpt2-124m: 4 vectors in each of 24 layers, 2 in the head (%d)", vall);
    CHECK_REL(dp[1] - dp[0], want, 1e-6, "the per-tensor collectives' extra DP time");
    printf("ZeRO-3 per-tensor collectives: DP %.4f -> %.4f s (closed form +%.4f s)\n", dp[0], dp[1], want);
    mk_graph_free(g);
}

/* h100-96gb-500w: an H100 SXM held to 500 W.  Its compute rates (every
 * tensor-core type, the vector units, the attention kernels) are
 * dgx-h100's scaled by one clock factor, the dense BF16 rate a third of
 * the way from the SXM's 989 TFLOP/s at 700 W to the NVL's 835 at 400 W
 * (data sheets: 886 TFLOP/s); its HBM runs at 90% of 2.4 TB/s whatever
 * the cap. */
static void test_power_capped_h100(void)
{
    mk_cluster_t h, c;
    CHECK(mk_cluster_get("dgx-h100", &h) == 0 && mk_cluster_get("h100-96gb-500w", &c) == 0, "presets");
    double f = (835.0 + (989.0 - 835.0) / 3) / 989.0;
    CHECK_REL(c.dev.matmul_flops[1], 886.33e12, 1e-5, "dense BF16 at 500 W");
    for (int i = 0; i < 4; i++) CHECK_REL(c.dev.matmul_flops[i], f * h.dev.matmul_flops[i], 1e-12, "a matmul rate");
    CHECK_REL(c.dev.vector_flops, f * h.dev.vector_flops, 1e-12, "vector rate");
    CHECK_REL(c.dev.flash_attn_flops, f * h.dev.flash_attn_flops, 1e-12, "attention forward");
    CHECK_REL(c.dev.flash_attn_bwd_flops, f * h.dev.flash_attn_bwd_flops, 1e-12, "attention backward");
    CHECK_REL(c.dev.mem_bw_Bps, 0.9 * 2400e9, 1e-12, "HBM2e, not capped");
}

/* The gradient buffers' type (mk_plan_grad_dtype): fp32 for bf16 (and
 * fp8) plans, as Megatron-LM forces, fp16 for fp16 ones unless
 * --accumulate-allreduce-grads-in-fp32: 4 or 2 bytes a parameter, and the
 * DP all-reduce moves them (dp 16 over two dgx-a100 nodes: twice the
 * bytes at the same bus bandwidth, less than twice the time only by the
 * ring's latency terms). */
static void test_grad_dtype(void)
{
    mk_plan_t p;
    double grads[3], dp_s[3];
    const mk_dtype_t dts[3] = {MK_DTYPE_BF16, MK_DTYPE_FP16, MK_DTYPE_FP16};
    for (int i = 0; i < 3; i++) {
        mk_graph_t *g = setup("gpt-2.5b", 16, 1, 1, 1, 1, 16, MK_SCHED_1F1B, "full", &p);
        CHECK(g != NULL, "setup");
        if (!g) return;
        p.dtype = dts[i], p.grad_reduce_dtype = i == 2 ? MK_DTYPE_FP32 + 1 : 0, p.overlap_grad_reduce = 0;
        CHECK(run("dgx-a100", &p, g, 0) == 0, "run");
        grads[i] = res.mem[0].grads;
        dp_s[i] = res.exposed_comm_s[MK_COMM_DP] + res.overlapped_comm_s[MK_COMM_DP];
        mk_graph_free(g);
    }
    printf("gradients: bf16 %.4g GB, %.4g s DP; fp16 %.4g GB, %.4g s; fp16 + fp32 accumulation %.4g GB, %.4g s\n",
           grads[0] / 1e9, dp_s[0], grads[1] / 1e9, dp_s[1], grads[2] / 1e9, dp_s[2]);
    CHECK_REL(grads[0], 2 * grads[1], 1e-12, "bf16's gradients fp32, fp16's fp16");
    CHECK(grads[2] == grads[0] && dp_s[2] == dp_s[0], "fp16 with fp32 accumulation as bf16");
    CHECK(dp_s[0] > 1.8 * dp_s[1] && dp_s[0] <= 2 * dp_s[1] * (1 + 1e-9), "the DP reduction moves twice the bytes");
}

/* The host runs ahead of the device (merak/cost.h mk_cost_queue_t): a
 * layer's ops cost max(H, D), the host's issue times summed against the
 * device's, where each op alone costs max(h, d).  GPT-2 124M on dgx-a100
 * at micro-batch 1: the norms and element-wise ops are host-bound, the
 * GEMMs device-bound, so some layer costs less than its ops alone; the
 * simulator's forward and backward of one micro-batch on one GPU (no
 * recompute) are the layers' sums.  Mixtral's MoE op makes the host wait
 * (the dispatcher's token counts): the run before it closes, the op pays
 * max(h, d), and a new run starts after it. */
static void test_host_queue(void)
{
    mk_cluster_t c;
    mk_plan_t p;
    CHECK(mk_cluster_get("dgx-a100", &c) == 0, "cluster");
    mk_graph_t *g = setup("gpt2-124m", 1, 1, 1, 1, 1, 1, MK_SCHED_1F1B, "none", &p);
    CHECK(g != NULL, "setup");
    if (!g) return;
    double N = (double)p.mbs * p.model.seq, sum[2] = {0, 0}, alone_sum = 0;
    int shorter = 0;
    for (int l = 0; l < g->n_layers; l++)
        for (int bwd = 0; bwd <= 1; bwd++) {
            const mk_layer_t *L = &g->layers[l];
            double H = 0, D = 0, alone = 0;
            for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
                double h, d = mk_cost_op_parts(&c, g, i, 1, 0, N, p.dtype, bwd, &h);
                H += h, D += d, alone += mk_cost_op_time(&c, g, i, 1, 0, N, p.dtype, bwd);
            }
            double t = mk_cost_layer_compute(&c, g, l, 1, 0, N, p.dtype, bwd);
            CHECK(fabs(t - fmax(H, D)) <= 1e-12 * fmax(H, D), "layer %d %s: max(H, D)", l, bwd ? "backward" : "forward");
            shorter += t < alone * (1 - 1e-6);
            sum[bwd] += t, alone_sum += alone;
        }
    CHECK(shorter > 0, "some layer's host issue hides behind its GEMMs");
    CHECK(run_on(&c, &p, g, 0) == 0, "run");
    CHECK_REL(res.explain.forward, sum[0], 1e-9, "the simulator's forward: the layers' queues");
    CHECK_REL(res.explain.backward, sum[1], 1e-9, "the simulator's backward: the layers' queues");
    printf("host queue: gpt2-124m fwd+bwd %.3f ms (ops alone %.3f ms)\n", (sum[0] + sum[1]) * 1e3, alone_sum * 1e3);
    mk_graph_free(g);

    mk_cluster_get("dgx-h100", &c);
    g = setup("mixtral-8x7b", 1, 1, 1, 1, 1, 1, MK_SCHED_1F1B, "none", &p);
    CHECK(g != NULL, "setup mixtral");
    if (!g) return;
    N = (double)p.mbs * p.model.seq;
    int moe_layers = 0;
    for (int l = 0; l < g->n_layers; l++) {
        const mk_layer_t *L = &g->layers[l];
        double H = 0, D = 0, want = 0;
        int syncs = 0;
        for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
            double h, d = mk_cost_op_parts(&c, g, i, 1, 0, N, p.dtype, 1, &h);
            if (g->ops[i].kind != MK_OPK_MOE) {
                CHECK(!mk_cost_op_syncs(g, i), "only the MoE op synchronizes");
                H += h, D += d;
                continue;
            }
            CHECK(mk_cost_op_syncs(g, i), "the MoE op synchronizes");
            want += fmax(H, D) + fmax(h, d), H = D = 0, syncs++;
        }
        want += fmax(H, D);
        if (!syncs) continue;
        double t = mk_cost_layer_compute(&c, g, l, 1, 0, N, p.dtype, 1);
        CHECK(fabs(t - want) <= 1e-12 * want, "MoE layer %d: the runs around the synchronizing op", l);
        moe_layers++;
    }
    CHECK(moe_layers == g->cfg.num_layers, "every Mixtral block synchronizes once (%d)", moe_layers);
    mk_graph_free(g);
}

/* The SMs a DP collective holds (sim/dp_share.c): NCCL's channels, one
 * CUDA block each (dgx-h100: 16 of 132 SMs), so compute running beside a
 * DP collective runs on the rest and share = 16/132 of each such second
 * stays on the compute, counted as exposed DP time.  Closed form: GPT-2
 * 124M on one dgx-h100 node, dp 8, one micro-batch, its gradients reduced
 * in 4 MiB buckets behind the backward: in the run without the share the
 * backward computes beside the DP time it overlaps (ov) and the step
 * waits w for the rest after it (the last bucket).  With it the backward
 * takes x = share ov longer while the buckets stay where they were, so
 * the wait shrinks: the step and the exposed DP time grow by max(x, w) - w.
 * Nothing moves without the device's count, and nothing under `ideal`. */
static void test_dp_sm_share(void)
{
    mk_cluster_t c, c0;
    mk_plan_t p;
    CHECK(mk_cluster_get("dgx-h100", &c) == 0, "cluster");
    CHECK(c.dev.coll_sms == 16 && c.dev.sms == 132, "dgx-h100: 16 of 132 SMs (%d, %d)", c.dev.coll_sms, c.dev.sms);
    c0 = c, c0.dev.coll_sms = 0;
    mk_graph_t *g = setup("gpt2-124m", 8, 1, 1, 1, 1, 8, MK_SCHED_1F1B, "none", &p);
    CHECK(g != NULL, "setup");
    if (!g) return;
    run_bucket_bytes = 4 << 20;
    double step[2], exp[2], ov = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(run_on(i ? &c : &c0, &p, g, 0) == 0, "run %d", i);
        step[i] = res.step_time_s, exp[i] = res.exposed_comm_s[MK_COMM_DP];
        if (!i) ov = res.overlapped_comm_s[MK_COMM_DP];
    }
    run_bucket_bytes = 0;
    double x = 16.0 / 132 * ov, want = fmax(x, exp[0]) - exp[0];
    CHECK(ov > 0 && x > exp[0], "the buckets overlap the backward (%.3g s) more than the last one waits (%.3g s)", ov,
          exp[0]);
    CHECK_REL(step[1] - step[0], want, 1e-9, "the step: share x the DP time beside the backward, less the wait");
    CHECK_REL(exp[1] - exp[0], want, 1e-9, "counted as exposed DP time");
    printf("DP collectives' SMs: %.4f -> %.4f s (%.4f s of DP beside the backward)\n", step[0], step[1], ov);
    mk_cluster_t id;
    CHECK(mk_cluster_get("ideal", &id) == 0 && mk_cost_coll_sm_share(&id) == 0, "ideal: no share");
    mk_graph_free(g);
}

/* Transformer Engine's TP communication overlap (--tp-comm-overlap,
 * sim_chunk.c te_overlap): a GEMM of time G beside a transfer of time C
 * takes max(G, C + G/tp).  One micro-batch on one pipeline stage, tp 8
 * with sequence parallelism: with NVLink a thousand times slower every
 * block's all-gather and reduce-scatter outlast their GEMMs, so the step
 * shrinks by exactly (1 - 1/tp) x the time of every column- and
 * row-parallel linear, forward and backward, less what TE's SM-sharing
 * overlaps add: the forward's row-parallel and the backward's
 * column-parallel GEMMs run on sms - 16 SMs (MK_TE_UB_COMM_SMS); each
 * linear's time is its own times its layer's issue-queue share (the
 * layer's time over its ops' times alone: sim_chunk.c); at dgx-h100's own
 * NVLink the GEMMs hide all but the embedding's and head's collectives. */
static void test_tp_comm_overlap(void)
{
    mk_plan_t p;
    mk_cluster_t c, slow;
    mk_graph_t *g = setup("gpt-8.3b", 1, 1, 8, 1, 1, 1, MK_SCHED_1F1B, "none", &p);
    CHECK(g && mk_cluster_get("dgx-h100", &c) == 0, "setup");
    if (!g) return;
    p.seqpar = 1;
    slow = c, slow.intra.beta_Bps /= 1000;
    double step[2][2], tp_ex[2][2], lin = 0, row = 0, N = (double)p.mbs * p.model.seq;
    for (int l = 0; l < g->n_layers; l++) /* a layer's parts in the share its issue queue leaves */
        for (int bwd = 0; bwd <= 1; bwd++) {
            const mk_layer_t *L = &g->layers[l];
            double alone = 0, ln = 0, rw = 0;
            for (int i = L->first_op; i < L->first_op + L->n_ops; i++) {
                double t = mk_cost_op_time(&c, g, i, 8, 1, N, p.dtype, bwd);
                alone += t;
                if (g->ops[i].tp_role != MK_TP_ROW && g->ops[i].tp_role != MK_TP_COLUMN) continue;
                ln += t;
                if (g->ops[i].tp_role == (bwd ? MK_TP_COLUMN : MK_TP_ROW)) rw += t; /* TE's SM-sharing overlaps */
            }
            double r = alone > 0 ? mk_cost_layer_compute(&c, g, l, 8, 1, N, p.dtype, bwd) / alone : 1;
            lin += r * ln, row += r * rw;
        }
    for (int s = 0; s < 2; s++)
        for (int te = 0; te < 2; te++) {
            p.tp_comm_overlap = te;
            CHECK(mk_plan_check(&p, g) == 0 && run_on(s ? &slow : &c, &p, g, 0) == 0, "run");
            step[s][te] = res.step_time_s, tp_ex[s][te] = res.exposed_comm_s[MK_COMM_TP];
        }
    printf("TP overlap: slow NVLink %.4f -> %.4f s (linears %.4f s), dgx-h100 exposed TP %.4f -> %.4f s\n",
           step[1][0], step[1][1], lin, tp_ex[0][0], tp_ex[0][1]);
    /* the pipelined and bulk overlaps' GEMMs (row) run on sms - 16 SMs: f more time, and
       (1 - 1/tp) of each GEMM, so slowed, hides the collective beside it */
    double f = (double)MK_TE_UB_COMM_SMS / (c.dev.sms - MK_TE_UB_COMM_SMS);
    CHECK_REL(step[1][0] - step[1][1], (1 - 1.0 / 8) * (lin + f * row) - f * row, 1e-9,
              "slow links: (1 - 1/tp) of the linears hidden, the SM-sharing GEMMs slowed");
    CHECK(tp_ex[0][1] < 0.1 * tp_ex[0][0] && step[0][1] < step[0][0], "dgx-h100: the blocks' collectives hidden");
    p.seqpar = 0;
    CHECK(mk_plan_check(&p, g) < 0, "--tp-comm-overlap needs sequence parallelism");
    mk_graph_free(g);
}

/* A stage's tail (mk_sim_stage_tail: the optimizer step and the DP
 * stream after the last backward) does not read the micro-batches below
 * ZeRO-2 -- the planner keys its tails without them (planner_fam.c
 * mk_pl_tail) -- and ZeRO-2's does (a reduce-scatter per micro-batch). */
static void test_tail_micro_batches(void)
{
    double t[4][2][2 * 4];
    for (int z = 0; z <= 2; z++)
        for (int i = 0; i < 2; i++) {
            mk_plan_t p;
            mk_cluster_t c;
            mk_graph_t *g = setup("gpt-2.5b", 4, 4, 2, 1, i ? 4 : 1, 64, MK_SCHED_1F1B, "full", &p);
            CHECK(g && mk_cluster_get("dgx-a100", &c) == 0, "setup");
            if (!g) return;
            p.zero = z;
            CHECK(mk_sim_stage_tail(&c, &p, g, NULL, t[z][i], t[z][i] + 4) == 0, "tail");
            mk_graph_free(g);
        }
    CHECK(!memcmp(t[0][0], t[0][1], sizeof t[0][0]), "no ZeRO: the tail the same at micro-batch 1 and 4");
    CHECK(!memcmp(t[1][0], t[1][1], sizeof t[1][0]), "ZeRO-1's tail: the same at micro-batch 1 and 4");
    CHECK(memcmp(t[2][0], t[2][1], sizeof t[2][0]) != 0, "ZeRO-2's tail reads the micro-batches");
}

int main(void)
{
    const char *src = getenv("top_srcdir");
    snprintf(stack_path, sizeof stack_path, "%s/traces/models/stack.json", src ? src : ".");
    test_collectives();
    test_pipeline_invariants();
    test_unit_costs();
    test_given_streams();
    test_memory();
    test_memory_fixed();
    test_cluster_json();
    test_fused_causal();
    test_moe_passes();
    test_moe_host();
    test_softmax_fallback();
    test_fp8_casts();
    test_fp8_weight_copies();
    test_gemm_rate_curve();
    test_grad_dtype();
    test_scatter_gather_p2p();
    test_power_capped_h100();
    test_zero3_per_param();
    test_tp_comm_overlap();
    test_host_queue();
    test_head_kernels();
    test_dp_sm_share();
    test_tail_micro_batches();
    CHECK_DONE();
}
