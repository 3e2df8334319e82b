/* --save / --load: one safetensors file with the full unsharded model and
 * its Adam moments under Hugging Face GPT-2 or LlamaForCausalLM names and
 * shapes (src/exec/README.md "Checkpoints"), whatever the layout.  Rank 0 moves one tensor at a time: on save it
 * receives the shards of one tensor from their owners (DP rank 0 of the
 * owning stage, every TP rank of a split tensor), assembles it, transposes
 * linear weights from (out, in) to (in, out), and appends it to the
 * streaming writer; on load it reads one tensor and sends every holder
 * (all DP replicas, the head's tied wte copy; an untied head has its own
 * lm_head) its TP slice.
 *
 * A padded vocabulary (Vp rows, a multiple of 128*tp) is stored with its V
 * real rows, the Hugging Face shape (V, C): padding rows are dropped on save
 * and set to zero (weights and moments) on load, so any layout writes the
 * same bytes.  Metadata integers are checked against their ranges on load;
 * each tensor's crc32 (safetensors.h) is verified as it is read, and rank 0
 * tells every rank after each tensor whether to go on, so a damaged file
 * stops all ranks together with one message. */
#include "config.h"
#include "exec/exec_internal.h"
#include "merak/fileio.h"
#include "merak/ckpt.h"
#include "merak/safetensors.h"
#include "merak/jsonio.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static const char *const kind_prefix[3] = {"", "optim.m.", "optim.v."};

/* Canonical tensors: all but the head's tied copy (which comes last). */
static int n_canon(const mk_gpt_t *g)
{
    int n = g->n_tensors;
    while (n > 0 && g->t[n - 1].tied_copy) n--;
    return n;
}

/* Linear weights are stored (out, in); a GPT-2 file holds its Conv1D
 * blocks (in, out); Llama's nn.Linear weights are (out, in) as ours. */
static int transposed(const mk_gpt_tensor_t *t)
{
    return t->rows > 1 && t->layer != 0 && !strncmp(t->name, "transformer.", 12);
}

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
    for (int vs = 0; vs < e->pipe.n_vstages; vs++)
        if (l >= e->pipe.bounds[vs] && l < e->pipe.bounds[vs + 1])
            return mk_sched_vstage_stage(mk_sched_traits(e->o->ctx->plan.schedule)->vshape, e->comm.pp, vs);
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

/* Host staging for one tensor at a time.  Every buffer is sized from this
 * one bound, the larger of any tensor's full (real rows) and local shard
 * size: a padded vocabulary makes wte's shard (Vp/tp, C) larger than its
 * full (V, C) at tp 1, and the buffers swap roles (a received shard lands
 * in `file`).  shard on every rank; full and file on rank 0 only. */
typedef struct { float *shard, *full, *file; } ckpt_bufs_t;

static int bufs_alloc(const mk_gpt_t *g, int rank, ckpt_bufs_t *b)
{
    size_t n = 1;
    for (int k = 0; k < g->n_tensors; k++) {
        size_t f = mk_gpt_full_size(&g->t[k]), s = shard_n(&g->t[k]);
        if (f > n) n = f;
        if (s > n) n = s;
    }
    b->shard = malloc(n * sizeof *b->shard);
    b->full = rank == 0 ? malloc(n * sizeof *b->full) : NULL;
    b->file = rank == 0 ? malloc(n * sizeof *b->file) : NULL;
    if (b->shard && (rank || (b->full && b->file))) return 0;
    free(b->shard); free(b->full); free(b->file);
    return mk_error_set("out of memory for the checkpoint's buffers (%zu floats)", n);
}

static void bufs_free(ckpt_bufs_t *b) { free(b->shard); free(b->full); free(b->file); }

/* This rank's shard of tensor k's state (0 params, 1 m, 2 v), on the host.
 * ZeRO: the moments (ZeRO-3: the parameters too) are spread over the
 * sharding group (collective over it). */
static int sharded(const mk_exec_t *e, int kind) { return e->zero.on && (kind || e->zero.on == 3); }

static int state_get(mk_exec_t *e, int k, int kind, float *host)
{
    mk_gpt_t *g = e->g;
    if (sharded(e, kind)) return mk_exec_zero_get(e, k, kind, host);
    float *base = kind == 0 ? g->params : kind == 1 ? g->m : g->v;
    g->be->copy(g->be->ctx, host, base + g->t[k].off, shard_n(&g->t[k]) * sizeof(float));
    return 0;
}

