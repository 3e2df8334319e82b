/* safetensors round trips and damage detection; token data formats and
 * layout-independent batches. */
#include "check.h"
#include "merak/common.h"
#include "merak/data.h"
#include "merak/safetensors.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

static int write_two(const char *path, float bias)
{
    mk_st_tensor_t t[2] = {{"transformer.wte.weight", 2, {3, 4}, 0, 0, MK_ST_F32},
                           {"transformer.ln_f.bias", 1, {4}, 0, 0, MK_ST_F32}};
    const char *k[] = {"format_version", "step"}, *v[] = {"1", "7"};
    mk_st_writer_t *w = mk_st_writer_begin(path, t, 2, k, v, 2);
    if (!w) return -1;
    float a[12], b[4];
    for (int i = 0; i < 12; i++) a[i] = i * 0.5f;
    for (int i = 0; i < 4; i++) b[i] = bias + i;
    if (mk_st_writer_put(w, a, 12) || mk_st_writer_put(w, b, 4)) {
        mk_st_writer_abort(w);
        return -1;
    }
    return mk_st_writer_commit(w);
}

static void test_safetensors(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    CHECK(write_two(path, 1.0f) == 0, "write: %s", mk_error_last());
    mk_st_reader_t *r = mk_st_open(path);
    CHECK(r != NULL, "open: %s", mk_error_last());
    if (!r) return;
    CHECK(mk_st_count(r) == 2, "count %d", mk_st_count(r));
    const mk_st_tensor_t *t = mk_st_find(r, "transformer.wte.weight");
    CHECK(t && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 4, "shape");
    float a[12], b[4];
    CHECK(mk_st_read(r, "transformer.wte.weight", a, 12) == 0 && a[11] == 5.5f, "data a");
    CHECK(mk_st_read(r, "transformer.ln_f.bias", b, 4) == 0 && b[3] == 4.0f, "data b");
    CHECK(mk_st_read(r, "transformer.ln_f.bias", b, 3) < 0, "shape mismatch detected");
    CHECK(mk_st_meta(r, "step") && !strcmp(mk_st_meta(r, "step"), "7"), "metadata");
    mk_st_close(r);

    /* a save that dies midway leaves the previous file intact */
    mk_st_tensor_t t2[1] = {{"x", 1, {4}, 0, 0, MK_ST_F32}};
    mk_st_writer_t *w = mk_st_writer_begin(path, t2, 1, NULL, NULL, 0);
    float x[2] = {9, 9};
    CHECK(w && mk_st_writer_put(w, x, 2) < 0, "short tensor rejected");
    CHECK(mk_st_writer_commit(w) < 0, "incomplete file not committed");
    r = mk_st_open(path);
    CHECK(r && mk_st_count(r) == 2, "previous checkpoint still readable");
    mk_st_close(r);

    /* checksums: a flipped bit fails the read naming the tensor; bytes
       after the last tensor fail the open */
    r = mk_st_open(path);
    CHECK(r && mk_st_checksummed(r), "checksums stored");
    long at = 0;  /* file offset: 8 + header length + 12 floats of wte + 1 */
    mk_st_close(r);
    FILE *f = fopen(path, "r+b");
    unsigned char hl[8];
    CHECK(f && fread(hl, 8, 1, f) == 1, "header length");
    for (int i = 0; i < 8; i++) at |= (long)hl[i] << (8 * i);
    at += 8 + 12 * 4 + 1;  /* a byte of the second tensor (ln_f.bias) */
    int c = f && fseek(f, at, SEEK_SET) == 0 ? fgetc(f) : EOF;
    CHECK(c != EOF && fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 0x01, f) != EOF, "flip a bit");
    if (f) fclose(f);
    r = mk_st_open(path);
    CHECK(r && mk_st_read(r, "transformer.wte.weight", a, 12) == 0, "undamaged tensor still reads");
    CHECK(r && mk_st_read(r, "transformer.ln_f.bias", b, 4) < 0 && strstr(mk_error_last(), "ln_f.bias' is damaged"),
          "flipped bit detected: %s", mk_error_last());
    mk_st_close(r);
    CHECK(write_two(path, 1.0f) == 0, "rewrite");
    f = fopen(path, "ab");
    CHECK(f && fputc(0, f) != EOF, "append a byte");
    if (f) fclose(f);
    CHECK(mk_st_open(path) == NULL && strstr(mk_error_last(), "1 bytes after the last tensor"), "trailing byte: %s",
          mk_error_last());
    CHECK(write_two(path, 1.0f) == 0, "rewrite");

    /* truncation is detected */
    CHECK(truncate(path, 60) == 0, "truncate");
    r = mk_st_open(path);
    CHECK(r == NULL, "truncated file rejected");
    printf("truncated: %s\n", mk_error_last());
    mk_st_close(r);
    CHECK(mk_st_open("/nonexistent/x.safetensors") == NULL, "missing file rejected");
}

