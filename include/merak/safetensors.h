/* safetensors files: an 8-byte little-endian header length, a JSON header
 * ({"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets"}}),
 * then raw little-endian data.  numpy, PyTorch and the `safetensors`
 * library read them without our code.
 *
 * The writer streams: names and shapes are declared first, then each
 * tensor's data is appended in declaration order (so a gather over MPI
 * needs one tensor in memory at a time).  It writes to PATH.tmp.PID and
 * renames on commit, so an existing file is never left half-written.
 *
 * Checksums: the writer stores, for every tensor NAME, the metadata entry
 * "crc32.NAME": 8 lowercase hex digits, zlib's crc32 of the tensor's bytes
 * (its data_offsets range).  The reader verifies them in mk_st_read; a file
 * without any (written by another tool) reads unverified (mk_st_checksummed
 * says which), one with only some is refused. */
#ifndef MERAK_SAFETENSORS_H
#define MERAK_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_ST_MAX_DIMS 4

typedef struct mk_st_tensor {
    char name[128];
    int ndim;
    int64_t shape[MK_ST_MAX_DIMS];
    uint64_t begin, end;   /* byte offsets within the data section */
    int dtype;             /* MK_ST_F32, MK_ST_BF16 or MK_ST_F16: the writer narrows to it (round to nearest even) */
} mk_st_tensor_t;

enum { MK_ST_F32 = 0, MK_ST_BF16, MK_ST_F16 };

typedef struct mk_st_writer mk_st_writer_t;
typedef struct mk_st_reader mk_st_reader_t;

/* Start a file of n tensors, each stored as its dtype says (F32, or BF16 /
 * F16 rounded to nearest even from the floats given: merak/half.h);
 * meta_keys/meta_vals: n_meta string pairs for __metadata__.  Returns NULL
 * on error (mk_error_last()). */
mk_st_writer_t *mk_st_writer_begin(const char *path, const mk_st_tensor_t *tensors, int n,
                                   const char *const *meta_keys, const char *const *meta_vals,
                                   int n_meta);
/* Append the next tensor's data (count floats = product of its shape; the
 * checksum covers the bytes stored). */
int mk_st_writer_put(mk_st_writer_t *w, const float *data, size_t count);
/* Flush, fsync and rename over the target; frees w.  Returns 0 or -1. */
int mk_st_writer_commit(mk_st_writer_t *w);
/* Drop the temporary file; frees w. */
void mk_st_writer_abort(mk_st_writer_t *w);

/* Open and check a file (header well-formed, F32, BF16 or F16 (Hugging
 * Face's published checkpoints; read as float32), offsets matching the
 * shapes and tiling the data section: no gap, overlap or trailing bytes;
 * checksums for all tensors or none, well-formed).  Returns NULL on error. */
mk_st_reader_t *mk_st_open(const char *path);
void mk_st_close(mk_st_reader_t *r);
int mk_st_count(const mk_st_reader_t *r);
const mk_st_tensor_t *mk_st_tensor(const mk_st_reader_t *r, int i);
const mk_st_tensor_t *mk_st_find(const mk_st_reader_t *r, const char *name);
/* Read a tensor's data as float32 (count must equal its element count;
 * BF16 and F16 widened exactly); with checksums (of the stored bytes), a
 * mismatch is an error naming the tensor and the file. */
int mk_st_read(mk_st_reader_t *r, const char *name, float *dst, size_t count);
/* 1: every tensor has a stored checksum; 0: none (reads are unverified). */
int mk_st_checksummed(const mk_st_reader_t *r);
/* A __metadata__ value, or NULL. */
const char *mk_st_meta(const mk_st_reader_t *r, const char *key);

#ifdef __cplusplus
}
#endif
#endif
