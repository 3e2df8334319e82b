/* --save / --load: one safetensors file with the full unsharded model and
 * its Adam moments under Hugging Face GPT-2 names and shapes (DESIGN.md),
 * whatever the layout.  Rank 0 moves one tensor at a time: on save it
 * receives the shards of one tensor from their owners (DP rank 0 of the
 * owning stage, every TP rank of a split tensor), assembles it, transposes
 * linear weights from (out, in) to (in, out), and appends it to the
 * streaming writer; on load it reads one tensor and sends every holder
 * (all DP replicas, the head's tied wte copy) its TP slice. */
#include "config.h"
#include "exec_internal.h"
#include "merak/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CKPT_FORMAT "1"
static const char *const kind_prefix[3] = {"", "optim.m.", "optim.v."};

/* Canonical tensors: all but the head's tied copy (which comes last). */
static int n_canon(const mk_gpt_t *g)
{
    int n = g->n_tensors;
    while (n > 0 && g->t[n - 1].tied_copy) n--;
    return n;
}

/* Linear weights are stored (out, in); the file holds (in, out). */
static int transposed(const mk_gpt_tensor_t *t) { return t->rows > 1 && t->layer != 0; }

/* The file's name and shape of tensor k's state `kind`, shared by save and load. */
static void file_entry(const mk_gpt_t *g, int k, int kind, mk_st_tensor_t *d)
{
    const mk_gpt_tensor_t *t = &g->t[k];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s%s", kind_prefix[kind], t->name);
    if (t->rows == 1) d->ndim = 1, d->shape[0] = t->cols;
    else if (transposed(t)) d->ndim = 2, d->shape[0] = t->cols, d->shape[1] = t->real_rows;
    else d->ndim = 2, d->shape[0] = t->real_rows, d->shape[1] = t->cols;
}

/* Our (real_rows, cols) layout <-> the file's. */
static void to_file(const mk_gpt_tensor_t *t, const float *ours, float *file)
{
    size_t R = t->real_rows, C = t->cols;
    if (!transposed(t)) { memcpy(file, ours, R * C * sizeof *file); return; }
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) file[c * R + r] = ours[r * C + c];
}

static void from_file(const mk_gpt_tensor_t *t, const float *file, float *ours)
{
    size_t R = t->real_rows, C = t->cols;
    if (!transposed(t)) { memcpy(ours, file, R * C * sizeof *ours); return; }
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) ours[r * C + c] = file[c * R + r];
}

/* Pipeline stage holding layer l. */
static int stage_of(const mk_exec_t *e, int l)
{
    for (int vs = 0; vs < e->nvs; vs++)
        if (l >= e->bnd[vs] && l < e->bnd[vs + 1]) return vs % e->comm.pp;
    return 0;
}

/* Full index of shard element i for TP rank tr. */
static long full_index_at(const mk_gpt_t *g, const mk_gpt_tensor_t *t, int tr, size_t i)
{
    mk_gpt_t h = *g;
    h.tp_rank = tr;
    return mk_gpt_full_index(&h, t, i);
}

static size_t shard_n(const mk_gpt_tensor_t *t) { return (size_t)t->lrows * t->lcols; }

/* This rank's shard of tensor k's state (0 params, 1 m, 2 v), on the host.
 * ZeRO-1: the moments are spread over the DP group (collective over dpc). */
static void state_get(mk_exec_t *e, int k, int kind, float *host)
{
    mk_gpt_t *g = e->g;
    if (kind && e->zero) { mk_exec_zero_get(e, k, kind, host); return; }
    float *base = kind == 0 ? g->params : kind == 1 ? g->m : g->v;
    g->be->copy(host, base + g->t[k].off, shard_n(&g->t[k]) * sizeof(float));
}

static void state_set(mk_exec_t *e, int k, int kind, const float *host)
{
    mk_gpt_t *g = e->g;
    if (kind && e->zero) { mk_exec_zero_set(e, k, kind, host); return; }
    float *base = kind == 0 ? g->params : kind == 1 ? g->m : g->v;
    g->be->copy(base + g->t[k].off, host, shard_n(&g->t[k]) * sizeof(float));
}

/* Testing: MK_TEST_SAVE_DIE_AFTER=N kills rank 0 after writing N tensors
 * (a save killed midway). */
static void maybe_die(int written)
{
    const char *s = getenv("MK_TEST_SAVE_DIE_AFTER");
    if (s && *s && written >= atoi(s)) {
        fprintf(stderr, "merak run: testing: killed after writing %d tensors\n", written);
        _exit(3);
    }
}

static void config_json(const mk_model_config_t *c, char *buf, size_t n)
{
    snprintf(buf, n, "{\"model_type\":\"gpt2\",\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"n_positions\":%d,"
             "\"vocab_size\":%d,\"n_inner\":%d}", c->num_layers, c->hidden, c->heads, c->seq, c->vocab, c->ffn);
}

