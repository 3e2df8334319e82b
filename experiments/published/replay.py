#!/usr/bin/env python3
"""Replay published measured training runs with `merak sim` (issue 15).

usage: replay.py [--merak PATH] [--batch PATH|none] [--out DIR] [--jobs N] [--subset]
                 [--record FILE] [--check FILE] [--no-plot] [FILE.json ...]

Every row of multi-node.json and single-node.json (README.md here) that
`merak sim` can express is simulated by one rule, the same for every
source (it is also how the simulator is judged on runs not in this folder):

  cluster     the preset of the GPU type: A100 -> dgx-a100, H100 -> dgx-h100,
              H200 -> dgx-h200, B200 -> dgx-b200, but where the source
              states hardware a preset describes: the 96 GB HBM2e H100 at
              500 W (torchtitan's) -> h100-96gb-500w, A100 nodes with
              800 Gb/s a node between them (vTrain's validation configs:
              inter_node_bandwidth 800) -> a100-800g (nothing fitted: where
              a row's hardware differs from its preset and the source does
              not say how, that is an error source)
  model       the row's shape on the preset of its family: GPT (learned
              positions, LayerNorm, GELU) or Llama (RoPE, RMSNorm, SwiGLU,
              grouped-query attention where kv_heads < heads); with model
              fields experts, topk, moe_ffn (and shared_ffn) an MoE model
              (Megatron-Core's --num-experts, --moe-router-topk,
              --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size)
              and the row's ep (--expert-model-parallel-size) as --ep (its
              EP groups folding TP ranks in, expert tensor parallelism 1),
              a dispatcher "deepep" as --moe-enable-deepep, ep_a2a_overlap
              (the Model Zoo's A2A_OVERLAP) as
              --overlap-moe-expert-parallel-comm; head_dim apart
              from hidden / heads as --kv-channels, qk_norm as
              --qk-layernorm, untied as --untie-embeddings-and-output-weights
  layout      the row's dp, pp, tp and cp (context parallelism: each
              sequence over cp ranks in 2cp chunks, a K/V ring)
  schedule    interleaved with --vpp V when vpp > 1, else 1f1b
  recompute   the row's; unknown: full for runs before 2023, none or
              selective (the faster that fits) for later Megatron-Core runs
  seq. par.   the row's; unknown: on only for Megatron-Core runs from 2023
  optimizer   distributed optimizer / ZeRO-1 -> --zero 1, ZeRO-2 -> --zero 2,
              ZeRO-3 / FSDP -> --zero 3 (over the whole DP group); unknown:
              NeMo's default, its distributed optimizer (NeMo's GPT configs
              and NeMo 2.0's recipes: distributed_fused_adam /
              use_distributed_optimizer), else none
  dtype       fp16 / bf16 / fp32 / fp8 (Transformer Engine's recipe) when
              the row names one, else the software's 16-bit default of its
              time (A100: fp16 and bf16 have one peak, but a bf16 plan's
              gradients are fp32, Megatron-LM's rule): bf16 for
              Megatron-Core and torchtitan, fp16 for Megatron-LM before
              Megatron-Core (SC21, the 2021 README) and Megatron-DeepSpeed
              (vTrain)
  gradients   the dtype's (merak's rule, Megatron-LM's: fp32 for bf16 and
              fp8, fp16 for fp16) but where the software's recipe says
              otherwise: NeMo 24.x's performance recipes reduce them in
              bf16 (optim.grad_sync_dtype=bf16: --grad-reduce-dtype bf16)
  micro-batch the row's; unknown: searched over 1, 2, 4, 8, keeping the
              fastest plan that fits (the published runs were tuned)
  vocab       the row's; unknown (vTrain): 50257, the GPT-2 tokenizer's
              and vTrain's config default (not a measured-run fact)
  p2p         scatter-gathered over TP (--scatter-gather-tensors-in-
              pipeline) for the software that does it without sequence
              parallelism: Megatron-LM from February 2021 to March 2023
              (SC21) and DeepSpeed's pipeline engine (vTrain, MT-NLG)
  DP overlap  the row's software: Megatron-Core overlaps the gradient
              all-reduce with the backward (--overlap-grad-reduce, the
              merak default); Megatron-LM before Megatron-Core (its local
              DDP, SC21 and the 2021 README) and Megatron-DeepSpeed (vTrain)
              all-reduce after the backward: --no-overlap-grad-reduce;
              DeepSpeed's ZeRO-3 before 0.6.0 (rows before 2022) gathered
              each parameter after synchronizing the device, so no gather
              ran behind compute: --no-zero3-prefetch; and before 0.5.7
              (the same rows) by a collective of its own per parameter
              tensor, through torch.distributed's list form:
              --zero3-per-param-collectives
  param gather  --overlap-param-gather (ZeRO-1's weight all-gather behind
              the next step's forward) where the source's configuration sets
              it (row field overlap_param_gather: the Megatron-LM README's
              H100 weak scaling, the MoE Model Zoo's benchmarking configs);
              Megatron-Core's default is off
  TP overlap  Megatron-Core runs from 2023 with sequence parallelism and
              tp > 1: Transformer Engine's TP communication overlap
              (--tp-comm-overlap), as their published configurations set it
              (the Megatron-LM README's H100 runs, NeMo's performance
              scripts); a row field tp_comm_overlap, when a source gives it,
              wins
  loss        Megatron's vocab-parallel cross entropy (its unfused
              kernels, Megatron-Core's default), torchtitan's below, or the
              row field cross_entropy where the source's configuration
              names a fused one (fused: --cross-entropy-loss-fusion;
              fused-te: with --cross-entropy-fusion-impl te)
  attention   the row's software, always explicit (--attention-backend):
              Megatron-Core runs from 2023 and torchtitan (SDPA) use flash
              attention (flash; a row field flash_attn, when a
              source gives it, wins); Megatron-LM 2021 (SC21, the README)
              and Megatron-DeepSpeed (vTrain) the materialised core
              (baddbmm, fused softmax, dropout, bmm)
  torchtitan  FSDP2 overlaps its gathers and reductions (DP overlap on),
              the loss is F.cross_entropy on fp32 logits (--cross-entropy
              torch), "selective" is its op-level SAC (--recompute
              selective-op), its pipeline schedules by name; without
              torch.compile its element-wise ops run eager (--elementwise
              eager: RMSNorm, RoPE and SwiGLU a kernel per PyTorch op), with
              it fused (as Megatron's kernels); its context parallelism
              all-gathers K/V (torch's default rotate method, which
              torchtitan keeps: --cp-comm-type allgather); torchao's Float8
              (its Float8Linear, tensorwise scaling, no FP8 weight copies
              kept) as --dtype fp8 --fp8-recipe torchao; an interleaved row
              without its chunks per stage (vpp) is not expressible

A row published as TFLOP/s per GPU becomes an iteration time through the
model's own FLOP count (`merak model --json`): the sources that count the
recomputed forward (SC21's equation 3, and the Megatron-LM README table by
the same authors and formula) use flops_per_iteration_recompute, others
flops_per_iteration:  t = FLOPs / (TFLOP/s * 1e12 * GPUs).

Writes into --out: replay.csv (every expressed row: predicted, measured,
error), unsupported.csv (every other row, with the missing feature named),
summary.md and summary.json (per source: MAPE, median and worst error,
Spearman rank correlation of each sweep), scatter.png (needs matplotlib).
--record FILE writes the figures a regression check compares against;
--check FILE replays the fixed subset and fails (exit 1) when its MAPE is
more than one point above the recorded one.
"""
import argparse
import concurrent.futures
import csv
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = [os.path.join(HERE, f) for f in ("multi-node.json", "single-node.json", "long-context.json", "torchtitan.json",
                                           "nemo-summary.json", "mt-nlg.json", "moe-modelzoo.json",
                                           "megatron-h100.json")]
