/* Hugging Face config.json as a model configuration (model_hf.c), read
 * by the one resolver (mk_model_resolve). */
#ifndef MERAK_MODEL_HF_H
#define MERAK_MODEL_HF_H

#include "merak/model.h"

/* 1 when path is a directory holding a config.json (the model) or a JSON
 * file with a model_type: a Hugging Face config, not merak's own JSON. */
int mk_model_hf_is(const char *path);
/* Read it into *cfg (sizes, architecture, experts, window, RoPE scaling;
 * seq min(max_position_embeddings, 2048)).  Returns 0 or -1 naming the
 * file and the field. */
int mk_model_hf_load(const char *path, mk_model_config_t *cfg);

#endif
