/* 16-bit weights with fp32 masters (issue 37; Megatron-LM's
 * Float16OptimizerWithFloat16Params, and its distributed optimizer with
 * ZeRO): in a bf16/fp16 run on a backend that packs 16-bit values (the
 * CPU's pack16/unpack16) the layers read 16-bit parameters, and the fp32
 * parameters the optimizer updates are its masters.
 *
 * Masters: the full fp32 block without ZeRO (g->params); with ZeRO this
 * rank's pieces (e->zero.params: ZeRO-1 and -2 shard them as ZeRO-3 does,
 * mk_exec_zero_params_sharded), so a rank holds 2 bytes a parameter of
 * 16-bit weights, 4 of gradients and 12/d of masters and moments, Megatron's
 * distributed optimizer's count (the simulator's, memory.c).
 *
 * Weights: store, the 16-bit copy of the block (none with ZeRO-3, whose
 * gather carries 16-bit pieces and holds them while the layer is pinned:
 * the unit functions below).  Around a layer's pass (mk_exec_fsdp_begin/
 * end, the hooks of ZeRO-3's gathers) the layer's tensors get pointers
 * (g->pw): its vectors and the embedding's tables widened into an fp32
 * buffer, its matrices into an address range that holds no memory
 * (PROT_NONE), which the backend's weights16 maps to the store's bits, so
 * the 16-bit GEMMs read them as they are and anything else would fault.
 * The head at pp 1 views the embedding's wte the same way (borrow).  After
 * each update (and a load) the masters are rounded into the store
 * (mk_exec_p16_refresh): with ZeRO-1/2 each rank rounds its pieces and the
 * sharding group all-gathers them in 16 bits, half the bytes of the fp32
 * gather it replaces.
 *
 * A tensor marked fp32 (mk_gpt_tensor_t.fp32: DeepSeek-V3's score bias,
 * an fp32 buffer in Megatron-Core, moved 1e-3 at a time) points at its
 * master (NULL where ZeRO shards the masters); the router reads the
 * biases' whole copy (gpt.h moe_bias, exec_ep.c), not the tensor. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/trace.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int mk_exec_store16(const mk_backend_t *be) { return !be->to_host; }

int mk_exec_zero_params_sharded(const mk_exec_t *e) { return e->zero.on == 3 || (e->zero.on && e->p16.dt); }

size_t mk_exec_floats16(size_t n) { return (n + 1) / 2 ? (n + 1) / 2 : 1; }

/* Layer l's range [lo[l], lo[l] + n[l]) of the block: its owned tensors. */
static void layer_ranges(mk_exec_t *e)
{
    const mk_gpt_t *g = e->g;
    for (int l = 0; l < g->n_layers; l++) {
        size_t lo = (size_t)-1, hi = 0;
        for (int k = g->first[l]; k < g->first[l + 1]; k++) {
            const mk_gpt_tensor_t *t = &g->t[k];
            if (!t->owned) continue;
            size_t b = t->off + (size_t)t->lrows * t->lcols;
            if (t->off < lo) lo = t->off;
            if (b > hi) hi = b;
        }
        e->p16.lo[l] = hi ? lo : 0, e->p16.n[l] = hi ? hi - lo : 0;
    }
}

int mk_exec_p16_init(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (!e->p16.dt) return 0;
    int nl = g->n_layers;
    e->p16.lo = calloc(nl, sizeof *e->p16.lo), e->p16.n = calloc(nl, sizeof *e->p16.n);
    e->p16.work = calloc(nl, sizeof *e->p16.work), e->p16.pins = calloc(nl, sizeof *e->p16.pins);
    e->p16.virt = calloc(nl, sizeof *e->p16.virt);
    if (!e->p16.lo || !e->p16.n || !e->p16.work || !e->p16.pins || !e->p16.virt) return mk_error_set("out of memory");
    layer_ranges(e);
    if (e->zero.on == 3) return 0; /* ZeRO-3 gathers 16-bit pieces into its own working buffers */
    if (!g->pw && !(g->pw = calloc(g->n_tensors, sizeof *g->pw))) return mk_error_set("out of memory");
    e->p16.store = (uint16_t *)mk_gpt_alloc(&e->run, g, mk_exec_floats16(g->n_params));
    return e->p16.store ? 0 : -1;
}

static void unpin(mk_exec_t *e, int l);
static void unborrow(mk_exec_t *e);

