/* `merak plan`: search plans, print the best K with why #1 wins, save the
 * best as a plan file, trace it.  Under mpiexec the ranks split the
 * simulations and rank 0 merges their top-K lists. */
#include "merak/trace.h"
#include "merak/jsonio.h"
#include "config.h"
#include "cli/cli.h"
#include "cli/cli_explain.h"
#include "merak/run.h"
#include "merak/planner.h"

#include <math.h>
#if defined(__GLIBC__)
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#endif
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *plan_usage =
    "usage: merak plan [--model M] [--cluster C] [--gpus N] [--gbs B] [--dtype D] [--top K]\n"
    "                  [--attention-backend A] [--cross-entropy X] [--elementwise E] [--fp8-recipe R]\n"
    "                  [--grad-reduce-dtype D]\n"
    "                  [--tp-comm-overlap] [--overlap-param-gather] [--scatter-gather-tensors-in-pipeline]\n"
    "                  [--json] [--trace FILE] [--save-plan FILE] [model flags]\n"
    "       mpiexec -n R merak plan ...   (the ranks share the simulations)\n\n"
    "Search every (dp, cp, pp, tp) layout of N GPUs (cp > 1 where the sequence is at least\n"
    "4096 tokens in chunks of at least 512), micro-batch size, schedule (1f1b,\n"
    "interleaved, merak, zb-h1, looped-bfs, zb-h2, zb-v, dualpipev), recompute policy (none,\n"
    "full, selective, stage-aware, auto), sequence parallelism, TP overlap, ZeRO 0-3 (over the\n"
    "DP group or a node's DP ranks) and partitioning, and for MoE models the expert parallel\n"
    "size ep (every divisor of dp that divides the experts; the table adds ep and the\n"
    "all-to-alls' share of the step); rank candidates by\n"
    "a lower bound, simulate the survivors, and print the K fastest plans that fit.\n\n"
    "  --model M        preset, JSON description, or a Hugging Face config.json or its\n"
    "                   directory (default @model@)\n"
    "  --cluster C      preset or cluster JSON (default @cluster@)\n"
    "  --gpus N         GPUs to use (default @gpus@)\n"
    "  --gbs B          global batch in sequences (default @gbs@)\n"
    "  --dtype D        fp16, bf16, fp32, or fp8 on devices with FP8 tensor cores (default: the\n"
    "                   cluster's 16-bit type; fp8 is never chosen unless given)\n"
    "  --top K          plans to show (default @top@)\n"
    "  --attention-backend A  flash, fused, unfused or auto (default: flash where the\n"
    "                   cluster's GPU has a fused kernel, else unfused); --use-flash-attn: flash\n"
    "  --cross-entropy X  vocab-parallel (default, Megatron-LM's), torch (PyTorch's\n"
    "                   F.cross_entropy, torchtitan's), fused or fused-te (Megatron-Core's\n"
    "                   --cross-entropy-loss-fusion, native or TE): the loss in every plan\n"
    "  --elementwise E  fused (default: one kernel per norm, RoPE and SwiGLU, as Megatron-LM,\n"
    "                   TE and torch.compile run them) or eager (PyTorch eager ops, as torchtitan\n"
    "                   without torch.compile): every plan's element-wise time\n"
    "  --fp8-recipe R   --dtype fp8: delayed (default), tensorwise or torchao (merak sim --help)\n"
    "  --grad-reduce-dtype D  every plan's gradients and DP reduction: fp32 (the default for\n"
    "                   bf16 and fp8, Megatron-LM's) or the plan's 16-bit type (fp16's default;\n"
    "                   bf16: NeMo's grad_sync_dtype); --accumulate-allreduce-grads-in-fp32: fp32\n"
    "  --cp-comm-type T  every plan's context parallelism (cp > 1): p2p (the K/V ring, default),\n"
    "                   allgather or a2a (Ulysses), Megatron-LM's names (merak sim --help)\n"
    "  --moe-imbalance F  MoE: the busiest expert's load over the mean in every plan (default 1)\n"
    "  --moe-enable-deepep  MoE: every plan's all-to-alls by DeepEP (merak sim --help)\n"
    "  --overlap-moe-expert-parallel-comm  MoE: every plan Megatron-Core can run so merges its\n"
    "                   1F1B steps, hiding the all-to-alls (merak sim --help)\n"
    "  --tp-comm-overlap  every sequence-parallel plan with tp > 1 runs Transformer Engine's TP\n"
    "                   communication overlap, as Megatron-Core's H100 recipes do (merak sim --help;\n"
    "                   merak run refuses such a plan)\n"
    "  --overlap-param-gather  every ZeRO-1 plan gathers its updated weights behind the next\n"
    "                   step's forward (Megatron-Core's; merak sim --help; merak run refuses it)\n"
    "  --scatter-gather-tensors-in-pipeline  every plan's pipeline sends split over TP and\n"
    "                   all-gathered (Megatron-LM 2021-22, DeepSpeed; merak sim --help)\n"
    "  --baseline S     search only what a system does: megatron (uniform partition, 1f1b or\n"
    "                   interleaved, full recompute, no TP overlap), megatron-sp (adds sequence\n"
    "                   parallelism, selective recompute, distributed optimizer), deepspeed\n"
    "                   (parameter partition, 1f1b, full recompute), merak (merak schedule,\n"
    "                   stage-aware/auto recompute, compute partition, sub-pipelined TP), fsdp\n"
    "                   (ZeRO-3 data parallelism, optionally TP, no PP; none or full recompute;\n"
    "                   whole-group or node sharding), all\n"
    "  --export T       print the best plan engine T runs, searching its space, on stdout:\n"
    "                   megatron (one torchrun ... pretrain_gpt.py command), torchtitan (its\n"
    "                   v0.2.2 job TOML), deepspeed (ds_config.json; the Megatron-DeepSpeed\n"
    "                   arguments on stderr)\n"
    "  --schedules L    search only these schedules (comma-separated names, torchtitan's too:\n"
    "                   --schedules 1F1B,Interleaved1F1B,ZBVZeroBubble; default: every one)\n"
    "  --save-plan F    write the best plan (runs unchanged under merak sim/run --plan)\n"
    "  --trace F        Chrome trace of the best plan's simulated step\n"
    "  --json           one JSON object: plans (best first, each with the sim keys),\n"
    "                   evaluated, simulated, search_time_s\n"
    "  --explain        #1's step breakdown, memory and MFU gap, the best plan of each\n"
    "                   --baseline system (megatron, megatron-sp, deepspeed, merak, fsdp), and\n"
    "                   the best without each of #1's choices (its PP, TP, CP, ZeRO, schedule),\n"
    "                   each with where #1 gains on it (--json: baselines, families)\n"
    "  --what-if        --explain's baselines, and the search again with the cluster changed one\n"
    "                   knob at a time: intra- and inter-node bandwidth x2 and /2, device FLOP/s\n"
    "                   x2, device memory x2, GPUs x2 and /2 (--json: what_if)\n"
    "  --gpus N1,N2,... the best plan per GPU count and its scaling efficiency (tokens/s per\n"
    "                   GPU over the smallest count's; --json: scaling); the table is N1's\n"
    "  --train-tokens N, --gpu-hour-price P  each plan's time and GPU-hours to train N tokens,\n"
    "                   and its cost at P dollars per GPU-hour\n"
    "  --objective time|cost  which --gpus count is best: the fastest (default) or the most\n"
    "                   tokens per GPU-hour; at one GPU count the two rank plans alike\n";

