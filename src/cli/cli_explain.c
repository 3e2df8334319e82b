/* Explaining a plan (issue 21): the step breakdown table of `merak sim
 * --explain` and `merak plan --explain`, and for merak plan the baseline
 * systems' best plans (--explain, --what-if), the what-if clusters
 * (--what-if), the time and cost to train (--train-tokens,
 * --gpu-hour-price, --objective) and the scaling sweep (--gpus N1,N2,...).
 * The searches are merak/whatif.h's; this file only runs and prints them. */
#include "merak/jsonio.h"
#include "config.h"
#include "cli/cli_explain.h"
#include "merak/run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

int mk_args_gpus_list(mk_args_t *a, const char *v)
{
    const char *p = v;
    a->n_gpus_list = 0;
    while (*p) {
        char *end;
        errno = 0;
        long long n = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno || n < 1)
            return mk_cli_fail(a->cmd, "--gpus must be a GPU count or a list of them (64,128,256), got '%s'", v), -1;
        if (n > MK_MAX_GPUS) return mk_cli_fail(a->cmd, "--gpus must be at most %d, got %lld", MK_MAX_GPUS, n), -1;
        if (a->n_gpus_list == MK_MAX_GPU_COUNTS)
            return mk_cli_fail(a->cmd, "--gpus takes at most %d counts", MK_MAX_GPU_COUNTS), -1;
        a->gpus_list[a->n_gpus_list++] = (int)n;
        p = *end ? end + 1 : end;
        if (*end && !*p) return mk_cli_fail(a->cmd, "--gpus: a count after the last ',' in '%s'", v), -1;
    }
    a->gpus = a->gpus_list[0];
    return 0;
}

/* ---- the step breakdown ---------------------------------------------- */

/* "exposed_tp" as "exposed tp" */
static const char *part_label(const char *nm, char *buf, size_t n)
{
    mk_strlcpy(buf, nm, n);
    for (char *c = buf; *c; c++) *c = *c == '_' ? ' ' : *c;
    return buf;
}

static void print_parts(const mk_sim_result_t *r)
{
    const mk_sim_explain_t *e = &r->explain;
    const char *nm[MK_SIM_EXPLAIN_PARTS];
    double v[MK_SIM_EXPLAIN_PARTS], T = r->step_time_s, sum = 0;
    int n = mk_sim_explain_parts(e, nm, v);
    printf("\nstep breakdown (stage %d: its compute stream ends last)     s    share\n", e->stage);
    for (int i = 0; i < n; i++) {
        char name[32];
        printf("  %-44s %10.4f %7.1f%%\n", part_label(nm[i], name, sizeof name), v[i], T > 0 ? 100 * v[i] / T : 0);
        sum += v[i];
    }
    printf("  %-44s %10.4f %7.1f%%  (bubble: %.4f s of gaps measured)\n", "= step time", sum,
           T > 0 ? 100 * sum / T : 0, e->idle_s);
}

static void print_memory(const mk_sim_result_t *r)
{
    if (r->worst_stage < 0) return;
    const mk_mem_breakdown_t *m = &r->mem[r->worst_stage];
    const char *nm[] = {"weights", "gradients", "optimizer", "activations", "working", "buffers", "gathered"};
    double v[] = {m->weights, m->grads, m->optimizer, m->activations, m->working, m->buffers, m->gathered};
    printf("\nmemory at the peak of stage %d (the highest)              GiB    share\n", r->worst_stage);
    for (int i = 0; i < 7; i++)
        printf("  %-44s %10.3f %7.1f%%\n", nm[i], v[i] / GIB, m->total > 0 ? 100 * v[i] / m->total : 0);
    printf("  %-44s %10.3f\n", "= peak", m->total / GIB);
}

