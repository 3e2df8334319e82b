/* JSON file loading and atomic saving (see jsonio.h). */
#include "merak/common.h"
#include "merak/jsonio.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

json_t *mk_json_load(const char *path, const char *what)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (j) return j;
    if (e.line < 1) return mk_error_set("cannot read %s '%s': %s", what, path, e.text), NULL;
    return mk_error_set("%s:%d:%d: malformed JSON: %s", path, e.line, e.column, e.text), NULL;
}

int mk_json_save(json_t *j, const char *path, const char *what)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (json_dump_file(j, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0 || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return mk_error_set("cannot write %s '%s': %s", what, path, strerror(err));
    }
    return 0;
}
