/* `merak sim`: simulate one training step of a plan on a cluster. */
#include "merak/trace.h"
#include "merak/jsonio.h"
#include "config.h"
#include "cli/cli.h"
#include "cli/cli_explain.h"
#include "merak/checked.h"
#include "merak/cluster.h"
#include "merak/sim.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *sim_usage =
    "usage: merak sim [--model M] [--cluster C] --dp D --pp P --tp T --mbs b --gbs B\n"
    "                 [--schedule S] [--recompute R] [--vpp V] [--tp-overlap L] [--zero Z]\n"
    "                 [--sequence-parallel] [--no-overlap-grad-reduce] [--dtype D]\n"
    "                 [--attention-backend A] [--partition P] [--plan FILE]\n"
    "                 [--json] [--trace FILE]\n\n"
    "Simulate one training step: step time, tokens/s, TFLOP/s per GPU and MFU,\n"
    "pipeline bubbles, peak memory per stage against the device, and how much\n"
    "communication hides behind computation.  The GPU count is dp x cp x pp x tp.\n\n"
    "  --model M          preset, JSON description, or a Hugging Face config.json or its directory\n"
    "                     (default @model@); model flags override a preset\n"
    "  --cluster C        preset (see 'merak models') or cluster JSON (default @cluster@)\n"
    "  --dp --pp --tp     data, pipeline and tensor parallel degrees (default 1)\n"
    "  --cp C             context parallel size (Megatron's --context-parallel-size): each\n"
    "                     sequence split over C ranks in 2C chunks, attention as a K/V ring\n"
    "  --cp-comm-type T   the CP exchange (Megatron's --cp-comm-type, TE's kernels): p2p, the\n"
    "                     K/V ring hidden behind the attention (default); allgather, K/V\n"
    "                     all-gathered (dK/dV reduce-scattered); a2a, all-to-alls of Q, K, V\n"
    "                     and the output (Ulysses; heads / tp divide by C); neither hidden\n"
    "  --ep E             expert parallel size (Megatron's --expert-model-parallel-size, MoE\n"
    "                     models): E consecutive ranks of a stage (tp fastest, then cp, dp:\n"
    "                     Megatron-Core's MoE parallel folding) split each MoE layer's\n"
    "                     experts, tokens dispatched and combined by all-to-alls; E divides\n"
    "                     tp x cp x dp and the experts (default 1;\n"
    "                     --expert-tensor-parallel-size: only 1, the experts whole)\n"
    "  --moe-enable-deepep  the EP all-to-alls by DeepEP's kernels (Megatron-Core's\n"
    "                     --moe-token-dispatcher-type flex --moe-enable-deepep): a token\n"
    "                     crosses to each node holding its experts once, then NVLink;\n"
    "                     default: the pairwise all-to-all (--moe-token-dispatcher-type alltoall)\n"
    "  --overlap-moe-expert-parallel-comm  Megatron-Core's merged 1F1B steps: each backward\n"
    "                     with the forward before it, each one's all-to-alls behind the other's\n"
    "                     compute (ep > 1; 1f1b at pp 1 or interleaved; recompute none or\n"
    "                     selective; 16-bit); --delay-wgrad-compute: accepted with it\n"
    "  --moe-imbalance F  the busiest expert's load over the mean N k / E (default 1;\n"
    "                     a capacity factor caps it)\n"
    "  --mbs b --gbs B    micro-batch and global batch in sequences (default 1, @gbs@);\n"
    "                     --micro-batches M sets B = dp x b x M when --gbs is not given\n"
    "  --schedule S       gpipe, @schedule@ (default), interleaved, merak, merak-pre, merak-last, zb-h1,\n"
    "                     looped-bfs, zb-h2, zb-v, dualpipev (torchtitan's names too: GPipe, 1F1B,\n"
    "                     Interleaved1F1B, LoopedBFS, ZBVZeroBubble, DualPipeV)\n"
    "  --recompute R      none, @recompute@ (default), selective, stage-aware:R, auto, or\n"
    "                     selective-op (torchtitan's op-level policy: every block keeps the\n"
    "                     attention kernel's outputs and every second matmul's; merak run refuses it)\n"
    "  --vpp V            model chunks per stage (interleaved, looped-bfs; zb-v, dualpipev: 2)\n"
    "  --tp-overlap L     sub-pipelined TP: 0 none, 1, 2, 3 (sim/README.md \"Cost model\")\n"
    "  --tp-comm-overlap  Megatron-Core's (Transformer Engine's userbuffers; needs --sequence-parallel):\n"
    "                     each block's TP all-gather and reduce-scatter pipelined in tp pieces\n"
    "                     with the GEMM beside it (sim/README.md \"TP communication overlap\")\n"
    "  --zero 0|1|2|3     ZeRO stage over the DP group: 1 optimizer state, 2 + gradients\n"
    "                     (reduce-scattered), 3 + parameters (FSDP: each layer gathered\n"
    "                     before its forward and backward)\n"
    "  --zero-shard-group dp|node  shard over the whole DP group (default) or within a\n"
    "                     node (hybrid: replicas all-reduce the gradient shards)\n"
    "  --optimizer-cpu-offload  Megatron-Core's: the fp32 master weights and Adam moments\n"
    "                     in host memory and the step on the CPU, gradients and weights over\n"
    "                     the host link (the cluster's host figures; merak run refuses it)\n"
    "  --cpu-offloading-num-layers N  Megatron-Core's activation offload: the first N blocks'\n"
    "                     stored activations in host memory between their forward and backward,\n"
    "                     copied beside the compute (pp 1, --recompute none; merak run refuses it)\n"
    "  --fsdp-reshard-after-forward always|never  ZeRO-3: each layer gathered for every\n"
    "                     use (always, default), or once a step and kept, its gradients\n"
    "                     accumulated unsharded in fp32 and reduced by the last backward\n"
    "                     (never: torchtitan's FSDP under PP; merak run refuses it)\n"
    "  --zero3-prefetch, --no-zero3-prefetch  ZeRO-3: each layer's gather behind the\n"
    "                     layer before it (default: FSDP's, DeepSpeed's from 0.6.0), or\n"
    "                     when the layer starts, exposed, one layer gathered at a time\n"
    "                     (DeepSpeed's ZeRO-3 before 0.6.0 synchronized before each gather)\n"
    "  --zero3-per-param-collectives  ZeRO-3: an all-gather and a reduce-scatter per\n"
    "                     parameter tensor, each through PyTorch's list form (a copy kernel\n"
    "                     per rank), not one a layer (DeepSpeed's ZeRO-3 before 0.5.7);\n"
    "                     merak run refuses it\n"
    "  --sequence-parallel  Megatron sequence parallelism\n"
    "  --overlap-grad-reduce, --no-overlap-grad-reduce\n"
    "                     start each gradient bucket's DP reduction during the last\n"
    "                     backward (default, as merak run does), or all after it\n"
    "  --overlap-param-gather  ZeRO-1 (Megatron-Core's, with the overlapped reduction): the\n"
    "                     updated weights' all-gather runs behind the next step's first\n"
    "                     forward, bucket by bucket, not after the optimizer step\n"
    "  --scatter-gather-tensors-in-pipeline  without sequence parallelism each TP rank\n"
    "                     sends 1/tp of the activation or gradient to the next stage and\n"
    "                     the receivers all-gather it over their TP group (Megatron-LM's\n"
    "                     default in 2021-22, DeepSpeed's pipeline engine's; Megatron-Core\n"
    "                     sends whole tensors); merak run refuses it\n"
    "  --grad-reduce-dtype D  the gradient buffers and their DP reduction: fp32, or the\n"
    "                     plan's 16-bit type (bf16 for fp8 plans); default fp32 for bf16 and\n"
    "                     fp8 (Megatron-LM forces it), fp16 for fp16.\n"
    "                     --accumulate-allreduce-grads-in-fp32 is --grad-reduce-dtype fp32\n"
    "  --attention-backend A  flash or fused: the attention core as one fused kernel\n"
    "                     (FlashAttention, cuDNN) at the device's flash_attn_flops, no s x s\n"
    "                     scores in memory; unfused: the materialised core (baddbmm, softmax,\n"
    "                     dropout, bmm; not with --cp); auto (default): flash where the\n"
    "                     cluster's GPU has a fused kernel (device.flash_attn_flops) or\n"
    "                     with --cp, else unfused.\n"
    "                     --use-flash-attn is --attention-backend flash\n"
    "  --cross-entropy X  the loss's memory and passes: vocab-parallel (default: Megatron-LM's,\n"
    "                     its gradient written into the saved softmax), torch (PyTorch's\n"
    "                     F.cross_entropy on fp32 logits, as torchtitan: two fp32 logits-sized\n"
    "                     gradients in its backward), fused (Megatron-Core's\n"
    "                     --cross-entropy-loss-fusion; merak run's loss) or fused-te (its\n"
    "                     --cross-entropy-fusion-impl te)\n"
    "  --elementwise E    fused (default: RMSNorm, RoPE and SwiGLU one kernel each, as Megatron-LM,\n"
    "                     TE and torch.compile run them) or eager (a kernel per PyTorch op with\n"
    "                     fp32 upcasts, as torchtitan without torch.compile): their time\n"
    "  --fp8-recipe R     --dtype fp8's scaling (Megatron-Core's --fp8-recipe): delayed (default,\n"
    "                     amax history) or tensorwise (current scaling, Megatron-Bridge's FP8-CS:\n"
    "                     each cast after an amax pass of its own), both Transformer Engine's\n"
    "                     linears (an FP8 copy of each weight and its transpose kept); torchao\n"
    "                     (torchtitan's float8: torchao's Float8Linear, tensorwise scaling, the\n"
    "                     weights cast where used, no FP8 copies kept)\n"
    "  --dtype D          fp16, bf16, fp32, or fp8 (linear GEMMs in FP8, Transformer-Engine style;\n"
    "                     devices with FP8 tensor cores only) (default: the cluster's 16-bit type)\n"
    "  --partition P      @partition@ (default), parameters, compute\n"
    "  --decoder-first-pipeline-num-layers N, --decoder-last-pipeline-num-layers N\n"
    "                     uniform partition: N blocks on the first (last) stage, the other\n"
    "                     stages sharing the rest evenly (Megatron-Core's; vpp 1)\n"
    "  --plan FILE        run a saved plan (no model or layout flags)\n"
    "  --gpus N           the GPUs: dp = N / (tp pp cp), as Megatron-LM derives it\n"
    "  --export T         print the plan as engine T's launch artefact instead of simulating:\n"
    "                     megatron, torchtitan, deepspeed (merak plan --help); refuses what T\n"
    "                     cannot run\n"
    "  --json             one JSON object on stdout (with `explain`: the step breakdown)\n"
    "  --explain          also print where the step goes: one stage's step split into forward,\n"
    "                     backward, recompute, optimizer, exposed comm by kind and bubble; memory\n"
    "                     at the highest peak; the MFU's gap to 100% by the same parts\n"
    "  --trace FILE       Chrome Trace Event JSON of the step (one rank per stage)\n\n"
    "A plan that does not fit in memory is a result: fits false, exit 0, a warning.\n";