/* Blocking point-to-point of the checkpoint's tensors, watched (comm.h). */
static int ck_send(mk_exec_t *e, const float *buf, size_t n, int dst, int tag, MPI_Comm cc)
{
    MPI_Request r;
    MPI_Isend(buf, (int)n, MPI_FLOAT, dst, tag, cc, &r);
    return mk_comm_wait_for(&e->comm, &r, "the peer to take a checkpointed tensor", dst);
}

static int ck_recv(mk_exec_t *e, float *buf, size_t n, int src, int tag, MPI_Comm cc)
{
    MPI_Request r;
    MPI_Irecv(buf, (int)n, MPI_FLOAT, src, tag, cc, &r);
    return mk_comm_wait_for(&e->comm, &r, "a checkpointed tensor", src);
}


static void state_set(mk_exec_t *e, int k, int kind, const float *host)
{
    mk_gpt_t *g = e->g;
    if (sharded(e, kind)) { mk_exec_zero_set(e, k, kind, host); return; }
    float *base = kind == 0 ? g->params : kind == 1 ? g->m : g->v;
    g->be->copy(g->be->ctx, base + g->t[k].off, host, shard_n(&g->t[k]) * sizeof(float));
}

/* JSON text for v as a person writes it: whole numbers as integers
 * (500000, not 5e+05), else the shortest "%g" that reads back as v (1e-05,
 * not 1.0000000000000001e-05). */
static void shortest_real(double v, char *buf, size_t n)
{
    if (v > -1e15 && v < 1e15 && (double)(long long)v == v) {
        snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* MixtralConfig's expert fields, then (only when used) what Mixtral has no
 * field for: the shared expert's width (Qwen2-MoE's name), norm_topk_prob
 * false (softmax then top-k, not renormalised: Qwen2-MoE / DeepSeek), the
 * dense MLP width, the leading dense blocks and the MoE frequency
 * (DeepSeek-V2's first_k_dense_replace, moe_layer_freq). */
static void moe_config_json(const mk_gpt_t *g, char *buf, size_t n)
{
    const mk_model_config_t *c = &g->cfg;
    int len = snprintf(buf, n, ",\"num_local_experts\":%d,\"num_experts_per_tok\":%d", g->E, g->topk);
    if (g->Fs) len += snprintf(buf + len, n - len, ",\"shared_expert_intermediate_size\":%d", g->Fs);
    if (c->moe_pre_softmax) len += snprintf(buf + len, n - len, ",\"norm_topk_prob\":false");
    if (c->moe_first_dense > 0 || c->moe_layer_freq > 1)
        len += snprintf(buf + len, n - len, ",\"dense_intermediate_size\":%d,\"first_k_dense_replace\":%d,"
                        "\"moe_layer_freq\":%d", c->ffn, c->moe_first_dense, c->moe_layer_freq);
    snprintf(buf + len, n - len, "}");
}

/* Hugging Face's config.json fields (GPT2Config, LlamaConfig), after the
 * blocks the executor built: a GPT preset given the Llama flags is a Llama. */
static void config_json(const mk_gpt_t *g, char *buf, size_t n)
{
    const mk_model_config_t *c = &g->cfg;
    if (g->llama) {
        char eps[32], theta[32];
        shortest_real(c->norm_eps, eps, sizeof eps);
        shortest_real(c->rope_theta, theta, sizeof theta);
        int moe = g->E > 0, len;  /* MixtralConfig: intermediate_size is the experts' width */
        len = snprintf(buf, n, "{\"model_type\":\"%s\",\"num_hidden_layers\":%d,\"hidden_size\":%d,"
                       "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"intermediate_size\":%d,"
                       "\"vocab_size\":%d,\"max_position_embeddings\":%d,\"rms_norm_eps\":%s,"
                       "\"rope_theta\":%s,\"tie_word_embeddings\":%s",
                       moe ? "mixtral" : c->window ? "mistral" : "llama", c->num_layers,
                       c->hidden, c->heads, c->kv_heads, moe ? g->Fe : c->ffn, c->vocab, c->seq, eps, theta,
                       c->untied ? "false" : "true");
        if (c->kv_channels) len += snprintf(buf + len, n - len, ",\"head_dim\":%d", c->kv_channels);
        /* MistralConfig's (and MixtralConfig's) sliding_window; LlamaConfig has none */
        if (c->window) len += snprintf(buf + len, n - len, ",\"sliding_window\":%d", c->window);
        if (c->rope_factor > 0) { /* Llama 3.1's, as its config.json has it */
            char f[32], lo[32], hi[32];
            shortest_real(c->rope_factor, f, sizeof f), shortest_real(c->rope_low_freq, lo, sizeof lo);
            shortest_real(c->rope_high_freq, hi, sizeof hi);
            len += snprintf(buf + len, n - len, ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":%s,"
                            "\"low_freq_factor\":%s,\"high_freq_factor\":%s,\"original_max_position_embeddings\":%d}",
                            f, lo, hi, c->rope_orig_max_pos);
        }
        if (moe) moe_config_json(g, buf + len, n - len);
        else snprintf(buf + len, n - len, "}");
        return;
    }
    snprintf(buf, n, "{\"model_type\":\"gpt2\",\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"n_positions\":%d,"
             "\"vocab_size\":%d,\"n_inner\":%d}", c->num_layers, c->hidden, c->heads, c->seq, c->vocab, c->ffn);
}

/* Rank 0: DIR/config.json for --save-hf (the model's Hugging Face fields,
 * written whole or not at all). */
static int write_hf_config(mk_exec_t *e, const char *dir)
{
    char path[4352], cfg[1024];
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) return mk_error_set("--save-hf: cannot create '%s': %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/config.json", dir);
    config_json(e->g, cfg, sizeof cfg);
    mk_file_out_t o;
    FILE *f = mk_file_begin(&o, path, "Hugging Face config");
    if (!f) return -1;
    if (fprintf(f, "%s\n", cfg) < 0) return mk_file_abort(&o), mk_error_set("cannot write %s", path);
    return mk_file_commit(&o);
}

/* Rank 0: --save-hf's DIR/model.safetensors header: the weights only,
 * Hugging Face's metadata. */
static mk_st_writer_t *begin_hf(mk_exec_t *e, const char *dir)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (write_hf_config(e, dir) < 0) return NULL;
    int nc = n_canon(e->g);
    mk_st_tensor_t *tab = calloc(nc > 0 ? (size_t)nc : 1, sizeof *tab);
    if (!tab) return mk_error_set("out of memory"), NULL;
    for (int k = 0; k < nc; k++) file_entry(e->g, k, 0, &tab[k]);
    const char *keys[] = {"format"}, *vals[] = {"pt"};
    mk_st_writer_t *w = mk_st_writer_begin(path, tab, nc, keys, vals, 1);
    free(tab);
    return w;
}

