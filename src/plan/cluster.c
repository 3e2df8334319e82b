/* Cluster presets.  Compute peaks are vendors' public numbers; link and
 * memory bandwidths are what software measurably gets (below):
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
 *    DGX H200: 8x H200 on NVLink 4 / NVSwitch, 900 GB/s bidirectional per
 *    GPU as the H100's; 8x ConnectX-7 400 Gb/s NDR (DGX H200 datasheet).
 *  - FP8 (E4M3/E5M2) dense tensor-core peaks: H100 SXM and H200 SXM 1979
 *    TFLOP/s (datasheets: 3958 "with sparsity", halved); A100 and RTX 3090
 *    have no FP8 tensor cores (0: fp8 plans are refused there).
 *  - A100 40GB SXM (the first DGX A100, 320 GB): HBM2 1555 GB/s, 40 GB (A100
 *    datasheet), otherwise as the 80 GB part and dgx-a100.
 *  - B200 (DGX B200 datasheet and the HGX B200 specification table, 8
 *    GPUs: FP8 72 PFLOP/s, FP16/BF16 36, TF32 18, all "with sparsity", FP32
 *    600 TFLOP/s; 1440 GB of HBM3e at 64 TB/s; NVLink 5 14.4 TB/s): per
 *    GPU 4.5 PFLOP/s dense FP8, 2.25 dense BF16, 1.125 dense TF32, 180 GB
 *    at 8 TB/s, NVLink 5 1.8 TB/s bidirectional = 900 GB/s each way;
 *    8x ConnectX-7 400 Gb/s (50 GB/s each).  Its elementwise rate is not
 *    published: twice its FP32 rate (75 TFLOP/s), the ratio of the H100's
 *    134 FP16 non-tensor to its 66.9 FP32.  Not measured here either:
 *    gemm_eff/gemm_half_dim, host_op_s and launch_s are the H100's, and
 *    flash_attn_flops the H100's share (35%) of the BF16 peak.
 *  - GB200 NVL72 (NVIDIA's GB200 NVL72 specification, rack totals for 72
 *    GPUs: FP16/BF16 360 PFLOP/s and FP8 720 "with sparsity", 13.4 TB of
 *    HBM3e at 576 TB/s, NVLink 130 TB/s; the per-GPU table of the GB200's
 *    B200 at 1,200 W, glennklockwood.com/garden/processors/B200: 2,500
 *    TFLOP/s dense BF16, 5,000 FP8, 1,250 TF32, 90 FP32): per GPU 2.5
 *    PFLOP/s dense BF16, 5 FP8, 186 GB at 8 TB/s, NVLink 5 1.8 TB/s
 *    bidirectional = 900 GB/s each way, and all 72 GPUs of a rack in one
 *    NVLink domain (a "node" here); between racks one 400 Gb/s ConnectX-7
 *    per GPU (the DGX GB200 rack's 72 single-port OSFP NICs, 50 GB/s
 *    each).  Not measured here: sustained NVLink, HBM, elementwise rate,
 *    gemm_eff, host_op_s and flash_attn_flops as the B200's rules (the
 *    H100's NVLink share, 90% of HBM, twice FP32, 35% of the BF16 peak).
 *  - Sustained, not line-rate, bandwidths (the presets use these):
 *    NVLink: NCCL's ring moves 128-byte payloads from the SMs, so an A100's
 *    12 NVLinks (25 GB/s each way) carry ~20 GB/s each, 240 GB/s, and
 *    "other bottlenecks limit it to ~230 GB/s" bus bandwidth (NCCL
 *    maintainer, github.com/NVIDIA/nccl-tests/issues/149); measured
 *    232.5 GB/s all_reduce_perf busbw on 8 A100s (nccl-tests/issues/175).
 *    H100: "with the protocol overhead (~20%) NCCL can get an effective
 *    NVLink bandwidth of 370 GB/s" of the 450 line rate (NCCL maintainer,
 *    nccl-tests/issues/212; NVLink SHARP all-reduce is not modelled).
 *    InfiniBand: "on an Nvidia DGX-A100 system we have 8x200Gbit/s IB
 *    cards and we measure 192GB/s AllReduce BusBW" = 24 GB/s per NIC
 *    (NVIDIA, github.com/NVIDIA/nccl/issues/812); DGX H100's NDR keeps
 *    its 50 GB/s line rate (no measurement at hand), as do DGX H200's and
 *    DGX B200's.  B200's NVLink 5: no measured NCCL bus bandwidth at hand;
 *    the H100's share, 370/450 of the line rate = 740 GB/s.
 *    HBM: A100-80GB reaches 1.80 TB/s (88% of 2039; Nsight Compute agrees)
 *    and "the maximum memory bandwidth achieved by any kernel was around
 *    90%" (forums.developer.nvidia.com/t/trouble-to-reach-peak-bandwidth-
 *    of-a100/339083, citing a GTC 2025 talk); H100, H200, A100-40GB and
 *    B200 get the same 90% of their datasheet figure (3.0, 4.3, 1.4 and
 *    7.2 TB/s; no measurement of the last three at hand).
 *  - Tile and wave quantization (sms with gemm_tile_m x gemm_tile_n; cost.c) is
 *    not on in the presets (they give sms alone, SMS_* below): on the published replay (experiments/published)
 *    with 256x128 and 128x128 tiles it moved the multi-node MAPE from
 *    14.5% to 12.9% but the single-node one from 7.6% to 8.7% (measured
 *    with the line-rate NVLink/IB/HBM figures of before; 256x128
 *    alone: 11.4% and 11.4%; a fixed tile set overstates the loss of
 *    mid-sized GEMMs, for which cuBLAS picks among more tiles and
 *    split-K), so it is a cluster-file option until the library's tile
 *    choice is modelled.  Values for a cluster file:
 *  - SMs: A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper,
 *    "108 SMs" in the A100 product), H100 SXM5 132 (NVIDIA H100 Tensor Core
 *    GPU Architecture whitepaper), H200 SXM 132 (the same GH100 die
 *    configuration with HBM3e), RTX 3090 82 (GA102 whitepaper, appendix A).
 *  - GEMM tile 256 x 128: the largest of cuBLAS's typical tensor-core tiles
 *    (256x128, 128x256, 128x128, ...), the one large 16-bit GEMMs run on;
 *    its wave-quantization example is A100's 108 SMs (NVIDIA, "Matrix
 *    Multiplication Background User's Guide", DU-09799-001, sections 2.3
 *    and 3.2).  Hopper's CUTLASS/cuBLAS kernels use 128x256 for bf16
 *    (the same area; either orientation is taken).
 * Latencies (alpha) are typical measured figures, not datasheet numbers:
 * ~3 us NVLink, ~10 us PCIe through host memory, ~5 us InfiniBand.
 * gemm_eff/gemm_half_dim shape the efficiency curve the cost model uses,
 * eff(d) = gemm_eff * d / (d + gemm_half_dim) with d a GEMM's smallest
 * dimension; they are calibrated by `merak profile`, here set to common
 * observations: large GEMMs reach ~70-80% of peak, and GEMMs a few hundred
 * rows tall about half of that (half_dim 128 on the RTX 3090, 256 on the
 * A100, 384 on the H100/H200, whose larger tiles need bigger GEMMs).  The
 * curve is the 16-bit GEMMs'; sim/cost.c scales gemm_half_dim by a
 * GEMM's rate over the 16-bit rate (FP8: x2, TF32: x1/2). */