static const mk_cli_defaults_t plan_defaults = {
    .model = "gpt-8.3b", .cluster = "rtx3090-pcie", .dtype = -1, .gbs = 512, .gpus = 64, .top = 5,
};

/* The search's progress bar on stderr: redrawn at most every 0.1 s and
 * at each phase change; generating fills it by layouts, simulating by
 * the candidates simulated of those the bound has not yet ruled out (so
 * that ETA is an upper bound: the bound only prunes more). */
typedef struct {
    int phase;
    double phase_t0, drawn_t; /* elapsed_s at the phase's start, at the last redraw */
} mk_bar_t;

static void progress(void *ctx, const mk_planner_progress_t *p)
{
    mk_bar_t *b = ctx;
    if (p->phase != b->phase) b->phase = p->phase, b->phase_t0 = p->elapsed_s, b->drawn_t = -1;
    else if (p->elapsed_s - b->drawn_t < 0.1) return;
    b->drawn_t = p->elapsed_s;
    long done = p->phase == 0 ? p->combos_done : p->simulated + p->pruned_bound;
    long total = p->phase == 0 ? p->combos : done + p->left_at_most; /* the bound shrinks it */
    int w = 30, k = p->phase == 2 || total <= 0 ? w : (int)(w * done / total);
    double t = p->elapsed_s - b->phase_t0, eta = done > 0 && done < total ? t * (total - done) / done : 0;
    char msg[200], e[32] = "";
    if (p->phase < 2 && done > 0) mk_fmt_seconds(e, sizeof e, eta);
    if (p->phase == 0)
        snprintf(msg, sizeof msg, "1/2 generating: %ld/%ld layouts, %ld candidates%s%s", done, total,
                 p->candidates, e[0] ? ", ETA " : "", e);
    else if (p->phase == 1)
        snprintf(msg, sizeof msg, "2/2 simulating: %ld simulated, at most %ld to go; %ld settled, %ld fit%s%s",
                 p->simulated, p->left_at_most, p->settled, p->fit, e[0] ? ", ETA at most " : "", e);
    else {
        mk_fmt_seconds(e, sizeof e, p->elapsed_s);
        snprintf(msg, sizeof msg, "done: %ld layouts, %ld candidates, %ld settled, %ld over memory, %ld duplicates, "
                 "%ld simulated, %ld pruned by bound, %s", p->combos_done, p->candidates, p->settled, p->pruned_memory,
                 p->duplicates, p->simulated, p->pruned_bound, e);
    }
    fprintf(stderr, "\rplan [%.*s%*s] %-90s", k, "##############################", w - k, "", msg);
    if (p->phase == 2) fputc('\n', stderr);
    fflush(stderr);
}