static const mk_cli_defaults_t sim_defaults = {
    .model = "gpt-8.3b", .cluster = "rtx3090-pcie", .dtype = -1, .gbs = 512,
    .schedule = "1f1b", .recompute = "full", .partition = "uniform",
};

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Per stage: the compute stream's idle share of the step (pipeline bubble
 * and exposed waits: on one stage, the DP reduction's tail), messages in
 * flight, and memory in one unit, picked by the largest peak. */
static void print_stages(const mk_sim_result_t *r)
{
    double top = 0;
    for (int s = 0; s < r->pp; s++) top = fmax(top, r->peak_memory_bytes[s]);
    mk_unit_t u = mk_unit_bytes(top);
    int dec = mk_unit_decimals(top, u, 3), z3 = r->zero == 3; /* the gathered working set: a column of its own */
    char peak[16], gh[16] = "";
    snprintf(peak, sizeof peak, "peak %s", u.name);
    if (z3) snprintf(gh, sizeof gh, "  gathered");
    printf("\n%5s %7s %9s %10s %9s %9s %9s %9s %9s %9s%s   (memory in %s)\n", "stage", "idle", "inflight", peak,
           "weights", "grads", "optim", "activ", "working", "buffers", gh, u.name);
    for (int s = 0; s < r->pp; s++) {
        const mk_mem_breakdown_t *m = &r->mem[s];
        double col[8] = {r->peak_memory_bytes[s], m->weights, m->grads, m->optimizer, m->activations, m->working,
                         m->buffers, m->gathered};
        char c[8][24];
        for (int j = 0; j < 8; j++) mk_fmt_in(c[j], sizeof c[j], col[j], u, dec);
        printf("%5d %6.1f%% %9d %10s %9s %9s %9s %9s %9s %9s", s, 100 * r->bubble_fraction[s], r->max_inflight[s],
               c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
        if (z3) printf(" %9s", c[7]);
        printf("%s\n", r->peak_memory_bytes[s] > r->memory_limit_bytes ? "  > limit" : "");
    }
}

static void print_human(const mk_plan_t *p, const mk_cluster_t *c, const mk_sim_result_t *r)
{
    char rc[48];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    printf("merak sim: %s on %s, %lld GPUs (%s), %s, recompute %s, %s%s\n", p->model.name, c->name,
           (long long)mk_plan_gpus(p), mk_plan_layout_str(p, " x ").s, mk_sched_kind_name(p->schedule), rc,
           mk_dtype_name(p->dtype), mk_cli_fp8_note(p->fp8_recipe));
    char zero[64] = "";
    int dcp = mk_plan_dp_cp(p);
    if (r->zero) snprintf(zero, sizeof zero, ", ZeRO-%d over %d of dp%s %d", r->zero, r->zero_group,
                          p->cp > 1 ? " x cp" : "", dcp);
    if (r->zero && r->zero_group == dcp) snprintf(zero, sizeof zero, ", ZeRO-%d", r->zero);
    printf("  micro-batch %d, global batch %d, %d micro-batches per replica, vpp %d, tp-overlap %d%s%s%s, "
           "attention %s%s\n", p->mbs, p->gbs, p->m, p->vpp, p->tp_overlap, zero,
           !p->seqpar ? "" : p->tp_comm_overlap ? ", sequence parallel with TE's TP communication overlap"
                                                 : ", sequence parallel",
           p->overlap_grad_reduce ? "" : ", DP reduction after the backward", mk_attn_backend_name(p->attention),
           p->cross_entropy == MK_XENT_TORCH ? ", cross entropy torch" : "");
    if (p->eager) printf("  element-wise kernels as eager PyTorch runs them\n");
    if (p->overlap_param_gather) printf("  ZeRO-1's weight all-gather behind the next step's first forward\n");
    if (mk_plan_scatter_gathers(p) && p->pp > 1)
        printf("  pipeline sends scatter-gathered: 1/%d of each tensor a TP rank, all-gathered on arrival\n", p->tp);
    if (mk_plan_zero(p) == 3 && !p->zero3_prefetch) printf("  ZeRO-3 gathers not prefetched: each waits for the layer before it\n");
    if (mk_plan_zero(p) == 3 && p->zero3_per_param)
        printf("  ZeRO-3 collectives per parameter tensor, each copying every rank's shard with a kernel\n");
    if (p->cp > 1 && p->cp_comm != MK_CP_COMM_P2P)
        printf("  context parallelism by %s (--cp-comm-type %s), not overlapped with the attention\n",
               p->cp_comm == MK_CP_COMM_A2A ? "all-to-alls of Q, K, V and the output (Ulysses)"
                                            : "all-gathers of K/V and reduce-scatters of dK/dV",
               mk_cp_comm_name(p->cp_comm));
    if (p->optimizer_offload) /* where the optimizer state went, and whether it fits there */
        printf("  optimizer on the host: %.1f GiB of the node's %.1f GiB host memory\n", r->host_memory_bytes / GIB,
               r->host_limit_bytes / GIB);
    char v[48], w[48];
    mk_unit_t su = mk_unit_seconds(r->step_time_s); /* 4 digits, zeros kept: as merak plan's step column */
    printf("step time        %s %s\n", mk_fmt_in(v, sizeof v, r->step_time_s, su, mk_unit_decimals(r->step_time_s, su, 4)),
           su.name);
    printf("tokens/s         %.1f\n", r->tokens_per_s);
    printf("TFLOP/s per GPU  %.2f   MFU %.1f%%  (Megatron's matmul count: 72·B·s·l·h²-form%s)\n",
           r->tflops_per_gpu, 100 * r->mfu,
           r->flops_recompute ? " + the forwards recomputed (96· with full recompute)" : ", no recompute");
    print_stages(r);
    printf("memory limit %s per GPU: %s", mk_fmt_bytes(v, sizeof v, r->memory_limit_bytes), r->fits ? "fits\n" : "");
    if (!r->fits)
        printf("does NOT fit (stage %d over by %s)\n", r->worst_stage, mk_fmt_bytes(v, sizeof v, r->shortfall_bytes));
    const char *k[] = {"pp (p2p)", "tp (collectives)", "dp (gradients)",
                       p->cp_comm == MK_CP_COMM_ALLGATHER ? "cp (K/V all-gather)"
                       : p->cp_comm == MK_CP_COMM_A2A     ? "cp (all-to-all)"
                                                          : "cp (K/V ring)",
                       "ep (all-to-all)"};
    int shown[MK_COMM_KINDS];
    double top = 0;
    for (int i = 0; i < MK_COMM_KINDS; i++) {
        shown[i] = i < MK_COMM_CP || (i == MK_COMM_CP && r->cp > 1) || (i == MK_COMM_EP && r->ep > 1);
        if (shown[i]) top = fmax(top, fmax(r->exposed_comm_s[i], r->overlapped_comm_s[i]));
    }
    mk_unit_t u = mk_unit_seconds(top); /* one unit and precision for the table */
    int dec = mk_unit_decimals(top, u, 4);
    snprintf(v, sizeof v, "exposed %s", u.name);
    snprintf(w, sizeof w, "overlapped %s", u.name);
    printf("\ncommunication (mean per stage) %*s %*s\n", mk_fmt_width(v, 10), v, mk_fmt_width(w, 13), w);
    for (int i = 0; i < MK_COMM_KINDS; i++)
        if (shown[i])
            printf("  %-29s %10s %13s\n", k[i], mk_fmt_in(v, sizeof v, r->exposed_comm_s[i], u, dec),
                   mk_fmt_in(w, sizeof w, r->overlapped_comm_s[i], u, dec));
}

/* The plan from flags or --plan, resolved against its cluster (cl). */
static int sim_ctx(const mk_args_t *a, mk_cluster_t *cl, mk_plan_ctx_t *ctx)
{
    const mk_cli_defaults_t *d = &sim_defaults;
    const char *cname = a->cluster ? a->cluster : d->cluster;
    int dtype = MK_DTYPE_BF16;
    if (!a->plan_file || a->cluster) {
        if (mk_cluster_get(cname, cl) < 0) return mk_cli_fail("sim", "%s", mk_error_last()), -1;
        dtype = mk_cluster_default_dtype(cl);
    }
    mk_plan_t plan;
    /* --gpus N: dp = N / (tp pp cp), as Megatron-LM derives it from the world size */
    if (a->gpus && !a->plan_file) {
        long per = (long)(a->tp ? a->tp : 1) * (a->pp ? a->pp : 1) * (a->cp ? a->cp : 1);
        if (a->gpus % per || (a->dp && a->dp * per != a->gpus))
            return mk_cli_fail("sim", "--gpus %d is not %s tp x pp x cp = %ld", a->gpus,
                               a->dp ? "dp x" : "a multiple of", a->dp ? a->dp * per : per), -1;
    }
    if (a->gpus && a->plan_file) return mk_cli_fail("sim", "--gpus and --plan: the plan names its layout"), -1;
    if (mk_args_plan(a, d, a->gpus, dtype, &plan) < 0) return -1;
    if (mk_cluster_get(plan.cluster, cl) < 0) return mk_cli_fail("sim", "%s", mk_error_last()), -1;
    mk_plan_resolve_opts_t ro = {.cluster = cl, .resolve_auto = mk_sim_auto};
    return mk_args_resolve(a, d, &plan, &ro, ctx);
}

static int print_result(const mk_args_t *a, const mk_plan_ctx_t *ctx, const mk_sim_result_t *r)
{
    if (!r->fits) /* fixed GiB: recorded by the goldens (tests/golden, stderr of --json cases) */
        fprintf(stderr, "merak sim: warning: the plan does not fit: stage %d peaks at %.2f GiB, %.2f GiB over the "
                        "%.2f GiB limit\n", r->worst_stage, r->peak_memory_bytes[r->worst_stage] / GIB,
                r->shortfall_bytes / GIB, r->memory_limit_bytes / GIB);
    if (!a->json) {
        print_human(&ctx->plan, ctx->cluster, r);
        if (a->explain) mk_cli_explain_print(r);
        return 0;
    }
    json_t *j = mk_sim_result_json(r, &ctx->plan);
    if (!j) return mk_cli_fail("sim", "cannot build the JSON output");
    json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(j);
    return 0;
}

/* Simulate, and close the trace (its metadata names the result). */
static int simulate(const mk_args_t *a, const mk_plan_ctx_t *ctx, mk_sim_result_t *r)
{
    mk_sim_opts_t o;
    mk_sim_opts_init(&o);
    if (a->trace_file && !(o.trace = mk_trace_open(a->trace_file))) return mk_cli_fail("sim", "%s", mk_error_last());
    mk_sim_t *sim = mk_sim_new(ctx->cluster);
    int rc = sim ? mk_sim_run(sim, ctx, &o, r) : -1;
    mk_sim_free(sim);
    if (rc < 0) {
        mk_trace_abort(o.trace);
        return mk_cli_fail("sim", "%s", mk_error_last());
    }
    if (o.trace) {
        char buf[64];
        mk_trace_meta(o.trace, "source", "merak sim");
        snprintf(buf, sizeof buf, "%.9g", r->step_time_s);
        mk_trace_meta(o.trace, "step_time_s", buf);
        mk_plan_trace_meta(&ctx->plan, o.trace);
        if (mk_trace_close(o.trace) < 0) return mk_cli_fail("sim", "%s", mk_error_last());
    }
    return 0;
}

int mk_cmd_sim(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_MODEL | MK_OPTG_LAYOUT | MK_OPTG_SCHED | MK_OPTG_SIM | MK_OPTG_JSON |
                           MK_OPTG_EXPLAIN, sim_usage, &sim_defaults);
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    if (a.npos) return mk_cli_fail("sim", "unexpected argument '%s'", a.pos[0]);
    if (a.verify) return mk_cli_fail("sim", "--verify belongs to 'merak sched'");
    if (mk_args_check_outputs(&a, 0)) return MK_EXIT_USAGE;
    if ((rc = mk_args_micro_batches(&a))) return rc;
    mk_cluster_t cl;
    mk_plan_ctx_t ctx;
    if (sim_ctx(&a, &cl, &ctx) < 0) return MK_EXIT_USAGE;
    if (a.export_to) { /* the plan as another engine's command: stdout holds only it */
        rc = mk_cli_export(&a, &ctx.plan, &cl);
        mk_plan_ctx_free(&ctx);
        return rc;
    }
    static mk_sim_result_t r;
    rc = simulate(&a, &ctx, &r);
    if (rc == 0) rc = print_result(&a, &ctx, &r);
    mk_plan_ctx_free(&ctx);
    return rc;
}