/* Rank 0: one header of the file at path (metadata and tensor table). */
static mk_st_writer_t *begin_file(mk_exec_t *e, const char *path, int64_t step)
{
    mk_gpt_t *g = e->g;
    int nc = n_canon(g);
    mk_st_tensor_t *tab = calloc(3 * nc, sizeof *tab);
    if (!tab) return mk_error_set("out of memory"), NULL;
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < nc; k++) file_entry(g, k, kind, &tab[kind * nc + k]);
    char cfg[1024], num[MK_CKPT_N_META][32];
    config_json(g, cfg, sizeof cfg);
    uint64_t v[MK_CKPT_N_META] = {(uint64_t)step, (uint64_t)step, (uint64_t)e->horizon, e->o->seed};
    const char *keys[MK_CKPT_N_META + 3] = {"format", "format_version", "config"};
    const char *vals[MK_CKPT_N_META + 3] = {"merak", MK_CKPT_FORMAT, cfg};
    for (int i = 0; i < MK_CKPT_N_META; i++) {
        snprintf(num[i], sizeof num[i], "%llu", (unsigned long long)v[i]);
        keys[3 + i] = mk_ckpt_meta_key(i), vals[3 + i] = num[i];
    }
    mk_st_writer_t *w = mk_st_writer_begin(path, tab, 3 * nc, keys, vals, MK_CKPT_N_META + 3);
    free(tab);
    return w;
}

/* The DP rank whose copy of t is saved: 0, or for an expert's tensor the
 * first replica holding it (its EP rank). */
