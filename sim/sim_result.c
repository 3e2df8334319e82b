/* The result of a run: step time, throughput, FLOPs, bubbles, memory
 * peaks, exposed and overlapped communication (mk_sim_result_t), and its
 * `merak sim --json` object. */
#include "merak/jsonio.h"
#include "sim/sim_internal.h"

#include <string.h>

/* Forward FLOPs recomputed in one step, from the streams: every F or
 * F_PRE recomputes the forward of the first `ckpt` checkpointable layers
 * of its chunk (F_PRE: all of them), on every DP replica.  Full recompute
 * gives Megatron-LM's 96-convention count, none the 72 one (src/graph/README.md "The model"), partial
 * policies (stage-aware, auto, merak's last stage) what they really do. */
static double recompute_flops(const mk_sched_t *sch, const mk_plan_t *p, const mk_graph_t *g)
{
    double f = 0;
    for (int s = 0; s < p->pp; s++)
        for (int i = 0; i < sch->streams[s].n; i++) {
            const mk_instr_t *in = &sch->streams[s].v[i];
            if ((in->op != MK_INSTR_F && in->op != MK_INSTR_F_PRE) || in->ckpt <= 0) continue;
            int k = mk_plan_vstage(p, s, in->chunk), left = in->op == MK_INSTR_F_PRE ? 1 << 30 : in->ckpt;
            for (int l = p->bounds[k]; l < p->bounds[k + 1] && left > 0; l++)
                if (mk_layer_checkpointable(g, l)) f += g->layers[l].fwd_flops, left--;
        }
    return f * p->dp;
}

/* Per-stage figures: bubbles, peaks, in-flight, and the comm split. */
static void result_stages(const mk_sim_state_t *R, double step, mk_sim_result_t *out)
{
    const mk_plan_t *p = R->p;
    double worst = -1;
    for (int s = 0; s < p->pp; s++) {
        const mk_sim_stage_t *S = &R->st[s];
        out->bubble_fraction[s] = step > 0 ? 1.0 - S->busy / step : 0;
        if (out->bubble_fraction[s] < 0) out->bubble_fraction[s] = 0;
        out->peak_memory_bytes[s] = S->peak;
        out->mem[s] = S->at_peak;
        out->max_inflight[s] = S->max_inflight;
        if (S->peak > worst) worst = S->peak, out->worst_stage = s;
        for (int k = 0; k < MK_COMM_KINDS; k++) {
            double ex = S->exposed[k] < S->comm[k] ? S->exposed[k] : S->comm[k];
            out->exposed_comm_s[k] += ex / p->pp;
            out->overlapped_comm_s[k] += (S->comm[k] - ex) / p->pp;
        }
    }
    if (worst > out->memory_limit_bytes) out->fits = 0, out->shortfall_bytes = worst - out->memory_limit_bytes;
    if (!p->optimizer_offload && !p->cpu_offload_layers) return;
    double host = 0;
    for (int s = 0; s < p->pp; s++) {
        double h = R->st[s].ss.host_bytes, a = 0;
        for (int c = 0; c < p->vpp; c++) a += mk_sim_act_offload_bytes(p, R->g, mk_plan_vstage(p, s, c));
        h += a * (R->st[s].max_inflight > 0 ? R->st[s].max_inflight : 1) / p->vpp;
        if (h > host) host = h;
    }
    out->host_memory_bytes = host * R->c->gpus_per_node, out->host_limit_bytes = R->c->host.mem_bytes;
    if (!R->c->ideal && out->host_memory_bytes > out->host_limit_bytes) out->fits = 0;
}

void mk_sim_result_fill(const mk_sim_state_t *R, double step, mk_sim_result_t *out)
{
    const mk_plan_t *p = R->p;
    const mk_graph_t *g = R->g;
    const mk_cluster_t *c = R->c;
    memset(out, 0, sizeof *out);
    out->pp = p->pp;
    out->step_time_s = step;
    double gpus = (double)mk_plan_gpus(p);
    double rf = recompute_flops(R->sch, p, g);
    out->flops_recompute = rf > 0;
    out->flops_per_iteration = mk_graph_flops_per_iteration(g, p->gbs, 0) + rf;
    if (step > 0) {
        out->tokens_per_s = (double)p->gbs * g->cfg.seq / step;
        out->tflops_per_gpu = out->flops_per_iteration / step / gpus / 1e12;
        /* fp8 plans: against the bf16 peak, the bf16 plan's denominator (the
           attention core and LM head run in bf16; a faster step shows) */
        out->mfu = out->flops_per_iteration / step / gpus /
                   c->dev.matmul_flops[p->dtype == MK_DTYPE_FP8 ? MK_DTYPE_BF16 : p->dtype];
    }
    out->memory_limit_bytes = mk_cluster_usable_bytes(c);
    out->fits = 1;
    out->worst_stage = -1;
    result_stages(R, step, out);
    mk_sim_explain_fill(R, step, out);
    out->events = R->events;
    out->zero = mk_plan_zero(p);
    out->zero_group = out->zero ? mk_plan_zero_group(p) : 1;
    out->cp = p->cp > 1 ? p->cp : 1;
    out->ep = p->ep > 1 ? p->ep : 1;
}

