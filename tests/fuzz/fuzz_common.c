/* Scratch files and the result check shared by every harness. */
#include "fuzz.h"
#include "merak/common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mk_fuzz_rc;
volatile double mk_fuzz_sink;
static char scratch[4096];

void mk_fuzz_cleanup(void)
{
    if (!scratch[0]) return;
    DIR *d = opendir(scratch);
    struct dirent *e;
    char p[sizeof scratch + 256];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    rmdir(scratch);
    scratch[0] = 0;
}

const char *mk_fuzz_dir(void)
{
    if (scratch[0]) return scratch;
    const char *t = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/merak-fuzz.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("merak fuzz: mkdtemp");
        abort(); /* the harness cannot run at all: not a finding */
    }
    atexit(mk_fuzz_cleanup);
    return scratch;
}

const char *mk_fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[sizeof scratch + 256];
    snprintf(path, sizeof path, "%s/%s", mk_fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror("merak fuzz: writing the input file");
        abort();
    }
    return path;
}

void mk_fuzz_check(int rc)
{
    if (rc == 0) return;
    if (rc != -1) {
        fprintf(stderr, "merak fuzz: reader returned %d (want 0 or -1)\n", rc);
        abort();
    }
    if (!mk_error_last()[0]) {
        fprintf(stderr, "merak fuzz: input rejected without a message\n");
        abort();
    }
}

void mk_fuzz_clear(void) { mk_error_set("%s", ""); }
