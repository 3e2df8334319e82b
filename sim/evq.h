/* The simulator's event queue (internal to sim/), after ASTRA-sim's:
 * events carry a time, a sequence number and a typed payload with the
 * handler that consumes it.  Popped in (time, sequence) order, so events
 * at the same time run in the order they were queued: every run of the
 * same inputs is the same, bit for bit, and every shared resource (a
 * node's NIC, a rank's p2p and DP streams) is reserved in time order. */
#ifndef MERAK_SIM_EVQ_H
#define MERAK_SIM_EVQ_H

typedef struct mk_ev mk_ev_t;

/* Consumes one event; 0, or -1 (with mk_error_set) to stop the queue. */
typedef int (*mk_ev_fn)(void *ctx, const mk_ev_t *e);

struct mk_ev {
    double t;      /* when, seconds of simulated time */
    long seq;      /* queue order: breaks ties of t */
    int kind;      /* what happens (the handler's own enum) */
    int arg;       /* whom it concerns (e.g. a pipeline stage) */
    mk_ev_fn fn;   /* handler, called with ctx */
    void *ctx;
};

typedef struct mk_evq {
    mk_ev_t *heap; /* [cap] binary min-heap on (t, seq), n in use */
    int n, cap;
    long seq;      /* next sequence number */
} mk_evq_t;

void mk_evq_init(mk_evq_t *q);
void mk_evq_free(mk_evq_t *q);
/* Queue an event at time t.  Returns 0 or -1 (out of memory). */
int mk_evq_push(mk_evq_t *q, double t, int kind, int arg, mk_ev_fn fn, void *ctx);
/* Remove the earliest event into *e.  Returns 1, or 0 when empty. */
int mk_evq_pop(mk_evq_t *q, mk_ev_t *e);
/* Pop and handle events until none is left.  Returns 0, or -1 as soon as
 * a handler fails (the rest stay queued). */
int mk_evq_run(mk_evq_t *q);

#endif
