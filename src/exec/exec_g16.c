/* 16-bit gradient buffers (issue 37): Megatron-LM's fp16 run without
 * --accumulate-allreduce-grads-in-fp32 keeps each parameter's main_grad in
 * fp16, adds every backward's gradient to it there and all-reduces (or,
 * with the distributed optimizer, reduce-scatters) it in fp16; the
 * optimizer then widens its own range to fp32 for the update
 * (Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads,
 * DistributedOptimizer's shard copy).  The same here, on a backend that
 * packs 16-bit values (the CPU's), with ZeRO-0/1/2/3.
 *
 * Accumulation: the block's gradients live in store, 2 bytes a parameter
 * (ZeRO-2/3: this rank's pieces, to which each reduced micro-batch piece
 * is added in 16 bits, rounded, as DeepSpeed's fp16 partitions; the layers
 * add to per-layer fp32 buffers, rounded after each backward: exec_fsdp.c).
 * Around each backward pass of layer l (mk_exec_fsdp_begin/end) its range
 * is widened into an fp32 buffer the layers' kernels add to (g->gw: the
 * tensors' gradient pointers), then rounded back to nearest even (fp16
 * past its range to infinity, which the loss scaler finds).  The head at
 * pp 1 adds to the embedding's wte gradient too, so its pass pins layer
 * 0's range as well.
 *
 * Reduction: the DP all-reduce, ZeRO's reduce-scatters, the tied
 * embedding's and the experts' all-reduces move the 16-bit values (half
 * the bytes) with a user MPI sum that rounds after each addition, as a
 * half-precision ring reduction does (mk_exec_grad_buf tells each site
 * where the gradients are, in which type and with which sum).
 *
 * The step: widen makes fp32 gradients of the rank's reduced range (the
 * whole block without ZeRO, as g->grads; ZeRO's pieces, as zero.grads),
 * which the norm, the loss scaler's check, clipping, Adam
 * and --dump-grads read as before; clear frees them and zeroes the store. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/half.h"

#include <stdlib.h>
#include <string.h>

/* The MPI sums (merak/half.h: correctly rounded after each addition). */
static void fp16_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    mk_fp16_add_n(inout, in, (size_t)*len);
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    mk_bf16_add_n(inout, in, (size_t)*len);
}

int mk_exec_g16_init(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    const mk_backend_t *be = g->be;
    int dt = e->o->grad_dtype && be->round16 ? e->o->grad_dtype : 0;
    if (!dt || !e->p16.dt || !be->pack16 || !be->unpack16) return 0;
    int nl = g->n_layers, sharded = e->zero.on >= 2;
    e->g16.work = calloc(nl, sizeof *e->g16.work), e->g16.pins = calloc(nl, sizeof *e->g16.pins);
    if (!g->gw) g->gw = calloc(g->n_tensors, sizeof *g->gw);
    if (!e->g16.work || !e->g16.pins || !g->gw) return mk_error_set("out of memory");
    e->g16.store_n = sharded ? e->zero.ns : g->n_params;
    e->g16.store = (uint16_t *)mk_gpt_alloc(&e->run, g, mk_exec_floats16(e->g16.store_n));
    if (!e->g16.store) return -1;
    if (MPI_Op_create(dt == MK_DTYPE_FP16 ? fp16_sum : bf16_sum, 1, &e->g16.sum) != MPI_SUCCESS)
        return mk_error_set("MPI_Op_create failed");
    e->g16.made = 1;
    e->g16.dt = dt;
    /* the fp32 gradients go: the block (ZeRO-1 read its reduced piece at its start: widen makes that
       now), or ZeRO-2/3's pieces */
    if (sharded) {
        mk_gpt_release(&e->run, g, e->zero.grads, e->zero.ns ? e->zero.ns : 1);
    } else {
        mk_gpt_release(&e->run, g, g->grads, g->n_params ? g->n_params : 1);
        g->grads = NULL;
    }
    e->zero.grads = NULL;
    e->run.mem_peak = e->run.mem_cur; /* nothing transient so far */
    return 0;
}

static void unpin(mk_exec_t *e, int l);

void mk_exec_g16_free(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    for (int l = 0; g && e->g16.work && l < g->n_layers; l++)
        if (e->g16.work[l]) e->g16.pins[l] = 1, unpin(e, l); /* a pass a failed step left pinned */
    mk_exec_g16_clear(e);
    if (g && e->g16.store) mk_gpt_release(&e->run, g, (float *)e->g16.store, mk_exec_floats16(e->g16.store_n));
    if (g && e->g16.dt && e->zero.on < 2) free(g->gw), g->gw = NULL; /* (ZeRO-2/3's: exec_zero.c's) */
    if (e->g16.made) MPI_Op_free(&e->g16.sum);
    free(e->g16.work); free(e->g16.pins);
    memset(&e->g16, 0, sizeof e->g16);
}