MBS_SEARCH = (1, 2, 4, 8)
UNKNOWN_VOCAB = 50257
# The regression subset (seconds): rows of every source the simulator
# expresses, spread over layouts (file stem, row index).
SUBSET = [("multi-node", i) for i in (0, 3, 6, 13, 22, 32, 39, 47, 53, 58, 62, 66, 70)] + \
         [("single-node", i) for i in range(0, 1440, 90)] + [("long-context", i) for i in (0, 4, 8)] + \
         [("torchtitan", i) for i in (0, 7, 10)] + [("nemo-summary", i) for i in (0, 6)] + [("mt-nlg", 0)] + \
         [("moe-modelzoo", 3)] + [("megatron-h100", i) for i in (0, 4, 8)]
CHECK_SLACK = 1.0   # percentage points


def source_label(row):
    s, t = row["source"], row["table"]
    if "Narayanan" in s:
        return "SC21 " + t.split(" (")[0] + (" PTD-P" if "PTD-P" in t else " ZeRO-3" if "ZeRO" in t else "")
    if "Megatron-LM README" in s and "Weak Scaling" in s:
        return "Megatron-Core r0.8.0 H100 weak scaling"
    if "Megatron-LM README" in s:
        return "Megatron-LM README (Jan 2021)"
    if "vTrain" in s:
        return "vTrain " + ("multi-node" if "multi" in t else "single-node")
    if "torchtitan" in s and "H200" in (row.get("gpu_type") or ""):
        return "torchtitan on H200 (FSDP2, Float8)"
    if "torchtitan" in s:
        return "torchtitan (FSDP2, Float8)" if row.get("float8") else "torchtitan (FSDP2, bf16)"
    if "NeMo" in s and "Performance Benchmarks" in s:
        return "NeMo 24.07 H100 FP8"
    if "Megatron-Turing NLG" in s:
        return "MT-NLG 530B (Megatron-DeepSpeed)"
    if "Megatron MoE Model Zoo" in s:
        return "Megatron MoE Model Zoo (Qwen3-235B, H100)"
    if "NeMo" in s and "Long Sequence" in s:
        return "NeMo long sequence " + t.split(" - ")[-1].split(",")[0]
    return s[:40]


