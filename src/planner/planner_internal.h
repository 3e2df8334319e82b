/* The planner's search, shared by its files (not installed): the search
 * state, its candidates, groups and families, and the functions one file
 * calls in another.  planner.c ranks and drives the search, planner_gen.c
 * generates candidates, planner_prune.c settles memory and bounds them,
 * planner_queue.c stores them and keeps the queue, planner_explain.c
 * compares two plans and refines one (see planner.h for the space and
 * the bound). */
#ifndef MERAK_PLANNER_INTERNAL_H
#define MERAK_PLANNER_INTERNAL_H

#include "merak/partition.h"
#include "merak/planner.h"
#include "merak/sim_search.h"

#include <stddef.h>
#include <string.h>

/* A candidate as the search keeps it: its plan's fields from dtype up to
 * the stage arrays (model and cluster are the search's, the same in every
 * candidate: S->tmpl), and its n_vstages + 1 bounds and n_vstages counts
 * in S->ints at off, so that the search's memory grows with what the
 * candidates hold, not with MK_PLAN_MAX_VSTAGES-wide plans (5 KB each:
 * 228 MB for GPT-20B / 64 GPUs before issue 22). */
#define MK_CAND_FROM offsetof(mk_plan_t, dtype)
#define MK_CAND_TO offsetof(mk_plan_t, bounds)

typedef struct {
    unsigned char mid[MK_CAND_TO - MK_CAND_FROM];
    int has_ckpt;
    int refined;      /* lb is mk_pl_refine's */
    long sib;         /* its other TP overlap's candidate (-1: none) */
    long off;         /* its stage arrays in S->ints */
    double lb;        /* lower bound on the step time, seconds */
    long index;
} mk_cand_t;

/* The lower bound's layer costs of one graph, one per layout whose
 * pieces differ (sequence parallelism; the groups' node sharing):
 * made as the candidates need them (lower_bound). */
typedef struct {
    const mk_cluster_t *cl;
    const mk_sim_opts_t *so;
    mk_sim_bound_t **v;
    int n, cap;
    int last, last_sp, last_dp; /* the last found (bound_of; -1: none) and what it was found for */
    mk_sim_bound_t **share;     /* the search's first bound, whose memo every bound shares */
} mk_gbounds_t;

/* A group: the candidates of one (split, recompute kind, ZeRO variant),
 * one per TP overlap searched, pushed unsettled with a bound valid for
 * every outcome of its memory settling and settled only when the search
 * reaches that bound (issue 22: bound before building).  index: its
 * overlap-0 candidate's (overlap 1: index + 1), in enumeration order. */
typedef struct {
    long fam;  /* its split and ZeRO variant, S->fam */
    long index;
    long z1;   /* fixed policy, ZeRO-2: the ZeRO-1 group that makes it redundant if that fits (-1: none) */
    signed char rk, nov, done, fit;
    signed char floored; /* auto: queued again at the bound of its least counts (auto_floor) */
} mk_cgroup_t;

/* A family: one split (the bounds of one recompute-cost setting) and ZeRO
 * variant, shared by its recompute kinds' groups.  What no count changes
 * (state_ok, fx) is computed when its first group settles, and fx freed
 * with its last. */
typedef struct {
    unsigned char mid[MK_CAND_TO - MK_CAND_FROM];
    long off, toff; /* its bounds in S->ints, its tail (after[pp], dp[pp]) in S->dbl */
    long first;     /* its first group (the no-fit report's plan on a state miss) */
    mk_sim_fixed_t *fx;
    int pending;    /* groups not settled */
    signed char state_ok; /* -1 not known */
} mk_fam_t;

/* An int field of family fi's plan, read in place (a plan is 5 KB to load). */
static inline int mk_pl_fam_int(const mk_fam_t *F, size_t off)
{
    int v;
    memcpy(&v, F->mid + (off - MK_CAND_FROM), sizeof v);
    return v;
}
#define MK_FAM_INT(S, fi, field) mk_pl_fam_int(&(S)->fam[fi], offsetof(mk_plan_t, field))

/* The terms of one split's bounds under one recompute policy, per TP
 * overlap (on: searched; zero: the bound is 0), shared by its ZeRO
 * variants' groups (mk_pl_terms_of). */
typedef struct {
    int rcon, sel;
    const int *bounds;            /* the split's (n_vstages + 1), valid while its candidates are made */
    double busy;                  /* > 0: not made, a stage's busy alone passed the cut (mk_pl_terms_lb: it) */
    int on[2], zero[2];
    double *v[2];                 /* mk_sim_bound_terms's, in S->tbuf */
    int ck[MK_PLAN_MAX_VSTAGES];  /* the counts they took */
} mk_pl_terms_t;

/* A family's tail (mk_sim_stage_tail: the optimizer step and DP stream
 * per stage) reads its plan but not its schedule, save the placement (the
 * V's chunks): families that differ only there share one, found in a
 * direct-mapped table by a hash of the plan (a slot keeps the last family
 * hashed there; a third of a search's generating time before). */
