/* The event queue (evq.h): a binary heap on (time, sequence). */
#include "sim/evq.h"

#include "merak/common.h"

#include <stdlib.h>
#include <string.h>

void mk_evq_init(mk_evq_t *q)
{
    memset(q, 0, sizeof *q);
}

void mk_evq_free(mk_evq_t *q)
{
    free(q->heap);
    mk_evq_init(q);
}

/* a goes before b */
static int ev_before(const mk_ev_t *a, const mk_ev_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int mk_evq_push(mk_evq_t *q, double t, int kind, int arg, mk_ev_fn fn, void *ctx)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        mk_ev_t *h = realloc(q->heap, cap * sizeof *h);
        if (!h) return mk_error_set("out of memory");
        q->heap = h, q->cap = cap;
    }
    mk_ev_t e = {t, q->seq++, kind, arg, fn, ctx};
    int i = q->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (ev_before(&q->heap[up], &e)) break;
        q->heap[i] = q->heap[up];
        i = up;
    }
    q->heap[i] = e;
    return 0;
}

int mk_evq_pop(mk_evq_t *q, mk_ev_t *e)
{
    if (q->n == 0) return 0;
    mk_ev_t last = q->heap[--q->n];
    *e = q->heap[0];
    int i = 0, n = q->n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const mk_ev_t *best = &last;
        if (l < n && ev_before(&q->heap[l], best)) m = l, best = &q->heap[l];
        if (r < n && ev_before(&q->heap[r], best)) m = r, best = &q->heap[r];
        if (m == i) break;
        q->heap[i] = q->heap[m];
        i = m;
    }
    if (n) q->heap[i] = last;
    return 1;
}

int mk_evq_run(mk_evq_t *q)
{
    mk_ev_t e;
    while (mk_evq_pop(q, &e))
        if (e.fn(e.ctx, &e) < 0) return -1;
    return 0;
}
