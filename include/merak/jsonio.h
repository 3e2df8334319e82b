/* JSON files: one loader and one atomic writer for every file format
 * (models, clusters, plans, traces), so errors read the same everywhere. */
#ifndef MERAK_JSONIO_H
#define MERAK_JSONIO_H

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parse a file (duplicate keys rejected).  NULL with "cannot read WHAT
 * 'PATH': why" (also "is a directory") or "PATH:LINE:COL: malformed JSON: why". */
json_t *mk_json_load(const char *path, const char *what);
/* Write j through mk_file_begin/commit (fileio.h: temporary, fsync,
 * rename, directory fsync; non-regular targets refused, symlinks written
 * through).  Returns 0 or -1 ("cannot write WHAT 'PATH': why"). */
int mk_json_save(json_t *j, const char *path, const char *what);

/* Typed fields of an object, all required; each fails with "WHAT: missing
 * field 'KEY'" or "WHAT: field 'KEY' must be ...".  Integers lie in
 * [lo, 2^30], numbers are finite and >= lo. */
int mk_json_int(json_t *o, const char *what, const char *key, int lo, int *out);
int mk_json_num(json_t *o, const char *what, const char *key, double lo, double *out);
int mk_json_bool(json_t *o, const char *what, const char *key, int *out);
/* The first key of o not in the NULL-ended list, or NULL (the one rule
 * every reader uses for unknown fields). */
const char *mk_json_unknown_key(json_t *o, const char *const *keys);
/* Fail with "WHAT: unknown field 'K'" for a key not in the NULL-ended list. */
int mk_json_only_keys(json_t *o, const char *what, const char *const *keys);

/* Stream the elements of one array: the file itself when it is an array,
 * else the top-level object's KEY.  Each element is parsed alone and given
 * to fn (index i from 0; borrowed, freed after fn returns; fn returns 0, or
 * -1 to stop with its error), so memory is a read window (1 MiB, more only
 * for a larger single value) plus one element, not the document's tree.
 * The rest of the file is checked as mk_json_load does (same errors,
 * duplicate keys refused); PATH is opened as mk_open_input does.  Returns
 * 0, 1 when there is no such array (no error set), or -1. */
typedef int (*mk_json_elem_fn)(json_t *elem, size_t i, void *ctx);
int mk_json_stream_array(const char *path, const char *what, const char *key, mk_json_elem_fn fn, void *ctx);

/* The JSON forms of the library's types, for its own readers and writers
 * (not installed: the public headers pass JSON as text). */
struct mk_cluster;
struct mk_plan;
struct mk_sched;
struct mk_sched_report;
struct mk_sim_result;
/* The same as JSON objects (to_json: a new reference, NULL on failure). */
json_t *mk_cluster_to_json(const struct mk_cluster *c);
int mk_cluster_from_json(json_t *j, const char *what, struct mk_cluster *c);

/* JSON form (see traces/README.md).  to_json returns a new reference. */
json_t *mk_plan_to_json(const struct mk_plan *p);
int mk_plan_from_json(json_t *j, const char *what, struct mk_plan *p);

/* The streams as JSON: {"schedule","stages","micro_batches","vpp",
 * "makespan","streams":[[{op,mb,chunk,peer,ckpt}...]...], "max_inflight"}
 * (max_inflight and makespan from rep when given).  NULL on failure. */
json_t *mk_sched_to_json(const struct mk_sched *s, const struct mk_sched_report *rep);

/* The step breakdown as the `explain` object of --json: breakdown_s
 * (additive seconds summing to step_time_s), memory_bytes (the worst
 * stage's peak), mfu_gap (fractions of the step summing to 1 with the
 * MFU) and kernel_efficiency.  New reference. */
json_t *mk_sim_explain_json(const struct mk_sim_result *r);

/* Result as the `merak sim --json` object (sim/README.md "The simulator"; + memory breakdown);
 * plan attached when p != NULL.  New reference. */
json_t *mk_sim_result_json(const struct mk_sim_result *r, const struct mk_plan *p);

#ifdef __cplusplus
}
#endif
#endif
