/* safetensors files (src/formats/safetensors.c), as `merak run --load FILE` opens
 * a checkpoint (src/exec/exec_ckpt.c) and `--load DIR` a Hugging Face shard:
 * open and check the header, read each tensor's data (F32, BF16, F16), check
 * the merak metadata (src/formats/ckpt_meta.c). */
#include "fuzz.h"
#include "merak/ckpt.h"
#include "merak/common.h"
#include "merak/safetensors.h"

#include <stdlib.h>

static int read_all(mk_st_reader_t *r)
{
    for (int i = 0; i < mk_st_count(r); i++) {
        const mk_st_tensor_t *t = mk_st_tensor(r, i);
        size_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
        /* the reader checked the shape against the data offsets, which
           lie inside the file, so n is bounded by the input's size */
        float *buf = malloc((n ? n : 1) * sizeof *buf);
        int rc = buf && mk_st_find(r, t->name) == t ? mk_st_read(r, t->name, buf, n) : -1;
        free(buf);
        if (rc < 0) return -1;
    }
    return 0;
}

static int read_st(const uint8_t *data, size_t size)
{
    mk_st_reader_t *r = mk_st_open(mk_fuzz_file("ckpt.st", data, size));
    if (!r) return -1;
    uint64_t meta[MK_CKPT_N_META]; /* the metadata checks of `merak run --load FILE` */
    mk_ckpt_scaler_t cs;
    uint64_t skipped;
    /* every tensor read first: a Hugging Face shard (--load DIR) is read
       without merak's metadata, in F32, BF16 or F16 */
    int rc = read_all(r) < 0 ? -1
           : mk_ckpt_read_meta(r, "ckpt.st", meta) < 0 ? -1
           : mk_ckpt_read_scaler(r, "ckpt.st", &cs) < 0 ? -1
           : mk_ckpt_read_skipped(r, "ckpt.st", meta[MK_CKPT_STEP], &skipped) < 0 ? -1
           : !mk_st_meta(r, "config") ? mk_error_set("ckpt.st: model mismatch: (no config)") /* as check_file */
           : 0;
    mk_st_close(r);
    return rc;
}

MK_FUZZ_HARNESS(read_st)