void mk_exec_p16_free(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    for (int l = 0; g && e->p16.work && l < g->n_layers; l++)
        if (e->p16.work[l]) e->p16.pins[l] = 1, unpin(e, l); /* a pass a failed step left pinned */
    if (g && e->p16.wte_virt) e->p16.wte_pins = 1, unborrow(e);
    if (g && e->p16.store) mk_gpt_release(&e->run, g, (float *)e->p16.store, mk_exec_floats16(g->n_params));
    if (g) free(g->pw), g->pw = NULL; /* (ZeRO-2/3: freed already by mk_exec_zero_free) */
    free(e->p16.lo); free(e->p16.n); free(e->p16.work); free(e->p16.pins); free(e->p16.virt);
    memset(&e->p16, 0, sizeof e->p16);
}

size_t mk_exec_state_bytes(const mk_exec_t *e)
{
    const mk_gpt_t *g = e->g;
    size_t n = g->n_params ? g->n_params : 1, s = e->zero.ns ? e->zero.ns : 1, b = 0;
    const float *full[4] = {g->params, g->grads, g->m, g->v};
    const float *mine[4] = {e->zero.params, e->zero.grads == g->grads ? NULL : e->zero.grads, e->zero.m, e->zero.v};
    for (int i = 0; i < 4; i++) b += (full[i] ? n : 0) + (mine[i] ? s : 0);
    b += e->p16.store ? mk_exec_floats16(g->n_params) : 0;
    b += e->g16.store ? mk_exec_floats16(e->g16.store_n) : 0; /* 16-bit gradients (exec_g16.c) */
    return b * sizeof(float);
}

/* ---- the store ---- */

/* ZeRO-1/2: round this rank's pieces into the store, then all-gather
 * every unit's pieces over its group (the sharding group, or the experts'
 * holders: exec_zero.c expert_units), in 16 bits. */
static int refresh_sharded(mk_exec_t *e)
{
    const mk_gpt_t *g = e->g;
    int n = e->zero.n_units, rc = 0;
    MPI_Request *r = malloc((n ? n : 1) * sizeof *r);
    if (!r) return mk_error_set("out of memory");
    double t = e->trace.on ? mk_exec_now(e) : 0.0;
    for (int j = 0; j < n; j++) {
        const mk_zunit_t *u = &e->zero.u[j];
        size_t c = (size_t)u->cnt[u->gi];
        if (c) g->be->pack16(g->be->ctx, e->p16.store + u->off + u->dsp[u->gi], e->zero.params + u->soff, c,
                             e->p16.dt);
        r[j] = MPI_REQUEST_NULL;
        if (u->G > 1 && MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_UINT16_T, e->p16.store + u->off, u->cnt, u->dsp,
                                        MPI_UINT16_T, u->c, &r[j]) != MPI_SUCCESS)
            rc = mk_error_set("MPI_Iallgatherv failed"), r[j] = MPI_REQUEST_NULL;
    }
    if (mk_comm_waitall_for(&e->comm, n, r, "the 16-bit weights' all-gather", -1) < 0) rc = -1;
    mk_exec_trace_ev(e, MK_TRACE_DP, "AG.dp", t, -1, 0, -1);
    free(r);
    return rc;
}

int mk_exec_p16_refresh(mk_exec_t *e)
{
    const mk_gpt_t *g = e->g;
    if (!e->p16.dt || e->zero.on == 3) return 0;
    if (e->zero.on) return refresh_sharded(e);
    g->be->pack16(g->be->ctx, e->p16.store, g->params, g->n_params, e->p16.dt);
    return 0;
}

/* ---- a layer's working weights ---- */

/* Whether a pass of layer l reads its weights: B_W does not, nor does
 * the embedding's backward, nor a recompute of it (none is made). */
int mk_exec_reads_params(const mk_exec_t *e, int l, int phase)
{
    if (phase == MK_FSDP_FWD) return 1;
    return phase != MK_BWD_W && mk_gpt_layer_kind(e->g, l) != MK_GPT_EMBED;
}

/* Whether tensor k is widened when its layer is pinned: the embedding's
 * tables (the lookup reads their rows) and every vector (norms, biases,
 * Qwen2-MoE's 1 x C gate); the other matrices are read by the GEMMs only,
 * through the backend's 16-bit view (weights16) of an address range that
 * holds no memory. */
static int widened(const mk_exec_t *e, int k)
{
    const mk_gpt_tensor_t *t = &e->g->t[k];
    return !e->g->be->weights16 || t->rows == 1 || mk_gpt_layer_kind(e->g, t->layer) == MK_GPT_EMBED;
}

/* A span of layer l's tensors: its owned ones at [lo, lo + n) of the block
 * (all of them: all), whose 16-bit values are at h (h[0] holds element
 * lo): a pinned layer's (the store) or a gathered ZeRO-3 unit's (its
 * 16-bit gather).  One walk for both (span_walk). */
typedef struct {
    int layer, all;
    size_t lo, n;
    const uint16_t *h;
} span_t;

