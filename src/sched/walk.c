/* The stream walker (include/merak/walk.h): decode, readiness, hooks,
 * commit.  Every rule about what an instruction means for its slot, its
 * message and its peer lives here once. */
#include "config.h"
#include "merak/walk.h"

#include <stdlib.h>
#include <string.h>

/* The hot path's pieces are inlined into the stage loop: the walk's cost
 * is per instruction, and the calls were a third of it (callgrind). */
#if defined(__GNUC__)
#define WALK_INLINE inline __attribute__((always_inline))
#else
#define WALK_INLINE inline
#endif

/* SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD: the enum's range SEND_ACT..RECV_GRAD. */
static int is_p2p(mk_instr_op_t op) { return op >= MK_INSTR_SEND_ACT && op <= MK_INSTR_RECV_GRAD; }

static int is_send(mk_instr_op_t op) { return op == MK_INSTR_SEND_ACT || op == MK_INSTR_SEND_GRAD; }

/* SEND_ACT and RECV_GRAD talk to the next virtual stage, the others to the previous one. */
static int goes_up(mk_instr_op_t op) { return op == MK_INSTR_SEND_ACT || op == MK_INSTR_RECV_GRAD; }

int mk_walk_n_keys(const mk_sched_t *s)
{
    return 2 * s->spec.m * s->n_vstages;
}

static WALK_INLINE int msg_key(const mk_sched_t *s, int stage, const mk_instr_t *in)
{
    if (!is_p2p(in->op)) return -1;
    int p = s->spec.pp, V = s->n_vstages, k = mk_sched_vstage(s->vshape, p, stage, in->chunk);
    int dst = is_send(in->op) ? (goes_up(in->op) ? k + 1 : k - 1) : k;
    int grad = in->op == MK_INSTR_SEND_GRAD || in->op == MK_INSTR_RECV_GRAD;
    if (in->mb < 0 || in->mb >= s->spec.m || in->chunk < 0 || in->chunk >= s->spec.vpp ||
        dst < 0 || dst >= V)
        return -1;
    return (grad * s->spec.m + in->mb) * V + dst;
}

int mk_walk_msg_key(const mk_sched_t *s, int stage, const mk_instr_t *in)
{
    return msg_key(s, stage, in);
}

/* The last backward work of stage st (it starts the stage's final gradients). */
static int find_last_bwd(const mk_sched_t *s, int st)
{
    const mk_stream_t *str = &s->streams[st];
    for (int i = str->n - 1; i >= 0; i--) {
        mk_instr_op_t op = str->v[i].op;
        if (op == MK_INSTR_B || op == MK_INSTR_B_IN || op == MK_INSTR_B_W) return i;
    }
    return -1;
}

/* LOCAL: a communication op no hook watches changes nothing another op
 * reads (the send table is off there), so it is passed over undecoded:
 * a memory walk then costs its compute ops only.  Asked once per op at
 * init (mk_walk_t.skip), not per instruction. */
static int unwatched(const mk_walk_t *w, mk_instr_op_t op)
{
    const mk_walk_hooks_t *h = &w->h;
    if (w->o.mode != MK_WALK_LOCAL || mk_instr_is_compute(op)) return 0;
    if (is_p2p(op)) return !(is_send(op) ? h->send : h->recv);
    return op == MK_INSTR_LOAD ? !h->load : !h->collective && op != MK_INSTR_REDUCE_GRADS &&
                                                op != MK_INSTR_REDUCE_TIED;
}

/* One stage alone (LOCAL) touches only its own stream and slots: no send
 * table, and its last backward is found when the stage is first walked, so
 * walking one stage of many costs that stage's stream only. */
