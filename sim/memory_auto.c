/* `auto` recompute on the streams (mk_sim_resolve_auto): per stage the
 * fewest checkpointed layers whose peak, walked along the stage's own
 * instruction stream, fits; after the closed-form first guess
 * (mk_sim_closed_guess, memory.c). */
#include "sim/sim_internal.h"
#include "merak/walk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* mk_sim_chunk_act memoised per (chunk, checkpoint count): a stream walk
 * asks for the same few values once per instruction. */
typedef struct {
    int v, w;                 /* chunks, counts per chunk (max nck + 1) */
    double *a, *wm, *gb;      /* gb: [v] per chunk (no count changes it) */
    unsigned char *have, *have_gb;
} mk_act_memo_t;

static void memo_act(mk_act_memo_t *M, const mk_plan_t *p, const mk_graph_t *g, int s, int c, int ck,
                     double *a, double *w, double *gb)
{
    size_t i = (size_t)c * M->w + ck;
    if (!M->have[i]) {
        mk_sim_chunk_act(p, g, mk_plan_vstage(p, s, c), ck, &M->a[i], &M->wm[i], M->have_gb[c] ? NULL : &M->gb[c]);
        M->have[i] = M->have_gb[c] = 1;
    }
    *a = M->a[i], *w = M->wm[i], *gb = M->gb[c];
}

typedef struct {
    const mk_plan_t *p;
    const mk_graph_t *g;
    int s;
    mk_act_memo_t *M;
    double stored, peak;      /* bytes: activations held now, their peak (with the working set) */
    double *mbs;              /* [m*vpp] bytes each slot holds */
    double gath;              /* ZeRO-3: gathered weights while an op other than B_W runs */
    int fs_chunk;             /* the stage's chunk holding the loss (-1: none) */
    double fs;                /* its forward scratch (mk_sim_chunk_fscratch) */
} peak_walk_t;

/* One compute op (the bytes above the stage's static ones, which add to
 * every op alike): F/F_PRE add the slot's stored bytes (working set: the
 * largest recompute group), R expands them to full, B/B_IN need the
 * recomputed layer (when the walker says it recomputes) plus the gradient
 * buffers, B or B_W frees. */
static int peak_op(void *ctx, const mk_walk_ev_t *ev)
{
    peak_walk_t *x = ctx;
    int ch = ev->in->chunk, sl = ev->slot;
    double a, w, gb, cur;
    if (ev->holds) {
        memo_act(x->M, x->p, x->g, x->s, ch, ev->ckpt, &a, &w, &gb);
        x->mbs[sl] = a, x->stored += a;
        double fs = ch == x->fs_chunk ? x->fs : 0;
        cur = x->stored + (w > fs ? w : fs);
    } else if (ev->regrows) {
        memo_act(x->M, x->p, x->g, x->s, ch, 0, &a, &w, &gb);
        x->stored += a - x->mbs[sl], x->mbs[sl] = a;
        cur = x->stored;
    } else {
        memo_act(x->M, x->p, x->g, x->s, ch, ev->recomputes ? ev->ckpt : 0, &a, &w, &gb);
        cur = x->stored + (ev->recomputes ? w : 0) + gb;
        if (ev->releases) x->stored -= x->mbs[sl], x->mbs[sl] = 0;
    }
    if (ev->in->op != MK_INSTR_B_W) cur += x->gath;
    if (cur > x->peak) x->peak = cur;
    return MK_WALK_GO;
}

/* The peak search on one set of streams: the walker (one stage at a time)
 * and the buffers are made once and reused by every stage and probe (the
 * binary search walks each stage many times with other F counts); the
 * static bytes and the activation memo are the stage's (peak_search_stage). */
typedef struct {
    peak_walk_t x;
    mk_act_memo_t M;
    const mk_sim_opts_t *o;
    int layers[MK_PLAN_MAX_VSTAGES], ckf[MK_PLAN_MAX_VSTAGES];
    mk_walk_t w;
    int have_walk;
    double stat;              /* the stage's static bytes */
    mk_sim_peak_memo_t *memo; /* or NULL */
    uint64_t h[2];            /* the stage's stream and fixed figures, hashed (peak_search_stage) */
    unsigned pre;             /* chunks with an F_PRE (which keeps all its layers) */
} peak_search_t;

