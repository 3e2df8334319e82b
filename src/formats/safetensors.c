/* safetensors writer and reader (format in safetensors.h).  The header is
 * padded with spaces to a multiple of 8 bytes, as the reference library
 * does, so the data section stays aligned.
 *
 * Checksums: the writer declares "crc32.NAME": "00000000" in __metadata__
 * for every tensor, accumulates zlib's crc32 of each tensor's bytes as they
 * are appended, and overwrites the 8 placeholder digits in place before
 * the commit (the header's length does not change), so the data still
 * streams one tensor at a time. */
#include "merak/checked.h"
#include "merak/common.h"
#include "merak/fileio.h"
#include "merak/half.h"
#include "merak/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

struct mk_st_writer {
    mk_file_out_t out;  /* the safe writer (fileio.h) */
    FILE *f;            /* = out.f */
    char path[4096];
    int n, next;
    mk_st_tensor_t *t;
    uint32_t *crc;         /* [n] running crc32 of each tensor's bytes */
    long *crc_at;          /* [n] file offset of each tensor's 8 placeholder digits */
};

struct mk_st_reader {
    FILE *f;
    char path[4096];
    uint64_t data_start;
    int n;
    mk_st_tensor_t *t;
    json_t *meta;
    int n_crc;             /* tensors with a checksum: 0 (written elsewhere) or n */
    uint32_t *crc;         /* [n] their stored crc32 */
};

#define CRC_PREFIX "crc32."
#define CRC_PLACEHOLDER "00000000"

/* Bytes per element and the header's name of each dtype. */
static const unsigned dtype_size[] = {4, 2, 2};
static const char *const dtype_name[] = {"F32", "BF16", "F16"};

static uint64_t numel(const mk_st_tensor_t *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

static json_t *header_json(mk_st_tensor_t *t, int n, const char *const *k, const char *const *v, int nm)
{
    json_t *h = json_object(), *meta = json_object();
    char key[sizeof t->name + sizeof CRC_PREFIX];
    for (int i = 0; i < nm; i++) json_object_set_new(meta, k[i], json_string(v[i]));
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, CRC_PREFIX "%s", t[i].name);
        json_object_set_new(meta, key, json_string(CRC_PLACEHOLDER));
    }
    json_object_set_new(h, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        t[i].begin = off;
        t[i].end = off += dtype_size[t[i].dtype] * numel(&t[i]);
        json_object_set_new(h, t[i].name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtype_name[t[i].dtype], "shape", shape,
                                      "data_offsets", (json_int_t)t[i].begin, (json_int_t)t[i].end));
    }
    return h;
}

/* Where each tensor's placeholder digits sit in the header text (the
 * file offset is 8 more): after its key, encoded as jansson encodes it,
 * and ':"' (only a metadata string value can follow a key that way). */
static int find_crcs(mk_st_writer_t *w, const char *text)
{
    char key[sizeof w->t->name + sizeof CRC_PREFIX];
    for (int i = 0; i < w->n; i++) {
        snprintf(key, sizeof key, CRC_PREFIX "%s", w->t[i].name);
        json_t *s = json_string(key);
        char *enc = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL, *pat = enc ? malloc(strlen(enc) + 3) : NULL;
        const char *at = pat ? strstr(text, strcat(strcpy(pat, enc), ":\"")) : NULL;
        if (at) w->crc_at[i] = 8 + (long)(at - text + strlen(pat));
        json_decref(s);
        free(enc);
        free(pat);
        if (!at) return mk_error_set("%s: cannot place the checksum of tensor '%s'", w->path, w->t[i].name);
    }
    return 0;
}

/* Fill in the checksums (before the flush and rename). */
static int patch_crcs(mk_st_writer_t *w)
{
    char digits[16];
    for (int i = 0; i < w->n; i++) {
        snprintf(digits, sizeof digits, "%08x", (unsigned)w->crc[i]);
        if (fseek(w->f, w->crc_at[i], SEEK_SET) != 0 || fwrite(digits, 1, 8, w->f) != 8)
            return mk_file_fail(&w->out, errno);
    }
    return fseek(w->f, 0, SEEK_END) == 0 ? 0 : mk_file_fail(&w->out, errno);
}