int mk_walk_init(mk_walk_t *w, const mk_sched_t *s, const mk_walk_opts_t *opts,
                 const mk_walk_hooks_t *hooks)
{
    memset(w, 0, sizeof *w);
    w->s = s;
    if (opts) w->o = *opts;
    if (hooks) w->h = *hooks;
    w->pp = s->spec.pp, w->vpp = s->spec.vpp, w->m = s->spec.m;
    w->V = s->n_vstages, w->nmc = w->m * w->vpp;
    int local = w->o.mode == MK_WALK_LOCAL;
    size_t p = (size_t)w->pp, nsl = p * (size_t)w->nmc;
    int **per_stage[] = {&w->pos, &w->state, &w->waiting, &w->inflight, &w->nbucket,
                         &w->last_bwd, &w->tied_in, &w->tied_done};
    for (size_t i = 0; i < sizeof per_stage / sizeof *per_stage; i++)
        *per_stage[i] = calloc(p, sizeof(int));
    w->ck = calloc(nsl, sizeof *w->ck);
    w->rran = calloc(nsl, 1);
    w->sent = local ? NULL : calloc((size_t)mk_walk_n_keys(s), 1);
    int buffered = w->o.mode == MK_WALK_BUFFERED;
    w->bkey = buffered ? malloc(p * sizeof *w->bkey) : NULL;
    int ok = w->ck && w->rran && (local || w->sent) && (!buffered || w->bkey);
    for (size_t i = 0; i < sizeof per_stage / sizeof *per_stage; i++) ok &= *per_stage[i] != NULL;
    if (!ok) {
        mk_walk_free(w);
        return mk_error_set("stream walker: out of memory");
    }
    for (int op = 0; op < MK_INSTR_COUNT; op++) w->skip[op] = (unsigned char)unwatched(w, (mk_instr_op_t)op);
    for (int st = 0; st < w->pp; st++) {
        w->last_bwd[st] = local ? -2 : find_last_bwd(s, st); /* -2: not looked for yet */
        w->waiting[st] = -1;
    }
    return 0;
}

void mk_walk_reset(mk_walk_t *w)
{
    size_t p = (size_t)w->pp, nsl = p * (size_t)w->nmc;
    int **zero[] = {&w->pos, &w->state, &w->inflight, &w->nbucket, &w->tied_in, &w->tied_done};
    for (size_t i = 0; i < sizeof zero / sizeof *zero; i++) memset(*zero[i], 0, p * sizeof(int));
    for (int st = 0; st < w->pp; st++) w->waiting[st] = -1;
    memset(w->ck, 0, nsl * sizeof *w->ck);
    memset(w->rran, 0, nsl);
    if (w->sent) memset(w->sent, 0, (size_t)mk_walk_n_keys(w->s));
}

void mk_walk_reset_stage(mk_walk_t *w, int s)
{
    w->pos[s] = w->state[s] = w->inflight[s] = w->nbucket[s] = 0;
    w->tied_in[s] = w->tied_done[s] = 0;
    w->waiting[s] = -1;
    memset(w->ck + (size_t)s * w->nmc, 0, (size_t)w->nmc * sizeof *w->ck);
    memset(w->rran + (size_t)s * w->nmc, 0, (size_t)w->nmc);
}

void mk_walk_free(mk_walk_t *w)
{
    free(w->pos), free(w->state), free(w->waiting), free(w->inflight), free(w->nbucket);
    free(w->last_bwd), free(w->tied_in), free(w->tied_done);
    free(w->ck), free(w->rran), free(w->sent), free(w->bkey);
    memset(w, 0, sizeof *w);
}

/* F/F_PRE fix the slot's checkpoint count; R, B, B_IN and B_W read it. */
static WALK_INLINE void decode_compute(const mk_walk_t *w, mk_walk_ev_t *ev)
{
    const mk_instr_t *in = ev->in;
    int c = ev->stage * w->vpp + in->chunk;
    size_t g = (size_t)ev->stage * w->nmc + ev->slot;
    int cap = w->o.ckpt_cap ? w->o.ckpt_cap[c] : w->s->layers[c];
    switch (in->op) {
    case MK_INSTR_F:
        ev->ckpt = w->o.ckpt_f ? w->o.ckpt_f[c] : in->ckpt;
        ev->ckpt = ev->ckpt < 0 ? 0 : ev->ckpt > cap ? cap : ev->ckpt;
        ev->holds = 1;
        break;
    case MK_INSTR_F_PRE: /* keeps only its input: every checkpointable layer */
        ev->ckpt = cap;
        ev->holds = 1;
        break;
    default:
        ev->ckpt = w->ck[g];
        ev->regrows = in->op == MK_INSTR_R;
        ev->recomputes = (in->op == MK_INSTR_B || in->op == MK_INSTR_B_IN) && ev->ckpt > 0 &&
                         !w->rran[g];
        ev->releases = in->op == MK_INSTR_B || in->op == MK_INSTR_B_W;
        break;
    }
    ev->inflight += ev->holds - ev->releases;
}

