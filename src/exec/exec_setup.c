/* mk_exec_train: set up one rank (grid, binding, chunks, model, streams),
 * run the steps, collect the results on rank 0. */
#include "config.h"
#include "exec/exec_internal.h"

#include "merak/data.h"
#include "merak/fileio.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup_chunks(mk_exec_t *e, int *own)
{
    const mk_exec_opts_t *o = e->o;
    int s = e->comm.pp_rank;
    e->pipe.chunks = calloc(e->pipe.n_chunks, sizeof *e->pipe.chunks);
    for (int v = 0; v < e->pipe.n_chunks; v++) {
        mk_chunk_t *c = &e->pipe.chunks[v];
        c->vs = mk_plan_vstage(&o->ctx->plan, s, v);
        c->l0 = e->pipe.bounds[c->vs];
        c->l1 = e->pipe.bounds[c->vs + 1];
        for (int l = c->l0; l < c->l1; l++) own[l] = 1;
        c->act = calloc((size_t)e->pipe.n_micro * (c->l1 - c->l0), sizeof *c->act);
        c->out = calloc(e->pipe.n_micro, sizeof *c->out);
        c->gin = calloc(e->pipe.n_micro, sizeof *c->gin);
        c->gout = calloc(e->pipe.n_micro, sizeof *c->gout);
    }
    return 0;
}