#include "merak/jsonio.h"
#include "merak/cluster.h"
#include "merak/fileio.h"
#include "merak/readfile.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define TF 1e12
#define GB 1e9
/* Host time to issue one kernel (host_op_s), a property of the host CPU
 * and of an eager PyTorch framework (Megatron-LM / Megatron-DeepSpeed), not
 * of the GPU.  Calibrated on one published floor, not measured on a host:
 * vTrain's single-node DGX A100 runs (experiments/published/
 * single-node.json, Megatron-DeepSpeed) take ~3.1 ms per transformer block
 * per micro-batch (forward + recomputed forward + backward) whatever the
 * micro-batch while the device's work is shorter; the block launches 71
 * kernels there (14 forward, 14 recomputed, 43 backward: sim/cost.c
 * op_kernels counts them in Megatron's code) -> ~44 us a kernel, the eager
 * dispatch + autograd + launch range of a PyTorch op with DeepSpeed's
 * hooks (an earlier count per graph op, 48 of them, gave 65 us from the
 * same floor).  The H100/H200 presets use the same figure (no H100
 * measurement here); the RTX 3090 servers' host is unknown (0, no host
 * bound). */
#define HOST_OP_S 44e-6
/* FlashAttention-2's throughput, forward and backward (plans with
 * use_flash_attn): A100, the low end of "50-73% of the theoretical maximum
 * FLOPs/s" (Dao, arXiv:2307.08691, abstract; the top of the range is long
 * sequences at head dim 128, and the backward runs below the forward) =
 * 156 TFLOP/s; H100/H200, "FlashAttention-2 achieves only 35% utilization
 * on the H100" (Shah et al., FlashAttention-3, arXiv:2407.08608,
 * abstract) = 346 TFLOP/s (cuDNN's and FlashAttention-3's faster kernels
 * are not modelled).  RTX 3090: no published figure at hand (0).  These
 * rates count a causal kernel's FLOPs as the benchmarks do, half of the
 * full core's (sim/cost.c charges a fused causal core that share). */
#define FLASH_A100 (0.50 * 312 * TF)
#define FLASH_H100 (0.35 * 989 * TF)
#define FLASH_B200 (0.35 * 2250 * TF)
#define FLASH_GB200 (0.35 * 2500 * TF)
/* FlashAttention-2's backward on the H100 runs below its forward: 322
 * against 370 TFLOP/s at head dim 128 and 16K tokens (Shah et al.,
 * FlashAttention-3, arXiv:2407.08608, Figures 5 and 6, each counting its
 * direction's FLOPs as the benchmark does; cuDNN's kernel there: 516
 * against 595, the same ratio within 1%), so the presets whose forward
 * rate is the H100's share give the backward that ratio of it (the B200
 * and GB200 rules: the H100's).  The A100's figure is already the low
 * end of FlashAttention-2's range, its backward included: one rate. */
#define FLASH_BWD_OF_FWD (322.0 / 370.0)
/* Host memory and each GPU's link to it, for optimizer CPU offload (data
 * sheets; the links at 90% of their line rate, the convention above for
 * unmeasured bandwidths):
 *  - PCIe 4.0 x16 (A100 SXM in DGX A100): 31.5 GB/s a direction; 5.0 x16
 *    (H100, H200, B200 in their DGX): 63 GB/s (PCI-SIG line rates).
 *  - DGX A100: 2x AMD EPYC 7742, 204.8 GB/s each (AMD's specification: 8
 *    channels of DDR4-3200); 2 TB in the 640 GB system, 1 TB in the 320 GB
 *    one (NVIDIA DGX A100 data sheet).
 *  - DGX H100 / H200: 2x Intel Xeon Platinum 8480C, 8 channels of
 *    DDR5-4800 each (307.2 GB/s); 2 TB (DGX H100 and DGX H200 data sheets).
 *  - DGX B200: 2x Xeon Platinum 8570, 8 channels of DDR5-5600 each
 *    (358.4 GB/s); 2 TB, configurable to 4 (DGX B200 data sheet).
 *  - GB200 NVL72: 36 Grace CPUs with 17 TB of LPDDR5X at up to 18.4 TB/s in
 *    all (GB200 NVL72 specification); each Grace reaches its two B200s over
 *    NVLink-C2C, 900 GB/s both directions together, taken here as a
 *    quarter, 225 GB/s, per GPU and direction. */
