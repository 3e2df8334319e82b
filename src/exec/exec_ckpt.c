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

/* Our (real_rows, cols) layout <-> the file's. */
static void to_file(const mk_gpt_tensor_t *t, const float *ours, float *file)
{
    size_t R = t->real_rows, C = t->cols;
    if (!mk_hf_transposed(t)) { memcpy(file, ours, R * C * sizeof *file); return; }
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) file[c * R + r] = ours[r * C + c];
}

static void from_file(const mk_gpt_tensor_t *t, const float *file, float *ours)
{
    size_t R = t->real_rows, C = t->cols;
    if (!mk_hf_transposed(t)) { memcpy(ours, file, R * C * sizeof *ours); return; }
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
 * ZeRO: the moments (ZeRO-3 and 16-bit runs: the parameters' fp32 masters
 * too) are spread over the sharding group (collective over it). */
static int sharded(const mk_exec_t *e, int kind) { return e->zero.on && (kind || mk_exec_zero_params_sharded(e)); }

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

/* Rank 0: one header of the file at path (metadata and tensor table). */
static mk_st_writer_t *begin_file(mk_exec_t *e, const char *path, int64_t step)
{
    mk_gpt_t *g = e->g;
    int nc = mk_hf_n_canon(g);
    mk_st_tensor_t *tab = calloc(3 * nc, sizeof *tab);
    if (!tab) return mk_error_set("out of memory"), NULL;
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < nc; k++) mk_hf_entry(g, k, kind, &tab[kind * nc + k]);
    char cfg[1024], num[MK_CKPT_N_META][32], ls[96], sk[32];
    mk_hf_config_json(g, cfg, sizeof cfg);
    uint64_t v[MK_CKPT_N_META] = {(uint64_t)step, (uint64_t)step, (uint64_t)e->horizon, e->o->seed};
    const char *keys[MK_CKPT_N_META + 5] = {"format", "format_version", "config"};
    const char *vals[MK_CKPT_N_META + 5] = {"merak", MK_CKPT_FORMAT, cfg};
    for (int i = 0; i < MK_CKPT_N_META; i++) {
        snprintf(num[i], sizeof num[i], "%llu", (unsigned long long)v[i]);
        keys[3 + i] = mk_ckpt_meta_key(i), vals[3 + i] = num[i];
    }
    int nm = MK_CKPT_N_META + 3;
    if (e->scaler.kind == MK_LOSS_SCALE_DYNAMIC) { /* its state, for an exact resume */
        mk_ckpt_scaler_t cs = {e->scaler.scale, e->scaler.growth_tracker, e->scaler.hysteresis_tracker};
        mk_ckpt_format_scaler(&cs, ls, sizeof ls);
        keys[nm] = MK_CKPT_SCALER_KEY, vals[nm++] = ls;
    }
    if (step > e->updates) { /* steps skipped so far: the lr schedule and Adam resume at e->updates */
        snprintf(sk, sizeof sk, "%lld", (long long)(step - e->updates));
        keys[nm] = MK_CKPT_SKIPPED_KEY, vals[nm++] = sk;
    }
    mk_st_writer_t *w = mk_st_writer_begin(path, tab, 3 * nc, keys, vals, nm);
    free(tab);
    return w;
}

/* The DP and TP rank of the copy of t that is saved (for a tensor split
 * over TP, its DP rank's): 0, or for an expert's tensor its first holder,
 * the EP group's rank with its EP rank (exec_ep.c: folded, TP ranks too). */
static int saved_dp(const mk_exec_t *e, const mk_gpt_tensor_t *t, int *tr)
{
    int r = t->expert >= 0 ? t->expert / (e->g->E / e->ep.n) : 0;
    *tr = e->ep.fold ? r % e->comm.tp : 0;
    return e->ep.fold ? r / e->comm.tp : r;
}

/* Whether global rank dst holds t's expert (every rank holds the others). */
static int holds_expert(const mk_exec_t *e, const mk_gpt_tensor_t *t, int dst)
{
    int d = (dst / e->comm.tp) % e->comm.dp;
    return t->expert < 0 || t->expert / (e->g->E / e->ep.n) == mk_exec_ep_index(e, d, dst % e->comm.tp) % e->ep.n;
}

/* Rank 0 assembles tensor k's state `kind` in b->full (real rows only:
 * padding rows of a padded vocabulary are dropped) from its owners. */
