/* The stream walker: the one interpreter of the scheduler's streams
 * (sched.h).  It decodes each instruction into an event, keeps the
 * per-slot bookkeeping every engine needs (a forward's checkpoint count,
 * whether R ran, micro-batches in flight), owns THE message key and the
 * send/receive matching and the tied-embedding rendezvous, checks ranges,
 * and calls the driver's hooks.  The verifier, the rendezvous check, the
 * unit-cost timeline, the simulator, the memory tracker and the executor
 * all run on it, so they agree on these rules by construction.
 *
 * A slot is (micro-batch, chunk) on one stage: slot = mb * vpp + chunk.
 * A virtual stage is k = chunk * pp + stage (the pipeline is chunk-major).
 *
 * Modes (when is an instruction ready?):
 *   MK_WALK_BUFFERED    a RECV once its SEND was issued (sends never block);
 *                       REDUCE_TIED once both ends (first and last stage)
 *                       have reached it.  The unit-cost timeline (sweep)
 *                       and the event-driven simulator.
 *   MK_WALK_RENDEZVOUS  a SEND or RECV only together with its peer standing
 *                       at the matching RECV or SEND (both complete at once);
 *                       REDUCE_TIED with the other end at its REDUCE_TIED.
 *   MK_WALK_LOCAL       one stage alone, everything is ready: the recv and
 *                       collective hooks satisfy receives and REDUCE_TIED
 *                       themselves (the executor's MPI calls, the memory
 *                       tracker, the verifier's scan).
 *
 * Drivers:
 *   sweep:        mk_walk_run() advances every stage until none moves, then
 *                 fails naming the deadlock if a stage did not finish.
 *   event-driven: mk_walk_stage(w, s) runs stage s until a hook returns
 *                 MK_WALK_YIELD (the instruction took time: it is done, the
 *                 driver resumes the stage later), the next instruction is
 *                 not ready (the block hook says which, the wake hook later
 *                 says it is ready), or the stream ends; mk_walk_state()
 *                 says which.  Resuming a blocked stage re-checks readiness.
 *   one stage:    mk_walk_stage(w, s) in MK_WALK_LOCAL mode runs the whole
 *                 stream unless a hook yields or blocks.
 *
 * Hooks (each may be NULL = nothing to do, done) take the driver's ctx and
 * the event and return MK_WALK_GO (done, go on), MK_WALK_YIELD (done, took
 * time: stop this stage), MK_WALK_BLOCK (not done: the walker stops at the
 * instruction and calls its hooks again on the next visit) or -1 (error,
 * message set with mk_error_set; the walk returns -1).  For one
 * instruction the walker calls: memory then compute (F F_PRE R B B_IN
 * B_W), send (SEND_*), recv (RECV_*), collective (REDUCE_TIED
 * REDUCE_GRADS OPT_STEP), load (LOAD).  The bookkeeping is committed only
 * after the hooks returned GO or YIELD; then wake is called for a stage
 * this instruction made ready, before the walker acts on YIELD. */
#ifndef MERAK_WALK_H
#define MERAK_WALK_H

#include "merak/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MK_WALK_GO = 0, MK_WALK_YIELD = 1, MK_WALK_BLOCK = 2 };

typedef enum { MK_WALK_BUFFERED = 0, MK_WALK_RENDEZVOUS, MK_WALK_LOCAL } mk_walk_mode_t;

/* Where a stage stands after mk_walk_stage. */
typedef enum {
    MK_WALK_READY = 0,   /* not stopped (not run yet, or moved by its rendezvous peer) */
    MK_WALK_YIELDED,     /* a hook returned MK_WALK_YIELD */
    MK_WALK_BLOCKED,     /* the next instruction is not ready (or a hook returned BLOCK) */
    MK_WALK_ENDED        /* the stream is done */
} mk_walk_state_t;

/* One decoded instruction.  Fields that do not apply are -1 (0 for flags and ckpt). */
typedef struct mk_walk_ev {
    const mk_instr_t *in;   /* the instruction */
    int stage, index;       /* its stream and position in it */
    int slot;               /* mb*vpp + chunk of a per-micro-batch op (LOAD, compute, SEND/RECV) */
    int vstage;             /* chunk*pp + stage */
    int vpeer;              /* SEND_ACT/RECV_GRAD: vstage+1, RECV_ACT/SEND_GRAD: vstage-1 (may be -1
                               or pp*vpp for an impossible message: key is -1 then) */
    int peer;               /* SEND/RECV: the other end's stage (vpeer mod pp); REDUCE_TIED: the
                               other end (stage 0 <-> pp-1) */
    int key;                /* SEND/RECV: message key in [0, mk_walk_n_keys) (mk_walk_msg_key) */
    int ckpt;               /* F/F_PRE: checkpointed layers of its chunk (F: the instruction's or
                               opts.ckpt_f's count, F_PRE: all; capped to [0, cap]);
                               R/B/B_IN/B_W: the count of the slot's forward (0 before any) */
    int recomputes;         /* B/B_IN: replays its forward first (ckpt > 0 and no R since it) */
    int holds;              /* F/F_PRE: the slot's activations become held (ckpt of them stored) */
    int regrows;            /* R: the slot's held activations become the full set */
    int releases;           /* B, B_W (zb-h1: B_W still needs the layer inputs): freed after it */
    int inflight;           /* slots holding activations on the stage after this op */
    int last_bwd;           /* 1: the stage's last backward work (B/B_IN/B_W): gradients final */
    int bucket;             /* REDUCE_GRADS: its index among the stage's REDUCE_GRADS */
    int tied_first;         /* REDUCE_TIED: 1 for the end that completes it first (the other end
                               is waiting at its REDUCE_TIED; LOCAL: always 1) */
} mk_walk_ev_t;

