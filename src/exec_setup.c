/* mk_exec_train: set up one rank (grid, binding, chunks, model, streams),
 * run the steps, collect the results on rank 0. */
#include "config.h"
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int setup_chunks(mk_exec_t *e, int *own)
{
    const mk_exec_opts_t *o = e->o;
    int s = e->comm.pp_rank;
    e->ch = calloc(e->vpp, sizeof *e->ch);
    for (int v = 0; v < e->vpp; v++) {
        mk_chunk_t *c = &e->ch[v];
        c->vs = v * o->plan.pp + s;
        c->l0 = e->bnd[c->vs];
        c->l1 = e->bnd[c->vs + 1];
        for (int l = c->l0; l < c->l1; l++) own[l] = 1;
        c->act = calloc((size_t)e->m * (c->l1 - c->l0), sizeof *c->act);
        c->out = calloc(e->m, sizeof *c->out);
        c->gin = calloc(e->m, sizeof *c->gin);
        c->gout = calloc(e->m, sizeof *c->gout);
    }
    return 0;
}

static int setup(mk_exec_t *e, const mk_exec_opts_t *o, MPI_Comm world)
{
    int nl = 2 * o->plan.model.num_layers + 2;
    e->o = o;
    if (mk_comm_init(&e->comm, world, o->plan.dp, o->plan.pp, o->plan.tp) < 0) return -1;
    mk_runtime_bind(&e->comm);
    e->vpp = o->plan.vpp;
    e->nvs = o->plan.pp * o->plan.vpp;
    e->m = o->plan.gbs / (o->plan.dp * o->plan.mbs);
    e->N = o->plan.mbs * o->plan.model.seq;
    e->bnd = malloc((e->nvs + 1) * sizeof *e->bnd);
    for (int i = 0; i <= e->nvs; i++)
        e->bnd[i] = o->plan.bounds[i];
    int *own = calloc(nl, sizeof *own);
    setup_chunks(e, own);
    int tied_copy = o->plan.pp > 1 && own[nl - 1];
    e->run.loss_scale = 1.0f / ((float)o->plan.gbs * o->plan.model.seq);
    e->run.allreduce = mk_exec_tp_allreduce;
    e->run.ctx = e;
    mk_exec_tp_setup(e);
    e->g = mk_gpt_new(&o->plan.model, o->be, o->plan.tp, e->comm.tp_rank, own, tied_copy, &e->run);
    free(own);
    if (!e->g || mk_gpt_run_init(&e->run, e->g, o->plan.mbs) < 0) return -1;
    mk_gpt_init_params(e->g, o->seed);
    e->tok = calloc(e->m, sizeof *e->tok);
    e->tgt = calloc(e->m, sizeof *e->tgt);
    for (int mb = 0; mb < e->m; mb++) {
        e->tok[mb] = calloc(e->N, sizeof(int));
        e->tgt[mb] = calloc(e->N, sizeof(int));
    }
    e->dpreq = malloc(nl * sizeof *e->dpreq);
    for (int l = 0; l < nl; l++) e->dpreq[l] = MPI_REQUEST_NULL;
    e->dpstate = calloc(nl, sizeof *e->dpstate);
    if (!(e->ga = mk_gpt_alloc(&e->run, e->g, (size_t)e->N * o->plan.model.hidden)) ||
        !(e->gb = mk_gpt_alloc(&e->run, e->g, (size_t)e->N * o->plan.model.hidden)))
        return -1;
    return 0;
}

static void teardown(mk_exec_t *e)
{
    for (int v = 0; e->ch && v < e->vpp; v++) {
        mk_chunk_t *c = &e->ch[v];
        for (int i = 0; e->g && i < e->m * (c->l1 - c->l0); i++)
            mk_gpt_act_clear(&e->run, e->g, c->l0 + i % (c->l1 - c->l0), &c->act[i]);
        free(c->act); free(c->out); free(c->gin); free(c->gout);
    }
    free(e->ch);
    for (int mb = 0; e->tok && mb < e->m; mb++) { free(e->tok[mb]); free(e->tgt[mb]); }
    free(e->tok); free(e->tgt);
    if (e->g) {
        mk_gpt_release(&e->run, e->g, e->ga, (size_t)e->N * e->g->C);
        mk_gpt_release(&e->run, e->g, e->gb, (size_t)e->N * e->g->C);
        if (e->run.s_a) mk_gpt_run_free(&e->run, e->g);
    }
    mk_gpt_free(e->g);
    mk_sched_free(e->sched);
    free(e->ev); free(e->dpt0);
    free(e->bnd); free(e->dpreq); free(e->dpstate); free(e->dphost); free(e->pend);
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
    int pp = o->plan.pp;
    unsigned long long *peak = calloc(pp, sizeof *peak);
    peak[e->comm.pp_rank] = e->run.mem_peak;
    MPI_Allreduce(MPI_IN_PLACE, peak, pp, MPI_UNSIGNED_LONG_LONG, MPI_MAX, e->comm.world);
    res->peak_mem = calloc(pp, sizeof *res->peak_mem);
    for (int i = 0; i < pp; i++) res->peak_mem[i] = peak[i];
    free(peak);
    int n = o->steps > 1 ? o->steps - 1 : o->steps;
    double *t = malloc((n ? n : 1) * sizeof *t);
    if (n) memcpy(t, res->step_times + (o->steps - n), n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_double);
    res->step_time = n ? (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2])) : 0.0;
    res->tokens_per_s = res->step_time > 0 ? (double)o->plan.gbs * o->plan.model.seq / res->step_time : 0.0;
    free(t);
}

int mk_exec_train(const mk_exec_opts_t *o, void *world_p, mk_exec_result_t *res)
{
    MPI_Comm world = *(MPI_Comm *)world_p;
    mk_exec_t e;
    memset(&e, 0, sizeof e);
    memset(res, 0, sizeof *res);
    int rc = setup(&e, o, world);
    if (rc == 0 && !(e.sched = mk_exec_build_sched(o))) rc = -1;
    res->steps = o->steps;
    res->losses = calloc(o->steps + 1, sizeof *res->losses);
    res->step_times = calloc(o->steps + 1, sizeof *res->step_times);
    int tty = o->progress && e.comm.rank == 0;
    for (int k = 0; rc == 0 && k < o->steps; k++) {
        mk_exec_make_batch(&e, k);
        if (o->trace && k == o->steps - 1) mk_exec_trace_start(&e);
        double t0 = mk_time_now();
        rc = mk_exec_step(&e, k);
        mk_exec_trace_peak(&e);
        e.tracing = 0;
        res->step_times[k] = mk_time_now() - t0;
        res->losses[k] = e.step_loss;
        if (tty && rc == 0)
            fprintf(stderr, "step %4d/%d  loss %.6f  %.1f ms  %.0f tokens/s\n", k + 1, o->steps,
                    e.step_loss, 1e3 * res->step_times[k],
                    (double)o->plan.gbs * o->plan.model.seq / res->step_times[k]);
    }
    if (rc == 0) finish_result(&e, res);
    if (rc == 0 && o->trace && mk_exec_trace_write(&e, o->trace) < 0) rc = -1;
    teardown(&e);
    return rc;
}

void mk_exec_result_free(mk_exec_result_t *r)
{
    free(r->losses);
    free(r->step_times);
    free(r->peak_mem);
    memset(r, 0, sizeof *r);
}
