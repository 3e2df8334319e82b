/* `merak profile`: measure this machine (under mpiexec, or one rank) and
 * write a cluster JSON for `merak sim/plan --cluster FILE`. */
#include "config.h"
#include "cli/cli.h"
#include "merak/profile.h"

#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *profile_usage =
    "usage: [mpiexec -n N] merak profile [--out FILE] [--model M | model flags] [--json] [--quick]\n\n"
    "Measure this machine as the executor uses it: backend GEMM throughput over the\n"
    "model's shapes (fit of the cost model's gemm_eff and gemm_half_dim), memory\n"
    "bandwidth, elementwise FLOP/s, per-kernel overhead, MPI p2p latency and\n"
    "bandwidth (intra- and inter-node) and all-reduce times between the ranks;\n"
    "hwloc says which ranks share a socket or a node (gpus_per_node = ranks per\n"
    "node).  Writes a cluster JSON (traces/README.md) atomically; rank 0 reports.\n\n"
    "  --out FILE   cluster JSON to write (default @out@)\n"
    "  --model M    whose GEMM shapes to measure (default @model@ and generic widths)\n"
    "  --json       the measurements as one JSON object on stdout\n"
    "  --quick      fewer repetitions (tests)\n";

static const mk_cli_defaults_t profile_defaults = {.model = "gpt-tiny", .out = "profile.json"};

static void print_text(const mk_profile_t *p, const char *out)
{
    const mk_cluster_t *c = &p->c;
    printf("merak profile: %s\n", p->note);
    printf("GEMM (backend sgemm, %d shapes): peak %.2f GFLOP/s; backward fit rate(d) = %.2f GFLOP/s * d/(d + %.1f), "
           "rms error %.1f%%; forwards take %.3fx the curve's time\n", p->n_gemm, p->gemm_peak / 1e9,
           p->gemm_fit_rate / 1e9, p->gemm_fit_half, 100 * p->gemm_fit_rms, p->gemm_fwd_scale);
    printf("  -> matmul_flops %.3g, gemm_eff %.3f, gemm_half_dim %.1f, gemm_fwd_scale %.3f\n", p->iso.matmul_flops[0],
           c->dev.gemm_eff, c->dev.gemm_half_dim, p->iso.gemm_fwd_scale);
    if (p->attn_rate > 0)
        printf("attention core (loops) at the model's shape: forward %.2f, backward %.2f GFLOP/s -> "
               "attention_flops, attention_bwd_flops\n", p->attn_rate / 1e9, p->attn_bwd_rate / 1e9);
    char t1[32], t2[32];
    printf("memory %.2f GB/s, vector (GELU) %.2f GFLOP/s, kernel overhead %s, memory per rank %s\n",
           p->iso.mem_bw_Bps / 1e9, p->iso.vector_flops / 1e9, mk_fmt_seconds(t1, sizeof t1, c->dev.launch_s),
           mk_fmt_bytes(t2, sizeof t2, c->dev.mem_bytes));
    if (p->step_mbs) {
        static const char *cls[3] = {"GEMMs", "attention core", "other ops"};
        printf("in the model's training step (%d micro-batches of 1 sequence, minimum): ms per micro-batch, "
               "measured / predicted from the isolated figures\n", p->step_mbs);
        for (int k = 0; k < 3; k++)
            printf("  %-15s forward %8.3f / %8.3f   backward %8.3f / %8.3f\n", cls[k], 1e3 * p->step_meas[0][k],
                   1e3 * p->step_iso[0][k], 1e3 * p->step_meas[1][k], 1e3 * p->step_iso[1][k]);
        printf("  optimizer step %.3f ms (the isolated memory bandwidth would give %.3f)\n", 1e3 * p->step_opt,
               1e3 * p->step_opt * c->dev.mem_bw_Bps / p->iso.mem_bw_Bps);
        printf("  -> mem_bw %.2f GB/s, matmul_flops %.3g, gemm_fwd_scale %.3f, attention %.2f / %.2f GFLOP/s, vector %.2f / %.2f "
               "GFLOP/s (forward / backward)\n", c->dev.mem_bw_Bps / 1e9, c->dev.matmul_flops[0], c->dev.gemm_fwd_scale,
               c->dev.attention_flops / 1e9, c->dev.attention_bwd_flops / 1e9, c->dev.vector_flops / 1e9,
               c->dev.vector_bwd_flops / 1e9);
    }
    printf("intra: alpha %s, beta %.2f GB/s%s\n", mk_fmt_seconds(t1, sizeof t1, c->intra.alpha_s),
           c->intra.beta_Bps / 1e9, p->intra_measured ? "" : " (not measured)");
    printf("inter: alpha %s, beta %.2f GB/s%s\n", mk_fmt_seconds(t1, sizeof t1, c->inter.alpha_s),
           c->inter.beta_Bps / 1e9, p->inter_measured ? "" : " (copied from intra: no second host)");
    if (p->ranks > 1) {
        printf("all-reduce over %d ranks:   bytes   measured s   model s   error\n", p->ranks);
        for (int i = 0; i < p->n_ar; i++)
            printf("  %30.0f   %10.3g   %7.3g   %+5.1f%%\n", p->ar[i].x, p->ar[i].y, p->ar[i].z,
                   100 * (p->ar[i].z - p->ar[i].y) / p->ar[i].y);
    }
    printf("wrote %s (%s)\n", out, mk_fmt_seconds(t1, sizeof t1, p->seconds));
}

