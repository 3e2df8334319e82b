/* `merak sched`: a schedule's per-stage instruction streams, verified, with
 * an ASCII timeline under the unit costs (mk_sched_costs_unit; one column per unit). */
#include "merak/jsonio.h"
#include "config.h"
#include "cli/cli.h"
#include "merak/checked.h"
#include "merak/limits.h"
#include "merak/sched.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *sched_usage =
    "usage: merak sched --pp P --micro-batches M [--schedule S] [--vpp V]\n"
    "                   [--recompute R] [--verify] [--json]\n\n"
    "Print the per-stage instruction streams a schedule produces and an ASCII\n"
    "timeline under the unit costs F = 1, B = 2 (+1 when it recomputes), R = 1,\n"
    "B_IN = 1 (+1 when it recomputes), B_W = 1, communication 0.\n\n"
    "  --schedule S       gpipe, @schedule@ (default), interleaved, merak, merak-pre,\n"
    "                     merak-last, zb-h1, looped-bfs, zb-h2, zb-v, dualpipev (torchtitan's\n"
    "                     names too: GPipe, 1F1B, Interleaved1F1B, LoopedBFS, ZBVZeroBubble,\n"
    "                     DualPipeV)\n"
    "  --pp P             pipeline stages (required)\n"
    "  --micro-batches M  micro-batches per step (required; interleaved: a multiple of P;\n"
    "                     dualpipev: at least 2P)\n"
    "  --vpp V            model chunks per stage (zb-v, dualpipev: 2, in a V; interleaved,\n"
    "                     looped-bfs: at least 2, default @vpp@)\n"
    "  --recompute R      none, @recompute@ (default), selective, stage-aware:R, or selective-op\n"
    "                     (torchtitan's op-level policy: full recompute's streams)\n"
    "                     (auto needs a model and cluster: see merak plan)\n"
    "  --verify           check completeness and deadlock freedom (exit 1 if not)\n"
    "  --json             one JSON object on stdout\n\n"
    "Without a model every stage has one layer, so a forward checkpoints 1 layer\n"
    "or 0: stage-aware:R checkpoints stage i's layer whenever r_i > 0.\n"
    "Timeline: a-z forward of micro-batch 0-25 (mod 26), A-Z its backward (B or\n"
    "B_IN), * F_PRE, + R (pre-recompute), 0-9 B_W of micro-batch mod 10, . idle.\n";

static const mk_cli_defaults_t sched_defaults = {.schedule = "1f1b", .recompute = "full", .vpp = 2};

static void print_instr(const mk_instr_t *in, int vpp)
{
    printf(" %s", mk_instr_op_name(in->op));
    if (in->mb >= 0) printf("%d", in->mb);
    if (vpp > 1 && in->mb >= 0) printf(".%d", in->chunk);
    if (in->peer >= 0) printf("@%d", in->peer);
    if ((in->op == MK_INSTR_F || in->op == MK_INSTR_F_PRE) && in->ckpt) printf("/%d", in->ckpt);
    if (in->overlap) printf("+"); /* overlapped with the F before it */
}

static char glyph(const mk_instr_t *in)
{
    switch (in->op) {
    case MK_INSTR_F: return (char)('a' + in->mb % 26);
    case MK_INSTR_F_PRE: return '*';
    case MK_INSTR_R: return '+';
    case MK_INSTR_B:
    case MK_INSTR_B_IN: return (char)('A' + in->mb % 26);
    case MK_INSTR_B_W: return (char)('0' + in->mb % 10);
    default: return '?';
    }
}

static void print_text(const mk_sched_t *s, const mk_sched_timeline_t *tl,
                       const mk_sched_report_t *rep, const char *recompute, int verified)
{
    int p = s->spec.pp, cols = (int)ceil(tl->makespan);
    printf("schedule %s: %d stages, %d micro-batches, vpp %d, recompute %s\n\n",
           mk_sched_kind_name(s->spec.kind), p, s->spec.m, s->spec.vpp, recompute);
    if (s->vshape)
        printf("Placement V: stage s runs virtual stages s and %d-s (stage 0 holds the first and the last)\n\n",
               2 * p - 1);
    printf("Streams (opMB[.chunk][@peer][/ckpt]%s):\n", s->spec.kind == MK_SCHED_DUALPIPEV ? "[+: overlapped with the F before]" : "");
    for (int st = 0; st < p; st++) {
        printf("s%d:", st);
        for (int i = 0; i < s->streams[st].n; i++) print_instr(&s->streams[st].v[i], s->spec.vpp);
        printf("\n");
    }
    char *row = malloc((size_t)cols + 1);
    if (!row) return;
    printf("\nTimeline (unit costs, one column per unit):\n");
    for (int st = 0; st < p; st++) {
        memset(row, '.', (size_t)cols);
        row[cols] = 0;
        for (int i = 0; i < s->streams[st].n; i++)
            if (mk_instr_is_compute(s->streams[st].v[i].op))
                for (int t = (int)tl->start[st][i]; t < (int)ceil(tl->end[st][i]) && t < cols; t++)
                    row[t] = glyph(&s->streams[st].v[i]);
        printf("s%d |%s|\n", st, row);
    }
    free(row);
    printf("\nmakespan %g\n", tl->makespan);
    for (int st = 0; st < p; st++)
        printf("stage %d: busy %g, bubble %g (%.1f%%), max in flight %d\n", st, tl->busy[st],
               tl->makespan - tl->busy[st], 100.0 * (tl->makespan - tl->busy[st]) / tl->makespan,
               rep->max_inflight[st]);
    if (verified)
        printf("verified: complete, deadlock-free with buffered sends%s\n",
               rep->rendezvous_ok ? " and with rendezvous sends" : " (not with rendezvous sends)");
}