/* 1 - MFU by the same parts (mk_sim_explain_json's mfu_gap). */
static void print_mfu_gap(const mk_sim_result_t *r)
{
    const mk_sim_explain_t *e = &r->explain;
    double T = r->step_time_s;
    if (!(T > 0) || !(e->peak_flops > 0)) return;
    double at_peak = e->flops_gpu / e->peak_flops / T, comp = e->forward + e->backward + e->recompute;
    printf("\nMFU %.1f%%: the gap to 100%% in shares of the step\n", 100 * r->mfu);
    printf("  %-44s %+9.1f%%\n", "FLOPs performed vs. counted (recompute, stage)", 100 * (at_peak - r->mfu));
    printf("  %-44s %9.1f%%\n", "compute below the peak rate", 100 * (comp / T - at_peak));
    const char *nm[MK_SIM_EXPLAIN_PARTS];
    double v[MK_SIM_EXPLAIN_PARTS];
    int n = mk_sim_explain_parts(e, nm, v);
    char name[32];
    for (int i = 3; i < n; i++) printf("  %-44s %9.1f%%\n", part_label(nm[i], name, sizeof name), 100 * v[i] / T);
    printf("kernel efficiency %.1f%% (stage %d's model FLOPs at its compute time vs. the peak %.0f TFLOP/s)\n",
           comp > 0 ? 100 * e->flops_gpu / comp / e->peak_flops : 0, e->stage, e->peak_flops / 1e12);
}

void mk_cli_explain_print(const mk_sim_result_t *r)
{
    print_parts(r);
    print_memory(r);
    print_mfu_gap(r);
}

/* ---- merak plan: alternatives ---------------------------------------- */

static const char *const baselines[] = {"megatron", "megatron-sp", "deepspeed", "merak", "fsdp"};
#define N_BASELINES ((int)(sizeof baselines / sizeof *baselines))

int mk_cli_plan_check(const mk_args_t *a)
{
    if (a->objective && strcmp(a->objective, "time") && strcmp(a->objective, "cost"))
        return mk_cli_fail("plan", "--objective must be time or cost, not '%s'", a->objective);
    return 0;
}

static int by_cost(const mk_args_t *a)
{
    return a->objective && !strcmp(a->objective, "cost");
}

/* What differs from plan b in plan p ("tp 4->2, schedule 1f1b->merak"), or
 * "the same plan". */
static void plan_changes(const mk_plan_t *b, const mk_plan_t *p, char *buf, size_t n)
{
    const char *what[] = {"dp", "cp", "pp", "tp", "ep", "vpp", "mbs", "sp", "tp-overlap", "zero", "first-stage blocks",
                          "last-stage blocks"};
    int vb[] = {b->dp, b->cp, b->pp, b->tp, b->ep, b->vpp, b->mbs, b->seqpar, b->tp_overlap, b->zero,
                b->first_stage_layers, b->last_stage_layers};
    int vp[] = {p->dp, p->cp, p->pp, p->tp, p->ep, p->vpp, p->mbs, p->seqpar, p->tp_overlap, p->zero,
                p->first_stage_layers, p->last_stage_layers};
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < (int)(sizeof vb / sizeof *vb); i++)
        if (vb[i] != vp[i] && k < n) k += snprintf(buf + k, n - k, "%s%s %d->%d", k ? ", " : "", what[i], vb[i], vp[i]);
    if (b->schedule != p->schedule && k < n)
        k += snprintf(buf + k, n - k, "%sschedule %s->%s", k ? ", " : "", mk_sched_kind_name(b->schedule),
                      mk_sched_kind_name(p->schedule));
    char rb[32], rp[32];
    mk_recompute_format(&b->recompute, rb, sizeof rb);
    mk_recompute_format(&p->recompute, rp, sizeof rp);
    if (strcmp(rb, rp) && k < n) k += snprintf(buf + k, n - k, "%srecompute %s->%s", k ? ", " : "", rb, rp);
    char pb[16], pq[16]; /* copies: buf may be a field beside p's (mk_cli_alt_t) */
    mk_strlcpy(pb, b->partition, sizeof pb), mk_strlcpy(pq, p->partition, sizeof pq);
    if (strcmp(pb, pq) && k < n) k += snprintf(buf + k, n - k, "%spartition %s->%s", k ? ", " : "", pb, pq);
    if (!k) mk_strlcpy(buf, "the same plan", n);
}

