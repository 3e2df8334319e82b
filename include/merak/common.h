/* Merak-C common definitions: status codes and the last-error message.
 *
 * Library functions return 0 on success and -1 on failure (or a pointer /
 * NULL); on failure they record a one-line message naming the problem,
 * which mk_error_last() returns.  Only the CLI and tests print and exit. */
#ifndef MERAK_COMMON_H
#define MERAK_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_VERSION_STRING "0.1.0"

/* The public API's symbols (declared in the installed headers, see
 * merak/merak.h): the only ones the shared libmerak exports, the library
 * being built with -fvisibility=hidden. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define MK_API __attribute__((visibility("default")))
#else
#define MK_API
#endif

/* Exit status for bad input (flags, files, layouts), as every subcommand uses. */
#define MK_EXIT_USAGE 2

/* Record a printf-style message for the calling thread; always returns -1. */
MK_API int mk_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The last message recorded by mk_error_set() on this thread ("" if none). */
MK_API const char *mk_error_last(void);
/* The library's own lines (a run's step log, a test hook's notice) go to
 * the handler the program sets, one line at a time without its newline;
 * with none set they are dropped: the library never writes to stdout or
 * stderr itself (the CLI's handler writes them to stderr).  Set it before
 * starting threads. */
typedef void (*mk_log_fn)(void *arg, const char *line);
MK_API void mk_log_set_handler(mk_log_fn fn, void *arg);
MK_API void mk_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Wall-clock seconds from a monotonic clock. */
MK_API double mk_time_now(void);

/* Strict integer parse (merak's flags and test hooks): the whole of s, in
 * [lo, hi], into *out.  0, or MK_PARSE_NOT_INT (not a whole integer),
 * MK_PARSE_ABOVE (above hi, or beyond 64 bits), MK_PARSE_BELOW. */
enum { MK_PARSE_NOT_INT = 1, MK_PARSE_ABOVE, MK_PARSE_BELOW };
MK_API int mk_parse_int64(const char *s, long long lo, long long hi, long long *out);

/* Test hooks (MK_TEST_*, src/util/testenv.c).  mk_test_env_check: -1 with
 * "MK_TEST_NAN must be step from 0 to N, got 'abc'" when a set hook does
 * not parse, else 0.  mk_test_env: 1 when hook NAME is set and valid, with
 * its value (and rank, for RANK:VALUE hooks; rank may be NULL), else 0. */
MK_API int mk_test_env_check(void);
MK_API int mk_test_env(const char *name, int *rank, long long *value);

/* Safe string copy into a fixed buffer (always NUL-terminated). */
MK_API void mk_strlcpy(char *dst, const char *src, size_t size);

#ifdef __cplusplus
}
#endif
#endif
