/* Chrome Trace Event JSON writer (see include/merak/trace.h). */
#include "merak/trace.h"
#include "merak/common.h"
#include "merak/fileio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A complete event held until mk_trace_close (80 B): its lane is known
 * only once every event of its stream has been seen.  Times in ticks of
 * 1e-4 us, the precision written, so that the nesting decided here is the
 * nesting a reader of the file sees. */
typedef struct {
    char name[40];
    int pid, stream, lane, stage, mb, chunk, layer, seq;
    long long ts, dur;
} mk_trace_ev_t;

struct mk_trace {
    mk_file_out_t out;  /* the safe writer (fileio.h) */
    FILE *f;            /* = out.f */
    int n;              /* events written */
    mk_trace_ev_t *ev;  /* [nev] complete events, cap allocated */
    int nev, cap, failed;
    char meta[4096];    /* "otherData" members, JSON text */
};

static const char *stream_names[MK_TRACE_STREAMS] = {"compute", "p2p", "tp", "dp", "cp"};

mk_trace_t *mk_trace_open(const char *path)
{
    mk_trace_t *t = calloc(1, sizeof *t);
    if (!t) return mk_error_set("out of memory"), NULL;
    t->f = mk_file_begin(&t->out, path, "trace file");
    if (!t->f) {
        free(t);
        return NULL;
    }
    fputs("{\"traceEvents\":[\n", t->f);
    return t;
}

static void sep(mk_trace_t *t)
{
    if (t->n++) fputs(",\n", t->f);
}

/* JSON string without escapes needed (names we write are plain ASCII);
 * anything else is replaced by '_'. */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) fputc((*s == '"' || *s == '\\' || (unsigned char)*s < 32) ? '_' : *s, f);
    fputc('"', f);
}

void mk_trace_rank(mk_trace_t *t, int pid, const char *label)
{
    if (!t) return;
    sep(t);
    fprintf(t->f, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":", pid);
    put_str(t->f, label);
    fputs("}}", t->f);
    for (int i = 0; i < MK_TRACE_CP; i++) mk_trace_stream(t, pid, i);
}

/* Track metadata: lane 0 is the stream ("p2p"), lane k "p2p #k+1"; the
 * sort index keeps a stream's lanes together under it in Perfetto. */
static void put_track(mk_trace_t *t, int pid, int stream, int lane)
{
    int tid = stream + MK_TRACE_LANE_TID * lane;
    sep(t);
    fprintf(t->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s", pid, tid,
            stream_names[stream]);
    if (lane) fprintf(t->f, " #%d", lane + 1);
    fputs("\"}}", t->f);
    sep(t);
    fprintf(t->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
            pid, tid, stream * MK_TRACE_MAX_LANES + lane);
}

void mk_trace_stream(mk_trace_t *t, int pid, int tid)
{
    if (!t || tid < 0 || tid >= MK_TRACE_STREAMS) return;
    put_track(t, pid, tid, 0);
}

/* Seconds to ticks of 1e-4 us (the written precision), from the same
 * microsecond value as "%.4f" printed before lanes.  An event's end is
 * rounded, not its duration, so that one that starts where another ends
 * starts on the same tick (rounding both fields made a 1-tick overlap). */
static long long ticks(double s) { return llround(s * 1e6 * 1e4); }

void mk_trace_complete(mk_trace_t *t, int pid, int tid, const char *name, double ts_s, double dur_s,
                       int stage, int mb, int chunk, int layer)
{
    if (!t || t->failed) return;
    if (tid < 0 || tid >= MK_TRACE_STREAMS) return;
    if (!(fabs(ts_s) < MK_TRACE_MAX_S && fabs(dur_s) < MK_TRACE_MAX_S)) { /* ticks stay in 64 bits */
        t->failed = 1;
        mk_error_set("trace: event '%s' at %g s for %g s: times must lie within %g s", name, ts_s, dur_s,
                     MK_TRACE_MAX_S);
        return;
    }
    if (t->nev == t->cap) {
        if (t->nev >= MK_TRACE_WRITE_MAX_EVENTS) {
            t->failed = 1;
            mk_error_set("trace: more than %d complete events", MK_TRACE_WRITE_MAX_EVENTS);
            return;
        }
        int cap = t->cap ? 2 * t->cap : 4096; /* <= 2^28 x 80 B: no overflow */
        mk_trace_ev_t *n = realloc(t->ev, (size_t)cap * sizeof *n);
        if (!n) {
            t->failed = 1;
            mk_error_set("out of memory");
            return;
        }
        t->ev = n, t->cap = cap;
    }
    mk_trace_ev_t *e = &t->ev[t->nev];
    *e = (mk_trace_ev_t){.pid = pid, .stream = tid, .stage = stage, .mb = mb, .chunk = chunk, .layer = layer,
                         .seq = t->nev, .ts = ticks(ts_s), .dur = ticks(ts_s + dur_s) - ticks(ts_s)};
    if (e->dur < 0) e->dur = 0;
    mk_strlcpy(e->name, name, sizeof e->name);
    t->nev++;
}

