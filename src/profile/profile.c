/* `merak profile`: measurements and the fit to the cost model's fields
 * (the method is described in include/merak/profile.h). */
#include "merak/jsonio.h"
#include "config.h"
#include "merak/exec.h"
#include "merak/backend.h"
#include "merak/cost.h"
#include "merak/profile.h"

#include <hwloc.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double now(void) { return MPI_Wtime(); }

/* Best (minimum) over `reps` timings of fn, each repeating fn until min_s
 * has passed (short kernels are timed in batches): the minimum rejects
 * interference from other jobs on shared cores, where a median does not.
 * All ranks run at once; the slowest rank's figure is what a step sees. */
typedef void (*kern_fn)(void *arg);
static double time_kernel(MPI_Comm comm, kern_fn fn, void *arg, double min_s, int reps)
{
    double best = 1e30;
    fn(arg); /* warm */
    MPI_Barrier(comm);
    for (int r = 0; r < reps; r++) {
        long n = 0;
        double t0 = now(), t1;
        do { fn(arg); n++; } while ((t1 = now()) - t0 < min_s);
        if ((t1 - t0) / n < best) best = (t1 - t0) / n;
    }
    MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, comm);
    return best;
}

typedef struct {
    const mk_backend_t *be;
    float *a, *b, *c;
    int m, k, n, kind; /* kind 0 fwd, 1 bwd_in, 2 bwd_w */
    size_t len;
} karg_t;

static void k_gemm(void *p)
{
    karg_t *g = p;
    if (g->kind == 0) g->be->linear_fwd(g->be->ctx, g->c, g->a, g->b, NULL, g->m, g->k, g->n);
    else if (g->kind == 1) g->be->linear_bwd_in(g->be->ctx, g->c, g->a, g->b, g->m, g->k, g->n);
    else g->be->linear_bwd_w(g->be->ctx, g->c, NULL, g->a, g->b, g->m, g->k, g->n);
}
static void k_add(void *p) { karg_t *g = p; g->be->add(g->be->ctx, g->c, g->a, g->b, (int)g->len); }
static void k_gelu(void *p) { karg_t *g = p; g->be->gelu_fwd(g->be->ctx, g->c, g->a, (int)g->len); }
static void k_tiny(void *p) { karg_t *g = p; g->be->acc(g->be->ctx, g->c, g->a, 1); }
typedef struct {
    const mk_backend_t *be;
    int T, nh, hs;
    float *qkv, *att, *out, *dqkv, *datt;
} attn_t;
static void k_attn_fwd(void *p)
{
    attn_t *a = p; /* one sequence */
    a->be->attention_fwd(a->be->ctx, a->out, a->att, a->qkv, 1, a->T, a->nh, a->nh, a->hs, 0);
}
static void k_attn_bwd(void *p)
{
    attn_t *a = p; /* the output gradient: the forward's output stands in */
    a->be->attention_bwd(a->be->ctx, a->dqkv, a->datt, a->out, a->qkv, a->att, 1, a->T, a->nh, a->nh, a->hs);
}
static void k_copy(void *p) { karg_t *g = p; memcpy(g->c, g->a, g->len * sizeof(float)); }

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

/* Least squares of 1/rate = a + b/d over the backward samples (all of
 * them when only forwards were measured); then the forwards' time over
 * that curve, geometric mean, as gemm_fwd_scale (1 when not measured). */
static void fit_gemm(mk_profile_t *p)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int n = 0, nb = 0;
    for (int i = 0; i < p->n_gemm; i++) nb += p->gemm[i].kind != 0;
    for (int i = 0; i < p->n_gemm; i++) {
        if (nb && p->gemm[i].kind == 0) continue;
        double x = 1.0 / p->gemm[i].x, y = 1.0 / p->gemm[i].y;
        sx += x, sy += y, sxx += x * x, sxy += x * y, n++;
    }
    double den = n * sxx - sx * sx, b = den > 0 ? (n * sxy - sx * sy) / den : 0, a = (sy - b * sx) / n;
    if (!(a > 0) || b < 0) { /* degenerate: a flat curve at the mean rate */
        b = 0;
        a = sy / n;
    }
    p->gemm_fit_rate = 1.0 / a;
    p->gemm_fit_half = b / a;
    double e2 = 0, lsum = 0;
    int nf = 0;
    for (int i = 0; i < p->n_gemm; i++) {
        double d = p->gemm[i].x, pred = p->gemm_fit_rate * d / (d + p->gemm_fit_half);
        if (nb && p->gemm[i].kind == 0) { /* forward: time measured / time on the curve */
            lsum += log(pred / p->gemm[i].y), nf++;
            continue;
        }
        double r = (pred - p->gemm[i].y) / p->gemm[i].y;
        e2 += r * r;
    }
    p->gemm_fit_rms = n ? sqrt(e2 / n) : 0;
    p->gemm_fwd_scale = nf ? exp(lsum / nf) : 1.0;
}