/* Where best gains most on alt: the breakdown part alt spends most more
 * seconds in. */
static void winner_gains(const mk_planner_entry_t *best, const mk_planner_entry_t *alt, char *buf, size_t n)
{
    const char *nm[MK_SIM_EXPLAIN_PARTS];
    double vb[MK_SIM_EXPLAIN_PARTS], va[MK_SIM_EXPLAIN_PARTS];
    int np = mk_sim_explain_parts(&best->res.explain, nm, vb);
    mk_sim_explain_parts(&alt->res.explain, nm, va);
    int k = 0;
    for (int i = 1; i < np; i++)
        if (va[i] - vb[i] > va[k] - vb[k]) k = i;
    double sb = best->res.step_time_s, sa = alt->res.step_time_s;
    if (sa <= sb) {
        if (sa == sb) mk_strlcpy(buf, "ties the winner", n);
        else {
            char pc[32];
            mk_planner_pct(sb > 0 ? 100 * (sb - sa) / sb : 0, pc, sizeof pc);
            snprintf(buf, n, "faster than the winner by %s", pc);
        }
        return;
    }
    char name[32], lead[32];
    part_label(nm[k], name, sizeof name);
    if (sa / sb < 1.1) mk_planner_pct(100 * (sa - sb) / sa, lead, sizeof lead); /* 1.00x would hide it */
    else snprintf(lead, sizeof lead, "%.2fx", sa / sb);
    snprintf(buf, n, "winner %s faster; gains most in %s (%.4f s vs %.4f s)", lead, name, vb[k], va[k]);
}

/* One alternative search: o's space on cluster cl with o.gpus GPUs. */
typedef struct {
    const mk_model_config_t *m;
    mk_cluster_t cl;
    mk_planner_opts_t o;
    mk_cli_alt_t *alt; /* where its result goes (rank 0) */
} mk_alt_job_t;

/* The alternatives to search, in x's order; those that need no search
 * (a GPU count out of range, the main search's own count) are filled in
 * place. */
typedef struct {
    mk_alt_job_t job[2 * MK_CLI_MAX_ALTS + MK_MAX_GPU_COUNTS];
    int n;
} mk_alt_jobs_t;

static void alt_job(mk_alt_jobs_t *J, const mk_model_config_t *m, const mk_cluster_t *c,
                    const mk_planner_opts_t *o, int g, mk_cli_alt_t *alt)
{
    mk_alt_job_t *j = &J->job[J->n++];
    j->m = m, j->cl = *c, j->o = *o, j->alt = alt;
    j->o.gpus = alt->gpus = g;
    j->o.rank = 0, j->o.size = 1; /* each alternative on one rank */
    j->o.share = NULL, j->o.share_ctx = NULL, j->o.progress = NULL;
}

/* mk_planner_mpi_jobs' job: search alternative i into out. */
static void alt_run(void *ctx, int i, void *out)
{
    const mk_alt_job_t *j = &((const mk_alt_jobs_t *)ctx)->job[i];
    mk_cli_alt_t *alt = out;
    *alt = *j->alt;
    int rc = mk_planner_best(j->m, &j->cl, &j->o, &alt->e);
    alt->found = rc > 0, alt->failed = rc < 0;
    if (rc < 0) mk_strlcpy(alt->note, mk_error_last(), sizeof alt->note);
    else if (!rc) snprintf(alt->note, sizeof alt->note, "no plan: %s", mk_error_last());
}