/* with_cp: a cp column after dp (only when a listed plan uses CP, so that
 * every other table reads as before); moe: an ep column after them and
 * the all-to-alls' share of the step last (MoE models only, likewise) */
/* The peak memory of a plan's most loaded stage. */
static double plan_peak(const mk_sim_result_t *r)
{
    double peak = 0;
    for (int s = 0; s < r->pp; s++)
        if (r->peak_memory_bytes[s] > peak) peak = r->peak_memory_bytes[s];
    return peak;
}

/* The table's columns in one unit and precision each: step time by the
 * best plan's, memory by the largest peak. */
typedef struct {
    mk_unit_t us, ub;
    int ds, db;
} mk_plan_cols_t;

static void print_plan_row(int i, const mk_planner_entry_t *e, int with_cp, int moe, const mk_plan_cols_t *u)
{
    const mk_plan_t *p = &e->plan;
    const mk_sim_result_t *r = &e->res;
    char rc[32];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    double mb = 0; /* the compute stream's idle share, mean over stages */
    for (int s = 0; s < r->pp; s++) mb += r->bubble_fraction[s] / r->pp;
    char step[24], peak[24];
    mk_fmt_in(step, sizeof step, r->step_time_s, u->us, u->ds);
    mk_fmt_in(peak, sizeof peak, plan_peak(r), u->ub, u->db);
    char z[16]; /* the ZeRO stage, /k over a hybrid group of k */
    snprintf(z, sizeof z, p->zero_shard ? "%d/%d" : "%d", p->zero, p->zero_shard);
    char cp[16] = "", a2a[16] = "", part[24], ov[8]; /* ov: the sub-pipelined TP level, or te (TE's overlap) */
    snprintf(ov, sizeof ov, p->tp_comm_overlap ? "te" : "%d", p->tp_overlap);
    snprintf(cp, sizeof cp, with_cp ? " %3d" : "", p->cp);
    /* uniform with uneven first / last stages: "uni F/L" */
    if (p->first_stage_layers || p->last_stage_layers)
        snprintf(part, sizeof part, "uni %d/%d", p->first_stage_layers, p->last_stage_layers);
    else mk_strlcpy(part, p->partition, sizeof part);
    if (moe) { /* the ep column, and the exposed all-to-alls (mean per stage) over the step */
        snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " %3d", p->ep);
        snprintf(a2a, sizeof a2a, " %5.1f%%", r->step_time_s > 0 ? 100 * r->exposed_comm_s[MK_COMM_EP] / r->step_time_s : 0);
    }
    printf(" %2d  %3d%s %3d %3d %3d %4d %4d  %-11s %-15s %2s %2s %2s %-9s %9s %10.0f %8.1f %5.1f%% %6.1f%% %8s%s\n",
           i + 1, p->dp, cp, p->pp, p->tp, p->vpp, p->mbs, p->m, mk_sched_kind_name(p->schedule), rc,
           p->seqpar ? "on" : "-", ov, z, part, step, r->tokens_per_s, r->tflops_per_gpu,
           100 * r->mfu, 100 * mb, peak, a2a);
}

static int report_no_fit(const mk_planner_result_t *r)
{
    if (!r->have_closest) return mk_cli_fail("plan", "no candidate plan could be simulated");
    const mk_plan_t *p = &r->closest;
    const mk_mem_breakdown_t *m = &r->closest_mem;
    double state = m->weights + m->grads + m->optimizer;
    const char *knob = state > m->activations
                           ? "more GPUs (more pipeline or tensor parallelism) or a device with more memory"
                           : "a smaller global batch or micro-batch, or more GPUs";
    /* fixed GiB: recorded by the goldens (tests/golden/plan.jsonl.gz, stderr) */
    return mk_cli_fail("plan", "no plan fits: the closest (%s, mbs %d, %s) needs %.2f GiB more "
                       "on stage %d (weights+grads+optimizer %.2f GiB, activations %.2f GiB); try %s",
                       mk_plan_layout_str(p, ", ").s, p->mbs, mk_sched_kind_name(p->schedule),
                       r->closest_shortfall / (1 << 30), r->closest_stage, state / (1 << 30),
                       m->activations / (1 << 30), knob);
}