#define HOST_PCIE4 {0.9 * 31.5 * GB, 2048 * GB, 409.6 * GB}
#define HOST_PCIE4_1TB {0.9 * 31.5 * GB, 1024 * GB, 409.6 * GB}
#define HOST_H100 {0.9 * 63 * GB, 2048 * GB, 614.4 * GB}
#define HOST_B200 {0.9 * 63 * GB, 2048 * GB, 716.8 * GB}
#define HOST_GB200 {0.9 * 225 * GB, 17000 * GB, 18400 * GB}

/* The CUDA context a PyTorch process holds on each GPU before it
 * allocates a tensor: 287,047,680 bytes with lazy module loading
 * (pytorch/pytorch#86509's measurement; PyTorch sets CUDA_MODULE_LOADING=
 * LAZY since 1.13, and it is CUDA's default on Linux since 12.2), against
 * 666,632,192 eager.  Outside the caching allocator, so outside
 * torch.cuda's allocated and reserved figures, but not free for a plan. */
#define CUDA_CONTEXT 287047680.0

/* An H100 SXM held to 500 W (torchtitan's hosts): the power limit lowers
 * the SM clock, not the HBM's, so the compute rates scale and the memory
 * bandwidth stays.  Its rate at 500 W is in no data sheet: torchtitan's
 * benchmark note puts it "between SXM and NVL".  NVIDIA's data sheets give
 * the GH100's dense BF16 rate at two power limits, the SXM's 989 TFLOP/s
 * at 700 W and the H100 NVL's 835 at 400 W (1,671 "with sparsity"; both
 * parts 132 SMs), and 500 W is a third of the way from one to the other:
 * 886 TFLOP/s, 0.896 of the SXM's.  (Dynamic power ~ f V^2 with V ~ f
 * gives f ~ P^(1/3): 0.894 at 500 W, and at 400 W 0.830 against the NVL's
 * published 0.844: within 2%.) */
#define CLOCK_500W ((835.0 + (989.0 - 835.0) * (500.0 - 400.0) / (700.0 - 400.0)) / 989.0)

/* Dense FP8 tensor-core peaks (sources on top). */
#define FP8_H100 (1979 * TF)
#define FP8_B200 (4500 * TF)
#define FP8_GB200 (5000 * TF)
/* Hopper's FP8 tensor cores accumulate in a narrower register; cuBLASLt's
 * precise mode (CUBLASLT_MATMUL_DESC_FAST_ACCUM = 0) promotes the partial
 * sums to FP32 every few k-steps ("problem execution might be faster [with
 * fast accumulation] but at the cost of lower accuracy because
 * intermediate results will not periodically be promoted to a higher
 * precision", the cuBLAS documentation).  Transformer Engine runs the
 * forward GEMM fast and dgrad and wgrad precise (module/base.py:
 * _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True), as
 * torchao's float8 does.  Measured on an H100: "enabling fast accumulation
 * can lead to a 1.1x to 1.2x speedup" (pytorch/ao issue 2377, torch
 * _scaled_mm over cuBLASLt; the maintainers keep the precise backward for
 * accuracy); the range's middle, 1.15, is taken.  Blackwell has no such
 * mode ("there is no fastAccuMode for sm100", NVIDIA/TransformerEngine
 * pull request 2748's review): the B200 presets leave it off. */
#define FP8_SPLIT_ACC_HOPPER 1.15

/* Streaming multiprocessors (the share an all-to-all's kernels take from
 * compute beside them: mk_cost_a2a_sm_share; no tile is given, so GEMMs
 * are not wave-quantized, see above): A100 108 (NVIDIA A100 Tensor Core
 * GPU Architecture whitepaper), H100 SXM5 132 (NVIDIA H100 Tensor Core GPU
 * Architecture whitepaper; the H200 is the same GH100 configuration with
 * HBM3e), B200 148, 74 enabled on each of its two dies (Chips and Cheese,
 * "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025), RTX 3090 82
 * (GA102 whitepaper, appendix A). */
#define SMS_A100 108
#define SMS_H100 132
#define SMS_B200 148
#define SMS_RTX3090 82
/* SMs an NCCL collective holds while it runs (coll_sms; sim/dp_share.c):
 * one CUDA block per channel ("Increasing the number of channels also
 * increases the number of CUDA blocks NCCL uses ... it uses more CUDA
 * compute resources": NCCL user guide, NCCL_MIN_NCHANNELS).  The channel
 * counts NCCL's own log reports: 24 on an 8-GPU HGX A100 ("Channel 23/24",
 * NVIDIA/nccl-tests issue 100), 16 on an 8-GPU H800 node, the H100's
 * GH100 and NVSwitch ("16 coll channels", NVIDIA/nccl issue 892); across
 * nodes NCCL raises an SM90 ring below 16 channels to twice its count
 * (src/graph/connect.cc), so 16 there too.  B200 and the RTX 3090: no log
 * at hand (0). */
#define COLL_SMS_A100 24
#define COLL_SMS_H100 16

typedef struct {
    const char *about;
    mk_cluster_t c;
} mk_cluster_preset_t;

/* Designated fields: a device field added later is 0 (off) in every
 * preset unless a preset names it. */
