/* Reading Chrome Trace Event files written by the simulator or the
 * executor (format: traces/README.md), for `merak trace summary|diff`.
 * Complete events ("ph":"X") become mk_tev_t; counters ("ph":"C") give
 * the peak memory per rank. */
#ifndef MERAK_TRACEFILE_H
#define MERAK_TRACEFILE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_tev {
    char name[40];      /* F3, B_IN2, AR.tp, OPT, ... */
    char kind[24];      /* name without its micro-batch number: F, B_IN, AR.tp */
    char stream[16];    /* compute, p2p, tp, dp, cp (the tid's stream) */
    int pid;            /* global rank */
    int tid;            /* the track: stream + 10 * lane (merak/trace.h); -1 not an integer */
    int stage, mb;      /* from args; -1 when absent */
    double ts, dur;     /* microseconds */
} mk_tev_t;

typedef struct mk_tracefile {
    int n;
    mk_tev_t *ev;       /* sorted by (pid, stream, ts), ties in file order */
    int n_ranks;        /* max pid + 1 */
    int n_pids;         /* distinct pids with events: the ranks traced (the simulator
                           traces one per stage: pids 0, dp*tp, ...) */
    double *peak_mem;   /* [n_ranks] highest counter value, 0 if none */
} mk_tracefile_t;

/* Load and check a trace.  Returns NULL (mk_error_last()) on a missing or
 * malformed file. */
mk_tracefile_t *mk_tracefile_load(const char *path);
void mk_tracefile_free(mk_tracefile_t *t);

/* Print a per-rank summary: step time, busy and idle share of the compute
 * stream, time per event kind. */
void mk_tracefile_summary(const mk_tracefile_t *t, FILE *out);

/* The nesting check of `merak trace check`: on every track (pid, tid),
 * two complete events are disjoint or one holds the other, compared at
 * the written precision (1e-4 us).  Returns 0, or 1 with the first
 * partial overlap described in msg (one line), -1 out of memory. */
int mk_tracefile_check(const mk_tracefile_t *t, char *msg, size_t n);

typedef struct mk_tracefile_diff {
    double step_pred_s, step_meas_s, step_rel_err;
    int n_kinds;
    char kinds[32][24];
    double kind_pred_s[32], kind_meas_s[32]; /* total time per kind, all ranks */
    int n_stages;
    double stage_busy_pred_s[512], stage_busy_meas_s[512]; /* compute busy time per stage (rank max) */
    double mean_abs_rel_err;  /* over matched events with measured dur > 0 */
    int matched;
    int aggregated;           /* communication streams compared by kind totals (counts differ) */
    int unmatched_ranks;      /* measured ranks the prediction lacks: not compared, a mismatch */
    int unmatched[16];        /* the first of them */
} mk_tracefile_diff_t;

/* Align two traces rank by rank and event by event (same events in the
 * same order per rank and stream); -1 with a message when they come from
 * different plans.  Only the prediction's ranks are compared (the simulator
 * traces one rank per stage, the executor all); compute-stream waits
 * (RECV_*) are skipped, as the simulator writes them only when it blocks;
 * a communication stream whose event count differs between the engines is
 * compared by time per kind (counted in `aggregated`); measured ranks the
 * prediction lacks are counted in `unmatched_ranks`, not compared. */
int mk_tracefile_diff(const mk_tracefile_t *pred, const mk_tracefile_t *meas, mk_tracefile_diff_t *d);

#ifdef __cplusplus
}
#endif
#endif