int mk_exec_save(mk_exec_t *e, const char *path, int step)
{
    mk_gpt_t *g = e->g;
    int nc = n_canon(g), rank = e->comm.rank, rc = 0;
    mk_st_writer_t *w = NULL;
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    if (rank == 0) {
        mk_st_tensor_t *tab = calloc(3 * nc, sizeof *tab);
        for (int kind = 0; kind < 3; kind++)
            for (int k = 0; k < nc; k++) file_entry(g, k, kind, &tab[kind * nc + k]);
        char cfg[512], st[32], seed[32], pos[32], hz[32];
        config_json(&e->o->plan.model, cfg, sizeof cfg);
        snprintf(st, sizeof st, "%d", step);
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)e->o->seed);
        snprintf(pos, sizeof pos, "%d", step);
        snprintf(hz, sizeof hz, "%d", e->horizon);
        const char *keys[] = {"format", "format_version", "step", "seed", "data_position", "lr_decay_steps", "config"};
        const char *vals[] = {"merak", CKPT_FORMAT, st, seed, pos, hz, cfg};
        w = mk_st_writer_begin(path, tab, 3 * nc, keys, vals, 7);
        free(tab);
        if (!w) rc = -1;
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, cc);
    if (rc) { MPI_Comm_free(&cc); return -1; }
    size_t maxn = 0;
    for (int k = 0; k < nc; k++)
        if (mk_gpt_full_size(&g->t[k]) > maxn) maxn = mk_gpt_full_size(&g->t[k]);
    float *shard = malloc(maxn * sizeof *shard), *full = rank == 0 ? malloc(maxn * sizeof *full) : NULL;
    float *file = rank == 0 ? malloc(maxn * sizeof *file) : NULL;
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < nc; k++) {
            const mk_gpt_tensor_t *t = &g->t[k];
            size_t n = shard_n(t);
            /* holders of a distinct shard send it (DP rank 0 only) */
            if (t->owned && (t->split_dim >= 0 || e->comm.tp_rank == 0)) {
                state_get(e, k, kind, shard);
                if (e->comm.dp_rank == 0 && rank != 0)
                    MPI_Send(shard, (int)n, MPI_FLOAT, 0, k, cc);
            }
            if (rank != 0) continue;
            int s = stage_of(e, t->layer), ntp = t->split_dim >= 0 ? e->comm.tp : 1;
            for (int tr = 0; tr < ntp; tr++) {
                int src = mk_comm_rank_of(&e->comm, 0, s, tr);
                float *b = shard;
                if (src != 0) {
                    b = file;  /* free until to_file */
                    MPI_Recv(b, (int)n, MPI_FLOAT, src, k, cc, MPI_STATUS_IGNORE);
                }
                for (size_t i = 0; i < n; i++) {
                    long f = full_index_at(g, t, tr, i);
                    if (f >= 0) full[f] = b[i];
                }
            }
            to_file(t, full, file);
            if (rc == 0 && mk_st_writer_put(w, file, mk_gpt_full_size(t)) < 0) rc = -1;
            maybe_die(kind * nc + k + 1);
        }
    if (rank == 0) {
        if (rc == 0) rc = mk_st_writer_commit(w);
        else mk_st_writer_abort(w);
    }
    free(shard); free(full); free(file);
    MPI_Bcast(&rc, 1, MPI_INT, 0, cc);
    MPI_Comm_free(&cc);
    if (rc && rank) mk_error_set("saving %s failed (see rank 0)", path);
    return rc;
}

static int meta_int(const mk_st_reader_t *r, const char *path, const char *key, long *v)
{
    const char *s = mk_st_meta(r, key);
    char *end;
    if (!s) return mk_error_set("%s: no '%s' in the checkpoint's metadata", path, key);
    *v = strtol(s, &end, 10);
    if (*end || end == s) return mk_error_set("%s: metadata '%s' is not an integer: '%s'", path, key, s);
    return 0;
}

