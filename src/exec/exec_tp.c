/* Sub-pipelined TP in the executor: the nonblocking TP all-reduce that
 * gpt_layers.c starts per half micro-batch (mk_gpt_run_t.iallreduce), its
 * completion (tp_wait) and the polling between kernels (tp_poll), which
 * also keeps the pipeline sends and DP reductions moving.  A completed
 * all-reduce is traced as `AR.tp` from its start to when a poll or the
 * wait first saw it done. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <time.h>

/* The slots live in mk_exec_t (tp_slots): no state outside the executor. */

static void observed(mk_exec_t *e, mk_tp_slot_t *s)
{
    s->done = 1;
    mk_exec_trace_ev(e, MK_TRACE_TP, "AR.tp", s->t0, s->mb, s->chunk, s->layer);
}

static int tp_start(void *ctx, float *buf, int n)
{
    mk_exec_t *e = ctx;
    int i = 0;
    while (i < MK_TP_SLOTS && e->tp_slots[i].used) i++;
    if (i == MK_TP_SLOTS) return mk_error_set("more than %d TP all-reduces in flight", MK_TP_SLOTS);
    mk_tp_slot_t *s = &e->tp_slots[i];
    s->buf = buf, s->n = n, s->used = 1, s->done = 0;
    s->mb = e->trace.cur_mb, s->chunk = e->trace.cur_chunk, s->layer = e->trace.cur_layer;
    s->t0 = e->trace.on ? mk_exec_now(e) : 0.0;
    s->host = mk_comm_stage(&e->comm, buf, (size_t)n * sizeof(float), 1);
    if (MPI_Iallreduce(MPI_IN_PLACE, s->host, n, MPI_FLOAT, MPI_SUM, e->comm.tpc, &s->req) != MPI_SUCCESS) {
        s->used = 0;
        return mk_error_set("MPI_Iallreduce (TP) failed");
    }
    return i;
}

static void tp_poll(void *ctx)
{
    mk_exec_t *e = ctx;
    for (int i = 0; i < MK_TP_SLOTS; i++)
        if (e->tp_slots[i].used && !e->tp_slots[i].done) {
            int done = 0;
            MPI_Test(&e->tp_slots[i].req, &done, MPI_STATUS_IGNORE);
            if (done) observed(e, &e->tp_slots[i]);
        }
    mk_exec_poll(e);
}

static int tp_wait(void *ctx, int h)
{
    mk_exec_t *e = ctx;
    if (h < 0 || h >= MK_TP_SLOTS || !e->tp_slots[h].used) return mk_error_set("bad TP all-reduce handle %d", h);
    mk_tp_slot_t *s = &e->tp_slots[h];
    mk_comm_watch_t w = {0};
    while (!s->done) {
        int done = 0;
        if (MPI_Test(&s->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return mk_error_set("TP all-reduce failed");
        if (done) { observed(e, s); break; }
        mk_exec_poll(e);
        if (mk_comm_watch(&e->comm, &w, "the TP all-reduce", -1) < 0) return -1;
    }
    mk_comm_unstage(&e->comm, s->buf, s->host, (size_t)s->n * sizeof(float), 1);
    s->used = 0;
    return 0;
}

/* Sequence parallelism's collectives (mk_gpt_run_t.sp_coll) over the TP
 * group, blocking, traced as AG.sp / RS.sp on the TP stream.  A local
 * buffer that is full's own slot (or full itself, for the reduce-scatter)
 * goes in place. */
static int sp_coll(void *ctx, float *full, float *local, int n, int gather)
{
    mk_exec_t *e = ctx;
    const mk_comm_t *c = &e->comm;
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    size_t nb = (size_t)n * sizeof(float), fb = nb * c->tp;
    int in_place = gather ? local == full + (size_t)c->tp_rank * n : local == full, rc;
    float *hf = mk_comm_stage(c, full, fb, !gather || in_place);
    float *hl = in_place ? NULL : mk_comm_stage(c, local, nb, gather);
    MPI_Request r;
    if (gather)
        rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : hl, n, MPI_FLOAT, hf, n, MPI_FLOAT, c->tpc, &r);
    else
        rc = MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : hf, in_place ? hf : hl, n, MPI_FLOAT, MPI_SUM,
                                       c->tpc, &r);
    if (rc == MPI_SUCCESS && mk_comm_wait_for(c, &r, gather ? "the sequence-parallel all-gather"
                                                            : "the sequence-parallel reduce-scatter", -1) < 0)
        rc = MPI_ERR_OTHER;
    if (hl) mk_comm_unstage(c, local, hl, nb, !gather && rc == MPI_SUCCESS);
    /* in place the result is full's first n floats */
    mk_comm_unstage(c, full, hf, gather ? fb : nb, rc == MPI_SUCCESS && (gather || in_place));
    mk_exec_trace_ev(e, MK_TRACE_TP, gather ? "AG.sp" : "RS.sp", t, e->trace.cur_mb, e->trace.cur_chunk,
                     e->trace.cur_layer);
    return rc == MPI_SUCCESS ? 0 : mk_error_set("MPI %s (sequence-parallel TP) failed",
                                                gather ? "Allgather" : "Reduce_scatter_block");
}

void mk_exec_tp_setup(mk_exec_t *e)
{
    e->run.sp = e->o->ctx->plan.seqpar && e->o->ctx->plan.tp > 1;
    e->run.sp_coll = sp_coll;
    e->run.tp_overlap = e->o->ctx->plan.tp_overlap;
    e->run.iallreduce = tp_start;
    e->run.tp_wait = tp_wait;
    e->run.tp_poll = tp_poll;
    for (int i = 0; i < MK_TP_SLOTS; i++) e->tp_slots[i].used = 0;
}
