/* The shared pipeline scheduler: names, spec checks, the stream builder
 * (LOAD and p2p around every compute op) and the per-stage tail
 * (REDUCE_TIED, REDUCE_GRADS, OPT_STEP).  The order of compute ops comes
 * from one generator per schedule (sched_<name>.c). */
#include "config.h"
#include "sched/sched_internal.h"
#include "merak/checked.h"
#include "merak/limits.h"
#include "merak/hash.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[MK_SCHED_COUNT] = {
    "gpipe", "1f1b", "interleaved", "merak", "merak-pre", "merak-last", "zb-h1", "looped-bfs",
    "zb-h2", "zb-v", "dualpipev"};

/* torch.distributed.pipelining's class names (torchtitan's
 * pipeline_parallel_schedule values) for the schedules it shares */
static const struct { const char *alias; mk_sched_kind_t kind; } kind_aliases[] = {
    {"GPipe", MK_SCHED_GPIPE}, {"1F1B", MK_SCHED_1F1B}, {"Interleaved1F1B", MK_SCHED_INTERLEAVED},
    {"LoopedBFS", MK_SCHED_LOOPED_BFS}, {"ZBVZeroBubble", MK_SCHED_ZB_V}, {"DualPipeV", MK_SCHED_DUALPIPEV}};

static const char *const op_names[MK_INSTR_COUNT] = {
    "LOAD", "F", "F_PRE", "R", "B", "B_IN", "B_W", "SEND_ACT", "RECV_ACT",
    "SEND_GRAD", "RECV_GRAD", "REDUCE_TIED", "REDUCE_GRADS", "OPT_STEP"};

int mk_sched_kind_parse(const char *s, mk_sched_kind_t *out)
{
    for (int k = 0; k < MK_SCHED_COUNT; k++)
        if (s && !strcmp(s, kind_names[k])) {
            *out = (mk_sched_kind_t)k;
            return 0;
        }
    for (size_t i = 0; i < sizeof kind_aliases / sizeof *kind_aliases; i++)
        if (s && !strcmp(s, kind_aliases[i].alias)) return *out = kind_aliases[i].kind, 0;
    return mk_error_set("unknown schedule '%s' (gpipe, 1f1b, interleaved, merak, merak-pre, "
                        "merak-last, zb-h1, looped-bfs, zb-h2, zb-v, dualpipev)", s ? s : "");
}

const char *mk_sched_kind_name(mk_sched_kind_t k)
{
    return k >= 0 && k < MK_SCHED_COUNT ? kind_names[k] : "?";
}

const char *mk_instr_op_name(mk_instr_op_t op)
{
    return op >= 0 && op < MK_INSTR_COUNT ? op_names[op] : "?";
}

int64_t mk_vstages(int pp, int vpp) { return (int64_t)pp * vpp; }

int mk_sched_grow(mk_sched_t *s, int stage)
{
    mk_stream_t *st = &s->streams[stage];
    int cap = st->cap ? 2 * st->cap : 64;
    mk_instr_t *v = realloc(st->v, (size_t)cap * sizeof *v);
    if (!v) return mk_error_set("sched: out of memory for stage %d's stream", stage);
    st->v = v;
    st->cap = cap;
    return 0;
}

/* The stages of virtual stages k-1 and k+1 (mk_sched_vstage's placement):
 * on the loop the neighbouring stages, without a division per instruction. */
static void vneighbours(const mk_sched_t *s, int stage, int k, int *prev, int *next)
{
    int p = s->spec.pp;
    if (s->vshape) {
        *prev = k > 0 ? mk_sched_vstage_stage(1, p, k - 1) : stage;
        *next = k < s->n_vstages - 1 ? mk_sched_vstage_stage(1, p, k + 1) : stage;
        return;
    }
    *prev = stage == 0 ? p - 1 : stage - 1, *next = stage + 1 == p ? 0 : stage + 1;
}

