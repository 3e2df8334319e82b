/* Token data for training: a file of token ids, split into training (the
 * first 90%) and validation (the last 10%) tokens, served as global
 * batches that are the same sequences whatever the parallel layout.
 *
 * Formats, detected in this order:
 *  - Megatron-LM's indexed dataset: PATH (a prefix with no file of that
 *    name, or PREFIX.idx) names PREFIX.idx + PREFIX.bin (src/formats/
 *    data_megatron.c: the MMIDIDX index, every integer dtype, each size
 *    and pointer checked before a token is read), the sequences in order;
 *  - llm.c's .bin: a 256-int32 header (magic 20240520, version 1, token
 *    count) followed by little-endian uint16 ids;
 *  - a name ending in .bin, .u16 or .tok: raw little-endian uint16 ids;
 *  - anything else: each byte is a token id (text as bytes, vocab >= 256).
 * The file is a regular file or a pipe of at most 16 GiB (MK_READ_MAX_BYTES;
 * devices and directories are refused); an llm.c count that is negative or
 * beyond the file is an error.
 *
 * Sequence j of global batch k (gbs sequences of seq tokens) is window
 * w = (k*gbs + j) mod W of the split, W = (tokens - 1) / seq windows of
 * seq + 1 tokens (inputs, and targets shifted by one).
 *
 * PATH with whitespace that names no file is Megatron-LM's blend "W1 P1
 * W2 P2 ..." (up to 256 datasets, weights > 0): global sample s is sample
 * c of dataset i by Megatron's blending rule (src/formats/data_blend.c),
 * window c mod W_i of that dataset's split; mk_data_format says "blend". */
#ifndef MERAK_DATA_H
#define MERAK_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MK_DATA_TRAIN = 0, MK_DATA_VAL = 1 } mk_data_split_t;

typedef struct mk_data mk_data_t;

/* Open and check a data file: readable, every id below vocab, each split
 * holding at least one window of seq + 1 tokens.  NULL on error. */
mk_data_t *mk_data_open(const char *path, int vocab, int seq);
void mk_data_free(mk_data_t *d);
size_t mk_data_tokens(const mk_data_t *d, mk_data_split_t split);
const char *mk_data_format(const mk_data_t *d); /* "bytes", "uint16", "llm.c", "megatron" */

/* Sequences [first, first+count) of global batch k: count*(seq+1) ids. */
void mk_data_batch(const mk_data_t *d, mk_data_split_t split, long k, int gbs, int first, int count,
                   int32_t *out);

/* 1 when the data knows its documents: a Megatron-LM dataset, or a blend
 * of nothing else (each document of the index a run of tokens). */
int mk_data_has_docs(const mk_data_t *d);
/* For the sequences mk_data_batch serves: start[j*seq + t] = 1 where
 * input token t of sequence j begins a document (t = 0 always), else 0
 * (Megatron's --reset-position-ids / --reset-attention-mask, which reset
 * after each document's end-of-document token). */
void mk_data_batch_docs(const mk_data_t *d, mk_data_split_t split, long k, int gbs, int first, int count,
                        unsigned char *start);

#ifdef __cplusplus
}
#endif
#endif