static json_t *samples(const mk_prof_sample_t *s, int n, const char *x, const char *y, const char *z)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack("{s:f, s:f}", x, s[i].x, y, s[i].y);
        if (z) json_object_set_new(o, z, json_real(s[i].z));
        json_array_append_new(a, o);
    }
    return a;
}

static void print_json(const mk_profile_t *p, const char *out)
{
    json_t *g = json_array();
    for (int i = 0; i < p->n_gemm; i++)
        json_array_append_new(g, json_pack("{s:i, s:i, s:i, s:i, s:f, s:f}", "m", p->gemm[i].m, "k", p->gemm[i].k, "n",
                                           p->gemm[i].n, "kind", p->gemm[i].kind, "d", p->gemm[i].x, "flops_per_s",
                                           p->gemm[i].y));
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:b, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:o, s:o, s:f}",
                          "out", out, "about", p->note, "ranks", p->ranks, "nodes", p->nodes, "ranks_per_node",
                          p->ranks_per_node, "same_package", p->same_package, "gemm_peak", p->gemm_peak,
                          "gemm_fit_rate", p->gemm_fit_rate, "gemm_fit_half_dim", p->gemm_fit_half,
                          "gemm_fit_rms", p->gemm_fit_rms, "gemm_fwd_scale", p->gemm_fwd_scale,
                          "attention_flops_per_s", p->attn_rate, "gemm", g,
                          "p2p_intra", samples(p->p2p, p->n_p2p, "bytes", "s", NULL), "p2p_inter",
                          samples(p->inter, p->n_inter, "bytes", "s", NULL), "allreduce",
                          samples(p->ar, p->n_ar, "bytes", "s", "model_s"), "seconds", p->seconds);
    if (p->step_mbs) {
        json_t *s = json_pack("{s:i}", "micro_batches", p->step_mbs);
        static const char *keys[2][2] = {{"forward_measured_s", "forward_isolated_s"},
                                         {"backward_measured_s", "backward_isolated_s"}};
        for (int dir = 0; dir < 2; dir++) {
            json_object_set_new(s, keys[dir][0], json_pack("{s:f, s:f, s:f}", "gemm", p->step_meas[dir][0],
                                                           "attention", p->step_meas[dir][1], "other", p->step_meas[dir][2]));
            json_object_set_new(s, keys[dir][1], json_pack("{s:f, s:f, s:f}", "gemm", p->step_iso[dir][0],
                                                           "attention", p->step_iso[dir][1], "other", p->step_iso[dir][2]));
        }
        json_object_set_new(j, "step", s);
    }
    json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
    fputc('\n', stdout);
    json_decref(j);
}

static int take_bool(int *argc, char **argv, const char *flag)
{
    for (int i = 1; i < *argc; i++)
        if (!strcmp(argv[i], flag)) {
            memmove(argv + i, argv + i + 1, (*argc - i) * sizeof *argv);
            (*argc)--;
            return 1;
        }
    return 0;
}

int mk_cmd_profile(int argc, char **argv)
{
    int rank = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int saved = -1;
    if (rank) { /* parse errors: one line, from rank 0 */
        fflush(stderr);
        saved = dup(2);
        if (!freopen("/dev/null", "w", stderr)) saved = -1;
    }
    mk_args_t a;
    mk_model_config_t cfg;
    int quick = take_bool(&argc, argv, "--quick");
    int rc = mk_args_parse(&a, argc, argv, MK_OPTG_MODEL | MK_OPTG_OUT | MK_OPTG_JSON, profile_usage,
                           &profile_defaults);
    if (rc == 0 && a.npos) rc = -1, mk_cli_fail("profile", "unexpected argument '%s'", a.pos[0]);
    if (rc == 0 && mk_args_model(&a, profile_defaults.model, &cfg) < 0) rc = -1;
    const char *out = rc == 0 && a.out ? a.out : profile_defaults.out;
    /* the output must be writable before minutes of measuring */
    a.out = out;
    if (rc == 0 && rank == 0 && mk_args_check_outputs(&a, 0)) rc = -1;
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank && saved >= 0) {
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
    }
    if (rc) {
        MPI_Finalize();
        return rc < 0 ? MK_EXIT_USAGE : 0;
    }
    static mk_profile_t p;
    if (mk_profile_run(MPI_COMM_WORLD, &cfg, quick, &p) < 0) {
        fprintf(stderr, "merak profile: rank %d: %s\n", rank, mk_error_last());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int status = 0;
    if (rank == 0) {
        if (mk_profile_write(&p, out) < 0) status = mk_cli_fail("profile", "%s", mk_error_last());
        else if (a.json) print_json(&p, out);
        else print_text(&p, out);
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