static WALK_INLINE int decode_p2p(const mk_walk_t *w, mk_walk_ev_t *ev)
{
    int up = goes_up(ev->in->op), st = ev->stage;
    ev->vpeer = up ? ev->vstage + 1 : ev->vstage - 1;
    /* on the loop vpeer mod pp, as the neighbouring stage (no division:
       this runs per instruction); in a V its stage (mk_sched_vstage) */
    if (w->s->vshape) ev->peer = mk_sched_vstage_stage(1, w->pp, ev->vpeer);
    else ev->peer = up ? (st + 1 == w->pp ? 0 : st + 1) : (st == 0 ? w->pp - 1 : st - 1);
    ev->key = msg_key(w->s, ev->stage, ev->in);
    if (ev->key < 0 && !w->o.lenient)
        return mk_error_set("stage %d instruction %d: bad %s", ev->stage, ev->index,
                            mk_instr_op_name(ev->in->op));
    return 0;
}

/* Ops of one (micro-batch, chunk): LOAD, compute and p2p, the enum's LOAD..RECV_GRAD. */
static int per_slot(mk_instr_op_t op) { return (unsigned)op <= MK_INSTR_RECV_GRAD; }

/* Instruction i (in) of stage st into ev.  Inline: the walk's hot path
 * decodes every instruction it does not pass over. */
static WALK_INLINE int decode(const mk_walk_t *w, int st, int i, const mk_instr_t *in, mk_walk_ev_t *ev)
{
    mk_instr_op_t op = in->op;
    *ev = (mk_walk_ev_t){.in = in, .stage = st, .index = i, .slot = -1,
                         .vstage = mk_sched_vstage(w->s->vshape, w->pp, st, in->chunk), .vpeer = -1, .peer = -1, .key = -1,
                         .inflight = w->inflight[st], .last_bwd = i == w->last_bwd[st],
                         .bucket = -1};
    if (per_slot(op)) {
        /* unsigned: one compare per range (m, vpp >= 1) */
        if ((unsigned)in->mb >= (unsigned)w->m || (unsigned)in->chunk >= (unsigned)w->vpp)
            return mk_error_set("stage %d instruction %d: %s has mb %d chunk %d out of range", st,
                                i, mk_instr_op_name(op), in->mb, in->chunk);
        ev->slot = in->mb * w->vpp + in->chunk;
        if (mk_instr_is_compute(op)) decode_compute(w, ev);
        else if (is_p2p(op)) return decode_p2p(w, ev);
        return 0;
    }
    if (op == MK_INSTR_REDUCE_GRADS) ev->bucket = w->nbucket[st];
    if (op == MK_INSTR_REDUCE_TIED) {
        ev->peer = st == 0 ? w->pp - 1 : 0;
        if (!w->o.lenient && (!mk_sched_ends_apart(w->s->spec.kind, w->pp, w->vpp) || (st != 0 && st != w->pp - 1)))
            return mk_error_set("stage %d instruction %d: REDUCE_TIED belongs on the first and "
                                "last stage only", st, i);
        ev->tied_first = w->o.mode == MK_WALK_LOCAL || w->tied_done[ev->peer] <= w->tied_done[st];
    }
    return 0;
}

/* Stage st's next instruction (pos < n). */
static const mk_instr_t *next_instr(const mk_walk_t *w, int st)
{
    return &w->s->streams[st].v[w->pos[st]];
}

int mk_walk_peek(const mk_walk_t *w, int s, mk_walk_ev_t *ev)
{
    if (w->pos[s] >= w->s->streams[s].n) return mk_error_set("stage %d: the stream has ended", s);
    return decode(w, s, w->pos[s], next_instr(w, s), ev);
}

static mk_instr_op_t partner_op(mk_instr_op_t op)
{
    switch (op) {
    case MK_INSTR_SEND_ACT: return MK_INSTR_RECV_ACT;
    case MK_INSTR_RECV_ACT: return MK_INSTR_SEND_ACT;
    case MK_INSTR_SEND_GRAD: return MK_INSTR_RECV_GRAD;
    case MK_INSTR_RECV_GRAD: return MK_INSTR_SEND_GRAD;
    default: return op; /* REDUCE_TIED meets REDUCE_TIED */
    }
}