static const char *shape_str(const mk_st_tensor_t *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Rank 0: the file fits this model; *has_optim: optimizer state present. */
static int check_file(mk_exec_t *e, mk_st_reader_t *r, const char *path, long *meta, int *has_optim)
{
    mk_gpt_t *g = e->g;
    char cfg[512];
    const char *fmt = mk_st_meta(r, "format"), *fc = mk_st_meta(r, "config");
    if (!fmt || strcmp(fmt, "merak") || !mk_st_meta(r, "format_version"))
        return mk_error_set("%s: not a merak checkpoint (no format metadata)", path);
    if (strcmp(mk_st_meta(r, "format_version"), CKPT_FORMAT))
        return mk_error_set("%s: checkpoint format version %s (this merak reads %s)", path,
                            mk_st_meta(r, "format_version"), CKPT_FORMAT);
    config_json(&e->o->plan.model, cfg, sizeof cfg);
    if (!fc || strcmp(fc, cfg))
        return mk_error_set("%s: model mismatch: the checkpoint holds %s, this run's model is %s", path,
                            fc ? fc : "(no config)", cfg);
    const char *keys[] = {"step", "data_position", "lr_decay_steps"};
    for (int i = 0; i < 3; i++)
        if (meta_int(r, path, keys[i], &meta[i]) < 0) return -1;
    int nc = n_canon(g);
    *has_optim = mk_st_find(r, "optim.m.transformer.wte.weight") != NULL;
    for (int kind = 0; kind < (*has_optim ? 3 : 1); kind++)
        for (int k = 0; k < nc; k++) {
            mk_st_tensor_t want;
            file_entry(g, k, kind, &want);
            const mk_st_tensor_t *got = mk_st_find(r, want.name);
            if (!got) return mk_error_set("%s: tensor '%s' is missing", path, want.name);
            int same = got->ndim == want.ndim;
            for (int d = 0; same && d < want.ndim; d++) same = got->shape[d] == want.shape[d];
            if (!same) {
                char a[64], b[64];
                return mk_error_set("%s: tensor '%s' has shape %s, want %s", path, want.name,
                                    shape_str(got, a, sizeof a), shape_str(&want, b, sizeof b));
            }
        }
    return 0;
}

int mk_exec_load(mk_exec_t *e, const char *path, long *meta)
{
    mk_gpt_t *g = e->g;
    int nc = n_canon(g), rank = e->comm.rank, rc = 0, has_optim = 0;
    mk_st_reader_t *r = NULL;
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    if (rank == 0) {
        r = mk_st_open(path);
        rc = r ? check_file(e, r, path, meta, &has_optim) : -1;
    }
    long hdr[4] = {rc, meta[0], meta[1], meta[2]};
    MPI_Bcast(hdr, 4, MPI_LONG, 0, cc);
    MPI_Bcast(&has_optim, 1, MPI_INT, 0, cc);
    if (hdr[0]) {
        mk_st_close(r);
        MPI_Comm_free(&cc);
        if (rank) mk_error_set("cannot load %s (see rank 0)", path);
        return -1;
    }
    for (int i = 0; i < 3; i++) meta[i] = hdr[i + 1];
    size_t maxn = 0;
    for (int k = 0; k < nc; k++)
        if (mk_gpt_full_size(&g->t[k]) > maxn) maxn = mk_gpt_full_size(&g->t[k]);
    size_t maxl = 0;
    for (int k = 0; k < g->n_tensors; k++)
        if (shard_n(&g->t[k]) > maxl) maxl = shard_n(&g->t[k]);
    float *shard = malloc((maxl ? maxl : 1) * sizeof *shard);
    float *full = rank == 0 ? malloc(maxn * sizeof *full) : NULL, *file = rank == 0 ? malloc(maxn * sizeof *file) : NULL;
    int last = (e->comm.pp - 1);
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < nc; k++) {
            const mk_gpt_tensor_t *t = &g->t[k];
            if (rank == 0) {
                mk_st_tensor_t d;
                file_entry(g, k, kind, &d);
                if (kind && !has_optim) memset(full, 0, mk_gpt_full_size(t) * sizeof *full);
                else {
                    if (mk_st_read(r, d.name, file, mk_gpt_full_size(t)) < 0) {
                        /* checked above; a read error now cannot be reported
                           collectively without a hang risk */
                        fprintf(stderr, "merak run: %s\n", mk_error_last());
                        MPI_Abort(e->comm.world, 2);
                    }
                    from_file(t, file, full);
                }
                for (int dst = 0; dst < e->comm.size; dst++) {
                    int s = dst / (e->comm.tp * e->comm.dp);
                    int tied = k == 0 && e->comm.pp > 1 && s == last;
                    if (s != stage_of(e, t->layer) && !tied) continue;
                    int tr = dst % e->comm.tp;
                    for (size_t i = 0; i < shard_n(t); i++) {
                        long f = full_index_at(g, t, tr, i);
                        shard[i] = f >= 0 ? full[f] : 0.0f;
                    }
                    if (dst == 0) state_set(e, k, kind, shard);
                    else MPI_Send(shard, (int)shard_n(t), MPI_FLOAT, dst, k, cc);
                }
                continue;
            }
            /* this rank's copies of canonical tensor k: itself, or the tied copy */
            for (int j = 0; j < g->n_tensors; j++)
                if (g->t[j].owned && g->t[j].id == t->id && (j == k || g->t[j].tied_copy)) {
                    MPI_Recv(shard, (int)shard_n(&g->t[j]), MPI_FLOAT, 0, k, cc, MPI_STATUS_IGNORE);
                    state_set(e, j, kind, shard);
                }
        }
    free(shard); free(full); free(file);
    mk_st_close(r);
    MPI_Comm_free(&cc);
    return 0;
}
