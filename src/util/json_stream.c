/* Streaming one array of a JSON file (see jsonio.h).  The file is read
 * through a window (1 MiB, grown only for a larger single value); Jansson
 * parses one value at a time from it, so memory is one window and one
 * element's tree, not the document's (a 134 MB trace is ~2 GB as a tree).
 * Only the top level is scanned here; every key, value and element is
 * parsed by Jansson with the flags mk_json_load uses. */
#include "merak/common.h"
#include "merak/jsonio.h"
#include "merak/readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path, *what;
    FILE *f;
    char *buf;
    size_t cap, end, pos; /* buf[pos, end) not yet parsed */
    size_t line, col0;    /* buf[0]: its line (from 1) and the bytes of that line before it */
    int eof, err;         /* err: a read error, already recorded */
} mk_jstream_t;

/* "PATH:LINE:COL: malformed JSON: why" at buf[at] (a read error stays). */
static int malformed(const mk_jstream_t *s, size_t at, const char *why)
{
    if (s->err) return -1;
    size_t line = s->line, col = s->col0 + at + 1;
    for (size_t i = 0; i < at && i < s->end; i++)
        if (s->buf[i] == '\n') line++, col = at - i;
    return mk_error_set("%s:%zu:%zu: malformed JSON: %s", s->path, line, col, why);
}

/* Drop buf[0, pos), then read more (the window doubles when the unparsed
 * rest fills it); sets eof at the end of the file. */
static int refill(mk_jstream_t *s)
{
    for (size_t i = 0; i < s->pos; i++)
        if (s->buf[i] == '\n') s->line++, s->col0 = 0;
        else s->col0++;
    memmove(s->buf, s->buf + s->pos, s->end - s->pos);
    s->end -= s->pos, s->pos = 0;
    if (s->end == s->cap) {
        char *b = s->cap < MK_READ_MAX_BYTES ? realloc(s->buf, 2 * s->cap) : NULL;
        if (!b) return s->err = 1, mk_error_set("%s: a JSON value larger than this merak reads (%zu MiB)",
                                                  s->path, s->cap >> 20);
        s->buf = b, s->cap *= 2;
    }
    size_t got = fread(s->buf + s->end, 1, s->cap - s->end, s->f);
    if (!got && ferror(s->f))
        return s->err = 1, mk_error_set("cannot read %s '%s': %s", s->what, s->path, strerror(errno));
    s->eof = !got;
    s->end += got;
    return 0;
}

/* The next byte after whitespace, or -1 at the end of the file (or on a
 * read error, s->err). */
static int peek(mk_jstream_t *s)
{
    for (;;) {
        while (s->pos < s->end && strchr(" \t\n\r", s->buf[s->pos]) && s->buf[s->pos]) s->pos++;
        if (s->pos < s->end) return (unsigned char)s->buf[s->pos];
        if (s->eof || s->err || refill(s) < 0) return -1;
    }
}

/* One JSON value (NULL: malformed or unreadable, error set).  A parse that
 * fails within the window's last 4 bytes (a split UTF-8 sequence) or a
 * number or literal that ends exactly at the window's end may continue
 * past it: read more and parse again. */
static json_t *value(mk_jstream_t *s)
{
    for (;;) {
        if (peek(s) < 0 && s->err) return NULL;
        json_error_t e;
        size_t avail = s->end - s->pos;
        json_t *v = json_loadb(s->buf + s->pos, avail,
                               JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &e);
        size_t used = e.position > 0 ? (size_t)e.position : 0;
        int delimited = json_is_object(v) || json_is_array(v) || json_is_string(v);
        int maybe_more = v ? !delimited && used == avail : used + 4 > avail;
        if (!maybe_more || s->eof) {
            if (!v) return malformed(s, s->pos + used, e.text), NULL;
            s->pos += used;
            return v;
        }
        json_decref(v);
        if (refill(s) < 0) return NULL;
    }
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
        int c = peek(s);
        if (c != ',' && c != ']') return malformed(s, s->pos, "',' or ']' expected");
        s->pos++;
        if (c == ']') return 0;
    }
}

/* One "name": value member of the top-level object; *found when it was
 * KEY's array (streamed).  seen: the keys so far (duplicates refused, as
 * JSON_REJECT_DUPLICATES does). */
static int member(mk_jstream_t *s, const char *key, json_t *seen, mk_json_elem_fn fn, void *ctx, int *found)
{
    json_t *k = value(s);
    if (!k) return -1;
    const char *name = json_string_value(k);
    int dup = json_object_get(seen, name) != NULL, mine = !strcmp(name, key);
    json_object_set_new(seen, name, json_null());
    json_decref(k);
    if (dup) return malformed(s, s->pos, "duplicate object key");
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
            int c = peek(s);
            if (c != ',' && c != '}') {
                rc = malformed(s, s->pos, "',' or '}' expected");
                break;
            }
            s->pos++;
            if (c == '}') break;
        }
    json_decref(seen);
    return rc < 0 ? -1 : !found;
}

int mk_json_stream_array(const char *path, const char *what, const char *key, mk_json_elem_fn fn, void *ctx)
{
    mk_jstream_t s = {path, what, mk_open_input(path, what), malloc(1 << 20), 1 << 20, 0, 0, 1, 0, 0, 0};
    int rc = !s.f ? -1 : !s.buf ? mk_error_set("out of memory") : 0;
    int c = rc ? 0 : peek(&s);
    if (!rc) rc = c == '[' ? elements(&s, fn, ctx) : c == '{' ? members(&s, key, fn, ctx)
                                                               : malformed(&s, s.pos, "'[' or '{' expected");
    if (rc >= 0 && peek(&s) >= 0) rc = malformed(&s, s.pos, "end of file expected");
    if (s.err) rc = -1;
    free(s.buf);
    if (s.f) fclose(s.f);
    return rc;
}
