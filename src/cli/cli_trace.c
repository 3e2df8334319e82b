/* `merak trace summary FILE` and `merak trace diff PREDICTED MEASURED`. */
#include "config.h"
#include "cli/cli.h"
#include "merak/tracefile.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *trace_usage =
    "usage: merak trace summary FILE [--json]\n"
    "       merak trace diff PREDICTED MEASURED [--json]\n"
    "       merak trace check FILE\n\n"
    "summary: per-rank step span, compute busy time, idle share and peak memory,\n"
    "         and time per instruction kind of a Chrome trace from `merak sim` or `merak run`.\n"
    "diff:    align a predicted and a measured trace rank by rank and instruction by\n"
    "         instruction (a measurement with several steps is compared on its last);\n"
    "         prints the step-time error, per-kind and per-stage errors.  Traces of\n"
    "         different plans are an error (exit 2).\n"
    "check:   every track (pid, tid) properly nested: two complete events are disjoint\n"
    "         or one holds the other; the first partial overlap is printed, exit 1.\n";

static int print_diff(const mk_tracefile_diff_t *d, int json)
{
    if (json) {
        json_t *kinds = json_object(), *stages = json_array();
        for (int k = 0; k < d->n_kinds; k++)
            json_object_set_new(kinds, d->kinds[k], json_pack("{s:f, s:f}", "predicted_s", d->kind_pred_s[k],
                                                              "measured_s", d->kind_meas_s[k]));
        for (int s = 0; s < d->n_stages; s++)
            json_array_append_new(stages, json_pack("{s:f, s:f}", "predicted_busy_s", d->stage_busy_pred_s[s],
                                                    "measured_busy_s", d->stage_busy_meas_s[s]));
        json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:i, s:i, s:i, s:o, s:o}", "step_predicted_s", d->step_pred_s,
                              "step_measured_s", d->step_meas_s, "step_rel_err", d->step_rel_err,
                              "event_mean_abs_rel_err", d->mean_abs_rel_err, "matched_events", d->matched,
                              "aggregated_streams", d->aggregated, "unmatched_ranks", d->unmatched_ranks,
                              "kinds", kinds, "stages", stages);
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        json_decref(o);
        return 0;
    }
    printf("step time: predicted %.6f s, measured %.6f s, error %+.2f%%\n", d->step_pred_s, d->step_meas_s,
           100 * d->step_rel_err);
    printf("matched events: %d, mean |error| per event %.2f%%\n", d->matched, 100 * d->mean_abs_rel_err);
    if (d->aggregated)
        printf("(%d communication stream(s) with different event counts compared by time per kind)\n", d->aggregated);
    if (d->unmatched_ranks) {
        printf("unmatched: %d measured rank(s) the prediction lacks, not compared:", d->unmatched_ranks);
        for (int i = 0; i < d->unmatched_ranks && i < 16; i++) printf(" %d", d->unmatched[i]);
        printf("%s (the simulator traces one rank per stage)\n", d->unmatched_ranks > 16 ? " ..." : "");
    }
    printf("  %-12s %14s %14s %9s\n", "kind", "predicted s", "measured s", "error");
    for (int k = 0; k < d->n_kinds; k++)
        printf("  %-12s %14.6f %14.6f %+8.2f%%\n", d->kinds[k], d->kind_pred_s[k], d->kind_meas_s[k],
               d->kind_meas_s[k] > 0 ? 100 * (d->kind_pred_s[k] - d->kind_meas_s[k]) / d->kind_meas_s[k] : 0);
    printf("  %-12s %14s %14s %9s\n", "stage", "pred busy s", "meas busy s", "error");
    for (int s = 0; s < d->n_stages; s++)
        printf("  %-12d %14.6f %14.6f %+8.2f%%\n", s, d->stage_busy_pred_s[s], d->stage_busy_meas_s[s],
               d->stage_busy_meas_s[s] > 0
                   ? 100 * (d->stage_busy_pred_s[s] - d->stage_busy_meas_s[s]) / d->stage_busy_meas_s[s] : 0);
    return 0;
}

/* Exit 0 nested, 1 a partial overlap (a finding, not a usage error). */
static int check_nesting(mk_tracefile_t *t, const char *path)
{
    char msg[512];
    int rc = mk_tracefile_check(t, msg, sizeof msg);
    int n = t->n;
    mk_tracefile_free(t);
    if (rc < 0) return mk_cli_fail("trace", "out of memory");
    if (rc > 0) {
        fprintf(stderr, "merak trace: %s: %s\n", path, msg);
        return 1;
    }
    printf("%s: %d complete events, every track properly nested\n", path, n);
    return 0;
}

int mk_cmd_trace(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_JSON, trace_usage, NULL); /* no defaults */
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    if (a.npos < 1) return mk_cli_fail("trace", "missing action: summary FILE or diff PREDICTED MEASURED");
    const char *act = a.pos[0];
    int want = !strcmp(act, "summary") || !strcmp(act, "check") ? 2 : !strcmp(act, "diff") ? 3 : 0;
    if (!want) return mk_cli_fail("trace", "unknown action '%s' (summary, diff or check)", act);
    if (a.npos != want)
        return mk_cli_fail("trace", "'%s' takes %d file(s), got %d", act, want - 1, a.npos - 1);
    mk_tracefile_t *t1 = mk_tracefile_load(a.pos[1]);
    if (!t1) return mk_cli_fail("trace", "%s", mk_error_last());
    if (!strcmp(act, "check")) return check_nesting(t1, a.pos[1]);
    if (want == 2) {
        mk_tracefile_summary(t1, stdout);
        mk_tracefile_free(t1);
        return 0;
    }
    mk_tracefile_t *t2 = mk_tracefile_load(a.pos[2]);
    mk_tracefile_diff_t d;
    if (!t2 || mk_tracefile_diff(t1, t2, &d) < 0) rc = mk_cli_fail("trace", "%s", mk_error_last());
    else rc = print_diff(&d, a.json);
    mk_tracefile_free(t1);
    mk_tracefile_free(t2);
    return rc;
}