static int print_json(const mk_sched_t *s, const mk_sched_timeline_t *tl,
                      const mk_sched_report_t *rep, const char *recompute, int verified)
{
    json_t *o = mk_sched_to_json(s, rep);
    if (!o) return -1;
    json_t *bub = json_array();
    for (int st = 0; st < s->spec.pp; st++)
        json_array_append_new(bub, json_real((tl->makespan - tl->busy[st]) / tl->makespan));
    json_object_set_new(o, "recompute", json_string(recompute));
    json_object_set_new(o, "bubble_fraction", bub);
    if (verified) {
        json_object_set_new(o, "verified", json_true());
        json_object_set_new(o, "rendezvous_safe", json_boolean(rep->rendezvous_ok));
    }
    int rc = json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    printf("\n");
    json_decref(o);
    return rc;
}

/* Flags -> spec; returns 0 or the exit status (message printed). */
static int make_spec(const mk_args_t *a, mk_sched_spec_t *sp)
{
    memset(sp, 0, sizeof *sp);
    if (a->npos) return mk_cli_fail("sched", "unexpected argument '%s'", a->pos[0]);
    if (a->pp < 1) return mk_cli_fail("sched", "--pp is required (pipeline stages >= 1)");
    if (a->micro_batches < 1)
        return mk_cli_fail("sched", "--micro-batches is required (micro-batches >= 1)");
    const mk_cli_defaults_t *d = &sched_defaults;
    if (mk_sched_kind_parse(a->schedule ? a->schedule : d->schedule, &sp->kind) < 0 ||
        mk_recompute_parse(a->recompute ? a->recompute : d->recompute, &sp->recompute) < 0)
        return mk_cli_fail("sched", "%s", mk_error_last());
    if (sp->recompute.kind == MK_RECOMPUTE_AUTO)
        return mk_cli_fail("sched", "--recompute auto needs a model and a cluster (merak plan / "
                                    "merak sim); use none, full, selective or stage-aware:R");
    sp->pp = a->pp;
    sp->m = a->micro_batches;
    sp->vpp = a->vpp ? a->vpp : mk_sched_traits(sp->kind)->interleaved ? d->vpp : 1;
    /* every instruction is printed (and held as JSON): cap the output */
    int64_t n;
    if (MK_PROD_WITHIN(MK_MAX_SCHED_PRINT_UNITS, &n, sp->pp, sp->vpp, sp->m) < 0)
        return mk_cli_fail("sched", "pp %d x vpp %d x %d micro-batches is more than %d (stage, chunk, "
                           "micro-batch) units, the most merak sched prints; merak sim takes up to %d",
                           sp->pp, sp->vpp, sp->m, MK_MAX_SCHED_PRINT_UNITS, MK_MAX_SCHED_UNITS);
    return 0;
}

int mk_cmd_sched(int argc, char **argv)
{
    mk_args_t a;
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_SCHED | MK_OPTG_JSON, sched_usage, &sched_defaults);
    if (rc) return rc < 0 ? MK_EXIT_USAGE : 0;
    mk_sched_spec_t sp;
    if ((rc = make_spec(&a, &sp))) return rc;
    mk_sched_t *s = mk_sched_build(&sp);
    if (!s) return mk_cli_fail("sched", "%s", mk_error_last());
    mk_sched_report_t rep;
    mk_sched_timeline_t tl;
    if (mk_sched_verify(s, &rep) < 0 || mk_sched_timeline(s, NULL, &tl) < 0) {
        fprintf(stderr, "merak sched: the streams do not verify: %s\n", mk_error_last());
        mk_sched_free(s);
        return 1;
    }
    const char *rname = a.recompute ? a.recompute : sched_defaults.recompute;
    if (a.json)
        rc = print_json(s, &tl, &rep, rname, a.verify) < 0 ? 1 : 0;
    else
        print_text(s, &tl, &rep, rname, a.verify);
    mk_sched_timeline_free(&tl);
    free(rep.max_inflight);
    mk_sched_free(s);
    return rc;
}
