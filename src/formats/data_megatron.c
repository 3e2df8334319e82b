/* Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py):
 * PREFIX.idx holds the header b"MMIDIDX\0\0", version (uint64, 1), the
 * token dtype code (uint8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 * 8 uint16; 6 and 7 are floats, refused), the sequence count S and the
 * document count D (uint64 each), then S int32 sequence lengths, S int64
 * byte offsets into PREFIX.bin and D int64 document boundaries (0 up to
 * S), optionally S int8 sequence modes (multimodal).  Every size and
 * pointer is checked against the files before a token is read, and the
 * tokens are the sequences in order, concatenated: samples then pack
 * across documents as Megatron's GPTDataset does (its documents end in
 * the tokenizer's EOD). */
#include "config.h"
#include "formats/data_internal.h"
#include "merak/common.h"
#include "merak/readfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define IDX_HEADER 34 /* magic 9, version 8, dtype 1, S 8, D 8 */
#define IDX_MAX_SEQS ((uint64_t)1 << 36)

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The dtype's size, or 0 when it is not an integer token type. */
static int dtype_size(int code)
{
    static const int size[9] = {0, 1, 1, 2, 4, 8, 0, 0, 2};
    return code >= 1 && code <= 8 ? size[code] : 0;
}

/* Token i of a sequence of dtype code at p: -1 when negative or not a uint32. */
static int64_t token(const unsigned char *p, int code)
{
    uint64_t u = le(p, dtype_size(code));
    int bits = 8 * dtype_size(code);
    int is_signed = code == 2 || code == 3 || code == 4 || code == 5;
    if (is_signed && bits < 64 && (u >> (bits - 1)) & 1) return -1;
    if (is_signed && bits == 64 && (int64_t)u < 0) return -1;
    return u > UINT32_MAX ? -1 : (int64_t)u;
}

typedef struct {
    const unsigned char *idx;
    size_t idx_len;
    uint64_t S, D;
    int code;
    const char *path;
} idx_t;

/* The header and the arrays' extent; sets S, D, code. */
static int idx_header(idx_t *x)
{
    const unsigned char *b = x->idx;
    if (x->idx_len < IDX_HEADER || memcmp(b, "MMIDIDX\0\0", 9))
        return mk_error_set("%s: not a Megatron-LM index (no MMIDIDX header)", x->path);
    if (le(b + 9, 8) != 1) return mk_error_set("%s: index version %llu (want 1)", x->path, (unsigned long long)le(b + 9, 8));
    x->code = b[17];
    if (!dtype_size(x->code)) return mk_error_set("%s: dtype code %d is not an integer token type", x->path, x->code);
    x->S = le(b + 18, 8), x->D = le(b + 26, 8);
    if (x->S > IDX_MAX_SEQS || x->D > IDX_MAX_SEQS + 1)
        return mk_error_set("%s: %llu sequences and %llu documents: more than merak reads", x->path,
                            (unsigned long long)x->S, (unsigned long long)x->D);
    uint64_t need = IDX_HEADER + 12 * x->S + 8 * x->D;
    if (x->idx_len != need && x->idx_len != need + x->S)
        return mk_error_set("%s: %zu bytes, the header's %llu sequences and %llu documents need %llu", x->path,
                            x->idx_len, (unsigned long long)x->S, (unsigned long long)x->D, (unsigned long long)need);
    return 0;
}

/* Lengths and pointers within the .bin of bin_len bytes, documents from
 * 0 to S in order; the tokens' total into *total. */
