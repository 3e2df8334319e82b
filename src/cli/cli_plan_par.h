/* merak plan's parallel parts (cli_plan_par.c): the main search split
 * over MPI ranks that share their K best while they search, and the
 * alternative searches (--explain, --what-if, --gpus lists) spread over
 * the ranks and each rank's cores. */
#ifndef MERAK_CLI_PLAN_PAR_H
#define MERAK_CLI_PLAN_PAR_H

#include "merak/planner.h"

#include <stddef.h>

/* The K-best exchange behind mk_planner_opts_t.share (MPI_Iallreduce of
 * the ranks' K best step times, merged by a user op); opaque. */
typedef struct mk_cli_share mk_cli_share_t;
/* Collective over MPI_COMM_WORLD; NULL on failure (mk_error_last). */
mk_cli_share_t *mk_cli_share_new(int top);
void mk_cli_share_free(mk_cli_share_t *s);
/* The planner's share callback; ctx is an mk_cli_share_t. */
int mk_cli_share(void *ctx, const double *mine, int n, int done, double *all);

/* Collective: whether any rank's search failed (failed: this one's).
 * Returns 1 and, on every rank, the lowest failing rank's message in err
 * ("rank R: ..." for R > 0), or 0 when none failed. */
int mk_cli_par_failed(int failed, char *err, size_t n);

/* Collective: rank 0 receives every rank's top-K list and the counters,
 * and merges them into r. */
int mk_cli_par_merge(mk_planner_result_t *r, int top);

/* Run fn(ctx, j, out + j * item) for every job j < n: job j on rank
 * j % size (MPI, when initialised), a rank's jobs over its cores
 * (threads).  Rank 0 then holds every job's item in out.  fn must be
 * thread-safe.  Returns 0, or -1 (mk_error_last). */
int mk_cli_par_jobs(int n, void (*fn)(void *ctx, int j, void *out), void *ctx, void *out, size_t item);

/* The cores this process may use: those of its binding (hwloc), divided
 * among the MPI ranks of its node; at least 1. */
int mk_cli_par_cores(void);

#endif
