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

/* Exit status for bad input (flags, files, layouts), as every subcommand uses. */
#define MK_EXIT_USAGE 2

/* Record a printf-style message for the calling thread; always returns -1. */
int mk_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The last message recorded by mk_error_set() on this thread ("" if none). */
const char *mk_error_last(void);

/* Wall-clock seconds from a monotonic clock. */
double mk_time_now(void);

/* Safe string copy into a fixed buffer (always NUL-terminated). */
void mk_strlcpy(char *dst, const char *src, size_t size);

#ifdef __cplusplus
}
#endif
#endif