static int measure_gemm(MPI_Comm comm, const mk_backend_t *be, const mk_model_config_t *cfg, int quick,
                        mk_profile_t *p)
{
    int C = cfg ? cfg->hidden : 512, F = cfg ? cfg->ffn : 4 * C;
    int T = cfg ? cfg->seq : 64;
    /* (in, out) of the model's linears, whole and as tp-2 shards */
    int io[8][2] = {{C, 3 * C}, {C, C}, {C, F}, {F, C}, {C, 3 * C / 2}, {C / 2, C}, {C, F / 2}, {F / 2, C}};
    int toks[6] = {16, 32, 64, 128, 256, 512};
    int nshape = quick ? 4 : 8, ntok = 6;
    size_t maxe = 0;
    for (int s = 0; s < nshape; s++)
        for (int t = 0; t < ntok; t++) {
            size_t m = toks[t], k = io[s][0], n = io[s][1];
            size_t e = m * k > k * n ? m * k : k * n;
            if (m * n > e) e = m * n;
            if (e > maxe) maxe = e;
        }
    karg_t g = {be, malloc(maxe * 4), malloc(maxe * 4), malloc(maxe * 4), 0, 0, 0, 0, 0};
    if (!g.a || !g.b || !g.c) return mk_error_set("profile: out of memory");
    fill(g.a, maxe), fill(g.b, maxe), memset(g.c, 0, maxe * 4);
    double min_s = quick ? 0.001 : 0.004;
    int reps = quick ? 3 : 6;
    /* two passes over the shapes, seconds apart, keeping each shape's best:
       a burst of load from other jobs then spoils one pass, not the fit */
    for (int pass = 0; pass < (quick ? 1 : 2); pass++) {
        int i = 0;
        for (int s = 0; s < nshape; s++)
            for (int t = 0; t < ntok; t++)
                for (int kind = 0; kind < 3 && i < MK_PROF_MAX; kind++) {
                    if (quick && kind) continue;
                    g.m = toks[t], g.k = io[s][0], g.n = io[s][1], g.kind = kind;
                    if (g.k < 1 || g.n < 1) continue;
                    double fl = 2.0 * g.m * g.k * g.n, sec = time_kernel(comm, k_gemm, &g, min_s, reps);
                    int d = g.m < g.k ? g.m : g.k;
                    if (g.n < d) d = g.n;
                    mk_prof_sample_t *x = &p->gemm[i++];
                    if (pass && x->y >= fl / sec) continue;
                    x->x = d, x->y = fl / sec, x->z = fl, x->m = g.m, x->k = g.k, x->n = g.n, x->kind = kind;
                    if (x->y > p->gemm_peak) p->gemm_peak = x->y;
                }
        p->n_gemm = i;
    }
    /* the backend's attention core at the model's shape, forward and
       backward: the graph counts 4*T*T*C FLOPs forward (non-causal) and
       twice that backward per sequence */
    int nh = cfg ? cfg->heads : 8, hs = C / nh;
    size_t qkv = (size_t)T * 3 * C, att = (size_t)nh * T * T;
    attn_t at = {be, T, nh, hs, calloc(qkv, 4), calloc(att, 4), calloc((size_t)T * C, 4), calloc(qkv, 4),
                 calloc(att, 4)};
    if (!at.qkv || !at.att || !at.out || !at.dqkv || !at.datt) return mk_error_set("profile: out of memory");
    fill(at.qkv, qkv);
    fill(at.out, (size_t)T * C);
    for (int pass = 0; pass < 2; pass++) {
        double tf = time_kernel(comm, k_attn_fwd, &at, min_s, reps), tb = time_kernel(comm, k_attn_bwd, &at, min_s, reps);
        double rf = 4.0 * T * T * C / tf, rb = 8.0 * T * T * C / tb;
        if (rf > p->attn_rate) p->attn_rate = rf;
        if (rb > p->attn_bwd_rate) p->attn_bwd_rate = rb;
    }
    free(at.qkv), free(at.att), free(at.out), free(at.dqkv), free(at.datt);
    free(g.a), free(g.b), free(g.c);
    fit_gemm(p);
    return 0;
}

