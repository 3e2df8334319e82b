/* Host memory as the device's overflow: optimizer CPU offload (the
 * optimizer state and its step on the host: --optimizer-cpu-offload) and
 * activation offload (the first blocks' stored activations there between
 * their forward and backward: --cpu-offloading-num-layers), each costed
 * on the cluster's host figures (the device's host link, the node's host
 * memory and bandwidth; mk_host_t). */
#include "sim/sim_internal.h"

/* Optimizer CPU offload (Megatron-Core's HybridDeviceOptimizer with
 * --optimizer-cpu-offload, DeepSpeed's ZeRO-Offload): the optimizer term
 * leaves the device; the host holds it (fp32 master copy and Adam
 * moments: o bytes a parameter, plus the master copy fp32 plans keep on
 * the device too) and an fp32 copy of the gradients the CPU step reads
 * (4 bytes a parameter, the gradients going down the host link). */
void mk_sim_offload_state(const mk_plan_t *p, double opt, mk_stage_static_t *out)
{
    if (!p->optimizer_offload || opt <= 0) return;
    double per = opt + 4 + (p->dtype == MK_DTYPE_FP32 ? 4 : 0);
    out->host_bytes = out->optimizer * per / opt;
    out->optimizer = 0;
}

/* The optimizer step of `local` parameters on the CPU (optimizer CPU
 * offload): the gradients down the device's host link (their dtype), the
 * Adam step at host memory bandwidth, which the node's GPUs share (28
 * bytes a parameter read and written, as on the device: fp32 master,
 * moments and gradient in, master, moments and the 16-bit copy out), and
 * the updated weights up the link; one after the other (Megatron-Core can
 * overlap the copies with the step per parameter group: not modelled). */
double mk_sim_opt_offload_cost(const mk_sim_state_t *R, double local)
{
    double w, gr, opt;
    mk_sim_param_bytes(R->p, &w, &gr, &opt);
    const mk_host_t *h = &R->c->host;
    if (h->link_Bps <= 0 || h->mem_bw_Bps <= 0) return 0; /* refused before the run (mk_sim_run) */
    return R->c->dev.launch_s + (gr + w) * local / h->link_Bps + 28.0 * local * R->c->gpus_per_node / h->mem_bw_Bps;
}

/* Activation offload (--cpu-offloading-num-layers N): layer l's stored
 * activations go to host memory (a layer of one of the first N blocks). */
int mk_sim_act_offloaded(const mk_plan_t *p, const mk_graph_t *g, int l)
{
    int b = g->layers[l].block;
    return p->cpu_offload_layers > 0 && b >= 0 && b < p->cpu_offload_layers;
}

/* ... and the bytes chunk k sends to the host per micro-batch, one TP rank. */
double mk_sim_act_offload_bytes(const mk_plan_t *p, const mk_graph_t *g, int k)
{
    double x = 0;
    int sp = p->seqpar && p->tp > 1;
    for (int l = p->bounds[k]; l < p->bounds[k + 1]; l++)
        if (mk_sim_act_offloaded(p, g, l)) x += mk_layer_act_bytes(g, l, p->tp, sp, 0);
    return x / (p->cp > 1 ? p->cp : 1);
}

/* Activation offload: each offloaded layer's activations go down the host
 * link while the next layer's forward computes and come back while the
 * next layer's backward computes (Transformer Engine's offload: one layer
 * ahead on its own stream); what a copy takes beyond that layer's compute
 * lengthens the op.  Adds to c->f, c->b and c->bi. */
void mk_sim_act_offload_time(const mk_sim_state_t *R, mk_chunk_cost_t *c)
{
    const mk_plan_t *p = R->p;
    int l0 = p->bounds[c->k], sp = p->seqpar && p->tp > 1;
    double link = R->c->host.link_Bps, cp = p->cp > 1 ? p->cp : 1, ef = 0, eb = 0, ebi = 0;
    if (!(link > 0) || p->cpu_offload_layers <= 0 || R->o->unit_costs) return;
    for (int i = 0; i + 1 < c->nl; i++) {
        if (!mk_sim_act_offloaded(p, R->g, l0 + i)) continue;
        double t = mk_layer_act_bytes(R->g, l0 + i, p->tp, sp, 0) / cp / link;
        int nb = c->nl - 2 - i; /* layer l0 + i + 1 in the backward's order */
        ef += t > c->fwd[i + 1].c_full ? t - c->fwd[i + 1].c_full : 0;
        eb += t > c->bwd[nb].c_full ? t - c->bwd[nb].c_full : 0;
        ebi += t > c->bin[nb].c_full ? t - c->bin[nb].c_full : 0;
    }
    c->f += ef, c->b += eb, c->bi += ebi;
}
