/* Chrome Trace Event JSON writer shared by the simulator and the executor
 * (format: traces/README.md).  pid = global rank, tid = stream, complete
 * events "ph":"X" in microseconds, names = instruction op + micro-batch
 * (F3, B_IN3, SEND_ACT3, ...), collectives AR.tp, RS.tp, AG.tp, AR.dp,
 * RS.dp, AG.dp, AR.tied, the CP ring's SEND_KV/RECV_KV, and OPT; args {stage, mb, chunk, layer}; memory as
 * counter events "ph":"C" named "memory" with args {"bytes": N}.  Written
 * through the safe writer of fileio.h (a temporary renamed over PATH by
 * mk_trace_close). */
#ifndef MERAK_TRACE_H
#define MERAK_TRACE_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MK_TRACE_CP: the context-parallel ring (SEND_KV/RECV_KV); named by
 * mk_trace_stream only on plans with cp > 1, so other traces keep their
 * four streams. */
enum { MK_TRACE_COMPUTE = 0, MK_TRACE_P2P, MK_TRACE_TP, MK_TRACE_DP, MK_TRACE_CP, MK_TRACE_STREAMS };

/* Lanes: events of one stream that overlap (two sends in flight, a ZeRO
 * reduce-scatter beside the tied-embedding all-reduce) go to extra tracks
 * of that stream, tid = stream + MK_TRACE_LANE_TID * lane (p2p's second
 * lane is tid 11, named "p2p #2"), the lowest lane free at the event's
 * start, so that the events of every track are disjoint (properly nested
 * for Perfetto).  A reader maps a tid to its stream as tid %
 * MK_TRACE_LANE_TID. */
#define MK_TRACE_LANE_TID 10
#define MK_TRACE_MAX_LANES 100
/* Complete events per trace (the reader's limit; 80 B each held until close, 11 GB at most;
 * a 16,384-GPU simulator trace holds ~1M) and the largest time, 1e8 s
 * (3 years; its ticks of 1e-4 us fit 64 bits). */
#define MK_TRACE_WRITE_MAX_EVENTS (1 << 27)
#define MK_TRACE_MAX_S 1e8

typedef struct mk_trace mk_trace_t;

/* Open PATH for writing (via a temporary file).  NULL with mk_error_last(). */
mk_trace_t *mk_trace_open(const char *path);
/* Name a rank (process) and its four streams (threads). */
void mk_trace_rank(mk_trace_t *t, int pid, const char *label);
/* Name stream tid of rank pid (the streams mk_trace_rank leaves out: MK_TRACE_CP). */
void mk_trace_stream(mk_trace_t *t, int pid, int tid);
/* A complete event; times in seconds (written as microseconds). layer -1
 * when not per layer; mb -1 when not per micro-batch. */
void mk_trace_complete(mk_trace_t *t, int pid, int tid, const char *name, double ts_s, double dur_s,
                       int stage, int mb, int chunk, int layer);
/* A counter sample ("ph":"C"), e.g. name "memory", value in bytes. */
void mk_trace_counter(mk_trace_t *t, int pid, const char *name, double ts_s, double value);
/* A string in the top-level "otherData" object (e.g. source, step time). */
void mk_trace_meta(mk_trace_t *t, const char *key, const char *value);
/* Assign lanes, write the complete events (sorted by rank, stream and
 * start), finish, flush and rename.  Returns 0 or -1 (file removed). */
int mk_trace_close(mk_trace_t *t);
/* Discard (removes the temporary file). */
void mk_trace_abort(mk_trace_t *t);
/* Event name of an instruction: op name + micro-batch ("F3"), or op alone. */
void mk_trace_instr_name(char *buf, size_t n, const char *op, int mb);

#ifdef __cplusplus
}
#endif
#endif
