/* Corpus replay without libFuzzer: runs LLVMFuzzerTestOneInput on each
 * file given (or each file of each folder given), one child process per
 * file, so one crash is reported with its file and the rest still run.
 *
 * A file passes when its child exits normally within the time limit and
 * below the memory limit; in addition, a file named reject-* must be
 * rejected by the reader (-1) and one named accept-* accepted (0), which
 * is how reproducers of "silently accepted" bugs fail.  Prints one line
 * per failure and a count; exits 1 when any file failed.
 *
 * Environment: MK_REPLAY_TIMEOUT (seconds per file, default 10),
 * MK_REPLAY_MAX_RSS_MB (default 512), MK_REPLAY_VERBOSE=1 (a line per file). */
#include "fuzz.h"
#include "merak/common.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static long env_long(const char *k, long dflt)
{
    const char *v = getenv(k);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc(len ? (size_t)len : 1)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
        fclose(f);
        *n = (size_t)len;
        return buf;
    }
    if (f) fclose(f);
    free(buf);
    return NULL;
}

/* Child: exit 0 accepted, 1 rejected, 3 unreadable; the error goes to fd 3. */
static void child(const char *path, long timeout)
{
    size_t n;
    unsigned char *buf = slurp(path, &n);
    if (!buf) _exit(3);
    alarm((unsigned)timeout);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    printf("%s", mk_error_last());
    fflush(stdout);
    _exit(mk_fuzz_rc == 0 ? 0 : 1);
}

/* One file; returns 1 when it failed. */
static int replay(const char *path, long timeout, long max_rss_mb, int verbose)
{
    int fd[2];
    if (pipe(fd) < 0) return perror("pipe"), 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        child(path, timeout);
    }
    close(fd[1]);
    char msg[600] = "", rest[4096];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof msg - 1 && (r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
    msg[got] = 0;
    while (read(fd[0], rest, sizeof rest) > 0) continue; /* drain: the child must not block on a full pipe */
    close(fd[0]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) return perror("wait4"), 1;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char why[700] = "";
    long rss_mb = ru.ru_maxrss / 1024;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) snprintf(why, sizeof why, "ran past %ld s", timeout);
    else if (WIFSIGNALED(st)) snprintf(why, sizeof why, "crashed (%s)", strsignal(WTERMSIG(st)));
    else if (WEXITSTATUS(st) == 3) snprintf(why, sizeof why, "cannot read the file");
    else if (WEXITSTATUS(st) > 1) snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
    else if (rss_mb > max_rss_mb) snprintf(why, sizeof why, "used %ld MB (limit %ld MB)", rss_mb, max_rss_mb);
    else if (!strncmp(base, "reject-", 7) && WEXITSTATUS(st) == 0) snprintf(why, sizeof why, "accepted, must be rejected");
    else if (!strncmp(base, "accept-", 7) && WEXITSTATUS(st) == 1) snprintf(why, sizeof why, "rejected: %s", msg);
    if (why[0]) printf("FAIL: %s: %s\n", path, why);
    else if (verbose) printf("ok: %s: %s%s\n", path, WEXITSTATUS(st) ? "rejected: " : "accepted", msg);
    return why[0] != 0;
}

static int is_dir(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The regular files of a folder, sorted, replayed in turn. */
static int replay_dir(const char *dir, long timeout, long max_rss_mb, int verbose, int *count)
{
    DIR *d = opendir(dir);
    if (!d) return printf("FAIL: %s: cannot open the folder\n", dir), 1;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && (names = realloc(names, (n + 1) * sizeof *names)))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int fails = 0;
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (!is_dir(p)) fails += replay(p, timeout, max_rss_mb, verbose), ++*count;
        free(names[i]);
    }
    free(names);
    return fails;
}

int main(int argc, char **argv)
{
    long timeout = env_long("MK_REPLAY_TIMEOUT", 10), max_rss_mb = env_long("MK_REPLAY_MAX_RSS_MB", 512);
    int verbose = env_long("MK_REPLAY_VERBOSE", 0) > 0, fails = 0, count = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    mk_fuzz_dir(); /* one scratch folder for all children, removed here at exit */
    for (int i = 1; i < argc; i++) {
        if (is_dir(argv[i])) fails += replay_dir(argv[i], timeout, max_rss_mb, verbose, &count);
        else fails += replay(argv[i], timeout, max_rss_mb, verbose), count++;
    }
    printf("%s: %d file(s), %d failed\n", argv[0], count, fails);
    return fails ? 1 : 0;
}
