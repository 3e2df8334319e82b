/* Files named on the command line, checked before any work (issue 32): a
 * typo in --save must not cost a training run (the file is written hours
 * later, by rank 0), and no output may replace an input or another output.
 * Clashes are found by file identity (device and inode; for a file not yet
 * there, its directory's and its name: mk_file_id), never by spelling, so
 * `--save ck/a.st --trace ./ck/a.st`, a symlink or a hard link to the
 * --data file are all caught, and so is standard output redirected to one
 * of them.  Resuming in place (--load X --save X) is the one pair allowed. */
#include "config.h"
#include "cli/cli.h"
#include "merak/common.h"
#include "merak/readfile.h"

#include <mpi.h>
#include <string.h>
#include <unistd.h>

int mk_cli_file_add(mk_cli_file_t *f, int n, const char *flag, const char *path, const char *what)
{
    if (!path || n >= MK_CLI_FILES_MAX) return n;
    f[n] = (mk_cli_file_t){flag, path, what, {0}};
    mk_file_id(path, &f[n].id);
    return n + 1;
}

/* --model / --cluster name a preset or a file (found as mk_data_path finds
 * it); only a file that exists can clash. */
static int add_data(mk_cli_file_t *f, int n, const char *flag, const char *name, char *buf)
{
    if (!name) return n;
    const char *p = mk_data_path(name, buf, MK_FILE_PATH_MAX);
    return access(p, F_OK) == 0 ? mk_cli_file_add(f, n, flag, p, NULL) : n;
}

static const char *why(const mk_cli_file_t *other)
{
    return other->what ? "one output would replace the other" : "the output would replace an input";
}

int mk_cli_check_files(const char *cmd, const mk_cli_file_t *f, int n)
{
    mk_file_id_t so;
    mk_file_id_fd(STDOUT_FILENO, &so);
    for (int i = 0; i < n; i++) {
        if (!f[i].what) continue;
        for (int k = 0; k < n; k++) {
            if (k == i || (f[k].what && k < i) || !mk_file_id_same(&f[i].id, &f[k].id)) continue;
            if (!strcmp(f[i].flag, "--save") && !strcmp(f[k].flag, "--load")) continue; /* resume in place */
            return mk_cli_fail(cmd, "%s '%s' and %s '%s' are the same file: %s", f[i].flag, f[i].path,
                               f[k].flag, f[k].path, why(&f[k]));
        }
    }
    for (int k = 0; k < n; k++)
        if (mk_file_id_same(&so, &f[k].id))
            return mk_cli_fail(cmd, "standard output and %s '%s' are the same file: %s", f[k].flag, f[k].path,
                               why(&f[k]));
    for (int i = 0; i < n; i++)
        if (f[i].what && mk_file_check_output(f[i].path, f[i].what) < 0)
            return mk_cli_fail(cmd, "%s: %s", f[i].flag, mk_error_last());
    return 0;
}

static int check_files(const mk_args_t *a)
{
    mk_cli_file_t f[MK_CLI_FILES_MAX];
    static char bufs[2][MK_FILE_PATH_MAX];
    int n = 0;
    n = mk_cli_file_add(f, n, "--save", a->save, "checkpoint");
    n = mk_cli_file_add(f, n, "--trace", a->trace_file, "trace file");
    n = mk_cli_file_add(f, n, "--save-plan", a->save_plan, "plan file");
    n = mk_cli_file_add(f, n, "--out", a->out, "profile");
    n = mk_cli_file_add(f, n, "--dump-grads", a->dump_grads, "gradient dump");
    n = mk_cli_file_add(f, n, "--data", a->data, NULL);
    n = mk_cli_file_add(f, n, "--load", a->load, NULL);
    n = mk_cli_file_add(f, n, "--plan", a->plan_file, NULL);
    n = add_data(f, n, "--model", a->model, bufs[0]);
    n = add_data(f, n, "--cluster", a->cluster, bufs[1]);
    return mk_cli_check_files(a->cmd, f, n);
}

int mk_args_check_outputs(const mk_args_t *a, int mpi)
{
    int rank = 0, rc = 0;
    if (mpi) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) rc = check_files(a);
    if (mpi) MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}
