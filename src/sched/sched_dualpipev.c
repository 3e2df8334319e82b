/* DualPipeV (DeepSeek-AI's DualPipe repository, dualpipev.py: the V-shaped,
 * one-copy form of DeepSeek-V3's DualPipe; torch.distributed.pipelining's
 * ScheduleDualPipeV): two chunks per rank in a V (mk_sched_vstage), the
 * forward of one micro-batch paired with the backward of another so that
 * each one's communication (the EP all-to-all) hides behind the other's
 * compute.  Rank r of p, m >= 2p micro-batches, the reference's eight
 * steps (Fc: forward of chunk c; Bc: its backward, B_IN then B_W at once;
 * Bc*: B_IN only, its B_W queued; W: the oldest queued B_W):
 *   1. 2(p-r-1) x F0            5. p-r-1 x (B1, F1 B0)
 *   2. r+1 x (F0, F1)           6. r+1 x (B1, B0), the second half starred
 *   3. p-r-1 x (B1*, W, F1)     7. p-r-1 x (W, B0*)
 *   4. m-2p+r+1 x (F0 B1, F1 B0)    8. r+1 x W
 * where "F B" is an overlapped pair (the B's B_IN carries overlap = 1, but
 * the last rank's first pair of step 4, which the reference runs apart).
 *   In flight on every rank: 2p chunk slots (p micro-batches of a whole
 *     stage) after step 2, one more while step 4's F0 precedes its B1:
 *     2p+1 slots.
 *   Bubble (F = B_IN = B_W, equal chunks): only the fill and drain of the
 *     first and last micro-batch; the pairs' overlap (the simulator hides
 *     each one's EP all-to-alls behind the other's compute: sim_step.c) is
 *     not in the unit-cost timeline, which has no communication.
 *   B_Ws after the last B_IN: r+1 (step 8). */
#include "config.h"
#include "sched/sched_internal.h"

#include <stdlib.h>

typedef struct {
    mk_sched_t *s;
    int st, nf[2], nb[2], *wq, wh, wn;
} dpv_t;

static int dpv_f(dpv_t *d, int c)
{
    return mk_sched_emit(d->s, d->st, MK_INSTR_F, d->nf[c]++, c);
}

/* A backward of chunk c: its B_W now, or queued (zb). */
static int dpv_b(dpv_t *d, int c, int zb)
{
    int mb = d->nb[c]++;
    if (mk_sched_emit(d->s, d->st, MK_INSTR_B_IN, mb, c) < 0) return -1;
    if (zb) return d->wq[d->wh + d->wn++] = mb * 2 + c, 0;
    return mk_sched_emit(d->s, d->st, MK_INSTR_B_W, mb, c);
}

/* An overlapped pair: the forward of chunk c0, then chunk c1's backward
 * (B_IN marked overlapped, B_W at once). */
static int dpv_fb(dpv_t *d, int c0, int c1)
{
    if (dpv_f(d, c0) < 0) return -1;
    int mb = d->nb[c1]++;
    if (mk_sched_emit(d->s, d->st, MK_INSTR_B_IN, mb, c1) < 0) return -1;
    mk_stream_t *q = &d->s->streams[d->st];
    for (int i = q->n - 1; i >= 0; i--) /* the B_IN just pushed (a SEND_GRAD may follow it) */
        if (q->v[i].op == MK_INSTR_B_IN) { q->v[i].overlap = 1; break; }
    return mk_sched_emit(d->s, d->st, MK_INSTR_B_W, mb, c1);
}

static int dpv_w(dpv_t *d)
{
    int sl = d->wq[d->wh++];
    d->wn--;
    return mk_sched_emit(d->s, d->st, MK_INSTR_B_W, sl / 2, sl % 2);
}

/* Steps 6-8: the drain, B_Ws filling it. */
static int dpv_drain(dpv_t *d, int p, int r)
{
    int rc = 0, zb = 0, n6 = r + 1;
    for (int i = 0; i < n6 && !rc; i++) {
        if (i == n6 / 2 && r % 2 == 1) zb = 1;
        rc = dpv_b(d, 1, zb);
        if (i == n6 / 2 && r % 2 == 0) zb = 1;
        rc = rc ? rc : dpv_b(d, 0, zb);
    }
    for (int i = 0; i < p - r - 1 && !rc; i++) rc = dpv_w(d) < 0 || dpv_b(d, 0, 1) < 0 ? -1 : 0;
    for (int i = 0; i < r + 1 && !rc; i++) rc = dpv_w(d);
    return rc;
}

static int dpv_stage(dpv_t *d, int p, int m, int r)
{
    int rc = 0;
    for (int i = 0; i < 2 * (p - r - 1) && !rc; i++) rc = dpv_f(d, 0);
    for (int i = 0; i < r + 1 && !rc; i++) rc = dpv_f(d, 0) < 0 || dpv_f(d, 1) < 0 ? -1 : 0;
    for (int i = 0; i < p - r - 1 && !rc; i++)
        rc = dpv_b(d, 1, 1) < 0 || dpv_w(d) < 0 || dpv_f(d, 1) < 0 ? -1 : 0;
    for (int i = 0; i < m - 2 * p + r + 1 && !rc; i++) {
        /* the last rank's first F0 and B1 run apart (the reference's choice: less bubble) */
        int apart = i == 0 && r == p - 1;
        rc = (apart ? dpv_f(d, 0) < 0 || dpv_b(d, 1, 0) < 0 : dpv_fb(d, 0, 1) < 0) || dpv_fb(d, 1, 0) < 0 ? -1 : 0;
    }
    for (int i = 0; i < p - r - 1 && !rc; i++) rc = dpv_b(d, 1, 0) < 0 || dpv_fb(d, 1, 0) < 0 ? -1 : 0;
    return rc ? -1 : dpv_drain(d, p, r);
}

int mk_sched_gen_dualpipev(mk_sched_t *s)
{
    int p = s->spec.pp, m = s->spec.m; /* m >= 2p and vpp 2: check_spec */
    dpv_t d = {.s = s, .wq = malloc((size_t)2 * m * sizeof *d.wq)};
    if (!d.wq) return mk_error_set("sched: out of memory");
    int rc = 0;
    for (int r = 0; r < p && !rc; r++) {
        d.st = r, d.nf[0] = d.nf[1] = d.nb[0] = d.nb[1] = d.wh = d.wn = 0;
        rc = dpv_stage(&d, p, m, r);
    }
    free(d.wq);
    return rc;
}
