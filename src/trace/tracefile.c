/* Trace reading, summary and prediction-vs-measurement alignment. */
#include "merak/jsonio.h"
#include "merak/common.h"
#include "merak/trace.h"
#include "merak/tracefile.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Order of (rank, stream) runs; within a run, events by start time. */
static int run_cmp(const mk_tev_t *x, const mk_tev_t *y)
{
    if (x->pid != y->pid) return x->pid - y->pid; /* pids <= 2^20: no overflow */
    return strcmp(x->stream, y->stream);
}

/* Sorting event indices (4 B each) instead of the 112-B events keeps the
 * sort's scratch memory small; ties keep file order (a stable sort, as
 * glibc's merge sort gave before, on any libc). */
static const mk_tev_t *sort_ev;

static int idx_cmp(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    const mk_tev_t *x = &sort_ev[i], *y = &sort_ev[j];
    int s = run_cmp(x, y);
    if (s) return s;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (i > j) - (i < j);
}

/* Sort t->ev by (pid, stream, ts, file order), permuting in place. */
static int sort_events(mk_tracefile_t *t)
{
    int *idx = malloc((size_t)t->n * sizeof *idx);
    if (!idx) return mk_error_set("out of memory");
    for (int i = 0; i < t->n; i++) idx[i] = i;
    sort_ev = t->ev;
    qsort(idx, t->n, sizeof *idx, idx_cmp);
    for (int i = 0; i < t->n; i++) { /* slot j takes event idx[j]: follow each cycle once */
        if (idx[i] == i) continue;
        mk_tev_t tmp = t->ev[i];
        int j = i;
        for (int k = idx[j]; k != i; j = k, k = idx[j]) t->ev[j] = t->ev[k], idx[j] = j;
        t->ev[j] = tmp, idx[j] = j;
    }
    free(idx);
    return 0;
}

static void kind_of(const char *name, char *kind, size_t n)
{
    mk_strlcpy(kind, name, n);
    size_t l = strlen(kind);
    while (l > 0 && isdigit((unsigned char)kind[l - 1])) kind[--l] = 0;
}

/* Event fields must be sane numbers: times within 2^53 us (exact in a
 * double, 285 years, so ts + dur and spans stay finite), counters within
 * 2^63 bytes, stage and micro-batch ids within [-1, 2^30]. */
#define MK_TRACE_MAX_US 9007199254740992.0
#define MK_TRACE_MAX_COUNTER 9223372036854775808.0
/* Complete events per trace: keeps counts in int and the event table
 * (112 B each) within 15 GB; a 16,384-GPU simulator trace holds ~1M. */
#define MK_TRACE_MAX_EVENTS (1 << 27)

typedef struct {
    mk_tracefile_t *t;
    const char *path;
    size_t ev_cap, rank_cap;
} mk_trace_load_t;

/* args[k] as an int: -1 when absent or not an integer, an error when out of range. */
static int int_arg(const mk_trace_load_t *L, size_t i, json_t *args, const char *k, int *out)
{
    json_t *v = args ? json_object_get(args, k) : NULL;
    *out = -1;
    if (!json_is_integer(v)) return 0;
    if (json_integer_value(v) < -1 || json_integer_value(v) > 1 << 30)
        return mk_error_set("%s: event %zu: args.%s must be an integer in [-1, 2^30]", L->path, i, k);
    *out = (int)json_integer_value(v);
    return 0;
}

/* Stream name from tid: a string, or a number (0 compute, 1 p2p, 2 tp, 3
 * dp, 4 cp; + 10 x lane, merak/trace.h: a lane's events are its stream's). */
static void stream_of(json_t *tid, char *out, size_t n)
{
    static const char *const names[] = {"compute", "p2p", "tp", "dp", "cp"};
    json_int_t v = json_is_integer(tid) ? json_integer_value(tid) : -1;
    if (json_is_string(tid)) mk_strlcpy(out, json_string_value(tid), n);
    else if (v >= 0 && v < MK_TRACE_LANE_TID * MK_TRACE_MAX_LANES && v % MK_TRACE_LANE_TID < 5)
        mk_strlcpy(out, names[v % MK_TRACE_LANE_TID], n);
    else mk_strlcpy(out, "other", n);
}