static span_t layer_span(const mk_exec_t *e, int l)
{
    return (span_t){.layer = l, .all = 1, .lo = e->p16.lo[l], .n = e->p16.n[l],
                    .h = e->p16.store ? e->p16.store + e->p16.lo[l] : NULL};
}

static span_t unit_span(const mk_zunit_t *u)
{
    return (span_t){.layer = u->layer, .lo = u->off, .n = u->n, .h = u->hw};
}

static int in_span(const mk_exec_t *e, const span_t *s, int k)
{
    const mk_gpt_tensor_t *t = &e->g->t[k];
    return t->owned && (s->all || (t->off >= s->lo && t->off < s->lo + s->n));
}

/* The span's widened floats. */
static size_t span_widened(const mk_exec_t *e, const span_t *s)
{
    size_t n = 0;
    for (int k = e->g->first[s->layer]; k < e->g->first[s->layer + 1]; k++)
        if (in_span(e, s, k) && !e->g->t[k].fp32 && widened(e, k)) n += (size_t)e->g->t[k].lrows * e->g->t[k].lcols;
    return n;
}

enum { SPAN_UNPACK = 1, SPAN_POINT = 2, SPAN_CLEAR = 4 };

/* The span's tensors: the widened ones packed in w (SPAN_UNPACK: their
 * 16-bit values unpacked there), the others at their place in v, the
 * span's address space, an fp32 one at its master; SPAN_POINT points the
 * layer's tensors (g->pw) there, SPAN_CLEAR unpoints them. */
static void span_walk(mk_exec_t *e, const span_t *s, float *w, float *v, int how)
{
    mk_gpt_t *g = e->g;
    size_t at = 0;
    for (int k = g->first[s->layer]; k < g->first[s->layer + 1]; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        size_t tn = (size_t)t->lrows * t->lcols;
        if (!in_span(e, s, k)) continue;
        int wide = !t->fp32 && widened(e, k);
        if (how & SPAN_CLEAR) g->pw[k] = NULL;
        float *master = g->params ? g->params + t->off : NULL; /* sharded masters: none here */
        if (how & SPAN_POINT) g->pw[k] = t->fp32 ? master : wide ? w + at : v + (t->off - s->lo);
        if (wide && (how & SPAN_UNPACK) && tn)
            g->be->unpack16(g->be->ctx, w + at, s->h + (t->off - s->lo), tn, e->p16.dt);
        if (wide) at += tn;
    }
}

/* An address range of n floats that holds no memory (PROT_NONE: a read
 * by anything but a 16-bit GEMM faults at once), or NULL. */
