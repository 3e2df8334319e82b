/* ZeRO-1 (--zero 1): the parameter block of a rank is cut into dp equal
 * contiguous ranges, one per DP rank.  OPT_STEP reduce-scatters the
 * gradients over the DP group (instead of the per-layer all-reduces),
 * runs AdamW on this rank's range only (so the Adam moments are 1/dp of
 * the model), and all-gathers the updated parameters. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <stdlib.h>
#include <string.h>

int mk_exec_zero_init(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    int dp = e->comm.dp;
    size_t n = g->n_params, S = (n + dp - 1) / dp;
    e->zero.counts = calloc(dp, sizeof *e->zero.counts);
    e->zero.displs = calloc(dp, sizeof *e->zero.displs);
    for (int d = 0; d < dp; d++) {
        size_t lo = d * S < n ? d * S : n, hi = lo + S < n ? lo + S : n;
        e->zero.displs[d] = (int)lo;
        e->zero.counts[d] = (int)(hi - lo);
    }
    e->zero.lo = e->zero.displs[e->comm.dp_rank];
    e->zero.hi = e->zero.lo + e->zero.counts[e->comm.dp_rank];
    size_t s = e->zero.hi - e->zero.lo ? e->zero.hi - e->zero.lo : 1;
    /* the full moments go: 1/dp of them remain */
    g->be->free(g->be->ctx, g->m); g->be->free(g->be->ctx, g->v);
    g->m = g->v = NULL;
    e->run.mem_cur -= 2 * (n ? n : 1) * sizeof(float);
    if (!(e->zero.grads = mk_gpt_alloc(&e->run, g, s)) || !(e->zero.m = mk_gpt_alloc(&e->run, g, s)) ||
        !(e->zero.v = mk_gpt_alloc(&e->run, g, s)))
        return -1;
    g->be->zero(g->be->ctx, e->zero.m, s * sizeof(float));
    g->be->zero(g->be->ctx, e->zero.v, s * sizeof(float));
    e->run.mem_peak = e->run.mem_cur;  /* nothing transient so far */
    return 0;
}

void mk_exec_zero_free(mk_exec_t *e)
{
    size_t s = e->zero.hi - e->zero.lo ? e->zero.hi - e->zero.lo : 1;
    if (e->g) {
        mk_gpt_release(&e->run, e->g, e->zero.grads, s);
        mk_gpt_release(&e->run, e->g, e->zero.m, s);
        mk_gpt_release(&e->run, e->g, e->zero.v, s);
    }
    free(e->zero.counts); free(e->zero.displs);
}

int mk_exec_zero_scatter(mk_exec_t *e)
{
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    int rc = MPI_Reduce_scatter(e->g->grads, e->zero.grads, e->zero.counts, MPI_FLOAT, MPI_SUM, e->comm.dpc);
    mk_exec_trace_ev(e, MK_TRACE_DP, "RS.dp", t, -1, 0, -1);
    return rc == MPI_SUCCESS ? 0 : mk_error_set("MPI_Reduce_scatter failed");
}

int mk_exec_zero_gather(mk_exec_t *e)
{
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, e->g->params, e->zero.counts, e->zero.displs, MPI_FLOAT,
                            e->comm.dpc);
    mk_exec_trace_ev(e, MK_TRACE_DP, "AG.dp", t, -1, 0, -1);
    return rc == MPI_SUCCESS ? 0 : mk_error_set("MPI_Allgatherv failed");
}

/* The part [a, b) of tensor k's range that DP rank d holds. */
static void isect(const mk_exec_t *e, int k, int d, size_t *a, size_t *b)
{
    const mk_gpt_tensor_t *t = &e->g->t[k];
    size_t lo = e->zero.displs[d], hi = lo + e->zero.counts[d], o = t->off, n = (size_t)t->lrows * t->lcols;
    *a = o > lo ? o : lo;
    *b = o + n < hi ? o + n : hi;
    if (*b < *a) *b = *a;
}

/* Tensor k's moment (kind 1 m, 2 v), assembled from the DP group (collective over dpc). */
void mk_exec_zero_get(mk_exec_t *e, int k, int kind, float *host)
{
    int dp = e->comm.dp;
    int *cnt = calloc(dp, sizeof *cnt), *dsp = calloc(dp, sizeof *dsp);
    for (int d = 0; d < dp; d++) {
        size_t a, b;
        isect(e, k, d, &a, &b);
        cnt[d] = (int)(b - a);
        dsp[d] = (int)(a - e->g->t[k].off);
    }
    size_t a, b;
    isect(e, k, e->comm.dp_rank, &a, &b);
    float *src = (kind == 1 ? e->zero.m : e->zero.v) + (a - e->zero.lo);
    MPI_Allgatherv(src, (int)(b - a), MPI_FLOAT, host, cnt, dsp, MPI_FLOAT, e->comm.dpc);
    free(cnt); free(dsp);
}

void mk_exec_zero_set(mk_exec_t *e, int k, int kind, const float *host)
{
    size_t a, b;
    isect(e, k, e->comm.dp_rank, &a, &b);
    memcpy((kind == 1 ? e->zero.m : e->zero.v) + (a - e->zero.lo), host + (a - e->g->t[k].off), (b - a) * sizeof(float));
}