#define DGX_LINKS(nvlink) .gpus_per_node = 8, .intra = {3e-6, nvlink}, .nics_per_node = 8
/* The A100-80GB SXM (sources on top), in dgx-a100 and a100-800g. */
#define DEV_A100_80GB                                                                                           \
    {.name = "A100-SXM4-80GB", .matmul_flops = {156 * TF, 312 * TF, 312 * TF}, .vector_flops = 78 * TF,       \
     .mem_bw_Bps = 1800 * GB, .mem_bytes = 80 * GB, .launch_s = 4e-6, .gemm_eff = 0.80, .gemm_half_dim = 256, \
     .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_A100, .coll_sms = COLL_SMS_A100, .host_op_s = HOST_OP_S,                    \
     .flash_attn_flops = FLASH_A100}
static const mk_cluster_preset_t mk_cluster_presets[] = {
    {"8x A100-80GB SXM per node, NVSwitch, 8x200 Gb/s InfiniBand",
     {.name = "dgx-a100", .dev = DEV_A100_80GB, DGX_LINKS(230 * GB), .inter = {5e-6, 24 * GB}, .host = HOST_PCIE4}},
    /* 8x A100 SXM nodes with 800 Gb/s a node between them, half a DGX
       A100's 8x200: the cluster of vTrain's measured multi-node runs
       (Bang et al., MICRO 2024; VIA-Research/vTrain's validation configs
       give inter_node_bandwidth 800, "total bandwidth of inter-node
       communication in Gbps", src/config.py), read as four HDR 200 Gb/s
       NICs, the A100 generation's InfiniBand, at the 24 GB/s a NIC that
       nccl-tests measure on DGX A100 (above).  Inside a node as dgx-a100:
       an 8-GPU A100 SXM board is NVSwitch-connected whatever its NICs
       (the configs' intra_node_bandwidth of 150 GB/s is no NVLink 3 link
       rate: 300 GB/s a direction, 232.5 GB/s measured NCCL bus bandwidth). */
    {"8x A100-80GB SXM per node, NVSwitch, 4x200 Gb/s InfiniBand (800 Gb/s a node: vTrain's cluster)",
     {.name = "a100-800g", .dev = DEV_A100_80GB, .gpus_per_node = 8, .intra = {3e-6, 230 * GB}, .nics_per_node = 4,
      .inter = {5e-6, 24 * GB}, .host = HOST_PCIE4}},
    {"8x A100-40GB SXM per node (the first DGX A100), NVSwitch, 8x200 Gb/s InfiniBand",
     {.name = "a100-40gb",
      .dev = {.name = "A100-SXM4-40GB", .matmul_flops = {156 * TF, 312 * TF, 312 * TF}, .vector_flops = 78 * TF,
              .mem_bw_Bps = 1400 * GB, .mem_bytes = 40 * GB, .launch_s = 4e-6, .gemm_eff = 0.80,
              .gemm_half_dim = 256, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_A100, .coll_sms = COLL_SMS_A100, .host_op_s = HOST_OP_S, .flash_attn_flops = FLASH_A100},
      DGX_LINKS(230 * GB), .inter = {5e-6, 24 * GB}, .host = HOST_PCIE4_1TB}},
    {"8x H100-80GB SXM per node, NVSwitch, 8x400 Gb/s InfiniBand",
     {.name = "dgx-h100",
      .dev = {.name = "H100-SXM5-80GB", .matmul_flops = {494.7 * TF, 989 * TF, 989 * TF, FP8_H100},
              .vector_flops = 134 * TF,
              .mem_bw_Bps = 3015 * GB, .mem_bytes = 80 * GB, .launch_s = 4e-6, .gemm_eff = 0.75,
              .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_H100, .coll_sms = COLL_SMS_H100, .host_op_s = HOST_OP_S, .flash_attn_flops = FLASH_H100, .flash_attn_bwd_flops = FLASH_H100 * FLASH_BWD_OF_FWD,
              .fp8_split_acc_scale = FP8_SPLIT_ACC_HOPPER},
      DGX_LINKS(370 * GB), .inter = {5e-6, 50 * GB}, .host = HOST_H100}},
    /* The H100 of torchtitan's published benchmarks (pytorch/torchtitan,
       benchmarks/llama3_h100_202412_torchtitan.md, "Hardware"): Grand
       Teton hosts of 8 H100 SXM with 96 GB HBM2e at 2.4 TB/s peak, all
       NVLink-connected, 400 Gb/s RDMA per GPU, run at the default 500 W
       power limit.  HBM at 90% of 2.4 TB/s and NVLink and NICs as dgx-h100
       (the same rules, sources on top).  The cap slows the SM clock, so
       every compute rate of the part (tensor cores, vector units, the
       attention kernels) runs at CLOCK_500W of the 700 W SXM's: see
       there.  torchtitan's MFU figures still divide by the SXM's 989. */
    {"8x H100-96GB HBM2e SXM at 500 W per node (torchtitan's benchmarks), NVSwitch, 8x400 Gb/s RDMA",
     {.name = "h100-96gb-500w",
      .dev = {.name = "H100-SXM5-96GB-500W",
              .matmul_flops = {494.7 * TF * CLOCK_500W, 989 * TF * CLOCK_500W, 989 * TF * CLOCK_500W,
                               FP8_H100 * CLOCK_500W},
              .vector_flops = 134 * TF * CLOCK_500W,
              .mem_bw_Bps = 2160 * GB, .mem_bytes = 96 * GB, .launch_s = 4e-6, .gemm_eff = 0.75,
              .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_H100, .coll_sms = COLL_SMS_H100, .host_op_s = HOST_OP_S,
              .flash_attn_flops = FLASH_H100 * CLOCK_500W, .flash_attn_bwd_flops = FLASH_H100 * FLASH_BWD_OF_FWD * CLOCK_500W,
              .fp8_split_acc_scale = FP8_SPLIT_ACC_HOPPER},
      DGX_LINKS(370 * GB), .inter = {5e-6, 50 * GB}}},
    {"8x H200-141GB SXM per node, NVSwitch, 8x400 Gb/s InfiniBand",
     {.name = "dgx-h200",
      .dev = {.name = "H200-SXM-141GB", .matmul_flops = {494.7 * TF, 989 * TF, 989 * TF, FP8_H100},
              .vector_flops = 134 * TF, .mem_bw_Bps = 4320 * GB, .mem_bytes = 141 * GB, .launch_s = 4e-6,
              .gemm_eff = 0.75, .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_H100, .coll_sms = COLL_SMS_H100, .host_op_s = HOST_OP_S,
              .flash_attn_flops = FLASH_H100, .flash_attn_bwd_flops = FLASH_H100 * FLASH_BWD_OF_FWD, .fp8_split_acc_scale = FP8_SPLIT_ACC_HOPPER},
      DGX_LINKS(370 * GB), .inter = {5e-6, 50 * GB}, .host = HOST_H100}},
    {"8x B200-180GB per node, NVLink 5 / NVSwitch, 8x400 Gb/s InfiniBand",
     {.name = "dgx-b200",
      .dev = {.name = "B200-180GB", .matmul_flops = {1125 * TF, 2250 * TF, 2250 * TF, FP8_B200},
              .vector_flops = 150 * TF, .mem_bw_Bps = 7200 * GB, .mem_bytes = 180 * GB, .launch_s = 4e-6,
              .gemm_eff = 0.75, .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_B200, .host_op_s = HOST_OP_S,
              .flash_attn_flops = FLASH_B200, .flash_attn_bwd_flops = FLASH_B200 * FLASH_BWD_OF_FWD},
      DGX_LINKS(740 * GB), .inter = {5e-6, 50 * GB}, .host = HOST_B200}},
    {"GB200 NVL72: 72 B200 (186 GB) per NVLink 5 domain (rack), one 400 Gb/s InfiniBand NIC per GPU",
     {.name = "gb200-nvl72",
      .dev = {.name = "GB200-B200-186GB", .matmul_flops = {1250 * TF, 2500 * TF, 2500 * TF, FP8_GB200},
              .vector_flops = 180 * TF, .mem_bw_Bps = 7200 * GB, .mem_bytes = 186 * GB, .launch_s = 4e-6,
              .gemm_eff = 0.75, .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_B200, .host_op_s = HOST_OP_S,
              .flash_attn_flops = FLASH_GB200, .flash_attn_bwd_flops = FLASH_GB200 * FLASH_BWD_OF_FWD},
      .gpus_per_node = 72, .intra = {3e-6, 740 * GB}, .inter = {5e-6, 50 * GB}, .nics_per_node = 72, .host = HOST_GB200}},
    {"8x RTX 3090 per node on PCIe 4.0, one 100 Gb/s InfiniBand NIC (assumed commodity servers)",
     {.name = "rtx3090-pcie",
      .dev = {.name = "GeForce RTX 3090", .matmul_flops = {35.6 * TF, 71 * TF, 71 * TF}, .vector_flops = 35.6 * TF,
              .mem_bw_Bps = 936 * GB, .mem_bytes = 24 * GB, .launch_s = 5e-6, .gemm_eff = 0.75,
              .gemm_half_dim = 128, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_RTX3090},
      .gpus_per_node = 8, .intra = {10e-6, 25 * GB}, .inter = {5e-6, 12.5 * GB}, .nics_per_node = 1}},
    {"one H200 SXM (141 GB)",
     {.name = "h200",
      .dev = {.name = "H200-SXM-141GB", .matmul_flops = {494.7 * TF, 989 * TF, 989 * TF, FP8_H100},
              .vector_flops = 134 * TF,
              .mem_bw_Bps = 4320 * GB, .mem_bytes = 141 * GB, .launch_s = 4e-6, .gemm_eff = 0.75,
              .gemm_half_dim = 384, .has_bf16 = 1, .context_bytes = CUDA_CONTEXT, .sms = SMS_H100, .coll_sms = COLL_SMS_H100, .host_op_s = HOST_OP_S, .flash_attn_flops = FLASH_H100, .flash_attn_bwd_flops = FLASH_H100 * FLASH_BWD_OF_FWD,
              .fp8_split_acc_scale = FP8_SPLIT_ACC_HOPPER},
      .gpus_per_node = 1, .max_nodes = 1, .intra = {3e-6, 370 * GB}, .inter = {5e-6, 50 * GB}, .nics_per_node = 1}},
    {"ideal: infinite bandwidth, zero latency, cost only for F/B/R (for invariants)",
     {.name = "ideal",
      .dev = {.name = "ideal", .matmul_flops = {1 * TF, 1 * TF, 1 * TF, 1 * TF}, .vector_flops = 1e30,
              .mem_bw_Bps = 1e30, .mem_bytes = 1e30, .gemm_eff = 1.0, .has_bf16 = 1},
      .gpus_per_node = 8, .intra = {0, 1e30}, .inter = {0, 1e30}, .nics_per_node = 8, .ideal = 1}},
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
    size_t n = strlen(name);
    char found[MK_FILE_PATH_MAX];
    if (strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".json")))
        return mk_cluster_load(mk_data_path(name, found, sizeof found), c);
    for (size_t i = 0; i < MK_NCLUSTERS; i++)
        if (!strcmp(name, mk_cluster_presets[i].c.name)) {
            *c = mk_cluster_presets[i].c;
            return 0;
        }
    return mk_error_set("unknown cluster '%s' (see 'merak models'; or give a path to a cluster .json)", name);
}

