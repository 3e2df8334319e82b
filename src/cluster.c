/* Cluster presets.  Figures are vendors' public peak numbers:
 *  - A100 80GB SXM: 312 TFLOP/s dense FP16/BF16, 156 TF32, 19.5 FP32,
 *    2039 GB/s HBM2e (NVIDIA A100 datasheet); NVLink 3 via NVSwitch 600 GB/s
 *    bidirectional per GPU = 300 GB/s each way; DGX A100: 8x 200 Gb/s HDR
 *    InfiniBand (25 GB/s each) for compute traffic (DGX A100 user guide).
 *  - H100 SXM5: 989 TFLOP/s dense BF16, 494.7 TF32, 66.9 FP32, 3.35 TB/s
 *    HBM3 (H100 datasheet); NVLink 4 900 GB/s bidirectional = 450 each way;
 *    DGX H100: 8x 400 Gb/s NDR (50 GB/s each).
 *  - RTX 3090: 71 TFLOP/s FP16/BF16 tensor with FP32 accumulate, 35.6 FP32,
 *    936 GB/s GDDR6X, 24 GB (NVIDIA GA102 whitepaper, appendix A).  The
 *    server is an assumption (the Merak paper used commodity servers of
 *    this kind): 8 GPUs on PCIe 4.0 x16 (32 GB/s each way, shared through
 *    the host), one 100 Gb/s InfiniBand NIC (12.5 GB/s) per node.
 *  - H200 SXM: 989 TFLOP/s dense BF16, 4.8 TB/s HBM3e, 141 GB (H200 datasheet).
 * Latencies (alpha) are typical measured figures, not datasheet numbers:
 * ~3 us NVLink, ~10 us PCIe through host memory, ~5 us InfiniBand.
 * gemm_eff/gemm_half_dim shape the efficiency curve the cost model uses;
 * they are calibrated by `merak profile`, here set to common observations
 * (large GEMMs reach ~70-80% of peak). */
#include "merak/cluster.h"

#include <string.h>

#define TF 1e12
#define GB 1e9

typedef struct {
    const char *about;
    mk_cluster_t c;
} mk_cluster_preset_t;

static const mk_cluster_preset_t mk_cluster_presets[] = {
    {"8x A100-80GB SXM per node, NVSwitch, 8x200 Gb/s InfiniBand",
     {"dgx-a100", {"A100-SXM4-80GB", {156 * TF, 312 * TF, 312 * TF}, 78 * TF, 2039 * GB, 80 * GB,
                   4e-6, 0.80, 1024, 1}, 8, 0, {3e-6, 300 * GB}, {5e-6, 25 * GB}, 8, 0}},
    {"8x H100-80GB SXM per node, NVSwitch, 8x400 Gb/s InfiniBand",
     {"dgx-h100", {"H100-SXM5-80GB", {494.7 * TF, 989 * TF, 989 * TF}, 134 * TF, 3350 * GB, 80 * GB,
                   4e-6, 0.75, 1536, 1}, 8, 0, {3e-6, 450 * GB}, {5e-6, 50 * GB}, 8, 0}},
    {"8x RTX 3090 per node on PCIe 4.0, one 100 Gb/s InfiniBand NIC (assumed commodity servers)",
     {"rtx3090-pcie", {"GeForce RTX 3090", {35.6 * TF, 71 * TF, 71 * TF}, 35.6 * TF, 936 * GB, 24 * GB,
                       5e-6, 0.75, 768, 1}, 8, 0, {10e-6, 25 * GB}, {5e-6, 12.5 * GB}, 1, 0}},
    {"one H200 SXM (141 GB)",
     {"h200", {"H200-SXM-141GB", {494.7 * TF, 989 * TF, 989 * TF}, 134 * TF, 4800 * GB, 141 * GB,
               4e-6, 0.75, 1536, 1}, 1, 1, {3e-6, 450 * GB}, {5e-6, 50 * GB}, 1, 0}},
    {"ideal: infinite bandwidth, zero latency, cost only for F/B/R (for invariants)",
     {"ideal", {"ideal", {1 * TF, 1 * TF, 1 * TF}, 1e30, 1e30, 1e30, 0, 1.0, 0, 1}, 8, 0,
      {0, 1e30}, {0, 1e30}, 8, 1}},
};
#define MK_NCLUSTERS (sizeof mk_cluster_presets / sizeof mk_cluster_presets[0])

const char *const *mk_cluster_preset_names(void)
{
    static const char *names[MK_NCLUSTERS + 1];
    for (size_t i = 0; i < MK_NCLUSTERS; i++) names[i] = mk_cluster_presets[i].c.name;
    names[MK_NCLUSTERS] = NULL;
    return names;
}

const char *mk_cluster_preset_about(const char *name)
{
    for (size_t i = 0; i < MK_NCLUSTERS; i++)
        if (!strcmp(name, mk_cluster_presets[i].c.name)) return mk_cluster_presets[i].about;
    return "";
}

int mk_cluster_get(const char *name, mk_cluster_t *c)
{
    for (size_t i = 0; i < MK_NCLUSTERS; i++)
        if (!strcmp(name, mk_cluster_presets[i].c.name)) {
            *c = mk_cluster_presets[i].c;
            return 0;
        }
    return mk_error_set("unknown cluster '%s' (see 'merak models'; or give a path to a cluster .json)", name);
}

mk_dtype_t mk_cluster_default_dtype(const mk_cluster_t *c)
{
    return c->dev.has_bf16 ? MK_DTYPE_BF16 : MK_DTYPE_FP16;
}
