/* Golden-output driver: runs many `merak` command lines from one process.
 *
 * Starting ./merak costs about 0.15 s (the dynamic loader relocates cuBLAS),
 * which would make a grid of thousands of cases take many minutes.  This
 * program is built from the same sources as ./merak (merak_SOURCES, with its
 * main renamed mk_merak_main by -Dmain=...) and runs merak's main once per
 * case with stdout and stderr in temporary files, so a case prints what
 * `merak ARGS >out 2>err` prints.
 *
 *   batch          every case in this process, one after the other (about
 *                  1 ms a case): fast, but a case sees what earlier ones left
 *                  in static state, and an exit() in library code ends all
 *   batch --fork   each case in a forked child (about 30 ms a case: the copy
 *                  of cuBLAS's relocated pages): exactly a fresh process
 * golden.py records with --fork and checks without it; a case that differs
 * is rerun with --fork before it is reported, so shared state is told apart
 * from a changed result.
 *
 * Input (stdin): one case per line, the arguments after `merak`, separated
 * by single spaces (no quoting; golden.py writes no argument with a space).
 * Output (stdout), per case:
 *   @@case LINE\n  @@rc N\n  @@stdout BYTES\n<bytes>  @@stderr BYTES\n<bytes>
 * rc is the exit status, or 128 + the signal number (--fork). */
#include "config.h"
/* this target compiles merak's sources with -Dmain=mk_merak_main; this file keeps its own main */
#undef main

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int mk_merak_main(int argc, char **argv);

#define MAX_LINE 4096 /* bytes of one case line */
#define MAX_ARGS 128

/* Copy a finished case's captured stream to stdout, framed by its length. */
static int emit(const char *tag, FILE *f)
{
    char buf[8192];
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) < 0) return -1;
    printf("@@%s %ld\n", tag, n);
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, stdout);
    return ferror(f) ? -1 : 0;
}

static int use_fork;

/* Run one case (argv[0] = "merak") here: stdout and stderr go to the files
 * for its duration; returns merak's exit status. */
static int run_here(int argc, char **argv, FILE *out, FILE *err)
{
    fflush(NULL);
    int o = dup(1), e = dup(2);
    if (o < 0 || e < 0 || dup2(fileno(out), 1) < 0 || dup2(fileno(err), 2) < 0) return -1;
    int rc = mk_merak_main(argc, argv);
    fflush(NULL);
    if (dup2(o, 1) < 0 || dup2(e, 2) < 0) return -1;
    close(o);
    close(e);
    fseek(out, 0, SEEK_END);
    fseek(err, 0, SEEK_END);
    return rc;
}

/* Run one case (argv[0] = "merak") in a child; returns the exit status. */
static int run_forked(int argc, char **argv, FILE *out, FILE *err)
{
    fflush(NULL); /* nothing buffered may be duplicated into the child */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (!freopen("/dev/null", "r", stdin) || dup2(fileno(out), 1) < 0 || dup2(fileno(err), 2) < 0)
            _exit(127);
        exit(mk_merak_main(argc, argv)); /* exit(): flush stdio as main's return does */
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    /* the child wrote through shared file offsets: seek to the end to see them */
    fseek(out, 0, SEEK_END);
    fseek(err, 0, SEEK_END);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Every case line, read before the first fork: a child's exit() would move
 * the shared stdin offset back to its stdio buffer's position (POSIX), and
 * the parent would read cases again. */
static char *read_all(void)
{
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, stdin)) > 0;)
        if ((n += k) + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    if (buf) buf[n] = 0;
    return buf;
}

/* Run the case on one line and print its framed result; 0 or -1. */
static int one_case(const char *line)
{
    char copy[MAX_LINE];
    snprintf(copy, sizeof copy, "%s", line);
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "merak";
    for (char *t = strtok(copy, " "); t && argc <= MAX_ARGS; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    int rc = out && err ? (use_fork ? run_forked : run_here)(argc, argv, out, err) : -1;
    if (rc >= 0) {
        printf("@@case %s\n@@rc %d\n", line, rc);
        if (emit("stdout", out) < 0 || emit("stderr", err) < 0) rc = -1;
    }
    if (out) fclose(out);
    if (err) fclose(err);
    return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    use_fork = argc > 1 && !strcmp(argv[1], "--fork");
    char *all = read_all();
    if (!all) {
        perror("golden batch: reading the cases");
        return 1;
    }
    for (char *line = all, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next) *next++ = 0;
        if (!*line) continue;
        if (strlen(line) >= MAX_LINE || one_case(line) < 0) {
            fprintf(stderr, "golden batch: case '%.60s...' failed to run\n", line);
            return 1;
        }
    }
    free(all);
    return fflush(stdout) ? 1 : 0;
}