int mk_cluster_check_dtype(const mk_cluster_t *c, mk_dtype_t dt)
{
    if (dt == MK_DTYPE_FP8 && !(c->dev.matmul_flops[MK_DTYPE_FP8] > 0))
        return mk_error_set("dtype fp8 needs FP8 tensor cores, which %s (cluster '%s') has not (a cluster file "
                            "gives them as matmul_flops \"fp8\")", c->dev.name, c->name);
    return 0;
}

mk_dtype_t mk_cluster_default_dtype(const mk_cluster_t *c)
{
    return c->dev.has_bf16 ? MK_DTYPE_BF16 : MK_DTYPE_FP16;
}

/* ---- cluster JSON ----
 * {"name": S, "gpus_per_node": I, "max_nodes": I, "nics_per_node": I,
 *  "ideal": B, "intra": LINK, "inter": LINK, "device": DEVICE}
 * LINK = {"alpha_s": X, "beta_Bps": X}
 * DEVICE = {"name": S, "matmul_flops": {"fp32": X, "fp16": X, "bf16": X, optional "fp8": X},
 *  "vector_flops": X, "mem_bw_Bps": X, "mem_bytes": X, "launch_s": X,
 *  "gemm_eff": X, "gemm_half_dim": X, "has_bf16": B, optional "vector_bwd_flops", "attention_flops",
 *  "attention_bwd_flops", "gemm_fwd_scale", "host_op_s": X, "sms": I, "gemm_tile_m": X,
 *  "gemm_tile_n": X, "flash_attn_flops": X, "flash_attn_bwd_flops": X, "context_bytes": X,
 *  "fp8_split_acc_scale": X, "coll_sms": I (below sms)} */