static int saved_dp(const mk_exec_t *e, const mk_gpt_tensor_t *t)
{
    return t->expert >= 0 ? t->expert / (e->g->E / e->ep.n) : 0;
}

/* Whether global rank dst holds t's expert (every rank holds the others). */
static int holds_expert(const mk_exec_t *e, const mk_gpt_tensor_t *t, int dst)
{
    int d = (dst / e->comm.tp) % e->comm.dp;
    return t->expert < 0 || t->expert / (e->g->E / e->ep.n) == d % e->ep.n;
}

/* Rank 0 assembles tensor k's state `kind` in b->full (real rows only:
 * padding rows of a padded vocabulary are dropped) from its owners. */
static int gather_tensor(mk_exec_t *e, ckpt_bufs_t *b, int k, int kind, MPI_Comm cc)
{
    mk_gpt_t *g = e->g;
    const mk_gpt_tensor_t *t = &g->t[k];
    size_t n = shard_n(t);
    /* holders of a distinct shard send it (DP rank 0 only) */
    if (t->owned && (t->split_dim >= 0 || e->comm.tp_rank == 0)) {
        if (state_get(e, k, kind, b->shard) < 0) return -1;
        if (e->comm.dp_rank == saved_dp(e, t) && e->comm.rank != 0 && ck_send(e, b->shard, n, 0, k, cc) < 0)
            return -1;
    }
    if (e->comm.rank != 0) return 0;
    int s = stage_of(e, t->layer), ntp = t->split_dim >= 0 ? e->comm.tp : 1;
    for (int tr = 0; tr < ntp; tr++) {
        int src = mk_comm_rank_of(&e->comm, saved_dp(e, t), s, tr);
        float *in = b->shard;
        if (src != 0) {
            in = b->file;  /* free until to_file */
            if (ck_recv(e, in, n, src, k, cc) < 0) return -1;
        }
        for (size_t i = 0; i < n; i++) {
            long f = full_index_at(g, t, tr, i);
            if (f >= 0) b->full[f] = in[i];
        }
    }
    return 0;
}