/* Make rank r (<= 2^20) exist: peak_mem grows geometrically. */
static int have_rank(mk_trace_load_t *L, int r)
{
    mk_tracefile_t *t = L->t;
    if (r < t->n_ranks) return 0;
    if ((size_t)r >= L->rank_cap) {
        size_t cap = L->rank_cap ? L->rank_cap : 64;
        while (cap <= (size_t)r) cap *= 2;
        double *pm = realloc(t->peak_mem, cap * sizeof *pm);
        if (!pm) return mk_error_set("out of memory");
        t->peak_mem = pm;
        L->rank_cap = cap;
    }
    for (int k = t->n_ranks; k <= r; k++) t->peak_mem[k] = 0;
    t->n_ranks = r + 1;
    return 0;
}

/* A counter event: the rank's peak is its highest value. */
static int add_counter(mk_trace_load_t *L, size_t i, json_t *args, int r)
{
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v) {
        if (!json_is_number(v)) continue;
        double x = json_number_value(v);
        if (!(x >= 0 && x < MK_TRACE_MAX_COUNTER))
            return mk_error_set("%s: event %zu: counter '%s' must be a number in [0, 2^63)", L->path, i, k);
        if (x > L->t->peak_mem[r]) L->t->peak_mem[r] = x;
    }
    return 0;
}

static mk_tev_t *new_event(mk_trace_load_t *L)
{
    mk_tracefile_t *t = L->t;
    if ((size_t)t->n == L->ev_cap) {
        if (t->n >= MK_TRACE_MAX_EVENTS)
            return mk_error_set("%s: more than %d complete events", L->path, MK_TRACE_MAX_EVENTS), NULL;
        size_t cap = L->ev_cap ? 2 * L->ev_cap : 4096; /* <= 2^28 * 112 B: no overflow */
        mk_tev_t *ev = realloc(t->ev, cap * sizeof *ev);
        if (!ev) return mk_error_set("out of memory"), NULL;
        t->ev = ev;
        L->ev_cap = cap;
    }
    return &t->ev[t->n++];
}

static int add_event(json_t *e, size_t i, void *ctx)
{
    mk_trace_load_t *L = ctx;
    json_t *ph = json_object_get(e, "ph"), *pid = json_object_get(e, "pid");
    if (!json_is_string(ph)) return mk_error_set("%s: event %zu has no 'ph'", L->path, i);
    const char *p = json_string_value(ph);
    if (strcmp(p, "X") && strcmp(p, "C")) return 0; /* metadata and others */
    if (!json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) > 1 << 20)
        return mk_error_set("%s: event %zu has no integer 'pid' (global rank)", L->path, i);
    int r = (int)json_integer_value(pid);
    if (have_rank(L, r) < 0) return -1;
    json_t *args = json_object_get(e, "args");
    if (!strcmp(p, "C")) return add_counter(L, i, args, r);
    json_t *name = json_object_get(e, "name"), *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
    if (!json_is_string(name) || !json_is_number(ts) || !json_is_number(dur))
        return mk_error_set("%s: complete event %zu needs name, ts and dur", L->path, i);
    double t0 = json_number_value(ts), d = json_number_value(dur);
    if (!(t0 >= 0 && t0 <= MK_TRACE_MAX_US && d >= 0 && d <= MK_TRACE_MAX_US))
        return mk_error_set("%s: event %zu: 'ts' and 'dur' must lie in [0, 2^53] microseconds", L->path, i);
    int stage, mb;
    if (int_arg(L, i, args, "stage", &stage) < 0 || int_arg(L, i, args, "mb", &mb) < 0) return -1;
    mk_tev_t *v = new_event(L);
    if (!v) return -1;
    mk_strlcpy(v->name, json_string_value(name), sizeof v->name);
    kind_of(v->name, v->kind, sizeof v->kind);
    json_t *tid = json_object_get(e, "tid");
    stream_of(tid, v->stream, sizeof v->stream);
    v->tid = json_is_integer(tid) && json_integer_value(tid) >= 0 && json_integer_value(tid) <= 1 << 30
                 ? (int)json_integer_value(tid) : -1;
    v->pid = r;
    v->stage = stage;
    v->mb = mb;
    v->ts = t0;
    v->dur = d;
    return 0;
}

/* Streamed (mk_json_stream_array): a large trace never exists as a JSON
 * tree, only as its bytes and the event table. */