static int get_str(json_t *o, const char *what, const char *key, char *buf, size_t n)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || !*json_string_value(v))
        return mk_error_set("%s: field '%s' must be a non-empty string", what, key);
    mk_strlcpy(buf, json_string_value(v), n);
    return 0;
}

static int get_obj(json_t *o, const char *what, const char *key, json_t **out)
{
    *out = json_object_get(o, key);
    if (!json_is_object(*out)) return mk_error_set("%s: field '%s' must be an object", what, key);
    return 0;
}

static int link_from(json_t *o, const char *what, const char *key, mk_link_t *l)
{
    static const char *const keys[] = {"alpha_s", "beta_Bps", NULL};
    json_t *j;
    if (get_obj(o, what, key, &j) < 0 || mk_json_only_keys(j, what, keys) < 0) return -1;
    if (mk_json_num(j, what, "alpha_s", 0, &l->alpha_s) < 0 || mk_json_num(j, what, "beta_Bps", 1, &l->beta_Bps) < 0)
        return -1;
    return 0;
}

double mk_cluster_usable_bytes(const mk_cluster_t *c) { return c->dev.mem_bytes - c->dev.context_bytes; }

int mk_cluster_validate(const mk_cluster_t *c, const char *what)
{
    const mk_device_t *d = &c->dev;
    for (int i = 0; i < MK_DTYPE_FP8; i++)
        if (!(d->matmul_flops[i] > 0)) return mk_error_set("%s: matmul_flops must be > 0", what);
    /* fp8 optional (0: no FP8 tensor cores); at most 2^60 FLOP/s (1e18, far above any device) */
    if (!(d->matmul_flops[MK_DTYPE_FP8] >= 0) || d->matmul_flops[MK_DTYPE_FP8] > 0x1p60)
        return mk_error_set("%s: matmul_flops fp8 must be in [0, 2^60]", what);
    if (!(d->vector_flops > 0) || !(d->mem_bw_Bps > 0) || !(d->mem_bytes > 0))
        return mk_error_set("%s: vector_flops, mem_bw_Bps and mem_bytes must be > 0", what);
    if (!(d->gemm_eff > 0 && d->gemm_eff <= 1)) return mk_error_set("%s: gemm_eff must be in (0, 1]", what);
    if ((d->gemm_tile_m > 0 || d->gemm_tile_n > 0) && !(d->sms > 0 && d->gemm_tile_m >= 1 && d->gemm_tile_n >= 1))
        return mk_error_set("%s: a GEMM tile needs sms and both gemm_tile_m and gemm_tile_n >= 1", what);
    /* maxima: a GEMM tile is at most 2^16 per side, a host op at most a second */
    if (d->gemm_tile_m > 65536 || d->gemm_tile_n > 65536)
        return mk_error_set("%s: gemm_tile_m and gemm_tile_n must be at most 65536", what);
    if (d->host_op_s > 1) return mk_error_set("%s: host_op_s must be at most 1 (seconds)", what);
    if (d->coll_sms > 0 && !(d->sms > d->coll_sms))
        return mk_error_set("%s: coll_sms (%d) needs sms greater than it", what, d->coll_sms);
    /* a time factor: 0 (off) or in [1, 16] (no library is 16 times slower in its precise mode) */
    if (d->fp8_split_acc_scale != 0 && !(d->fp8_split_acc_scale >= 1 && d->fp8_split_acc_scale <= 16))
        return mk_error_set("%s: fp8_split_acc_scale must be 0 or in [1, 16]", what);
    /* a fused kernel on the tensor cores runs at most at their peak */
    double peak = fmax(d->matmul_flops[0], fmax(d->matmul_flops[1], d->matmul_flops[2]));
    if (d->flash_attn_flops > peak || d->flash_attn_bwd_flops > peak)
        return mk_error_set("%s: flash_attn_flops and flash_attn_bwd_flops must be at most the matmul peak (%g)",
                            what, peak);
    if (!(d->context_bytes < d->mem_bytes))
        return mk_error_set("%s: context_bytes must be less than mem_bytes", what);
    if (c->gpus_per_node < 1 || c->nics_per_node < 1 || c->max_nodes < 0)
        return mk_error_set("%s: gpus_per_node and nics_per_node must be >= 1, max_nodes >= 0", what);
    if (!(c->intra.beta_Bps > 0) || !(c->inter.beta_Bps > 0))
        return mk_error_set("%s: link bandwidths must be > 0", what);
    /* host figures: all or none; at most 10 TB/s a link, 2^60 bytes, 10^15 B/s */
    const mk_host_t *h = &c->host;
    int given = (h->link_Bps > 0) + (h->mem_bytes > 0) + (h->mem_bw_Bps > 0);
    if (given != 0 && given != 3) return mk_error_set("%s: host needs link_Bps, mem_bytes and mem_bw_Bps", what);
    if (h->link_Bps > 1e13 || h->mem_bytes > 0x1p60 || h->mem_bw_Bps > 1e15)
        return mk_error_set("%s: host link_Bps at most 1e13, mem_bytes 2^60, mem_bw_Bps 1e15", what);
    return 0;
}

