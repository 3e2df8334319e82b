/* Token files (formats and batch order in data.h) and Megatron-LM's
 * blends of them (the order: data_blend.c). */
#include "merak/common.h"
#include "formats/data_internal.h"
#include "merak/readfile.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LLMC_MAGIC 20240520
#define LLMC_HEADER_INTS 256


static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int32_t le32(const unsigned char *p) { return (int32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24); }

/* Decode the file's bytes into ids; sets d->format. */
static int decode(mk_data_t *d, const char *path, const unsigned char *b, size_t len)
{
    size_t off = 0, count;
    if (len >= 4 * LLMC_HEADER_INTS && le32(b) == LLMC_MAGIC) {
        if (le32(b + 4) != 1) return mk_error_set("%s: llm.c token file version %d (want 1)", path, le32(b + 4));
        off = 4 * LLMC_HEADER_INTS;
        if (le32(b + 8) < 0) return mk_error_set("%s: llm.c header says %d tokens", path, le32(b + 8));
        count = (size_t)le32(b + 8);
        if (count > (len - off) / 2) return mk_error_set("%s: llm.c header says %zu tokens, file is shorter", path, count);
        d->format = "llm.c";
    } else if (has_suffix(path, ".bin") || has_suffix(path, ".u16") || has_suffix(path, ".tok")) {
        if (len % 2) return mk_error_set("%s: uint16 token file has an odd size", path);
        count = len / 2;
        d->format = "uint16";
    } else {
        count = len;
        d->format = "bytes";
    }
    if (count > MK_READ_MAX_BYTES / sizeof *d->ids) return mk_error_set("%s: too many tokens", path);
    d->ids = malloc((count ? count : 1) * sizeof *d->ids);
    if (!d->ids) return mk_error_set("out of memory");
    for (size_t i = 0; i < count; i++)
        d->ids[i] = d->format[0] == 'b' ? b[i] : (uint16_t)(b[off + 2 * i] | b[off + 2 * i + 1] << 8);
    d->n = count;
    return 0;
}

/* PREFIX of a Megatron-LM indexed dataset: path is the prefix (Megatron's
 * --data-path) with PREFIX.idx beside it, or PREFIX.idx itself.  A name
 * ending in .bin stays an llm.c or raw uint16 file, whatever lies beside. */
static int megatron_prefix(const char *path, char *prefix, size_t n)
{
    char idx[4200];
    size_t k = strlen(path);
    if (k + 5 > n || k + 5 > sizeof idx || has_suffix(path, ".bin")) return 0;
    memcpy(prefix, path, k + 1);
    if (has_suffix(path, ".idx")) prefix[k - 4] = 0;
    snprintf(idx, sizeof idx, "%s.idx", prefix);
    return access(idx, F_OK) == 0 && access(path, F_OK) != 0 ? 1 : has_suffix(path, ".idx");
}

/* One dataset file (or Megatron prefix). */
static mk_data_t *open_one(const char *path, int vocab, int seq)
{
    size_t len;
    char prefix[4096];
    mk_data_t *d = NULL;
    int rc;
    if (megatron_prefix(path, prefix, sizeof prefix)) {
        d = calloc(1, sizeof *d);
        rc = d ? mk_data_megatron(d, prefix) : mk_error_set("out of memory");
    } else {
        unsigned char *b = (unsigned char *)mk_read_file(path, "data file", MK_READ_MAX_BYTES, &len);
        if (!b) return NULL;
        d = calloc(1, sizeof *d);
        rc = d ? decode(d, path, b, len) : mk_error_set("out of memory");
        free(b);
    }
    if (rc == 0) {
        d->seq = seq;
        d->n_train = d->n - d->n / 10;
        for (size_t i = 0; i < d->n && rc == 0; i++)
            if (d->ids[i] >= vocab)
                rc = mk_error_set("%s: token id %u at position %zu is not below the vocabulary size %d",
                                  path, d->ids[i], i, vocab);
        if (rc == 0 && (d->n_train < (size_t)seq + 1 || d->n - d->n_train < (size_t)seq + 1))
            rc = mk_error_set("%s: %zu tokens are too few for training and validation sequences of %d",
                              path, d->n, seq);
    }
    if (rc) {
        mk_data_free(d);
        return NULL;
    }
    return d;
}

/* Megatron's blend "W1 P1 W2 P2 ..." (whitespace-separated; weights > 0,
 * normalised as Megatron does) into d's parts, each opened as one file. */