def counts_recompute_flops(row):
    """SC21 eq. 3 (and the README table by the same authors) count the
    recomputed forward in the published TFLOP/s."""
    return "Narayanan" in row["source"] or "cases_jan2021" in row["source"]


def run_year(row):
    m = re.search(r"arXiv:(\d\d)(\d\d)", row["source"])
    if m:
        return 2000 + int(m.group(1))
    m = re.search(r"(20\d\d)", row["source"])
    return int(m.group(1)) if m else 0


def torchtitan(row):
    return "torchtitan" in row["source"]


def megatron_core(row):
    text = (row["source"] + " " + row.get("notes", "")).lower()
    return "megatron-core" in text or "mcore" in text


def overlap_flags(row):
    """The software's DP gradient reduction: after the backward
    (--no-overlap-grad-reduce) unless the row ran Megatron-Core or says it
    overlapped (a row field overlap_grad_reduce, when a source gives it)."""
    on = row.get("overlap_grad_reduce")
    if on is None:
        on = megatron_core(row) or torchtitan(row)
    return [] if on else ["--no-overlap-grad-reduce"]


def zero3_prefetch_flags(row):
    """DeepSpeed's ZeRO-3 before 0.6.0 (January 2022) called
    torch.cuda.synchronize() before every parameter's all-gather, so its
    prefetch never ran behind compute ("the async version is not async at
    all", DeepSpeed PR #1188; PR #1453, in 0.6.0, brought the prefetch):
    --no-zero3-prefetch for DeepSpeed ZeRO-3 rows published before 2022.
    Before 0.5.7 (November 2021) it also gathered each parameter tensor by
    an all_gather of its own into a list of the group's tensors, and
    reduce-scattered each gradient from one (partition_parameters.py
    _allgather_param, _reduce_scatter_gradient; 0.5.7's coalesced gathers
    use _all_gather_base): --zero3-per-param-collectives for the same rows
    (the set has none from December 2021).  FSDP and later DeepSpeed
    prefetch and coalesce (the defaults)."""
    d = str(row.get("distributed_optimizer") or "").lower()
    old = "zero-3" in d and "deepspeed" in d and 0 < run_year(row) < 2022
    return ["--no-zero3-prefetch", "--zero3-per-param-collectives"] if old else []


def reshard_flags(row):
    """torchtitan's FSDP2 under its pipeline schedules keeps each stage's
    weights gathered for the whole step (reshard_after_forward False "to
    avoid per-microbatch all-gathers", parallelize_llama.py; the memory
    replay's rule too, experiments/memory/published.json): --fsdp-reshard-
    after-forward never on its pp > 1 rows."""
    return ["--fsdp-reshard-after-forward", "never"] if torchtitan(row) and (row.get("pp") or 1) > 1 else []


def param_gather_flags(row):
    """--overlap-param-gather where the source's configuration sets it (row
    field overlap_param_gather) on a distributed-optimizer (ZeRO-1) row:
    Megatron-Core's default is off."""
    on = row.get("overlap_param_gather") and optimizer_flags(row) == ["--zero", "1"]
    return ["--overlap-param-gather"] if on else []


def flash_flags(row):
    """--attention-backend flash for Megatron-Core runs from 2023 (or a row
    field flash_attn when a source gives it), unfused for the software
    before FlashAttention (2021-22 Megatron-LM, Megatron-DeepSpeed): always
    explicit, never merak's default (auto)."""
    on = row.get("flash_attn")
    if on is None:
        on = (megatron_core(row) and run_year(row) >= 2023) or torchtitan(row)
    return ["--attention-backend", "flash" if on else "unfused"]