json_t *mk_sim_result_json(const mk_sim_result_t *r, const mk_plan_t *p)
{
    json_t *bub = json_array(), *peak = json_array(), *mem = json_array(), *inf = json_array();
    for (int s = 0; s < r->pp; s++) {
        json_array_append_new(bub, json_real(r->bubble_fraction[s]));
        json_array_append_new(peak, json_real(r->peak_memory_bytes[s]));
        const mk_mem_breakdown_t *m = &r->mem[s];
        json_t *mj = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights", m->weights, "grads", m->grads,
                               "optimizer", m->optimizer, "activations", m->activations, "working", m->working,
                               "buffers", m->buffers, "total", m->total);
        /* only with ZeRO-3, so that every other result reads as before */
        if (mj && r->zero == 3) json_object_set_new(mj, "gathered", json_real(m->gathered));
        json_array_append_new(mem, mj);
        json_array_append_new(inf, json_integer(r->max_inflight[s]));
    }
    json_t *ex = json_pack("{s:f, s:f, s:f}", "pp", r->exposed_comm_s[MK_COMM_PP], "tp", r->exposed_comm_s[MK_COMM_TP],
                           "dp", r->exposed_comm_s[MK_COMM_DP]);
    json_t *ov = json_pack("{s:f, s:f, s:f}", "pp", r->overlapped_comm_s[MK_COMM_PP], "tp",
                           r->overlapped_comm_s[MK_COMM_TP], "dp", r->overlapped_comm_s[MK_COMM_DP]);
    if (r->cp > 1 && ex && ov) { /* only with CP, so that every other result reads as before */
        json_object_set_new(ex, "cp", json_real(r->exposed_comm_s[MK_COMM_CP]));
        json_object_set_new(ov, "cp", json_real(r->overlapped_comm_s[MK_COMM_CP]));
    }
    if (r->ep > 1) {
        json_object_set_new(ex, "ep", json_real(r->exposed_comm_s[MK_COMM_EP]));
        json_object_set_new(ov, "ep", json_real(r->overlapped_comm_s[MK_COMM_EP]));
    }
    json_t *j = json_pack("{s:f, s:f, s:f, s:f, s:s, s:f, s:o, s:o, s:o, s:o, s:f, s:b, s:i, s:f, s:o, s:o, s:I}",
                          "step_time_s", r->step_time_s, "tokens_per_s", r->tokens_per_s, "tflops_per_gpu",
                          r->tflops_per_gpu, "mfu", r->mfu, "flops_convention",
                          r->flops_recompute ? "72BslH^2 + recomputed forwards (96BslH^2 with full recompute)"
                                             : "72BslH^2 (without recompute)",
                          "flops_per_iteration", r->flops_per_iteration, "bubble_fraction", bub,
                          "peak_memory_bytes", peak, "memory_breakdown", mem, "max_inflight", inf,
                          "memory_limit_bytes", r->memory_limit_bytes, "fits", r->fits, "worst_stage",
                          r->worst_stage, "shortfall_bytes", r->shortfall_bytes, "exposed_comm_s", ex,
                          "overlapped_comm_s", ov, "events", (json_int_t)r->events);
    /* the attention core the step was simulated with (auto settled) */
    if (j && p) json_object_set_new(j, "attention", json_string(mk_attn_backend_name(p->attention)));
    if (j && r->host_limit_bytes > 0) { /* optimizer CPU offload only */
        json_object_set_new(j, "host_memory_bytes", json_real(r->host_memory_bytes));
        json_object_set_new(j, "host_limit_bytes", json_real(r->host_limit_bytes));
    }
    if (j) json_object_set_new(j, "explain", mk_sim_explain_json(r));
    if (j && p) json_object_set_new(j, "plan", mk_plan_to_json(p));
    return j;
}

char *mk_sim_result_json_text(const mk_sim_result_t *r, const mk_plan_t *p)
{
    json_t *j = mk_sim_result_json(r, p);
    char *s = j ? json_dumps(j, JSON_INDENT(1) | JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    if (!s) mk_error_set("out of memory");
    return s;
}
