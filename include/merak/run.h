/* The entry points that run over MPI: the executor (merak/exec.h:
 * mk_exec_train, mk_exec_bind) and the planner's search split over ranks.
 * The umbrella <merak/merak.h> does not include this header, so a program
 * that only plans needs no MPI; one that includes it is built with mpicc.
 * Every function here is collective over MPI_COMM_WORLD (MPI initialised,
 * with MPI_THREAD_FUNNELED or more for mk_planner_mpi_jobs' threads). */
#ifndef MERAK_RUN_H
#define MERAK_RUN_H

#include "merak/exec.h"
#include "merak/planner.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The search of mk_planner_search with o->rank, o->size the world's: each
 * rank searches every size-th (layout, micro-batch) pair, the ranks share
 * their K best while they search (pruning at the K-th best of all), and
 * rank 0 gets the merged top K and counters in r.  0, or -1 on every rank
 * with the lowest failing rank's message ("rank R: ..." for R > 0). */
MK_API int mk_planner_search_mpi(const mk_model_config_t *m, const mk_cluster_t *cl, mk_planner_opts_t *o,
                          mk_planner_result_t *r);

/* Its parts. The K-best exchange behind mk_planner_opts_t.share
 * (MPI_Iallreduce of the ranks' K best step times, merged by a user op);
 * opaque.  NULL on failure (mk_error_last). */
typedef struct mk_planner_share mk_planner_share_t;
MK_API mk_planner_share_t *mk_planner_share_new(int top);
MK_API void mk_planner_share_free(mk_planner_share_t *s);
/* The planner's share callback; ctx is an mk_planner_share_t. */
MK_API int mk_planner_share(void *ctx, const double *mine, int n, int done, double *all);
/* Whether any rank's search failed (failed: this one's).  Returns 1 and,
 * on every rank, the lowest failing rank's message in err ("rank R: ..."
 * for R > 0), or 0 when none failed. */
MK_API int mk_planner_mpi_failed(int failed, char *err, size_t n);
/* Rank 0 receives every rank's top-K list and the counters, merged into r. */
MK_API int mk_planner_mpi_merge(mk_planner_result_t *r, int top);

/* Run fn(ctx, j, out + j * item) for every job j < n: job j on rank
 * j % size (MPI, when initialised; else all here), a rank's jobs over
 * its cores (threads).  Rank 0 then holds every job's item in out.  fn
 * must be thread-safe.  Returns 0, or -1 (mk_error_last). */
MK_API int mk_planner_mpi_jobs(int n, void (*fn)(void *ctx, int j, void *out), void *ctx, void *out, size_t item);
/* The cores this process may use: those of its binding (hwloc), divided
 * among the MPI ranks of its node; at least 1. */
MK_API int mk_planner_mpi_cores(void);

#ifdef __cplusplus
}
#endif
#endif