static int gather_tensor(mk_exec_t *e, ckpt_bufs_t *b, int k, int kind, MPI_Comm cc)
{
    mk_gpt_t *g = e->g;
    const mk_gpt_tensor_t *t = &g->t[k];
    size_t n = shard_n(t);
    /* holders of a distinct shard send it (DP rank 0 only) */
    int st, sd = saved_dp(e, t, &st), sends = t->split_dim >= 0 || e->comm.tp_rank == st;
    /* a sharded state's gather is collective over its unit's group: folded, an expert's holders on every TP rank */
    if (t->owned && (sends || (t->expert >= 0 && e->ep.fold && sharded(e, kind)))) {
        if (state_get(e, k, kind, b->shard) < 0) return -1;
        if (sends && e->comm.dp_rank == sd && e->comm.rank != 0 && ck_send(e, b->shard, n, 0, k, cc) < 0)
            return -1;
    }
    if (e->comm.rank != 0) return 0;
    int s = stage_of(e, t->layer), ntp = t->split_dim >= 0 ? e->comm.tp : 1;
    for (int tr = 0; tr < ntp; tr++) {
        int src = mk_comm_rank_of(&e->comm, sd, s, t->split_dim >= 0 ? tr : st);
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

/* The checkpoint's one writer, or --save-hf's shards, dropped. */
static void save_abort(mk_hf_out_t *w, mk_st_writer_t *one)
{
    if (one) mk_st_writer_abort(one);
    else mk_hf_save_abort(w);
}

/* step < 0: --save-hf's directory (weights only), else the checkpoint file. */
int mk_exec_save(mk_exec_t *e, const char *path, int64_t step)
{
    mk_gpt_t *g = e->g;
    int nc = mk_hf_n_canon(g), rank = e->comm.rank, rc = 0, kinds = step < 0 ? 1 : 3;
    mk_hf_out_t w = {NULL, 0, NULL}; /* the checkpoint: one file; --save-hf: its shards */
    mk_st_writer_t *one = NULL;
    ckpt_bufs_t b = {NULL, NULL, NULL};
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    int mine = 0;  /* this rank's setup; every rank learns of any failure */
    if (rank == 0 && step < 0 && mk_hf_save_begin(e, path, &w) < 0) mine = -1;
    if (rank == 0 && step >= 0 && !(one = begin_file(e, path, step))) mine = -1;
    if (one) w.w = &one, w.n = 1;
    if (bufs_alloc(g, rank, &b) < 0) mine = -1;
    rc = mine;
    /* lost: a peer stopped answering (timed out, interrupted): no agreement left to reach */
    int lost = mk_comm_allreduce(&e->comm, cc, &rc, 1, MPI_INT, MPI_MIN, "the other ranks to start the save") < 0;
    if (rc || lost) {
        save_abort(&w, one);
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
            if (rc == 0 && mk_hf_save_put(&w, k, b.file, mk_gpt_full_size(&g->t[k])) < 0) rc = -1;
            mk_fault_save_written(kind * nc + k + 1);
        }
    if (mk_exec_device_ok(e, -1) < 0 && rank == 0) rc = -1;  /* the shards came off a failed device */
    if (rank == 0) {
        if (rc == 0 && !lost) rc = one ? mk_st_writer_commit(one) : mk_hf_save_commit(e, path, &w);
        else save_abort(&w, one);
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

static int check_file(mk_exec_t *e, mk_st_reader_t *r, const char *path, int64_t *meta, int *has_optim)
{
    mk_gpt_t *g = e->g;
    char cfg[1024];
    uint64_t v[MK_CKPT_N_META];
    if (mk_ckpt_read_meta(r, path, v) < 0) return -1;
    for (int i = 0; i < 3; i++) meta[i] = (int64_t)v[i]; /* step, data position, decay: max INT64_MAX */
    mk_ckpt_scaler_t cs;
    int have = mk_ckpt_read_scaler(r, path, &cs);
    if (have < 0) return -1;
    meta[3] = have, meta[4] = cs.growth, meta[5] = cs.hysteresis; /* have: 0 or 1 */
    if (have) memcpy(&meta[6], &cs.scale, sizeof cs.scale);
    uint64_t skipped;
    if (mk_ckpt_read_skipped(r, path, v[0], &skipped) < 0) return -1;
    meta[7] = (int64_t)skipped;
    const char *fc = mk_st_meta(r, "config");
    mk_hf_config_json(g, cfg, sizeof cfg);
    if (!fc || strcmp(fc, cfg))
        return mk_error_set("%s: model mismatch: the checkpoint holds %s, this run's model is %s", path,
                            fc ? fc : "(no config)", cfg);
    int nc = mk_hf_n_canon(g);
    mk_st_tensor_t m0;  /* the embedding's first moment: named after the family */
    mk_hf_entry(g, 0, 1, &m0);
    *has_optim = mk_st_find(r, m0.name) != NULL;
    for (int kind = 0; kind < (*has_optim ? 3 : 1); kind++)
        for (int k = 0; k < nc; k++) {
            mk_st_tensor_t want;
            mk_hf_entry(g, k, kind, &want);
            const mk_st_tensor_t *got = mk_st_find(r, want.name);
            if (!got) return mk_error_set("%s: tensor '%s' is missing", path, want.name);
            int same = got->ndim == want.ndim;
            for (int d = 0; same && d < want.ndim; d++) same = got->shape[d] == want.shape[d];
            if (!same) {
                char a[64], b[64];
                return mk_error_set("%s: tensor '%s' has shape %s, want %s", path, want.name,
                                    mk_hf_shape_str(got, a, sizeof a), mk_hf_shape_str(&want, b, sizeof b));
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
    mk_hf_entry(e->g, k, kind, &d);
    if (kind && !has_optim) {
        memset(b->full, 0, mk_gpt_full_size(t) * sizeof *b->full);
        return 0;
    }
    if (!r) return mk_error_set("tensor '%s': no file of the checkpoint holds it", d.name);
    if (mk_st_read(r, d.name, b->file, mk_gpt_full_size(t)) < 0) return -1;
    from_file(t, b->file, b->full);
    return 0;
}

int mk_exec_load(mk_exec_t *e, const char *path, int64_t meta[4])
{
    mk_gpt_t *g = e->g;
    int nc = mk_hf_n_canon(g), rank = e->comm.rank, has_optim = 0;
    mk_st_reader_t *r = NULL;
    ckpt_bufs_t b = {NULL, NULL, NULL};
    MPI_Comm cc;
    MPI_Comm_dup(e->comm.world, &cc);
    /* rc, meta[3], has_optim, checksummed, the loss scaler's 4 (rank 0's), skipped steps */
    int64_t mine = 0, hdr[12] = {0};
    int64_t m8[8] = {0};
    static mk_hf_src_t hf; /* a Hugging Face directory's files (rank 0) */
    int dir = is_dir(path);
    if (rank == 0 && dir) { /* the weights at step 0, verified where the shards have checksums */
        meta[0] = meta[1] = meta[2] = meta[3] = 0;
        mine = mk_hf_open(e, path, &hf) < 0 || mk_hf_check(e, &hf, path) < 0 ? -1 : 0;
        hdr[0] = mine, hdr[5] = hf.n > 0;
        for (int i = 0; i < hf.n; i++) hdr[5] &= mk_st_checksummed(hf.r[i]);
    } else if (rank == 0) {
        r = mk_st_open(path);
        mine = r ? check_file(e, r, path, m8, &has_optim) : -1;
        hdr[0] = mine, hdr[1] = meta[0] = m8[0], hdr[2] = meta[1] = m8[1], hdr[3] = meta[2] = m8[2];
        hdr[4] = has_optim, hdr[5] = r && mk_st_checksummed(r);
        memcpy(&hdr[6], &m8[3], 4 * sizeof *hdr);
        hdr[10] = meta[3] = m8[7];
    }
    if (mine == 0 && bufs_alloc(g, rank, &b) < 0) mine = -1;
    int lost = mk_comm_bcast(&e->comm, hdr, 12, MPI_INT64_T, 0, cc, "rank 0 to read the checkpoint") < 0 ||
               mk_comm_allreduce(&e->comm, cc, &mine, 1, MPI_INT64_T, MPI_MIN, "the other ranks to start the load") < 0;
    int rc = mine || lost ? -1 : 0;
    if (rc && !lost && rank) mk_error_set("cannot load %s (see rank 0)", path); /* lost: the wait's message */
    else if (rc && !lost && !hdr[0] && b.shard) mk_error_set("cannot load %s: another rank is out of memory", path);
    has_optim = (int)hdr[4];
    for (int i = 0; i < 3; i++) meta[i] = hdr[i + 1];
    meta[3] = hdr[10];
    /* rank 0 says after each read whether it succeeded, so a damaged
       tensor stops every rank at the same point (no hang, one message) */
    for (int kind = 0; rc == 0 && kind < 3; kind++)
        for (int k = 0; rc == 0 && k < nc; k++) {
            mk_st_tensor_t d;
            mk_hf_entry(g, k, kind, &d);
            int ok = rank != 0 || read_tensor(e, dir ? mk_hf_reader(&hf, d.name) : r, &b, k, kind, has_optim) == 0;
            if (mk_comm_bcast(&e->comm, &ok, 1, MPI_INT, 0, cc, "rank 0 to read a checkpointed tensor") < 0) rc = -1;
            else if (!ok) rc = rank ? mk_error_set("cannot load %s (see rank 0)", path) : -1;
            else if (rank == 0) rc = scatter_tensor(e, &b, k, kind, cc);
            else rc = recv_tensor(e, &b, k, kind, cc);
        }
    if (rc == 0) e->load_unverified = !hdr[5];
    if (rc == 0 && hdr[6] && e->scaler.kind == MK_LOSS_SCALE_DYNAMIC) { /* the run's own scaler goes on */
        memcpy(&e->scaler.scale, &hdr[9], sizeof e->scaler.scale);
        e->scaler.growth_tracker = (int)hdr[7], e->scaler.hysteresis_tracker = (int)hdr[8];
        e->run.grad_scale = (float)(e->run.loss_scale * e->scaler.scale);
    }
    bufs_free(&b);
    mk_st_close(r);
    mk_hf_close(&hf);
    MPI_Comm_free(&cc);
    return rc;
}
