/* mk_plan_resolve (merak/plan_ctx.h): the derived sizes, the order of the
 * checks (each made once), a borrowed graph, the engine hooks and the
 * scheduler spec the context hands to both engines. */
#include "check.h"
#include "merak/partition.h"
#include "merak/plan_ctx.h"
#include "merak/sim.h"

#include <string.h>

static int check_calls, auto_calls;

static int count_check(const mk_plan_t *p, const mk_graph_t *g)
{
    (void)p, (void)g;
    check_calls++;
    return 0;
}

static int refuse(const mk_plan_t *p, const mk_graph_t *g)
{
    (void)g;
    return mk_error_set("engine refuses pp %d", p->pp);
}

static int fake_auto(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g)
{
    (void)c, (void)g;
    auto_calls++;
    for (int i = 0; i < p->n_vstages; i++) p->ckpt[i] = 1;
    p->has_ckpt = 1;
    return 0;
}

static void tiny(mk_plan_t *p, int dp, int pp, int vpp, int mbs, int gbs)
{
    mk_plan_init(p);
    mk_model_preset("gpt-tiny", &p->model);
    p->dp = dp, p->pp = pp, p->vpp = vpp, p->mbs = mbs, p->gbs = gbs;
    if (vpp > 1) p->schedule = MK_SCHED_INTERLEAVED;
}

static void test_sizes_and_spec(void)
{
    mk_plan_t p;
    tiny(&p, 2, 2, 2, 1, 8); /* gpt-tiny: 4 blocks, 10 layers */
    mk_plan_resolve_opts_t ro = {.partition = "uniform", .check = count_check};
    mk_plan_ctx_t ctx;
    check_calls = 0;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0, "resolve: %s", mk_error_last());
    CHECK(check_calls == 1, "engine check once, got %d", check_calls);
    CHECK(ctx.plan.m == 4 && ctx.plan.n_vstages == 4, "m %d, virtual stages %d", ctx.plan.m, ctx.plan.n_vstages);
    CHECK(ctx.own && ctx.g == ctx.own && ctx.g->n_layers == 10, "graph built once, owned");
    CHECK(ctx.plan.bounds[0] == 0 && ctx.plan.bounds[4] == 10, "uniform bounds");
    CHECK(ctx.spec.pp == 2 && ctx.spec.vpp == 2 && ctx.spec.m == 4 && ctx.spec.grad_buckets == 1,
          "spec pp %d vpp %d m %d buckets %d", ctx.spec.pp, ctx.spec.vpp, ctx.spec.m, ctx.spec.grad_buckets);
    CHECK(ctx.spec.layers == ctx.layers && ctx.spec.tied, "spec points into the context; tied embedding");
    int layers[MK_PLAN_MAX_VSTAGES];
    mk_plan_ckpt_layers(&ctx.plan, ctx.g, layers);
    CHECK(!memcmp(layers, ctx.layers, 4 * sizeof *layers), "checkpointable layers");
    CHECK(mk_plan_micro_batches(&p) == 4 && mk_plan_vstages(&p) == 4, "the size functions");
    mk_plan_ctx_free(&ctx);
    p.gbs = 7;
    CHECK(mk_plan_micro_batches(&p) == 0, "indivisible batch: 0 micro-batches");
}

static void test_zero(void)
{
    mk_plan_t p;
    mk_plan_ctx_t ctx;
    mk_plan_resolve_opts_t ro = {.partition = "uniform"};
    tiny(&p, 1, 2, 1, 1, 4);
    p.zero = 1;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0 && ctx.zero == 0 && ctx.plan.zero == 1,
          "ZeRO without data parallelism: none in effect, the plan keeps its field");
    mk_plan_ctx_free(&ctx);
    tiny(&p, 2, 2, 1, 1, 4);
    p.zero = 1;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0 && ctx.zero == 1, "ZeRO-1 with dp 2");
    mk_plan_ctx_free(&ctx);
}

/* Each failure names its rule, in the documented order. */
static void test_order(void)
{
    mk_plan_t p;
    mk_plan_ctx_t ctx;
    mk_cluster_t c;
    mk_cluster_get("ideal", &c);
    c.max_nodes = 1;
    mk_plan_resolve_opts_t ro = {.cluster = &c, .world = 3, .partition = "uniform", .check = refuse};
    tiny(&p, 1, 2, 1, 2, 5);
    CHECK(mk_plan_resolve(&ctx, &p, &ro) < 0 && strstr(mk_error_last(), "not divisible"), "sizes first: %s",
          mk_error_last());
    tiny(&p, 1, 2, 1, 1, 6);
    p.vpp = 2;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) < 0 && strstr(mk_error_last(), "needs the interleaved"),
          "layout before the engine: %s", mk_error_last());
    tiny(&p, 1, 2, 1, 1, 6);
    CHECK(mk_plan_resolve(&ctx, &p, &ro) < 0 && strstr(mk_error_last(), "engine refuses pp 2"),
          "engine before the GPU count: %s", mk_error_last());
    ro.check = NULL;
    tiny(&p, 16, 2, 1, 1, 32);
    CHECK(mk_plan_resolve(&ctx, &p, &ro) < 0 && strstr(mk_error_last(), "needs 32 GPUs"),
          "GPUs against the cluster: %s", mk_error_last());
    tiny(&p, 1, 2, 1, 1, 6);
    CHECK(mk_plan_resolve(&ctx, &p, &ro) < 0 && strstr(mk_error_last(), "= 2 but there are 3 ranks"),
          "ranks against the world: %s", mk_error_last());
    CHECK(ctx.own == NULL && ctx.g == NULL, "a failed resolve holds nothing");
}

static void test_borrowed_graph_and_auto(void)
{
    mk_plan_t p;
    mk_plan_ctx_t ctx;
    mk_cluster_t c;
    mk_cluster_get("ideal", &c);
    tiny(&p, 1, 2, 1, 2, 8);
    mk_graph_t *g = mk_plan_graph(&p);
    CHECK(g && mk_partition(&p, g, "uniform") == 0, "graph");
    p.recompute.kind = MK_RECOMPUTE_AUTO;
    mk_plan_resolve_opts_t ro = {.cluster = &c, .graph = g, .resolve_auto = fake_auto};
    auto_calls = 0;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0, "resolve: %s", mk_error_last());
    CHECK(ctx.g == g && !ctx.own, "the graph is borrowed");
    CHECK(auto_calls == 1 && ctx.plan.has_ckpt && ctx.spec.ckpt == ctx.plan.ckpt, "auto settled once, in the spec");
    mk_plan_ctx_free(&ctx);
    CHECK(g->n_layers == 10, "a borrowed graph outlives the context");
    mk_plan_t q = p;
    q.mbs = 1, q.gbs = 4;
    CHECK(mk_plan_resolve(&ctx, &q, &ro) < 0 && strstr(mk_error_last(), "graph built for micro-batch 2"),
          "a graph of another plan: %s", mk_error_last());
    /* the simulator on the context gives the numbers of the real auto resolver */
    ro.resolve_auto = mk_sim_auto;
    mk_sim_t *sim = mk_sim_new(&c);
    static mk_sim_result_t r;
    CHECK(mk_plan_resolve(&ctx, &p, &ro) == 0 && mk_sim_run(sim, &ctx, NULL, &r) == 0 && r.step_time_s > 0,
          "simulate: %s", mk_error_last());
    mk_plan_ctx_free(&ctx);
    mk_sim_free(sim);
    mk_graph_free(g);
}

int main(void)
{
    test_sizes_and_spec();
    test_zero();
    test_order();
    test_borrowed_graph_and_auto();
    CHECK_DONE();
}