/* The baseline systems' best plans, on the same GPUs and batch. */
static int add_baselines(mk_alt_jobs_t *J, const mk_model_config_t *m, const mk_cluster_t *cl,
                         const mk_planner_opts_t *o, mk_cli_extras_t *x)
{
    for (int i = 0; i < N_BASELINES; i++) {
        mk_cli_alt_t *alt = &x->base[x->nb++];
        mk_planner_opts_t q;
        mk_planner_opts_init(&q);
        q.gpus = o->gpus, q.gbs = o->gbs, q.dtype = o->dtype, q.moe_imbalance = o->moe_imbalance;
        /* DeepEP and the merged 1F1B steps are Megatron-Core's: the other systems dispatch pairwise, apart */
        q.moe_deepep = strncmp(baselines[i], "megatron", 8) ? 0 : o->moe_deepep;
        q.moe_a2a_overlap = strncmp(baselines[i], "megatron", 8) ? 0 : o->moe_a2a_overlap;
        q.attention = o->attention; /* the same attention core as the main search */
        q.cp_comm = o->cp_comm;     /* and CP exchange (--cp-comm-type) */
        mk_strlcpy(alt->label, baselines[i], sizeof alt->label);
        if (mk_cli_plan_baseline(baselines[i], &q) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
        alt_job(J, m, cl, &q, o->gpus, alt);
    }
    return 0;
}

/* The families #1 is not in (issue 35): the best plan without its
 * pipeline, its TP, its CP, its ZeRO, or with another schedule, each the
 * main search's space with that one restriction. */
static void add_families(mk_alt_jobs_t *J, const mk_model_config_t *m, const mk_cluster_t *cl,
                         const mk_planner_opts_t *o, const mk_plan_t *b, mk_cli_extras_t *x)
{
    for (int f = 0; f < 5; f++) {
        mk_planner_opts_t q = *o;
        q.top = 1;
        const char *label = NULL;
        char lab[64];
        if (f == 0 && b->pp > 1) q.max_pp = 1, label = "without PP";
        if (f == 1 && b->tp > 1) q.max_tp = 1, label = "without TP";
        if (f == 2 && b->cp > 1) q.max_cp = 1, label = "without CP";
        if (f == 3 && b->zero > 0) q.zero = 0, label = "without ZeRO";
        if (f == 4 && b->pp > 1) {
            q.sched_mask = (o->sched_mask ? o->sched_mask : MK_PLANNER_SCHEDULES) & ~(1u << b->schedule);
            snprintf(lab, sizeof lab, "not %s", mk_sched_kind_name(b->schedule));
            label = q.sched_mask ? lab : NULL;
        }
        if (!label) continue;
        mk_cli_alt_t *alt = &x->fam[x->nf++];
        mk_strlcpy(alt->label, label, sizeof alt->label);
        alt_job(J, m, cl, &q, o->gpus, alt);
    }
}

/* The what-if clusters: one knob changed at a time (issue 21's list). */
static const struct {
    mk_cluster_knob_t k;
    double f;
} knobs[] = {{MK_KNOB_INTRA_BW, 2}, {MK_KNOB_INTRA_BW, 0.5}, {MK_KNOB_INTER_BW, 2}, {MK_KNOB_INTER_BW, 0.5},
             {MK_KNOB_FLOPS, 2},    {MK_KNOB_MEMORY, 2},      {MK_KNOB_GPUS, 2},     {MK_KNOB_GPUS, 0.5}};
#define N_KNOBS ((int)(sizeof knobs / sizeof *knobs))

static int add_whatif(mk_alt_jobs_t *J, const mk_model_config_t *m, const mk_cluster_t *cl,
                      const mk_planner_opts_t *o, mk_cli_extras_t *x)
{
    for (int i = 0; i < N_KNOBS; i++) {
        mk_cli_alt_t *alt = &x->whatif[x->nw++];
        mk_cluster_t c = *cl;
        snprintf(alt->label, sizeof alt->label, "%s %s", mk_cluster_knob_name(knobs[i].k),
                 knobs[i].f > 1 ? "x2" : "/2");
        if (mk_cluster_scale(&c, knobs[i].k, knobs[i].f) < 0) return mk_cli_fail("plan", "%s", mk_error_last());
        int g = knobs[i].k == MK_KNOB_GPUS ? (int)(o->gpus * knobs[i].f) : o->gpus;
        if (g < 1 || g > MK_MAX_GPUS) {
            alt->gpus = g;
            snprintf(alt->note, sizeof alt->note, "no plan: %d GPUs is outside 1 to %d", g, MK_MAX_GPUS);
            continue;
        }
        alt_job(J, m, &c, o, g, alt);
    }
    return 0;
}

/* The scaling sweep: the best plan of each --gpus count. */
static void add_scaling(mk_alt_jobs_t *J, const mk_args_t *a, const mk_model_config_t *m, const mk_cluster_t *cl,
                        const mk_planner_opts_t *o, const mk_planner_entry_t *best, mk_cli_extras_t *x)
{
    for (int i = 0; i < a->n_gpus_list; i++) {
        mk_cli_alt_t *alt = &x->scaling[x->ns++];
        snprintf(alt->label, sizeof alt->label, "%d GPUs", a->gpus_list[i]);
        if (a->gpus_list[i] == o->gpus) { /* the main search's: not searched twice */
            alt->gpus = o->gpus, alt->found = 1;
            if (best) alt->e = *best;
            continue;
        }
        alt_job(J, m, cl, o, a->gpus_list[i], alt);
    }
}

/* Rank 0: the searches' results in place, and the notes against the best plan. */
static int alt_results(mk_alt_jobs_t *J, const mk_cli_alt_t *res, const mk_planner_entry_t *best,
                       const mk_cli_extras_t *x)
{
    for (int i = 0; i < J->n; i++) {
        mk_cli_alt_t *alt = J->job[i].alt;
        *alt = res[i];
        if (alt->failed) return mk_cli_fail("plan", "%s", alt->note);
        if (!alt->found) continue;
        if ((alt >= x->base && alt < x->base + MK_CLI_MAX_ALTS) || (alt >= x->fam && alt < x->fam + MK_CLI_MAX_ALTS))
            winner_gains(best, &alt->e, alt->note, sizeof alt->note);
        else if (alt >= x->whatif && alt < x->whatif + MK_CLI_MAX_ALTS)
            plan_changes(&best->plan, &alt->e.plan, alt->note, sizeof alt->note);
    }
    return 0;
}

int mk_cli_plan_extras(const mk_args_t *a, const mk_model_config_t *m, const mk_cluster_t *cl,
                       const mk_planner_opts_t *o, const mk_planner_entry_t *best, const mk_plan_t *best_plan,
                       mk_cli_extras_t *x)
{
    double t0 = mk_time_now();
    memset(x, 0, sizeof *x);
    static mk_alt_jobs_t J; /* ~0.5 MB: the clusters and options of up to 48 searches */
    J.n = 0;
    int rc = 0;
    if (a->explain || a->what_if) rc = add_baselines(&J, m, cl, o, x);
    if (!rc && a->explain && best_plan) add_families(&J, m, cl, o, best_plan, x);
    if (!rc && a->what_if) rc = add_whatif(&J, m, cl, o, x);
    if (!rc && a->n_gpus_list > 1) add_scaling(&J, a, m, cl, o, best, x);
    if (rc || J.n == 0) return rc;
    mk_cli_alt_t *res = calloc((size_t)J.n, sizeof *res);
    if (!res) return mk_cli_fail("plan", "out of memory");
    /* every alternative is a search of its own: over the ranks and their cores */
    if (mk_planner_mpi_jobs(J.n, alt_run, &J, res, sizeof *res, NULL) < 0) rc = mk_cli_fail("plan", "%s", mk_error_last());
    else if (best) rc = alt_results(&J, res, best, x);
    free(res);
    x->wall_s = mk_time_now() - t0;
    return rc;
}

/* ---- another engine's launch command (--export) ------------------------ */

int mk_cli_export(const mk_args_t *a, const mk_plan_t *p, const mk_cluster_t *cl)
{
    char out[8192];
    if (!strcmp(a->export_to, "torchtitan")) {
        if (mk_plan_export_torchtitan(p, out, sizeof out) < 0)
            return mk_cli_fail(a->cmd, "--export torchtitan: %s", mk_error_last());
        fputs(out, stdout);
        fprintf(stderr, "merak %s: note: torchtitan v0.2.2 (TOML job config); add [job], [optimizer], the dataset "
                        "and the steps; run with NGPU=%d CONFIG_FILE=FILE ./run_train.sh\n", a->cmd,
                (int)mk_plan_gpus(p));
        return 0;
    }
    if (!strcmp(a->export_to, "deepspeed")) {
        char args[8192];
        if (mk_plan_export_deepspeed(p, out, sizeof out, args, sizeof args) < 0)
            return mk_cli_fail(a->cmd, "--export deepspeed: %s", mk_error_last());
        fputs(out, stdout);
        fprintf(stderr, "merak %s: note: DeepSpeed ds_config.json on stdout; Megatron-DeepSpeed's arguments: %s\n",
                a->cmd, args);
        return 0;
    }
    if (strcmp(a->export_to, "megatron"))
        return mk_cli_fail(a->cmd, "--export %s: megatron, torchtitan or deepspeed", a->export_to);
    if (mk_plan_export_megatron(p, cl->gpus_per_node, out, sizeof out) < 0)
        return mk_cli_fail(a->cmd, "--export megatron: %s", mk_error_last());
    printf("%s\n", out);
    fprintf(stderr, "merak %s: note: Megatron-LM (core_r0.13 arguments); add the data (--data-path or --mock-data), "
                    "tokenizer, optimizer and training-length arguments\n", a->cmd);
    return 0;
}

/* ---- time and cost to train ------------------------------------------ */

/* Tokens per GPU-second of a plan (the cost objective's figure). */
static double per_gpu(const mk_planner_entry_t *e)
{
    double g = (double)mk_plan_gpus(&e->plan);
    return g > 0 ? e->res.tokens_per_s / g : 0;
}

void mk_cli_plan_cost_json(const mk_args_t *a, const mk_planner_entry_t *e, json_t *plan)
{
    double tps = e->res.tokens_per_s, g = (double)mk_plan_gpus(&e->plan);
    json_object_set_new(plan, "gpus", json_integer((json_int_t)g));
    json_object_set_new(plan, "tokens_per_s_per_gpu", json_real(per_gpu(e)));
    if (a->gpu_hour_price > 0 && tps > 0)
        json_object_set_new(plan, "usd_per_million_tokens", json_real(1e6 / tps * g / 3600 * a->gpu_hour_price));
    if (!(a->train_tokens > 0) || !(tps > 0)) return;
    double t = a->train_tokens / tps;
    json_object_set_new(plan, "train_tokens", json_real(a->train_tokens));
    json_object_set_new(plan, "train_time_s", json_real(t));
    json_object_set_new(plan, "gpu_hours", json_real(g * t / 3600));
    if (a->gpu_hour_price > 0) json_object_set_new(plan, "cost_usd", json_real(g * t / 3600 * a->gpu_hour_price));
}

/* " 12.3 d  45,600 GPU-h  $91,200" for --train-tokens (and the price). */
static void cost_cols(const mk_args_t *a, const mk_planner_entry_t *e, char *buf, size_t n)
{
    double tps = e->res.tokens_per_s, g = (double)mk_plan_gpus(&e->plan);
    buf[0] = 0;
    if (!(a->train_tokens > 0) || !(tps > 0)) return;
    double t = a->train_tokens / tps, gh = g * t / 3600;
    int k = snprintf(buf, n, " %9.2f d %12.0f GPU-h", t / 86400, gh);
    char usd[32];
    snprintf(usd, sizeof usd, "$%.0f", gh * a->gpu_hour_price);
    if (a->gpu_hour_price > 0 && k > 0 && (size_t)k < n) snprintf(buf + k, n - k, " %14s", usd);
}

void mk_cli_plan_cost_human(const mk_args_t *a, const mk_planner_entry_t *e, int i)
{
    char c[96];
    cost_cols(a, e, c, sizeof c);
    if (!c[0]) return;
    printf("#%d to train %.3g tokens:%s\n", i + 1, a->train_tokens, c);
}

/* ---- printing the alternatives ---------------------------------------- */

/* One row: label, layout, schedule, recompute, step, tokens/s (per GPU),
 * MFU, [time and cost], then `tail`. */
static void alt_row(const mk_args_t *a, int lw, const char *label, const mk_cli_alt_t *x, const char *tail)
{
    if (!x->found) {
        printf("  %-26s %5d  %s\n", label, x->gpus, x->note);
        return;
    }
    const mk_plan_t *p = &x->e.plan;
    const mk_sim_result_t *r = &x->e.res;
    char rc[32], c[96];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    cost_cols(a, &x->e, c, sizeof c);
    printf("  %-26s %5d  %-*s %-11s %-15s %9.4f %10.0f %8.1f %5.1f%%%s  %s\n", label, x->gpus, lw,
           mk_plan_layout_str(p, " x ").s, mk_sched_kind_name(p->schedule), rc, r->step_time_s, r->tokens_per_s,
           per_gpu(&x->e), 100 * r->mfu, c, tail);
}

static void alt_header(const mk_args_t *a, int lw, const char *first, const char *last)
{
    printf("  %-26s %5s  %-*s %-11s %-15s %9s %10s %8s %6s%s  %s\n", first, "GPUs", lw, "layout", "schedule", "recompute",
           "step s", "tok/s", "tok/s/GPU", "MFU",
           a->train_tokens > 0 ? (a->gpu_hour_price > 0 ? "   time to train      GPU-hours           cost"
                                                        : "   time to train      GPU-hours")
                               : "",
           last);
}

/* The layout column's width: its header's 24, or the longest layout of the
 * rows (EP, CP and DeepEP lengthen it), so every table's columns align. */
static int layout_width(const mk_planner_entry_t *best, const mk_cli_extras_t *x)
{
    int w = 24, n = (int)strlen(mk_plan_layout_str(&best->plan, " x ").s);
    const mk_cli_alt_t *sets[4] = {x->base, x->fam, x->whatif, x->scaling};
    const int counts[4] = {x->nb, x->nf, x->nw, x->ns};
    if (n > w) w = n;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < counts[k]; i++) {
            n = sets[k][i].found ? (int)strlen(mk_plan_layout_str(&sets[k][i].e.plan, " x ").s) : 0;
            if (n > w) w = n;
        }
    return w;
}

