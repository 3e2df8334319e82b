/* Token data files (src/formats/data.c), as `merak run --data FILE` opens them
 * (src/exec/exec_setup.c) and serves batches.  The input's first two bytes
 * pick what the CLI would supply besides the file:
 *   byte 0, bits 0-1: the file name's suffix (.txt .bin .u16 .tok), which
 *                     selects the format; bits 2-3: the vocabulary
 *                     (256, 65, 50257, 65536);
 *   byte 1: the sequence length - 1 (1..256 tokens);
 *   byte 0, bit 4: a Megatron-LM indexed dataset: bytes 2-3 the index's
 *                  length L (little-endian), the next L bytes data.idx, the
 *                  rest data.bin, opened as the prefix "data";
 *   byte 0, bit 5: a blend (Megatron's --data-path W1 P1 W2 P2 ...): the
 *                  rest is its text, each "@0" / "@1" in it the path of
 *                  one of two small byte files written here.
 * The rest is the file. */
#include "fuzz.h"
#include "merak/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The blend's text with @0 and @1 replaced by the two files' paths. */
static const char *blend_spec(const uint8_t *data, size_t size)
{
    static char spec[8192];
    static const char text[] = "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.";
    const char *p[2] = {mk_fuzz_file("p0.txt", (const uint8_t *)text, sizeof text - 1), NULL};
    static char p0[4096];
    snprintf(p0, sizeof p0, "%s", p[0]);
    p[0] = p0, p[1] = mk_fuzz_file("p1.txt", (const uint8_t *)text + 10, sizeof text - 11);
    size_t n = 0;
    for (size_t i = 0; i < size && n + 4200 < sizeof spec; i++) {
        if (data[i] == '@' && i + 1 < size && (data[i + 1] == '0' || data[i + 1] == '1')) {
            n += (size_t)snprintf(spec + n, sizeof spec - n, "%s", p[data[++i] - '0']);
        } else if (data[i]) {
            spec[n++] = (char)data[i];
        }
    }
    spec[n] = 0;
    return spec;
}

static int read_data(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"data.txt", "data.bin", "data.u16", "data.tok"};
    static const int vocabs[] = {256, 65, 50257, 65536};
    if (size < 2) return 0; /* no parameters: nothing the CLI could ask */
    int seq = 1 + data[1], gbs = 3;
    const char *path;
    if (data[0] & 32) {
        path = blend_spec(data + 2, size - 2);
    } else if (data[0] & 16) { /* a .idx and a .bin */
        if (size < 4) return 0;
        size_t l = (size_t)(data[2] | data[3] << 8);
        if (l > size - 4) l = size - 4;
        mk_fuzz_file("data.idx", data + 4, l);
        const char *bin = mk_fuzz_file("data.bin", data + 4 + l, size - 4 - l);
        static char prefix[4096];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(bin) - 4), bin);
        path = prefix;
    } else {
        path = mk_fuzz_file(names[data[0] & 3], data + 2, size - 2);
    }
    mk_data_t *d = mk_data_open(path, vocabs[data[0] >> 2 & 3], seq);
    if (!d) return -1;
    int32_t *batch = malloc((size_t)gbs * (seq + 1) * sizeof *batch); /* gbs sequences of seq + 1 ids */
    for (int split = 0; batch && split < 2; split++) {
        long steps[] = {0, 1, 1000003};
        for (int k = 0; k < 3; k++) mk_data_batch(d, (mk_data_split_t)split, steps[k], gbs, 0, gbs, batch);
        /* --reset-position-ids' document starts of the same sequences, where the data knows them */
        unsigned char *docs = mk_data_has_docs(d) ? malloc((size_t)gbs * seq) : NULL;
        for (int k = 0; docs && k < 3; k++) mk_data_batch_docs(d, (mk_data_split_t)split, steps[k], gbs, 0, gbs, docs);
        free(docs);
    }
    free(batch);
    mk_data_free(d);
    return 0;
}

MK_FUZZ_HARNESS(read_data)
