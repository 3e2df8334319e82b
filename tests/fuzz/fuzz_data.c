/* Token data files (src/formats/data.c), as `merak run --data FILE` opens them
 * (src/exec/exec_setup.c) and serves batches.  The input's first two bytes
 * pick what the CLI would supply besides the file:
 *   byte 0, bits 0-1: the file name's suffix (.txt .bin .u16 .tok), which
 *                     selects the format; bits 2-3: the vocabulary
 *                     (256, 65, 50257, 65536);
 *   byte 1: the sequence length - 1 (1..256 tokens).
 * The rest is the file. */
#include "fuzz.h"
#include "merak/data.h"

#include <stdlib.h>

static int read_data(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"data.txt", "data.bin", "data.u16", "data.tok"};
    static const int vocabs[] = {256, 65, 50257, 65536};
    if (size < 2) return 0; /* no parameters: nothing the CLI could ask */
    int seq = 1 + data[1], gbs = 3;
    mk_data_t *d = mk_data_open(mk_fuzz_file(names[data[0] & 3], data + 2, size - 2), vocabs[data[0] >> 2 & 3], seq);
    if (!d) return -1;
    int32_t *batch = malloc((size_t)gbs * (seq + 1) * sizeof *batch); /* gbs sequences of seq + 1 ids */
    for (int split = 0; batch && split < 2; split++) {
        long steps[] = {0, 1, 1000003};
        for (int k = 0; k < 3; k++) mk_data_batch(d, (mk_data_split_t)split, steps[k], gbs, 0, gbs, batch);
    }
    free(batch);
    mk_data_free(d);
    return 0;
}

MK_FUZZ_HARNESS(read_data)