#define MK_TAILC 4096
typedef struct {
    unsigned char mid[MK_CAND_TO - MK_CAND_FROM]; /* the plan's, canonical (mk_pl_tail) */
    int nb;         /* n_vstages + 1; 0: empty */
    int *bounds;    /* [nb] */
    double *tail;   /* [2 pp] */
} mk_tailc_t;

typedef struct mk_pl_progs mk_pl_progs_t;

/* The search's queue: groups (grp: id in S->grp) and candidates that fit
 * (id in S->c), least (lb, index) first. */
typedef struct {
    double lb;
    long index, id;
    int grp;
} mk_hent_t;

/* A split of one graph into nv virtual stages: compute-balanced (uni 0:
 * its layer costs, seqpar sp and recompute counted) or uniform (uni 1,
 * with first and last stage blocks, sp the stages pp: neither seqpar nor
 * recompute read): its bounds (nv + 1), or rc -1 with its error. */
typedef struct {
    int sp, rcon, nv, rc, uni, first, last;
    int *bounds;
    char err[160];
} mk_part_memo_t;

/* Cached per (mbs, tp, cp, ep): the graph (ep: its experts' GEMM shapes); per seqpar: per-layer fwd/bwd times
 * of one rank's tokens (b s / cp). */
typedef struct {
    int mbs, tp, cp, ep;
    mk_graph_t *g;        /* the plans' graph: the same for every cp (its tokens are the costs'), so an
                             entry of another cp may hold it (own 0) */
    int own;
    double *f[2], *b[2];  /* [seqpar][layer] compute of forward, backward */
    mk_gbounds_t *bd;     /* the bound's (mk_sim_bound_t) */
    mk_part_memo_t *part; /* the compute splits made (bounds_for): the same for every schedule */
    int npart;
} mk_gcache_t;

/* What each stage runs after its compute and its DP stream's floor
 * (mk_sim_stage_tail; lower_bound). */
typedef struct {
    double after[MK_PLAN_MAX_VSTAGES], dp[MK_PLAN_MAX_VSTAGES]; /* [pp] seconds */
} mk_tail_t;

typedef struct {
    const mk_model_config_t *model;
    const mk_cluster_t *cl;
    const mk_planner_opts_t *o;
    mk_gcache_t *gc;
    int ngc, capgc;
    mk_cand_t *c;           /* settled candidates that fit */
    long n, cap;
    int *ints;              /* the candidates' and families' stage arrays (off) */
    long nints, capints;
    mk_fam_t *fam;
    long nfam, capfam;
    mk_cgroup_t *grp;
    long ngrp, capgrp;
    double *dbl;            /* the families' tails (toff) */
    long ndbl, capdbl;
    mk_hent_t *heap;
    long nheap, capheap;
    long *deferred;         /* auto groups that fit at no count, settled in full only if nothing fits */
    long ndeferred, capdeferred;
    long miss_order, closest_order; /* the candidate index of the group note_miss sees, the closest's */
    double reported_t;      /* the last progress report while simulating */
    mk_plan_t tmpl;         /* every candidate's model and cluster, the rest as mk_plan_init */
    mk_attn_backend_t attention; /* every candidate's, settled (o->attention against the cluster) */
    mk_planner_result_t *r;
    mk_sim_opts_t so;
    long combo, combo_seq;  /* current (layout, micro-batch) ordinal and candidate within it */
    long combos, combos_done; /* this rank's layouts (dp, cp, ep, pp, tp, micro-batch), those generated */
    int counting;             /* enumerate() only counts this rank's layouts into combos (progress) */
    double t0;                /* search start (progress) */
    mk_sched_pool_t pool;   /* the auto searches' stream buffers, reused by every candidate */
    mk_sim_peak_memo_t *pmemo; /* their stage walks' peaks (NULL: none) */
    mk_sim_fixed_t *fx;       /* the candidate's memory parts no count changes (NULL: none) */
    mk_tail_t tail;
    double *tscr;           /* the tails of one split's ZeRO variants ([2][8][2 MK_PLAN_MAX_VSTAGES]) */
    mk_sim_t *sim;          /* the search's simulator (mk_pl_probe) */
    mk_sim_bound_t *bshare; /* the first bound made (mk_gbounds_t.share; freed with its graph's) */
    mk_pl_progs_t *progs;   /* the streams' walk programs kept for mk_pl_refine (planner_prune.c) */
    double *tbuf;           /* the bound terms of one split's recompute policies (mk_pl_terms_of) */
    mk_tailc_t *tailc;      /* [MK_TAILC] families' tails by their plan but the schedule (direct-mapped) */
    double *all;            /* o->share: the K best step times of every rank (all_buf), else NULL */
    double all_buf[MK_MAX_TOP];
    int shared;             /* o->share: 1 once every rank is done (share_finish) */
} mk_search_t;

