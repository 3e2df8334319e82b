/* Safe output files (rules in include/merak/fileio.h). */
#include "merak/common.h"
#include "merak/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- registry of live temporary files, read by the signal handler ----
 * A slot is FREE, CLAIMED (its name being written) or LIVE; the handler
 * only reads LIVE names, so it never sees half a name. */
enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE };
#define MK_FILE_SLOTS 16
static struct {
    volatile sig_atomic_t state;
    char tmp[MK_FILE_PATH_MAX + 32];
} slots[MK_FILE_SLOTS];

static int registry_add(const char *tmp)
{
    for (int i = 0; i < MK_FILE_SLOTS; i++) {
        sig_atomic_t want = SLOT_FREE;
        if (!__atomic_compare_exchange_n(&slots[i].state, &want, SLOT_CLAIMED, 0, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST))
            continue;
        mk_strlcpy(slots[i].tmp, tmp, sizeof slots[i].tmp);
        __atomic_store_n(&slots[i].state, SLOT_LIVE, __ATOMIC_SEQ_CST);
        return i;
    }
    return -1; /* all busy: the file is still written, just not cleaned on a signal */
}

static void registry_drop(int slot)
{
    if (slot >= 0) __atomic_store_n(&slots[slot].state, SLOT_FREE, __ATOMIC_SEQ_CST);
}

static void say(const char *s)
{
    if (write(2, s, strlen(s)) < 0) return; /* nothing to do about it in a handler */
}

static volatile sig_atomic_t deferring, interrupted;

/* Async-signal-safe: unlink(), write(), raise() and sig_atomic_t stores
 * only.  One line per removed file.  Deferring (merak run): the process
 * goes on, and its next wait or step boundary sees mk_file_interrupted()
 * and ends the job through MPI (hydra reports an exit that follows a
 * signal it forwarded as 0 about half the time, an MPI_Abort never); a
 * second signal ends the process at once. */
static void on_signal(int sig)
{
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    for (int i = 0; i < MK_FILE_SLOTS; i++)
        if (slots[i].state == SLOT_LIVE && unlink(slots[i].tmp) == 0) {
            say("merak: ");
            say(name);
            say(": removed the unfinished file '");
            say(slots[i].tmp);
            say("'\n");
        }
    if (deferring && !interrupted) {
        interrupted = sig;
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig); /* the default action: the process dies of it, as a shell expects */
}

void mk_file_defer_signals(void) { deferring = 1; }

int mk_file_interrupted(void) { return interrupted; }

const char *mk_file_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

void mk_file_cleanup_install(void)
{
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_NODEFER; /* the handler restores the default itself */
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

/* ---- paths ---- */

/* Follow a chain of symlinks at the last component of path (up to 40, as
 * the kernel does); out is the final name, which need not exist. */
static int resolve(const char *path, char *out, size_t n)
{
    char link[MK_FILE_PATH_MAX];
    if (strlen(path) >= n) return errno = ENAMETOOLONG, -1;
    strcpy(out, path);
    for (int hop = 0; hop < 40; hop++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
        ssize_t k = readlink(out, link, sizeof link - 1);
        if (k < 0) return -1;
        link[k] = '\0';
        char *slash = strrchr(out, '/');
        size_t d = link[0] == '/' || !slash ? 0 : (size_t)(slash - out) + 1;
        if (d + (size_t)k >= n) return errno = ENAMETOOLONG, -1;
        memcpy(out + d, link, (size_t)k + 1);
    }
    return errno = ELOOP, -1;
}

/* Directory of a resolved path ("." when it has no slash). */
static void dir_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash) mk_strlcpy(dir, ".", n);
    else if (slash == path) mk_strlcpy(dir, "/", n);
    else mk_strlcpy(dir, path, (size_t)(slash - path) + 1 < n ? (size_t)(slash - path) + 1 : n);
}

/* ---- identity ---- */

static void id_of_stat(const struct stat *st, mk_file_id_t *id)
{
    id->dev = (unsigned long long)st->st_dev, id->ino = (unsigned long long)st->st_ino, id->known = 1;
}

void mk_file_id(const char *path, mk_file_id_t *id)
{
    char real[MK_FILE_PATH_MAX], dir[MK_FILE_PATH_MAX];
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) return id_of_stat(&st, id);
    /* not there yet: the file it will be is (directory, name) once the
       symlinks at its last component are followed, as mk_file_begin does */
    if (resolve(path, real, sizeof real) != 0) return;
    dir_of(real, dir, sizeof dir);
    const char *slash = strrchr(real, '/'), *leaf = slash ? slash + 1 : real;
    if (!*leaf || strlen(leaf) >= sizeof id->leaf || stat(dir, &st) != 0) return;
    id_of_stat(&st, id);
    mk_strlcpy(id->leaf, leaf, sizeof id->leaf);
}

void mk_file_id_fd(int fd, mk_file_id_t *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) id_of_stat(&st, id);
}

int mk_file_id_same(const mk_file_id_t *a, const mk_file_id_t *b)
{
    return a->known && b->known && a->dev == b->dev && a->ino == b->ino && !strcmp(a->leaf, b->leaf);
}

static const char *kind_name(mode_t m)
{
    return S_ISDIR(m) ? "directory" : S_ISFIFO(m) ? "FIFO" : S_ISCHR(m) ? "character device"
         : S_ISBLK(m) ? "block device" : S_ISSOCK(m) ? "socket" : "special file";
}

static int fail(const mk_file_out_t *o, const char *why)
{
    return mk_error_set("cannot write %s %s: %s", o->what, o->name, why);
}

int mk_file_fail(const mk_file_out_t *o, int err) { return fail(o, strerror(err ? err : EIO)); }

/* Resolve the target and check it and its directory; *mode: the existing
 * file's permission bits, or NEW_FILE. */