static void print_scaling(const mk_args_t *a, int lw, const mk_cli_extras_t *x)
{
    int s0 = -1, win = -1;
    for (int i = 0; i < x->ns; i++)
        if (x->scaling[i].found && (s0 < 0 || x->scaling[i].gpus < x->scaling[s0].gpus)) s0 = i;
    for (int i = 0; i < x->ns; i++) { /* the objective's best: fastest, or most tokens per GPU-second */
        const mk_cli_alt_t *c = &x->scaling[i];
        if (!c->found) continue;
        double v = by_cost(a) ? per_gpu(&c->e) : c->e.res.tokens_per_s;
        if (win < 0 || v > (by_cost(a) ? per_gpu(&x->scaling[win].e) : x->scaling[win].e.res.tokens_per_s)) win = i;
    }
    printf("\nscaling (the best plan per GPU count, same global batch; efficiency: tokens/s per GPU over %d GPUs'; "
           "* best by %s)\n", s0 >= 0 ? x->scaling[s0].gpus : 0, by_cost(a) ? "cost" : "time");
    alt_header(a, lw, "count", "efficiency");
    for (int i = 0; i < x->ns; i++) {
        const mk_cli_alt_t *c = &x->scaling[i];
        char tail[32] = "";
        if (c->found && s0 >= 0)
            snprintf(tail, sizeof tail, "%6.1f%%%s", 100 * per_gpu(&c->e) / per_gpu(&x->scaling[s0].e), i == win ? " *" : "");
        alt_row(a, lw, c->label, c, tail);
    }
}