mk_tracefile_t *mk_tracefile_load(const char *path)
{
    mk_trace_load_t L = {calloc(1, sizeof *L.t), path, 0, 0};
    if (!L.t) return mk_error_set("out of memory"), NULL;
    int rc = mk_json_stream_array(path, "trace", "traceEvents", add_event, &L);
    if (rc > 0) rc = mk_error_set("%s: not a Chrome trace (no traceEvents array)", path);
    if (!rc && L.t->n == 0) rc = mk_error_set("%s: the trace has no complete events", path);
    if (!rc) rc = sort_events(L.t);
    for (int i = 0; !rc && i < L.t->n; i++) /* sorted by pid: a new pid starts a rank */
        L.t->n_pids += i == 0 || L.t->ev[i].pid != L.t->ev[i - 1].pid;
    if (rc) {
        mk_tracefile_free(L.t);
        return NULL;
    }
    return L.t;
}

void mk_tracefile_free(mk_tracefile_t *t)
{
    if (!t) return;
    free(t->ev);
    free(t->peak_mem);
    free(t);
}

static double span_us(const mk_tev_t *ev, int n)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (ev[i].ts < lo) lo = ev[i].ts;
        if (ev[i].ts + ev[i].dur > hi) hi = ev[i].ts + ev[i].dur;
    }
    return n ? hi - lo : 0;
}

/* Kinds in order of first appearance with count and total; a hash of
 * kind -> slot, so one pass over the events (sums in event order, as
 * printed before). */
typedef struct {
    int first, count; /* first: index of the kind's first event */
    double total_us;
} mk_kind_stat_t;

static unsigned kind_hash(const char *s)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* kinds: room for t->n; returns the number of kinds, -1 out of memory. */
static int kind_stats(const mk_tracefile_t *t, mk_kind_stat_t *kinds)
{
    size_t cap = 64;
    while (cap < 2 * (size_t)t->n) cap *= 2; /* load <= 1/2; t->n <= 2^27 */
    int *slot = malloc(cap * sizeof *slot), nk = 0;
    if (!slot) return -1;
    memset(slot, -1, cap * sizeof *slot);
    for (int i = 0; i < t->n; i++) {
        size_t h = kind_hash(t->ev[i].kind) & (cap - 1);
        while (slot[h] >= 0 && strcmp(t->ev[kinds[slot[h]].first].kind, t->ev[i].kind)) h = (h + 1) & (cap - 1);
        if (slot[h] < 0) kinds[slot[h] = nk++] = (mk_kind_stat_t){i, 0, 0};
        kinds[slot[h]].count++;
        kinds[slot[h]].total_us += t->ev[i].dur;
    }
    free(slot);
    return nk;
}

/* One pass: the events are sorted by rank, so each rank is one run. */
void mk_tracefile_summary(const mk_tracefile_t *t, FILE *out)
{
    double span = span_us(t->ev, t->n);
    fprintf(out, "trace: %d ranks, %d events, span %.3f ms\n", t->n_pids, t->n, span / 1e3);
    fprintf(out, "  %-5s %-6s %12s %8s %12s\n", "rank", "stage", "compute ms", "idle", "peak MiB");
    for (int i = 0; i < t->n;) {
        int r = t->ev[i].pid, stage = -1; /* the rank's first event with a stage */
        double busy = 0;
        for (; i < t->n && t->ev[i].pid == r; i++) {
            if (!strcmp(t->ev[i].stream, "compute")) busy += t->ev[i].dur;
            if (stage < 0) stage = t->ev[i].stage;
        }
        fprintf(out, "  %-5d %-6d %12.3f %7.1f%% %12.1f\n", r, stage, busy / 1e3,
                span > 0 ? 100 * (1 - busy / span) : 0, t->peak_mem[r] / (1 << 20));
    }
    fprintf(out, "  %-12s %8s %12s\n", "kind", "count", "total ms");
    mk_kind_stat_t *kinds = malloc((size_t)t->n * sizeof *kinds);
    int nk = kinds ? kind_stats(t, kinds) : -1;
    if (nk < 0) fprintf(out, "  (out of memory for the kinds)\n");
    for (int k = 0; k < nk; k++)
        fprintf(out, "  %-12s %8d %12.3f\n", t->ev[kinds[k].first].kind, kinds[k].count, kinds[k].total_us / 1e3);
    free(kinds);
}

/* Events of one (rank, stream) run: [*lo, *hi) from index i. */
static int run_end(const mk_tracefile_t *t, int i)
{
    int j = i;
    while (j < t->n && t->ev[j].pid == t->ev[i].pid && !strcmp(t->ev[j].stream, t->ev[i].stream)) j++;
    return j;
}