int mk_sched_emit(mk_sched_t *s, int stage, mk_instr_op_t op, int mb, int chunk)
{
    int p = s->spec.pp, k = mk_sched_vstage(s->vshape, p, stage, chunk), last = s->n_vstages - 1;
    int prev, next;
    vneighbours(s, stage, k, &prev, &next);
    int fwd = op == MK_INSTR_F || op == MK_INSTR_F_PRE;
    int bwd = op == MK_INSTR_B || op == MK_INSTR_B_IN;
    int rc = 0;
    if (fwd) {
        /* The first virtual stage reads the tokens, the last the labels
           (once per mb on a stage holding both) */
        if (k == 0 || (k == last && stage != 0))
            rc |= mk_sched_push(s, stage, MK_INSTR_LOAD, mb, chunk, -1, 0);
        if (k > 0 && prev != stage)
            rc |= mk_sched_push(s, stage, MK_INSTR_RECV_ACT, mb, chunk, prev, 0);
        int ck = op == MK_INSTR_F_PRE ? mk_sched_layers(s, stage, chunk)
                                      : mk_sched_ckpt(s, stage, chunk);
        rc |= mk_sched_push(s, stage, op, mb, chunk, -1, ck);
        if (k < last && next != stage)
            rc |= mk_sched_push(s, stage, MK_INSTR_SEND_ACT, mb, chunk, next, 0);
    } else if (bwd) {
        if (k < last && next != stage)
            rc |= mk_sched_push(s, stage, MK_INSTR_RECV_GRAD, mb, chunk, next, 0);
        rc |= mk_sched_push(s, stage, op, mb, chunk, -1, 0);
        if (k > 0 && prev != stage)
            rc |= mk_sched_push(s, stage, MK_INSTR_SEND_GRAD, mb, chunk, prev, 0);
    } else {
        rc = mk_sched_push(s, stage, op, mb, chunk, -1, 0);
    }
    return rc ? -1 : 0;
}

int mk_sched_check_size(int pp, int vpp, int m)
{
    int64_t n;
    if (MK_PROD_WITHIN(MK_MAX_SCHED_UNITS, &n, pp, vpp, m) < 0)
        return mk_error_set("a step of pp %d x vpp %d x %d micro-batches is more than %d (stage, chunk, "
                            "micro-batch) units, the most a schedule may have", pp, vpp, m, MK_MAX_SCHED_UNITS);
    return 0;
}

static int check_spec(const mk_sched_spec_t *sp, int vpp)
{
    if (sp->kind < 0 || sp->kind >= MK_SCHED_COUNT)
        return mk_error_set("unknown schedule kind %d", (int)sp->kind);
    if (sp->pp < 1) return mk_error_set("pipeline stages must be >= 1, got %d", sp->pp);
    if (sp->m < 1) return mk_error_set("micro-batches must be >= 1, got %d", sp->m);
    if (vpp < 1) return mk_error_set("vpp must be >= 1, got %d", vpp);
    if (mk_sched_check_size(sp->pp, vpp, sp->m) < 0) return -1;
    int interleaved = mk_sched_traits(sp->kind)->interleaved;
    if (vpp > 1 && !interleaved)
        return mk_error_set("vpp %d needs the interleaved schedule (got %s)", vpp,
                            mk_sched_kind_name(sp->kind));
    const mk_sched_traits_t *tr = mk_sched_traits(sp->kind);
    if (vpp < tr->min_vpp || (tr->max_vpp && vpp > tr->max_vpp)) { /* looped-bfs: one chunk is GPipe */
        if (tr->max_vpp == tr->min_vpp)
            return mk_error_set("%s runs vpp %d exactly (two chunks per stage in a V; got %d)",
                                mk_sched_kind_name(sp->kind), tr->min_vpp, vpp);
        return mk_error_set("%s needs vpp >= %d (got %d)", mk_sched_kind_name(sp->kind), tr->min_vpp, vpp);
    }
    if (sp->m < (int64_t)tr->min_m_per_pp * sp->pp) /* dualpipev: DeepSeek's dualpipev.py asserts it */
        return mk_error_set("%s needs at least %d x pp = %d micro-batches (got %d)", mk_sched_kind_name(sp->kind),
                            tr->min_m_per_pp, tr->min_m_per_pp * sp->pp, sp->m);
    if (mk_sched_traits(sp->kind)->m_per_pp && sp->m % sp->pp)
        return mk_error_set("interleaved needs micro-batches (%d) to be a multiple of "
                            "pipeline stages (%d)", sp->m, sp->pp);
    if (sp->grad_buckets < 0)
        return mk_error_set("grad_buckets must be >= 0, got %d", sp->grad_buckets);
    if (sp->layers)
        for (int i = 0; i < (int)mk_vstages(sp->pp, vpp); i++) /* pp, vpp checked above */
            if (sp->layers[i] < 0)
                return mk_error_set("layers of stage %d chunk %d is negative (%d)", i / vpp,
                                    i % vpp, sp->layers[i]);
    return 0;
}

