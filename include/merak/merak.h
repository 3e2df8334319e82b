/* Merak-C's public API, the umbrella header: everything a program that
 * models, simulates and plans needs, with no MPI and no JSON library in
 * sight.  Link with $(pkg-config --cflags --libs merak).
 *
 *   merak/common.h   errors (mk_error_last), the log handler, MK_API
 *   merak/limits.h   the maximum of every number the library accepts
 *   merak/model.h    model configs and presets (mk_model_get, ...)
 *   merak/graph.h    the layer graph of a model (FLOPs, bytes, params)
 *   merak/cluster.h  clusters and presets (mk_cluster_get, mk_cluster_preset_names)
 *   merak/plan.h     a parallel plan, its checks and files, the resolved plan
 *   merak/sched.h    pipeline schedules: streams, verifier, traits
 *   merak/sim.h      the discrete-event simulator (mk_sim_new, mk_sim_run)
 *   merak/planner.h  the plan search (mk_planner_search)
 *
 * Not included here: merak/run.h, the entry points that
 * run over MPI: the executor (mk_exec_train) and the search split over
 * ranks (mk_planner_search_mpi).  A program that includes it runs under
 * mpiexec (build it with mpicc).
 *
 * Library functions return 0 or a pointer on success, -1 or NULL on
 * failure with a one-line message in mk_error_last(); they never print
 * (lines go to the handler of mk_log_set_handler) and never exit. */
#ifndef MERAK_MERAK_H
#define MERAK_MERAK_H

/* The API's version: the shared library's soname follows it (libmerak.so.1). */
#define MK_API_VERSION 1

#include "merak/common.h"
#include "merak/limits.h"
#include "merak/model.h"
#include "merak/graph.h"
#include "merak/cluster.h"
#include "merak/plan.h"
#include "merak/sched.h"
#include "merak/sim.h"
#include "merak/planner.h"

#endif