def tp_comm_flags(row, tp, sp):
    """--tp-comm-overlap (Transformer Engine's userbuffers) for Megatron-Core
    runs from 2023 with sequence parallelism and tp > 1 (a row field
    tp_comm_overlap, when a source gives it, wins): their published
    configurations set it -- the Megatron-LM README's H100 scaling runs
    ("fine-grained overlapping of ... tensor-parallel (--tp-comm-overlap)
    ... communication with computation") and NeMo's performance scripts
    (model.ub_tp_comm_overlap=true beside model.sequence_parallel=true)."""
    on = row.get("tp_comm_overlap")
    if on is None:
        on = megatron_core(row) and run_year(row) >= 2023
    return ["--tp-comm-overlap"] if on and sp and tp > 1 else []


def scatter_gather_flags(row, pp, tp, sp):
    """--scatter-gather-tensors-in-pipeline where the software splits the
    tensors it sends between stages over the TP ranks and all-gathers them
    on arrival (a row field scatter_gather, when a source gives it, wins):
    DeepSpeed's pipeline engine (pipe_partitioned, on since its first
    release, September 2020: vTrain's and MT-NLG's Megatron-DeepSpeed), and
    Megatron-LM from February 2021 (commit 72e4230 made it the default;
    SC21's section 4.1 describes it; the README table of January 2021
    predates it) until March 2023 (commit 3c92fa93b5 moved the pipeline
    into Megatron-Core, whose sends are whole tensors, or with sequence
    parallelism the rank's rows, as torchtitan's are): rows published in
    2021-22."""
    on = row.get("scatter_gather")
    if on is None:
        text = (row["source"] + " " + row.get("notes", "")).lower()
        megatron_lm = 2021 <= run_year(row) <= 2022 and "cases_jan2021" not in row["source"]
        on = not (megatron_core(row) or torchtitan(row)) and ("deepspeed" in text or megatron_lm)
    return ["--scatter-gather-tensors-in-pipeline"] if on and pp > 1 and tp > 1 and not sp else []


def cluster_of(row):
    g = (row.get("gpu_type") or "").upper()
    if "A100" in g and "vTrain" in row["source"]:
        return "a100-800g"
    if "A100" in g:
        return "dgx-a100"
    if "H100" in g and "96GB" in g and "500W" in g:
        return "h100-96gb-500w"
    if "H100" in g:
        return "dgx-h100"
    if "H200" in g:
        return "dgx-h200"
    if "B200" in g:
        return "dgx-b200"
    return None


def model_flags(m):
    """The row's shape on its family's preset (GPT: gpt-175b's blocks;
    Llama: llama-2-7b's, with grouped-query attention where kv_heads <
    heads)."""
    vocab = m["vocab"] if m.get("vocab") else UNKNOWN_VOCAB
    llama = (m.get("arch") or "gpt").lower() == "llama"
    f = ["--model", "llama-2-7b" if llama else "gpt-175b", "--num-layers", str(m["layers"]),
         "--hidden-size", str(m["hidden"]), "--num-attention-heads", str(m["heads"]), "--seq-length", str(m["seq"]),
         "--vocab-size", str(vocab), "--ffn-hidden-size", str(m["ffn"])]
    if llama and m.get("kv_heads") and m["kv_heads"] != m["heads"]:
        f += ["--group-query-attention", "--num-query-groups", str(m["kv_heads"])]
    if m.get("head_dim") and m["head_dim"] * m["heads"] != m["hidden"]:
        f += ["--kv-channels", str(m["head_dim"])]
    if m.get("qk_norm"):
        f += ["--qk-layernorm"]
    if m.get("untied"):
        f += ["--untie-embeddings-and-output-weights"]
    if m.get("experts"):
        f += ["--num-experts", str(m["experts"]), "--moe-router-topk", str(m.get("topk") or 2),
              "--moe-ffn-hidden-size", str(m.get("moe_ffn") or m["ffn"])]
        if m.get("shared_ffn"):
            f += ["--moe-shared-expert-intermediate-size", str(m["shared_ffn"])]
    return f


def model_missing(m):
    arch = (m.get("arch") or "gpt").lower()
    if arch not in ("gpt", "llama"):
        return "%s architecture (merak models GPT and Llama blocks)" % arch
    if arch == "gpt" and m.get("kv_heads") and m["kv_heads"] != m["heads"]:
        return "grouped-query attention in a GPT block (kv_heads %d of %d heads)" % (m["kv_heads"], m["heads"])
    return None