/* An optional non-negative number: left as it is (0) when absent. */
static int opt_num(json_t *o, const char *what, const char *key, double *out)
{
    return json_object_get(o, key) ? mk_json_num(o, what, key, 0, out) : 0;
}

/* The optional "host" object: all three figures, each > 0. */
static int host_from(json_t *j, const char *what, mk_host_t *h)
{
    static const char *const keys[] = {"link_Bps", "mem_bytes", "mem_bw_Bps", NULL};
    json_t *o = json_object_get(j, "host");
    if (!o) return 0;
    if (!json_is_object(o)) return mk_error_set("%s: 'host' must be an object", what);
    if (mk_json_only_keys(o, what, keys) < 0 || mk_json_num(o, what, "link_Bps", 1, &h->link_Bps) < 0 ||
        mk_json_num(o, what, "mem_bytes", 1, &h->mem_bytes) < 0 || mk_json_num(o, what, "mem_bw_Bps", 1, &h->mem_bw_Bps) < 0)
        return -1;
    return 0;
}

int mk_cluster_from_json(json_t *j, const char *path, mk_cluster_t *c)
{
    static const char *const top[] = {"name", "gpus_per_node", "max_nodes", "nics_per_node", "ideal", "intra",
                                      "inter", "device", "about", "host", NULL};
    static const char *const dev[] = {"name", "matmul_flops", "vector_flops", "mem_bw_Bps", "mem_bytes",
                                      "launch_s", "gemm_eff", "gemm_half_dim", "has_bf16", "vector_bwd_flops",
                                      "attention_flops",
                                      "attention_bwd_flops", "gemm_fwd_scale", "host_op_s", "sms", "gemm_tile_m",
                                      "gemm_tile_n", "flash_attn_flops", "flash_attn_bwd_flops", "context_bytes",
                                      "fp8_split_acc_scale", "coll_sms", NULL};
    static const char *const dt[] = {"fp32", "fp16", "bf16", "fp8", NULL};
    memset(c, 0, sizeof *c);
    json_t *d, *mm;
    if (!json_is_object(j)) return mk_error_set("%s: a cluster must be a JSON object", path);
    if (mk_json_only_keys(j, path, top) < 0 || get_str(j, path, "name", c->name, sizeof c->name) < 0 ||
        mk_json_int(j, path, "gpus_per_node", 1, &c->gpus_per_node) < 0 ||
        mk_json_int(j, path, "max_nodes", 0, &c->max_nodes) < 0 ||
        mk_json_int(j, path, "nics_per_node", 1, &c->nics_per_node) < 0 || mk_json_bool(j, path, "ideal", &c->ideal) < 0 ||
        link_from(j, path, "intra", &c->intra) < 0 || link_from(j, path, "inter", &c->inter) < 0 ||
        get_obj(j, path, "device", &d) < 0 || mk_json_only_keys(d, path, dev) < 0 ||
        get_str(d, path, "name", c->dev.name, sizeof c->dev.name) < 0 || get_obj(d, path, "matmul_flops", &mm) < 0 ||
        mk_json_only_keys(mm, path, dt) < 0 || mk_json_num(mm, path, "fp32", 1, &c->dev.matmul_flops[MK_DTYPE_FP32]) < 0 ||
        mk_json_num(mm, path, "fp16", 1, &c->dev.matmul_flops[MK_DTYPE_FP16]) < 0 ||
        mk_json_num(mm, path, "bf16", 1, &c->dev.matmul_flops[MK_DTYPE_BF16]) < 0 ||
        (json_object_get(mm, "fp8") && mk_json_num(mm, path, "fp8", 1, &c->dev.matmul_flops[MK_DTYPE_FP8]) < 0) ||
        mk_json_num(d, path, "vector_flops", 1, &c->dev.vector_flops) < 0 ||
        mk_json_num(d, path, "mem_bw_Bps", 1, &c->dev.mem_bw_Bps) < 0 ||
        mk_json_num(d, path, "mem_bytes", 1, &c->dev.mem_bytes) < 0 ||
        mk_json_num(d, path, "launch_s", 0, &c->dev.launch_s) < 0 || mk_json_num(d, path, "gemm_eff", 0, &c->dev.gemm_eff) < 0 ||
        mk_json_num(d, path, "gemm_half_dim", 0, &c->dev.gemm_half_dim) < 0 ||
        mk_json_bool(d, path, "has_bf16", &c->dev.has_bf16) < 0 ||
        opt_num(d, path, "vector_bwd_flops", &c->dev.vector_bwd_flops) < 0 ||
        opt_num(d, path, "attention_flops", &c->dev.attention_flops) < 0 ||
        opt_num(d, path, "attention_bwd_flops", &c->dev.attention_bwd_flops) < 0 ||
        opt_num(d, path, "gemm_fwd_scale", &c->dev.gemm_fwd_scale) < 0 ||
        opt_num(d, path, "host_op_s", &c->dev.host_op_s) < 0 ||
        (json_object_get(d, "sms") && mk_json_int(d, path, "sms", 0, &c->dev.sms) < 0) ||
        (json_object_get(d, "coll_sms") && mk_json_int(d, path, "coll_sms", 0, &c->dev.coll_sms) < 0) ||
        opt_num(d, path, "gemm_tile_m", &c->dev.gemm_tile_m) < 0 ||
        opt_num(d, path, "gemm_tile_n", &c->dev.gemm_tile_n) < 0 ||
        opt_num(d, path, "flash_attn_flops", &c->dev.flash_attn_flops) < 0 ||
        opt_num(d, path, "flash_attn_bwd_flops", &c->dev.flash_attn_bwd_flops) < 0 ||
        opt_num(d, path, "context_bytes", &c->dev.context_bytes) < 0 ||
        opt_num(d, path, "fp8_split_acc_scale", &c->dev.fp8_split_acc_scale) < 0 || host_from(j, path, &c->host) < 0 ||
        mk_cluster_validate(c, path) < 0)
        return -1;
    return 0;
}