static int print_json(const mk_planner_result_t *r, long evaluated, const mk_args_t *a, const mk_cli_extras_t *x)
{
    json_t *plans = json_array();
    int cost = a->train_tokens > 0 || a->gpu_hour_price > 0 || a->objective; /* issue 21: only when asked */
    for (int i = 0; i < r->n; i++) {
        json_t *pj = mk_sim_result_json(&r->best[i].res, &r->best[i].plan);
        if (cost && pj) mk_cli_plan_cost_json(a, &r->best[i], pj);
        json_array_append_new(plans, pj);
    }
    json_t *o = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "plans", plans, "evaluated",
                          (json_int_t)evaluated, "settled", (json_int_t)r->settled, "over_memory",
                          (json_int_t)r->pruned_memory, "duplicates", (json_int_t)r->duplicates, "simulated",
                          (json_int_t)r->simulated, "pruned_by_bound", (json_int_t)r->pruned_bound, "layouts",
                          (json_int_t)r->layouts, "search_time_s", r->search_time_s);
    if (r->offloaded) json_object_set_new(o, "optimizer_offloaded", json_true()); /* the second search's */
    if (r->n > 1) {
        char why[512];
        mk_planner_explain(r->best, r->n, why, sizeof why);
        json_object_set_new(o, "why", json_string(why));
    }
    mk_cli_plan_extras_json(a, &r->best[0], x, o);
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(o);
    return 0;
}

/* The why line: the planner's comparison (mk_planner_why), its figures in
 * units and named (the JSON "why" keeps mk_planner_explain's text). */
static void print_why(const mk_planner_entry_t *best, int n)
{
    mk_planner_why_t w;
    int k = mk_planner_runner_up(best, n);
    mk_planner_why(&best[0], &best[k], &w);
    char x[32], y[32], tw[160];
    mk_planner_twins(best, k, tw, sizeof tw);
    if (w.tie[0]) /* equal steps: the stated tie order decided */
        printf("why: #1 and #%d tie at %s per step (#1 vs #%d: %s); the tie goes to #1 by %s", k + 1,
               mk_fmt_seconds(x, sizeof x, best[0].res.step_time_s), k + 1, w.knobs, w.tie);
    else
        printf("why: #1 is %s faster than #%d (#1 vs #%d: %s); #1 spends less on %s: %s vs %s per step", w.faster, k + 1,
               k + 1, w.knobs, w.what_long, mk_fmt_seconds(x, sizeof x, w.a_s), mk_fmt_seconds(y, sizeof y, w.b_s));
    printf("%s%s\n", tw[0] ? "; " : "", tw);
}

static void print_human(const mk_planner_result_t *r, const mk_plan_t *base, const mk_planner_opts_t *o,
                        const mk_args_t *a)
{
    char t[32], g[32];
    /* every candidate's attention, settled (auto) by the search */
    printf("merak plan: %s on %d GPUs of %s, global batch %d, %s%s, attention %s\n", base->model.name, o->gpus,
           base->cluster, o->gbs, mk_dtype_name(o->dtype), o->dtype == MK_DTYPE_FP8 ? mk_cli_fp8_note(o->fp8_recipe) : "",
           mk_attn_backend_name(r->best[0].plan.attention));
    printf("searched %ld candidates in %ld layouts (%ld settled: %ld over memory, %ld duplicates; %ld simulated, "
           "%ld pruned by bound) in %s (%s generating)\n",
           r->candidates, r->layouts, r->settled, r->pruned_memory, r->duplicates, r->simulated, r->pruned_bound,
           mk_fmt_seconds(t, sizeof t, r->search_time_s), mk_fmt_seconds(g, sizeof g, r->enumerate_time_s));
    if (r->offloaded)
        printf("nothing fits on the GPUs alone: these plans keep the optimizer in host memory "
               "(--optimizer-cpu-offload)\n");
    int with_cp = 0;
    double top = 0;
    for (int i = 0; i < r->n; i++) with_cp |= r->best[i].plan.cp > 1, top = fmax(top, plan_peak(&r->best[i].res));
    int moe = mk_model_is_moe(&base->model);
    double best = r->n ? r->best[0].res.step_time_s : 0;
    mk_plan_cols_t u = {mk_unit_seconds(best), mk_unit_bytes(top), 0, 0};
    u.ds = mk_unit_decimals(best, u.us, 4), u.db = mk_unit_decimals(top, u.ub, 3);
    char sh[16], ph[16];
    snprintf(sh, sizeof sh, "step %s", u.us.name);
    snprintf(ph, sizeof ph, "peak %s", u.ub.name);
    printf("  #   dp%s%s  pp  tp vpp  mbs    m  schedule    recompute       sp ov  z partition %*s      tok/s  "
           "TFLOP/s   MFU    idle %*s%s\n", with_cp ? "  cp" : "", moe ? "  ep" : "", mk_fmt_width(sh, 9), sh,
           mk_fmt_width(ph, 8), ph, moe ? "   a2a" : "");
    for (int i = 0; i < r->n; i++) print_plan_row(i, &r->best[i], with_cp, moe, &u);
    if (r->n > 1) print_why(r->best, r->n);
    printf("(idle: the compute stream's idle share of the step, mean over stages: the pipeline bubble and "
           "exposed waits)\n");
    for (int i = 0; i < r->n; i++) mk_cli_plan_cost_human(a, &r->best[i], i);
    if (a->objective && !strcmp(a->objective, "cost") && a->n_gpus_list < 2)
        printf("objective cost: at one GPU count cost is GPUs x time, so the ranking is the time's\n");
}

