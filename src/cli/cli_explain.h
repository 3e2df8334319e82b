/* merak sim/plan --explain, --what-if, cost and scaling (issue 21; cli_explain.c). */
#ifndef MERAK_CLI_EXPLAIN_H
#define MERAK_CLI_EXPLAIN_H

#include "cli/cli.h"
#include "merak/whatif.h"

#include <jansson.h>

/* The step breakdown, memory at the peak and MFU gap as a table (stdout). */
void mk_cli_explain_print(const mk_sim_result_t *r);

/* One alternative plan: a baseline system's best, a what-if cluster's, or
 * one GPU count's of a scaling sweep. */
typedef struct mk_cli_alt {
    char label[64];        /* the system, the knob and factor, or "N GPUs" */
    int gpus;              /* its GPU count */
    int found;             /* 1: a plan fits; 0: none (note says why) */
    int failed;            /* the search failed (note: the error) */
    mk_planner_entry_t e;
    char note[256];        /* what changed from the base plan, where the winner gains, or why none */
} mk_cli_alt_t;

#define MK_CLI_MAX_ALTS 16
typedef struct mk_cli_extras {
    int nb, nw, ns, nf;    /* baselines, what-if clusters, scaling counts, families */
    mk_cli_alt_t base[MK_CLI_MAX_ALTS], whatif[MK_CLI_MAX_ALTS], scaling[MK_MAX_GPU_COUNTS];
    mk_cli_alt_t fam[MK_CLI_MAX_ALTS]; /* the best plan without each of #1's choices (--explain) */
    double wall_s;         /* the time all of them took */
} mk_cli_extras_t;

/* Check --objective, --gpus lists against the rest of the flags: prints
 * the error and returns MK_EXIT_USAGE, or 0. */
int mk_cli_plan_check(const mk_args_t *a);
/* Run what the flags ask for (nothing without --explain, --what-if or a
 * --gpus list) against the best plan of the main search: 0, or prints the
 * error and returns MK_EXIT_USAGE.  Under mpiexec every rank calls it
 * (the searches are spread over the ranks and their cores; rank 0, whose
 * best is the main search's, gets the results); best_plan is #1's plan on
 * every rank (the families to search follow from it), NULL if none. */
int mk_cli_plan_extras(const mk_args_t *a, const mk_model_config_t *m, const mk_cluster_t *cl,
                       const mk_planner_opts_t *o, const mk_planner_entry_t *best, const mk_plan_t *best_plan,
                       mk_cli_extras_t *x);
void mk_cli_plan_extras_human(const mk_args_t *a, const mk_planner_entry_t *best, const mk_cli_extras_t *x);
/* Add baselines, what_if, scaling (those run) at the top of the --json object. */
void mk_cli_plan_extras_json(const mk_args_t *a, const mk_planner_entry_t *best, const mk_cli_extras_t *x,
                             json_t *top);
/* A plan's time and cost to train (--train-tokens, --gpu-hour-price) as
 * keys of its JSON object, and as one line. */
void mk_cli_plan_cost_json(const mk_args_t *a, const mk_planner_entry_t *e, json_t *plan);
void mk_cli_plan_cost_human(const mk_args_t *a, const mk_planner_entry_t *e, int i);

/* --export TARGET: p as TARGET's launch command on stdout (megatron), a
 * note on stderr; 0, or prints why not and returns MK_EXIT_USAGE. */
int mk_cli_export(const mk_args_t *a, const mk_plan_t *p, const mk_cluster_t *cl);

/* merak/plan's baseline restrictions (cli_plan_cmd.c apply_baseline). */
int mk_cli_plan_baseline(const char *b, mk_planner_opts_t *o);

#endif
