/* merak: the command-line entry point.  Dispatches to a subcommand; every
 * subcommand parses its own flags (cli_args.c) and returns the exit status. */
#include "config.h"
#include "cli/cli.h"
#include "merak/cuda.h"
#include "merak/fileio.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *about;
} mk_subcommand_t;

static int print_version(int argc, char **argv);

static const mk_subcommand_t mk_subcommands[] = {
    {"models", mk_cmd_models, "list model and cluster presets"},
    {"model", mk_cmd_model, "a model's layers, parameters, FLOPs and activation bytes"},
    {"sched", mk_cmd_sched, "per-stage instruction streams of a pipeline schedule"},
    {"sim", mk_cmd_sim, "simulate one training step of a plan on a cluster"},
    {"plan", mk_cmd_plan, "search the fastest 3D-parallel plan that fits"},
    {"run", mk_cmd_run, "train a GPT, Llama or MoE model across MPI ranks (mpiexec -n N merak run ...)"},
    {"profile", mk_cmd_profile, "measure this machine and write a cluster JSON (under mpiexec)"},
    {"plot", mk_cmd_plot, "draw a trace as a PNG: timeline or memory (Python, matplotlib)"},
    /* MK_SUBCOMMANDS: further subcommands are listed here */
    {"trace", mk_cmd_trace, "summarise a trace, or compare a predicted and a measured one"},
    {"version", print_version, "the package version and the build's features (CUDA, MPI)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: merak [--help] [--version] SUBCOMMAND [OPTIONS]\n\n"
               "Automated 3D parallelism (data x pipeline x tensor) for transformer training.\n\n"
               "Subcommands:\n");
    for (size_t i = 0; i < sizeof mk_subcommands / sizeof mk_subcommands[0]; i++)
        fprintf(f, "  %-8s %s\n", mk_subcommands[i].name, mk_subcommands[i].about);
    fprintf(f, "\n'merak SUBCOMMAND --help' describes a subcommand's options.\n");
}

static const mk_subcommand_t *find_subcommand(const char *name)
{
    for (size_t i = 0; i < sizeof mk_subcommands / sizeof mk_subcommands[0]; i++)
        if (!strcmp(name, mk_subcommands[i].name)) return &mk_subcommands[i];
    return NULL;
}

/* The MPI library's own first line (MPI_Get_library_version may be called
 * before MPI_Init, MPI 3.0 section 8.1.1), e.g. "MPICH Version: 4.0.2". */
static void mpi_line(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0, major = 0, minor = 0;
    MPI_Get_library_version(lib, &n);
    lib[n > 0 && n < (int)sizeof lib ? n : 0] = 0;
    lib[strcspn(lib, "\r\n")] = 0;
    for (char *t = lib; *t; t++)
        if (*t == '\t') *t = ' ';
    MPI_Get_version(&major, &minor);
    printf("mpi: %s (MPI %d.%d)\n", *lib ? lib : "unknown library", major, minor);
}

/* merak --version / merak version: the package version, then one line
 * per build feature (scripts grep "cuda: yes"). */
static int print_version(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: merak version (or merak --version)\n\n"
               "Print the package version and the build's features: CUDA backend, MPI library, BLAS.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "merak version: unexpected argument '%s'\n", argv[1]);
        return MK_EXIT_USAGE;
    }
    printf("merak (Merak-C) %s\n", PACKAGE_VERSION);
    if (mk_cuda_unavailable())
        printf("cuda: no (%s)\n", mk_cuda_unavailable());
    else
        printf("cuda: yes (cuBLAS, module %s; %d device(s) visible)\n", mk_cuda_module_path(),
               mk_cuda_device_count());
    mpi_line();
    char blas[256];
    mk_cli_blas_describe(blas, sizeof blas);
    printf("blas: OpenBLAS, %s, for the cpu backend\n", blas);
    return 0;
}

/* The library's lines (mk_log): only the program prints them. */
static void log_to_stderr(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "%s\n", line);
}

int main(int argc, char **argv)
{
    mk_log_set_handler(log_to_stderr, NULL);
    mk_cli_blas_select(argv); /* OpenBLAS's generic kernels on a newer CPU: run again with better ones */
    if (argc < 2) {
        fprintf(stderr, "merak: missing subcommand; usage: merak SUBCOMMAND [OPTIONS] (see 'merak --help')\n");
        return MK_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2) {
        /* merak help SUBCOMMAND: that subcommand's --help */
        char *sub[] = {argv[2], "--help", NULL};
        const mk_subcommand_t *c = find_subcommand(argv[2]);
        if (c) return c->run(2, sub);
        fprintf(stderr, "merak: unknown subcommand '%s' (see 'merak --help')\n", argv[2]);
        return MK_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
        return print_version(argc - 1, argv + 1);
    /* Ctrl-C or a kill mid-save: remove the temporary file, die of the signal */
    mk_file_cleanup_install();
    if (mk_test_env_check() < 0) { /* a test hook set to garbage would fire where it should not */
        fprintf(stderr, "merak: %s\n", mk_error_last());
        return MK_EXIT_USAGE;
    }
    const mk_subcommand_t *c = find_subcommand(argv[1]);
    if (c) return c->run(argc - 1, argv + 1);
    fprintf(stderr, "merak: unknown subcommand '%s' (see 'merak --help')\n", argv[1]);
    return MK_EXIT_USAGE;
}
