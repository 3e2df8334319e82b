/* merak plot timeline|memory|scaling FILE -o OUT.png [OPTIONS]: runs the
 * plotting script (plot_timeline.py, plot_memory.py, plot_scaling.py) with the Python configure found
 * importing matplotlib.  The scripts are installed in $(pkgdatadir)/plot/;
 * an uninstalled build uses the source tree's experiments/. */
#include "config.h"
#include "cli/cli.h"
#include "merak/readfile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void plot_usage(void)
{
    printf("usage: merak plot timeline|memory TRACE -o OUT.png [OPTIONS]\n"
           "       merak plot scaling PLAN.json -o OUT.png [--title TEXT]\n\n"
           "Draw a trace written by 'merak sim --trace' or 'merak run --trace' as a PNG,\n"
           "or the scaling sweep of 'merak plan --gpus N1,N2,... --json'.\n\n"
           "  timeline   one row per rank and stream, bars by instruction kind\n"
           "             (OPTIONS: --overlay TRACE2, --max-ranks N, --title TEXT)\n"
           "  memory     allocated bytes per rank over the step\n"
           "             (OPTIONS: --limit BYTES, the device memory as a dashed line)\n"
           "  scaling    tokens/s and scaling efficiency against the GPU count\n\n"
           "The scripts run with the Python that configure found importing matplotlib;\n"
           "they are read from $MERAK_DATADIR/plot, the installed data folder's plot/, or\n"
           "the source tree's experiments/ (an uninstalled build).\n");
}

#ifdef MK_PLOT_PYTHON
/* The value of argv[*i] when it is FLAG VALUE or FLAG=VALUE (advancing *i
 * past a separate value), else NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n)) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] || *i + 1 >= argc) return NULL;
    return argv[++*i];
}

/* The script's files (the trace or plan, --overlay, -o/--output) through
 * the one clash rule of merak's flags (mk_cli_check_files), before the
 * script runs: `-o` over the trace it draws is refused. */
static int plot_files(int argc, char **argv)
{
    static const char *const valued[] = {"--limit", "--window", "--title", "--max-ranks", "--view", "--bins"};
    mk_cli_file_t f[MK_CLI_FILES_MAX];
    int n = 0, pos = 0;
    for (int i = 2; i < argc; i++) {
        const char *v;
        if ((v = flag_value(argc, argv, &i, "-o")) || (v = flag_value(argc, argv, &i, "--output")))
            n = mk_cli_file_add(f, n, "-o", v, "plot");
        else if ((v = flag_value(argc, argv, &i, "--overlay")))
            n = mk_cli_file_add(f, n, "--overlay", v, NULL);
        else if (argv[i][0] != '-' && !pos++)
            n = mk_cli_file_add(f, n, strcmp(argv[1], "scaling") ? "the trace" : "the plan", argv[i], NULL);
        else
            for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
                if (flag_value(argc, argv, &i, valued[k])) break;
    }
    return mk_cli_check_files("plot", f, n);
}

/* The first of DIR/plot/NAME (installed) and the source tree's
 * experiments/NAME that exists, into buf; -1 when neither does. */
static int plot_script(const char *name, char *buf, size_t n)
{
    const char *dirs[] = {mk_data_dir(), MK_SRCDIR};
    const char *sub[] = {"plot", "experiments"};
    for (int i = 0; i < 2; i++) {
        int len = snprintf(buf, n, "%s/%s/%s", dirs[i], sub[i], name);
        if (*dirs[i] && len > 0 && (size_t)len < n && access(buf, R_OK) == 0) return 0;
    }
    return -1;
}
#endif

int mk_cmd_plot(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) return plot_usage(), 0;
    if (argc < 2) return mk_cli_fail("plot", "missing kind: timeline, memory or scaling (see 'merak plot --help')");
    const char *script = !strcmp(argv[1], "timeline") ? "plot_timeline.py"
                         : !strcmp(argv[1], "memory")  ? "plot_memory.py"
                         : !strcmp(argv[1], "scaling") ? "plot_scaling.py" : NULL;
    if (!script) return mk_cli_fail("plot", "unknown kind '%s': timeline, memory or scaling", argv[1]);
#ifndef MK_PLOT_PYTHON
    return mk_cli_fail("plot", "this build has no Python with matplotlib (configure found none: "
                       "install 'python3-matplotlib' and configure again)");
#else
    char path[4096];
    if (plot_script(script, path, sizeof path) < 0)
        return mk_cli_fail("plot", "%s not found in %s/plot (set MERAK_DATADIR to the data folder)", script,
                           mk_data_dir());
    if (plot_files(argc, argv)) return MK_EXIT_USAGE;
    /* python SCRIPT ARGS...: argv[2..] (the trace, -o, the script's options) as given */
    char *args[argc + 2];
    args[0] = (char *)MK_PLOT_PYTHON;
    args[1] = path;
    for (int i = 2; i <= argc; i++) args[i] = argv[i];
    fflush(NULL);
    execvp(args[0], args);
    return mk_cli_fail("plot", "cannot run %s: %s", MK_PLOT_PYTHON, strerror(errno));
#endif
}
