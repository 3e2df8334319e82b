/* --trace FILE: each rank records the events of the traced step (the last)
 * in memory, with times from one barrier (t0 = MPI_Wtime() after it, so the
 * ranks' clocks are aligned to within the barrier's skew); at the end rank 0
 * gathers them and writes one Chrome trace with the simulator's names
 * (merak/trace.h): pid = global rank, tid = compute | p2p | tp | dp. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double mk_exec_now(const mk_exec_t *e) { return MPI_Wtime() - e->trace.t0; }

void mk_exec_trace_start(mk_exec_t *e)
{
    MPI_Request r;
    MPI_Ibarrier(e->comm.world, &r);
    mk_comm_wait_for(&e->comm, &r, "the trace's start barrier", -1); /* a failure shows at the first wait after */
    e->trace.t0 = MPI_Wtime();
    e->trace.on = 1;
    e->trace.n = 0;
    mk_exec_trace_mem(e);
}

static mk_xev_t *push(mk_exec_t *e)
{
    if (e->trace.n == e->trace.cap) {
        int cap = e->trace.cap ? 2 * e->trace.cap : 256;
        mk_xev_t *n = realloc(e->trace.ev, cap * sizeof *n);
        if (!n) return NULL;
        e->trace.ev = n, e->trace.cap = cap;
    }
    mk_xev_t *x = &e->trace.ev[e->trace.n++];
    memset(x, 0, sizeof *x);
    return x;
}

/* An event from ts (mk_exec_now) to now. */
void mk_exec_trace_ev(mk_exec_t *e, int tid, const char *name, double ts, int mb, int chunk, int layer)
{
    if (!e->trace.on) return;
    double now = mk_exec_now(e);
    mk_xev_t *x = push(e);
    if (!x) return;
    snprintf(x->name, sizeof x->name, "%s", name);
    x->tid = tid;
    x->stage = e->comm.pp_rank;
    x->mb = mb, x->chunk = chunk, x->layer = layer;
    x->ts = ts, x->dur = now - ts;
}

void mk_exec_trace_count(mk_exec_t *e, const char *name, double value)
{
    if (!e->trace.on) return;
    mk_xev_t *x = push(e);
    if (!x) return;
    snprintf(x->name, sizeof x->name, "%s", name);
    x->tid = -1;  /* counters have no stream */
    x->ts = mk_exec_now(e);
    x->dur = value;
}

void mk_exec_trace_mem(mk_exec_t *e) { mk_exec_trace_count(e, "memory", (double)e->run.mem_cur); }

/* The TP all-reduce of mk_gpt_run_t (ctx = the executor), traced as AR.tp. */
int mk_exec_tp_allreduce(void *ctx, float *buf, int n, int is_max)
{
    mk_exec_t *e = ctx;
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    int rc = mk_comm_tp_allreduce(&e->comm, buf, n, is_max);
    mk_exec_trace_ev(e, MK_TRACE_TP, "AR.tp", t, e->trace.cur_mb, e->trace.cur_chunk, e->trace.cur_layer);
    return rc;
}

/* The high-water mark so far, as a counter of its own. */
void mk_exec_trace_peak(mk_exec_t *e)
{
    if (!e->trace.on) return;
    mk_exec_trace_mem(e);
    if (e->trace.n) {
        snprintf(e->trace.ev[e->trace.n - 1].name, sizeof e->trace.ev[0].name, "peak_memory");
        e->trace.ev[e->trace.n - 1].dur = (double)e->run.mem_peak;
    }
}

/* Collective: gather every rank's events on rank 0, which writes path. */
int mk_exec_trace_write(mk_exec_t *e, const char *path)
{
    int size = e->comm.size, rank = e->comm.rank, bytes = e->trace.n * (int)sizeof(mk_xev_t);
    int *counts = rank == 0 ? calloc(size, sizeof *counts) : NULL;
    int *displs = rank == 0 ? calloc(size, sizeof *displs) : NULL;
    MPI_Request req;
    MPI_Igather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, e->comm.world, &req);
    if (mk_comm_wait_for(&e->comm, &req, "the trace's gather", -1) < 0) return free(counts), free(displs), -1;
    long total = 0;
    for (int r = 0; rank == 0 && r < size; r++) displs[r] = (int)total, total += counts[r];
    mk_xev_t *all = rank == 0 ? malloc(total ? total : 1) : NULL;
    MPI_Igatherv(e->trace.ev, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, e->comm.world, &req);
    int rc = mk_comm_wait_for(&e->comm, &req, "the trace's gather", -1);
    if (rc == 0 && rank == 0) {
        mk_trace_t *t = mk_trace_open(path);
        if (!t) rc = -1;
        for (int r = 0; t && r < size; r++) {
            char label[96], cpl[24] = "";
            int d = (r / e->comm.tp) % e->comm.dp;  /* the DP group is dp x cp (exec_cp.c) */
            if (e->cp.n > 1) snprintf(cpl, sizeof cpl, ", cp %d", d % e->cp.n);
            snprintf(label, sizeof label, "rank %d (stage %d, dp %d%s, tp %d)", r, r / (e->comm.tp * e->comm.dp),
                     d / e->cp.n, cpl, r % e->comm.tp);
            mk_trace_rank(t, r, label);
            if (e->cp.n > 1) mk_trace_stream(t, r, MK_TRACE_CP); /* the K/V ring, as the simulator names it */
            const mk_xev_t *x = (const mk_xev_t *)((const char *)all + displs[r]);
            for (int i = 0; i < counts[r] / (int)sizeof *x; i++) {
                if (x[i].tid < 0) mk_trace_counter(t, r, x[i].name, x[i].ts, x[i].dur);
                else mk_trace_complete(t, r, x[i].tid, x[i].name, x[i].ts, x[i].dur, x[i].stage, x[i].mb,
                                       x[i].chunk, x[i].layer);
            }
        }
        if (t) {
            char v[64];
            mk_trace_meta(t, "source", "merak run (measured)");
            snprintf(v, sizeof v, "%d", e->o->steps);
            mk_trace_meta(t, "step", v);
            mk_plan_trace_meta(&e->o->ctx->plan, t); /* model, layout, schedule, as the simulator's */
            rc = mk_trace_close(t);
        }
    }
    free(all); free(counts); free(displs);
    if (mk_comm_bcast(&e->comm, &rc, 1, MPI_INT, 0, e->comm.world, "rank 0's trace write") < 0) return -1;
    return rc;
}
