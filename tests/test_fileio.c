/* The safe writer (src/util/fileio.c) at the library level: commit and abort,
 * symlink chains and loops, bad names, the input check, and the signal
 * handler removing a live temporary (in a forked child). */
#include "check.h"
#include "merak/common.h"
#include "merak/fileio.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

static void put(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static int holds(const char *p, const char *text)
{
    char buf[64] = "";
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return !strcmp(buf, text);
}

static int save(const char *path, const char *text)
{
    mk_file_out_t o;
    FILE *f = mk_file_begin(&o, path, "test file");
    if (!f) return -1;
    fputs(text, f);
    return mk_file_commit(&o);
}

static void commit_and_abort(void)
{
    put("a", "old");
    mk_file_out_t o;
    FILE *f = mk_file_begin(&o, "a", "test file");
    CHECK(f != NULL, "%s", mk_error_last());
    char tmp[64];
    snprintf(tmp, sizeof tmp, "a.tmp.%ld", (long)getpid());
    CHECK(exists(tmp), "temporary %s exists while writing", tmp);
    fputs("new", f);
    mk_file_abort(&o);
    mk_file_abort(&o); /* twice is fine */
    CHECK(!exists(tmp) && holds("a", "old"), "abort: temporary removed, old file kept");
    CHECK(save("a", "new") == 0 && holds("a", "new") && !exists(tmp), "commit replaces the file");
    mk_file_out_t zero;
    memset(&zero, 0, sizeof zero);
    mk_file_abort(&zero); /* never begun: nothing to do */
}

static void links_and_names(void)
{
    put("t", "old");
    symlink("t", "l1");
    symlink("l1", "l2");
    CHECK(save("l2", "via") == 0, "%s", mk_error_last());
    struct stat st;
    CHECK(holds("t", "via") && lstat("l1", &st) == 0 && S_ISLNK(st.st_mode) && lstat("l2", &st) == 0 &&
          S_ISLNK(st.st_mode), "chain written through to its target, both links kept");
    symlink("loop2", "loop1");
    symlink("loop1", "loop2");
    CHECK(save("loop1", "x") < 0 && strstr(mk_error_last(), "symbolic links"), "loop: %s", mk_error_last());
    CHECK(save("", "x") < 0 && strstr(mk_error_last(), "not a file name"), "empty name: %s", mk_error_last());
    CHECK(save("sub/", "x") < 0 && strstr(mk_error_last(), "not a file name"), "trailing slash: %s", mk_error_last());
    CHECK(mk_file_check_output("nodir/x", "test file") < 0 && strstr(mk_error_last(), "'nodir' does not exist"),
          "missing directory: %s", mk_error_last());
    CHECK(mk_file_check_output("fresh", "test file") == 0 && !exists("fresh"), "the check creates nothing");
    mkdir("d", 0755);
    CHECK(mk_file_check_input("d", "model") < 0 && !strcmp(mk_error_last(), "cannot read model 'd': it is a directory, not a regular file or a pipe"),
          "input directory: %s", mk_error_last());
    CHECK(mk_file_check_input("t", "model") == 0, "a regular input passes");
}

/* A child begins a file and is sent SIGTERM: it must die of the signal
 * with the temporary removed and the old file kept. */
static void signal_cleanup(int sig)
{
    put("s", "old");
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        signal(sig, SIG_DFL); /* a background `make check` starts with SIGINT ignored */
        mk_file_cleanup_install();
        mk_file_out_t o;
        FILE *f = mk_file_begin(&o, "s", "test file");
        fputs("partial", f);
        fflush(f);
        char c = 'x';
        if (write(fds[1], &c, 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    char c;
    CHECK(read(fds[0], &c, 1) == 1, "child started");
    char tmp[64];
    snprintf(tmp, sizeof tmp, "s.tmp.%ld", (long)pid);
    CHECK(exists(tmp), "child's temporary exists");
    kill(pid, sig);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sig, "signal %d: child died of it (status %#x)", sig, st);
    CHECK(!exists(tmp) && holds("s", "old"), "signal %d: temporary removed, old file kept", sig);
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    char dir[] = "/tmp/mk-fileio-XXXXXX";
    CHECK(mkdtemp(dir) && chdir(dir) == 0, "temp dir");
    commit_and_abort();
    links_and_names();
    signal_cleanup(SIGTERM);
    signal_cleanup(SIGINT);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