/* Ties between plans (equal simulated steps: the ideal cluster) go to the
 * ones the search had before ZeRO-2/3 and hybrid groups (issue 17): the
 * less sharded plan does less communication on a real cluster. */
#define MK_LATE_VARIANT (1L << 52)
/* A candidate's index: combo x MK_PL_COMBO_SEQ + (the ep's ordinal in the
 * combo x MK_SCHED_COUNT + schedule k) x MK_PL_SCHED_SEQ + its sequence in
 * that schedule's loop (at most 2 vpp x 3 partitions x 2 sp x 2 uneven x 5
 * recompute kinds x 8 ZeRO variants groups of 2 indices: 1,920).  Fixed
 * ranges, so a rank that does not generate a schedule's candidates knows
 * the next one's indices (ranks share the search by units of a schedule,
 * each with its fixed range: MK_PL_UNIT_SEQ), and the
 * order is the generation order.  At most 2^24 / (11 x 2048) = 744 ep
 * values (ep divides tp x cp x dp and the experts: under 100 values for 16,384 experts)
 * and 2^28 combos, so an index with MK_LATE_VARIANT stays below 2^53 and
 * exact as a double (merge_closest sends it so). */
#define MK_PL_SCHED_SEQ 2048L
/* A schedule's units (planner_gen.c unit_mine): 2 vpp x 3 partitions x 2 sp
 * x 2 uneven ends, each with a range of 5 recompute kinds x 8 ZeRO
 * variants x 2 indices; 24 x 80 = 1,920 within MK_PL_SCHED_SEQ. */
#define MK_PL_UNITS 24
#define MK_PL_UNIT_SEQ 80L
#define MK_PL_COMBO_SEQ (1L << 24)
#define MK_PL_MAX_COMBOS (1L << 28)

/* the search's storage and queue (planner_queue.c) */
void mk_pl_cand_plan(const mk_search_t *S, const mk_cand_t *c, mk_plan_t *p);
int mk_pl_grow(void *pa, long *cap, long need, size_t size, long first);
mk_hent_t mk_pl_heap_pop(mk_search_t *S);
int mk_pl_heap_push(mk_search_t *S, double lb, long index, long id, int grp);
void mk_pl_load_plan(const mk_search_t *S, const unsigned char *mid, long off, int ckpt, mk_plan_t *p);
int mk_pl_push(mk_search_t *S, const mk_plan_t *p, double lb, long index);
int mk_pl_store_plan(mk_search_t *S, const mk_plan_t *p, int ckpt, unsigned char *mid, long *off);

/* bound and prune: memory settling of groups and families, the lower bound (planner_prune.c) */
const mk_gcache_t *mk_pl_cache_of(mk_search_t *S, const mk_plan_t *p);
void mk_pl_tail_load(mk_search_t *S, long fi, int pp);
int mk_pl_floor_group(mk_search_t *S, long gi);
const mk_pl_terms_t *mk_pl_terms_of(mk_search_t *S, const mk_gcache_t *e, const mk_plan_t *split, int rk, int rcon,
                                    mk_pl_terms_t *T, int *n, double *sends, int *have_sends);
int mk_pl_has(unsigned mask, int bit);
int mk_pl_ov_searched(const mk_search_t *S, const mk_plan_t *p, int ov);
int mk_pl_rcon_adapts(int rk);
void mk_pl_settle_deferred(mk_search_t *S);
int mk_pl_settle_group(mk_search_t *S, long gi);
void mk_pl_refine(mk_search_t *S, long ci, const mk_plan_t *p);
void mk_pl_progs_free(mk_pl_progs_t *P);

/* families, tails and groups as the generator makes them (planner_fam.c) */
int mk_pl_tail(mk_search_t *S, const mk_plan_t *p, const mk_graph_t *g, double *out);
void mk_pl_tails_free(mk_search_t *S);
long mk_pl_fam_new(mk_search_t *S, const mk_plan_t *p, const double *tail, long toff);
double mk_pl_terms_lb(const mk_pl_terms_t *T, int pp, const double *tail);
void mk_pl_group_skip(mk_search_t *S, int nov);
long mk_pl_group_new(mk_search_t *S, long fi, int rk, long z1, double lb, int nov, long at, int queue);

/* the candidate generator (planner_gen.c) */
int mk_pl_enumerate(mk_search_t *S);

/* ranking and the search's driver (planner.c) */
void mk_pl_report(mk_search_t *S, int phase);
/* The bound a group must stay under to be kept: the K-th best step so far
 * (INFINITY: no K yet, or an exhaustive search). */
double mk_pl_cut(const mk_search_t *S);
/* While generating: the queue's least entries settled and simulated
 * until a first K plans are known, or one more (the cut drops). */
int mk_pl_probe(mk_search_t *S);

/* The most memory any stage of e's plan holds (the tie order's first key). */
double mk_pl_entry_peak(const mk_planner_entry_t *e);

#endif
