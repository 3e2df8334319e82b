/* `merak sim`: simulate one training step of a plan on a cluster. */
#include "config.h"
#include "cli/cli.h"
#include "merak/checked.h"
#include "merak/cluster.h"
#include "merak/sim.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *sim_usage =
    "usage: merak sim [--model M] [--cluster C] --dp D --pp P --tp T --mbs b --gbs B\n"
    "                 [--schedule S] [--recompute R] [--vpp V] [--tp-overlap L] [--zero 1]\n"
    "                 [--sequence-parallel] [--dtype D] [--partition P] [--plan FILE]\n"
    "                 [--json] [--trace FILE]\n\n"
    "Simulate one training step: step time, tokens/s, TFLOP/s per GPU and MFU,\n"
    "pipeline bubbles, peak memory per stage against the device, and how much\n"
    "communication hides behind computation.  The GPU count is dp x pp x tp.\n\n"
    "  --model M          preset or JSON description (default gpt-8.3b); model flags override it\n"
    "  --cluster C        preset (see 'merak models') or cluster JSON (default rtx3090-pcie)\n"
    "  --dp --pp --tp     data, pipeline and tensor parallel degrees (default 1)\n"
    "  --mbs b --gbs B    micro-batch and global batch in sequences (default 1, 512);\n"
    "                     --micro-batches M sets B = dp x b x M when --gbs is not given\n"
    "  --schedule S       gpipe, 1f1b (default), interleaved, merak, merak-pre, merak-last, zb-h1\n"
    "  --recompute R      none, full (default), selective, stage-aware:R, auto\n"
    "  --vpp V            model chunks per stage (interleaved)\n"
    "  --tp-overlap L     sub-pipelined TP: 0 none, 1, 2, 3 (README.md \"Cost model\")\n"
    "  --zero 1           ZeRO-1: optimizer state sharded over DP\n"
    "  --sequence-parallel  Megatron sequence parallelism\n"
    "  --dtype D          fp16, bf16, fp32 (default: the cluster's 16-bit type)\n"
    "  --partition P      uniform (default), parameters, compute\n"
    "  --plan FILE        run a saved plan (no model or layout flags)\n"
    "  --json             one JSON object on stdout\n"
    "  --trace FILE       Chrome Trace Event JSON of the step (one rank per stage)\n\n"
    "A plan that does not fit in memory is a result: fits false, exit 0, a warning.\n";

#define GIB (1024.0 * 1024.0 * 1024.0)

static void print_human(const mk_plan_t *p, const mk_cluster_t *c, const mk_sim_result_t *r)
{
    char rc[48];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    printf("merak sim: %s on %s, %d GPUs (dp %d x pp %d x tp %d), %s, recompute %s, %s\n", p->model.name,
           c->name, p->dp * p->pp * p->tp, p->dp, p->pp, p->tp, mk_sched_kind_name(p->schedule), rc,
           mk_dtype_name(p->dtype));
    printf("  micro-batch %d, global batch %d, %d micro-batches per replica, vpp %d, tp-overlap %d%s%s\n",
           p->mbs, p->gbs, p->m, p->vpp, p->tp_overlap, p->zero ? ", ZeRO-1" : "",
           p->seqpar ? ", sequence parallel" : "");
    printf("step time        %.4f s\n", r->step_time_s);
    printf("tokens/s         %.1f\n", r->tokens_per_s);
    printf("TFLOP/s per GPU  %.2f   MFU %.1f%%  (Megatron's matmul count: 72·B·s·l·h²-form%s)\n",
           r->tflops_per_gpu, 100 * r->mfu,
           r->flops_recompute ? " + the forwards recomputed (96· with full recompute)" : ", no recompute");
    printf("\n%5s %7s %9s %10s %9s %9s %9s %9s %9s %9s\n", "stage", "bubble", "inflight", "peak GiB",
           "weights", "grads", "optim", "activ", "working", "buffers");
    for (int s = 0; s < r->pp; s++) {
        const mk_mem_breakdown_t *m = &r->mem[s];
        printf("%5d %6.1f%% %9d %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f%s\n", s, 100 * r->bubble_fraction[s],
               r->max_inflight[s], r->peak_memory_bytes[s] / GIB, m->weights / GIB, m->grads / GIB,
               m->optimizer / GIB, m->activations / GIB, m->working / GIB, m->buffers / GIB,
               r->peak_memory_bytes[s] > r->memory_limit_bytes ? "  > limit" : "");
    }
    printf("memory limit %.2f GiB per GPU: %s", r->memory_limit_bytes / GIB, r->fits ? "fits\n" : "");
    if (!r->fits)
        printf("does NOT fit (stage %d over by %.2f GiB)\n", r->worst_stage, r->shortfall_bytes / GIB);
    printf("\ncommunication (mean per stage)  exposed s  overlapped s\n");
    const char *k[] = {"pp (p2p)", "tp (collectives)", "dp (gradients)"};
    for (int i = 0; i < MK_COMM_KINDS; i++)
        printf("  %-29s %10.4f %12.4f\n", k[i], r->exposed_comm_s[i], r->overlapped_comm_s[i]);
}

