/* Streaming one array of a JSON file (see jsonio.h): Jansson parses one
 * element at a time from the file's bytes, so memory is the file plus one
 * element's tree, not the whole document's (a 134 MB trace is ~2 GB as a
 * tree).  Only the top level is scanned here; every value, key and element
 * is parsed by Jansson with the same flags as mk_json_load. */
#include "merak/common.h"
#include "merak/jsonio.h"
#include "merak/readfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path;
    const char *buf;
    size_t n, pos;
} mk_jstream_t;

/* "PATH:LINE:COL: malformed JSON: why" at byte offset at (LINE, COL 1-based). */
static int malformed(const mk_jstream_t *s, size_t at, const char *why)
{
    size_t line = 1, bol = 0;
    for (size_t i = 0; i < at && i < s->n; i++)
        if (s->buf[i] == '\n') line++, bol = i + 1;
    return mk_error_set("%s:%zu:%zu: malformed JSON: %s", s->path, line, at - bol + 1, why);
}

static void skip_ws(mk_jstream_t *s)
{
    while (s->pos < s->n) {
        char c = s->buf[s->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        s->pos++;
    }
}

/* The next byte after whitespace, or 0 at the end of the file. */
static char peek(mk_jstream_t *s)
{
    skip_ws(s);
    return s->pos < s->n ? s->buf[s->pos] : 0;
}

/* One JSON value from the current position (NULL: malformed, error set). */
static json_t *value(mk_jstream_t *s)
{
    json_error_t e;
    skip_ws(s);
    json_t *v = json_loadb(s->buf + s->pos, s->n - s->pos,
                           JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &e);
    if (!v) return malformed(s, s->pos + (e.position > 0 ? (size_t)e.position : 0), e.text), NULL;
    s->pos += (size_t)e.position;
    return v;
}

/* The array at the current position ('['), element by element. */
static int elements(mk_jstream_t *s, mk_json_elem_fn fn, void *ctx)
{
    s->pos++;
    if (peek(s) == ']') return s->pos++, 0;
    for (size_t i = 0;; i++) {
        json_t *v = value(s);
        int rc = v ? fn(v, i, ctx) : -1;
        json_decref(v);
        if (rc < 0) return -1;
        char c = peek(s);
        s->pos++;
        if (c == ']') return 0;
        if (c != ',') return malformed(s, s->pos - 1, "',' or ']' expected");
    }
}

/* One "name": value member of the top-level object; *found when it was
 * KEY's array (streamed).  seen: the keys so far (duplicates refused, as
 * JSON_REJECT_DUPLICATES does). */
static int member(mk_jstream_t *s, const char *key, json_t *seen, mk_json_elem_fn fn, void *ctx, int *found)
{
    size_t at = s->pos;
    json_t *k = value(s);
    if (!k) return -1;
    const char *name = json_string_value(k);
    int dup = json_object_get(seen, name) != NULL, mine = !strcmp(name, key);
    json_object_set_new(seen, name, json_null());
    json_decref(k);
    if (dup) return malformed(s, at, "duplicate object key");
    if (peek(s) != ':') return malformed(s, s->pos, "':' expected");
    s->pos++;
    if (mine && peek(s) == '[') return *found = 1, elements(s, fn, ctx);
    json_t *v = value(s);
    json_decref(v);
    return v ? 0 : -1;
}

/* The top-level object ('{'): 0 when KEY's array was streamed, 1 when
 * there is none, -1 on an error. */
static int members(mk_jstream_t *s, const char *key, mk_json_elem_fn fn, void *ctx)
{
    json_t *seen = json_object();
    int rc = 0, found = 0;
    s->pos++;
    if (peek(s) == '}') s->pos++;
    else
        for (;;) {
            if (peek(s) != '"') {
                rc = malformed(s, s->pos, "string expected");
                break;
            }
            if ((rc = member(s, key, seen, fn, ctx, &found)) < 0) break;
            char c = peek(s);
            s->pos++;
            if (c == '}') break;
            if (c != ',') {
                rc = malformed(s, s->pos - 1, "',' or '}' expected");
                break;
            }
        }
    json_decref(seen);
    return rc < 0 ? -1 : !found;
}

int mk_json_stream_array(const char *path, const char *what, const char *key, mk_json_elem_fn fn, void *ctx)
{
    size_t n = 0;
    char *buf = mk_read_file(path, what, MK_READ_MAX_BYTES, &n);
    if (!buf) return -1;
    mk_jstream_t s = {path, buf, n, 0};
    char c = peek(&s);
    int rc = c == '[' ? elements(&s, fn, ctx) : c == '{' ? members(&s, key, fn, ctx)
                                                         : malformed(&s, s.pos, "'[' or '{' expected");
    if (rc >= 0 && peek(&s)) rc = malformed(&s, s.pos, "end of file expected");
    free(buf);
    return rc;
}