/* step < 0: --save-hf's directory (weights only), else the checkpoint file. */
int mk_exec_save(mk_exec_t *e, const char *path, int64_t step)
{
    mk_gpt_t *g = e->g;
    int nc = n_canon(g), rank = e->comm.rank, rc = 0, kinds = step < 0 ? 1 : 3;
    mk_st_writer_t *w = NULL;
    ckpt_bufs_t b = {NULL, NULL, NULL};
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    int mine = 0;  /* this rank's setup; every rank learns of any failure */
    if (rank == 0 && !(w = step < 0 ? begin_hf(e, path) : begin_file(e, path, step))) mine = -1;
    if (bufs_alloc(g, rank, &b) < 0) mine = -1;
    rc = mine;
    /* lost: a peer stopped answering (timed out, interrupted): no agreement left to reach */
    int lost = mk_comm_allreduce(&e->comm, cc, &rc, 1, MPI_INT, MPI_MIN, "the other ranks to start the save") < 0;
    if (rc || lost) {
        if (w) mk_st_writer_abort(w);
        bufs_free(&b);
        MPI_Comm_free(&cc);
        if (!mine && !lost) mk_error_set("saving %s failed on another rank (see its message)", path);
        return -1;
    }
    for (int kind = 0; !lost && kind < kinds; kind++)
        for (int k = 0; !lost && k < nc; k++) {
            if (gather_tensor(e, &b, k, kind, cc) < 0) { lost = 1; break; }
            if (rank != 0) continue;
            to_file(&g->t[k], b.full, b.file);
            if (rc == 0 && mk_st_writer_put(w, b.file, mk_gpt_full_size(&g->t[k])) < 0) rc = -1;
            mk_fault_save_written(kind * nc + k + 1);
        }
    if (mk_exec_device_ok(e, -1) < 0 && rank == 0) rc = -1;  /* the shards came off a failed device */
    if (rank == 0) {
        if (rc == 0 && !lost) rc = mk_st_writer_commit(w);
        else mk_st_writer_abort(w);
        /* interrupted: the job ends by MPI_Abort, and the writer's message
           ("... interrupted by SIGINT (the old file is kept)") is the one to
           print, not a wait's that the signal would fail next */
        if (rc && mk_file_interrupted()) lost = 1;
    }
    bufs_free(&b);
    if (lost || mk_comm_bcast(&e->comm, &rc, 1, MPI_INT, 0, cc, "rank 0 to write the checkpoint") < 0) {
        MPI_Comm_free(&cc);
        return -1;
    }
    MPI_Comm_free(&cc);
    if (rc && rank) mk_error_set("saving %s failed (see rank 0)", path);
    return rc;
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
static int check_file(mk_exec_t *e, mk_st_reader_t *r, const char *path, int64_t *meta, int *has_optim)
{
    mk_gpt_t *g = e->g;
    char cfg[1024];
    uint64_t v[MK_CKPT_N_META];
    if (mk_ckpt_read_meta(r, path, v) < 0) return -1;
    for (int i = 0; i < 3; i++) meta[i] = (int64_t)v[i]; /* step, data position, decay: max INT64_MAX */
    const char *fc = mk_st_meta(r, "config");
    config_json(g, cfg, sizeof cfg);
    if (!fc || strcmp(fc, cfg))
        return mk_error_set("%s: model mismatch: the checkpoint holds %s, this run's model is %s", path,
                            fc ? fc : "(no config)", cfg);
    int nc = n_canon(g);
    mk_st_tensor_t m0;  /* the embedding's first moment: named after the family */
    file_entry(g, 0, 1, &m0);
    *has_optim = mk_st_find(r, m0.name) != NULL;
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

/* Rank 0: send tensor k's state `kind` (in b->full, real rows; padding
 * rows become zeros) to every holder, as its TP slice. */
static int scatter_tensor(mk_exec_t *e, ckpt_bufs_t *b, int k, int kind, MPI_Comm cc)
{
    mk_gpt_t *g = e->g;
    const mk_gpt_tensor_t *t = &g->t[k];
    int head = mk_plan_head_stage(&e->o->ctx->plan), apart = mk_plan_ends_apart(&e->o->ctx->plan);
    for (int dst = 0; dst < e->comm.size; dst++) {
        int s = dst / (e->comm.tp * e->comm.dp);
        int tied = k == 0 && !g->cfg.untied && apart && s == head;
        if ((s != stage_of(e, t->layer) && !tied) || !holds_expert(e, t, dst)) continue;
        int tr = dst % e->comm.tp;
        for (size_t i = 0; i < shard_n(t); i++) {
            long f = full_index_at(g, t, tr, i);
            b->shard[i] = f >= 0 ? b->full[f] : 0.0f;
        }
        if (dst == 0) state_set(e, k, kind, b->shard);
        else if (ck_send(e, b->shard, shard_n(t), dst, k, cc) < 0) return -1;
    }
    return 0;
}

/* Other ranks: this rank's copies of canonical tensor k (itself, or the
 * head's tied copy). */
static int recv_tensor(mk_exec_t *e, ckpt_bufs_t *b, int k, int kind, MPI_Comm cc)
{
    mk_gpt_t *g = e->g;
    for (int j = 0; j < g->n_tensors; j++)
        if (g->t[j].owned && g->t[j].id == g->t[k].id && (j == k || g->t[j].tied_copy)) {
            if (ck_recv(e, b->shard, shard_n(&g->t[j]), 0, k, cc) < 0) return -1;
            state_set(e, j, kind, b->shard);
        }
    return 0;
}

/* ---- --load DIR: a Hugging Face model as the hub publishes it ---------
 * DIR/config.json (the run's model: the same sizes and architecture) and
 * DIR/model.safetensors, or the shards DIR/model.safetensors.index.json's
 * weight_map names (plain file names in DIR), in F32, BF16 or F16: the
 * weights only, so Adam starts from zero at step 0. */
#define MK_HF_MAX_SHARDS 256
typedef struct {
    mk_st_reader_t *r[MK_HF_MAX_SHARDS];
    char name[MK_HF_MAX_SHARDS][256];
    int n;
    json_t *map; /* weight_map, or NULL: one file */
} hf_src_t;

/* The first field in which the two models differ, or NULL. */
static const char *model_differs(const mk_model_config_t *a, const mk_model_config_t *b)
{
    const struct { const char *name; double x, y; } f[] = {
        {"num_hidden_layers", a->num_layers, b->num_layers}, {"hidden_size", a->hidden, b->hidden},
        {"num_attention_heads", a->heads, b->heads}, {"num_key_value_heads", a->kv_heads, b->kv_heads},
        {"head_dim", mk_model_head_dim(a), mk_model_head_dim(b)}, {"sliding_window", a->window, b->window},
        {"vocab_size", a->vocab, b->vocab}, {"intermediate_size", a->ffn, b->ffn},
        {"normalization", a->norm, b->norm}, {"the MLP", a->swiglu, b->swiglu}, {"positions", a->pos, b->pos},
        {"tie_word_embeddings", a->untied, b->untied}, {"biases", a->bias, b->bias},
        {"q/k/v biases", a->qkv_bias, b->qkv_bias}, {"num_local_experts", a->num_experts, b->num_experts},
        {"num_experts_per_tok", a->moe_topk, b->moe_topk}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].x != f[i].y) return f[i].name;
    return NULL;
}

static mk_st_reader_t *hf_reader(const hf_src_t *s, const char *tensor)
{
    if (!s->map) return s->r[0];
    const char *file = json_string_value(json_object_get(s->map, tensor));
    for (int i = 0; file && i < s->n; i++)
        if (!strcmp(s->name[i], file)) return s->r[i];
    return NULL;
}

/* Open the shards weight_map names (each once, plain names only). */
static int hf_shards(hf_src_t *s, const char *dir)
{
    char p[4352];
    const char *tensor;
    json_t *v;
    json_object_foreach(s->map, tensor, v) {
        const char *f = json_string_value(v);
        if (!f || !*f || strchr(f, '/') || !strcmp(f, "..") || strlen(f) >= sizeof s->name[0])
            return mk_error_set("%s: weight_map['%s'] must be a file name in the directory", dir, tensor);
        int seen = 0;
        for (int i = 0; i < s->n && !seen; i++) seen = !strcmp(s->name[i], f);
        if (seen) continue;
        if (s->n == MK_HF_MAX_SHARDS) return mk_error_set("%s: more than %d shards", dir, MK_HF_MAX_SHARDS);
        snprintf(p, sizeof p, "%s/%s", dir, f);
        mk_strlcpy(s->name[s->n], f, sizeof s->name[0]);
        if (!(s->r[s->n] = mk_st_open(p))) return -1;
        s->n++;
    }
    return 0;
}

/* Rank 0: the directory's model checked against the run's, its files opened. */
static int hf_open(mk_exec_t *e, const char *dir, hf_src_t *s)
{
    mk_model_overrides_t ov;
    mk_model_config_t hf;
    mk_model_overrides_init(&ov);
    if (mk_model_resolve(dir, &ov, &hf) < 0) return -1;
    const char *d = model_differs(&hf, &e->o->ctx->plan.model);
    if (d) return mk_error_set("%s: model mismatch: its config.json and this run's model differ in %s", dir, d);
    char p[4352];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (access(p, F_OK) == 0) {
        json_t *idx = mk_json_load(p, "safetensors index");
        s->map = idx ? json_incref(json_object_get(idx, "weight_map")) : NULL;
        json_decref(idx);
        if (!idx) return -1;
        if (!json_is_object(s->map)) return mk_error_set("%s: no weight_map object", p);
        return hf_shards(s, dir);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    s->n = (s->r[0] = mk_st_open(p)) != NULL;
    return s->n ? 0 : -1;
}

static void hf_close(hf_src_t *s)
{
    for (int i = 0; i < s->n; i++) mk_st_close(s->r[i]);
    json_decref(s->map);
    memset(s, 0, sizeof *s);
}

/* Every canonical weight present with its shape (the moments are not). */
static int hf_check(mk_exec_t *e, const hf_src_t *s, const char *dir)
{
    for (int k = 0; k < n_canon(e->g); k++) {
        mk_st_tensor_t want;
        file_entry(e->g, k, 0, &want);
        mk_st_reader_t *r = hf_reader(s, want.name);
        const mk_st_tensor_t *got = r ? mk_st_find(r, want.name) : NULL;
        if (!got) return mk_error_set("%s: tensor '%s' is missing", dir, want.name);
        int same = got->ndim == want.ndim;
        for (int i = 0; same && i < want.ndim; i++) same = got->shape[i] == want.shape[i];
        char a[64], b[64];
        if (!same) return mk_error_set("%s: tensor '%s' has shape %s, want %s", dir, want.name,
                                       shape_str(got, a, sizeof a), shape_str(&want, b, sizeof b));
    }
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Rank 0: tensor k's state `kind` from the file into b->full (zeros for
 * moments the file lacks).  The read verifies its checksum. */
static int read_tensor(mk_exec_t *e, mk_st_reader_t *r, ckpt_bufs_t *b, int k, int kind, int has_optim)
{
    const mk_gpt_tensor_t *t = &e->g->t[k];
    mk_st_tensor_t d;
    file_entry(e->g, k, kind, &d);
    if (kind && !has_optim) {
        memset(b->full, 0, mk_gpt_full_size(t) * sizeof *b->full);
        return 0;
    }
    if (!r) return mk_error_set("tensor '%s': no file of the checkpoint holds it", d.name);
    if (mk_st_read(r, d.name, b->file, mk_gpt_full_size(t)) < 0) return -1;
    from_file(t, b->file, b->full);
    return 0;
}

int mk_exec_load(mk_exec_t *e, const char *path, int64_t *meta)
{
    mk_gpt_t *g = e->g;
    int nc = n_canon(g), rank = e->comm.rank, has_optim = 0;
    mk_st_reader_t *r = NULL;
    ckpt_bufs_t b = {NULL, NULL, NULL};
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    int64_t mine = 0, hdr[6] = {0};  /* rc, meta[3], has_optim, checksummed (rank 0's) */
    static hf_src_t hf; /* a Hugging Face directory's files (rank 0) */
    int dir = is_dir(path);
    if (rank == 0 && dir) { /* the weights at step 0, verified where the shards have checksums */
        meta[0] = meta[1] = meta[2] = 0;
        mine = hf_open(e, path, &hf) < 0 || hf_check(e, &hf, path) < 0 ? -1 : 0;
        hdr[0] = mine, hdr[5] = hf.n > 0;
        for (int i = 0; i < hf.n; i++) hdr[5] &= mk_st_checksummed(hf.r[i]);
    } else if (rank == 0) {
        r = mk_st_open(path);
        mine = r ? check_file(e, r, path, meta, &has_optim) : -1;
        hdr[0] = mine, hdr[1] = meta[0], hdr[2] = meta[1], hdr[3] = meta[2];
        hdr[4] = has_optim, hdr[5] = r && mk_st_checksummed(r);
    }
    if (mine == 0 && bufs_alloc(g, rank, &b) < 0) mine = -1;
    int lost = mk_comm_bcast(&e->comm, hdr, 6, MPI_INT64_T, 0, cc, "rank 0 to read the checkpoint") < 0 ||
               mk_comm_allreduce(&e->comm, cc, &mine, 1, MPI_INT64_T, MPI_MIN, "the other ranks to start the load") < 0;
    int rc = mine || lost ? -1 : 0;
    if (rc && !lost && rank) mk_error_set("cannot load %s (see rank 0)", path); /* lost: the wait's message */
    else if (rc && !lost && !hdr[0] && b.shard) mk_error_set("cannot load %s: another rank is out of memory", path);
    has_optim = (int)hdr[4];
    for (int i = 0; i < 3; i++) meta[i] = hdr[i + 1];
    /* rank 0 says after each read whether it succeeded, so a damaged
       tensor stops every rank at the same point (no hang, one message) */
    for (int kind = 0; rc == 0 && kind < 3; kind++)
        for (int k = 0; rc == 0 && k < nc; k++) {
            mk_st_tensor_t d;
            file_entry(g, k, kind, &d);
            int ok = rank != 0 || read_tensor(e, dir ? hf_reader(&hf, d.name) : r, &b, k, kind, has_optim) == 0;
            if (mk_comm_bcast(&e->comm, &ok, 1, MPI_INT, 0, cc, "rank 0 to read a checkpointed tensor") < 0) rc = -1;
            else if (!ok) rc = rank ? mk_error_set("cannot load %s (see rank 0)", path) : -1;
            else if (rank == 0) rc = scatter_tensor(e, &b, k, kind, cc);
            else rc = recv_tensor(e, &b, k, kind, cc);
        }
    if (rc == 0) e->load_unverified = !hdr[5];
    bufs_free(&b);
    mk_st_close(r);
    hf_close(&hf);
    MPI_Comm_free(&cc);
    return rc;
}
