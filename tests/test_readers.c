/* Bounded input reads (mk_read_file) and the data-file reader's checks on
 * what a file says: each bad file is NULL with one message, never a crash
 * or a runaway read. */
#include "check.h"
#include "merak/common.h"
#include "merak/data.h"
#include "merak/readfile.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static const char *put(const char *name, const void *p, size_t n)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
    return path;
}

/* error message contains s */
static int said(const char *s) { return strstr(mk_error_last(), s) != NULL; }

static void test_read_file(void)
{
    size_t n = 0;
    const char *p = put("ten", "0123456789", 10);
    char *b = mk_read_file(p, "test file", 10, &n);
    CHECK(b && n == 10 && b[10] == 0 && !memcmp(b, "0123456789", 10), "exactly max bytes read, NUL after");
    free(b);
    CHECK(!mk_read_file(p, "test file", 9, &n) && said("is larger than"), "past max: %s", mk_error_last());
    CHECK(!mk_read_file(dir, "test file", 10, &n) && said("it is a directory"), "directory: %s", mk_error_last());
    CHECK(!mk_read_file("/dev/zero", "test file", 10, &n) && said("not a regular file or a pipe"),
          "device: %s", mk_error_last());
    CHECK(!mk_read_file("/nonexistent/x", "test file", 10, &n) && said("cannot read test file"), "missing: %s",
          mk_error_last());
    b = mk_read_file(put("empty", "", 0), "test file", 10, &n);
    CHECK(b && n == 0, "an empty file is 0 bytes");
    free(b);
}

/* An llm.c header (magic, version, count) and ids tokens of 1. */
static const char *llmc(const char *name, int32_t version, int32_t count, int ids)
{
    size_t n = 1024 + 2 * (size_t)ids;
    unsigned char *b = calloc(1, n);
    int32_t hdr[3] = {20240520, version, count};
    memcpy(b, hdr, sizeof hdr);
    for (int i = 0; i < ids; i++) b[1024 + 2 * i] = 1;
    const char *p = put(name, b, n);
    free(b);
    return p;
}

static void test_data_checks(void)
{
    CHECK(!mk_data_open(llmc("neg.bin", 1, -5, 100), 256, 4) && said("header says -5 tokens"),
          "negative llm.c count: %s", mk_error_last());
    CHECK(!mk_data_open(llmc("long.bin", 1, 2147483647, 100), 256, 4) && said("file is shorter"),
          "llm.c count beyond the file: %s", mk_error_last());
    CHECK(!mk_data_open(llmc("v2.bin", 2, 100, 100), 256, 4) && said("version 2 (want 1)"), "llm.c version: %s",
          mk_error_last());
    mk_data_t *d = mk_data_open(llmc("ok.bin", 1, 100, 100), 256, 4);
    CHECK(d && !strcmp(mk_data_format(d), "llm.c"), "a good llm.c file: %s", mk_error_last());
    mk_data_free(d);
    CHECK(!mk_data_open(put("odd.u16", "abc", 3), 256, 4) && said("odd size"), "odd uint16 file: %s",
          mk_error_last());
    CHECK(!mk_data_open(put("t.txt", "hello world, hello world", 24), 256, 0) && said("must be >= 1"),
          "sequence 0: %s", mk_error_last());
    CHECK(!mk_data_open(put("t.txt", "hello world, hello world", 24), 0, 4) && said("must be >= 1"),
          "vocabulary 0: %s", mk_error_last());
    CHECK(!mk_data_open("/dev/zero", 256, 4) && said("not a regular file"), "/dev/zero: %s", mk_error_last());
    CHECK(!mk_data_open(dir, 256, 4) && said("cannot read data file"), "a directory: %s", mk_error_last());
}

/* Megatron's blend (--data-path 0.3 A 0.7 B): helpers.cpp's greedy rule
 * by hand for the first ten samples (sample s goes to the larger of
 * 0.3 max(s,1) - c_A and 0.7 max(s,1) - c_B, A on a tie): B A B B A B B A
 * B B, each dataset serving its own samples in order; far out (past the
 * kept strides, and asked out of order) the counts stay within one of
 * the weights.  Window w of A starts with token w % 100, of B 100 + that. */
static void test_blend(void)
{
    unsigned char a[4000], b[4000];
    for (int i = 0; i < 4000; i++) a[i] = (unsigned char)(i / 4 % 100), b[i] = (unsigned char)(100 + i / 4 % 100);
    char pa[128], pb[128], spec[400];
    snprintf(pa, sizeof pa, "%s", put("A.txt", a, sizeof a));
    snprintf(pb, sizeof pb, "%s", put("B.txt", b, sizeof b));
    snprintf(spec, sizeof spec, "0.3 %s 0.7 %s", pa, pb);
    mk_data_t *d = mk_data_open(spec, 256, 4);
    CHECK(d && !strcmp(mk_data_format(d), "blend"), "a blend opens: %s", d ? "" : mk_error_last());
    if (!d) return;
    CHECK(mk_data_tokens(d, MK_DATA_TRAIN) == 7200, "its training tokens are its datasets' (%zu)",
          mk_data_tokens(d, MK_DATA_TRAIN));
    int32_t out[10 * 5];
    mk_data_batch(d, MK_DATA_TRAIN, 0, 10, 0, 10, out);
    const char *want = "BABBABBABB";
    int na = 0, nb = 0, ok = 1;
    for (int j = 0; j < 10; j++) {
        int isb = out[j * 5] >= 100, idx = isb ? out[j * 5] - 100 : out[j * 5];
        ok &= isb == (want[j] == 'B') && idx == (isb ? nb++ : na++);
    }
    CHECK(ok, "samples 0-9 go B A B B A B B A B B, each dataset's in order");
    int64_t far[3] = {200000, 7, 123457};
    for (int i = 0; i < 3; i++) { /* out of order: a kept stride, back to the start, in between */
        int counts[2] = {0, 0};
        int32_t *big = malloc(1000 * 5 * sizeof *big);
        mk_data_batch(d, MK_DATA_TRAIN, far[i], 1000, 0, 1000, big);
        for (int j = 0; j < 1000; j++) counts[big[j * 5] >= 100]++;
        CHECK(counts[0] >= 299 && counts[0] <= 301, "samples %lld...: %d of 1000 from A", (long long)far[i] * 1000,
              counts[0]);
        free(big);
    }
    mk_data_free(d);
    snprintf(spec, sizeof spec, "0.3 %s 0 %s", pa, pb);
    CHECK(!mk_data_open(spec, 256, 4) && said("weight '0' is not a number in (0, 1e9]"), "a zero weight: %s",
          mk_error_last());
    snprintf(spec, sizeof spec, "0.3 %s 0.7", pa);
    CHECK(!mk_data_open(spec, 256, 4) && said("nor a blend"), "an odd blend: %s", mk_error_last());
    snprintf(spec, sizeof spec, "1 %s 1 %s/none", pa, dir);
    CHECK(!mk_data_open(spec, 256, 4) && said("cannot read data file"), "a missing dataset: %s", mk_error_last());
    snprintf(spec, sizeof spec, "1 %s 1 %s", pa, pb);
    CHECK(!mk_data_open(spec, 150, 4) && said("not below the vocabulary size 150"), "B's ids checked: %s",
          mk_error_last());
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/mk-readers-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_read_file();
    test_data_checks();
    test_blend();
    const char *names[] = {"ten", "empty", "neg.bin", "long.bin", "v2.bin", "ok.bin", "odd.u16", "t.txt", "A.txt",
                           "B.txt"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    CHECK_DONE();
}