static int setup(mk_exec_t *e, const mk_exec_opts_t *o, MPI_Comm world)
{
    int nl = mk_gpt_n_layers(&o->ctx->plan.model);
    e->o = o;
    int size;
    MPI_Comm_size(world, &size);
    if (o->ctx->world != size) /* the layout's rank count was checked there, against this world */
        return mk_error_set("the plan was resolved for %d ranks, there are %d", o->ctx->world, size);
    /* the CP ranks of a replica are consecutive: to the grid, dp x cp DP ranks (exec_cp.c) */
    e->cp.n = o->ctx->plan.cp > 1 ? o->ctx->plan.cp : 1;
    e->cp.c = MPI_COMM_NULL;
    if (mk_comm_init(&e->comm, world, o->ctx->plan.dp * e->cp.n, o->ctx->plan.pp, o->ctx->plan.tp,
                     mk_plan_ends_apart(&o->ctx->plan)) < 0)
        return -1;
    e->comm.timeout_s = o->timeout_s;
    e->comm.be = o->be;  /* device buffers reach MPI through host copies */
    mk_runtime_bind(&e->comm);
    e->pipe.n_chunks = o->ctx->plan.vpp;
    e->pipe.n_vstages = o->ctx->plan.n_vstages;
    e->pipe.n_micro = o->ctx->plan.m;
    e->pipe.n_tokens = o->ctx->plan.mbs * o->ctx->plan.model.seq / e->cp.n;  /* this rank's rows */
    e->pipe.bounds = malloc((e->pipe.n_vstages + 1) * sizeof *e->pipe.bounds);
    for (int i = 0; i <= e->pipe.n_vstages; i++)
        e->pipe.bounds[i] = o->ctx->plan.bounds[i];
    int *own = calloc(nl, sizeof *own);
    setup_chunks(e, own);
    int tied_copy = mk_plan_ends_apart(&o->ctx->plan) && own[nl - 1];
    e->run.loss_scale = 1.0f / ((float)o->ctx->plan.gbs * o->ctx->plan.model.seq);
    e->scaler = o->loss_scaler.kind ? o->loss_scaler : (mk_loss_scaler_t){.scale = 1.0};
    if (o->gemm_dtype && o->be->set_gemm_dtype) o->be->set_gemm_dtype(o->be->ctx, o->gemm_dtype);
    /* the layer boundaries and saved inputs in the GEMMs' 16-bit type (gpt.h act16) */
    if (o->gemm_dtype && o->be->round16 && o->be->pack16 && o->be->unpack16) e->run.act16 = o->gemm_dtype;
    /* 16-bit weights over fp32 masters (exec_p16.c), where activations are 16-bit and the stores host memory */
    e->p16.dt = mk_exec_store16(o->be) ? e->run.act16 : 0;
    /* selective recompute: each attention core's probabilities remade in its backward (gpt.h drop_core) */
    e->run.drop_core = o->ctx->plan.recompute.kind == MK_RECOMPUTE_SELECTIVE;
    e->run.grad_scale = (float)(e->run.loss_scale * e->scaler.scale); /* x 2^k: exact */
    e->run.allreduce = mk_exec_tp_allreduce;
    e->run.ctx = e;
    mk_exec_tp_setup(e);
    mk_exec_ep_init(e);
    e->g = mk_gpt_new_ep(&o->ctx->plan.model, o->be, o->ctx->plan.tp, e->comm.tp_rank, e->ep.n, e->ep.rank, own,
                         tied_copy, &e->run);
    free(own);
    if (!e->g || mk_exec_cp_init(e) < 0) return -1;
    /* the plan's flash or fused attention backend: the backend's fused kernel where it has one (CP's ring keeps
       its own log-sum-exps) */
    mk_attn_backend_t ab = o->ctx->plan.attention;
    e->g->fused_attn = (ab == MK_ATTN_FLASH || ab == MK_ATTN_FUSED) && e->g->cp <= 1 && o->be->attention_fused_fwd &&
                       o->be->attention_fused_bwd;
    if (mk_gpt_run_init(&e->run, e->g, o->ctx->plan.mbs) < 0) return -1;
    mk_gpt_init_params(e->g, o->seed);
    e->pipe.tokens = calloc(e->pipe.n_micro, sizeof *e->pipe.tokens);
    e->pipe.targets = calloc(e->pipe.n_micro, sizeof *e->pipe.targets);
    for (int mb = 0; mb < e->pipe.n_micro; mb++) {
        /* whole sequences, then (cp > 1) this rank's chunks: mk_exec_make_batch */
        e->pipe.tokens[mb] = calloc((size_t)o->ctx->plan.mbs * o->ctx->plan.model.seq, sizeof(int));
        e->pipe.targets[mb] = calloc((size_t)o->ctx->plan.mbs * o->ctx->plan.model.seq, sizeof(int));
    }
    e->run.reset_pos = o->reset_position_ids, e->run.reset_mask = o->reset_attention_mask;
    if ((o->reset_position_ids || o->reset_attention_mask) &&
        (e->pipe.docs = calloc(e->pipe.n_micro, sizeof *e->pipe.docs)))
        for (int mb = 0; mb < e->pipe.n_micro; mb++)
            e->pipe.docs[mb] = calloc((size_t)o->ctx->plan.mbs * o->ctx->plan.model.seq, 1);
    e->dp.req = malloc(nl * sizeof *e->dp.req);
    for (int l = 0; l < nl; l++) e->dp.req[l] = MPI_REQUEST_NULL;
    e->dp.state = calloc(nl, sizeof *e->dp.state);
    if (!(e->pipe.grad_a = mk_gpt_alloc(&e->run, e->g, mk_exec_act_floats(e))) ||
        !(e->pipe.grad_b = mk_gpt_alloc(&e->run, e->g, mk_exec_act_floats(e))))
        return -1;
    return 0;
}

