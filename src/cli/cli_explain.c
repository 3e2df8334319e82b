/* Explaining a plan (issue 21): the step breakdown table of `merak sim
 * --explain` and `merak plan --explain`, and for merak plan the baseline
 * systems' best plans (--explain, --what-if), the what-if clusters
 * (--what-if), the time and cost to train (--train-tokens,
 * --gpu-hour-price, --objective) and the scaling sweep (--gpus N1,N2,...).
 * The searches are merak/whatif.h's; this file only runs and prints them. */
#include "config.h"
#include "cli/cli_explain.h"

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