int mk_cluster_load(const char *path, mk_cluster_t *c)
{
    json_t *j = mk_json_load(path, "cluster file");
    if (!j) return -1;
    int rc = mk_cluster_from_json(j, path, c);
    json_decref(j);
    return rc;
}

json_t *mk_cluster_to_json(const mk_cluster_t *c)
{
    const mk_device_t *d = &c->dev;
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:b, s:{s:f, s:f}, s:{s:f, s:f}, s:{s:s, s:{s:f, s:f, s:f}, "
                          "s:f, s:f, s:f, s:f, s:f, s:f, s:b}}",
                          "name", c->name, "gpus_per_node", c->gpus_per_node, "max_nodes", c->max_nodes,
                          "nics_per_node", c->nics_per_node, "ideal", c->ideal, "intra", "alpha_s",
                          c->intra.alpha_s, "beta_Bps", c->intra.beta_Bps, "inter", "alpha_s", c->inter.alpha_s,
                          "beta_Bps", c->inter.beta_Bps, "device", "name", d->name, "matmul_flops", "fp32",
                          d->matmul_flops[0], "fp16", d->matmul_flops[1], "bf16", d->matmul_flops[2],
                          "vector_flops", d->vector_flops, "mem_bw_Bps", d->mem_bw_Bps, "mem_bytes", d->mem_bytes,
                          "launch_s", d->launch_s, "gemm_eff", d->gemm_eff, "gemm_half_dim", d->gemm_half_dim,
                          "has_bf16", d->has_bf16);
    if (j && d->matmul_flops[MK_DTYPE_FP8] > 0)
        json_object_set_new(json_object_get(json_object_get(j, "device"), "matmul_flops"), "fp8",
                            json_real(d->matmul_flops[MK_DTYPE_FP8]));
    if (j && d->vector_bwd_flops > 0)
        json_object_set_new(json_object_get(j, "device"), "vector_bwd_flops", json_real(d->vector_bwd_flops));
    if (j && d->attention_flops > 0)
        json_object_set_new(json_object_get(j, "device"), "attention_flops", json_real(d->attention_flops));
    if (j && d->attention_bwd_flops > 0)
        json_object_set_new(json_object_get(j, "device"), "attention_bwd_flops", json_real(d->attention_bwd_flops));
    if (j && d->gemm_fwd_scale > 0)
        json_object_set_new(json_object_get(j, "device"), "gemm_fwd_scale", json_real(d->gemm_fwd_scale));
    if (j && d->host_op_s > 0)
        json_object_set_new(json_object_get(j, "device"), "host_op_s", json_real(d->host_op_s));
    if (j && d->flash_attn_flops > 0)
        json_object_set_new(json_object_get(j, "device"), "flash_attn_flops", json_real(d->flash_attn_flops));
    if (j && d->flash_attn_bwd_flops > 0)
        json_object_set_new(json_object_get(j, "device"), "flash_attn_bwd_flops", json_real(d->flash_attn_bwd_flops));
    if (j && d->context_bytes > 0)
        json_object_set_new(json_object_get(j, "device"), "context_bytes", json_real(d->context_bytes));
    if (j && d->fp8_split_acc_scale > 0)
        json_object_set_new(json_object_get(j, "device"), "fp8_split_acc_scale", json_real(d->fp8_split_acc_scale));
    if (j && c->host.link_Bps > 0)
        json_object_set_new(j, "host", json_pack("{s:f, s:f, s:f}", "link_Bps", c->host.link_Bps, "mem_bytes",
                                                 c->host.mem_bytes, "mem_bw_Bps", c->host.mem_bw_Bps));
    if (j && d->sms > 0) json_object_set_new(json_object_get(j, "device"), "sms", json_integer(d->sms));
    if (j && d->coll_sms > 0) json_object_set_new(json_object_get(j, "device"), "coll_sms", json_integer(d->coll_sms));
    if (j && d->gemm_tile_m > 0) {
        json_t *dj = json_object_get(j, "device");
        json_object_set_new(dj, "gemm_tile_m", json_real(d->gemm_tile_m));
        json_object_set_new(dj, "gemm_tile_n", json_real(d->gemm_tile_n));
    }
    return j;
}

int mk_cluster_save(const mk_cluster_t *c, const char *path)
{
    json_t *j = mk_cluster_to_json(c);
    if (!j) return mk_error_set("cannot encode the cluster as JSON");
    int rc = mk_json_save(j, path, "cluster file");
    json_decref(j);
    return rc;
}