static void teardown(mk_exec_t *e)
{
    for (int v = 0; e->pipe.chunks && v < e->pipe.n_chunks; v++) {
        mk_chunk_t *c = &e->pipe.chunks[v];
        for (int i = 0; e->g && i < e->pipe.n_micro * (c->l1 - c->l0); i++)
            mk_gpt_act_clear(&e->run, e->g, c->l0 + i % (c->l1 - c->l0), &c->act[i]);
        free(c->act); free(c->out); free(c->gin); free(c->gout);
    }
    free(e->pipe.chunks);
    for (int mb = 0; e->pipe.tokens && mb < e->pipe.n_micro; mb++) { free(e->pipe.tokens[mb]); free(e->pipe.targets[mb]); }
    for (int mb = 0; e->pipe.docs && mb < e->pipe.n_micro; mb++) free(e->pipe.docs[mb]);
    free(e->pipe.tokens); free(e->pipe.targets); free(e->pipe.docs);
    if (e->g) {
        mk_gpt_release(&e->run, e->g, e->pipe.grad_a, mk_exec_act_floats(e));
        mk_gpt_release(&e->run, e->g, e->pipe.grad_b, mk_exec_act_floats(e));
        if (e->run.s_a) mk_gpt_run_free(&e->run, e->g);
    }
    mk_exec_p16_free(e);
    mk_exec_cp_free(e);
    mk_exec_ep_free(e);
    mk_gpt_free(e->g);
    mk_exec_stream_free(e);
    mk_sched_free(e->sched);
    free(e->trace.ev); free(e->trace.dp_t0);
    free(e->pipe.bounds); free(e->dp.req); free(e->dp.state); free(e->dp.host); free(e->pipe.sends);
    mk_comm_free(&e->comm);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void finish_result(mk_exec_t *e, mk_exec_result_t *res)
{
    const mk_exec_opts_t *o = e->o;
    int pp = o->ctx->plan.pp;
    unsigned long long *peak = calloc(pp, sizeof *peak);
    mk_gpt_note_peak(&e->run, e->g); /* mem_peak: activations and the backend's scratch as held together */
    peak[e->comm.pp_rank] = e->run.mem_peak;
    mk_comm_allreduce(&e->comm, e->comm.world, peak, pp, MPI_UNSIGNED_LONG_LONG, MPI_MAX, "the peak memory maximum");
    res->peak_mem = calloc(pp, sizeof *res->peak_mem);
    for (int i = 0; i < pp; i++) res->peak_mem[i] = peak[i];
    memset(peak, 0, pp * sizeof *peak);
    peak[e->comm.pp_rank] = mk_exec_state_bytes(e);
    mk_comm_allreduce(&e->comm, e->comm.world, peak, pp, MPI_UNSIGNED_LONG_LONG, MPI_MAX, "the state memory maximum");
    res->state_mem = calloc(pp, sizeof *res->state_mem);
    for (int i = 0; i < pp && res->state_mem; i++) res->state_mem[i] = peak[i];
    free(peak);
    int n = o->steps > 1 ? o->steps - 1 : o->steps;
    double *t = malloc((n ? n : 1) * sizeof *t);
    if (n) memcpy(t, res->step_times + (o->steps - n), n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    res->step_time = n ? (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])) : 0.0;
    res->tokens_per_s = res->step_time > 0 ? (double)o->ctx->plan.gbs * o->ctx->plan.model.seq / res->step_time : 0.0;
    free(t);
}

/* Every rank agrees on a failure (ok: this rank's view) and then holds the
 * message of the lowest failing rank (as "rank N: ..." where it is not its
 * own).  Returns 0 when all are fine. */
static int all_ok(mk_exec_t *e, int ok)
{
    int v[2] = {ok ? 1 : 0, ok ? e->comm.size : e->comm.rank}; /* MIN: all ok, the lowest failing rank */
    if (mk_comm_allreduce(&e->comm, e->comm.world, v, 2, MPI_INT, MPI_MIN, "the other ranks' setup") < 0) return -1;
    int first_bad = v[1];
    if (v[0]) return 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mk_error_last());
    if (mk_comm_bcast(&e->comm, msg, (int)sizeof msg, MPI_CHAR, first_bad, e->comm.world, "the failing rank's message") < 0)
        return -1;
    if (e->comm.rank != first_bad) mk_error_set("rank %d: %s", first_bad, msg);
    return -1;
}

int mk_exec_device_ok(mk_exec_t *e, int64_t step)
{
    const mk_backend_t *be = e->o->be;
    if (!be->status && !mk_fault_device_armed()) return 0;
    int bad = mk_fault_device(e->comm.rank, step) < 0 || (be->status && be->status(be->ctx) < 0);
    return all_ok(e, !bad);
}

/* Mean validation loss over a fixed set of held-out global batches. */
static int evaluate(mk_exec_t *e, double *loss)
{
    const mk_exec_opts_t *o = e->o;
    int n = o->eval_batches > 0 ? o->eval_batches : 8;
    if (e->data) {
        long w = (long)(mk_data_tokens(e->data, MK_DATA_VAL) - 1) / o->ctx->plan.model.seq / o->ctx->plan.gbs;
        if (n > w) n = w > 0 ? (int)w : 1;
    }
    double sum = 0.0;
    e->eval = 1;
    for (int i = 0; i < n; i++) {
        /* synthetic stream: steps far beyond any run stand in for held-out data */
        mk_exec_make_batch(e, e->data ? -1 - i : (1 << 22) + i);
        if (mk_exec_step(e, 0) < 0) { e->eval = 0; return -1; }
        sum += e->step_loss;
    }
    e->eval = 0;
    *loss = sum / n;
    return 0;
}