typedef int (*mk_walk_hook_t)(void *ctx, const mk_walk_ev_t *ev);

typedef struct mk_walk_hooks {
    void *ctx;
    mk_walk_hook_t memory;      /* every compute op, before compute: holds/regrows/releases */
    mk_walk_hook_t compute, send, recv, collective, load;
    mk_walk_hook_t block;       /* the walker stopped at ev (not ready); once per wait */
    int (*wake)(void *ctx, int stage, const mk_walk_ev_t *ev); /* blocked `stage` is ready now
                                   because of ev (its SEND, or the other end's REDUCE_TIED) */
} mk_walk_hooks_t;

typedef struct mk_walk_opts {
    mk_walk_mode_t mode;
    const int *ckpt_cap;        /* [pp*vpp] at s*vpp+c: most layers a forward checkpoints (the
                                   chunk's checkpointable layers); NULL: the schedule's layers */
    const int *ckpt_f;          /* [pp*vpp] at s*vpp+c: replaces every plain F's own count (the
                                   memory tracker's search); NULL: the instruction's */
    int lenient;                /* decode only (the verifier's scan): no error for an impossible
                                   message, a misplaced REDUCE_TIED or a second send */
} mk_walk_opts_t;

/* The walker's state.  Drivers read pos[] and the mk_walk_* queries; the
 * rest is private. */
typedef struct mk_walk {
    const mk_sched_t *s;
    mk_walk_opts_t o;
    mk_walk_hooks_t h;
    int pp, vpp, m, V, nmc;
    int *pos;                   /* [pp] next instruction of each stage */
    int *state;                 /* [pp] mk_walk_state_t */
    int *waiting;               /* [pp] index the stage is blocked at (-1: none) */
    int *bkey;                  /* [pp] BUFFERED: the message key it waits for there (-1: not a RECV) */
    int *inflight, *nbucket, *last_bwd, *tied_in, *tied_done; /* [pp] */
    int *ck;                    /* [pp*m*vpp] forward's checkpoint count per (stage, slot) */
    unsigned char *rran;        /* [pp*m*vpp] R ran since that forward */
    unsigned char *sent;        /* [mk_walk_n_keys] SEND issued (BUFFERED, RENDEZVOUS; LOCAL: NULL:
                                   a stage alone gates nothing on its sends) */
    unsigned char skip[MK_INSTR_COUNT]; /* per op: LOCAL, no hook watches it: passed over undecoded */
} mk_walk_t;

/* Message key of a SEND/RECV: (act or grad, micro-batch, receiving virtual
 * stage) -> (grad*m + mb)*pp*vpp + dst, so a SEND and its RECV share it;
 * -1 for other ops or impossible fields. */
int mk_walk_msg_key(const mk_sched_t *s, int stage, const mk_instr_t *in);
int mk_walk_n_keys(const mk_sched_t *s);    /* 2*m*pp*vpp */

/* opts NULL: buffered, no overrides; hooks NULL: none.  Returns 0, -1 (out of memory). */
int mk_walk_init(mk_walk_t *w, const mk_sched_t *s, const mk_walk_opts_t *opts,
                 const mk_walk_hooks_t *hooks);
void mk_walk_reset(mk_walk_t *w);           /* back to the start of the step */
/* Stage s alone back to its start (LOCAL: walk it again, e.g. with other
 * opts.ckpt_f contents); costs that stage's slots only. */
void mk_walk_reset_stage(mk_walk_t *w, int s);
void mk_walk_free(mk_walk_t *w);

/* Run stage s until it yields, blocks or ends.  Returns how many
 * instructions completed (a rendezvous peer's not counted), or -1. */
int mk_walk_stage(mk_walk_t *w, int s);
mk_walk_state_t mk_walk_state(const mk_walk_t *w, int s);

/* Sweep: mk_walk_stage over all stages until none moves, then mk_walk_done. */
int mk_walk_run(mk_walk_t *w);

/* 0 if every stream ended, else -1: "deadlock: stage S waits forever at
 * instruction I (OP mb M chunk C peer P)". */
int mk_walk_done(const mk_walk_t *w);

/* Decode stage s's next instruction (no side effects); -1 at the end or on a range error. */
int mk_walk_peek(const mk_walk_t *w, int s, mk_walk_ev_t *ev);

#ifdef __cplusplus
}
#endif
#endif
