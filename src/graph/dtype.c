/* Data types and vocabulary padding: the base of the graph module, which
 * uses nothing else in it (model.c -> graph_json.c -> graph.c -> here). */
#include "merak/model.h"

#include <stdint.h>
#include <string.h>

int mk_pad_vocab(int vocab, int tp)
{
    int m = 128 * (tp > 0 ? tp : 1); /* <= 128 * MK_MAX_TP */
    return (int)(((int64_t)vocab + m - 1) / m * m);
}

int mk_model_padded_vocab(const mk_model_config_t *c, int tp) { return mk_pad_vocab(c->vocab, tp); }

int mk_dtype_parse(const char *s, mk_dtype_t *out)
{
    if (!strcmp(s, "fp32")) *out = MK_DTYPE_FP32;
    else if (!strcmp(s, "fp16")) *out = MK_DTYPE_FP16;
    else if (!strcmp(s, "bf16")) *out = MK_DTYPE_BF16;
    else if (!strcmp(s, "fp8")) *out = MK_DTYPE_FP8;
    else return mk_error_set("unknown dtype '%s' (fp32, fp16, bf16 or fp8)", s);
    return 0;
}

const char *mk_dtype_name(mk_dtype_t d)
{
    return d == MK_DTYPE_FP32 ? "fp32" : d == MK_DTYPE_FP16 ? "fp16" : d == MK_DTYPE_FP8 ? "fp8" : "bf16";
}

int mk_dtype_bytes(mk_dtype_t d) { return d == MK_DTYPE_FP32 ? 4 : 2; }

int mk_dtype_gemm_bytes(mk_dtype_t d) { return d == MK_DTYPE_FP8 ? 1 : mk_dtype_bytes(d); }

int mk_dtype_cast_bytes(mk_dtype_t d, int current)
{
    if (d != MK_DTYPE_FP8) return 0;
    return (current ? 2 : 1) * mk_dtype_bytes(d) + 2 * mk_dtype_gemm_bytes(d);
}