def layout(row):
    """(dp, pp, tp, cp) or a missing-feature string."""
    dp, pp, tp, cp = row.get("dp"), row.get("pp"), row.get("tp"), row.get("cp") or 1
    if (tp is None or pp is None) and dp and row.get("gpus") == dp:
        tp = pp = 1     # model-parallel size 1: the split is determined
    if tp is None or pp is None or dp is None:
        return "TP x PP split not published (only the model-parallel size)"
    if dp * pp * tp * cp != row["gpus"]:
        return "dp x pp x tp x cp = %d is not the %d GPUs (as published)" % (dp * pp * tp * cp, row["gpus"])
    return dp, pp, tp, cp


def optimizer_flags(row):
    d = row.get("distributed_optimizer")
    if d is None and "NeMo" in row["source"]:
        d = "distributed optimizer (NeMo's default)"
    if not d:
        return []
    s = str(d).lower()
    if "zero-3" in s or "fsdp" in s or "zero3" in s:
        return ["--zero", "3"]
    if "zero-2" in s:
        return ["--zero", "2"]
    return ["--zero", "1"]


def dtype_flags(row):
    """The row's dtype; unstated 16-bit: the software's default of its
    time, which decides the gradients' bytes (merak's mk_plan_grad_dtype:
    bf16's are fp32, fp16's fp16): bf16 for Megatron-Core and torchtitan,
    fp16 for Megatron-LM before Megatron-Core (its 2021 example scripts
    pass --fp16; --bf16 came after SC21's runs) and Megatron-DeepSpeed
    (its GPT examples run DeepSpeed's fp16 engine)."""
    if row.get("float8"):  # torchao's Float8Linear, torchtitan's float8 converter
        return ["--dtype", "fp8", "--fp8-recipe", "torchao"]
    s = (row.get("dtype") or "").lower()
    for d in ("bf16", "fp16", "fp32", "fp8"):
        if s.startswith(d):
            return ["--dtype", d]
    return ["--dtype", "bf16" if megatron_core(row) or torchtitan(row) else "fp16"]


def grad_flags(row):
    """The gradients' reduction where the software's recipe departs from
    the dtype's default (fp32 for bf16 and fp8): NeMo 24.x's performance
    recipes sync them in bf16 (optim.grad_sync_dtype=bf16 in
    NVIDIA/NeMo-Framework-Launcher's examples/training/{gpt,llama}/h100/
    scripts: GPT-3 5B-175B, Llama 2 13B/70B, Llama 3 8B/70B; apex's
    DistributedFusedAdam keeps its gradient buckets in that type)."""
    d = dtype_flags(row)[1]
    return ["--grad-reduce-dtype", "bf16"] if "nemo" in row["source"].lower() and d in ("bf16", "fp8") else []


def recompute_choices(row):
    """[(recompute, sequence_parallel)] to try; the fastest that fits wins."""
    r = (row.get("recompute") or "").lower()
    sp = row.get("sequence_parallel")
    if r.startswith("full"):
        rec = ["full"]
    elif r.startswith("selective"):
        rec = ["selective-op" if torchtitan(row) else "selective"]
    elif r.startswith("none") or r.startswith("no"):
        rec = ["none"]
    elif run_year(row) >= 2023 and megatron_core(row):
        rec = ["none", "selective"]
    else:
        rec = ["full"]
    if sp is None:
        sp = run_year(row) >= 2023 and megatron_core(row)
    return [(x, bool(sp)) for x in rec]


