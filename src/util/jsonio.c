/* JSON file loading and atomic saving (see jsonio.h). */
#include "merak/common.h"
#include "merak/fileio.h"
#include "merak/jsonio.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

json_t *mk_json_load(const char *path, const char *what)
{
    json_error_t e;
    /* a directory reads as an I/O error mid-parse: say what it is instead */
    if (mk_file_check_input(path, what) != 0) return NULL;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (j) return j;
    if (e.line < 1) return mk_error_set("cannot read %s '%s': %s", what, path, e.text), NULL;
    return mk_error_set("%s:%d:%d: malformed JSON: %s", path, e.line, e.column, e.text), NULL;
}

int mk_json_save(json_t *j, const char *path, const char *what)
{
    mk_file_out_t o;
    FILE *f = mk_file_begin(&o, path, what);
    if (!f) return -1;
    if (json_dumpf(j, f, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0) {
        int err = errno;
        mk_file_abort(&o);
        return mk_file_fail(&o, err);
    }
    return mk_file_commit(&o);
}

const char *mk_json_unknown_key(json_t *o, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (const char *const *q = keys; *q; q++) ok |= !strcmp(k, *q);
        if (!ok) return k;
    }
    return NULL;
}

int mk_json_only_keys(json_t *o, const char *what, const char *const *keys)
{
    const char *k = mk_json_unknown_key(o, keys);
    return k ? mk_error_set("%s: unknown field '%s'", what, k) : 0;
}

int mk_json_num(json_t *o, const char *what, const char *key, double lo, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v) return mk_error_set("%s: missing field '%s'", what, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo)
        return mk_error_set("%s: field '%s' must be a number >= %g", what, key, lo);
    *out = json_number_value(v);
    return 0;
}

int mk_json_int(json_t *o, const char *what, const char *key, int lo, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v) return mk_error_set("%s: missing field '%s'", what, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 1 << 30)
        return mk_error_set("%s: field '%s' must be an integer >= %d", what, key, lo);
    *out = (int)json_integer_value(v);
    return 0;
}

int mk_json_bool(json_t *o, const char *what, const char *key, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) return mk_error_set("%s: field '%s' must be true or false", what, key);
    *out = json_is_true(v);
    return 0;
}