/* Rendezvous: is the peer standing at the matching instruction? */
static int meets(const mk_walk_t *w, const mk_walk_ev_t *ev)
{
    int q = ev->peer;
    if (q < 0 || w->pos[q] >= w->s->streams[q].n) return 0;
    mk_walk_ev_t o;
    if (decode(w, q, w->pos[q], next_instr(w, q), &o) < 0) return -1;
    return o.in->op == partner_op(ev->in->op) && o.peer == ev->stage && o.key == ev->key;
}

/* 1 ready, 0 not yet, -1 error.  Reaching a REDUCE_TIED counts as arriving. */
static WALK_INLINE int ready(mk_walk_t *w, const mk_walk_ev_t *ev)
{
    mk_instr_op_t op = ev->in->op;
    int st = ev->stage;
    if (w->o.mode == MK_WALK_LOCAL || (!is_p2p(op) && op != MK_INSTR_REDUCE_TIED)) return 1;
    if (w->o.mode == MK_WALK_RENDEZVOUS) return meets(w, ev);
    if (op == MK_INSTR_REDUCE_TIED) {
        if (w->tied_in[st] == w->tied_done[st]) w->tied_in[st]++;
        return w->tied_in[ev->peer] > w->tied_done[st];
    }
    return is_send(op) || w->sent[ev->key];
}

static WALK_INLINE int call_hooks(mk_walk_t *w, const mk_walk_ev_t *ev)
{
    const mk_walk_hooks_t *h = &w->h;
    mk_instr_op_t op = ev->in->op;
    mk_walk_hook_t f = h->collective;
    if (mk_instr_is_compute(op)) {
        int rc = h->memory ? h->memory(h->ctx, ev) : MK_WALK_GO;
        if (rc < 0 || rc == MK_WALK_BLOCK) return rc;
        int rc2 = h->compute ? h->compute(h->ctx, ev) : MK_WALK_GO;
        return rc2 < 0 || rc2 == MK_WALK_BLOCK ? rc2 : rc | rc2;
    }
    if (is_p2p(op)) f = is_send(op) ? h->send : h->recv;
    else if (op == MK_INSTR_LOAD) f = h->load;
    return f ? f(h->ctx, ev) : MK_WALK_GO;
}

static WALK_INLINE void commit(mk_walk_t *w, const mk_walk_ev_t *ev)
{
    int st = ev->stage;
    size_t g = (size_t)st * w->nmc + ev->slot;
    switch (ev->in->op) {
    case MK_INSTR_F: case MK_INSTR_F_PRE: w->ck[g] = ev->ckpt, w->rran[g] = 0; break;
    case MK_INSTR_R: w->rran[g] = 1; break;
    case MK_INSTR_SEND_ACT: case MK_INSTR_SEND_GRAD: if (w->sent && ev->key >= 0) w->sent[ev->key] = 1; break;
    case MK_INSTR_REDUCE_GRADS: w->nbucket[st]++; break;
    case MK_INSTR_REDUCE_TIED: w->tied_in[st] = ++w->tied_done[st]; break;
    default: break;
    }
    w->inflight[st] = ev->inflight;
    w->waiting[st] = -1;
    w->pos[st]++;
}

/* Buffered: the SEND (or the REDUCE_TIED) ev may have readied its blocked peer. */
static int wake_peer(mk_walk_t *w, const mk_walk_ev_t *ev)
{
    int q = ev->peer;
    mk_instr_op_t op = ev->in->op;
    if (!w->h.wake || w->o.mode != MK_WALK_BUFFERED || q < 0 || w->waiting[q] != w->pos[q] ||
        (!is_send(op) && op != MK_INSTR_REDUCE_TIED))
        return 0;
    const mk_instr_t *o = &w->s->streams[q].v[w->pos[q]];
    if (op == MK_INSTR_REDUCE_TIED ? o->op != op
                                   : (o->op != partner_op(op) || mk_walk_msg_key(w->s, q, o) != ev->key))
        return 0;
    return w->h.wake(w->h.ctx, q, ev) < 0 ? -1 : 0;
}

/* Rendezvous: the peer completes its matching instruction with ours. */
static int move_peer(mk_walk_t *w, int q)
{
    mk_walk_ev_t o;
    if (decode(w, q, w->pos[q], next_instr(w, q), &o) < 0) return -1;
    int rc = call_hooks(w, &o);
    if (rc < 0) return -1;
    commit(w, &o);
    w->state[q] = MK_WALK_READY;
    return 0;
}