static void peak_search_free(peak_search_t *S)
{
    if (S->have_walk) mk_walk_free(&S->w);
    free(S->x.mbs), free(S->M.a), free(S->M.wm), free(S->M.gb), free(S->M.have), free(S->M.have_gb);
}

static int peak_search_init(peak_search_t *S, const mk_plan_t *p, const mk_graph_t *g, const mk_sched_t *sch,
                            const mk_sim_opts_t *o, mk_sim_peak_memo_t *memo)
{
    memset(S, 0, sizeof *S);
    S->memo = memo;
    int v = p->vpp;
    mk_plan_ckpt_layers(p, g, S->layers);
    S->o = o;
    S->M = (mk_act_memo_t){v, 1, NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < p->n_vstages; i++) /* room for every stage's counts */
        if (S->layers[i] + 1 > S->M.w) S->M.w = S->layers[i] + 1;
    S->x = (peak_walk_t){p, g, 0, &S->M, 0, 0, NULL, 0, -1, 0};
    S->x.mbs = calloc((size_t)p->m * v, sizeof *S->x.mbs);
    size_t n = (size_t)v * S->M.w;
    S->M.a = malloc(n * sizeof(double)), S->M.wm = malloc(n * sizeof(double));
    S->M.gb = malloc(v * sizeof(double)), S->M.have = calloc(n, 1), S->M.have_gb = calloc(v, 1);
    mk_walk_opts_t wo = {.mode = MK_WALK_LOCAL, .ckpt_cap = S->layers, .ckpt_f = S->ckf};
    mk_walk_hooks_t h = {.ctx = &S->x, .memory = peak_op};
    if (!S->x.mbs || !S->M.a || !S->M.wm || !S->M.gb || !S->M.have || !S->M.have_gb ||
        mk_walk_init(&S->w, sch, &wo, &h) < 0) {
        peak_search_free(S);
        return mk_error_set("out of memory");
    }
    S->have_walk = 1;
    return 0;
}

/* ---- the peaks memo (sim_search.h) ------------------------------------
 * Key: two 64-bit hashes, each over everything the walk reads: the
 * stage's instructions (as same_walk compares them), its chunks' caps,
 * its loss scratch and ZeRO-3 gathered bytes (peak_search_stage), then the
 * probe's count and each chunk's figures at the counts the walk can ask
 * for (its capped count, 0 for R, all layers where an F_PRE is).  The two
 * mixes differ (FNV-1a's prime vs a rotate and the golden-ratio
 * multiplier), so a wrong hit needs both 64-bit hashes to collide. */
#define MK_PEAK_MEMO_BITS 14

struct mk_peak_entry { uint64_t key[2]; double peak; };
struct mk_sim_peak_memo { struct mk_peak_entry e[1u << MK_PEAK_MEMO_BITS]; };

mk_sim_peak_memo_t *mk_sim_peak_memo_new(void) { return calloc(1, sizeof(mk_sim_peak_memo_t)); }
void mk_sim_peak_memo_free(mk_sim_peak_memo_t *m) { free(m); }

static void mix(uint64_t h[2], uint64_t v)
{
    h[0] = (h[0] ^ v) * 0x100000001b3ull;
    h[1] = ((h[1] ^ v) << 27 | (h[1] ^ v) >> 37) * 0x9E3779B97F4A7C15ull;
}

static void mix_real(uint64_t h[2], double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    mix(h, v);
}

static void stage_hash(peak_search_t *S)
{
    const mk_plan_t *p = S->x.p;
    const mk_stream_t *st = &S->w.s->streams[S->x.s];
    uint64_t *h = S->h;
    h[0] = 0xcbf29ce484222325ull, h[1] = 0x243f6a8885a308d3ull;
    S->pre = 0;
    mix(h, (uint64_t)st->n), mix(h, (uint64_t)p->vpp);
    for (int i = 0; i < st->n; i++) {
        const mk_instr_t *in = &st->v[i];
        mix(h, (uint64_t)(uint32_t)in->op << 32 | (uint32_t)in->mb);
        mix(h, (uint64_t)(uint32_t)in->chunk << 32 | (uint32_t)in->peer);
        mix(h, (uint64_t)(uint32_t)(in->op == MK_INSTR_F ? 0 : in->ckpt) << 32 | (uint32_t)in->overlap);
        if (in->op == MK_INSTR_F_PRE && in->chunk >= 0 && in->chunk < 32) S->pre |= 1u << in->chunk;
    }
    for (int c = 0; c < p->vpp; c++) mix(h, (uint64_t)S->layers[S->x.s * p->vpp + c]);
    mix_real(h, S->x.gath), mix_real(h, S->x.fs), mix(h, (uint64_t)(int64_t)S->x.fs_chunk);
}

