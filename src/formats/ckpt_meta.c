/* Merak checkpoint metadata: one table of the integer fields for the
 * writer (src/exec/exec_ckpt.c) and every reader (see merak/ckpt.h). */
#include "merak/ckpt.h"
#include "merak/common.h"
#include "merak/limits.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* step, data_position and lr_decay_steps feed int64 step counters; the
 * seed is recorded as given (64 bits). */
static const struct { const char *key; uint64_t max; } meta_field[MK_CKPT_N_META] = {
    {"step", INT64_MAX}, {"data_position", INT64_MAX}, {"lr_decay_steps", INT64_MAX}, {"seed", UINT64_MAX}};

const char *mk_ckpt_meta_key(int i) { return meta_field[i].key; }

/* s as given, printable and short, for a one-line message. */
static const char *printable(const char *s, char *shown, size_t n)
{
    size_t k = 0;
    for (; s[k] && k + 4 < n && s[k] >= ' ' && s[k] < 127; k++) shown[k] = s[k];
    strcpy(shown + k, s[k] ? "..." : "");
    return shown;
}

/* Field i: digits only, no sign, within its range. */
static int meta_u64(const mk_st_reader_t *r, const char *path, int i, uint64_t *v)
{
    const char *s = mk_st_meta(r, meta_field[i].key);
    if (!s) return mk_error_set("%s: no '%s' in the checkpoint's metadata", path, meta_field[i].key);
    char *end = NULL, shown[48];
    errno = 0;
    unsigned long long x = *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (end && !*end && errno == 0 && x <= meta_field[i].max) {
        *v = x;
        return 0;
    }
    return mk_error_set("%s: metadata '%s' must be an integer in [0, %llu], got '%s'", path, meta_field[i].key,
                        (unsigned long long)meta_field[i].max, printable(s, shown, sizeof shown));
}

int mk_ckpt_read_meta(const mk_st_reader_t *r, const char *path, uint64_t v[MK_CKPT_N_META])
{
    const char *fmt = mk_st_meta(r, "format"), *ver = mk_st_meta(r, "format_version");
    if (!fmt || strcmp(fmt, "merak") || !ver)
        return mk_error_set("%s: not a merak checkpoint (no format metadata)", path);
    if (strcmp(ver, MK_CKPT_FORMAT))
        return mk_error_set("%s: checkpoint format version %s (this merak reads %s)", path, ver, MK_CKPT_FORMAT);
    for (int i = 0; i < MK_CKPT_N_META; i++)
        if (meta_u64(r, path, i, &v[i]) < 0) return -1;
    return 0;
}

int mk_ckpt_read_skipped(const mk_st_reader_t *r, const char *path, uint64_t step, uint64_t *skipped)
{
    const char *s = mk_st_meta(r, MK_CKPT_SKIPPED_KEY);
    *skipped = 0;
    if (!s) return 0;
    char *end = NULL, shown[48];
    errno = 0;
    unsigned long long x = *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (end && !*end && errno == 0 && x <= step) return *skipped = x, 0;
    return mk_error_set("%s: metadata '%s' must be an integer in [0, %llu] (the checkpoint's step), got '%s'", path,
                        MK_CKPT_SKIPPED_KEY, (unsigned long long)step, printable(s, shown, sizeof shown));
}

void mk_ckpt_format_scaler(const mk_ckpt_scaler_t *s, char *buf, size_t n)
{
    snprintf(buf, n, "%.17g %d %d", s->scale, s->growth, s->hysteresis);
}

/* An integer in [0, max] at *p, then a space or the end; advances *p. */
static int scaler_int(const char **p, long max, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = **p >= '0' && **p <= '9' ? strtol(*p, &end, 10) : -1;
    if (!end || errno || v < 0 || v > max || (*end && *end != ' ')) return -1;
    *out = (int)v, *p = *end ? end + 1 : end;
    return 0;
}

int mk_ckpt_read_scaler(const mk_st_reader_t *r, const char *path, mk_ckpt_scaler_t *s)
{
    const char *v = mk_st_meta(r, MK_CKPT_SCALER_KEY), *p;
    if (!v) return 0;
    char *end = NULL;
    errno = 0;
    s->scale = *v >= '0' && *v <= '9' ? strtod(v, &end) : -1;
    p = end && *end == ' ' ? end + 1 : NULL;
    if (errno || !(s->scale >= 1 && s->scale <= MK_MAX_LOSS_SCALE) || !p ||
        scaler_int(&p, MK_MAX_LOSS_SCALE_WINDOW, &s->growth) < 0 || !*p ||
        scaler_int(&p, MK_MAX_HYSTERESIS, &s->hysteresis) < 0 || *p)
    {
        char shown[48];
        return mk_error_set("%s: metadata '%s' must be 'SCALE GROWTH HYSTERESIS' (a scale from 1 to %g, counts "
                            "from 0), got '%s'", path, MK_CKPT_SCALER_KEY, MK_MAX_LOSS_SCALE,
                            printable(v, shown, sizeof shown));
    }
    return 1;
}
