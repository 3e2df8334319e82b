/* Bounded whole-file reads (see readfile.h). */
#include "merak/common.h"
#include "merak/fileio.h"
#include "merak/readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* -DMK_DATADIR='"$(pkgdatadir)"' from Makefile.am; a build without it
 * (a harness compiling the sources alone) looks only in the current folder */
#ifndef MK_DATADIR
#define MK_DATADIR ""
#endif

/* Opened, then checked by the descriptor (the file cannot change in between). */
FILE *mk_open_input(const char *path, const char *what)
{
    struct stat st;
    FILE *f = fopen(path, "rb");
    if (!f) return mk_error_set("cannot read %s '%s': %s", what, path, strerror(errno)), NULL;
    int bad = fstat(fileno(f), &st) != 0 ? mk_error_set("cannot read %s '%s': %s", what, path, strerror(errno))
                                         : mk_file_check_input_mode(st.st_mode, path, what);
    if (bad) return fclose(f), NULL;
    return f;
}

char *mk_read_file(const char *path, const char *what, size_t max, size_t *len)
{
    FILE *f = mk_open_input(path, what);
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0, got = 1;
    char *buf = malloc(cap + 1);
    while (buf && got > 0 && n <= max) {
        if (n == cap) { /* to max + 1 bytes at most, to see a file go past max; max <= SIZE_MAX / 4 */
            size_t next = 2 * cap < max + 1 ? 2 * cap : max + 1;
            char *b = realloc(buf, next + 1);
            if (!b) break;
            buf = b, cap = next;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    }
    int err = ferror(f) ? errno : 0, nomem = !buf || (got > 0 && n <= max);
    fclose(f);
    if (err || nomem || n > max) {
        free(buf);
        if (n > max)
            return mk_error_set("%s '%s' is larger than %zu GiB (the most merak reads)", what, path, max >> 30), NULL;
        return mk_error_set("cannot read %s '%s': %s", what, path, err ? strerror(err) : "out of memory"), NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

const char *mk_data_dir(void)
{
    const char *env = getenv("MERAK_DATADIR");
    return env && *env ? env : MK_DATADIR;
}

const char *mk_data_path(const char *name, char *buf, size_t n)
{
    const char *dir = mk_data_dir();
    if (name[0] == '/' || !*dir || access(name, F_OK) == 0) return name;
    int len = snprintf(buf, n, "%s/%s", dir, name);
    if (len < 0 || (size_t)len >= n || access(buf, F_OK) != 0) return name;
    return buf;
}