void mk_trace_counter(mk_trace_t *t, int pid, const char *name, double ts_s, double value)
{
    if (!t) return;
    sep(t);
    fputs("{\"ph\":\"C\",\"name\":", t->f);
    put_str(t->f, name);
    fprintf(t->f, ",\"pid\":%d,\"ts\":%.4f,\"args\":{\"bytes\":%.0f}}", pid, ts_s * 1e6, value);
}

void mk_trace_meta(mk_trace_t *t, const char *key, const char *value)
{
    if (!t) return;
    size_t n = strlen(t->meta);
    FILE *m = fmemopen(t->meta + n, sizeof t->meta - n, "w");
    if (!m) return;
    if (n) fputc(',', m);
    put_str(m, key);
    fputc(':', m);
    put_str(m, value);
    fclose(m);
}

/* Lane order: by track, then start, the shorter first (a zero-length
 * event then ends where the next one starts), then arrival. */
static int lane_cmp(const void *a, const void *b)
{
    const mk_trace_ev_t *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->stream != y->stream) return x->stream - y->stream;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur < y->dur ? -1 : 1;
    return x->seq - y->seq;
}

/* File order: by track, start, then arrival: what the reader's sort
 * (tracefile.c: rank, stream, ts, file order) gave before lanes, so that
 * summary and diff read the same sequence. */
static int file_cmp(const void *a, const void *b)
{
    const mk_trace_ev_t *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->stream != y->stream) return x->stream - y->stream;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->seq - y->seq;
}

/* Greedy lanes per (rank, stream): each event goes to the lowest lane
 * whose last event has ended by its start.  Events of one stream are
 * transfers or ops side by side, never one inside another, so concurrent
 * ones get tracks of their own (not a misleading nesting) and every track
 * is a sequence of disjoint events; a stream without overlaps keeps its
 * one track.  Names the extra lanes' tracks. */
static int assign_lanes(mk_trace_t *t)
{
    long long end[MK_TRACE_MAX_LANES]; /* ticks: last end per lane of the current track */
    qsort(t->ev, t->nev, sizeof *t->ev, lane_cmp);
    int used = 0;
    for (int i = 0; i < t->nev; i++) {
        mk_trace_ev_t *e = &t->ev[i];
        if (i == 0 || e->pid != e[-1].pid || e->stream != e[-1].stream) used = 0;
        int k = 0;
        while (k < used && end[k] > e->ts) k++;
        if (k == MK_TRACE_MAX_LANES)
            return mk_error_set("trace: more than %d overlapping events on rank %d's %s stream",
                                MK_TRACE_MAX_LANES, e->pid, stream_names[e->stream]);
        if (k == used && used++ > 0) put_track(t, e->pid, e->stream, k);
        end[k] = e->ts + e->dur;
        e->lane = k;
    }
    return 0;
}

static void put_events(mk_trace_t *t)
{
    qsort(t->ev, t->nev, sizeof *t->ev, file_cmp);
    for (int i = 0; i < t->nev; i++) {
        const mk_trace_ev_t *e = &t->ev[i];
        sep(t);
        fputs("{\"ph\":\"X\",\"name\":", t->f);
        put_str(t->f, e->name);
        fprintf(t->f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.4f,\"dur\":%.4f,\"args\":{\"stage\":%d,\"mb\":%d,"
                      "\"chunk\":%d,\"layer\":%d}}",
                e->pid, e->stream + MK_TRACE_LANE_TID * e->lane, e->ts / 1e4, e->dur / 1e4, e->stage, e->mb,
                e->chunk, e->layer);
    }
}

/* Lanes, then the complete events; -1 (nothing more written) on error. */
static int put_all(mk_trace_t *t)
{
    if (t->failed || assign_lanes(t) < 0) return -1;
    put_events(t);
    return 0;
}

int mk_trace_close(mk_trace_t *t)
{
    if (!t) return 0;
    if (put_all(t) < 0) {
        mk_trace_abort(t);
        return -1;
    }
    fprintf(t->f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{%s}}\n", t->meta);
    int rc = mk_file_commit(&t->out);
    free(t->ev);
    free(t);
    return rc;
}

void mk_trace_abort(mk_trace_t *t)
{
    if (!t) return;
    mk_file_abort(&t->out);
    free(t->ev);
    free(t);
}

void mk_trace_instr_name(char *buf, size_t n, const char *op, int mb)
{
    if (mb >= 0) snprintf(buf, n, "%s%d", op, mb);
    else snprintf(buf, n, "%s", op);
}