static void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
}

static void test_data(void)
{
    char path[1024];
    enum { N = 1000 };
    unsigned char bytes[N];
    for (int i = 0; i < N; i++) bytes[i] = (unsigned char)(i * 7 % 256);
    snprintf(path, sizeof path, "%s/text.txt", dir);
    write_file(path, bytes, N);
    mk_data_t *d = mk_data_open(path, 256, 16);
    CHECK(d && !strcmp(mk_data_format(d), "bytes"), "bytes format");
    CHECK(d && mk_data_tokens(d, MK_DATA_TRAIN) == 900 && mk_data_tokens(d, MK_DATA_VAL) == 100, "90/10 split");
    /* a global batch is the same sequences however it is sliced */
    int32_t whole[8 * 17], part[8 * 17];
    mk_data_batch(d, MK_DATA_TRAIN, 3, 8, 0, 8, whole);
    for (int r = 0; r < 4; r++) mk_data_batch(d, MK_DATA_TRAIN, 3, 8, 2 * r, 2, part + 2 * r * 17);
    CHECK(!memcmp(whole, part, sizeof whole), "slices equal the whole batch");
    CHECK(whole[0] == bytes[(3 * 8 % 56) * 16], "window order");
    mk_data_free(d);
    CHECK(mk_data_open(path, 100, 16) == NULL, "ids above the vocabulary rejected");
    printf("vocab: %s\n", mk_error_last());
    CHECK(mk_data_open(path, 256, 200) == NULL, "too small for the sequence length");

    uint16_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (uint16_t)(i * 31 % 5000);
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    write_file(path, ids, sizeof ids);
    d = mk_data_open(path, 5000, 16);
    CHECK(d && !strcmp(mk_data_format(d), "uint16") && mk_data_tokens(d, MK_DATA_TRAIN) == 900, "uint16");
    mk_data_free(d);

    unsigned char llmc[1024 + sizeof ids];
    memset(llmc, 0, 1024);
    int32_t hdr[3] = {20240520, 1, N};
    memcpy(llmc, hdr, sizeof hdr);
    memcpy(llmc + 1024, ids, sizeof ids);
    snprintf(path, sizeof path, "%s/llmc.bin", dir);
    write_file(path, llmc, sizeof llmc);
    d = mk_data_open(path, 5000, 16);
    CHECK(d && !strcmp(mk_data_format(d), "llm.c") && mk_data_tokens(d, MK_DATA_TRAIN) == 900, "llm.c header");
    int32_t seq[17];
    if (d) mk_data_batch(d, MK_DATA_TRAIN, 0, 1, 0, 1, seq);
    CHECK(d && seq[1] == ids[1], "llm.c ids after the header");
    mk_data_free(d);
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/mk-io-XXXXXX";
    dir = mkdtemp(tmpl);
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_two(argv[2], 1.0f) ? 1 : 0;
    test_safetensors();
    test_data();
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    CHECK_DONE();
}
