/* The executor: validation, setup of one rank (its chunks, parameters,
 * streams), the training loop, AdamW with global-norm clipping, the
 * synthetic data, and the testing gradient dump. */
#include "config.h"
#include "exec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mk_exec_opts_init(mk_exec_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->dp = o->pp = o->tp = o->vpp = o->mbs = 1;
    o->steps = 10;
    o->schedule = MK_SCHED_1F1B;
    o->recompute.kind = MK_RECOMPUTE_FULL;
    o->lr = 6e-4;
    o->min_lr = -1.0;             /* lr / 10 */
    o->weight_decay = 0.1;
    o->clip_grad = 1.0;
    o->adam_eps = 1e-8;
    o->seed = 1234;
}

static int n_layers(const mk_exec_opts_t *o) { return 2 * o->cfg.num_layers + 2; }

static void uniform_bounds(int n, int nvs, int *bnd)
{
    for (int i = 0; i <= nvs; i++) bnd[i] = (int)((long)i * n / nvs);
}

/* The scheduler's view: checkpointable layers (all but the embedding) per (stage, chunk). */
mk_sched_t *mk_exec_build_sched(const mk_exec_opts_t *o, const int *bnd)
{
    int nvs = o->pp * o->vpp;
    int *layers = calloc(nvs, sizeof *layers);
    for (int s = 0; s < o->pp; s++)
        for (int c = 0; c < o->vpp; c++) {
            int vs = c * o->pp + s;
            layers[s * o->vpp + c] = bnd[vs + 1] - bnd[vs] - (bnd[vs] == 0);
        }
    mk_sched_spec_t spec = {.kind = o->schedule, .pp = o->pp, .m = o->gbs / (o->dp * o->mbs),
                            .vpp = o->vpp, .recompute = o->recompute, .layers = layers,
                            .grad_buckets = o->dp > 1, .tied = o->pp > 1};
    if (spec.recompute.kind == MK_RECOMPUTE_SELECTIVE) spec.recompute.kind = MK_RECOMPUTE_NONE;
    mk_sched_t *s = mk_sched_build(&spec);
    free(layers);
    return s;
}

int mk_exec_validate(const mk_exec_opts_t *o, int world)
{
    const mk_model_config_t *c = &o->cfg;
    if (o->dp * o->pp * o->tp != world)
        return mk_error_set("dp*pp*tp = %d*%d*%d = %d but there are %d ranks", o->dp, o->pp,
                            o->tp, o->dp * o->pp * o->tp, world);
    if (c->family != MK_FAMILY_GPT) return mk_error_set("merak run trains GPT models only");
    if (mk_model_check_tp(c, o->tp) < 0) return -1;
    if (c->ffn % o->tp) return mk_error_set("--tp %d does not divide the MLP width %d", o->tp, c->ffn);
    if (o->pp > c->num_layers)
        return mk_error_set("--pp %d exceeds the model's %d blocks", o->pp, c->num_layers);
    if (o->pp * o->vpp > n_layers(o))
        return mk_error_set("pp*vpp = %d exceeds the model's %d layers", o->pp * o->vpp, n_layers(o));
    if (o->gbs % (o->dp * o->mbs))
        return mk_error_set("--gbs %d is not a multiple of dp*mbs = %d", o->gbs, o->dp * o->mbs);
    if (o->recompute.kind == MK_RECOMPUTE_AUTO)
        return mk_error_set("--recompute auto needs a plan (--plan FILE)");
    int nvs = o->pp * o->vpp, *bnd = malloc((nvs + 1) * sizeof *bnd);
    if (o->bounds) memcpy(bnd, o->bounds, (nvs + 1) * sizeof *bnd);
    else uniform_bounds(n_layers(o), nvs, bnd);
    int bad = bnd[0] != 0 || bnd[nvs] != n_layers(o);
    for (int i = 0; i < nvs; i++) bad |= bnd[i + 1] <= bnd[i];
    mk_sched_t *s = bad ? NULL : mk_exec_build_sched(o, bnd);
    free(bnd);
    if (bad) return mk_error_set("stage bounds must cover the %d layers, each stage non-empty", n_layers(o));
    if (!s) return -1;
    mk_sched_free(s);
    return 0;
}

/* A learnable synthetic stream: a seeded cycle of 16 tokens; each sequence
 * starts at a place drawn from (seed, step, global sequence index), so the
 * global batch of a step is the same whatever the layout. */
static uint32_t hash32(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return (uint32_t)(x ^ (x >> 33));
}

void mk_exec_make_batch(mk_exec_t *e, int step)
{
    const mk_exec_opts_t *o = e->o;
    int T = o->cfg.seq, V = o->cfg.vocab < 256 ? o->cfg.vocab : 256, pat[16];
    for (int i = 0; i < 16; i++) pat[i] = (int)(hash32(o->seed * 31 + i) % (uint32_t)V);
    for (int mb = 0; mb < e->m; mb++)
        for (int b = 0; b < o->mbs; b++) {
            long gseq = ((long)e->comm.dp_rank * e->m + mb) * o->mbs + b;
            int off = (int)(hash32(((uint64_t)o->seed << 40) ^ ((uint64_t)step << 24) ^ (uint64_t)gseq) % 16);
            for (int t = 0; t < T; t++) {
                e->tok[mb][b * T + t] = pat[(off + t) % 16];
                e->tgt[mb][b * T + t] = pat[(off + t + 1) % 16];
            }
        }
}

