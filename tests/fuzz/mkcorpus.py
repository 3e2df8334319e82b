#!/usr/bin/env python3
"""Regenerate the committed seed corpus (tests/fuzz/corpus/READER/).

    python3 tests/fuzz/mkcorpus.py [--merak ./merak] [--mpiexec mpiexec]

Run from the top of a built tree.  It copies small valid files from the
source tree, makes a simulator trace, a plan and a tiny checkpoint with
the merak binary, and writes a reproducer for each reader bug of issue 13
that a file can trigger.  Names tell the replay (tests/fuzz/replay.c) what
to expect: reject-* must be rejected (-1), accept-* accepted (0); any
other file must only not crash, hang or run away with memory.  The
ckpt-meta-* checkpoints are valid safetensors files whose metadata the
checkpoint reader (mk_ckpt_read_meta, src/formats/ckpt_meta.c) must refuse or
accept; plain-* are safetensors files that are not merak checkpoints.
Files libFuzzer found are added by hand (crash-* renamed to say what
they reproduce) and are not rewritten here.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(TOP, "tests", "fuzz", "corpus")


def put(reader, name, data):
    os.makedirs(os.path.join(OUT, reader), exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(OUT, reader, name), mode) as f:
        f.write(data)


def copy(reader, name, src):
    with open(os.path.join(TOP, src), "rb") as f:
        put(reader, name, f.read())


def js(obj):
    return json.dumps(obj, indent=1) + "\n"


def models():
    for n in ("gpt-small", "bert-small", "stack"):
        copy("model", "accept-%s.json" % n, "traces/models/%s.json" % n)
    copy("model", "accept-skip2.json", "tests/models/skip2.json")
    for n in ("bad-syntax", "missing-field", "wrong-type", "unknown-op", "cycle", "undefined-input",
              "width-mismatch", "unknown-field"):
        copy("model", "reject-%s.json" % n, "tests/models/%s.json" % n)
    with open(os.path.join(TOP, "traces/models/stack.json")) as f:
        stack = json.load(f)
    # --num-layers 2147483647 as a file: 2^30 blocks must be refused up front,
    # not built (time and memory run away today)
    put("model", "reject-num-blocks-2p30.json", js(dict(stack, num_blocks=1 << 30)))
    # 10,000 blocks (50,000 ops) must answer within seconds: 30 s today
    # (quadratic name check and consumer search while building the graph)
    put("model", "num-blocks-10000.json", js(dict(stack, num_blocks=10000)))
    # widths whose products overflow int (hidden 2^30: "ffn must be >= 1" today)
    put("model", "reject-width-2p30.json", js(dict(stack, input_width=1 << 30)))
    put("model", "reject-seq-2p30.json", js(dict(stack, seq_length=1 << 30)))
    llama_models()


def llama_models():
    """The Llama ops (issue 16): grouped K/V heads, rope, swiglu, rmsnorm."""
    copy("model", "accept-llama-small.json", "traces/models/llama-small.json")
    with open(os.path.join(TOP, "traces/models/llama-small.json")) as f:
        llama = json.load(f)

    def with_op(name, **fields):
        block = [dict(o, **fields) if o["name"] == name else o for o in llama["block"]]
        return js(dict(llama, block=block))
    # kv_heads must divide heads, and the fused q,k,v width must be (heads + 2*kv)*d
    put("model", "reject-kv-heads-3.json", with_op("attn", kv_heads=3))
    put("model", "reject-kv-heads-0.json", with_op("attn", kv_heads=0))
    put("model", "reject-kv-heads-2p30.json", with_op("rope", kv_heads=1 << 30))
    put("model", "reject-qkv-width.json", with_op("qkv", out=130))
    # MQA and MHA are the cases kv = 1 and kv = heads
    put("model", "accept-mqa.json", js(dict(llama, block=[
        dict(o, out=96) if o["name"] == "qkv" else dict(o, kv_heads=1) if o["name"] in ("rope", "attn") else o
        for o in llama["block"]])))
    put("model", "reject-swiglu-odd.json", with_op("gate_up", out=383))


def clusters():
    for n in ("ideal-8", "rtx3090-pcie"):
        copy("cluster", "accept-%s.json" % n, "traces/clusters/%s.json" % n)
    copy("cluster", "accept-profile-vm-2core.json", "traces/profiles/vm-2core-epyc-2ranks.json")
    with open(os.path.join(TOP, "traces/clusters/ideal-8.json")) as f:
        c = json.load(f)
    put("cluster", "reject-unknown-key.json", js(dict(c, gpus_per_nod=8)))
    put("cluster", "reject-format-version-99.json", js(dict(c, format_version=99)))
    put("cluster", "reject-gpus-per-node-0.json", js(dict(c, gpus_per_node=0)))
    put("cluster", "reject-not-object.json", "[1, 2, 3]\n")
    # the optional device fields of issue 15 (cost.c: host-bound ops, GEMM quantization)
    quant = dict(c["device"], host_op_s=65e-6, sms=108, gemm_tile_m=256, gemm_tile_n=128)
    put("cluster", "accept-ideal-8-host-quant.json", js(dict(c, device=quant)))
    put("cluster", "reject-sms-without-tile.json", js(dict(c, device=dict(c["device"], sms=108))))
    put("cluster", "reject-sms-string.json", js(dict(c, device=dict(quant, sms="108"))))
    put("cluster", "reject-host-op-1e300.json", js(dict(c, device=dict(quant, host_op_s=1e300))))
    put("cluster", "reject-tile-2p20.json", js(dict(c, device=dict(quant, gemm_tile_m=1 << 20))))
    # the CPU profile's backward vector rate (issue 15: fitted inside a training step)
    put("cluster", "accept-ideal-8-vector-bwd.json", js(dict(c, device=dict(c["device"], vector_bwd_flops=1.8e9))))
    put("cluster", "reject-vector-bwd-negative.json", js(dict(c, device=dict(c["device"], vector_bwd_flops=-1))))
    put("cluster", "reject-vector-bwd-string.json", js(dict(c, device=dict(c["device"], vector_bwd_flops="fast"))))

    # flash_attn_flops (issue 15): optional, at most the matmul peak
    put("cluster", "accept-flash-attn-flops.json", js(dict(c, device=dict(quant, flash_attn_flops=5e11))))
    put("cluster", "reject-flash-attn-above-peak.json", js(dict(c, device=dict(quant, flash_attn_flops=1e30))))
    # flash_attn_bwd_flops (issue 38): optional, its backward's rate, at most the matmul peak
    put("cluster", "accept-flash-attn-bwd-flops.json",
        js(dict(c, device=dict(quant, flash_attn_flops=5e11, flash_attn_bwd_flops=4.3e11))))
    put("cluster", "reject-flash-attn-bwd-above-peak.json",
        js(dict(c, device=dict(quant, flash_attn_flops=5e11, flash_attn_bwd_flops=1e30))))
    put("cluster", "reject-flash-attn-bwd-string.json",
        js(dict(c, device=dict(quant, flash_attn_flops=5e11, flash_attn_bwd_flops="fast"))))
    # fp8_split_acc_scale (issue 38): optional, 0 (off) or a time factor in [1, 16]
    put("cluster", "accept-fp8-split-acc.json", js(dict(c, device=dict(quant, fp8_split_acc_scale=1.15))))
    put("cluster", "reject-fp8-split-acc-below-1.json", js(dict(c, device=dict(quant, fp8_split_acc_scale=0.5))))
    put("cluster", "reject-fp8-split-acc-above-16.json", js(dict(c, device=dict(quant, fp8_split_acc_scale=17))))
    # coll_sms (issue 38): optional, the SMs a collective holds, an integer below sms
    put("cluster", "accept-coll-sms.json", js(dict(c, device=dict(quant, coll_sms=24))))
    put("cluster", "reject-coll-sms-not-below-sms.json", js(dict(c, device=dict(quant, coll_sms=108))))
    put("cluster", "reject-coll-sms-without-sms.json", js(dict(c, device=dict(c["device"], coll_sms=24))))
    put("cluster", "reject-coll-sms-string.json", js(dict(c, device=dict(quant, coll_sms="24"))))
    put("cluster", "reject-coll-sms-negative.json", js(dict(c, device=dict(quant, coll_sms=-1))))

    # matmul_flops "fp8" (issue 18): optional (absent: no FP8), >= 1 when given, at most 2^60
    def fp8(v):
        return js(dict(c, device=dict(c["device"], matmul_flops=dict(c["device"]["matmul_flops"], fp8=v))))
    put("cluster", "accept-fp8.json", fp8(2e12))
    put("cluster", "reject-fp8-zero.json", fp8(0))
    put("cluster", "reject-fp8-negative.json", fp8(-1e12))
    put("cluster", "reject-fp8-string.json", fp8("1979e12"))
    put("cluster", "reject-fp8-1e300.json", fp8(1e300))
    put("cluster", "reject-fp4-key.json", js(dict(c, device=dict(c["device"], matmul_flops=dict(
        c["device"]["matmul_flops"], fp4=1e12)))))


def plans(merak):
    out = subprocess.run([merak, "sim", "--model", "gpt-tiny", "--dp", "2", "--pp", "2", "--gbs", "8", "--json"],
                         check=True, capture_output=True, text=True).stdout
    plan = json.loads(out)["plan"]
    put("plan", "accept-gpt-tiny-dp2-pp2.json", js(plan))
    for n in ("gpt-1.5b-megatron", "gpt-20b-merak", "gpt-8.3b-megatron-sp"):
        copy("plan", "accept-%s.json" % n, "experiments/merak-paper/results/%s.plan.json" % n)
    # SIGFPE in mk_plan_check: gbs % (dp*mbs) with dp*mbs = 2^32 wrapping to 0
    put("plan", "reject-dp-mbs-overflow-sigfpe.json",
        js(dict(plan, dp=65536, micro_batch_size=65536, global_batch_size=8)))
    # a typo and a future version must be refused, not run with defaults
    put("plan", "reject-shedule-typo.json", js(dict(plan, shedule="merak")))
    put("plan", "reject-format-version-99.json", js(dict(plan, format_version=99)))
    # overlap_grad_reduce (issue 15): a boolean, absent = on
    put("plan", "accept-no-overlap-grad-reduce.json", js(dict(plan, overlap_grad_reduce=False)))
    put("plan", "reject-overlap-grad-reduce-int.json", js(dict(plan, overlap_grad_reduce=1)))
    # zero3_prefetch (issue 38): false only on a ZeRO-3 plan, absent = prefetched
    put("plan", "accept-zero3-prefetch-false.json", js(dict(plan, zero=3, zero3_prefetch=False)))
    put("plan", "accept-zero3-prefetch-true-zero0.json", js(dict(plan, zero3_prefetch=True)))
    put("plan", "reject-zero3-prefetch-false-zero0.json", js(dict(plan, zero3_prefetch=False)))
    put("plan", "reject-zero3-prefetch-int.json", js(dict(plan, zero=3, zero3_prefetch=0)))
    # overlap_param_gather (issue 38): true only on a ZeRO-1 plan, absent = off
    put("plan", "accept-overlap-param-gather.json", js(dict(plan, zero=1, overlap_param_gather=True)))
    put("plan", "reject-overlap-param-gather-zero0.json", js(dict(plan, overlap_param_gather=True)))
    put("plan", "reject-overlap-param-gather-no-overlap.json",
        js(dict(plan, zero=1, overlap_param_gather=True, overlap_grad_reduce=False)))
    put("plan", "reject-overlap-param-gather-int.json", js(dict(plan, zero=1, overlap_param_gather=1)))
    # grad_reduce_dtype (issue 38): fp32 or the plan's 16-bit type, absent = the dtype's default
    put("plan", "accept-grad-reduce-dtype-fp32-fp16.json", js(dict(plan, dtype="fp16", grad_reduce_dtype="fp32")))
    put("plan", "accept-grad-reduce-dtype-bf16.json", js(dict(plan, grad_reduce_dtype="bf16")))
    put("plan", "reject-grad-reduce-dtype-fp16-of-bf16.json", js(dict(plan, grad_reduce_dtype="fp16")))
    put("plan", "reject-grad-reduce-dtype-int.json", js(dict(plan, grad_reduce_dtype=1)))
    # elementwise (issue 38): fused or eager, absent = fused
    put("plan", "accept-elementwise-eager.json", js(dict(plan, elementwise="eager")))
    put("plan", "accept-elementwise-fused.json", js(dict(plan, elementwise="fused")))
    put("plan", "reject-elementwise-int.json", js(dict(plan, elementwise=1)))
    put("plan", "reject-elementwise-lazy.json", js(dict(plan, elementwise="lazy")))
    # use_flash_attn (issue 15): a boolean, absent = the materialised core
    put("plan", "accept-use-flash-attn.json", js(dict(plan, use_flash_attn=True)))
    put("plan", "reject-use-flash-attn-string.json", js(dict(plan, use_flash_attn="yes")))
    # dtype fp8 (issue 18) reads; an unknown dtype is refused
    put("plan", "accept-dtype-fp8.json", js(dict(plan, dtype="fp8")))
    put("plan", "reject-dtype-fp4.json", js(dict(plan, dtype="fp4")))
    # pp*vpp and hidden products past int
    put("plan", "reject-vpp-2p30.json", js(dict(plan, vpp=1 << 30, schedule="interleaved")))
    big = dict(plan["model"], hidden_size=1 << 30, num_attention_heads=1, ffn_hidden_size=1 << 30)
    put("plan", "reject-hidden-2p30.json", js(dict(plan, model=big)))
    put("plan", "gbs-2p30.json", js(dict(plan, global_batch_size=1 << 30, micro_batches=1 << 28)))
    cp_plans(merak)
    fp8_recipe_plans(merak)
    xent_plans(merak)
    llama_plans(merak)
    moe_plans(merak)


def sim_plan(merak, *flags):
    """The plan object of `merak sim FLAGS --json` (a plan file)."""
    out = subprocess.run([merak, "sim", *flags, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["plan"]


def fp8_recipe_plans(merak):
    # fp8_recipe (issue 38): delayed or tensorwise, absent = delayed; only an fp8 plan takes tensorwise
    plan = sim_plan(merak, "--model", "gpt-tiny", "--cluster", "dgx-h100", "--dtype", "fp8", "--gbs", "8")
    put("plan", "accept-fp8-recipe-tensorwise.json", js(dict(plan, fp8_recipe="tensorwise")))
    put("plan", "accept-fp8-recipe-delayed.json", js(dict(plan, fp8_recipe="delayed")))
    put("plan", "reject-fp8-recipe-mxfp8.json", js(dict(plan, fp8_recipe="mxfp8")))
    put("plan", "reject-fp8-recipe-int.json", js(dict(plan, fp8_recipe=1)))
    put("plan", "reject-fp8-recipe-bf16-plan.json", js(dict(plan, dtype="bf16", fp8_recipe="tensorwise")))


def xent_plans(merak):
    # cross_entropy (issue 38, fourteenth session): vocab-parallel (absent), torch, fused, fused-te
    plan = sim_plan(merak, "--model", "gpt-tiny", "--cluster", "dgx-h100", "--gbs", "8")
    put("plan", "accept-xent-fused.json", js(dict(plan, cross_entropy="fused")))
    put("plan", "accept-xent-fused-te.json", js(dict(plan, cross_entropy="fused-te")))
    put("plan", "reject-xent-native.json", js(dict(plan, cross_entropy="native")))
    put("plan", "reject-xent-int.json", js(dict(plan, cross_entropy=2)))


def cp_plans(merak):
    # context parallelism (issue 18): cp an integer, absent = 1; 2*cp chunks must divide the sequence
    plan = sim_plan(merak, "--model", "gpt-tiny", "--cp", "2", "--pp", "2", "--gbs", "8")
    put("plan", "accept-gpt-tiny-cp2-pp2.json", js(plan))
    put("plan", "accept-cp1-explicit.json", js(dict(plan, cp=1)))
    put("plan", "reject-cp-3-seq-64.json", js(dict(plan, cp=3)))
    put("plan", "reject-cp-64-seq-64.json", js(dict(plan, cp=64)))
    put("plan", "reject-cp-0.json", js(dict(plan, cp=0)))
    put("plan", "reject-cp-string.json", js(dict(plan, cp="2")))
    put("plan", "reject-cp-above-max.json", js(dict(plan, cp=2048)))
    put("plan", "reject-cp-dp-gpus-overflow.json", js(dict(plan, cp=1024, dp=1 << 20, global_batch_size=1 << 20)))
    # Megatron-LM's --cp-comm-type (absent = p2p); a2a splits the heads (gpt-tiny: 4) over cp
    put("plan", "accept-cp-comm-allgather.json", js(dict(plan, cp_comm_type="allgather")))
    put("plan", "accept-cp-comm-a2a.json", js(dict(plan, cp_comm_type="a2a")))
    put("plan", "accept-cp-comm-p2p.json", js(dict(plan, cp_comm_type="p2p")))
    put("plan", "reject-cp-comm-a2a-p2p.json", js(dict(plan, cp_comm_type="a2a+p2p")))
    put("plan", "reject-cp-comm-ring.json", js(dict(plan, cp_comm_type="ring")))
    put("plan", "reject-cp-comm-int.json", js(dict(plan, cp_comm_type=1)))
    put("plan", "reject-cp-comm-a2a-cp-8.json", js(dict(plan, cp=8, cp_comm_type="a2a")))
    # CP runs on fused attention kernels (Megatron-Core's rule): unfused refused, no field read as flash
    put("plan", "reject-cp-attention-unfused.json", js(dict(plan, attention_backend="unfused")))
    put("plan", "accept-cp-attention-absent.json", js({k: v for k, v in plan.items() if k != "attention_backend"}))


def moe_plans(merak):
    # expert parallelism (issue 19): ep divides dp and the experts, only
    # with experts; the imbalance factor from 1; absent = 1
    plan = sim_plan(merak, "--model", "moe-tiny", "--dp", "4", "--ep", "2", "--gbs", "8")
    put("plan", "accept-moe-tiny-dp4-ep2.json", js(plan))
    put("plan", "accept-moe-ep4.json", js(dict(plan, ep=4)))
    put("plan", "accept-moe-ep1-explicit.json", js(dict(plan, ep=1)))
    put("plan", "accept-moe-imbalance-1.5.json", js(dict(plan, moe_imbalance=1.5)))
    put("plan", "reject-moe-ep-3-dp-4.json", js(dict(plan, ep=3)))
    put("plan", "reject-moe-ep-8-experts-4.json", js(dict(plan, ep=8, dp=8, global_batch_size=16)))
    put("plan", "reject-moe-ep-0.json", js(dict(plan, ep=0)))
    put("plan", "reject-moe-ep-string.json", js(dict(plan, ep="2")))
    put("plan", "reject-moe-ep-above-max.json", js(dict(plan, ep=1 << 20, dp=1 << 20, global_batch_size=1 << 20)))
    put("plan", "reject-moe-imbalance-0.5.json", js(dict(plan, moe_imbalance=0.5)))
    put("plan", "reject-moe-imbalance-huge.json", js(dict(plan, moe_imbalance=1e300)))
    dense = dict(plan["model"])
    for k in [k for k in dense if k.startswith("moe_") or k == "num_experts"]:
        del dense[k]
    put("plan", "reject-moe-ep2-dense-model.json", js(dict(plan, model=dense)))


def llama_plans(merak):
    """Plan files with the architecture fields (issue 16)."""
    out = subprocess.run([merak, "sim", "--model", "llama-tiny", "--dp", "2", "--pp", "2", "--tp", "2",
                          "--gbs", "8", "--json"], check=True, capture_output=True, text=True).stdout
    plan = json.loads(out)["plan"]
    put("plan", "accept-llama-tiny-dp2-pp2-tp2.json", js(plan))

    def model(**fields):
        return js(dict(plan, model=dict(plan["model"], **fields)))
    put("plan", "reject-llama-groups-3.json", model(num_query_groups=3))
    put("plan", "reject-llama-norm-typo.json", model(normalization="RMSnorm"))
    put("plan", "reject-llama-rotary-base-string.json", model(rotary_base="1e4"))
    put("plan", "reject-llama-rotary-base-0.json", model(rotary_base=0))
    put("plan", "reject-llama-eps-huge.json", model(norm_epsilon=1e300))
    put("plan", "reject-llama-swiglu-int.json", model(swiglu=1))
    put("plan", "reject-llama-unknown-key.json", model(num_key_value_heads=2))
    put("plan", "reject-llama-tp-kv.json", js(dict(plan, model=dict(plan["model"], num_query_groups=1))))


def traces(merak):
    for n in ("a", "b", "other"):
        copy("trace", "accept-%s.json" % n, "tests/traces/%s.json" % n)
    with tempfile.TemporaryDirectory() as d:
        t = os.path.join(d, "t.json")
        subprocess.run([merak, "sim", "--model", "gpt-tiny", "--pp", "2", "--gbs", "4", "--trace", t],
                       check=True, capture_output=True)
        with open(t, "rb") as f:
            put("trace", "accept-sim-gpt-tiny-pp2.json", f.read())
    # lanes (merak/trace.h): p2p's second lane (tid 11) beside tid 1, and a
    # partial overlap on one track (trace check's finding, read alike)
    X = '{"ph":"X","name":"%s","pid":0,"tid":%d,"ts":%s,"dur":10,"args":{"stage":0,"mb":%d}}'
    lanes = [X % ("SEND_ACT0", 1, 0, 0), X % ("SEND_ACT1", 11, 5, 1), X % ("AR.dp", 3, 20, -1),
             X % ("AR.tied", 13, 20, -1), X % ("RS.dp", 993, 1, -1)]
    meta = '{"ph":"M","pid":0,"tid":11,"name":"thread_name","args":{"name":"p2p #2"}}'
    put("trace", "accept-lanes.json", '{"traceEvents":[%s,\n%s]}\n' % (meta, ",\n".join(lanes)))
    put("trace", "accept-overlap.json", '[%s,\n%s]\n' % (X % ("SEND_ACT0", 1, 0, 0), X % ("SEND_ACT1", 1, 5, 1)))
    put("trace", "reject-not-object.json", "42\n")


def st_file(meta, tensors, trailing=b""):
    """A safetensors file: tensors = [(name, shape, float list)]."""
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, shape, vals in tensors:
        raw = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data + trailing


def st_split(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def st_join(hdr, data):
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data


def checkpoints(merak, mpiexec):
    put("safetensors", "plain-not-merak.st", st_file({"format": "x"}, [("a", [2, 3], [1, 2, 3, 4, 5, 6]),
                                                                    ("b", [1], [7])]))
    put("safetensors", "plain-empty.st", st_file(None, []))
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "tiny.st")
        subprocess.run([mpiexec, "-n", "1", merak, "run", "--model", "gpt-tiny", "--num-layers", "1",
                        "--hidden-size", "8", "--num-attention-heads", "1", "--seq-length", "8",
                        "--vocab-size", "128", "--steps", "1", "--gbs", "1", "--save", p],
                       check=True, capture_output=True)
        with open(p, "rb") as f:
            base = f.read()
    put("safetensors", "accept-ckpt-tiny.st", base)
    hdr, data = st_split(base)
    meta = hdr["__metadata__"]
    # metadata once narrowed from long to int unchecked: 64-bit counts load,
    # a sign or more than 63 bits is refused
    for expect, tag, key, val in (("accept", "step-2147483648", "step", "2147483648"),
                          ("accept", "step-2147483647", "step", "2147483647"),
                          ("reject", "step-minus1", "step", "-1"),
                          ("reject", "data-position-minus1", "data_position", "-1"),
                          ("reject", "lr-decay-steps-2p63", "lr_decay_steps", "9223372036854775808"),
                          ("accept", "lr-decay-steps-2147483648", "lr_decay_steps", "2147483648"),
                          ("accept", "loss-scaler", "loss_scaler", "65536 3 2"),
                          ("reject", "loss-scaler-below-1", "loss_scaler", "0.5 3 2"),
                          ("accept", "skipped-steps-1", "skipped_steps", "1"),
                          ("reject", "skipped-steps-above-step", "skipped_steps", "2")):
        put("safetensors", "%s-ckpt-meta-%s.st" % (expect, tag),
            st_join(dict(hdr, __metadata__=dict(meta, **{key: val})), data))
    # bit flips in the data: only a file with checksums can be refused
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0x10
    has_crc = any("crc" in k for k in meta) or any("crc" in json.dumps(v) for k, v in hdr.items() if k != "__metadata__")
    put("safetensors", ("reject-ckpt-bitflip.st" if has_crc else "ckpt-bitflip-nocrc.st"),
        st_join(hdr, bytes(flipped)))
    # a trailing megabyte after the last tensor
    put("safetensors", "reject-ckpt-trailing-1mb.st", base + b"\0" * (1 << 20))
    # the header's own checks
    put("safetensors", "reject-truncated.st", base[:len(base) - 100])
    put("safetensors", "reject-header-length-2p63.st", struct.pack("<Q", 1 << 63) + base[8:])
    bad = st_file(None, [("a", [2], [1, 2])])
    put("safetensors", "reject-f16.st", bad.replace(b'"F32"', b'"F16"'))
    # shape whose element count times 4 wraps to 0 (matches data_offsets [0, 0])
    put("safetensors", "reject-shape-wraps.st",
        st_join({"a": {"dtype": "F32", "shape": [1 << 62], "data_offsets": [0, 0]}}, b""))
    put("safetensors", "reject-shape-product-wraps.st",
        st_join({"a": {"dtype": "F32", "shape": [1 << 32, 1 << 32], "data_offsets": [0, 0]}}, b""))
    put("safetensors", "reject-negative-offset.st",
        st_join({"a": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, b"\0" * 4))
    put("safetensors", "reject-long-name.st", st_file(None, [("n" * 200, [1], [1])]))


def data():
    # two parameter bytes (tests/fuzz/fuzz_data.c): suffix | vocab << 2, seq - 1
    with open(os.path.join(TOP, "experiments/train-shakespeare/tinyshakespeare.txt"), "rb") as f:
        text = f.read(4096)
    put("data", "accept-bytes-seq16.txt", bytes([0, 15]) + text)
    ids = b"".join(struct.pack("<H", (i * 7919) % 50257) for i in range(1024))
    put("data", "accept-uint16-gpt2-seq32.bin", bytes([1 | 2 << 2, 31]) + ids)
    llmc = struct.pack("<256i", 20240520, 1, 1024, *([0] * 253)) + ids
    put("data", "accept-llmc-gpt2-seq32.bin", bytes([1 | 2 << 2, 31]) + llmc)
    put("data", "reject-llmc-count-negative.bin",
        bytes([1 | 2 << 2, 31]) + struct.pack("<256i", 20240520, 1, -1, *([0] * 253)) + ids)
    put("data", "reject-llmc-version-2.bin",
        bytes([1 | 2 << 2, 31]) + struct.pack("<256i", 20240520, 2, 1024, *([0] * 253)) + ids)
    put("data", "reject-odd-size.u16", bytes([2, 7]) + b"\1\0\2")
    put("data", "reject-id-above-vocab.txt", bytes([1 << 2, 3]) + b"A" * 100)  # vocab 65: 'A' = 65
    put("data", "reject-too-short.txt", bytes([0, 255]) + text[:100])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--merak", default="./merak")
    ap.add_argument("--mpiexec", default="mpiexec")
    a = ap.parse_args()
    merak = os.path.abspath(a.merak)
    models()
    clusters()
    plans(merak)
    traces(merak)
    checkpoints(merak, a.mpiexec)
    data()


if __name__ == "__main__":
    main()
