/* Trace files (src/trace/tracefile.c), as `merak trace summary FILE`,
 * `merak trace diff FILE FILE` and `merak trace check FILE` read them. */
#include "fuzz.h"
#include "merak/tracefile.h"

#include <stdio.h>

static int read_trace(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) return 0;
    mk_tracefile_t *t = mk_tracefile_load(mk_fuzz_file("trace.json", data, size));
    if (!t) return -1;
    mk_tracefile_summary(t, sink);
    char msg[512];
    mk_tracefile_check(t, msg, sizeof msg);
    mk_tracefile_diff_t d;
    int rc = mk_tracefile_diff(t, t, &d);
    mk_tracefile_free(t);
    return rc;
}

MK_FUZZ_HARNESS(read_trace)