static void k_gelu_bwd(void *p) { karg_t *g = p; g->be->gelu_bwd(g->be->ctx, g->c, g->a, g->b, (int)g->len); }

static int measure_device(MPI_Comm comm, const mk_backend_t *be, const mk_model_config_t *cfg, int quick,
                          mk_profile_t *p)
{
    /* vector_flops: GELU over one micro-batch's MLP activations (T x ffn,
       cache-resident as in training), forward and backward; the cost model
       charges the backward twice the forward's vector FLOPs, so the rate
       that makes forward + backward right is 3 * 20n / (t_fwd + t_bwd) */
    size_t nv = cfg ? (size_t)cfg->seq * cfg->ffn : 1 << 17;
    karg_t v = {be, malloc(nv * 4), malloc(nv * 4), malloc(nv * 4), 0, 0, 0, 0, nv};
    if (!v.a || !v.b || !v.c) return mk_error_set("profile: out of memory");
    fill(v.a, nv), fill(v.b, nv), memset(v.c, 0, nv * 4);
    double tgf = 1e30, tgb = 1e30;
    for (int pass = 0; pass < 2; pass++) {
        double f = time_kernel(comm, k_gelu, &v, quick ? 0.002 : 0.005, 5);
        double b = time_kernel(comm, k_gelu_bwd, &v, quick ? 0.002 : 0.005, 5);
        if (f < tgf) tgf = f;
        if (b < tgb) tgb = b;
    }
    free(v.a), free(v.b), free(v.c);
    p->c.dev.vector_flops = 3 * 20.0 * nv / (tgf + tgb);
    size_t n = (size_t)(quick ? 1 : 4) << 20; /* floats per array */
    karg_t g = {be, malloc(n * 4), malloc(n * 4), malloc(n * 4), 0, 0, 0, 0, n};
    if (!g.a || !g.b || !g.c) return mk_error_set("profile: out of memory");
    fill(g.a, n), fill(g.b, n), memset(g.c, 0, n * 4);
    double min_s = quick ? 0.005 : 0.02;
    double t_add = time_kernel(comm, k_add, &g, min_s, 8);
    double t_tiny = time_kernel(comm, k_tiny, &g, 0.001, 5);
    double t_copy = time_kernel(comm, k_copy, &g, min_s, 5);
    free(g.a), free(g.b), free(g.c);
    mk_device_t *d = &p->c.dev;
    d->mem_bw_Bps = 12.0 * n / t_add;
    d->launch_s = t_tiny;
    /* one rank: the memcpy bandwidth stands in for a link (2 arrays of 4n) */
    p->c.intra.beta_Bps = 4.0 * n / t_copy;
    return 0;
}

/* One-way time of a ping-pong between ranks a and b (others idle). */
static double pingpong(MPI_Comm comm, int me, int a, int b, char *buf, int bytes, int quick)
{
    double t = 0;
    MPI_Barrier(comm);
    if (me == a || me == b) {
        int peer = me == a ? b : a, iters = bytes < 65536 ? (quick ? 50 : 400) : (quick ? 5 : 30);
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now();
            for (int i = 0; i < iters; i++) {
                if (me == a) {
                    MPI_Send(buf, bytes, MPI_CHAR, peer, 7, comm);
                    MPI_Recv(buf, bytes, MPI_CHAR, peer, 7, comm, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, bytes, MPI_CHAR, peer, 7, comm, MPI_STATUS_IGNORE);
                    MPI_Send(buf, bytes, MPI_CHAR, peer, 7, comm);
                }
            }
            double s = (now() - t0) / (2.0 * iters);
            if (s < best) best = s;
        }
        t = best;
    }
    MPI_Bcast(&t, 1, MPI_DOUBLE, a, comm);
    return t;
}

static void fit_link(const mk_prof_sample_t *s, int n, mk_link_t *l)
{
    l->alpha_s = s[0].y;
    double dt = s[n - 1].y - l->alpha_s;
    l->beta_Bps = dt > 0 ? s[n - 1].x / dt : s[n - 1].x / s[n - 1].y;
}

static const int p2p_sizes[] = {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};
#define N_P2P 8