void mk_cli_plan_extras_human(const mk_args_t *a, const mk_planner_entry_t *best, const mk_cli_extras_t *x)
{
    if (a->explain) {
        printf("\nwhy #1 is fast: its step, memory and MFU gap\n");
        mk_cli_explain_print(&best->res);
    }
    mk_cli_alt_t me = {.gpus = (int)mk_plan_gpus(&best->plan), .found = 1, .e = *best};
    int lw = layout_width(best, x);
    if (x->nb) {
        printf("\nbaselines (each system's best plan on the same GPUs and batch)\n");
        alt_header(a, lw, "system", "where the winner gains");
        alt_row(a, lw, "this search: #1", &me, "the winner");
        for (int i = 0; i < x->nb; i++) alt_row(a, lw, x->base[i].label, &x->base[i], x->base[i].note);
    }
    if (x->nf) {
        printf("\nwhy, family by family (the best plan without each of #1's choices, the same search)\n");
        alt_header(a, lw, "family", "where the winner gains");
        alt_row(a, lw, "this search: #1", &me, "the winner");
        for (int i = 0; i < x->nf; i++) alt_row(a, lw, x->fam[i].label, &x->fam[i], x->fam[i].note);
    }
    if (x->nw) {
        printf("\nwhat if (the cluster changed one knob at a time, the same search)\n");
        alt_header(a, lw, "change", "what changed in the best plan");
        alt_row(a, lw, "as is: #1", &me, "");
        for (int i = 0; i < x->nw; i++) alt_row(a, lw, x->whatif[i].label, &x->whatif[i], x->whatif[i].note);
    }
    if (x->ns) print_scaling(a, lw, x);
    if (x->nb || x->nw || x->ns || x->nf) printf("(%.2f s for these searches)\n", x->wall_s);
}