int mk_cmd_sim(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_MODEL | MK_OPTG_LAYOUT | MK_OPTG_SCHED | MK_OPTG_SIM | MK_OPTG_JSON,
                           sim_usage);
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    if (a.npos) return mk_cli_fail("sim", "unexpected argument '%s'", a.pos[0]);
    if (a.verify) return mk_cli_fail("sim", "--verify belongs to 'merak sched'");
    if (mk_args_check_outputs(&a, 0)) return MK_EXIT_USAGE;
    if (a.micro_batches) {
        if (a.gbs) return mk_cli_fail("sim", "give --gbs or --micro-batches, not both");
        int64_t gbs;
        if (MK_PROD_WITHIN(MK_MAX_GBS, &gbs, a.dp ? a.dp : 1, a.mbs ? a.mbs : 1, a.micro_batches) < 0)
            return mk_cli_fail("sim", "dp x mbs x --micro-batches %d is a global batch above %d sequences, "
                               "the most --gbs may be", a.micro_batches, MK_MAX_GBS);
        a.gbs = (int)gbs;
    }
    mk_cluster_t cl;
    const char *cname = a.cluster ? a.cluster : "rtx3090-pcie";
    int dflt_dtype = MK_DTYPE_BF16;
    if (!a.plan_file || a.cluster) {
        if (mk_cluster_get(cname, &cl) < 0) return mk_cli_fail("sim", "%s", mk_error_last());
        dflt_dtype = mk_cluster_default_dtype(&cl);
    }
    mk_plan_t plan;
    mk_graph_t *g = NULL;
    if (mk_args_plan(&a, "gpt-8.3b", cname, 0, dflt_dtype, &plan, &g) < 0) return MK_EXIT_USAGE;
    if (mk_cluster_get(plan.cluster, &cl) < 0) {
        mk_graph_free(g);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    if (mk_sim_check_gpus(&cl, &plan) < 0) {
        mk_graph_free(g);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    mk_sim_opts_t o;
    mk_sim_opts_init(&o);
    if (a.trace_file && !(o.trace = mk_trace_open(a.trace_file))) {
        mk_graph_free(g);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    if (plan.recompute.kind == MK_RECOMPUTE_AUTO && !plan.has_ckpt && mk_sim_resolve_auto(&cl, &plan, g, &o) < 0) {
        mk_trace_abort(o.trace);
        mk_graph_free(g);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    mk_sim_t *sim = mk_sim_new(&cl);
    static mk_sim_result_t r;
    rc = sim ? mk_sim_run(sim, &plan, g, &o, &r) : -1;
    mk_sim_free(sim);
    mk_graph_free(g);
    if (rc < 0) {
        mk_trace_abort(o.trace);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    if (o.trace) {
        char buf[64];
        mk_trace_meta(o.trace, "source", "merak sim");
        snprintf(buf, sizeof buf, "%.9g", r.step_time_s);
        mk_trace_meta(o.trace, "step_time_s", buf);
        mk_trace_meta(o.trace, "schedule", mk_sched_kind_name(plan.schedule));
        if (mk_trace_close(o.trace) < 0) return mk_cli_fail("sim", "%s", mk_error_last());
    }
    if (!r.fits)
        fprintf(stderr, "merak sim: warning: the plan does not fit: stage %d peaks at %.2f GiB, %.2f GiB over the "
                        "%.2f GiB limit\n", r.worst_stage, r.peak_memory_bytes[r.worst_stage] / GIB,
                r.shortfall_bytes / GIB, r.memory_limit_bytes / GIB);
    if (a.json) {
        json_t *j = mk_sim_result_json(&r, &plan);
        if (!j) return mk_cli_fail("sim", "cannot build the JSON output");
        json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
        fputc('\n', stdout);
        json_decref(j);
    } else {
        print_human(&plan, &cl, &r);
    }
    return 0;
}