static int measure_links(MPI_Comm comm, int quick, mk_profile_t *p, const int *node_of)
{
    int me, world;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &world);
    char *buf = calloc(4194304, 1);
    if (!buf) return mk_error_set("profile: out of memory");
    int intra = -1, inter = -1;
    for (int r = 1; r < world; r++) {
        if (intra < 0 && node_of[r] == node_of[0]) intra = r;
        if (inter < 0 && node_of[r] != node_of[0]) inter = r;
    }
    int peers[2] = {intra, inter};
    for (int w = 0; w < 2; w++) {
        if (peers[w] < 0) continue;
        mk_prof_sample_t *s = w ? p->inter : p->p2p;
        for (int i = 0; i < N_P2P; i++) {
            s[i].x = p2p_sizes[i];
            s[i].y = pingpong(comm, me, 0, peers[w], buf, p2p_sizes[i], quick);
        }
        if (w) p->n_inter = N_P2P, p->inter_measured = 1, fit_link(s, N_P2P, &p->c.inter);
        else p->n_p2p = N_P2P, p->intra_measured = 1, fit_link(s, N_P2P, &p->c.intra);
    }
    if (world == 1) {
        /* no peer: MPI's latency to itself; bandwidth of a memory copy */
        MPI_Request r;
        double t0 = now();
        int it = 1000;
        for (int i = 0; i < it; i++) {
            MPI_Isend(buf, 8, MPI_CHAR, 0, 3, comm, &r);
            MPI_Recv(buf + 64, 8, MPI_CHAR, 0, 3, comm, MPI_STATUS_IGNORE);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        p->c.intra.alpha_s = (now() - t0) / it;
    }
    free(buf);
    if (!p->inter_measured) p->c.inter = p->c.intra;
    if (!p->intra_measured && p->inter_measured) p->c.intra = p->c.inter;
    /* all-reduce over everyone, against the cost model on the fitted links */
    float *v = calloc(1 << 20, sizeof(float));
    if (!v) return mk_error_set("profile: out of memory");
    mk_group_t grp = mk_group_make(&p->c, 0, 1, world, world < p->c.gpus_per_node ? world : p->c.gpus_per_node);
    for (int bytes = 4096; bytes <= 4194304 && p->n_ar < 32; bytes *= 4) {
        int n = bytes / 4, iters = quick ? 3 : (bytes < 262144 ? 50 : 8);
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            MPI_Barrier(comm);
            double t0 = now();
            for (int i = 0; i < iters; i++) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm);
            double t = (now() - t0) / iters;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
            if (t < best) best = t;
        }
        mk_prof_sample_t *s = &p->ar[p->n_ar++];
        s->x = bytes, s->y = best;
        s->z = mk_cost_coll(&p->c, MK_COLL_ALLREDUCE, &grp, bytes);
    }
    free(v);
    return 0;
}