static void put_u64le(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

mk_st_writer_t *mk_st_writer_begin(const char *path, const mk_st_tensor_t *tensors, int n,
                                   const char *const *mk, const char *const *mv, int n_meta)
{
    mk_st_writer_t *w = calloc(1, sizeof *w);
    size_t nn = n > 0 ? (size_t)n : 1;
    if (!w || !(w->t = malloc(nn * sizeof *w->t)) || !(w->crc = calloc(nn, sizeof *w->crc)) ||
        !(w->crc_at = calloc(nn, sizeof *w->crc_at))) {
        if (w) free(w->t), free(w->crc);
        free(w);
        return mk_error_set("out of memory"), NULL;
    }
    memcpy(w->t, tensors, n * sizeof *w->t);
    w->n = n;
    for (int i = 0; i < n; i++)
        if (w->t[i].dtype < MK_ST_F32 || w->t[i].dtype > MK_ST_F16) {
            mk_st_writer_abort(w);
            return mk_error_set("%s: tensor '%s' has no safetensors dtype %d", path, tensors[i].name,
                                tensors[i].dtype), NULL;
        }
    mk_strlcpy(w->path, path, sizeof w->path);
    json_t *h = header_json(w->t, n, mk, mv, n_meta);
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!text) mk_error_set("out of memory");
    else if (find_crcs(w, text) == 0) w->f = mk_file_begin(&w->out, path, "checkpoint");
    if (!w->f) {
        free(text);
        mk_st_writer_abort(w);
        return NULL;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    unsigned char hdr[8];
    put_u64le(hdr, padded);
    int ok = fwrite(hdr, 8, 1, w->f) == 1 && fwrite(text, 1, len, w->f) == len;
    for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', w->f) != EOF;
    free(text);
    if (!ok) {
        mk_file_fail(&w->out, errno);
        mk_st_writer_abort(w);
        return NULL;
    }
    return w;
}

/* The current tensor's next bytes, into the file and its checksum. */
static int put_bytes(mk_st_writer_t *w, const void *b, size_t n)
{
    if (fwrite(b, 1, n, w->f) != n) return mk_file_fail(&w->out, errno);
    w->crc[w->next] = (uint32_t)crc32_z(w->crc[w->next], (const Bytef *)b, n);
    return 0;
}

/* count floats as bfloat16 or fp16 (little-endian), rounded to nearest
 * even (half.h), a chunk at a time: no copy of the tensor is made. */
static int put_narrowed(mk_st_writer_t *w, int dtype, const float *data, size_t count)
{
    enum { CHUNK = 4096 };
    unsigned char b[2 * CHUNK];
    for (size_t i = 0; i < count; i += CHUNK) {
        size_t m = count - i < CHUNK ? count - i : CHUNK;
        for (size_t k = 0; k < m; k++) {
            uint16_t h = dtype == MK_ST_BF16 ? mk_bf16_from_float(data[i + k]) : mk_fp16_from_float(data[i + k]);
            b[2 * k] = (unsigned char)h, b[2 * k + 1] = (unsigned char)(h >> 8);
        }
        if (put_bytes(w, b, 2 * m) < 0) return -1;
    }
    return 0;
}

int mk_st_writer_put(mk_st_writer_t *w, const float *data, size_t count)
{
    if (w->next >= w->n) return mk_error_set("%s: more tensors than declared", w->path);
    const mk_st_tensor_t *t = &w->t[w->next];
    if (count != numel(t))
        return mk_error_set("%s: tensor '%s' has %llu elements, got %zu", w->path, t->name,
                            (unsigned long long)numel(t), count);
    int rc = t->dtype == MK_ST_F32 ? put_bytes(w, data, count * sizeof(float)) /* x86/ARM: little-endian */
             : put_narrowed(w, t->dtype, data, count);
    if (rc == 0) w->next++;
    return rc;
}

int mk_st_writer_commit(mk_st_writer_t *w)
{
    int rc = 0;
    if (w->next != w->n) rc = mk_error_set("%s: %d of %d tensors written", w->path, w->next, w->n);
    if (!rc) rc = patch_crcs(w);
    if (!rc) rc = mk_file_commit(&w->out); /* fsync, rename, directory fsync */
    w->f = NULL;
    if (rc) {
        mk_st_writer_abort(w);
        return -1;
    }
    free(w->t);
    free(w->crc);
    free(w->crc_at);
    free(w);
    return 0;
}

void mk_st_writer_abort(mk_st_writer_t *w)
{
    if (!w) return;
    mk_file_abort(&w->out);
    free(w->t);
    free(w->crc);
    free(w->crc_at);
    free(w);
}

/* One tensor entry of the header, checked against the data section size. */
static int parse_entry(mk_st_reader_t *r, const char *name, json_t *e, uint64_t data_len, mk_st_tensor_t *t)
{
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_array_size(off) != 2)
        return mk_error_set("%s: tensor '%s' needs dtype, shape and data_offsets", r->path, name);
    const char *dn = json_string_value(dt);
    t->dtype = -1;
    for (int d = MK_ST_F32; d <= MK_ST_F16; d++)
        if (!strcmp(dn, dtype_name[d])) t->dtype = d;
    if (t->dtype < 0)
        return mk_error_set("%s: tensor '%s' is %s; F32, BF16 and F16 are supported", r->path, name, dn);
    uint64_t esz = dtype_size[t->dtype];
    if (json_array_size(sh) > MK_ST_MAX_DIMS || strlen(name) >= sizeof t->name)
        return mk_error_set("%s: tensor '%s' has too many dimensions or too long a name", r->path, name);
    mk_strlcpy(t->name, name, sizeof t->name);
    t->ndim = (int)json_array_size(sh);
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(sh, d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return mk_error_set("%s: tensor '%s' has a bad shape", r->path, name);
        t->shape[d] = json_integer_value(v);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b) || (uint64_t)json_integer_value(en) > data_len)
        return mk_error_set("%s: tensor '%s' has data_offsets outside the file (truncated?)", r->path, name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(en);
    int64_t count = 1; /* checked: a shape like [2^32, 2^32] must not wrap to match */
    for (int d = 0; d < t->ndim; d++)
        if (mk_mul_i64(count, (int64_t)t->shape[d], &count) < 0 || (uint64_t)count > data_len / esz)
            return mk_error_set("%s: tensor '%s' has a shape larger than the file", r->path, name);
    if (t->end - t->begin != esz * (uint64_t)count)
        return mk_error_set("%s: tensor '%s': data_offsets do not match its shape", r->path, name);
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const mk_st_tensor_t *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* The tensors tile the data section exactly, as the reference library
 * requires: no gap, no overlap and nothing after the last tensor (data_len
 * bytes follow the header). */
static int check_tiling(const mk_st_reader_t *r, uint64_t data_len)
{
    mk_st_tensor_t *s = malloc((r->n ? r->n : 1) * sizeof *s);
    if (!s) return mk_error_set("out of memory");
    memcpy(s, r->t, r->n * sizeof *s);
    qsort(s, r->n, sizeof *s, cmp_begin);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < r->n && !rc; i++) {
        if (s[i].begin != at)
            rc = mk_error_set("%s: tensor '%s' starts at byte %llu of the data, want %llu (%s)", r->path,
                              s[i].name, (unsigned long long)s[i].begin, (unsigned long long)at,
                              s[i].begin > at ? "a gap" : "overlapping data");
        at = s[i].end;
    }
    free(s);
    if (!rc && at != data_len)
        rc = mk_error_set("%s: %llu bytes after the last tensor's data (damaged or appended to)", r->path,
                          (unsigned long long)(data_len - at));
    return rc;
}