def express(row):
    """Candidate flag lists for merak sim, or a missing-feature string."""
    missing = model_missing(row["model"])
    if missing:
        return missing
    if row.get("schedule") == "interleaved" and not (row.get("vpp") or 0) > 1:
        return "interleaved schedule without its model chunks per stage (vpp)"
    cl = cluster_of(row)
    if not cl:
        return "no cluster preset for GPU type %r" % row.get("gpu_type")
    lay = layout(row)
    if isinstance(lay, str):
        return lay
    opt = optimizer_flags(row)
    if isinstance(opt, str):
        return opt
    dp, pp, tp, cp = lay
    base = ["--cluster", cl] + model_flags(row["model"]) + \
        ["--dp", str(dp), "--pp", str(pp), "--tp", str(tp), "--gbs", str(row["gbs"])] + \
        (["--cp", str(cp)] if cp > 1 else []) + (["--ep", str(row["ep"])] if (row.get("ep") or 1) > 1 else []) + \
        (["--cp-comm-type", "allgather"] if cp > 1 and torchtitan(row) else []) + \
        (["--moe-enable-deepep"] if row.get("dispatcher") == "deepep" else []) + \
        (["--overlap-moe-expert-parallel-comm"] if row.get("ep_a2a_overlap") else []) + \
        opt + dtype_flags(row) + grad_flags(row) + \
        (["--cross-entropy", "torch"] if torchtitan(row) else
         ["--cross-entropy", row["cross_entropy"]] if row.get("cross_entropy") else []) + \
        (["--elementwise", "eager"] if torchtitan(row) and not row.get("compile") else []) + \
        overlap_flags(row) + zero3_prefetch_flags(row) + reshard_flags(row) + param_gather_flags(row) + \
        flash_flags(row)
    vpp = row.get("vpp") or 1
    base += ["--schedule", "interleaved", "--vpp", str(vpp)] if vpp > 1 else ["--schedule", "1f1b"]
    mbs = [row["mbs"]] if row.get("mbs") else [b for b in MBS_SEARCH if (row["gbs"] // dp) % b == 0]
    if row["gbs"] % dp or not mbs:
        return "global batch %d does not split over dp %d" % (row["gbs"], dp)
    out = []
    for rec, sp in recompute_choices(row):
        for b in mbs:
            out.append(base + ["--mbs", str(b), "--recompute", rec] + (["--sequence-parallel"] if sp else []) +
                       tp_comm_flags(row, tp, sp) + scatter_gather_flags(row, pp, tp, sp))
    return out


class Runner:
    """Runs merak command lines (lists of arguments after `merak`): through
    tests/golden/batch when it is built (merak's own main, many cases in
    one process: about 1 ms a case instead of a 0.15 s program start), else
    one ./merak process per case on a pool of `jobs`."""

    def __init__(self, merak, batch, jobs):
        self.merak, self.batch, self.jobs = merak, batch, jobs

    def run(self, cases):
        """[(rc, stdout, stderr)] for the cases, in order."""
        if not cases:
            return []
        if self.batch:
            n = max(1, min(self.jobs, len(cases)))
            parts = [cases[i::n] for i in range(n)]
            with concurrent.futures.ThreadPoolExecutor(max_workers=n) as ex:
                outs = list(ex.map(self._batch, parts))
            res = [None] * len(cases)
            for i, out in enumerate(outs):
                res[i::n] = out
            return res
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs) as ex:
            return list(ex.map(self._one, cases))

    def _one(self, args):
        p = subprocess.run([self.merak] + args, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def _batch(self, cases):
        text = "".join(" ".join(c) + "\n" for c in cases)
        p = subprocess.run([self.batch], input=text.encode(), capture_output=True, check=True)
        buf, pos, out = p.stdout, 0, []

        def field(tag):
            nonlocal pos
            end = buf.index(b"\n", pos)
            head = buf[pos:end].decode()
            if not head.startswith("@@" + tag + " "):
                raise RuntimeError("batch output: expected @@%s, got %r" % (tag, head[:60]))
            pos = end + 1
            return head[len(tag) + 3:]

        for _ in cases:
            field("case")
            rc = int(field("rc"))
            n = int(field("stdout"))
            so = buf[pos:pos + n].decode()
            pos += n
            n = int(field("stderr"))
            se = buf[pos:pos + n].decode()
            pos += n
            out.append((rc, so, se))
        return out


def model_case(row):
    return ["model"] + model_flags(row["model"]) + ["--gbs", str(row["gbs"]), "--json"]


def measured_s(row, model_json):
    m = row["measured"]
    if m["kind"] == "iteration_s":
        return m["value"]
    if m["kind"] == "tokens_per_s_per_gpu":
        return row["gbs"] * row["model"]["seq"] / (m["value"] * row["gpus"])
    if m["kind"] == "tflops_per_gpu":
        f = model_json["flops_per_iteration_recompute" if counts_recompute_flops(row) else "flops_per_iteration"]
        return f / (m["value"] * 1e12 * row["gpus"])
    return None


def opt_value(flags, name):
    return flags[flags.index(name) + 1] if name in flags else ""


def result_row(rid, row, flags, j, meas):
    return {"row": rid, "source": source_label(row), "table": row["table"], "gpus": row["gpus"],
            "dp": opt_value(flags, "--dp"), "pp": opt_value(flags, "--pp"), "tp": opt_value(flags, "--tp"),
            "cp": opt_value(flags, "--cp") or "1", "mbs": opt_value(flags, "--mbs"), "mbs_searched": int(not row.get("mbs")),
            "schedule": opt_value(flags, "--schedule"), "recompute": opt_value(flags, "--recompute"),
            "sp": int("--sequence-parallel" in flags), "zero": opt_value(flags, "--zero") or "0",
            "predicted_s": j["step_time_s"], "measured_s": meas,
            "error": (j["step_time_s"] - meas) / meas, "fits": int(bool(j["fits"])),
            "peak_gb": max(j["peak_memory_bytes"]) / 1e9, "limit_gb": j["memory_limit_bytes"] / 1e9,
            "model": "%dx%d" % (row["model"]["layers"], row["model"]["hidden"]),
            "flags": " ".join(flags)}


def replay(runner, rows):
    """Every row: the fastest candidate plan that fits (or the fastest at
    all, flagged, when none fits), or the missing feature."""
    plans = [(rid, row, express(row)) for rid, row in rows]
    cases, models = [], {}
    for rid, row, c in plans:
        if isinstance(c, str):
            continue
        cases += [["sim"] + f + ["--json"] for f in c]
        if row["measured"]["kind"] != "iteration_s":
            models.setdefault(" ".join(model_case(row)), model_case(row))
    keys = list(models)
    outs = runner.run(cases + [models[k] for k in keys])
    mj = {k: json.loads(o[1]) for k, o in zip(keys, outs[len(cases):]) if o[0] == 0}
    out, i = [], 0
    for rid, row, c in plans:
        if isinstance(c, str):
            out.append({"row": rid, "source": source_label(row), "missing": c})
            continue
        sims, i = outs[i:i + len(c)], i + len(c)
        bad = [o for o in sims if o[0] != 0]
        meas = measured_s(row, mj.get(" ".join(model_case(row))))
        if bad or meas is None:
            why = (bad[0][2].strip().splitlines() or ["merak sim failed"])[-1] if bad else \
                "measured kind %s" % row["measured"]["kind"]
            out.append({"row": rid, "source": source_label(row), "missing": why})
            continue
        js = [json.loads(o[1]) for o in sims]
        k = min(range(len(c)), key=lambda n: (not js[n]["fits"], js[n]["step_time_s"]))
        out.append(result_row(rid, row, c[k], js[k], meas))
    return out


def load_rows(files, subset):
    rows = []
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        with open(f) as fh:
            data = json.load(fh)
        for i, r in enumerate(data):
            if subset and (stem, i) not in SUBSET:
                continue
            rows.append(("%s#%d" % (stem, i), r))
    return rows


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return r


def spearman(a, b):
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den > 0 else None


def figures(res):
    errs = [abs(r["error"]) * 100 for r in res]
    if not errs:
        return None
    signed = [r["error"] * 100 for r in res]
    worst = max(res, key=lambda r: abs(r["error"]))
    return {"rows": len(res), "mape": statistics.mean(errs), "median": statistics.median(signed),
            "median_abs": statistics.median(errs), "worst": worst["error"] * 100, "worst_row": worst["row"],
            "not_fit": sum(1 for r in res if not r["fits"])}


def sweeps(res):
    """A sweep: the rows of one source and model (one source when each of its
    rows is a different model, as in SC21 Table 1's weak scaling)."""
    out = {}
    for src in sorted({r["source"] for r in res}):
        rs = [r for r in res if r["source"] == src]
        models = {r["model"] for r in rs}
        groups = [(src, rs)] if len(models) == len(rs) else \
            [("%s %s" % (src, m), [r for r in rs if r["model"] == m]) for m in sorted(models)]
        for name, g in groups:
            out[name] = {"rows": len(g), "spearman": spearman([r["predicted_s"] for r in g],
                                                               [r["measured_s"] for r in g]),
                         "mape": statistics.mean(abs(r["error"]) * 100 for r in g)}
    return out


def summarise(res, skipped):
    by_file = {}
    for stem in sorted({r["row"].split("#")[0] for r in res}):
        by_file[stem] = figures([r for r in res if r["row"].startswith(stem + "#")])
    by_src = {s: figures([r for r in res if r["source"] == s]) for s in sorted({r["source"] for r in res})}
    missing = {}
    for s in skipped:
        missing.setdefault(s["missing"], []).append(s["row"])
    return {"all": figures(res), "files": by_file, "sources": by_src, "sweeps": sweeps(res),
            "unsupported": {k: len(v) for k, v in missing.items()},
            "unsupported_rows": missing}


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def summary_md(s):
    L = ["| set | rows | MAPE % | median err % | worst err % (row) | not fit |", "|---|---|---|---|---|---|"]
    for name, f in list(s["files"].items()) + list(s["sources"].items()):
        L.append("| %s | %d | %.1f | %+.1f | %+.1f (%s) | %d |" % (name, f["rows"], f["mape"], f["median"],
                                                                 f["worst"], f["worst_row"], f["not_fit"]))
    L += ["", "| sweep | rows | MAPE % | Spearman |", "|---|---|---|---|"]
    for name, w in s["sweeps"].items():
        L.append("| %s | %d | %.1f | %s |" % (name, w["rows"], w["mape"], fmt(w["spearman"], "%.3f")))
    L += ["", "| not expressible | rows |", "|---|---|"]
    for k, v in s["unsupported"].items():
        L.append("| %s | %d |" % (k, v))
    return "\n".join(L) + "\n"


def write_csv(path, rows, keys):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore", lineterminator="\n")  # LF, as the other CSVs
        w.writeheader()
        for r in rows:
            w.writerow(r)


def scatter(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: scatter plot skipped", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 6))
    for src in sorted({r["source"] for r in res}):
        rs = [r for r in res if r["source"] == src]
        ax.scatter([r["measured_s"] for r in rs], [r["predicted_s"] for r in rs], s=8, label=src)
    lo = min(min(r["measured_s"], r["predicted_s"]) for r in res)
    hi = max(max(r["measured_s"], r["predicted_s"]) for r in res)
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.5)
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("measured iteration time (s)"), ax.set_ylabel("merak sim (s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def check(s, path):
    """The subset's MAPE, and each source's among its rows, within
    CHECK_SLACK points of the recorded figures."""
    with open(path) as f:
        rec = json.load(f)
    want, got = rec["subset"]["mape"], s["all"]["mape"]
    ok = got <= want + CHECK_SLACK
    print("subset MAPE %.3f%% (recorded %.3f%%, allowed %.3f%%): %s" % (got, want, want + CHECK_SLACK,
                                                                        "ok" if ok else "REGRESSED"))
    for src, w in sorted(rec["subset"].get("sources", {}).items()):
        g = s["sources"].get(src)
        good = g is not None and g["mape"] <= w + CHECK_SLACK
        print("  %s: %s (recorded %.3f%%): %s" % (src, "%.3f%%" % g["mape"] if g else "no rows", w,
                                                  "ok" if good else "REGRESSED"))
        ok = ok and good
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=DATA)
    ap.add_argument("--merak", default=os.environ.get("MERAK", "./merak"))
    ap.add_argument("--batch", help="tests/golden/batch (default: next to --merak when built; 'none': off)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--subset", action="store_true", help="only the fixed regression subset")
    ap.add_argument("--record", metavar="FILE", help="write the full and subset MAPE figures to FILE")
    ap.add_argument("--check", metavar="FILE", help="fail if the subset MAPE regressed against FILE")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    subset = a.subset or bool(a.check)
    rows = load_rows(a.files, subset)
    batch = a.batch or os.path.join(os.path.dirname(os.path.abspath(a.merak)), "tests", "golden", "batch")
    batch = batch if batch != "none" and os.access(batch, os.X_OK) else None
    out = replay(Runner(a.merak, batch, a.jobs), rows)
    res = [r for r in out if "missing" not in r]
    skipped = [r for r in out if "missing" in r]
    s = summarise(res, skipped)
    os.makedirs(a.out, exist_ok=True)
    write_csv(os.path.join(a.out, "replay.csv"), res,
              ["row", "source", "model", "gpus", "dp", "pp", "tp", "cp", "mbs", "mbs_searched", "schedule", "recompute",
               "sp", "zero", "predicted_s", "measured_s", "error", "fits", "peak_gb", "limit_gb", "flags"])
    write_csv(os.path.join(a.out, "unsupported.csv"), skipped, ["row", "source", "missing"])
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    md = summary_md(s)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(md)
    print(md, end="")
    if not a.no_plot and res:
        scatter(res, os.path.join(a.out, "scatter.png"))
    if a.record:
        write_record(a.record, s, res)
    if a.check:
        return 0 if check(s, a.check) else 1
    return 0


def write_record(path, s, res):
    """The recorded figures: the full replay's, and the subset's (its rows
    filtered from this replay)."""
    ids = {"%s#%d" % t for t in SUBSET}
    rows = [r for r in res if r["row"] in ids]
    sub = figures(rows)
    by_src = {src: figures([r for r in rows if r["source"] == src])["mape"] for src in {r["source"] for r in rows}}
    rec = {"full": {"all": s["all"], "files": s["files"], "sources": s["sources"]},
           "subset": {"rows": sub["rows"], "mape": sub["mape"], "sources": by_src}}
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