/* The best plan: save it and trace its simulated step (rank 0). */
static int finish_best(const mk_args_t *a, const mk_cluster_t *cl, mk_planner_entry_t *best)
{
    if (a->save_plan && mk_plan_save(&best->plan, a->save_plan) < 0)
        return mk_cli_fail("plan", "%s", mk_error_last());
    if (!a->trace_file) return 0;
    mk_plan_resolve_opts_t ro = {.cluster = cl, .resolve_auto = mk_sim_auto};
    mk_plan_ctx_t ctx;
    if (mk_plan_resolve(&ctx, &best->plan, &ro) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    mk_sim_t *sim = mk_sim_new(cl);
    mk_sim_opts_t so;
    mk_sim_opts_init(&so);
    so.trace = mk_trace_open(a->trace_file);
    mk_sim_result_t res;
    int rc = (sim && so.trace) ? mk_sim_run(sim, &ctx, &so, &res) : -1;
    if (rc == 0) {
        mk_trace_meta(so.trace, "source", "merak plan (the best plan, simulated)");
        mk_plan_trace_meta(&ctx.plan, so.trace);
    }
    if (so.trace && (rc < 0 ? (mk_trace_abort(so.trace), -1) : mk_trace_close(so.trace)) < 0) rc = -1;
    mk_sim_free(sim);
    mk_plan_ctx_free(&ctx);
    return rc < 0 ? mk_cli_fail("plan", "%s", mk_error_last()) : 0;
}

/* --export megatron: search only what Megatron-LM runs (mk_plan_export_
 * megatron: 1f1b or interleaved, none / full / selective recompute, the
 * distributed optimizer as ZeRO-1 over the DP group, the uniform split
 * (uneven ends too), no sub-pipelined TP), within a --baseline's. */
/* --export torchtitan: its schedules, none or full recompute, FSDP
 * (ZeRO-3, its default, over the group or a node's: HSDP), the even
 * uniform split; the plans with TP but no SP it cannot run are passed over
 * at the end (export_best). */
static int apply_titan(mk_planner_opts_t *o)
{
    unsigned s = 1u << MK_SCHED_GPIPE | 1u << MK_SCHED_1F1B | 1u << MK_SCHED_INTERLEAVED | 1u << MK_SCHED_LOOPED_BFS |
                 1u << MK_SCHED_ZB_V | 1u << MK_SCHED_DUALPIPEV;
    o->sched_mask = (o->sched_mask ? o->sched_mask : MK_PLANNER_SCHEDULES) & s;
    o->recompute_mask = (o->recompute_mask ? o->recompute_mask : 0x1fu) & (1u << MK_RECOMPUTE_NONE | 1u << MK_RECOMPUTE_FULL);
    o->partition_mask = 1u, o->tp_overlap = 0, o->refine = 0, o->zero = 3;
    if (o->top < 16) o->top = 16; /* room for the ones it cannot run */
    return o->sched_mask && o->recompute_mask ? 0 : mk_error_set("--export torchtitan: the --baseline leaves nothing "
                                                                 "torchtitan runs");
}

/* --export deepspeed: its pipeline engine's 1f1b and ZeRO-1 (ZeRO-0..3
 * without PP: export_best passes over what it cannot run), none or full
 * recompute, no CP, no hybrid group. */
static int apply_ds(mk_planner_opts_t *o)
{
    o->sched_mask = (o->sched_mask ? o->sched_mask : MK_PLANNER_SCHEDULES) & 1u << MK_SCHED_1F1B;
    o->recompute_mask = (o->recompute_mask ? o->recompute_mask : 0x1fu) & (1u << MK_RECOMPUTE_NONE | 1u << MK_RECOMPUTE_FULL);
    o->tp_overlap = 0, o->refine = 0, o->zero_hybrid = 0, o->max_cp = 1;
    if (o->top < 16) o->top = 16;
    return o->sched_mask && o->recompute_mask ? 0 : mk_error_set("--export deepspeed: the --baseline leaves nothing "
                                                                 "DeepSpeed runs");
}

static int apply_export(const mk_args_t *a, mk_planner_opts_t *o)
{
    if (!a->export_to) return 0;
    if (o->tp_comm_overlap && strcmp(a->export_to, "megatron"))
        return mk_error_set("--tp-comm-overlap is Megatron-Core's (Transformer Engine's userbuffers): --export %s "
                            "runs no such overlap", a->export_to);
    if (o->overlap_param_gather && strcmp(a->export_to, "megatron"))
        return mk_error_set("--overlap-param-gather is Megatron-Core's (its distributed optimizer): --export %s "
                            "runs no such overlap", a->export_to);
    if (o->scatter_gather_p2p && strcmp(a->export_to, "deepspeed"))
        return mk_error_set("--scatter-gather-tensors-in-pipeline is Megatron-LM 2021-22's and DeepSpeed's: --export %s "
                            "sends whole tensors", a->export_to);
    if (!strcmp(a->export_to, "torchtitan")) return apply_titan(o);
    if (!strcmp(a->export_to, "deepspeed")) return apply_ds(o);
    if (strcmp(a->export_to, "megatron"))
        return mk_error_set("--export %s: megatron, torchtitan or deepspeed", a->export_to);
    unsigned s = 1u << MK_SCHED_1F1B | 1u << MK_SCHED_INTERLEAVED, r = 1u << MK_RECOMPUTE_NONE |
                 1u << MK_RECOMPUTE_FULL | 1u << MK_RECOMPUTE_SELECTIVE;
    o->sched_mask = (o->sched_mask ? o->sched_mask : MK_PLANNER_SCHEDULES) & s;
    o->recompute_mask = (o->recompute_mask ? o->recompute_mask : 0x1fu) & r;
    o->partition_mask = 1u, o->tp_overlap = 0, o->zero_hybrid = 0, o->refine = 0; /* refine: bounds of its own */
    if (o->zero > 1) return mk_error_set("--export megatron: ZeRO-%d is not Megatron-LM's", o->zero);
    if (o->zero < 0 && o->zero_max > 1) o->zero_max = 1;
    return o->sched_mask && o->recompute_mask ? 0 : mk_error_set("--export megatron: the --baseline leaves nothing "
                                                                 "Megatron-LM runs");
}

/* The best of the search's plans the target runs (torchtitan: not the TP
 * ones without SP), as its command or config on stdout. */
static int export_best(const mk_args_t *a, const mk_planner_result_t *r, const mk_cluster_t *cl)
{
    int titan = !strcmp(a->export_to, "torchtitan"), ds = !strcmp(a->export_to, "deepspeed");
    char tmp[8192], tmp2[8192];
    for (int i = 0; i < r->n; i++) {
        const mk_planner_entry_t *e = &r->best[i];
        if (titan && mk_plan_export_torchtitan(&e->plan, tmp, sizeof tmp) < 0) continue;
        if (ds && mk_plan_export_deepspeed(&e->plan, tmp, sizeof tmp, tmp2, sizeof tmp2) < 0) continue;
        fprintf(stderr, "merak plan: the best plan %s runs: %s, %s, step %.9g s, %.0f tokens/s\n",
                titan ? "torchtitan" : ds ? "DeepSpeed" : "Megatron-LM", mk_plan_layout_str(&e->plan, " x ").s,
                mk_sched_kind_name(e->plan.schedule), e->res.step_time_s, e->res.tokens_per_s);
        return mk_cli_export(a, &e->plan, cl);
    }
    return mk_cli_export(a, &r->best[0].plan, cl); /* none: the first's reason */
}

/* --schedules a,b,...: search only those (torchtitan's names too), within
 * a --baseline's. */
static int apply_schedules(const char *list, mk_planner_opts_t *o)
{
    if (!list) return 0;
    unsigned mask = 0;
    char name[64];
    for (const char *s = list; ; s++) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof name) return mk_error_set("--schedules: empty or too long a name in '%s'", list);
        memcpy(name, s, n), name[n] = 0;
        mk_sched_kind_t k;
        if (mk_sched_kind_parse(name, &k) < 0) return mk_error_set("--schedules: %s", mk_error_last());
        mask |= 1u << k;
        s += n;
        if (!*s) break;
    }
    if (o->sched_mask && !(mask &= o->sched_mask))
        return mk_error_set("--schedules %s: none of them is in the --baseline's space", list);
    o->sched_mask = mask;
    return 0;
}

