/* Merak checkpoint metadata: one table of the integer fields for the
 * writer (src/exec/exec_ckpt.c) and every reader (see merak/ckpt.h). */
#include "merak/ckpt.h"
#include "merak/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* step, data_position and lr_decay_steps feed int64 step counters; the
 * seed is recorded as given (64 bits). */
static const struct { const char *key; uint64_t max; } meta_field[MK_CKPT_N_META] = {
    {"step", INT64_MAX}, {"data_position", INT64_MAX}, {"lr_decay_steps", INT64_MAX}, {"seed", UINT64_MAX}};

const char *mk_ckpt_meta_key(int i) { return meta_field[i].key; }

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
    size_t k = 0;  /* the value as given, printable and short, for the one-line message */
    for (; s[k] && k + 1 < sizeof shown && s[k] >= ' ' && s[k] < 127; k++) shown[k] = s[k];
    shown[k] = 0;
    return mk_error_set("%s: metadata '%s' must be an integer in [0, %llu], got '%s%s'", path, meta_field[i].key,
                        (unsigned long long)meta_field[i].max, shown, s[k] ? "..." : "");
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
