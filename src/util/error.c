/* Per-thread last-error message (like dlerror): library calls fail with -1
 * and leave a one-line reason here for the CLI to print. */
#include "merak/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Thread_local char mk_last_error[512];

int mk_error_set(const char *fmt, ...)
{
    /* format into a copy first: callers may pass mk_error_last() as an
     * argument to wrap the previous message */
    char buf[sizeof mk_last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(mk_last_error, buf, sizeof buf);
    return -1;
}

const char *mk_error_last(void) { return mk_last_error; }

/* The program's line handler: set once at start-up, before any threads
 * (the CLI's writes to stderr), so reads need no lock. */
static mk_log_fn log_fn;
static void *log_arg;

void mk_log_set_handler(mk_log_fn fn, void *arg) { log_fn = fn, log_arg = arg; }

void mk_log(const char *fmt, ...)
{
    if (!log_fn) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(log_arg, buf);
}

double mk_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mk_strlcpy(char *dst, const char *src, size_t size)
{
    if (size == 0) return;
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
