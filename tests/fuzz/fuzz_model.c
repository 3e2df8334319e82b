/* Model JSON descriptions (src/graph/graph_json.c) and Hugging Face
 * config.json files (src/graph/model_hf.c: a model_type key), as `merak
 * model --model FILE.json` reads them: resolve (probe and validate), then
 * build the graph at tp 1 and walk it the way the CLI prints it. */
#include "fuzz.h"
#include "merak/graph.h"
#include "merak/model.h"

static int read_model(const uint8_t *data, size_t size)
{
    const char *path = mk_fuzz_file("model.json", data, size);
    mk_model_overrides_t ov;
    mk_model_config_t cfg;
    mk_model_overrides_init(&ov);
    if (mk_model_resolve(path, &ov, &cfg) < 0 || mk_model_check_tp(&cfg, 1) < 0) return -1;
    mk_graph_opts_t o;
    mk_graph_opts_init(&o);
    mk_graph_t *g = mk_graph_build(&cfg, &o);
    if (!g) return -1;
    mk_fuzz_sink = mk_graph_params(g) + mk_graph_flops_per_iteration(g, 8, 1);
    for (int l = 0; l < g->n_layers; l++) mk_fuzz_sink += mk_layer_act_bytes(g, l, 1, 0, 0);
    mk_graph_free(g);
    return 0;
}

MK_FUZZ_HARNESS(read_model)