/* Every stage ends the step the same way: the tied-embedding all-reduce
 * (first and last stage), the DP gradient buckets, the optimizer. */
static int emit_tail(mk_sched_t *s)
{
    int p = s->spec.pp, rc = 0, apart = mk_sched_ends_apart(s->spec.kind, p, s->spec.vpp);
    for (int st = 0; st < p; st++) {
        if (s->spec.tied && apart && (st == 0 || st == p - 1))
            rc |= mk_sched_push(s, st, MK_INSTR_REDUCE_TIED, -1, 0, st == 0 ? p - 1 : 0, 0);
        for (int b = 0; b < s->spec.grad_buckets; b++)
            rc |= mk_sched_push(s, st, MK_INSTR_REDUCE_GRADS, -1, 0, -1, 0);
        rc |= mk_sched_push(s, st, MK_INSTR_OPT_STEP, -1, 0, -1, 0);
    }
    return rc ? -1 : 0;
}

static int (*const generators[MK_SCHED_COUNT])(mk_sched_t *) = {
    [MK_SCHED_GPIPE] = mk_sched_gen_gpipe,
    [MK_SCHED_1F1B] = mk_sched_gen_1f1b,
    [MK_SCHED_INTERLEAVED] = mk_sched_gen_interleaved,
    [MK_SCHED_MERAK] = mk_sched_gen_merak,
    [MK_SCHED_MERAK_PRE] = mk_sched_gen_merak,
    [MK_SCHED_MERAK_LAST] = mk_sched_gen_merak,
    [MK_SCHED_ZB_H1] = mk_sched_gen_zbh1,
    [MK_SCHED_LOOPED_BFS] = mk_sched_gen_looped_bfs,
    [MK_SCHED_ZB_H2] = mk_sched_gen_zb_list,
    [MK_SCHED_ZB_V] = mk_sched_gen_zb_list,
    [MK_SCHED_DUALPIPEV] = mk_sched_gen_dualpipev,
};

/* A schedule's own changes to the policy's counts, made before its streams. */
static void (*const adjusters[MK_SCHED_COUNT])(mk_sched_t *) = {
    [MK_SCHED_MERAK] = mk_sched_merak_adjust_ckpt,
    [MK_SCHED_MERAK_PRE] = mk_sched_merak_adjust_ckpt,
    [MK_SCHED_MERAK_LAST] = mk_sched_merak_adjust_ckpt,
};

/* The most instructions a stage's stream holds: per (micro-batch, chunk)
 * LOAD, RECV_ACT, F, SEND_ACT, R, RECV_GRAD, B (or B_IN), SEND_GRAD and
 * B_W (mk_sched_emit), then the tail's REDUCE_TIED, buckets and OPT_STEP.
 * Each stream gets that room up front, from the pool's spare buffers when
 * it has one (pages already touched) or malloc (pages a stream does not
 * fill are never touched), so a build does not realloc; a failed
 * reservation only leaves mk_sched_push to grow the stream. */
static void reserve_streams(mk_sched_t *s, mk_sched_pool_t *pool)
{
    int64_t n = 9 * (int64_t)s->spec.m * s->spec.vpp + 2 + s->spec.grad_buckets;
    for (int st = 0; st < s->spec.pp; st++) {
        mk_stream_t b = {0, 0, NULL};
        if (pool && pool->n) b = pool->spare[--pool->n];
        if (b.cap < n) { /* the old contents are not needed: no realloc copy */
            free(b.v);
            b.v = malloc((size_t)n * sizeof *b.v);
            b.cap = b.v ? (int)n : 0; /* within 9 MK_MAX_SCHED_UNITS + the buckets */
        }
        s->streams[st] = (mk_stream_t){0, b.cap, b.v};
    }
}

/* Keep a stream's buffer for the next build (freed when the pool is full
 * or cannot grow). */
static void pool_put(mk_sched_pool_t *pool, mk_stream_t *b)
{
    if (pool && pool->n == pool->cap && pool->cap < MK_SCHED_POOL_MAX) {
        int cap = pool->cap ? 2 * pool->cap : 64;
        mk_stream_t *v = realloc(pool->spare, (size_t)cap * sizeof *v);
        if (v) pool->spare = v, pool->cap = cap;
    }
    if (pool && b->v && pool->n < pool->cap) pool->spare[pool->n++] = (mk_stream_t){0, b->cap, b->v};
    else free(b->v);
}

