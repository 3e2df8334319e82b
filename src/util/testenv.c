/* The test hooks' environment variables (MK_TEST_*), read through one
 * table with the flags' strict integer parser (mk_parse_int64): a hook set
 * to garbage is refused by name before any work (mk_test_env_check, called
 * by merak's main), never read as 0 by atoi and fired at step 0.  What each
 * hook does is documented where it fires (src/exec/exec_faults.c,
 * src/util/fileio.c, src/planner/planner_mpi.c, src/cli/cli_blas.c,
 * src/cpu/gemm_dnnl.c, src/cpu/backend_cpu.c). */
#include "merak/common.h"
#include "merak/limits.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int mk_parse_int64(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) return MK_PARSE_NOT_INT;
    if (v > hi || (errno == ERANGE && v == LLONG_MAX)) return MK_PARSE_ABOVE;
    if (errno || v < lo) return MK_PARSE_BELOW;
    *out = v;
    return 0;
}

typedef struct {
    const char *name;
    int pair;                 /* RANK:VALUE, else VALUE */
    long long lo, hi;         /* VALUE's range */
    const char *value;        /* what VALUE is, for the message */
} hook_t;

static const hook_t hooks[] = {
    {"MK_TEST_FAIL", 1, 0, MK_MAX_STEPS, "step"},
    {"MK_TEST_STOP", 1, 0, MK_MAX_STEPS, "step"},
    {"MK_TEST_DEVICE_FAIL", 1, -1, MK_MAX_STEPS, "step (-1: the load)"},
    {"MK_TEST_NAN", 0, 0, MK_MAX_STEPS, "step"},
    {"MK_TEST_GRAD_INF", 1, 0, MK_MAX_STEPS, "step"},
    {"MK_TEST_SAVE_DIE_AFTER", 0, 1, INT_MAX, "tensor count"},
    {"MK_TEST_WRITE_PAUSE", 0, 0, 3600, "seconds"},
    {"MK_TEST_PLAN_FAIL", 0, 0, MK_MAX_GPUS - 1, "rank"},
    {"MK_TEST_BLAS_GENERIC", 0, 0, 1, "a switch"},
    {"MK_TEST_NO_DNNL", 0, 0, 1, "a switch"},
    {"MK_TEST_STAGED", 0, 0, 1, "a switch"},
};

static const hook_t *hook_of(const char *name)
{
    for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++)
        if (!strcmp(hooks[i].name, name)) return &hooks[i];
    return NULL;
}

/* h's value in s: 0, or -1 (with the message naming the hook when say). */
static int parse_hook(const hook_t *h, const char *s, int say, int *rank, long long *v)
{
    const char *colon = strchr(s, ':'), *val = s;
    char r[32];
    long long rk = 0;
    if (h->pair) {
        size_t n = colon ? (size_t)(colon - s) : 0;
        if (!colon || n >= sizeof r) goto bad;
        memcpy(r, s, n), r[n] = '\0';
        if (mk_parse_int64(r, 0, MK_MAX_GPUS - 1, &rk)) goto bad;
        val = colon + 1;
    }
    if (mk_parse_int64(val, h->lo, h->hi, v)) goto bad;
    if (rank) *rank = (int)rk;
    return 0;
bad:
    if (!say) return -1;
    return mk_error_set("%s must be %s%s from %lld to %lld, got '%s'", h->name, h->pair ? "RANK:" : "",
                        h->value, h->lo, h->hi, s);
}

int mk_test_env_check(void)
{
    for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++) {
        const char *s = getenv(hooks[i].name);
        int rank;
        long long v;
        if (s && *s && parse_hook(&hooks[i], s, 1, &rank, &v) < 0) return -1;
    }
    return 0;
}

int mk_test_env(const char *name, int *rank, long long *value)
{
    const hook_t *h = hook_of(name);
    const char *s = getenv(name);
    /* a bad value is mk_test_env_check's to report: quiet here */
    return h && s && *s && parse_hook(h, s, 0, rank, value) == 0;
}
