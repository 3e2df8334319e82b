/* Per-layer costs kept across the runs of one simulator handle (sim.c):
 * a planner search runs thousands of candidates whose layers cost the
 * same (one graph, tp, cp, ep, dtype), and building them was most of a
 * run's chunk costs (layer_piece, mk_chunk_ops_fwd: per op, per run).
 * An entry is keyed by what those read: the graph's content (its model
 * and options, from which it is built, so a graph freed and another
 * allocated at its address cannot hit a stale entry), the plan's tp, cp,
 * ep, sequence parallelism and dtype, the TP, CP-ring and EP groups
 * (their sizes and how many share a node's links), and unit costs.  The pieces are the
 * same functions' values, copied: runs give the same results. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Entries per handle: beyond it runs compute their pieces (as before). */
#define MK_LAYER_CACHE_MAX 4096

struct mk_layer_cache {
    mk_model_config_t cfg;
    mk_graph_opts_t gopts;
    int n_layers, n_ops, tp, cp, cp_comm, ep, deepep, sp, unit;
    mk_group_t tpg, cpg, epg;
    mk_dtype_t dtype;
    mk_tpl_t *pc;        /* [3 L] by dir (forward, backward, B_IN) x layer */
    double *opsf;        /* [2 L] mk_chunk_ops_fwd: linears and head (0), attention cores (1) */
    unsigned char *have; /* [5 L] pc's then opsf's */
};

static void key_of(const mk_sim_state_t *R, mk_layer_cache_t *k)
{
    const mk_plan_t *p = R->p;
    memset(k, 0, sizeof *k);
    /* memcpy: the padding too, which memcmp compares */
    memcpy(&k->cfg, &R->g->cfg, sizeof k->cfg), memcpy(&k->gopts, &R->g->opts, sizeof k->gopts);
    k->n_layers = R->g->n_layers, k->n_ops = R->g->n_ops;
    k->tp = p->tp, k->cp = p->cp, k->cp_comm = p->cp_comm, k->ep = p->ep, k->deepep = p->moe_deepep, k->sp = p->seqpar && p->tp > 1 ? 1 + (p->tp_comm_overlap != 0) : 0;
    k->dtype = p->dtype, k->unit = R->o->unit_costs;
    k->tpg = R->tpg, k->cpg = R->cpg, k->epg = R->epg;
}

static int same_key(const mk_layer_cache_t *a, const mk_layer_cache_t *b)
{
    return a->n_layers == b->n_layers && a->n_ops == b->n_ops && a->tp == b->tp && a->cp == b->cp &&
           a->cp_comm == b->cp_comm &&
           a->ep == b->ep && a->deepep == b->deepep && a->sp == b->sp && a->unit == b->unit && a->dtype == b->dtype &&
           !memcmp(&a->tpg, &b->tpg, sizeof a->tpg) && !memcmp(&a->cpg, &b->cpg, sizeof a->cpg) &&
           !memcmp(&a->epg, &b->epg, sizeof a->epg) && !memcmp(&a->gopts, &b->gopts, sizeof a->gopts) && !memcmp(&a->cfg, &b->cfg, sizeof a->cfg);
}

mk_layer_cache_t *mk_layer_cache_find(mk_layer_caches_t *C, const mk_sim_state_t *R)
{
    mk_layer_cache_t k;
    key_of(R, &k);
    for (int i = 0; i < C->n; i++)
        if (same_key(C->e[i], &k)) return C->e[i];
    if (C->n == MK_LAYER_CACHE_MAX) return NULL;
    if (C->n == C->cap) {
        int cap = C->cap ? 2 * C->cap : 16;
        mk_layer_cache_t **n = realloc(C->e, cap * sizeof *n);
        if (!n) return NULL;
        C->e = n, C->cap = cap;
    }
    mk_layer_cache_t *e = malloc(sizeof *e);
    size_t L = (size_t)k.n_layers;
    if (!e) return NULL;
    *e = k;
    e->pc = malloc(3 * L * sizeof *e->pc), e->opsf = malloc(2 * L * sizeof *e->opsf), e->have = calloc(5 * L, 1);
    if (!e->pc || !e->opsf || !e->have) {
        free(e->pc), free(e->opsf), free(e->have), free(e);
        return NULL;
    }
    return C->e[C->n++] = e;
}

void mk_layer_caches_free(mk_layer_caches_t *C)
{
    for (int i = 0; i < C->n; i++) free(C->e[i]->pc), free(C->e[i]->opsf), free(C->e[i]->have), free(C->e[i]);
    free(C->e);
    memset(C, 0, sizeof *C);
}

const mk_tpl_t *mk_layer_cache_piece(mk_layer_cache_t *e, int l, int dir)
{
    size_t i = (size_t)dir * e->n_layers + l;
    return e->have[i] ? &e->pc[i] : NULL;
}

void mk_layer_cache_put_piece(mk_layer_cache_t *e, int l, int dir, const mk_tpl_t *t)
{
    size_t i = (size_t)dir * e->n_layers + l;
    e->pc[i] = *t, e->have[i] = 1;
}

int mk_layer_cache_ops(mk_layer_cache_t *e, int l, int attention, double *t)
{
    size_t i = (size_t)attention * e->n_layers + l;
    if (!e->have[3 * (size_t)e->n_layers + i]) return 0;
    *t = e->opsf[i];
    return 1;
}

void mk_layer_cache_put_ops(mk_layer_cache_t *e, int l, int attention, double t)
{
    size_t i = (size_t)attention * e->n_layers + l;
    e->opsf[i] = t, e->have[3 * (size_t)e->n_layers + i] = 1;
}