/* Probe k's entry, its key in key (memo_act fills what the walk reads). */
static struct mk_peak_entry *memo_slot(peak_search_t *S, int k, uint64_t key[2])
{
    const mk_plan_t *p = S->x.p;
    key[0] = S->h[0], key[1] = S->h[1];
    mix(key, (uint64_t)k);
    for (int c = 0; c < p->vpp; c++) {
        int cap = S->layers[S->x.s * p->vpp + c], ks[3] = {k < cap ? k : cap, 0, cap};
        for (int j = 0; j < ((S->pre >> c & 1) || p->vpp > 32 ? 3 : 2); j++) {
            double a, w, gb;
            memo_act(&S->M, p, S->x.g, S->x.s, c, ks[j], &a, &w, &gb);
            mix_real(key, a), mix_real(key, w);
            if (j == 0) mix_real(key, gb);
        }
    }
    return &S->memo->e[key[0] >> (64 - MK_PEAK_MEMO_BITS)];
}

/* Probes walk stage s from now on: its static bytes, a memo of its chunks. */
static void peak_search_stage(peak_search_t *S, int s)
{
    const mk_plan_t *p = S->x.p;
    mk_stage_static_t st;
    mk_sim_stage_static(p, S->x.g, s, S->o, &st);
    S->x.s = s;
    S->stat = st.weights + st.grads + st.optimizer + st.buffers;
    S->x.gath = st.gathered;
    S->x.fs_chunk = -1, S->x.fs = 0;
    for (int c = 0; c < p->vpp && S->x.fs_chunk < 0; c++) /* at most one chunk holds the loss */
        if ((S->x.fs = mk_sim_chunk_fscratch(p, S->x.g, mk_plan_vstage(p, s, c))) > 0) S->x.fs_chunk = c;
    memset(S->M.have, 0, (size_t)S->M.v * S->M.w);
    memset(S->M.have_gb, 0, (size_t)S->M.v);
    if (S->memo) stage_hash(S);
}

/* Peak of the stage along its own stream with every plain F checkpointing
 * k layers (capped per chunk at its checkpointable layers).  Memory
 * depends only on the order of a stage's instructions, not on timing, so
 * this walk gives the event engine's figure exactly: both take the
 * per-slot rules (checkpoint counts, recomputes, what is held) from the
 * stream walker (merak/walk.h).  1e300 when the walk fails. */
static double peak_search_probe(peak_search_t *S, int k)
{
    const mk_plan_t *p = S->x.p;
    for (int i = 0; i < p->n_vstages; i++) S->ckf[i] = k;
    memset(S->x.mbs, 0, (size_t)p->m * p->vpp * sizeof *S->x.mbs);
    uint64_t key[2];
    struct mk_peak_entry *e = S->memo ? memo_slot(S, k, key) : NULL;
    if (e && e->key[0] == key[0] && e->key[1] == key[1]) return S->stat + e->peak;
    S->x.stored = 0, S->x.peak = 0;
    mk_walk_reset_stage(&S->w, S->x.s);
    if (mk_walk_stage(&S->w, S->x.s) < 0) return 1e300;
    if (e) e->key[0] = key[0], e->key[1] = key[1], e->peak = S->x.peak;
    return S->stat + S->x.peak;  /* the most of stat + (held + working): addition keeps the order */
}

/* Most checkpointable layers of a chunk of stage s. */
int mk_sim_stage_nmax(const mk_plan_t *p, const int *layers, int s)
{
    int nmax = 0;
    for (int ch = 0; ch < p->vpp; ch++)
        if (layers[s * p->vpp + ch] > nmax) nmax = layers[s * p->vpp + ch];
    return nmax;
}

