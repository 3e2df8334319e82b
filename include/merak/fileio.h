/* Safe output files: the one writer behind every file merak writes
 * (checkpoints, traces, plans, cluster/profile JSON, gradient dumps).
 *
 * A file is written to PATH.tmp.PID in the target's own directory, flushed
 * and fsync'ed, renamed over PATH, and the directory is fsync'ed, so PATH
 * holds either the old file or the whole new one, also after a crash.
 * Rules, the same for every writer:
 *  - only a regular file (or nothing) is replaced: a directory, FIFO,
 *    socket or device at PATH is refused ("... it is a character device,
 *    not a regular file (refusing to replace it)") and left untouched;
 *  - a symlink at PATH is written through: the chain of links is followed
 *    to its final target, the temporary file goes next to that target (so
 *    the rename is atomic on its filesystem) and the link itself is kept;
 *  - an existing target's permission bits are kept;
 *  - stale PATH.tmp.N files of processes that no longer exist (kill(N, 0)
 *    fails with ESRCH) are removed before writing; other names are never
 *    touched.  (A live process on another host of a shared filesystem
 *    could own such a file; merak writes from one rank, rank 0.)
 *  - live temporary files are registered, so the SIGINT/SIGTERM/SIGHUP
 *    handlers of mk_file_cleanup_install() remove them before the process
 *    dies of the signal. */
#ifndef MERAK_FILEIO_H
#define MERAK_FILEIO_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_FILE_PATH_MAX 4096

typedef struct mk_file_out {
    FILE *f;                            /* the temporary file, open for writing */
    char path[MK_FILE_PATH_MAX];        /* the target, symlinks resolved */
    char tmp[MK_FILE_PATH_MAX + 32];    /* path.tmp.PID */
    char name[2 * MK_FILE_PATH_MAX + 8];/* for messages: 'PATH' or 'PATH' -> 'TARGET' */
    char what[64];                      /* for messages: "checkpoint", "trace file", ... */
    int slot;                           /* signal-cleanup registry slot, -1: none */
} mk_file_out_t;

/* Start writing PATH (binary mode).  Returns the open temporary file, or
 * NULL with "cannot write WHAT 'PATH': why" (nothing is created then). */
FILE *mk_file_begin(mk_file_out_t *o, const char *path, const char *what);
/* Flush, fsync, close, rename over the target and fsync its directory.
 * 0, or -1 with "cannot write WHAT 'PATH': why" and the temporary removed
 * (the old file, if any, is untouched). */
int mk_file_commit(mk_file_out_t *o);
/* Record "cannot write WHAT 'PATH': strerror(err)" for a failed write
 * into o->f; returns -1. */
int mk_file_fail(const mk_file_out_t *o, int err);
/* Discard: close and remove the temporary file (safe to call twice, and
 * on a zeroed mk_file_out_t that was never begun). */
void mk_file_abort(mk_file_out_t *o);

/* Check up front that PATH can be written (a regular file or nothing, in
 * an existing writable directory) by creating and removing its temporary
 * file.  0, or -1 with the message mk_file_begin would give. */
int mk_file_check_output(const char *path, const char *what);

/* A file's identity, to tell whether two paths (or a path and an open
 * descriptor) are one file whatever their spelling: the device and inode
 * of the existing file (symlinks followed; a hard link is the same file),
 * or for a name that does not exist yet, its directory's device and inode
 * (after `.`, `..` and symlinks) with the last component. */
typedef struct mk_file_id {
    unsigned long long dev, ino;
    char leaf[256];                     /* "" for an existing file */
    int known;                          /* 0: cannot be told (no such directory) */
} mk_file_id_t;
/* PATH's identity; id->known 0 when neither it nor its directory exists. */
void mk_file_id(const char *path, mk_file_id_t *id);
/* An open descriptor's identity (known only for a regular file). */
void mk_file_id_fd(int fd, mk_file_id_t *id);
/* 1 when both are known and name the same file. */
int mk_file_id_same(const mk_file_id_t *a, const mk_file_id_t *b);

/* Check that PATH can be read as an input: a regular file or a pipe
 * (`--plan <(...)`).  -1 with "cannot read WHAT 'PATH': it is a directory,
 * not a regular file or a pipe" (or a device, socket; or the stat error):
 * a directory has no bytes and a device such as /dev/zero never ends. */
int mk_file_check_input(const char *path, const char *what);
/* The same rule for a file already opened (its st_mode from fstat). */
int mk_file_check_input_mode(unsigned mode, const char *path, const char *what);

/* Install SIGINT, SIGTERM and SIGHUP handlers that remove the registered
 * temporary files, then re-raise the signal with its default action (the
 * process dies of it, so a shell or mpiexec sees the failure).  Signals
 * that are ignored (nohup, background jobs) stay ignored. */
void mk_file_cleanup_install(void);
/* From now on the handlers remove the temporary files and return: the
 * signal is recorded for mk_file_interrupted(), mk_file_commit refuses to
 * rename (EINTR), and the program stops at its next check (merak run: the
 * executor's waits and step boundaries).  A second signal kills at once. */
void mk_file_defer_signals(void);
/* The signal recorded while deferring (SIGINT, SIGTERM, SIGHUP), or 0. */
int mk_file_interrupted(void);
/* "SIGINT", "SIGTERM", "SIGHUP". */
const char *mk_file_signal_name(int sig);

#ifdef __cplusplus
}
#endif
#endif
