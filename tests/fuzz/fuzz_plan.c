/* Plan files (src/plan/plan_json.c), as `merak sim|run --plan FILE` takes them
 * (mk_args_plan in src/cli/cli_plan.c): load, check the model against tp,
 * build the plan's graph, check the plan and its bounds against its partition
 * (mk_plan_resolve does both for a plan that carries its bounds), then
 * resolve its cluster.  The same bytes as text go through the public API's
 * mk_plan_from_json_text too (no NUL: a C string). */
#include "fuzz.h"
#include "merak/cluster.h"
#include "merak/graph.h"
#include "merak/plan.h"

#include <stdlib.h>
#include <string.h>

static void read_text(const uint8_t *data, size_t size)
{
    if (memchr(data, 0, size)) return;
    char *text = malloc(size + 1);
    if (!text) return;
    memcpy(text, data, size);
    text[size] = 0;
    mk_plan_t q;
    if (mk_plan_from_json_text(text, "plan.json", &q) == 0) {
        char *back = mk_plan_to_json_text(&q);
        free(back);
    }
    free(text);
}

static int read_plan(const uint8_t *data, size_t size)
{
    read_text(data, size);
    mk_plan_t p;
    if (mk_plan_load(mk_fuzz_file("plan.json", data, size), &p) < 0 || mk_model_check_tp(&p.model, p.tp) < 0)
        return -1;
    mk_graph_t *g = mk_plan_graph(&p);
    if (!g) return -1;
    p.n_vstages = p.pp * p.vpp;
    int rc = mk_plan_check(&p, g) < 0 || mk_plan_check_partition(&p, g) < 0 ? -1 : 0; /* as mk_plan_resolve */
    mk_graph_free(g);
    mk_cluster_t c;
    return rc < 0 ? -1 : mk_cluster_get(p.cluster, &c);
}

MK_FUZZ_HARNESS(read_plan)
