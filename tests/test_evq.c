/* The simulator's event queue (sim/evq.h): events come out in time
 * order, ties in the order they were queued (what makes simulations
 * deterministic), handlers may queue more, and a failing handler stops
 * the run. */
#include "config.h"
#include "merak/common.h"
#include "sim/evq.h"
#include "tests/check.h"

#include <stdlib.h>

typedef struct log {
    mk_evq_t *q;
    int n, order[64];
    double t[64];
} log_t;

static int record(void *ctx, const mk_ev_t *e)
{
    log_t *L = ctx;
    L->order[L->n] = e->arg, L->t[L->n] = e->t, L->n++;
    /* kind 1 queues a follow-up at the same time: it goes after what is there */
    if (e->kind == 1) return mk_evq_push(L->q, e->t, 0, e->arg + 100, record, L);
    return e->kind == 2 ? mk_error_set("stop at %d", e->arg) : 0;
}

int main(void)
{
    mk_evq_t q;
    mk_evq_init(&q);
    log_t L = {&q, 0, {0}, {0}};
    /* 40 events over 4 distinct times, pushed out of order: lots of ties */
    for (int i = 0; i < 40; i++) CHECK(mk_evq_push(&q, (double)((i * 7) % 4), 0, i, record, &L) == 0, "push %d", i);
    CHECK(mk_evq_run(&q) == 0, "run");
    CHECK(L.n == 40, "%d events", L.n);
    for (int i = 1; i < L.n; i++) {
        CHECK(L.t[i - 1] <= L.t[i], "time order at %d", i);
        if (L.t[i - 1] == L.t[i]) CHECK(L.order[i - 1] < L.order[i], "tie order at %d: %d then %d", i,
                                        L.order[i - 1], L.order[i]);
    }
    mk_ev_t e;
    CHECK(mk_evq_pop(&q, &e) == 0, "empty after the run");

    L.n = 0;
    mk_evq_push(&q, 1.0, 1, 1, record, &L);
    mk_evq_push(&q, 1.0, 0, 2, record, &L);
    mk_evq_push(&q, 0.5, 0, 3, record, &L);
    CHECK(mk_evq_run(&q) == 0, "run with follow-ups");
    CHECK(L.n == 4 && L.order[0] == 3 && L.order[1] == 1 && L.order[2] == 2 && L.order[3] == 101,
          "follow-up order %d %d %d %d", L.order[0], L.order[1], L.order[2], L.order[3]);

    L.n = 0;
    mk_evq_push(&q, 2.0, 0, 5, record, &L);
    mk_evq_push(&q, 1.0, 2, 4, record, &L);
    CHECK(mk_evq_run(&q) == -1, "a failing handler stops the queue");
    CHECK(L.n == 1 && q.n == 1, "%d handled, %d left", L.n, q.n);
    mk_evq_free(&q);
    CHECK_DONE();
}
