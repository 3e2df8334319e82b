/* Chrome Trace Event JSON writer (see include/merak/trace.h). */
#include "merak/trace.h"
#include "merak/common.h"
#include "merak/fileio.h"

#include <stdlib.h>
#include <string.h>

struct mk_trace {
    mk_file_out_t out;  /* the safe writer (fileio.h) */
    FILE *f;            /* = out.f */
    int n;              /* events written */
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

void mk_trace_stream(mk_trace_t *t, int pid, int tid)
{
    if (!t || tid < 0 || tid >= MK_TRACE_STREAMS) return;
    sep(t);
    fprintf(t->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}", pid,
            tid, stream_names[tid]);
}

void mk_trace_complete(mk_trace_t *t, int pid, int tid, const char *name, double ts_s, double dur_s,
                       int stage, int mb, int chunk, int layer)
{
    if (!t) return;
    sep(t);
    fputs("{\"ph\":\"X\",\"name\":", t->f);
    put_str(t->f, name);
    fprintf(t->f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.4f,\"dur\":%.4f,\"args\":{\"stage\":%d,\"mb\":%d,"
                  "\"chunk\":%d,\"layer\":%d}}",
            pid, tid, ts_s * 1e6, dur_s * 1e6, stage, mb, chunk, layer);
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

int mk_trace_close(mk_trace_t *t)
{
    if (!t) return 0;
    fprintf(t->f, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{%s}}\n", t->meta);
    int rc = mk_file_commit(&t->out);
    free(t);
    return rc;
}

void mk_trace_abort(mk_trace_t *t)
{
    if (!t) return;
    mk_file_abort(&t->out);
    free(t);
}

void mk_trace_instr_name(char *buf, size_t n, const char *op, int mb)
{
    if (mb >= 0) snprintf(buf, n, "%s%d", op, mb);
    else snprintf(buf, n, "%s", op);
}
