/* Cluster JSON files (src/plan/cluster.c), as `merak sim --cluster FILE.json`
 * reads them: mk_cluster_get on a path loads and validates the file. */
#include "fuzz.h"
#include "merak/cluster.h"

static int read_cluster(const uint8_t *data, size_t size)
{
    mk_cluster_t c;
    if (mk_cluster_get(mk_fuzz_file("cluster.json", data, size), &c) < 0) return -1;
    (void)mk_cluster_default_dtype(&c);
    return 0;
}

MK_FUZZ_HARNESS(read_cluster)
