/* The architecture fields of a model configuration as JSON (plan files'
 * "model" object and `merak model --json`), with Megatron-LM's names:
 * num_query_groups, normalization (LayerNorm | RMSNorm), swiglu,
 * position_embedding_type (learned_absolute | rope), rotary_base,
 * norm_epsilon, untie_embeddings_and_output_weights, add_bias_linear. */
#ifndef MERAK_MODEL_JSON_H
#define MERAK_MODEL_JSON_H

#include "merak/jsonio.h"
#include "merak/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The keys above, NULL-terminated. */
const char *const *mk_model_arch_keys(void);
/* Add the fields to obj.  Returns 0 or -1. */
int mk_model_arch_to_json(const mk_model_config_t *c, json_t *obj);
/* Read the fields that obj has (the others keep their values in *c); WHAT
 * names the object in errors.  Returns 0 or -1 (no validation: the caller
 * runs mk_model_validate). */
int mk_model_arch_from_json(json_t *obj, const char *what, mk_model_config_t *c);

#ifdef __cplusplus
}
#endif
#endif
