/* merak: the command-line entry point.  Dispatches to a subcommand; every
 * subcommand parses its own flags (cli_args.c) and returns the exit status. */
#include "config.h"
#include "cli/cli.h"
#include "merak/cuda.h"
#include "merak/fileio.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *about;
} mk_subcommand_t;

static const mk_subcommand_t mk_subcommands[] = {
    {"models", mk_cmd_models, "list model and cluster presets"},
    {"model", mk_cmd_model, "a model's layers, parameters, FLOPs and activation bytes"},
    {"sched", mk_cmd_sched, "per-stage instruction streams of a pipeline schedule"},
    {"sim", mk_cmd_sim, "simulate one training step of a plan on a cluster"},
    {"plan", mk_cmd_plan, "search the fastest 3D-parallel plan that fits"},
    {"run", mk_cmd_run, "train the GPT across MPI ranks (mpiexec -n N merak run ...)"},
    {"profile", mk_cmd_profile, "measure this machine and write a cluster JSON (under mpiexec)"},
    {"plot", mk_cmd_plot, "draw a trace as a PNG: timeline or memory (Python, matplotlib)"},
    /* MK_SUBCOMMANDS: further subcommands are listed here */
    {"trace", mk_cmd_trace, "summarise a trace, or compare a predicted and a measured one"},
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "merak: missing subcommand; usage: merak SUBCOMMAND [OPTIONS] (see 'merak --help')\n");
        return MK_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("merak (Merak-C) %s\n", PACKAGE_VERSION);
#ifdef MK_HAVE_CUDA
        printf("backends: cpu (OpenBLAS), cuda (cuBLAS; %d device(s) visible)\n", mk_cuda_device_count());
#else
        printf("backends: cpu (OpenBLAS)\n");
#endif
        return 0;
    }
    /* Ctrl-C or a kill mid-save: remove the temporary file, die of the signal */
    mk_file_cleanup_install();
    for (size_t i = 0; i < sizeof mk_subcommands / sizeof mk_subcommands[0]; i++)
        if (!strcmp(argv[1], mk_subcommands[i].name))
            return mk_subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "merak: unknown subcommand '%s' (see 'merak --help')\n", argv[1]);
    return MK_EXIT_USAGE;
}