/* The stored checksums ("crc32.NAME": 8 hex digits): one for every tensor
 * or none; a key naming no tensor or a malformed value is an error.
 * Looked up by name (hashed): linear in the header's size. */
static int read_crcs(mk_st_reader_t *r)
{
    char key[sizeof r->t->name + sizeof CRC_PREFIX];
    const char *k;
    json_t *v;
    int keys = 0;
    json_object_foreach(r->meta, k, v) keys += !strncmp(k, CRC_PREFIX, strlen(CRC_PREFIX));
    if (!(r->crc = calloc(r->n ? r->n : 1, sizeof *r->crc))) return mk_error_set("out of memory");
    for (int i = 0; i < r->n; i++) {
        snprintf(key, sizeof key, CRC_PREFIX "%s", r->t[i].name);
        json_t *e = json_object_get(r->meta, key);
        const char *s = json_string_value(e);
        if (!e) continue;
        if (!s || strlen(s) != 8 || strspn(s, "0123456789abcdefABCDEF") != 8)
            return mk_error_set("%s: metadata '%s' must be 8 hex digits (a crc32)", r->path, key);
        r->crc[i] = (uint32_t)strtoul(s, NULL, 16);
        r->n_crc++;
    }
    if (keys != r->n_crc)
        return mk_error_set("%s: %d '" CRC_PREFIX "' metadata keys name no tensor in the file", r->path, keys - r->n_crc);
    if (r->n_crc && r->n_crc != r->n)
        return mk_error_set("%s: %d of %d tensors have a checksum (want all or none)", r->path, r->n_crc, r->n);
    return 0;
}