/* Restrict the space to one system's choices (the Merak experiment). */
static int apply_baseline(const char *b, mk_planner_opts_t *o)
{
#define SB(k) (1u << (k))
    if (!b || !strcmp(b, "all")) return 0;
    o->seqpar = 0, o->tp_overlap = 0, o->zero = 0;
    if (!strcmp(b, "megatron") || !strcmp(b, "megatron-sp")) {
        o->sched_mask = SB(MK_SCHED_1F1B) | SB(MK_SCHED_INTERLEAVED);
        o->recompute_mask = SB(MK_RECOMPUTE_FULL);
        o->partition_mask = 1u;
        if (b[8]) { /* the distributed optimizer: ZeRO-1 over the whole DP group */
            o->recompute_mask |= SB(MK_RECOMPUTE_SELECTIVE);
            o->seqpar = -1, o->zero = -1, o->zero_max = 1, o->zero_hybrid = 0;
        }
    } else if (!strcmp(b, "deepspeed")) { /* its pipeline engine takes ZeRO-1 at most */
        o->sched_mask = SB(MK_SCHED_1F1B);
        o->recompute_mask = SB(MK_RECOMPUTE_FULL);
        o->partition_mask = 2u;
        o->zero = -1, o->zero_max = 1, o->zero_hybrid = 0;
    } else if (!strcmp(b, "fsdp")) { /* PyTorch FSDP: ZeRO-3 data parallelism, optionally TP, no PP */
        o->sched_mask = SB(MK_SCHED_1F1B);
        o->recompute_mask = SB(MK_RECOMPUTE_NONE) | SB(MK_RECOMPUTE_FULL);
        o->partition_mask = 1u;
        o->zero = 3, o->max_pp = 1;
    } else if (!strcmp(b, "merak")) {
        o->sched_mask = SB(MK_SCHED_MERAK);
        o->recompute_mask = SB(MK_RECOMPUTE_STAGE_AWARE) | SB(MK_RECOMPUTE_AUTO);
        o->partition_mask = 4u;
        o->tp_overlap = -1;
    } else {
        return mk_error_set("unknown --baseline '%s' (megatron, megatron-sp, deepspeed, merak, fsdp, all)", b);
    }
    o->refine = !strcmp(b, "merak") ? -1 : 0;
    return 0;
#undef SB
}

