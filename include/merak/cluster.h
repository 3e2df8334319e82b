/* Clusters: a device profile, how many devices share a node, and the links
 * between them.  Presets carry public peak figures (sources in cluster.c);
 * `merak profile` writes the same fields as JSON (traces/clusters/). */
#ifndef MERAK_CLUSTER_H
#define MERAK_CLUSTER_H

#include "merak/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mk_link {
    double alpha_s;      /* latency per message, seconds */
    double beta_Bps;     /* bandwidth, bytes per second, one direction */
} mk_link_t;

typedef struct mk_device {
    char name[64];
    double matmul_flops[MK_DTYPE_COUNT]; /* peak dense matmul FLOP/s by mk_dtype_t (fp32 entry: TF32
                                where used); fp8: 0 when the device has no FP8 tensor cores */
    double vector_flops;     /* peak elementwise FLOP/s */
    double mem_bw_Bps;       /* device memory bandwidth */
    double mem_bytes;        /* device memory capacity */
    double launch_s;         /* per-kernel launch overhead */
    double gemm_eff;         /* achievable share of peak for large GEMMs */
    double gemm_half_dim;    /* GEMM dimension at which efficiency is half of gemm_eff */
    int has_bf16;
    double attention_flops;  /* optional: FLOP/s of the attention core's forward where it is
                                not a GEMM (the CPU backend's loops; `merak profile`
                                measures it); 0: the GEMM curve at eff(head_dim) */
    double attention_bwd_flops; /* optional: the same for its backward; 0: attention_flops */
    double gemm_fwd_scale;   /* optional: forward GEMMs take this times the curve's time
                                (OpenBLAS runs y = x W^T slower than the backward's
                                GEMMs); 0: 1 */
    double host_op_s;        /* optional: host (CPU) time the training framework takes to
                                issue one kernel (Python, dispatcher, autograd, launch); a
                                graph op is several kernels (sim/cost.c op_kernels), and
                                the device runs ahead of the host only when its work is
                                longer, so an op takes at least its kernels' host time; 0: no
                                host bound */
    int sms;                 /* optional: streaming multiprocessors; with the tile below, a
                                GEMM's output tiles run in waves of sms (tile and wave
                                quantization, sim/cost.c); 0: no quantization */
    int coll_sms;            /* optional: SMs a collective's kernels hold while it runs
                                (NCCL: one CUDA block per channel); compute beside an
                                overlapped DP collective runs on the rest (sim/dp_share.c);
                                0: none held; less than sms */
    double gemm_tile_m, gemm_tile_n; /* optional: the library's output tile for large GEMMs,
                                rows x columns (either orientation is used) */
    double vector_bwd_flops; /* optional: the same in a backward, where its loops differ from
                                the forward's (`merak profile` measures both inside a training
                                step on the CPU); 0: vector_flops */

    double context_bytes;    /* optional: device memory the runtime holds before the framework
                                allocates anything (the CUDA context); plans get mem_bytes less
                                this (mk_cluster_usable_bytes); 0: none */
    double fp8_split_acc_scale; /* optional: an FP8 GEMM that promotes its partial sums to FP32
                                (cuBLASLt's split accumulator, FAST_ACCUM off; Transformer
                                Engine runs dgrad and wgrad so) takes this times the curve's
                                time (Hopper: sim/cost.c); 0: 1 */
    double flash_attn_flops; /* optional: FLOP/s of the fused FlashAttention kernel, forward
                                and backward (plans with use_flash_attn; at most the matmul
                                peak); 0: such plans run the core at the GEMM curve */
    double flash_attn_bwd_flops; /* optional: that kernel's backward FLOP/s where it differs
                                (its FLOPs counted as its benchmarks count them, 2.5x the
                                forward's); 0: flash_attn_flops */
} mk_device_t;

/* The host side of a node, for optimizer-state CPU offload (0: not given,
 * and plans that offload are refused on the cluster). */
typedef struct mk_host {
    double link_Bps;         /* one device's link to host memory, one direction (PCIe, NVLink-C2C) */
    double mem_bytes;        /* the node's host memory */
    double mem_bw_Bps;       /* the node's host memory bandwidth (all its CPU sockets) */
} mk_host_t;

typedef struct mk_cluster {
    char name[64];
    mk_device_t dev;
    int gpus_per_node;
    int max_nodes;           /* 0: as many as asked */
    mk_link_t intra;         /* between two devices of a node (per device) */
    mk_link_t inter;         /* one NIC */
    int nics_per_node;
    int ideal;               /* zero-cost communication and non-F/B/R work */
    mk_host_t host;          /* optional ("host" in a cluster file) */
} mk_cluster_t;

/* Fill *c from a preset name or a cluster JSON path (a name ending in
 * ".json" or containing '/').  Returns 0 or -1. */
MK_API int mk_cluster_get(const char *name_or_path, mk_cluster_t *c);
/* Cluster JSON (schema: traces/README.md; every field required, unknown
 * fields rejected, sizes positive).  load/save return 0 or -1; save
 * writes atomically (temporary file + rename). */
MK_API int mk_cluster_load(const char *path, mk_cluster_t *c);
MK_API int mk_cluster_save(const mk_cluster_t *c, const char *path);
/* Validate the fields of a cluster (what the JSON loader checks). */
MK_API int mk_cluster_validate(const mk_cluster_t *c, const char *what);
/* The device memory a plan may use: mem_bytes less the runtime's context. */
MK_API double mk_cluster_usable_bytes(const mk_cluster_t *c);
MK_API const char *const *mk_cluster_preset_names(void);
MK_API const char *mk_cluster_preset_about(const char *name);
/* A plan of dtype dt can run on the cluster's device: fp8 needs its FP8
 * peak (matmul_flops fp8).  Returns 0 or -1. */
MK_API int mk_cluster_check_dtype(const mk_cluster_t *c, mk_dtype_t dt);
/* The cluster's default 16-bit type: bf16 where the device has it. */
MK_API mk_dtype_t mk_cluster_default_dtype(const mk_cluster_t *c);

#ifdef __cplusplus
}
#endif
#endif
