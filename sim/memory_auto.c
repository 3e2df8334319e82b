/* `auto` recompute on the streams (mk_sim_resolve_auto): per stage the
 * fewest checkpointed layers whose peak, walked along the stage's own
 * instruction stream, fits; after the closed-form first guess
 * (mk_sim_closed_guess, memory.c). */
#include "sim/sim_internal.h"
#include "merak/walk.h"
#include "merak/hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* mk_sim_chunk_act memoised per (chunk, checkpoint count): a stream walk
 * asks for the same few values once per instruction. */
typedef struct {
    int v, w;                 /* chunks, counts per chunk (max nck + 1) */
    double *a, *wm, *gb;      /* a: [v w]; wm: [2 v w], then a B_IN's extra (mk_sim_chunk_bin_extra, split
                                 backward); gb: [2v] per chunk (no count changes them): the gradient
                                 buffers, then the B_IN -> B_W stash (mk_sim_chunk_wstash) */
    unsigned char *have, *have_gb;
} mk_act_memo_t;

static void memo_act(mk_act_memo_t *M, const mk_plan_t *p, const mk_graph_t *g, int s, int c, int ck,
                     double *a, double *w, double *gb)
{
    size_t i = (size_t)c * M->w + ck;
    if (!M->have[i]) {
        int k = mk_plan_vstage(p, s, c), split = mk_sched_traits(p->schedule)->split_backward;
        if (!M->have_gb[c]) M->gb[M->v + c] = mk_sim_chunk_wstash(p, g, k);
        mk_sim_chunk_act(p, g, k, ck, &M->a[i], &M->wm[i], M->have_gb[c] ? NULL : &M->gb[c]);
        M->wm[(size_t)M->v * M->w + i] = split ? mk_sim_chunk_bin_extra(p, g, k, ck) : 0;
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
        if (ev->in->op == MK_INSTR_B_IN) { /* its layers' stash as it goes, then what its B_W reads stays */
            double bx = x->M->wm[(size_t)x->M->v * x->M->w + (size_t)ch * x->M->w + (ev->recomputes ? ev->ckpt : 0)];
            if (bx > (ev->recomputes ? w : 0)) cur = x->stored + bx + gb;
            double ws = x->M->gb[x->M->v + ch];
            x->stored += ws - x->mbs[sl], x->mbs[sl] = ws;
        }
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
/* One stage's stream hashed (mk_stream_hash: every field the peak walk
 * reads) and the chunks where it has an F_PRE (which keeps all its layers). */
typedef struct {
    uint64_t h[2];
    unsigned pre;
} stream_hash_t;

/* The streams of one spec, built only when a walk needs them (issue 35):
 * with the peaks memo, a spec met before has its stages' hashes kept, and
 * where every probe finds its peak in the memo the streams are never
 * built.  sh: [pp], from the memo's spec table or hashed from sch. */
typedef struct {
    const mk_sched_spec_t *spec;
    mk_sched_pool_t *pool;
    mk_sched_t *sch;          /* NULL until built */
    stream_hash_t *sh;
    uint64_t key[2];          /* mk_sched_spec_hash of spec */
    int kept;                 /* sch is the memo's (built streams kept): not recycled */
} lazy_streams_t;

typedef struct {
    peak_walk_t x;
    mk_act_memo_t M;
    const mk_sim_opts_t *o;
    int layers[MK_PLAN_MAX_VSTAGES], ckf[MK_PLAN_MAX_VSTAGES];
    lazy_streams_t *L;
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

static int peak_search_init(peak_search_t *S, const mk_plan_t *p, const mk_graph_t *g, lazy_streams_t *L,
                            const mk_sim_opts_t *o, mk_sim_peak_memo_t *memo)
{
    memset(S, 0, sizeof *S);
    S->memo = memo, S->L = L;
    int v = p->vpp;
    mk_plan_ckpt_layers(p, g, S->layers);
    S->o = o;
    S->M = (mk_act_memo_t){v, 1, NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < p->n_vstages; i++) /* room for every stage's counts */
        if (S->layers[i] + 1 > S->M.w) S->M.w = S->layers[i] + 1;
    S->x = (peak_walk_t){p, g, 0, &S->M, 0, 0, NULL, 0, -1, 0};
    S->x.mbs = calloc((size_t)p->m * v, sizeof *S->x.mbs);
    size_t n = (size_t)v * S->M.w;
    S->M.a = malloc(n * sizeof(double)), S->M.wm = malloc(2 * n * sizeof(double));
    S->M.gb = malloc(2 * (size_t)v * sizeof(double)), S->M.have = calloc(n, 1), S->M.have_gb = calloc(v, 1);
    if (!S->x.mbs || !S->M.a || !S->M.wm || !S->M.gb || !S->M.have || !S->M.have_gb) {
        peak_search_free(S);
        return mk_error_set("out of memory");
    }
    return 0;
}

/* The streams built (where they were not) and the walker on them, for a
 * probe the memo cannot answer.  0 or -1. */
static int peak_search_walker(peak_search_t *S)
{
    lazy_streams_t *L = S->L;
    if (S->have_walk) return 0;
    if (!L->sch && !(L->sch = mk_sched_build_pooled(L->spec, L->pool))) return -1;
    /* (auto_round hands it to the memo's built streams afterwards) */
    mk_walk_opts_t wo = {.mode = MK_WALK_LOCAL, .ckpt_cap = S->layers, .ckpt_f = S->ckf};
    mk_walk_hooks_t h = {.ctx = &S->x, .memory = peak_op};
    if (mk_walk_init(&S->w, L->sch, &wo, &h) < 0) return -1;
    S->have_walk = 1;
    return 0;
}

/* ---- the peaks memo (sim_search.h) ------------------------------------
 * Key: two 64-bit hashes, each over everything the walk reads: the
 * stage's instructions (stream_hash), its chunks' caps,
 * its loss scratch and ZeRO-3 gathered bytes (peak_search_stage), then the
 * probe's count and each chunk's figures at the counts the walk can ask
 * for (its capped count, 0 for R, all layers where an F_PRE is).  The two
 * mixes differ (FNV-1a's prime vs a rotate and the golden-ratio
 * multiplier), so a wrong hit needs both 64-bit hashes to collide. */
#define MK_PEAK_MEMO_BITS 14

/* Beside the peaks, the stages' stream hashes of the last MK_PEAK_SPECS
 * specs met (least recently used replaced), keyed by a hash of the whole
 * spec (the streams are a function of it): a spec met again needs its
 * streams only for a probe the peaks do not answer (lazy_streams_t). */
#define MK_PEAK_SPECS 64

/* And the streams themselves of the last MK_PEAK_BUILT specs built (a
 * probe the peaks miss walks them: ZB-V's and DualPipeV's list schedules
 * of 64 stages cost ~4.5 M instructions to build, a few MB to keep). */
#define MK_PEAK_BUILT 4

struct mk_peak_entry { uint64_t key[2]; double peak; };
struct mk_peak_spec { uint64_t key[2]; int pp; stream_hash_t *sh; unsigned long used; };
struct mk_peak_built { uint64_t key[2]; mk_sched_t *sch; unsigned long used; };
struct mk_sim_peak_memo {
    struct mk_peak_entry e[1u << MK_PEAK_MEMO_BITS];
    struct mk_peak_spec sp[MK_PEAK_SPECS];
    struct mk_peak_built built[MK_PEAK_BUILT];
    unsigned long tick;
};

mk_sim_peak_memo_t *mk_sim_peak_memo_new(void) { return calloc(1, sizeof(mk_sim_peak_memo_t)); }

void mk_sim_peak_memo_free(mk_sim_peak_memo_t *m)
{
    if (!m) return;
    for (int i = 0; i < MK_PEAK_SPECS; i++) free(m->sp[i].sh);
    for (int i = 0; i < MK_PEAK_BUILT; i++) mk_sched_free(m->built[i].sch);
    free(m);
}

static void mix_real(uint64_t h[2], double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    mk_hash128_mix(h, v);
}

static void stream_hash(const mk_sched_t *sch, int s, int vpp, stream_hash_t *out)
{
    const mk_stream_t *st = &sch->streams[s];
    uint64_t *h = out->h;
    const uint64_t init[2] = MK_HASH128_INIT;
    h[0] = init[0], h[1] = init[1];
    out->pre = 0;
    mk_hash128_mix(h, (uint64_t)st->n), mk_hash128_mix(h, (uint64_t)vpp);
    for (int i = 0; i < st->n; i++) {
        const mk_instr_t *in = &st->v[i];
        mk_hash128_mix(h, (uint64_t)(uint32_t)in->op << 32 | (uint32_t)in->mb);
        mk_hash128_mix(h, (uint64_t)(uint32_t)in->chunk << 32 | (uint32_t)in->peer);
        mk_hash128_mix(h, (uint64_t)(uint32_t)(in->op == MK_INSTR_F ? 0 : in->ckpt) << 32 | (uint32_t)in->overlap);
        if (in->op == MK_INSTR_F_PRE && in->chunk >= 0 && in->chunk < 32) out->pre |= 1u << in->chunk;
    }
}

/* The stage's key: its stream's hash, then its chunks' caps, its loss
 * scratch and ZeRO-3 gathered bytes. */
static void stage_hash(peak_search_t *S)
{
    const mk_plan_t *p = S->x.p;
    const stream_hash_t *sh = &S->L->sh[S->x.s];
    uint64_t *h = S->h;
    h[0] = sh->h[0], h[1] = sh->h[1], S->pre = sh->pre;
    for (int c = 0; c < p->vpp; c++) mk_hash128_mix(h, (uint64_t)S->layers[S->x.s * p->vpp + c]);
    mix_real(h, S->x.gath), mix_real(h, S->x.fs), mk_hash128_mix(h, (uint64_t)(int64_t)S->x.fs_chunk);
}

/* Probe k's entry, its key in key (memo_act fills what the walk reads). */
static struct mk_peak_entry *memo_slot(peak_search_t *S, int k, uint64_t key[2])
{
    const mk_plan_t *p = S->x.p;
    key[0] = S->h[0], key[1] = S->h[1];
    mk_hash128_mix(key, (uint64_t)k);
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
    if (peak_search_walker(S) < 0) return 1e300;
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

/* L's stage hashes (L->sh): kept in memo for this spec, else from the
 * streams, built now (and kept in memo).  0 or -1. */
static int streams_hashed(lazy_streams_t *L, mk_sim_peak_memo_t *memo)
{
    int pp = L->spec->pp, lru = 0;
    const uint64_t *key = L->key;
    if (memo) {
        memo->tick++;
        for (int i = 0; i < MK_PEAK_SPECS; i++) {
            struct mk_peak_spec *e = &memo->sp[i];
            if (e->sh && e->pp == pp && e->key[0] == key[0] && e->key[1] == key[1]) {
                e->used = memo->tick;
                memcpy(L->sh, e->sh, pp * sizeof *L->sh);
                return 0;
            }
            if (e->used < memo->sp[lru].used) lru = i;
        }
    }
    if (!L->sch && !(L->sch = mk_sched_build_pooled(L->spec, L->pool))) return -1;
    for (int s = 0; s < pp; s++) stream_hash(L->sch, s, L->spec->vpp, &L->sh[s]);
    struct mk_peak_spec *e = memo ? &memo->sp[lru] : NULL;
    stream_hash_t *sh = e ? realloc(e->sh, pp * sizeof *sh) : NULL;
    if (!sh) return 0; /* not kept: the next search hashes again */
    memcpy(sh, L->sh, pp * sizeof *sh);
    e->sh = sh, e->pp = pp, e->key[0] = key[0], e->key[1] = key[1], e->used = memo->tick;
    return 0;
}

/* Per stage the fewest k that fits on L's streams (nmax if none), into
 * p->ckpt; a stage whose stream hashes as in prev (the streams the counts
 * came from: every field the peak walk reads, a plain F's count aside,
 * which the probe's ckpt_f replaces) keeps them.  *changed: some count
 * moved.  0 or -1. */
static int search_streams(mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o, lazy_streams_t *L,
                          const stream_hash_t *prev, double limit, mk_sim_peak_memo_t *memo, int *changed)
{
    peak_search_t S;
    if (peak_search_init(&S, p, g, L, o, memo) < 0) return -1;
    *changed = 0;
    for (int s = 0; s < p->pp; s++) {
        if (prev && !memcmp(prev[s].h, L->sh[s].h, sizeof prev[s].h)) continue;
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

/* The memo's built streams of L's spec, where kept (L->kept). */
static void built_find(lazy_streams_t *L, mk_sim_peak_memo_t *memo)
{
    for (int i = 0; memo && i < MK_PEAK_BUILT; i++) {
        struct mk_peak_built *b = &memo->built[i];
        if (b->sch && b->key[0] == L->key[0] && b->key[1] == L->key[1]) {
            b->used = ++memo->tick;
            L->sch = b->sch, L->kept = 1;
            return;
        }
    }
}

/* L's streams, built this round, kept in the memo in place of the least
 * recently used (recycled into the pool); without a memo recycled. */
static void built_keep(lazy_streams_t *L, mk_sim_peak_memo_t *memo)
{
    if (!L->sch || L->kept) return;
    if (!memo) {
        mk_sched_recycle(L->sch, L->pool);
        return;
    }
    struct mk_peak_built *b = &memo->built[0];
    for (int i = 1; i < MK_PEAK_BUILT; i++)
        if (memo->built[i].used < b->used) b = &memo->built[i];
    mk_sched_recycle(b->sch, L->pool);
    b->sch = L->sch, b->key[0] = L->key[0], b->key[1] = L->key[1], b->used = ++memo->tick;
}

/* The spec the round's streams are built from.  The peak walk reads no
 * plain F's count from the streams (the probe's ckpt_f replaces it, R and
 * B read what F set) and takes the chunks' caps from the plan, not the
 * streams; and only the generators with traits reads_counts (Merak's)
 * build from the counts' values or the layer counts, the others only from
 * which chunks recompute at all.  So counts above zero become 1 and the
 * layer counts go: rounds
 * and plans whose counts or partitions differ only in size share one
 * spec, its stage hashes and its streams. */
static void round_spec(const mk_plan_t *p, int *ck, mk_sched_spec_t *spec)
{
    if (!spec->ckpt || mk_sched_traits(p->schedule)->reads_counts) return;
    for (int i = 0; i < p->n_vstages; i++) ck[i] = ck[i] > 0;
    spec->layers = NULL;
}

/* One round of `auto`'s search on the streams of p's counts now (spec's
 * counts copied first: the search moves p's); hashes into cur. */
static int auto_round(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                      mk_sched_pool_t *pool, mk_sim_peak_memo_t *memo, stream_hash_t *cur,
                      const stream_hash_t *prev, int *changed)
{
    int spl[MK_PLAN_MAX_VSTAGES], ck[MK_PLAN_MAX_VSTAGES], V = p->n_vstages;
    mk_sched_spec_t spec;
    mk_plan_sched_spec(p, g, mk_plan_dp_cp(p) > 1, spl, &spec);
    if (spec.ckpt) memcpy(ck, spec.ckpt, V * sizeof *ck), spec.ckpt = ck;
    round_spec(p, ck, &spec);
    lazy_streams_t L = {&spec, pool, NULL, cur, {0, 0}, 0};
    mk_sched_spec_hash(&spec, L.key);
    built_find(&L, memo);
    int rc = streams_hashed(&L, memo);
    if (rc == 0) rc = search_streams(p, g, o, &L, prev, mk_cluster_usable_bytes(c), memo, changed);
    built_keep(&L, memo);
    return rc;
}

/* Resolve `auto`: a closed-form first guess, then per stage the fewest
 * checkpointed layers whose stream walk fits (binary search over plain F's
 * count on the current streams), again on the streams of the new counts
 * until the counts are stable (the streams may depend on them). */
int mk_sim_resolve_auto_pooled(const mk_cluster_t *c, mk_plan_t *p, const mk_graph_t *g, const mk_sim_opts_t *o,
                               mk_sched_pool_t *pool, mk_sim_peak_memo_t *memo)
{
    int layers[MK_PLAN_MAX_VSTAGES];
    if (p->n_vstages != mk_plan_vstages(p) || p->m < 1) return mk_error_set("plan has no stage bounds (check it first)");
    mk_plan_ckpt_layers(p, g, layers);
    if (mk_sim_closed_guess(c, p, g, o, layers) < 0) return -1;
    stream_hash_t *h[2] = {malloc(p->pp * sizeof **h), malloc(p->pp * sizeof **h)};
    int rc = h[0] && h[1] ? 0 : mk_error_set("out of memory");
    for (int iter = 0; iter < 8 && rc == 0; iter++) {
        int changed = 0;
        rc = auto_round(c, p, g, o, pool, memo, h[iter & 1], iter ? h[!(iter & 1)] : NULL, &changed);
        if (!changed) break;
    }
    free(h[0]), free(h[1]);
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