static int open_blend(mk_data_t *d, const char *spec, int vocab, int seq)
{
    char *copy = strdup(spec), *save = NULL, *tok[2 * MK_DATA_MAX_PARTS + 1];
    double w[MK_DATA_MAX_PARTS];
    int n = 0;
    if (!copy) return mk_error_set("out of memory");
    for (char *t = strtok_r(copy, " \t\n", &save); t && n <= 2 * MK_DATA_MAX_PARTS;
         t = strtok_r(NULL, " \t\n", &save))
        tok[n++] = t;
    int rc = n % 2 || n > 2 * MK_DATA_MAX_PARTS
                 ? mk_error_set("data '%s' is no file, nor a blend of at most %d 'WEIGHT PATH' pairs (Megatron's "
                                "--data-path W1 P1 W2 P2 ...)", spec, MK_DATA_MAX_PARTS)
                 : 0;
    for (int i = 0; rc == 0 && i < n; i += 2) {
        char *end;
        errno = 0;
        w[i / 2] = strtod(tok[i], &end);
        if (end == tok[i] || *end || errno || !isfinite(w[i / 2]) || !(w[i / 2] > 0) || w[i / 2] > 1e9)
            rc = mk_error_set("data blend '%s': weight '%s' is not a number in (0, 1e9]", spec, tok[i]);
    }
    d->part = rc ? NULL : calloc(n / 2, sizeof *d->part);
    if (rc == 0 && !d->part) rc = mk_error_set("out of memory");
    for (int i = 0; rc == 0 && i < n; i += 2, d->nparts++)
        if (!(d->part[i / 2] = open_one(tok[i + 1], vocab, seq))) rc = -1;
    if (rc == 0 && !(d->blend = mk_blend_new(w, n / 2))) rc = mk_error_set("out of memory");
    for (int i = 0; rc == 0 && i < d->nparts; i++) d->n += d->part[i]->n, d->n_train += d->part[i]->n_train;
    d->format = "blend", d->seq = seq;
    free(copy);
    return rc;
}

mk_data_t *mk_data_open(const char *path, int vocab, int seq)
{
    if (vocab < 1 || seq < 1) return mk_error_set("%s: vocabulary %d and sequence %d must be >= 1", path, vocab, seq), NULL;
    int blend = access(path, F_OK) != 0 && strpbrk(path, " \t\n") != NULL;
    if (!blend) return open_one(path, vocab, seq);
    mk_data_t *d = calloc(1, sizeof *d);
    if (!d) return mk_error_set("out of memory"), NULL;
    if (open_blend(d, path, vocab, seq) < 0) {
        mk_data_free(d);
        return NULL;
    }
    return d;
}

void mk_data_free(mk_data_t *d)
{
    if (!d) return;
    for (int i = 0; i < d->nparts; i++) mk_data_free(d->part[i]);
    free(d->part);
    mk_blend_free(d->blend);
    free(d->ids);
    free(d->doc);
    free(d);
}

size_t mk_data_tokens(const mk_data_t *d, mk_data_split_t s)
{
    return s == MK_DATA_TRAIN ? d->n_train : d->n - d->n_train;
}

const char *mk_data_format(const mk_data_t *d) { return d->format; }

/* Global sample s of the split: the dataset serving it (a blend's: its
 * own sample c) and the offset among that dataset's ids where its window
 * (c mod the split's windows) starts. */
static const mk_data_t *sample_at(const mk_data_t *d, mk_data_split_t split, int64_t s, size_t *at)
{
    int64_t c = s;
    if (d->blend) d = d->part[mk_blend_sample(d->blend, s, &c)];
    *at = (split == MK_DATA_TRAIN ? 0 : d->n_train) + (size_t)c % ((mk_data_tokens(d, split) - 1) / d->seq) * d->seq;
    return d;
}

void mk_data_batch(const mk_data_t *d, mk_data_split_t split, long k, int gbs, int first, int count,
                   int32_t *out)
{
    for (int j = 0; j < count; j++) {
        size_t at;
        const mk_data_t *src = sample_at(d, split, (int64_t)k * gbs + first + j, &at);
        for (int t = 0; t <= d->seq; t++) out[(size_t)j * ((size_t)d->seq + 1) + t] = (int32_t)src->ids[at + t];
    }
}

int mk_data_has_docs(const mk_data_t *d)
{
    for (int i = 0; i < d->nparts; i++)
        if (!d->part[i]->doc) return 0;
    return d->nparts ? 1 : d->doc != NULL;
}

void mk_data_batch_docs(const mk_data_t *d, mk_data_split_t split, long k, int gbs, int first, int count,
                        unsigned char *start)
{
    for (int j = 0; j < count; j++) {
        size_t at, lo = 0, hi;
        const mk_data_t *src = sample_at(d, split, (int64_t)k * gbs + first + j, &at);
        unsigned char *row = start + (size_t)j * d->seq;
        memset(row, 0, (size_t)d->seq);
        row[0] = 1;
        for (hi = src->ndoc; lo < hi;) { /* the first document starting after the window's first token */
            size_t mid = lo + (hi - lo) / 2;
            if (src->doc[mid] <= at) lo = mid + 1;
            else hi = mid;
        }
        for (; lo < src->ndoc && src->doc[lo] < at + (size_t)d->seq; lo++) row[src->doc[lo] - at] = 1;
    }
}