#define NEW_FILE ((mode_t)-1)
static int prepare(mk_file_out_t *o, const char *path, const char *what, mode_t *mode)
{
    mk_strlcpy(o->what, what, sizeof o->what);
    snprintf(o->name, sizeof o->name, "'%s'", path);
    o->f = NULL, o->slot = -1, o->tmp[0] = '\0';
    size_t len = strlen(path);
    if (!len || path[len - 1] == '/') return fail(o, "not a file name");
    if (resolve(path, o->path, sizeof o->path) != 0) return fail(o, strerror(errno));
    if (strcmp(path, o->path)) snprintf(o->name, sizeof o->name, "'%s' -> '%s'", path, o->path);
    struct stat st;
    *mode = NEW_FILE;
    if (stat(o->path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            char why[128];
            snprintf(why, sizeof why, "it is a %s, not a regular file (refusing to replace it)", kind_name(st.st_mode));
            return fail(o, why);
        }
        *mode = st.st_mode & 07777;
    } else if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: the directory check names it */
        return fail(o, strerror(errno));
    }
    char dir[MK_FILE_PATH_MAX], why[MK_FILE_PATH_MAX + 64];
    dir_of(o->path, dir, sizeof dir);
    int missing = stat(dir, &st) != 0;
    if (missing || !S_ISDIR(st.st_mode)) {
        if (!missing) snprintf(why, sizeof why, "'%s' is not a directory", dir);
        else if (errno == ENOENT) snprintf(why, sizeof why, "directory '%s' does not exist", dir);
        else snprintf(why, sizeof why, "directory '%s': %s", dir, strerror(errno));
        return fail(o, why);
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->path, (long)getpid());
    return 0;
}

/* Remove PATH.tmp.N for every N that names no process.  Only exact
 * matches (N all digits) of this target's name are considered. */
static void remove_stale(const char *path)
{
    char dir[MK_FILE_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) || strncmp(n + bl, ".tmp.", 5) || !n[bl + 5]) continue;
        char *end;
        long pid = strtol(n + bl + 5, &end, 10);
        if (*end || n[bl + 5] < '0' || n[bl + 5] > '9' || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlinkat(dirfd(d), n, 0);
    }
    closedir(d);
}

FILE *mk_file_begin(mk_file_out_t *o, const char *path, const char *what)
{
    mode_t mode;
    if (prepare(o, path, what, &mode) != 0) return NULL;
    remove_stale(o->path);
    unlink(o->tmp); /* a leftover of a dead process that had our pid */
    o->slot = registry_add(o->tmp);
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode == NEW_FILE ? 0666 : mode);
    if (fd >= 0 && mode != NEW_FILE) fchmod(fd, mode); /* keep the old file's bits despite the umask */
    if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
        int err = errno;
        if (fd >= 0) close(fd), unlink(o->tmp);
        registry_drop(o->slot);
        o->slot = -1, o->tmp[0] = '\0';
        fail(o, strerror(err));
        return NULL;
    }
    return o->f;
}

void mk_file_abort(mk_file_out_t *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) { /* a zeroed mk_file_out_t (never begun) has none */
        unlink(o->tmp);
        registry_drop(o->slot);
    }
    o->tmp[0] = '\0';
    o->slot = -1;
}

/* fsync a directory so a rename in it survives a crash; filesystems that
 * cannot sync directories (EINVAL) are not an error. */
static int sync_dir(const char *path)
{
    char dir[MK_FILE_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1, err = errno;
    close(fd);
    errno = err;
    return rc;
}

/* Testing: MK_TEST_WRITE_PAUSE=S sleeps S seconds with the whole file in
 * its temporary, before the rename (the moment a kill is most harmful). */
static void test_pause(void)
{
    long long s = 0;
    mk_test_env("MK_TEST_WRITE_PAUSE", NULL, &s);
    for (long long i = s; i > 0 && !interrupted; i--) sleep(1);
}

int mk_file_commit(mk_file_out_t *o)
{
    int err = 0;
    errno = 0;
    /* a full disk shows here at the latest: buffered data meets ENOSPC */
    if (fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0) err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !err) err = errno ? errno : EIO;
    o->f = NULL;
    if (!err) test_pause();
    if (!err && interrupted) err = EINTR; /* the handler removed the temporary: never rename */
    if (!err && rename(o->tmp, o->path) != 0) err = errno;
    if (err) {
        mk_file_abort(o);
        char why[64];
        if (interrupted) snprintf(why, sizeof why, "interrupted by %s (the old file is kept)",
                                  mk_file_signal_name(interrupted));
        return fail(o, interrupted ? why : strerror(err));
    }
    o->tmp[0] = '\0';
    registry_drop(o->slot);
    o->slot = -1;
    if (sync_dir(o->path) != 0) return fail(o, strerror(errno));
    return 0;
}

int mk_file_check_output(const char *path, const char *what)
{
    mk_file_out_t o;
    if (!mk_file_begin(&o, path, what)) return -1;
    mk_file_abort(&o);
    return 0;
}

/* The one rule for inputs: a regular file or a pipe (`--plan <(...)`); a
 * directory has no bytes and a device (/dev/zero) may never end. */
int mk_file_check_input_mode(unsigned mode, const char *path, const char *what)
{
    if (S_ISREG(mode) || S_ISFIFO(mode)) return 0;
    return mk_error_set("cannot read %s '%s': it is a %s, not a regular file or a pipe", what, path,
                        kind_name((mode_t)mode));
}

int mk_file_check_input(const char *path, const char *what)
{
    struct stat st;
    if (stat(path, &st) != 0) return mk_error_set("cannot read %s '%s': %s", what, path, strerror(errno));
    return mk_file_check_input_mode(st.st_mode, path, what);
}