/* hwloc: packages, cores, memory; where this rank runs. */
static void topology(mk_profile_t *p, int *package, double *mem)
{
    hwloc_topology_t topo;
    *package = 0, *mem = 0;
    if (hwloc_topology_init(&topo) < 0) return;
    hwloc_topology_load(topo);
    p->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    p->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    if (root) {
#if HWLOC_API_VERSION >= 0x00020000
        *mem = (double)root->total_memory;
#else
        *mem = (double)root->memory.total_memory;
#endif
        const char *cpu = hwloc_obj_get_info_by_name(root, "CPUModel");
        hwloc_obj_t pk = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
        if (!cpu && pk) cpu = hwloc_obj_get_info_by_name(pk, "CPUModel");
        mk_strlcpy(p->cpu, cpu ? cpu : "unknown CPU", sizeof p->cpu);
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0) {
        hwloc_obj_t pk = hwloc_get_next_obj_covering_cpuset_by_type(topo, set, HWLOC_OBJ_PACKAGE, NULL);
        if (pk) *package = pk->logical_index;
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
}

int mk_profile_run(MPI_Comm comm, const mk_model_config_t *cfg, int quick, mk_profile_t *p)
{
    memset(p, 0, sizeof *p);
    double t0 = now();
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    p->ranks = size;
    mk_backend_t *be = mk_backend_new("cpu");
    if (!be) return -1;
    p->threads = mk_exec_bind(&comm, be, &p->kernel_threads);  /* placed as the executor places a rank */
    /* hosts: node index of each rank from the shared-memory split */
    MPI_Comm node;
    int lrank, lsize;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    MPI_Comm_free(&node);
    int *node_of = calloc(size, sizeof(int)), *pk_of = calloc(size, sizeof(int));
    int mine, pkg;
    /* node id = the lowest world rank on the node */
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Allreduce(&rank, &mine, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    double mem = 0;
    topology(p, &pkg, &mem);
    MPI_Allgather(&mine, 1, MPI_INT, node_of, 1, MPI_INT, comm);
    MPI_Allgather(&pkg, 1, MPI_INT, pk_of, 1, MPI_INT, comm);
    int nodes = 0;
    for (int r = 0; r < size; r++) nodes += node_of[r] == r;
    p->nodes = nodes;
    p->ranks_per_node = lsize;
    p->same_package = size > 1 && node_of[1] == node_of[0] && pk_of[1] == pk_of[0];
    gethostname(p->host, sizeof p->host - 1);

    mk_cluster_t *c = &p->c;
    snprintf(c->name, sizeof c->name, "profile-%.48s", p->host);
    c->gpus_per_node = lsize;
    c->max_nodes = nodes;
    c->nics_per_node = 1;
    snprintf(c->dev.name, sizeof c->dev.name, "cpu-rank-%d-thread%s", p->threads, p->threads > 1 ? "s" : "");
    c->dev.mem_bytes = mem > 0 ? mem / lsize : 1e9;
    c->dev.has_bf16 = 0;

    int rc = measure_gemm(comm, be, cfg, quick, p);
    if (rc == 0) rc = measure_device(comm, be, cfg, quick, p);
    mk_backend_free(be);
    if (rc == 0) rc = measure_links(comm, quick, p, node_of);
    free(node_of), free(pk_of);
    if (rc < 0) return -1;
    for (int i = 0; i < 3; i++) c->dev.matmul_flops[i] = p->gemm_peak;
    c->dev.gemm_eff = p->gemm_fit_rate / p->gemm_peak;
    if (c->dev.gemm_eff > 1) c->dev.gemm_eff = 1;
    c->dev.gemm_half_dim = p->gemm_fit_half;
    c->dev.gemm_fwd_scale = p->gemm_fwd_scale;
    c->dev.attention_flops = p->attn_rate;
    c->dev.attention_bwd_flops = p->attn_bwd_rate;
    p->iso = c->dev;
    if (mk_profile_step(comm, cfg, quick, p) < 0) return -1;
    int n = 0;
    n += snprintf(p->note + n, sizeof p->note - n,
                  "merak profile on %s (%s): %d rank(s) on %d host(s), %d per host, %d OpenBLAS thread(s) each",
                  p->host, p->cpu, p->ranks, p->nodes, lsize, p->threads);
    if (p->ranks > 1)
        n += snprintf(p->note + n, sizeof p->note - n, "; ranks 0 and 1 %s", p->same_package ?
                      "share a package (socket)" : "on different packages or hosts");
    if (!p->intra_measured && !p->inter_measured)
        n += snprintf(p->note + n, sizeof p->note - n,
                      "; one rank: links not measured (intra beta = memcpy bandwidth, alpha = MPI self-send)");
    if (!p->inter_measured)
        n += snprintf(p->note + n, sizeof p->note - n, "; one host: inter copies intra (not measured)");
    if (p->step_mbs)
        n += snprintf(p->note + n, sizeof p->note - n, "; compute rates fitted in the model's training step");
    else
        n += snprintf(p->note + n, sizeof p->note - n, "; compute rates isolated (no in-step phase for this model)");
    snprintf(p->note + n, sizeof p->note - n, "; fp32 only: fp16/bf16 entries copy fp32");
    p->seconds = now() - t0;
    return 0;
}

/* The cluster's fields as mk_cluster_save writes them, plus "about";
 * checked by the cluster loader before it is written (atomically). */
int mk_profile_write(const mk_profile_t *p, const char *path)
{
    json_t *j = mk_cluster_to_json(&p->c);
    if (!j) return mk_error_set("cannot encode the profile as JSON");
    json_object_set_new(j, "about", json_string(p->note));
    mk_cluster_t back;
    int rc = mk_cluster_from_json(j, path, &back);
    if (rc < 0) {
        char msg[512];
        mk_strlcpy(msg, mk_error_last(), sizeof msg);
        rc = mk_error_set("the profile does not validate: %s", msg);
    } else {
        rc = mk_json_save(j, path, "profile");
    }
    json_decref(j);
    return rc;
}