static int stop_blocked(mk_walk_t *w, const mk_walk_ev_t *ev)
{
    int st = ev->stage;
    w->state[st] = MK_WALK_BLOCKED;
    if (w->bkey) w->bkey[st] = ev->in->op == MK_INSTR_RECV_ACT || ev->in->op == MK_INSTR_RECV_GRAD ? ev->key : -1;
    if (w->waiting[st] == ev->index) return 0;
    w->waiting[st] = ev->index;
    return w->h.block && w->h.block(w->h.ctx, ev) < 0 ? -1 : 0;
}

/* One instruction of stage st: 1 done, 2 done and yielded, 0 stopped, -1 error. */
static int step(mk_walk_t *w, int st)
{
    mk_walk_ev_t ev;
    if (w->pos[st] >= w->s->streams[st].n) {
        w->state[st] = MK_WALK_ENDED;
        return 0;
    }
    const mk_instr_t *in = next_instr(w, st);
    if ((unsigned)in->op < MK_INSTR_COUNT ? w->skip[in->op] : unwatched(w, in->op)) {
        w->pos[st]++;
        return 1;
    }
    if (decode(w, st, w->pos[st], in, &ev) < 0) return -1;
    if (is_send(in->op) && ev.key >= 0 && w->sent && w->sent[ev.key] && !w->o.lenient)
        return mk_error_set("stage %d: %s mb %d chunk %d sent twice", st,
                            mk_instr_op_name(in->op), in->mb, in->chunk);
    int r = ready(w, &ev);
    if (r <= 0) return r < 0 ? -1 : stop_blocked(w, &ev);
    int rc = call_hooks(w, &ev);
    if (rc < 0) return -1;
    if (rc == MK_WALK_BLOCK) {
        w->state[st] = MK_WALK_BLOCKED;
        return 0;
    }
    commit(w, &ev);
    int paired = w->o.mode == MK_WALK_RENDEZVOUS && (is_p2p(in->op) || in->op == MK_INSTR_REDUCE_TIED);
    if ((paired && move_peer(w, ev.peer) < 0) || wake_peer(w, &ev) < 0) return -1;
    w->state[st] = rc == MK_WALK_YIELD ? MK_WALK_YIELDED : MK_WALK_READY;
    return rc == MK_WALK_YIELD ? 2 : 1;
}

int mk_walk_stage(mk_walk_t *w, int s)
{
    int ran = 0, rc;
    if (w->last_bwd[s] == -2) w->last_bwd[s] = find_last_bwd(w->s, s);
    while ((rc = step(w, s)) > 0) {
        ran++;
        if (rc == 2) break;
    }
    return rc < 0 ? -1 : ran;
}

mk_walk_state_t mk_walk_state(const mk_walk_t *w, int s)
{
    return (mk_walk_state_t)w->state[s];
}

int mk_walk_done(const mk_walk_t *w)
{
    for (int st = 0; st < w->pp; st++)
        if (w->pos[st] < w->s->streams[st].n) {
            const mk_instr_t *in = &w->s->streams[st].v[w->pos[st]];
            return mk_error_set("deadlock: stage %d waits forever at instruction %d (%s mb %d "
                                "chunk %d peer %d)", st, w->pos[st], mk_instr_op_name(in->op),
                                in->mb, in->chunk, in->peer);
        }
    return 0;
}

/* Buffered: stage st stands blocked at a RECV whose SEND has not come, so
 * walking it would only decode that RECV again and stop (no hook runs
 * twice for one wait): pass it over. */
static int still_blocked(const mk_walk_t *w, int st)
{
    return w->bkey && w->state[st] == MK_WALK_BLOCKED && w->waiting[st] == w->pos[st] && w->bkey[st] >= 0 &&
           !w->sent[w->bkey[st]];
}

int mk_walk_run(mk_walk_t *w)
{
    int moved = 1;
    while (moved) {
        moved = 0;
        for (int st = 0; st < w->pp; st++) {
            if (still_blocked(w, st)) continue;
            int r = mk_walk_stage(w, st);
            if (r < 0) return -1;
            moved |= r > 0;
        }
    }
    return mk_walk_done(w);
}