static int read_header(mk_st_reader_t *r)
{
    unsigned char b[8];
    if (fseek(r->f, 0, SEEK_END) != 0) return mk_error_set("%s: cannot seek", r->path);
    long size = ftell(r->f);
    rewind(r->f);
    if (size < 8 || fread(b, 8, 1, r->f) != 1) return mk_error_set("%s: not a safetensors file (too short)", r->path);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    if (hl < 2 || hl > (uint64_t)size - 8 || hl > (100u << 20))
        return mk_error_set("%s: not a safetensors file (header length %llu)", r->path, (unsigned long long)hl);
    char *text = malloc(hl + 1);
    if (!text || fread(text, 1, hl, r->f) != hl) {
        free(text);
        return mk_error_set("%s: cannot read the header", r->path);
    }
    text[hl] = 0;
    /* the reference reader parses all hl bytes: a NUL would end a C-string
       parse early and hide what follows it; a key given twice (a second
       __metadata__ with a forged step) is refused, not last-one-wins */
    const char *nul = memchr(text, 0, hl);
    if (nul) {
        long long at = (long long)(nul - text);
        free(text);
        return mk_error_set("%s: malformed safetensors header: a NUL byte at offset %lld of %llu", r->path, at,
                            (unsigned long long)hl);
    }
    json_error_t e;
    json_t *h = json_loadb(text, hl, JSON_REJECT_DUPLICATES, &e);
    free(text);
    if (!json_is_object(h)) {
        json_decref(h);
        return mk_error_set("%s: malformed safetensors header: %s", r->path, h ? "not a JSON object" : e.text);
    }
    r->data_start = 8 + hl;
    r->t = calloc(json_object_size(h) + 1, sizeof *r->t);
    const char *key;
    json_t *v;
    int rc = r->t ? 0 : mk_error_set("out of memory");
    json_object_foreach(h, key, v) {
        if (rc) break;
        if (!strcmp(key, "__metadata__")) {
            r->meta = json_incref(v);
            continue;
        }
        rc = parse_entry(r, key, v, (uint64_t)size - r->data_start, &r->t[r->n]);
        if (!rc) r->n++;
    }
    json_decref(h);
    if (!rc && r->meta && !json_is_object(r->meta)) rc = mk_error_set("%s: __metadata__ must be an object", r->path);
    if (!rc) rc = check_tiling(r, (uint64_t)size - r->data_start);
    if (!rc && r->meta) rc = read_crcs(r);
    return rc;
}

mk_st_reader_t *mk_st_open(const char *path)
{
    if (mk_file_check_input(path, "checkpoint") != 0) return NULL; /* a directory is no checkpoint */
    mk_st_reader_t *r = calloc(1, sizeof *r);
    if (!r) return mk_error_set("out of memory"), NULL;
    mk_strlcpy(r->path, path, sizeof r->path);
    r->f = fopen(path, "rb");
    if (!r->f) {
        mk_error_set("cannot read checkpoint '%s': %s", path, strerror(errno));
        mk_st_close(r);
        return NULL;
    }
    if (read_header(r) < 0) {
        mk_st_close(r);
        return NULL;
    }
    return r;
}

void mk_st_close(mk_st_reader_t *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    json_decref(r->meta);
    free(r->t);
    free(r->crc);
    free(r);
}

int mk_st_count(const mk_st_reader_t *r) { return r->n; }
const mk_st_tensor_t *mk_st_tensor(const mk_st_reader_t *r, int i) { return i >= 0 && i < r->n ? &r->t[i] : NULL; }

const mk_st_tensor_t *mk_st_find(const mk_st_reader_t *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name)) return &r->t[i];
    return NULL;
}

/* count 16-bit values at raw (little-endian) into dst from the front:
 * element i's 4 bytes never reach raw's elements i+1 onwards (raw starts
 * at dst + count halves). */
static void widen(const unsigned char *raw, int dtype, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
        dst[i] = dtype == MK_ST_BF16 ? mk_bf16_to_float(h) : mk_fp16_to_float(h);
    }
}

int mk_st_read(mk_st_reader_t *r, const char *name, float *dst, size_t count)
{
    const mk_st_tensor_t *t = mk_st_find(r, name);
    if (!t) return mk_error_set("%s: no tensor '%s'", r->path, name);
    if (count != numel(t))
        return mk_error_set("%s: tensor '%s' has %llu elements, expected %zu (shape mismatch)", r->path,
                            name, (unsigned long long)numel(t), count);
    size_t esz = dtype_size[t->dtype];
    /* 16-bit data is read into the second half of dst, then widened in place from the front */
    unsigned char *raw = (unsigned char *)dst + (esz == 2 ? count * 2 : 0);
    if (fseek(r->f, (long)(r->data_start + t->begin), SEEK_SET) != 0 || fread(raw, esz, count, r->f) != count)
        return mk_error_set("%s: cannot read tensor '%s'", r->path, name);
    uint32_t want = r->n_crc ? r->crc[t - r->t] : 0, got = 0;
    if (r->n_crc) got = (uint32_t)crc32_z(0, (const Bytef *)raw, count * esz);
    if (esz == 2) widen(raw, t->dtype, dst, count);
    if (r->n_crc && want != got)
        return mk_error_set("%s: tensor '%s' is damaged: crc32 %08x, the file's metadata says %08x", r->path,
                            name, (unsigned)got, (unsigned)want);
    return 0;
}

int mk_st_checksummed(const mk_st_reader_t *r) { return r->n_crc > 0; }

const char *mk_st_meta(const mk_st_reader_t *r, const char *key)
{
    json_t *v = r->meta ? json_object_get(r->meta, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}