/* An alternative as JSON: its label under `key`, the summary figures, the
 * note, and the full `merak sim --json` object of its plan. */
static json_t *alt_json(const mk_args_t *a, const char *key, const mk_cli_alt_t *x)
{
    json_t *j = json_pack("{s:s, s:i, s:b, s:s}", key, x->label, "gpus", x->gpus, "found", x->found, "note", x->note);
    if (!x->found) return j;
    const mk_plan_t *p = &x->e.plan;
    char rc[32];
    mk_recompute_format(&p->recompute, rc, sizeof rc);
    json_object_set_new(j, "layout", json_string(mk_plan_layout_str(p, " x ").s));
    json_object_set_new(j, "schedule", json_string(mk_sched_kind_name(p->schedule)));
    json_object_set_new(j, "recompute", json_string(rc));
    json_object_set_new(j, "step_time_s", json_real(x->e.res.step_time_s));
    json_object_set_new(j, "tokens_per_s", json_real(x->e.res.tokens_per_s));
    json_object_set_new(j, "mfu", json_real(x->e.res.mfu));
    mk_cli_plan_cost_json(a, &x->e, j);
    json_object_set_new(j, "summary", mk_sim_result_json(&x->e.res, p));
    return j;
}

void mk_cli_plan_extras_json(const mk_args_t *a, const mk_planner_entry_t *best, const mk_cli_extras_t *x,
                             json_t *top)
{
    (void)best;
    json_t *l;
    if (x->nb) {
        json_object_set_new(top, "baselines", l = json_array());
        for (int i = 0; i < x->nb; i++) json_array_append_new(l, alt_json(a, "system", &x->base[i]));
    }
    if (x->nf) {
        json_object_set_new(top, "families", l = json_array());
        for (int i = 0; i < x->nf; i++) json_array_append_new(l, alt_json(a, "family", &x->fam[i]));
    }
    if (x->nw) {
        json_object_set_new(top, "what_if", l = json_array());
        for (int i = 0; i < x->nw; i++) json_array_append_new(l, alt_json(a, "change", &x->whatif[i]));
    }
    if (x->ns) {
        const mk_cli_alt_t *s0 = NULL;
        for (int i = 0; i < x->ns; i++)
            if (x->scaling[i].found && (!s0 || x->scaling[i].gpus < s0->gpus)) s0 = &x->scaling[i];
        json_object_set_new(top, "scaling", l = json_array());
        for (int i = 0; i < x->ns; i++) {
            json_t *j = alt_json(a, "count", &x->scaling[i]);
            if (x->scaling[i].found && s0)
                json_object_set_new(j, "scaling_efficiency", json_real(per_gpu(&x->scaling[i].e) / per_gpu(&s0->e)));
            json_array_append_new(l, j);
        }
    }
    if (x->nb || x->nw || x->ns || x->nf) json_object_set_new(top, "explain_search_time_s", json_real(x->wall_s));
}