/* --load (collective; every rank returns alike), then where this run starts
 * and the lr horizon.  The checkpoint's step is checked to be in [0,
 * INT64_MAX]; the run's last step must fit the same 64-bit counter. */
static int load_start(mk_exec_t *e)
{
    const mk_exec_opts_t *o = e->o;
    int64_t meta[4] = {0, 0, 0, 0};
    if (o->load && mk_exec_load(e, o->load, meta) < 0) return -1;
    if (meta[0] > INT64_MAX - o->steps)
        return mk_error_set("%s: step %lld + --steps %d exceeds the 64-bit step counter (%lld)", o->load,
                            (long long)meta[0], o->steps, (long long)INT64_MAX);
    e->step0 = meta[0];
    e->updates = meta[0] - meta[3]; /* the checkpoint's skipped steps: 0 <= meta[3] <= meta[0] */
    e->horizon = o->lr_decay_steps > 0 ? o->lr_decay_steps : meta[2] > 0 ? meta[2] : e->step0 + o->steps;
    e->warmup = o->warmup >= 0 ? o->warmup : mk_exec_default_warmup(o->adam_beta2);
    return 0;
}

/* Checkpoints seen by this run, for the NaN message: a checkpoint is good
 * only once a step after loading or saving it completed with a finite loss
 * (its own weights may be what gives the NaN). */
typedef struct {
    const char *good, *cand;    /* last good checkpoint; one loaded or saved but not yet followed by a finite step */
    int64_t good_step, cand_step;
} ckpt_log_t;

static void log_finite(ckpt_log_t *l)
{
    if (l->cand) l->good = l->cand, l->good_step = l->cand_step, l->cand = NULL;
}

static void log_saved(ckpt_log_t *l, const char *path, int64_t step)
{
    if (l->good && !strcmp(l->good, path)) l->good = NULL;  /* overwritten */
    l->cand = path, l->cand_step = step;
}

static void nan_message(const ckpt_log_t *l, int64_t k, double loss)
{
    char g[4400] = "", c[4400] = "";
    if (l->good) snprintf(g, sizeof g, "; the last good checkpoint is %s (step %lld)", l->good, (long long)l->good_step);
    if (l->cand) snprintf(c, sizeof c, "; %s (step %lld) is not known good (this was the first step after it)", l->cand,
                          (long long)l->cand_step);
    if (!l->good && !l->cand) snprintf(g, sizeof g, " (no checkpoint: --save FILE keeps one)");
    mk_error_set("step %lld: the loss is %f%s%s", (long long)k + 1, loss, g, c);
}

void mk_exec_log(const mk_exec_t *e, const char *fmt, ...)
{
    if (e->o->log_interval <= 0 || e->comm.rank != 0) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    mk_log("%s", line);
}

/* Step i's line, every log_interval steps and at the last (the loss is
 * all-reduced: rank 0 has it, whichever stage holds the head). */
static void log_step(const mk_exec_t *e, const mk_exec_result_t *res, int i)
{
    const mk_exec_opts_t *o = e->o;
    int64_t k = e->step0 + i;
    if (o->log_interval <= 0 || ((i + 1) % o->log_interval && i != o->steps - 1 && !e->step_skipped)) return;
    char ls[96] = "";  /* Megatron's "loss scale" and its skipped iterations */
    if (e->scaler.kind)
        snprintf(ls, sizeof ls, "  loss scale %.10g%s", e->scaler.scale,
                 e->step_skipped ? "  skipped: inf/NaN gradients (no update)" : "");
    mk_exec_log(e, "step %4lld/%lld  loss %.6f  lr %.3e  %.1f ms  %.0f tokens/s%s", (long long)k + 1,
                (long long)(e->step0 + o->steps), res->losses[i], e->lr, 1e3 * res->step_times[i],
                (double)o->ctx->plan.gbs * o->ctx->plan.model.seq / res->step_times[i], ls);
}

