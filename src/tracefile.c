/* Trace reading, summary and prediction-vs-measurement alignment. */
#include "merak/jsonio.h"
#include "merak/common.h"
#include "merak/tracefile.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int ev_cmp(const void *a, const void *b)
{
    const mk_tev_t *x = a, *y = b;
    if (x->pid != y->pid) return x->pid - y->pid;
    int s = strcmp(x->stream, y->stream);
    if (s) return s;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static void kind_of(const char *name, char *kind, size_t n)
{
    mk_strlcpy(kind, name, n);
    size_t l = strlen(kind);
    while (l > 0 && isdigit((unsigned char)kind[l - 1])) kind[--l] = 0;
}

static int int_arg(json_t *args, const char *k)
{
    json_t *v = args ? json_object_get(args, k) : NULL;
    return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

/* Stream name from tid: a string, or a number (0 compute, 1 p2p, 2 tp, 3 dp). */
static void stream_of(json_t *tid, char *out, size_t n)
{
    static const char *const names[] = {"compute", "p2p", "tp", "dp"};
    if (json_is_string(tid)) mk_strlcpy(out, json_string_value(tid), n);
    else if (json_is_integer(tid) && json_integer_value(tid) >= 0 && json_integer_value(tid) < 4)
        mk_strlcpy(out, names[json_integer_value(tid)], n);
    else mk_strlcpy(out, "other", n);
}

static int add_event(mk_tracefile_t *t, json_t *e, const char *path, int i)
{
    json_t *ph = json_object_get(e, "ph"), *pid = json_object_get(e, "pid");
    if (!json_is_string(ph)) return mk_error_set("%s: event %d has no 'ph'", path, i);
    const char *p = json_string_value(ph);
    if (strcmp(p, "X") && strcmp(p, "C")) return 0; /* metadata and others */
    if (!json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) > 1 << 20)
        return mk_error_set("%s: event %d has no integer 'pid' (global rank)", path, i);
    int r = (int)json_integer_value(pid);
    if (r + 1 > t->n_ranks) {
        double *pm = realloc(t->peak_mem, (r + 1) * sizeof *pm);
        if (!pm) return mk_error_set("out of memory");
        for (int k = t->n_ranks; k <= r; k++) pm[k] = 0;
        t->peak_mem = pm;
        t->n_ranks = r + 1;
    }
    json_t *args = json_object_get(e, "args");
    if (!strcmp(p, "C")) {
        const char *k;
        json_t *v;
        json_object_foreach(args, k, v) if (json_is_number(v) && json_number_value(v) > t->peak_mem[r])
            t->peak_mem[r] = json_number_value(v);
        return 0;
    }
    json_t *name = json_object_get(e, "name"), *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
    if (!json_is_string(name) || !json_is_number(ts) || !json_is_number(dur))
        return mk_error_set("%s: complete event %d needs name, ts and dur", path, i);
    mk_tev_t *v = &t->ev[t->n++];
    mk_strlcpy(v->name, json_string_value(name), sizeof v->name);
    kind_of(v->name, v->kind, sizeof v->kind);
    stream_of(json_object_get(e, "tid"), v->stream, sizeof v->stream);
    v->pid = r;
    v->stage = int_arg(args, "stage");
    v->mb = int_arg(args, "mb");
    v->ts = json_number_value(ts);
    v->dur = json_number_value(dur);
    return 0;
}

mk_tracefile_t *mk_tracefile_load(const char *path)
{
    json_t *root = mk_json_load(path, "trace");
    if (!root) return NULL;
    json_t *evs = json_is_array(root) ? root : json_object_get(root, "traceEvents");
    mk_tracefile_t *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!json_is_array(evs)) rc = mk_error_set("%s: not a Chrome trace (no traceEvents array)", path);
    else if (!t || !(t->ev = calloc(json_array_size(evs) + 1, sizeof *t->ev))) rc = mk_error_set("out of memory");
    for (size_t i = 0; !rc && i < json_array_size(evs); i++) rc = add_event(t, json_array_get(evs, i), path, (int)i);
    if (!rc && t->n == 0) rc = mk_error_set("%s: the trace has no complete events", path);
    json_decref(root);
    if (rc) {
        mk_tracefile_free(t);
        return NULL;
    }
    qsort(t->ev, t->n, sizeof *t->ev, ev_cmp);
    return t;
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

void mk_tracefile_summary(const mk_tracefile_t *t, FILE *out)
{
    double span = span_us(t->ev, t->n);
    fprintf(out, "trace: %d ranks, %d events, span %.3f ms\n", t->n_ranks, t->n, span / 1e3);
    fprintf(out, "  %-5s %-6s %12s %8s %12s\n", "rank", "stage", "compute ms", "idle", "peak MiB");
    for (int r = 0; r < t->n_ranks; r++) {
        double busy = 0;
        int stage = -1, any = 0;
        for (int i = 0; i < t->n; i++)
            if (t->ev[i].pid == r) {
                any = 1;
                if (!strcmp(t->ev[i].stream, "compute")) busy += t->ev[i].dur;
                if (stage < 0) stage = t->ev[i].stage;
            }
        if (any)
            fprintf(out, "  %-5d %-6d %12.3f %7.1f%% %12.1f\n", r, stage, busy / 1e3,
                    span > 0 ? 100 * (1 - busy / span) : 0, t->peak_mem[r] / (1 << 20));
    }
    fprintf(out, "  %-12s %8s %12s\n", "kind", "count", "total ms");
    for (int i = 0; i < t->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(t->ev[j].kind, t->ev[i].kind);
        if (seen) continue;
        int cnt = 0;
        double tot = 0;
        for (int j = i; j < t->n; j++)
            if (!strcmp(t->ev[j].kind, t->ev[i].kind)) cnt++, tot += t->ev[j].dur;
        fprintf(out, "  %-12s %8d %12.3f\n", t->ev[i].kind, cnt, tot / 1e3);
    }
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

/* Only the ranks the prediction holds are compared: the simulator traces
 * one representative rank per stage (pids 0, dp*tp, ...), the executor
 * every rank; measured ranks and streams the prediction lacks are skipped. */
int mk_tracefile_diff(const mk_tracefile_t *p, const mk_tracefile_t *m, mk_tracefile_diff_t *d)
{
    memset(d, 0, sizeof *d);
    if (p->n_ranks > m->n_ranks)
        return mk_error_set("the traces have %d and %d ranks (different plans?)", p->n_ranks, m->n_ranks);
    double err = 0, mlo = INFINITY, mhi = -INFINITY;
    for (int pi = 0; pi < p->n;) {
        int pe = run_end(p, pi), mi = 0;
        while (mi < m->n && (m->ev[mi].pid != p->ev[pi].pid || strcmp(m->ev[mi].stream, p->ev[pi].stream)))
            mi = run_end(m, mi);
        if (mi >= m->n)
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
    return 0;
}
