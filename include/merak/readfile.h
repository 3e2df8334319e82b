/* Reading a whole input file into memory, bounded: the data-file and trace
 * readers share one rule for what may be read and how much. */
#ifndef MERAK_READFILE_H
#define MERAK_READFILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most an input file read whole (mk_read_file) may hold: 16 GiB;
 * also the largest single JSON value a streamed reader buffers. */
#define MK_READ_MAX_BYTES ((size_t)1 << 34)

/* Open PATH for reading if it is a regular file or a pipe; NULL with
 * "cannot read WHAT 'PATH': why" (missing, a directory, a device). */
FILE *mk_open_input(const char *path, const char *what);
/* Read all of PATH (opened as mk_open_input does), at most max bytes.
 * Returns a malloc'd buffer of *len bytes plus a NUL, or NULL with
 * "cannot read WHAT 'PATH': why" or "WHAT 'PATH' is larger than N GiB
 * (the most merak reads)". */
char *mk_read_file(const char *path, const char *what, size_t max, size_t *len);

/* The installed data folder: $MERAK_DATADIR when set and not empty (a
 * relocated install, or tests), else the configured $(pkgdatadir). */
const char *mk_data_dir(void);
/* The file a model or cluster JSON named by the user is read from: NAME
 * when it is absolute or exists relative to the current directory, else
 * mk_data_dir()/NAME when that exists (the installed model files found by
 * name), else NAME (whose read then fails naming it).  Returns NAME or buf
 * (n bytes; a path that does not fit is not looked up). */
const char *mk_data_path(const char *name, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