/* ---- a layer's gradients around a backward ---- */

/* Point layer l's owned tensors' gradients at w (NULL: unpoint). */
static void point(mk_exec_t *e, int l, float *w)
{
    mk_gpt_t *g = e->g;
    for (int k = g->first[l]; k < g->first[l + 1]; k++)
        if (g->t[k].owned && g->gw) g->gw[k] = w ? w + (g->t[k].off - e->p16.lo[l]) : NULL;
}

static int pin(mk_exec_t *e, int l)
{
    mk_gpt_t *g = e->g;
    if (e->g16.pins[l]++) return 0;
    size_t n = e->p16.n[l];
    float *w = mk_gpt_alloc_raw(&e->run, g, n ? n : 1);
    if (!w) return mk_error_set("out of memory widening layer %d's 16-bit gradients", l);
    if (n) g->be->unpack16(g->be->ctx, w, e->g16.store + e->p16.lo[l], n, e->g16.dt);
    e->g16.work[l] = w;
    point(e, l, w);
    return 0;
}

static void unpin(mk_exec_t *e, int l)
{
    mk_gpt_t *g = e->g;
    if (--e->g16.pins[l] > 0) return;
    size_t n = e->p16.n[l];
    if (n) g->be->pack16(g->be->ctx, e->g16.store + e->p16.lo[l], e->g16.work[l], n, e->g16.dt); /* rounded */
    point(e, l, NULL);
    mk_gpt_release(&e->run, g, e->g16.work[l], n ? n : 1);
    e->g16.work[l] = NULL, e->g16.pins[l] = 0;
}

/* The head adds to the embedding's wte gradient where it reads its wte. */
static int head_adds_to_wte(const mk_exec_t *e, int l)
{
    return l == e->g->n_layers - 1 && l > 0 && mk_gpt_head_weight(e->g) == 0 && e->g->t[0].owned;
}

/* ZeRO-2/3 point the layers at their own per-layer buffers (exec_fsdp.c). */
int mk_exec_g16_begin(mk_exec_t *e, int l, int phase)
{
    if (!e->g16.dt || e->zero.on >= 2 || phase < MK_FSDP_BWD) return 0;
    if (pin(e, l) < 0) return -1;
    return head_adds_to_wte(e, l) ? pin(e, 0) : 0;
}

void mk_exec_g16_end(mk_exec_t *e, int l, int phase)
{
    if (!e->g16.dt || e->zero.on >= 2 || phase < MK_FSDP_BWD) return;
    unpin(e, l);
    if (head_adds_to_wte(e, l)) unpin(e, 0);
}

/* ---- the reductions and the step ---- */

mk_grad_buf_t mk_exec_grad_buf(const mk_exec_t *e, size_t off)
{
    if (e->g16.dt) return (mk_grad_buf_t){e->g16.store + off, MPI_UINT16_T, e->g16.sum, sizeof(uint16_t)};
    float *base = e->zero.on >= 2 ? e->zero.grads : e->g->grads;
    return (mk_grad_buf_t){base + off, MPI_FLOAT, MPI_SUM, sizeof(float)};
}

void mk_exec_g16_add(mk_exec_t *e, size_t off, const uint16_t *x, size_t n)
{
    if (e->g16.dt == MK_DTYPE_FP16) mk_fp16_add_n(e->g16.store + off, x, n);
    else mk_bf16_add_n(e->g16.store + off, x, n);
}

int mk_exec_g16_widen(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (!e->g16.dt || e->g16.main) return 0;
    /* ZeRO-1: the reduced pieces' run at the store's start (mk_exec_zero_scatter) */
    size_t n = e->zero.on ? e->zero.ns : g->n_params;
    if (!(e->g16.main = mk_gpt_alloc_raw(&e->run, g, n ? n : 1))) return -1;
    e->g16.main_n = n;
    if (n) g->be->unpack16(g->be->ctx, e->g16.main, e->g16.store, n, e->g16.dt);
    if (e->zero.on) e->zero.grads = e->g16.main;
    else g->grads = e->g16.main;
    return 0;
}

void mk_exec_g16_clear(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (!e->g16.dt) return;
    if (e->g16.main) mk_gpt_release(&e->run, g, e->g16.main, e->g16.main_n ? e->g16.main_n : 1);
    if (e->zero.grads == e->g16.main) e->zero.grads = NULL;
    if (g->grads == e->g16.main) g->grads = NULL;
    e->g16.main = NULL, e->g16.main_n = 0;
    if (e->g16.store) memset(e->g16.store, 0, e->g16.store_n * sizeof *e->g16.store);
}