static double lr_at(const mk_exec_opts_t *o, int step)
{
    double min = o->min_lr < 0 ? o->lr / 10 : o->min_lr;
    if (step < o->warmup) return o->lr * (step + 1) / o->warmup;
    double p = o->steps > o->warmup ? (double)(step - o->warmup) / (o->steps - o->warmup) : 0.0;
    return min + 0.5 * (o->lr - min) * (1.0 + cos(M_PI * p));
}

/* Whether this rank's copy of tensor t counts once in global sums. */
static int counts_once(const mk_exec_t *e, const mk_gpt_tensor_t *t)
{
    return t->owned && !t->tied_copy && e->comm.dp_rank == 0 &&
           (t->split_dim >= 0 || e->comm.tp_rank == 0);
}

int mk_exec_opt_step(mk_exec_t *e, int step, double *loss_out)
{
    const mk_exec_opts_t *o = e->o;
    mk_gpt_t *g = e->g;
    double sums[2] = {0.0, 0.0};
    for (int k = 0; k < g->n_tensors; k++)
        if (counts_once(e, &g->t[k]))
            sums[0] += g->be->sumsq(g->grads + g->t[k].off, (size_t)g->t[k].lrows * g->t[k].lcols);
    int head = g->t[g->first[g->n_layers - 1]].owned;
    if (head && e->comm.tp_rank == 0) sums[1] = e->loss;
    if (mk_comm_allreduce(&e->comm, e->comm.world, sums, 2, MPI_DOUBLE, MPI_SUM) < 0) return -1;
    e->step_loss = sums[1] / ((double)o->gbs * o->cfg.seq);
    if (step == 0 && o->dump_grads && mk_exec_dump_grads(e, o->dump_grads) < 0) return -1;
    double norm = sqrt(sums[0]), scale = o->clip_grad > 0 && norm > o->clip_grad ? o->clip_grad / norm : 1.0;
    float lr = (float)lr_at(o, step);
    float bc1 = 1.0f - powf(0.9f, step + 1), bc2 = 1.0f - powf(0.95f, step + 1);
    for (int k = 0; k < g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        if (!t->owned) continue;
        size_t n = (size_t)t->lrows * t->lcols;
        g->be->adamw(g->params + t->off, g->grads + t->off, g->m + t->off, g->v + t->off, n, lr,
                     0.9f, 0.95f, bc1, bc2, (float)o->adam_eps,
                     t->decay ? (float)o->weight_decay : 0.0f, (float)scale);
    }
    g->be->zero(g->grads, g->n_params * sizeof(float));
    if (loss_out) *loss_out = e->step_loss;
    return 0;
}

/* Testing: full unsharded gradients, summed to rank 0.  Format: "MKGRAD1\n",
 * int32 count, then per tensor int32 name length, name, int64 n, n float32. */
int mk_exec_dump_grads(mk_exec_t *e, const char *path)
{
    mk_gpt_t *g = e->g;
    size_t total = 0, *off = calloc(g->n_tensors, sizeof *off);
    int count = 0;
    for (int k = 0; k < g->n_tensors; k++)
        if (!g->t[k].tied_copy) { off[k] = total; total += mk_gpt_full_size(&g->t[k]); count++; }
    float *full = calloc(total, sizeof *full);
    /* the gradients may live on a device: read them through the backend */
    float *gr = malloc((g->n_params ? g->n_params : 1) * sizeof *gr);
    g->be->copy(gr, g->grads, g->n_params * sizeof *gr);
    for (int k = 0; k < g->n_tensors; k++) {
        const mk_gpt_tensor_t *t = &g->t[k];
        if (!counts_once(e, t)) continue;
        for (size_t i = 0; i < (size_t)t->lrows * t->lcols; i++) {
            long f = mk_gpt_full_index(g, t, i);
            if (f >= 0) full[off[k] + f] = gr[t->off + i];
        }
    }
    free(gr);
    int rc = 0;
    MPI_Reduce(e->comm.rank ? full : MPI_IN_PLACE, full, (int)total, MPI_FLOAT, MPI_SUM, 0, e->comm.world);
    if (e->comm.rank == 0) {
        FILE *f = fopen(path, "wb");
        if (!f) rc = mk_error_set("cannot write %s", path);
        else {
            fwrite("MKGRAD1\n", 1, 8, f);
            fwrite(&count, 4, 1, f);
            for (int k = 0; k < g->n_tensors; k++) {
                if (g->t[k].tied_copy) continue;
                int32_t len = (int32_t)strlen(g->t[k].name);
                int64_t n = (int64_t)mk_gpt_full_size(&g->t[k]);
                fwrite(&len, 4, 1, f); fwrite(g->t[k].name, 1, len, f); fwrite(&n, 8, 1, f);
                fwrite(full + off[k], sizeof(float), n, f);
            }
            if (fclose(f)) rc = mk_error_set("cannot write %s", path);
        }
    }
    free(full);
    free(off);
    return rc;
}