static int kind_slot(mk_tracefile_diff_t *d, const char *kind)
{
    for (int k = 0; k < d->n_kinds; k++)
        if (!strcmp(d->kinds[k], kind)) return k;
    if (d->n_kinds == 32) return -1;
    mk_strlcpy(d->kinds[d->n_kinds], kind, sizeof d->kinds[0]);
    return d->n_kinds++;
}

/* A wait on the compute stream (RECV_ACT/RECV_GRAD): the simulator writes
 * one only when the stage actually blocks, the executor writes every
 * receive, so waits are not aligned (they are idle time, not work). */
static int is_wait(const mk_tev_t *e)
{
    return !strcmp(e->stream, "compute") && !strncmp(e->kind, "RECV_", 5);
}

static int count_work(const mk_tracefile_t *t, int i, int e)
{
    int n = 0;
    for (; i < e; i++) n += !is_wait(&t->ev[i]);
    return n;
}

/* Match pred's run [pi, pe) against the last events of meas's run [mi, me)
 * (waits skipped on both sides): a measurement may hold several steps; the
 * last is compared. */
static int match_run(const mk_tracefile_t *p, int pi, int pe, const mk_tracefile_t *m, int mi, int me,
                     mk_tracefile_diff_t *d, double *err_sum, double *mlo, double *mhi)
{
    int n = count_work(p, pi, pe), nm = count_work(m, mi, me);
    if (strcmp(p->ev[pi].stream, "compute") && nm != n && *mlo < INFINITY) {
        /* communication streams whose counts differ between the engines
           (the simulator re-runs a checkpointed layer's TP all-reduces in
           its recompute, the executor's recompute skips the row-parallel
           output; the executor's vocabulary-parallel loss reduces twice in
           forward): compare time per kind over the measured step, not
           event by event */
        for (int i = pi; i < pe; i++) {
            int s = kind_slot(d, p->ev[i].kind);
            if (s >= 0) d->kind_pred_s[s] += p->ev[i].dur * 1e-6;
        }
        for (int j = mi; j < me; j++) {
            int s = m->ev[j].ts >= *mlo ? kind_slot(d, m->ev[j].kind) : -1;
            if (s >= 0) d->kind_meas_s[s] += m->ev[j].dur * 1e-6;
        }
        d->aggregated++;
        return 0;
    }
    if (nm < n || (n && nm % n) || (!n && nm))
        return mk_error_set("rank %d stream %s: %d predicted vs %d measured events (different plans?)",
                            p->ev[pi].pid, p->ev[pi].stream, n, nm);
    int skip = nm - n, k = 0;
    for (int i = pi, j = mi; i < pe; i++) {
        const mk_tev_t *a = &p->ev[i];
        if (is_wait(a)) continue;
        while (is_wait(&m->ev[j]) || skip > 0) skip -= !is_wait(&m->ev[j]), j++;
        const mk_tev_t *b = &m->ev[j++];
        if (strcmp(a->name, b->name))
            return mk_error_set("rank %d stream %s event %d: '%s' predicted, '%s' measured (different plans?)",
                                a->pid, a->stream, k, a->name, b->name);
        k++;
        int s = kind_slot(d, a->kind);
        if (s >= 0) d->kind_pred_s[s] += a->dur * 1e-6, d->kind_meas_s[s] += b->dur * 1e-6;
        int st = a->stage >= 0 ? a->stage : a->pid;
        if (!strcmp(a->stream, "compute") && st < 512) {
            if (st + 1 > d->n_stages) d->n_stages = st + 1;
            d->stage_busy_pred_s[st] += a->dur * 1e-6;
            d->stage_busy_meas_s[st] += b->dur * 1e-6;
        }
        if (b->dur > 0) *err_sum += fabs(a->dur - b->dur) / b->dur, d->matched++;
        if (b->ts < *mlo) *mlo = b->ts;
        if (b->ts + b->dur > *mhi) *mhi = b->ts + b->dur;
    }
    return 0;
}

/* The measured ranks (pids) the prediction has no event of, into d. */
static void count_unmatched(const mk_tracefile_t *p, const mk_tracefile_t *m, mk_tracefile_diff_t *d)
{
    int pi = 0;
    for (int mi = 0; mi < m->n; mi++) {
        int pid = m->ev[mi].pid;
        if (mi > 0 && m->ev[mi - 1].pid == pid) continue;
        while (pi < p->n && p->ev[pi].pid < pid) pi++;
        if (pi < p->n && p->ev[pi].pid == pid) continue;
        if (d->unmatched_ranks < 16) d->unmatched[d->unmatched_ranks] = pid;
        d->unmatched_ranks++;
    }
}