/* The main search, over the ranks under mpiexec (mk_planner_search_mpi).
 * 0, or the error printed by rank 0 (the lowest failing rank's) and
 * MK_EXIT_USAGE. */
static int search(const mk_model_config_t *m, const mk_cluster_t *cl, mk_planner_opts_t *o, mk_planner_result_t *r)
{
    if (mk_planner_search_mpi(m, cl, o, NULL, r) == 0) return 0; /* over MPI_COMM_WORLD */
    return o->rank == 0 ? mk_cli_fail("plan", "%s", mk_error_last()) : MK_EXIT_USAGE;
}

static int plan_main(const mk_args_t *a, int rank, int size)
{
    mk_plan_t base; /* the search's model and cluster */
    mk_plan_init(&base);
    mk_cluster_t cl;
    const mk_cli_defaults_t *d = &plan_defaults;
    if (mk_args_model(a, d->model, &base.model) < 0) return MK_EXIT_USAGE;
    mk_strlcpy(base.cluster, a->cluster ? a->cluster : d->cluster, sizeof base.cluster);
    if (mk_cluster_get(base.cluster, &cl) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    mk_planner_opts_t o;
    mk_planner_opts_init(&o);
    o.dtype = mk_cluster_default_dtype(&cl);
    if (a->dtype && mk_dtype_parse(a->dtype, &o.dtype) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    o.gpus = a->gpus ? a->gpus : d->gpus;
    o.gbs = a->gbs ? a->gbs : d->gbs;
    o.top = a->top > 0 ? a->top : d->top;
    o.moe_imbalance = a->moe_imbalance;
    o.tp_comm_overlap = a->tp_comm_overlap;
    o.overlap_param_gather = a->overlap_param_gather;
    o.scatter_gather_p2p = a->scatter_gather_p2p;
    if (mk_args_attention(a, &o.attention) < 0 || mk_args_xent(a, &o.cross_entropy) < 0 ||
        mk_args_deepep(a, &o.moe_deepep) < 0 || mk_args_a2a_overlap(a, &o.moe_a2a_overlap) < 0 ||
        mk_args_elementwise(a, &o.eager) < 0 || mk_args_fp8_recipe(a, &o.fp8_recipe) < 0 ||
        mk_args_grad_dtype(a, &o.grad_reduce_dtype) < 0)
        return MK_EXIT_USAGE;
    if (o.attention == MK_ATTN_UNFUSED) o.max_cp = 1; /* CP runs fused kernels only (plan.c check_cp_comm) */
    mk_cp_comm_t cc = MK_CP_COMM_P2P;
    if (a->cp_comm && mk_cp_comm_parse(a->cp_comm, &cc) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    o.cp_comm = (int)cc;
    base.dtype = o.dtype, base.grad_reduce_dtype = o.grad_reduce_dtype;
    if (mk_plan_check_grad_dtype(&base) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    if (a->moe_imbalance > 0) base.moe_imbalance = a->moe_imbalance; /* the plans' rule, checked once here */
    base.moe_deepep = o.moe_deepep;
    if (mk_plan_check_ep(&base) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
    o.rank = rank, o.size = size;
    if (apply_baseline(a->baseline, &o) < 0 || apply_export(a, &o) < 0 || apply_schedules(a->schedules, &o) < 0)
        return mk_cli_fail("plan", "%s", mk_error_last());
    if (mk_cli_plan_check(a)) return MK_EXIT_USAGE;
    /* on a terminal; MERAK_PROGRESS=1 forces it (tests), =0 silences it */
    const char *force = getenv("MERAK_PROGRESS");
    mk_bar_t bar = {-1, 0, 0};
    if (rank == 0 && (force && *force ? strcmp(force, "0") != 0 : isatty(2)))
        o.progress = progress, o.progress_ctx = &bar;
    mk_planner_result_t r;
    int rc = search(&base.model, &cl, &o, &r);
    long evaluated = r.candidates;
    if (rc == 0 && rank == 0) {
        if (r.n == 0) rc = report_no_fit(&r);
        else if (o.refine && mk_planner_refine(&cl, &r.best[0], 4 * r.best[0].plan.pp) < 0)
            rc = mk_cli_fail("plan", "%s", mk_error_last());
    }
    if (size > 1) MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD); /* every rank runs the alternatives, or none */
    static mk_plan_t bp; /* #1's plan on every rank: the why's families follow from it (plain data) */
    int have = rank == 0 && r.n > 0;
    if (rank == 0 && have) bp = r.best[0].plan;
    if (size > 1) MPI_Bcast(&have, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (size > 1 && have) MPI_Bcast(&bp, (int)sizeof bp, MPI_BYTE, 0, MPI_COMM_WORLD);
    static mk_cli_extras_t x; /* issue 21: nothing runs without its flags */
    if (rc == 0) rc = mk_cli_plan_extras(a, &base.model, &cl, &o, r.n ? &r.best[0] : NULL, have ? &bp : NULL, &x);
    if (rc == 0 && rank == 0 && a->export_to) { /* stdout holds only the command */
        rc = export_best(a, &r, &cl);
    } else if (rc == 0 && rank == 0) {
        if (a->json) print_json(&r, evaluated, a, &x);
        else print_human(&r, &base, &o, a), mk_cli_plan_extras_human(a, &r.best[0], &x);
        rc = finish_best(a, &cl, &r.best[0]);
    }
    mk_planner_result_free(&r);
    return rc;
}

/* A search allocates and frees its graphs, streams and simulations by the
 * megabyte, over and over: glibc would map each above 128 KB afresh and
 * give the top of the heap back at every free, so the 405B search took
 * 27,000 page faults (0.04 s of kernel time, 8% of its wall).  Kept
 * mapped, freed memory is reused (21,000 faults; the peak a few MB
 * higher), as run keeps its activations' (exec/runtime.c).  The heap's
 * first MK_PLAN_HEAP_MB are mapped at once and marked for transparent
 * huge pages (where the kernel gives them on request, its "madvise" mode):
 * the 405B search's 16,000 faults of 4 KB pages become ~1,900 (0.51 ->
 * 0.48 s median wall on a 2-core AMD EPYC VM, RSS 72 -> 80 MB; what is
 * never touched takes no memory). */
#define MK_PLAN_HEAP_MB 128
static void plan_malloc_tuning(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, (MK_PLAN_HEAP_MB + 1) << 20);
    char *p = malloc(1 << 20); /* the heap grows by the pad at once */
    char *hi = sbrk(0), *lo = p ? (char *)(((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1)) : hi;
#if defined(MADV_HUGEPAGE)
    if (hi > lo) madvise(lo, (size_t)(hi - lo) & ~(size_t)((2u << 20) - 1), MADV_HUGEPAGE);
#endif
    free(p);
    mallopt(M_TOP_PAD, 16 << 20);
#endif
}

int mk_cmd_plan(int argc, char **argv)
{
    int rank = 0, size = 1, mpi = mk_cli_under_mpiexec();
    plan_malloc_tuning();
    if (mpi) {
        /* MPICH's MPI_Init maps the node's PCI devices with hwloc (~15 ms
           of CPU a rank here, mostly sysfs PCI config reads) for NIC and GPU
           locality, which a search that only shares its results never uses;
           on two cores it cost the pair more than any imbalance of the split.
           A user's own HWLOC_COMPONENTS stays. */
        setenv("HWLOC_COMPONENTS", "-pci,-linuxio", 0);
        /* before parsing, so that only rank 0 prints an argument error */
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rank > 0 && (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout)))
            return MK_EXIT_USAGE;
    }
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_MODEL | MK_OPTG_PLAN | MK_OPTG_JSON | MK_OPTG_EXPLAIN, plan_usage, &plan_defaults);
    if (rc) rc = rc < 0 ? MK_EXIT_USAGE : 0; /* every rank parses alike: all stop here */
    else if (a.npos) rc = mk_cli_fail("plan", "unexpected argument '%s'", a.pos[0]);
    else if (!(rc = mk_args_check_outputs(&a, mpi))) rc = plan_main(&a, rank, size);
    if (mpi) {
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Finalize();
    }
    return rc;
}

int mk_cli_plan_baseline(const char *b, mk_planner_opts_t *o)
{
    return apply_baseline(b, o);
}
