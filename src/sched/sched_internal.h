/* Private to the scheduler: the stream builder the per-schedule generators
 * share.  A generator only says which compute op runs next on a stage; the
 * builder adds the LOADs and the p2p around it, so every schedule gets the
 * same communication rules (RECVs as late as possible, SENDs right after
 * the compute that produces them). */
#ifndef MERAK_SCHED_INTERNAL_H
#define MERAK_SCHED_INTERNAL_H

#include "merak/sched.h"

/* Layers of (stage, chunk); 1 when the spec gives none. */
static inline int mk_sched_layers(const mk_sched_t *s, int stage, int chunk)
{
    return s->layers[stage * s->spec.vpp + chunk];
}

/* Resolved checkpoint count of plain F on (stage, chunk). */
static inline int mk_sched_ckpt(const mk_sched_t *s, int stage, int chunk)
{
    return s->ckpt[stage * s->spec.vpp + chunk];
}

/* Make room for one more instruction on a stage's stream (mk_sched_push's
 * slow path: mk_sched_build reserves each stream's bound up front). */
int mk_sched_grow(mk_sched_t *s, int stage);

/* Append one instruction to a stage's stream (inline: every instruction of
 * every build goes through it). */
static inline int mk_sched_push(mk_sched_t *s, int stage, mk_instr_op_t op, int mb, int chunk,
                                int peer, int ckpt)
{
    mk_stream_t *st = &s->streams[stage];
    if (st->n == st->cap && mk_sched_grow(s, stage) < 0) return -1;
    st->v[st->n++] = (mk_instr_t){op, mb, chunk, peer, ckpt, 0};
    return 0;
}

/* Append a compute op with the LOAD / RECV before it and the SEND after it. */
int mk_sched_emit(mk_sched_t *s, int stage, mk_instr_op_t op, int mb, int chunk);

/* Fill s->ckpt from the recompute policy (sched_recompute.c). */
int mk_sched_resolve_ckpt(mk_sched_t *s, const int *explicit_ckpt);

/* merak-last / merak: the policy counts' adjustments (sched_merak.c). */
void mk_sched_merak_adjust_ckpt(mk_sched_t *s);

/* 1F1B-family order on one stage: issue F while fewer than cap(nb)
 * micro-batches are in flight, else B.  pre[mb] != 0 makes that forward
 * an F_PRE and puts R(mb) right before B(mb).  cap2 (> 0) replaces cap
 * until the first backward is issued (merak's extra forward). */
int mk_sched_gen_1f1b_stage(mk_sched_t *s, int stage, int cap, int cap2, const unsigned char *pre);

/* 1 if the streams also complete with rendezvous sends (sched_rendezvous.c). */
int mk_sched_rendezvous_ok(const mk_sched_t *s);

/* The generators, one per file. */
int mk_sched_gen_gpipe(mk_sched_t *s);
int mk_sched_gen_1f1b(mk_sched_t *s);
int mk_sched_gen_merak(mk_sched_t *s);
int mk_sched_gen_interleaved(mk_sched_t *s);
int mk_sched_gen_zbh1(mk_sched_t *s);
int mk_sched_gen_looped_bfs(mk_sched_t *s);
int mk_sched_gen_zb_list(mk_sched_t *s);
int mk_sched_gen_dualpipev(mk_sched_t *s);

#endif