/* Validation and interval saves after step i; rc 0, or -1 with res->fail_exit. */
static int after_step(mk_exec_t *e, mk_exec_result_t *res, ckpt_log_t *log, int i)
{
    const mk_exec_opts_t *o = e->o;
    int64_t k = e->step0 + i;
    int last = i == o->steps - 1, rc = 0;
    if (o->eval_interval > 0 && ((i + 1) % o->eval_interval == 0 || last)) {
        double vl;
        rc = evaluate(e, &vl);
        if (rc == 0 && mk_exec_device_ok(e, -1) < 0) rc = -1, res->fail_exit = 1;
        if (rc == 0) {
            res->val_steps[res->n_val] = k + 1;
            res->val_losses[res->n_val++] = vl;
            mk_exec_log(e, "step %4lld  validation loss %.6f", (long long)k + 1, vl);
        }
    }
    if (rc == 0 && o->save && !last && o->save_interval > 0 && (i + 1) % o->save_interval == 0) {
        if (mk_exec_save(e, o->save, k + 1) < 0) return res->fail_exit = 1, -1;
        log_saved(log, o->save, k + 1);
        mk_exec_log(e, "saved %s (step %lld)", o->save, (long long)k + 1);
    }
    return rc;
}

/* Steps, validation and interval saves; rc 0, or -1 with res->fail_exit. */
static int train_loop(mk_exec_t *e, mk_exec_result_t *res)
{
    const mk_exec_opts_t *o = e->o;
    ckpt_log_t log = {NULL, o->load, 0, e->step0};
    int rc = 0;
    if (o->first_line) mk_exec_log(e, "%s", o->first_line);
    for (int i = 0; rc == 0 && i < o->steps; i++) {
        int64_t k = e->step0 + i;
        if (mk_comm_check(&e->comm, k) < 0) return res->fail_exit = 1, res->steps = i, -1;
        mk_fault_rank_step(e->comm.rank, k);
        mk_exec_make_batch(e, k);
        if (o->trace && i == o->steps - 1) mk_exec_trace_start(e);
        double t0 = mk_time_now();
        rc = mk_exec_step(e, k);
        mk_exec_trace_peak(e);
        e->trace.on = 0;
        res->step_times[i] = mk_time_now() - t0;
        if (rc == 0 && mk_exec_device_ok(e, k) < 0) {
            res->fail_exit = 1, res->steps = i;
            return -1;
        }
        if (rc == 0 && mk_fault_nan(k)) e->step_loss = NAN;
        res->losses[i] = e->step_loss;
        res->loss_scale = e->scaler.scale, res->skipped_steps = e->skipped;
        if (res->aux_losses) res->aux_losses[i] = e->step_aux;
        if (rc == 0 && !isfinite(e->step_loss)) {
            nan_message(&log, k, e->step_loss);  /* the loss is all-reduced: every rank sees it */
            res->fail_exit = 1, res->steps = i;
            return -1;
        }
        if (rc == 0) log_finite(&log);
        if (rc == 0) log_step(e, res, i);
        if (rc == 0) rc = after_step(e, res, &log, i);
    }
    return rc;
}