static float *reserve(size_t n)
{
    void *v = mmap(NULL, n * sizeof(float), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return v == MAP_FAILED ? NULL : v;
}

static int pin(mk_exec_t *e, int l)
{
    mk_gpt_t *g = e->g;
    if (e->p16.pins[l]++) return 0;
    span_t sp = layer_span(e, l);
    size_t n = e->p16.n[l], nw = span_widened(e, &sp);
    float *w = mk_gpt_alloc_raw(&e->run, g, nw ? nw : 1), *v = nw < n ? reserve(n) : NULL;
    if (!w || (nw < n && !v)) {
        mk_gpt_release(&e->run, g, w, nw ? nw : 1);
        return mk_error_set("out of memory widening layer %d's 16-bit weights", l);
    }
    if (v) g->be->weights16(g->be->ctx, v, e->p16.store + e->p16.lo[l], n); /* the GEMMs read them there */
    e->p16.work[l] = w, e->p16.virt[l] = v;
    span_walk(e, &sp, w, v, SPAN_UNPACK | SPAN_POINT);
    return 0;
}

static void unpin(mk_exec_t *e, int l)
{
    mk_gpt_t *g = e->g;
    if (--e->p16.pins[l] > 0) return;
    span_t sp = layer_span(e, l);
    span_walk(e, &sp, NULL, NULL, SPAN_CLEAR);
    if (l == 0 && e->p16.wte_virt) g->pw[0] = e->p16.wte_virt; /* the head's borrowed view (borrow) */
    if (e->p16.virt[l]) {
        g->be->weights16(g->be->ctx, e->p16.virt[l], NULL, 0);
        munmap(e->p16.virt[l], e->p16.n[l] * sizeof(float));
    }
    size_t nw = span_widened(e, &sp);
    mk_gpt_release(&e->run, g, e->p16.work[l], nw ? nw : 1);
    e->p16.work[l] = e->p16.virt[l] = NULL, e->p16.pins[l] = 0;
}

/* ---- ZeRO-3: a gathered unit's weights ---- */

int mk_exec_p16_unit_begin(mk_exec_t *e, mk_zunit_t *u)
{
    mk_gpt_t *g = e->g;
    size_t c = (size_t)u->cnt[u->gi];
    span_t sp = unit_span(u);
    u->wn = span_widened(e, &sp);
    u->hs = mk_gpt_alloc_raw(&e->run, g, mk_exec_floats16(c));
    u->hw = mk_gpt_alloc_raw(&e->run, g, mk_exec_floats16(u->n));
    u->work = mk_gpt_alloc_raw(&e->run, g, u->wn ? u->wn : 1);
    u->virt = u->wn < u->n ? reserve(u->n) : NULL;
    if (!u->hs || !u->hw || !u->work || (u->wn < u->n && !u->virt))
        return mk_error_set("out of memory gathering layer %d's 16-bit weights", u->layer);
    if (c) g->be->pack16(g->be->ctx, u->hs, e->zero.params + u->soff, c, e->p16.dt);
    return 0;
}

void mk_exec_p16_unit_ready(mk_exec_t *e, mk_zunit_t *u)
{
    mk_gpt_t *g = e->g;
    mk_gpt_release(&e->run, g, u->hs, mk_exec_floats16((size_t)u->cnt[u->gi]));
    u->hs = NULL;
    span_t sp = unit_span(u);
    span_walk(e, &sp, u->work, NULL, SPAN_UNPACK);
    if (u->virt) g->be->weights16(g->be->ctx, u->virt, u->hw, u->n); /* the GEMMs read the matrices there */
}

void mk_exec_p16_unit_point(mk_exec_t *e, const mk_zunit_t *u, int on)
{
    span_t sp = unit_span(u);
    span_walk(e, &sp, u->work, u->virt, on ? SPAN_POINT : SPAN_CLEAR);
}

void mk_exec_p16_unit_end(mk_exec_t *e, mk_zunit_t *u)
{
    mk_gpt_t *g = e->g;
    if (u->virt) {
        g->be->weights16(g->be->ctx, u->virt, NULL, 0);
        munmap(u->virt, u->n * sizeof(float));
    }
    mk_gpt_release(&e->run, g, u->work, u->wn ? u->wn : 1);
    mk_gpt_release(&e->run, g, u->hw, mk_exec_floats16(u->n));
    mk_gpt_release(&e->run, g, u->hs, mk_exec_floats16((size_t)u->cnt[u->gi]));
    u->work = u->virt = NULL, u->hw = u->hs = NULL;
}

/* The head at pp 1 reads the embedding's wte (tensor 0), as a GEMM
 * operand only: a view of its own (wte_virt) where no pass of the
 * embedding holds the table widened, so the head never widens it. */
static int borrows_wte(const mk_exec_t *e, int l)
{
    return l == e->g->n_layers - 1 && l > 0 && mk_gpt_head_weight(e->g) == 0 && e->g->t[0].owned;
}

static size_t wte_n(const mk_gpt_t *g) { return (size_t)g->t[0].lrows * g->t[0].lcols; }

static int borrow(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (!g->be->weights16) return pin(e, 0);
    if (e->p16.wte_pins++) return 0;
    if (!(e->p16.wte_virt = reserve(wte_n(g)))) return mk_error_set("out of memory viewing the 16-bit wte");
    g->be->weights16(g->be->ctx, e->p16.wte_virt, e->p16.store + g->t[0].off, wte_n(g));
    if (!e->p16.pins[0]) g->pw[0] = e->p16.wte_virt; /* else the embedding's widened table serves */
    return 0;
}

static void unborrow(mk_exec_t *e)
{
    mk_gpt_t *g = e->g;
    if (!g->be->weights16) { unpin(e, 0); return; }
    if (--e->p16.wte_pins > 0) return;
    if (g->pw[0] == e->p16.wte_virt) g->pw[0] = NULL;
    g->be->weights16(g->be->ctx, e->p16.wte_virt, NULL, 0);
    munmap(e->p16.wte_virt, wte_n(g) * sizeof(float));
    e->p16.wte_virt = NULL, e->p16.wte_pins = 0;
}

int mk_exec_p16_begin(mk_exec_t *e, int l, int phase)
{
    if (!e->p16.dt || e->zero.on == 3 || !mk_exec_reads_params(e, l, phase)) return 0;
    if (pin(e, l) < 0) return -1;
    return borrows_wte(e, l) ? borrow(e) : 0;
}

void mk_exec_p16_end(mk_exec_t *e, int l, int phase)
{
    if (!e->p16.dt || e->zero.on == 3 || !mk_exec_reads_params(e, l, phase)) return;
    unpin(e, l);
    if (borrows_wte(e, l)) unborrow(e);
}