static int idx_check(const idx_t *x, uint64_t bin_len, uint64_t *total)
{
    const unsigned char *len = x->idx + IDX_HEADER, *ptr = len + 4 * x->S, *doc = ptr + 8 * x->S;
    uint64_t isz = (uint64_t)dtype_size(x->code), sum = 0;
    for (uint64_t i = 0; i < x->S; i++) {
        int32_t n = (int32_t)le(len + 4 * i, 4);
        uint64_t p = le(ptr + 8 * i, 8);
        if (n < 0 || p > bin_len || (uint64_t)n * isz > bin_len - p)
            return mk_error_set("%s: sequence %llu (%d tokens at byte %llu) lies outside the %llu-byte .bin", x->path,
                                (unsigned long long)i, n, (unsigned long long)p, (unsigned long long)bin_len);
        sum += (uint64_t)n;
    }
    for (uint64_t i = 0; i < x->D; i++) {
        uint64_t v = le(doc + 8 * i, 8), prev = i ? le(doc + 8 * (i - 1), 8) : 0;
        if (v > x->S || v < prev || (i == 0 && v != 0) || (i + 1 == x->D && v != x->S))
            return mk_error_set("%s: document index %llu is %llu: the documents must run from 0 to the %llu "
                                "sequences in order", x->path, (unsigned long long)i, (unsigned long long)v,
                                (unsigned long long)x->S);
    }
    if (sum > MK_READ_MAX_BYTES / sizeof(uint32_t)) return mk_error_set("%s: too many tokens", x->path);
    *total = sum;
    return 0;
}

/* Where each document starts among the tokens: document j is sequences
 * doc[j] .. doc[j+1] of the index (checked by idx_check). */
static int idx_docs(const idx_t *x, struct mk_data *d)
{
    const unsigned char *len = x->idx + IDX_HEADER, *doc = len + 12 * x->S;
    if (!(d->doc = malloc((x->D ? x->D : 1) * sizeof *d->doc))) return mk_error_set("out of memory");
    size_t tok = 0;
    uint64_t seq = 0;
    for (uint64_t j = 0; j + 1 < x->D; j++) {
        for (; seq < le(doc + 8 * j, 8); seq++) tok += (size_t)le(len + 4 * seq, 4);
        if (!d->ndoc || d->doc[d->ndoc - 1] != tok) d->doc[d->ndoc++] = tok; /* empty documents start nothing */
    }
    return 0;
}

/* The sequences' tokens from the .bin, in order. */
static int idx_tokens(const idx_t *x, const unsigned char *bin, struct mk_data *d, const char *bin_path)
{
    const unsigned char *len = x->idx + IDX_HEADER, *ptr = len + 4 * x->S;
    int isz = dtype_size(x->code);
    size_t k = 0;
    for (uint64_t i = 0; i < x->S; i++) {
        int32_t n = (int32_t)le(len + 4 * i, 4);
        const unsigned char *s = bin + le(ptr + 8 * i, 8);
        for (int32_t t = 0; t < n; t++) {
            int64_t v = token(s + (size_t)t * isz, x->code);
            if (v < 0) return mk_error_set("%s: sequence %llu token %d is negative or above 2^32", bin_path,
                                           (unsigned long long)i, t);
            d->ids[k++] = (uint32_t)v;
        }
    }
    d->n = k;
    return 0;
}

int mk_data_megatron(struct mk_data *d, const char *prefix)
{
    char ip[4200], bp[4200];
    snprintf(ip, sizeof ip, "%s.idx", prefix), snprintf(bp, sizeof bp, "%s.bin", prefix);
    struct stat st;
    if (stat(bp, &st) != 0 || !S_ISREG(st.st_mode))
        return mk_error_set("%s: no regular file beside %s (a Megatron-LM dataset is PREFIX.bin + PREFIX.idx)", bp, ip);
    idx_t x = {.path = ip};
    unsigned char *idx = (unsigned char *)mk_read_file(ip, "Megatron-LM index", MK_READ_MAX_BYTES, &x.idx_len);
    if (!idx) return -1;
    x.idx = idx;
    uint64_t total = 0;
    int rc = idx_header(&x) < 0 || idx_check(&x, (uint64_t)st.st_size, &total) < 0 ? -1 : 0;
    size_t bin_len = 0;
    unsigned char *bin = rc ? NULL : (unsigned char *)mk_read_file(bp, "Megatron-LM data", MK_READ_MAX_BYTES, &bin_len);
    if (!rc && (!bin || bin_len != (size_t)st.st_size)) rc = bin ? mk_error_set("%s changed while read", bp) : -1;
    if (!rc && !(d->ids = malloc((total ? total : 1) * sizeof *d->ids))) rc = mk_error_set("out of memory");
    if (!rc) rc = idx_tokens(&x, bin, d, bp);
    if (!rc) rc = idx_docs(&x, d);
    d->format = "megatron";
    free(idx), free(bin);
    return rc;
}