/* Set stage s's counts to k layers per chunk (capped at the chunk's);
 * returns 1 if that changed any. */
int mk_sim_set_stage_ckpt(mk_plan_t *p, const int *layers, int s, int k)
{
    int changed = 0;
    for (int ch = 0; ch < p->vpp; ch++) {
        int v = k < layers[s * p->vpp + ch] ? k : layers[s * p->vpp + ch];
        changed |= p->ckpt[s * p->vpp + ch] != v;
        p->ckpt[s * p->vpp + ch] = v;
    }
    return changed;
}

/* Stage s's streams in a and b are the same for the peak walk: it reads
 * every field of every instruction but a plain F's checkpoint count (the
 * probe's ckpt_f replaces it), so the same streams give the same search. */
static int same_walk(const mk_sched_t *a, const mk_sched_t *b, int s)
{
    const mk_stream_t *x = &a->streams[s], *y = &b->streams[s];
    if (x->n != y->n) return 0;
    for (int i = 0; i < x->n; i++) {
        const mk_instr_t *u = &x->v[i], *v = &y->v[i];
        if (u->op != v->op || u->mb != v->mb || u->chunk != v->chunk || u->peer != v->peer ||
            (u->op != MK_INSTR_F && u->ckpt != v->ckpt))
            return 0;
    }
    return 1;
}

/* Per stage the fewest k that fits on the streams sch (nmax if none), into
 * p->ckpt; a stage whose stream walks as in prev (the streams the counts
 * came from) keeps them.  *changed: some count moved.  0 or -1. */
static int search_streams(mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o, const mk_sched_t *sch,
                          const mk_sched_t *prev, double limit, mk_sim_peak_memo_t *memo, int *changed)
{
    peak_search_t S;
    if (peak_search_init(&S, p, g, sch, o, memo) < 0) return -1;
    *changed = 0;
    for (int s = 0; s < p->pp; s++) {
        if (prev && same_walk(prev, sch, s)) continue;
        int lo = 0, hi = mk_sim_stage_nmax(p, S.layers, s);
        peak_search_stage(&S, s);
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (peak_search_probe(&S, mid) <= limit) hi = mid;
            else lo = mid + 1;
        }
        *changed |= mk_sim_set_stage_ckpt(p, S.layers, s, lo);
    }
    peak_search_free(&S);
    return 0;
}

/* Resolve `auto`: a closed-form first guess, then per stage the fewest
 * checkpointed layers whose stream walk fits (binary search over plain F's
 * count on the current streams), rebuilding the streams until the counts
 * are stable (the streams may depend on them). */
int mk_sim_resolve_auto_pooled(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                               mk_sched_pool_t *pool, mk_sim_peak_memo_t *memo)
{
    int layers[MK_PLAN_MAX_VSTAGES];
    if (p->n_vstages != mk_plan_vstages(p) || p->m < 1) return mk_error_set("plan has no stage bounds (check it first)");
    mk_plan_ckpt_layers(p, g, layers);
    if (mk_sim_closed_guess(c, p, g, o, layers) < 0) return -1;
    mk_sched_t *prev = NULL;
    int rc = 0;
    for (int iter = 0; iter < 8 && rc == 0; iter++) {
        int spl[MK_PLAN_MAX_VSTAGES], changed = 0;
        mk_sched_spec_t spec;
        mk_plan_sched_spec(p, g, mk_plan_dp_cp(p) > 1, spl, &spec);
        mk_sched_t *sch = mk_sched_build_pooled(&spec, pool);
        rc = sch ? search_streams(p, g, o, sch, prev, mk_cluster_usable_bytes(c), memo, &changed) : -1;
        mk_sched_recycle(prev, pool);
        prev = sch;
        if (!changed) break;
    }
    mk_sched_recycle(prev, pool);
    return rc;
}

int mk_sim_resolve_auto(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o)
{
    return mk_sim_resolve_auto_pooled(c, p, g, o, NULL, NULL);
}

int mk_sim_auto(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g)
{
    return mk_sim_resolve_auto(c, p, g, NULL);
}