void mk_sched_pool_free(mk_sched_pool_t *pool)
{
    for (int i = 0; i < pool->n; i++) free(pool->spare[i].v);
    free(pool->spare);
    memset(pool, 0, sizeof *pool);
}

/* The spec checked and its checkpoint counts resolved (the policy, then
 * the schedule's adjustment); with_streams: also the empty streams.  NULL
 * on a bad spec. */
static mk_sched_t *sched_prepare(const mk_sched_spec_t *spec, int with_streams)
{
    int vpp = spec->vpp ? spec->vpp : 1;
    if (check_spec(spec, vpp) < 0) return NULL;
    int nc = (int)mk_vstages(spec->pp, vpp); /* within MK_MAX_VSTAGES (check_spec) */
    mk_sched_t *s = calloc(1, sizeof *s);
    if (!s) return mk_error_set("sched: out of memory"), NULL;
    s->spec = *spec;
    s->spec.vpp = vpp;
    s->spec.layers = s->spec.ckpt = NULL;
    s->n_vstages = nc;
    s->vshape = mk_sched_traits(spec->kind)->vshape;
    s->ckpt = calloc((size_t)nc, sizeof *s->ckpt);
    s->layers = calloc((size_t)nc, sizeof *s->layers);
    if (with_streams) s->streams = calloc((size_t)spec->pp, sizeof *s->streams);
    if (!s->ckpt || !s->layers || (with_streams && !s->streams)) {
        mk_error_set("sched: out of memory");
        goto fail;
    }
    for (int i = 0; i < nc; i++) s->layers[i] = spec->layers ? spec->layers[i] : 1;
    s->layers_given = spec->layers != NULL;
    if (mk_sched_resolve_ckpt(s, spec->ckpt) < 0) goto fail;
    if (adjusters[s->spec.kind]) adjusters[s->spec.kind](s);
    return s;
fail:
    mk_sched_free(s);
    return NULL;
}

mk_sched_t *mk_sched_build_pooled(const mk_sched_spec_t *spec, mk_sched_pool_t *pool)
{
    mk_sched_t *s = sched_prepare(spec, 1);
    if (!s) return NULL;
    reserve_streams(s, pool);
    if (generators[s->spec.kind](s) < 0 || emit_tail(s) < 0) {
        mk_sched_recycle(s, pool);
        return NULL;
    }
    return s;
}

mk_sched_t *mk_sched_build(const mk_sched_spec_t *spec)
{
    return mk_sched_build_pooled(spec, NULL);
}

int mk_sched_ckpt_counts(const mk_sched_spec_t *spec, int *ckpt)
{
    mk_sched_t *s = sched_prepare(spec, 0);
    if (!s) return -1;
    memcpy(ckpt, s->ckpt, (size_t)s->n_vstages * sizeof *ckpt);
    mk_sched_free(s);
    return 0;
}

void mk_sched_recycle(mk_sched_t *s, mk_sched_pool_t *pool)
{
    if (!s) return;
    if (s->streams)
        for (int i = 0; i < s->spec.pp; i++) pool_put(pool, &s->streams[i]);
    free(s->streams);
    free(s->ckpt);
    free(s->layers);
    free(s);
}

void mk_sched_free(mk_sched_t *s)
{
    mk_sched_recycle(s, NULL);
}

void mk_sched_spec_hash(const mk_sched_spec_t *sp, uint64_t h[2])
{
    int V = sp->pp * (sp->vpp > 1 ? sp->vpp : 1);
    uint64_t ratio;
    memcpy(&ratio, &sp->recompute.ratio, sizeof ratio);
    const uint64_t init[2] = MK_HASH128_INIT;
    h[0] = init[0], h[1] = init[1];
    mk_hash128_mix(h, (uint64_t)sp->kind << 32 | (uint32_t)sp->pp);
    mk_hash128_mix(h, (uint64_t)(uint32_t)sp->m << 32 | (uint32_t)sp->vpp);
    mk_hash128_mix(h, (uint64_t)sp->recompute.kind), mk_hash128_mix(h, ratio);
    mk_hash128_mix(h, (uint64_t)(uint32_t)sp->grad_buckets << 32 | (uint32_t)sp->tied);
    for (int i = 0; i < V; i++) mk_hash128_mix(h, (uint64_t)(uint32_t)(sp->layers ? sp->layers[i] : 1));
    mk_hash128_mix(h, sp->ckpt != NULL);
    for (int i = 0; sp->ckpt && i < V; i++) mk_hash128_mix(h, (uint64_t)(uint32_t)sp->ckpt[i]);
}
