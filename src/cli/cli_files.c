/* Output flags checked before any work: a typo in --save must not cost a
 * training run (the file is written hours later, by rank 0). */
#include "config.h"
#include "cli/cli.h"
#include "merak/common.h"
#include "merak/fileio.h"

#include <mpi.h>
#include <string.h>

static int check_outputs(const mk_args_t *a)
{
    const struct { const char *flag, *path, *what; } outs[] = {
        {"--save", a->save, "checkpoint"},
        {"--trace", a->trace_file, "trace file"},
        {"--save-plan", a->save_plan, "plan file"},
        {"--out", a->out, "profile"},
    };
    size_t n = sizeof outs / sizeof outs[0];
    for (size_t i = 0; i < n; i++) {
        if (!outs[i].path) continue;
        for (size_t k = 0; k < i; k++) /* one would silently replace the other */
            if (outs[k].path && !strcmp(outs[k].path, outs[i].path))
                return mk_cli_fail(a->cmd, "%s and %s name the same file '%s'", outs[k].flag, outs[i].flag,
                                   outs[i].path);
        if (mk_file_check_output(outs[i].path, outs[i].what) < 0)
            return mk_cli_fail(a->cmd, "%s: %s", outs[i].flag, mk_error_last());
    }
    return 0;
}

int mk_args_check_outputs(const mk_args_t *a, int mpi)
{
    int rank = 0, rc = 0;
    if (mpi) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) rc = check_outputs(a);
    if (mpi) MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}