/* Only the ranks the prediction holds are compared: the simulator traces
 * one representative rank per stage (pids 0, dp*tp, ...), the executor
 * every rank; measured streams the prediction lacks are skipped, and
 * measured ranks it lacks are counted (a rank left out is not a match). */
int mk_tracefile_diff(const mk_tracefile_t *p, const mk_tracefile_t *m, mk_tracefile_diff_t *d)
{
    memset(d, 0, sizeof *d);
    if (p->n_ranks > m->n_ranks) /* the predicted trace's highest rank is missing from the measured one */
        return mk_error_set("the predicted trace has %d ranks (up to rank %d), the measured one %d (up to rank %d): "
                            "different plans?", p->n_pids, p->n_ranks - 1, m->n_pids, m->n_ranks - 1);
    double err = 0, mlo = INFINITY, mhi = -INFINITY;
    /* both sorted by (pid, stream): one merge walk finds each run's match */
    for (int pi = 0, mi = 0; pi < p->n;) {
        int pe = run_end(p, pi);
        while (mi < m->n && run_cmp(&m->ev[mi], &p->ev[pi]) < 0) mi = run_end(m, mi);
        if (mi >= m->n || run_cmp(&m->ev[mi], &p->ev[pi]))
            return mk_error_set("rank %d stream %s is missing from the measured trace (different plans?)",
                                p->ev[pi].pid, p->ev[pi].stream);
        if (match_run(p, pi, pe, m, mi, run_end(m, mi), d, &err, &mlo, &mhi) < 0) return -1;
        pi = pe;
    }
    /* per-stage busy: the stage's ranks summed; report the per-rank mean */
    d->step_pred_s = span_us(p->ev, p->n) * 1e-6;
    d->step_meas_s = (mhi - mlo) * 1e-6;
    d->step_rel_err = d->step_meas_s > 0 ? (d->step_pred_s - d->step_meas_s) / d->step_meas_s : 0;
    d->mean_abs_rel_err = d->matched ? err / d->matched : 0;
    count_unmatched(p, m, d);
    return 0;
}

/* Track order for the nesting check: (pid, tid), start, the longer first. */
static int track_cmp(const void *a, const void *b)
{
    const mk_tev_t *x = &sort_ev[*(const int *)a], *y = &sort_ev[*(const int *)b];
    if (x->pid != y->pid) return x->pid - y->pid;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Microseconds to ticks of 1e-4 us, the precision merak writes. */
static long long tick(double us) { return llround(us * 1e4); }

/* A stack of the open events of the current track (indices, innermost
 * last): an event must end within the innermost one still open. */
int mk_tracefile_check(const mk_tracefile_t *t, char *msg, size_t n)
{
    int *idx = malloc((size_t)t->n * sizeof *idx), *open = malloc((size_t)t->n * sizeof *open), depth = 0, rc = 0;
    if (!idx || !open) return free(idx), free(open), -1;
    for (int i = 0; i < t->n; i++) idx[i] = i;
    sort_ev = t->ev;
    qsort(idx, t->n, sizeof *idx, track_cmp);
    for (int i = 0; i < t->n && !rc; i++) {
        const mk_tev_t *e = &t->ev[idx[i]];
        if (i > 0 && (e->pid != t->ev[idx[i - 1]].pid || e->tid != t->ev[idx[i - 1]].tid)) depth = 0;
        while (depth > 0 && tick(t->ev[open[depth - 1]].ts) + tick(t->ev[open[depth - 1]].dur) <= tick(e->ts))
            depth--;
        const mk_tev_t *o = depth ? &t->ev[open[depth - 1]] : NULL;
        if (o && tick(e->ts) + tick(e->dur) > tick(o->ts) + tick(o->dur)) {
            snprintf(msg, n, "rank %d track %d (%s): '%s' [%.4f, %.4f] us starts inside '%s' [%.4f, %.4f] us "
                     "and ends after it", e->pid, e->tid, e->stream, e->name, e->ts, e->ts + e->dur, o->name,
                     o->ts, o->ts + o->dur);
            rc = 1;
        }
        open[depth++] = idx[i];
    }
    free(idx);
    free(open);
    return rc;
}
