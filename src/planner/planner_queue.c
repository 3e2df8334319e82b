/* The planner's storage of candidates and its queue (least bound first). */
#include "planner/planner_internal.h"

#include <stdlib.h>
#include <string.h>

/* Room for need elements in *pa (capacity *cap, first allocation first). */
int mk_pl_grow(void *pa, long *cap, long need, size_t size, long first)
{
    void **a = pa;
    if (need <= *cap) return 0;
    long n = *cap ? *cap : first;
    while (n < need) n *= 2;
    void *q = realloc(*a, n * size);
    if (!q) return mk_error_set("out of memory");
    *a = q, *cap = n;
    return 0;
}


/* Keep p's fields from dtype to the stage arrays in mid, its bounds (and
 * with ckpt its counts) in S->ints at *off. */
int mk_pl_store_plan(mk_search_t *S, const mk_plan_t *p, int ckpt, unsigned char *mid, long *off)
{
    long need = (ckpt ? 2L : 1L) * p->n_vstages + 1;
    if (mk_pl_grow(&S->ints, &S->capints, S->nints + need, sizeof *S->ints, 16384) < 0) return -1;
    /* the layout loop sets model and cluster as the template does */
    if (memcmp(p, &S->tmpl, MK_CAND_FROM)) return mk_error_set("planner: a candidate's model or cluster changed");
    memcpy(mid, (const char *)p + MK_CAND_FROM, MK_CAND_TO - MK_CAND_FROM);
    *off = S->nints;
    memcpy(S->ints + S->nints, p->bounds, (p->n_vstages + 1) * sizeof(int));
    if (ckpt) memcpy(S->ints + S->nints + p->n_vstages + 1, p->ckpt, p->n_vstages * sizeof(int));
    S->nints += need;
    return 0;
}


void mk_pl_load_plan(const mk_search_t *S, const unsigned char *mid, long off, int ckpt, mk_plan_t *p)
{
    *p = S->tmpl;
    memcpy((char *)p + MK_CAND_FROM, mid, MK_CAND_TO - MK_CAND_FROM);
    memcpy(p->bounds, S->ints + off, (p->n_vstages + 1) * sizeof(int));
    if (ckpt) memcpy(p->ckpt, S->ints + off + p->n_vstages + 1, p->n_vstages * sizeof(int));
}


static int hent_less(const mk_hent_t *a, const mk_hent_t *b)
{
    if (a->lb != b->lb) return a->lb < b->lb;
    return a->index < b->index;
}


int mk_pl_heap_push(mk_search_t *S, double lb, long index, long id, int grp)
{
    if (mk_pl_grow(&S->heap, &S->capheap, S->nheap + 1, sizeof *S->heap, 1024) < 0) return -1;
    mk_hent_t e = {lb, index, id, grp};
    long i = S->nheap++;
    for (; i > 0 && hent_less(&e, &S->heap[(i - 1) / 2]); i = (i - 1) / 2) S->heap[i] = S->heap[(i - 1) / 2];
    S->heap[i] = e;
    return 0;
}


mk_hent_t mk_pl_heap_pop(mk_search_t *S)
{
    mk_hent_t least = S->heap[0], last = S->heap[--S->nheap];
    long i = 0, n = S->nheap;
    for (long c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && hent_less(&S->heap[c + 1], &S->heap[c])) c++;
        if (!hent_less(&S->heap[c], &last)) break;
        S->heap[i] = S->heap[c];
    }
    if (n > 0) S->heap[i] = last;
    return least;
}


/* A settled candidate that fits, into the queue at its bound. */
int mk_pl_push(mk_search_t *S, const mk_plan_t *p, double lb, long index)
{
    if (S->n >= MK_MAX_PLAN_CANDIDATES)
        return mk_error_set("the search has more than %ld candidate plans that fit, the planner's cap; narrow it "
                            "(--baseline, fewer GPUs)", (long)MK_MAX_PLAN_CANDIDATES);
    if (mk_pl_grow(&S->c, &S->cap, S->n + 1, sizeof *S->c, 1024) < 0) return -1;
    mk_cand_t *c = &S->c[S->n];
    if (mk_pl_store_plan(S, p, 1, c->mid, &c->off) < 0) return -1;
    c->has_ckpt = p->has_ckpt, c->refined = 0, c->sib = -1;
    c->lb = lb;
    c->index = index;
    return mk_pl_heap_push(S, lb, index, S->n++, 0);
}


/* Candidate c's plan, as pushed. */
void mk_pl_cand_plan(const mk_search_t *S, const mk_cand_t *c, mk_plan_t *p)
{
    mk_pl_load_plan(S, c->mid, c->off, 1, p);
    p->has_ckpt = c->has_ckpt;
}
