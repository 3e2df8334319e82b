/* A Hugging Face model directory's safetensors index (src/exec/exec_hf.c),
 * as `merak run --load DIR` opens it: the input is
 * DIR/model.safetensors.index.json, beside a tiny Llama's config.json and
 * one shard, a.safetensors (tensor "x"), written here; its weight_map must
 * name plain files of DIR, each opened and checked (mk_hf_dir_files), and
 * the config resolves as --model DIR does (mk_hf_dir_model). */
#include "fuzz.h"
#include "exec/exec_internal.h"

#include <stdio.h>
#include <string.h>

static const char config[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 192, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 256, \"max_position_embeddings\": 64, "
    "\"tie_word_embeddings\": false, \"hidden_act\": \"silu\"}";

/* The shard a.safetensors: one F32 tensor x of 4. */
static int write_shard(void)
{
    static int done;
    if (done) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/a.safetensors", mk_fuzz_dir());
    mk_st_tensor_t t = {"x", 1, {4}, 0, 0, MK_ST_F32};
    const char *k[] = {"format"}, *v[] = {"pt"};
    mk_st_writer_t *w = mk_st_writer_begin(path, &t, 1, k, v, 1);
    float x[4] = {1, 2, 3, 4};
    if (!w || mk_st_writer_put(w, x, 4) < 0 || mk_st_writer_commit(w) < 0) return -1;
    done = 1;
    return 0;
}

static int read_dir(const uint8_t *data, size_t size)
{
    mk_fuzz_file("config.json", (const uint8_t *)config, sizeof config - 1);
    mk_fuzz_file("model.safetensors.index.json", data, size);
    if (write_shard() < 0) return -1;
    mk_model_config_t cfg;
    if (mk_hf_dir_model(mk_fuzz_dir(), &cfg) < 0) return -1;
    static mk_hf_src_t s; /* 256 readers and names: not on the stack */
    memset(&s, 0, sizeof s);
    int rc = mk_hf_dir_files(mk_fuzz_dir(), &s);
    for (int i = 0; rc == 0 && i < s.n; i++) mk_fuzz_sink += mk_st_count(s.r[i]);
    mk_hf_close(&s);
    return rc;
}

MK_FUZZ_HARNESS(read_dir)