int mk_exec_train(const mk_exec_opts_t *o, void *world_p, mk_exec_result_t *res)
{
    MPI_Comm world = *(MPI_Comm *)world_p;
    mk_exec_t e;
    memset(&e, 0, sizeof e);
    memset(res, 0, sizeof *res);
    e.zero.on = o->ctx->zero;
    int rc = setup(&e, o, world);
    if (rc == 0 && !(e.sched = mk_exec_build_sched(o->ctx))) rc = -1;
    if (rc == 0) rc = mk_exec_stream_init(&e);
    if (rc == 0 && e.zero.on) rc = mk_exec_zero_init(&e);
    if (rc == 0) rc = mk_exec_p16_init(&e);
    if (rc == 0) rc = mk_exec_g16_init(&e);
    res->steps = o->steps;
    res->losses = calloc(o->steps + 1, sizeof *res->losses);
    res->step_times = calloc(o->steps + 1, sizeof *res->step_times);
    if (mk_model_is_moe(&o->ctx->plan.model)) res->aux_losses = calloc(o->steps + 1, sizeof *res->aux_losses);
    int nval_max = (o->eval_interval > 0 ? o->steps / o->eval_interval : 0) + 1;
    res->val_steps = calloc(nval_max, sizeof *res->val_steps);
    res->val_losses = calloc(nval_max, sizeof *res->val_losses);
    /* from here on, failures are collective: every rank returns alike */
    if (rc == 0 && o->data) {
        e.data = mk_data_open(o->data, o->ctx->plan.model.vocab, o->ctx->plan.model.seq);
        if (all_ok(&e, e.data != NULL) < 0) rc = -1, res->fail_exit = 2;
    }
    if (rc == 0 && (o->reset_position_ids || o->reset_attention_mask)) { /* every rank decides alike */
        int mem = e.pipe.docs != NULL;
        for (int mb = 0; mem && mb < e.pipe.n_micro; mb++) mem = e.pipe.docs[mb] != NULL;
        const char *why = !e.data || !mk_data_has_docs(e.data) ? "need a Megatron-LM dataset (--data-path PREFIX: "
                                                                 "its documents)"
                          : o->ctx->plan.cp > 1 ? "do not run under context parallelism"
                          : !mem ? "are out of memory" : NULL;
        if (why) mk_error_set("--reset-position-ids and --reset-attention-mask %s", why), rc = -1, res->fail_exit = 2;
    }
    /* --save-hf's layout (one file or shards) against what DIR holds, before training */
    if (rc == 0 && o->save_hf && all_ok(&e, e.comm.rank != 0 || mk_hf_layout_ok(&e, o->save_hf) == 0) < 0)
        rc = -1, res->fail_exit = 2;
    if (rc == 0 && load_start(&e) < 0) rc = -1, res->fail_exit = 2;
    if (rc == 0 && mk_exec_p16_refresh(&e) < 0) rc = -1; /* the 16-bit weights of the masters, loaded or not */
    if (rc == 0 && mk_exec_moe_bias_pull(&e) < 0) rc = -1; /* the score biases' whole copy, too */
    res->first_step = e.step0;
    res->load_unverified = e.load_unverified;
    if (rc == 0) rc = train_loop(&e, res);
    if (rc == 0) finish_result(&e, res);
    if (rc == 0 && o->save && mk_exec_save(&e, o->save, e.step0 + o->steps) < 0) rc = -1, res->fail_exit = 1;
    else if (rc == 0 && o->save) mk_exec_log(&e, "saved %s (step %lld)", o->save, (long long)(e.step0 + o->steps));
    if (rc == 0 && o->save_hf && mk_exec_save(&e, o->save_hf, -1) < 0) rc = -1, res->fail_exit = 1;
    else if (rc == 0 && o->save_hf) mk_exec_log(&e, "saved the Hugging Face model %s", o->save_hf);
    if (rc == 0 && o->trace && mk_exec_trace_write(&e, o->trace) < 0) rc = -1, res->fail_exit = 1;
    else if (rc == 0 && o->trace) mk_exec_log(&e, "wrote trace %s", o->trace);
    mk_exec_g16_free(&e); /* (before ZeRO's: the step's gradients may be ZeRO-1's pieces) */
    if (e.zero.on) mk_exec_zero_free(&e);
    mk_data_free(e.data);
    teardown(&e);
    if (rc < 0 && (mk_comm_failure() || mk_file_interrupted())) {
        int sig = mk_file_interrupted();
        res->abort_exit = sig ? 128 + sig : 1;
        if (mk_comm_failure()) mk_error_set("%s", mk_comm_failure()); /* the cause, not a later "failed" */
    }
    return rc;
}

void mk_exec_result_free(mk_exec_result_t *r)
{
    free(r->losses);
    free(r->aux_losses);
    free(r->step_times);
    free(r->peak_mem);
    free(r->state_mem);
    free(r->val_steps);
    free(r->val_losses);
    memset(r, 0, sizeof *r);
}
