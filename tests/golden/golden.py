#!/usr/bin/env python3
"""Golden outputs of merak (issue 14): record them, or check a build against them.

  golden.py record KIND OUT.jsonl.gz [--batch B] [--merak M]
  golden.py check  KIND GOLDEN.jsonl.gz [--batch B] [--merak M] [--sample N] [--cases I,J]
                   [--extra "WORDS"] [--ignore KEY,...] [--exact]
  golden.py cases  KIND          (print the case lines)

KIND is one of the case sets below (sched, sim-ideal, sim-clusters, plan,
run).  The grids live here, so recording and checking run the same cases.
sched, sim and plan cases run through tests/golden/batch (merak's main,
many cases per process: see batch.c); `record` runs every case in a fresh
child (batch --fork), `check` runs them in one process and reruns any case
that differs with --fork before reporting it.  `--sample N` also runs every
Nth case through the real ./merak program, which checks the driver itself;
`--cases I,J` checks only those cases (0-based, in grid order).
`--extra "WORDS"` appends the words to every case as it runs and
`--ignore KEY,...` drops those keys (at any depth) from the new results:
the proof that an older recording holds under an explicit flag (issue 34:
git show HEAD~N:tests/golden/sim-clusters.jsonl.gz > old.gz; golden.py
check sim-clusters old.gz --extra "--attention-backend unfused" --ignore
attention --exact; --exact compares every real bitwise).
run cases start `merak run` (under $MPIEXEC when a case has more than one
rank) with --dump-grads and --save in a temporary folder.

A golden file holds one JSON object per case and line, gzip-compressed:
  {"case": ARGS, "rc": EXIT STATUS, "stderr": TEXT, ...}
with the output as
  "stdout": TEXT    sched text form: compared exactly
  "json": OBJECT    sched --json (streams as a digest), sim, plan, run:
                    strings, booleans and integers exactly, reals to 1e-12
                    relative ("sched" reals exactly; "run": below)
  "sha256": HEX     of the exact stdout (sched --json), compared exactly
Keys that are measured, not computed, are dropped: plan's search_time_s,
run's step times, tokens/s and peak memory (allocator-dependent).

run records hold values, compared within tolerances that hold on any CPU
(OpenBLAS picks its GEMM kernels per CPU family, so sums are ordered
differently from machine to machine; see tests/golden/README.md):
  "json"."losses"   relative RUN_LOSS_TOL
  "grads", "checkpoint": {TENSOR: [norm, p1, .., pK]}, the L2 norm and K
                    projections on fixed +-1 vectors (tensor_summary); per
                    tensor |delta| <= tol x norm (RUN_TOL: gradients and Adam
                    moments; RUN_WEIGHT_TOL: the weights)
  "metadata"        the checkpoint's metadata less its crc32 digests: exactly
  "grads_sha256", "checkpoint_sha256": the bytes; compared as classes only:
                    cases the recording found bitwise equal (one machine, one
                    kernel family) must be bitwise equal in this run too.
"""
import gzip
import hashlib
import struct
import json
import os
import subprocess
import sys
import tempfile

SCHEDULES = ["gpipe", "1f1b", "interleaved", "merak", "merak-pre", "merak-last", "zb-h1"]
NEW_SCHEDULES = ["zb-h2", "zb-v", "dualpipev"]  # issue 35, appended to each grid
REL_TOL = 1e-12  # reals of sim and plan: the restructuring may reorder sums
# run cases, justified in tests/golden/README.md ("Tolerances of the run
# golden"): fp32 sums reordered by another GEMM kernel family move a 3-step
# loss by <= 2.3e-9 relative, a step-1 gradient tensor or an Adam moment by
# <= 3.7e-7 of its norm, and a weight tensor by <= 4.0e-5 (Adam's first
# steps turn a gradient element at rounding level into +-lr: biases that
# start at zero), measured over Haswell, SkylakeX, Prescott, Sandybridge, Zen.
RUN_LOSS_TOL = 1e-6
RUN_TOL = 1e-5
RUN_WEIGHT_TOL = 1e-3
RUN_PROJECTIONS = 4


# ---- the case grids -------------------------------------------------------

def sched_cases():
    """Every schedule over p, m and recompute; interleaved with vpp 2-4;
    both the text form (streams and timeline) and --json; some refusals."""
    recs = ["none", "full", "selective", "stage-aware:0", "stage-aware:0.5", "stage-aware:1"]
    for sched in SCHEDULES:
        for vpp in ([2, 3, 4] if sched == "interleaved" else [None]):
            for p in [1, 2, 3, 4, 8]:
                for m in [1, 2, 3, 4, 6, 8, 12, 16]:
                    for rec in recs:
                        args = "sched --schedule %s --pp %d --micro-batches %d --recompute %s" % (sched, p, m, rec)
                        if vpp:
                            args += " --vpp %d" % vpp
                        yield args + " --verify"
                        yield args + " --verify --json"
    # looped BFS (issue 35), appended: vpp 2-4, every p, m and recompute
    for vpp in [2, 3, 4]:
        for p in [1, 2, 3, 4, 8]:
            for m in [1, 2, 3, 4, 6, 8, 12, 16]:
                for rec in recs:
                    args = "sched --schedule looped-bfs --pp %d --micro-batches %d --recompute %s --vpp %d" % (
                        p, m, rec, vpp)
                    yield args + " --verify"
                    yield args + " --verify --json"
    # zb-h2, zb-v, dualpipev (issue 35), appended: every p, m and recompute
    # (zb-v and dualpipev at their vpp 2; dualpipev where m >= 2p)
    for sched in NEW_SCHEDULES:
        for p in [1, 2, 3, 4, 8]:
            for m in [1, 2, 3, 4, 6, 8, 12, 16]:
                if sched == "dualpipev" and m < 2 * p:
                    continue
                for rec in recs:
                    args = "sched --schedule %s --pp %d --micro-batches %d --recompute %s" % (sched, p, m, rec)
                    yield args + " --verify"
                    yield args + " --verify --json"
    for bad in ["--schedule zb-v --pp 2 --micro-batches 4 --vpp 3",
                "--schedule dualpipev --pp 4 --micro-batches 7"]:
        yield "sched " + bad + " --json"
    # refusals: their exit status and message are part of the contract
    for bad in ["--schedule 1f1b --pp 2 --micro-batches 4 --vpp 2",
                "--schedule interleaved --pp 3 --micro-batches 4",
                "--schedule interleaved --pp 2 --micro-batches 4 --vpp 1",
                "--schedule bogus --pp 2 --micro-batches 4",
                "--pp 2 --micro-batches 4 --recompute auto",
                "--pp 2 --micro-batches 4 --recompute stage-aware:1.5",
                "--pp 2 --micro-batches 4 --recompute sometimes",
                "--pp 0 --micro-batches 4", "--pp 2", "--micro-batches 4",
                "--pp 64 --micro-batches 1024 --schedule interleaved --vpp 8",
                "--pp 2 --micro-batches 4 extra",
                "--schedule looped-bfs --pp 2 --micro-batches 4 --vpp 1"]:
        yield "sched " + bad + " --json"
    yield "sched --pp 4 --micro-batches 8"  # the defaults (1f1b, full), no --verify


LAYOUTS = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (1, 4, 1), (2, 1, 2),
           (1, 2, 2), (2, 2, 2), (1, 8, 1), (4, 2, 1), (1, 2, 4)]


def sim_line(model, cluster, layout, extra):
    dp, pp, tp = layout
    return "sim --model %s --cluster %s --dp %d --pp %d --tp %d %s --json" % (model, cluster, dp, pp, tp, extra)


def sched_flags(sched):
    return "--schedule %s%s" % (sched, " --vpp 2" if sched == "interleaved" else "")


def sim_options(model, cluster):
    """One-factor variations over a base grid: TP overlap, SP, ZeRO-1,
    partitions, dtypes, batch shapes, interleaving depth, model flags."""
    for lay in LAYOUTS:
        dp, pp, tp = lay
        for sched in ["1f1b", "merak"]:
            base = "--gbs 16 --schedule %s" % sched
            if tp > 1:
                for ov in [1, 2, 3]:
                    yield sim_line(model, cluster, lay, base + " --tp-overlap %d" % ov)
                for rec in ["selective", "full", "auto"]:
                    yield sim_line(model, cluster, lay, base + " --sequence-parallel --recompute " + rec)
            if dp > 1:
                yield sim_line(model, cluster, lay, base + " --zero 1")
            if pp > 1:
                for part in ["parameters", "compute"]:
                    yield sim_line(model, cluster, lay, base + " --partition " + part)
        if pp > 1 and pp <= 4:
            for vpp in [3, 4]:
                yield sim_line(model, cluster, lay, "--gbs 16 --schedule interleaved --vpp %d" % vpp)
    for lay in [(1, 1, 1), (2, 2, 1), (1, 2, 2)]:
        for dt in ["fp32", "fp16", "bf16"]:
            yield sim_line(model, cluster, lay, "--gbs 16 --dtype " + dt)
        yield sim_line(model, cluster, lay, "--mbs 2 --gbs 32 --schedule merak")
        yield sim_line(model, cluster, lay, "--mbs 4 --micro-batches 3 --schedule 1f1b")
    yield sim_line(model, cluster, (2, 2, 2), "--gbs 32 --schedule merak --recompute stage-aware:0.5 "
                   "--tp-overlap 2 --sequence-parallel --zero 1 --partition compute")
    yield sim_line(model, cluster, (1, 4, 2), "--gbs 64 --schedule zb-h1 --recompute auto --tp-overlap 3 "
                   "--partition parameters --dtype fp16")


def sim_grid(models, clusters, recs, batches):
    """models x layouts x schedules x recompute x global batches, then the
    one-factor variations."""
    for cluster in clusters:
        for model in models:
            for lay in LAYOUTS:
                for sched in SCHEDULES:
                    for rec in recs:
                        for gbs in batches:
                            yield sim_line(model, cluster, lay, "--gbs %d %s --recompute %s" % (
                                gbs, sched_flags(sched), rec))
            yield from sim_options(model, cluster)


def sim_ideal_cases():
    """The ideal cluster (only F/B/R matmuls cost): a permanent invariant."""
    models = ["gpt-tiny", "gpt2-124m", "bert-large", "gpt-2.5b"]
    # gbs 4: fewer micro-batches than stages; 48: interleaved refuses pp 8
    yield from sim_grid(models, ["ideal"], ["none", "full", "selective", "stage-aware:0.5", "auto"], [4, 16, 48])
    yield from sim_errors("ideal")
    yield "sim --model gpt-tiny --num-layers 6 --hidden-size 96 --num-attention-heads 6 --cluster ideal --pp 3 --tp 3 --gbs 12 --json"
    yield "sim --model gpt-1.5b --cluster ideal --dp 2 --pp 4 --json"  # default gbs 512
    yield from new_schedule_grid(["gpt2-124m", "gpt-2.5b"], "ideal", ["none", "full", "selective", "stage-aware:0.5",
                                                                      "auto"], [16, 48])


def new_schedule_grid(models, cluster, recs, batches):
    """Issue 35's schedules on the pipelined layouts (appended)."""
    for model in models:
        for lay in LAYOUTS:
            if lay[1] < 2:
                continue
            for sched in NEW_SCHEDULES:
                for rec in recs:
                    for gbs in batches:
                        yield sim_line(model, cluster, lay, "--gbs %d --schedule %s --recompute %s" % (gbs, sched, rec))


def sim_errors(cluster):
    yield sim_line("gpt-tiny", cluster, (1, 1, 3), "--gbs 16")  # 4 heads over 3
    yield sim_line("gpt-tiny", cluster, (1, 3, 1), "--gbs 16 --schedule interleaved --vpp 2")
    yield sim_line("gpt-tiny", cluster, (3, 1, 1), "--gbs 16")  # gbs not divisible
    yield sim_line("gpt-tiny", cluster, (1, 1, 1), "--gbs 16 --zero 4")
    yield sim_line("gpt-tiny", cluster, (1, 64, 1), "--gbs 16")


def sim_clusters_cases():
    """Two real clusters: guard the restructuring (issue 14) only."""
    yield from sim_grid(["gpt2-124m", "gpt-2.5b"], ["dgx-a100", "rtx3090-pcie"], ["none", "full", "auto"], [16])
    yield from sim_errors("dgx-a100")
    # plans that do not fit: a result (exit 0, a warning on stderr)
    yield "sim --model gpt-20b --cluster rtx3090-pcie --dp 1 --pp 2 --tp 2 --gbs 16 --json"
    yield "sim --model gpt-175b --cluster dgx-a100 --dp 1 --pp 8 --tp 8 --gbs 64 --json"
    yield "sim --model gpt-8.3b --cluster rtx3090-pcie --dp 2 --pp 4 --tp 2 --json"  # defaults: gbs 512
    for cluster in ["dgx-a100", "rtx3090-pcie"]:
        yield from new_schedule_grid(["gpt2-124m", "gpt-2.5b"], cluster, ["none", "full", "auto"], [16])


def plan_cases():
    """Small searches (seconds in all): the planner over simulated plans."""
    for cluster in ["ideal", "dgx-a100", "rtx3090-pcie"]:
        for gpus in [1, 2, 4, 8]:
            yield "plan --model gpt-tiny --cluster %s --gpus %d --gbs 16 --top 3 --json" % (cluster, gpus)
        for base in ["megatron", "megatron-sp", "deepspeed", "merak", "all"]:
            yield "plan --model gpt2-124m --cluster %s --gpus 4 --gbs 16 --top 2 --baseline %s --json" % (cluster, base)
    yield "plan --model gpt-2.5b --cluster rtx3090-pcie --gpus 8 --gbs 32 --top 3 --json"
    yield "plan --model gpt-tiny --cluster dgx-a100 --gpus 3 --gbs 16 --top 3 --json"
    yield "plan --model gpt-175b --cluster rtx3090-pcie --gpus 2 --gbs 16 --json"  # nothing fits
    # issue 35: only the V schedules, by torchtitan's names too (appended)
    yield "plan --model gpt2-124m --cluster dgx-a100 --gpus 8 --gbs 32 --top 3 --schedules ZBVZeroBubble,dualpipev --json"


# --quiet: the step lines on stderr hold measured times (stderr is compared)
RUN_COMMON = "run --gbs 8 --steps 3 --json --quiet"


def run_cases():
    """The executor on gpt-tiny: the one-rank reference and layouts of the
    equivalence tests (tests/mpi-exec-layouts.sh), "RANKS|ARGS"."""
    yield "1|" + RUN_COMMON
    yield "1|" + RUN_COMMON + " --schedule merak --recompute none"
    for dp, pp, tp, sched, rec in [(8, 1, 1, "1f1b", "full"), (2, 2, 2, "merak", "full"),
                                   (1, 4, 2, "1f1b", "none"), (1, 2, 4, "gpipe", "full"),
                                   (4, 2, 1, "zb-h1", "full"), (2, 4, 1, "interleaved", "full"),
                                   (4, 1, 2, "merak", "none"), (2, 1, 4, "1f1b", "full"),
                                   (2, 2, 2, "gpipe", "none")]:
        common = RUN_COMMON.replace("--gbs 8", "--gbs 16") if sched == "interleaved" else RUN_COMMON
        extra = " --vpp 2" if sched == "interleaved" else ""  # (a flag is given once)
        yield "%d|%s --dp %d --pp %d --tp %d --schedule %s --recompute %s%s" % (
            dp * pp * tp, common, dp, pp, tp, sched, rec, extra)
    yield "4|" + RUN_COMMON + " --dp 2 --pp 2 --tp 1 --zero 1"
    yield "2|" + RUN_COMMON + " --dp 1 --pp 2 --tp 1 --vocab-size 300 --schedule merak"


CASES = {"sched": sched_cases, "sim-ideal": sim_ideal_cases, "sim-clusters": sim_clusters_cases,
         "plan": plan_cases, "run": run_cases}
DROP = {"plan": {"search_time_s"},
        "run": {"step_times_s", "step_time_s", "tokens_per_s", "peak_memory_bytes"}}
# Keys added after the recording, dropped at any depth (tests/golden/README.md
# "Ignored keys"): the step breakdown of issue 21, derived from the same run;
# run's state_memory_bytes (issue 37; tests/mpi-weights16.sh checks it).
DROP_NESTED = {"explain", "state_memory_bytes"}


def drop_nested(j):
    strip_keys(j, DROP_NESTED)


def strip_keys(j, keys):
    """Drop keys at any depth (DROP_NESTED; check --ignore: keys added after a recording)."""
    if isinstance(j, dict):
        for k in keys:
            j.pop(k, None)
        for v in j.values():
            strip_keys(v, keys)
    elif isinstance(j, list):
        for v in j:
            strip_keys(v, keys)


# ---- running cases --------------------------------------------------------

def parse_batch(data):
    """batch's framed output -> [(case, rc, stdout, stderr)]."""
    out, i = [], 0
    while i < len(data):
        def line():
            nonlocal i
            j = data.index(b"\n", i)
            s, i = data[i:j].decode(), j + 1
            return s
        def block(tag):
            nonlocal i
            head = line()
            assert head.startswith("@@%s " % tag), head
            n = int(head.split()[1])
            b, i = data[i:i + n].decode(), i + n
            return b
        case = line()[len("@@case "):]
        rc = int(line()[len("@@rc "):])
        so = block("stdout")
        out.append((case, rc, so, block("stderr")))
    return out


def run_batch(batch, lines, fork):
    cmd = [batch] + (["--fork"] if fork else [])
    p = subprocess.run(cmd, input="".join(l + "\n" for l in lines).encode(), stdout=subprocess.PIPE)
    res = parse_batch(p.stdout)
    if p.returncode or len(res) != len(lines):
        sys.exit("golden: %s stopped after %d of %d cases (exit %d)%s" % (
            " ".join(cmd), len(res), len(lines), p.returncode,
            "; next case: " + lines[len(res)] if len(res) < len(lines) else ""))
    return res


def run_program(merak, lines):
    res = []
    for l in lines:
        p = subprocess.run([merak] + l.split(" "), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        res.append((l, p.returncode, p.stdout.decode(), p.stderr.decode()))
    return res


def sha256_file(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def signs(n, k):
    """The k-th fixed +-1 vector of length n: a splitmix64 hash of the index
    (numpy's generators promise no stream across versions; this does)."""
    import numpy as np
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + np.uint64((k + 1) * 0x9E3779B97F4A7C15 % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return 1.0 - 2.0 * (z & np.uint64(1)).astype(np.float64)


def tensor_summary(x):
    """float32 values -> [L2 norm, RUN_PROJECTIONS projections], in float64.
    A change d of the tensor moves each projection by about |d| (a +-1
    vector's dot with an unrelated d is ~N(0, |d|^2)), so the projections see
    what a norm alone would miss (a sign, a permutation)."""
    import numpy as np
    x = x.astype(np.float64)
    return [float(np.sqrt(np.dot(x, x)))] + [float(np.dot(signs(len(x), k), x))
                                              for k in range(RUN_PROJECTIONS)]


def read_grads(path):
    """A --dump-grads file (MKGRAD1, README "Equivalence tests") -> {name: float32 array}."""
    import numpy as np
    with open(path, "rb") as f:
        d = f.read()
    if d[:8] != b"MKGRAD1\n":
        raise ValueError("%s: not a gradient dump" % path)
    (count,), i, out = struct.unpack_from("<i", d, 8), 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<i", d, i)
        name, i = d[i + 4:i + 4 + n].decode(), i + 4 + n
        (n,) = struct.unpack_from("<q", d, i)
        out[name], i = np.frombuffer(d, "<f4", n, i + 8), i + 8 + 4 * n
    return out


def read_checkpoint(path):
    """A safetensors checkpoint -> ({name: float32 array}, metadata)."""
    import numpy as np
    with open(path, "rb") as f:
        d = f.read()
    (n,) = struct.unpack_from("<Q", d, 0)
    header = json.loads(d[8:8 + n])
    meta = header.pop("__metadata__", {})
    return {k: np.frombuffer(d, "<f4", (e["data_offsets"][1] - e["data_offsets"][0]) // 4,
                             8 + n + e["data_offsets"][0]) for k, e in header.items()}, meta


def run_mpi(merak, case):
    """One run case -> its record (losses; summaries and digests of the
    step-1 gradients and of the checkpoint after the last step)."""
    ranks, args = case.split("|", 1)
    with tempfile.TemporaryDirectory() as d:
        g, ck = os.path.join(d, "g.bin"), os.path.join(d, "ck.safetensors")
        cmd = [merak] + args.split(" ") + ["--dump-grads", g, "--save", ck]
        if int(ranks) > 1:
            mpiexec = os.environ.get("MPIEXEC", "mpiexec")
            cmd = [mpiexec] + os.environ.get("MPIEXEC_FLAGS", "").split() + ["-n", ranks] + cmd
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rec = make_record("run", case, p.returncode, p.stdout.decode(), p.stderr.decode())
        rec["grads_sha256"], rec["checkpoint_sha256"] = sha256_file(g), sha256_file(ck)
        if rec["grads_sha256"]:
            rec["grads"] = {k: tensor_summary(v) for k, v in read_grads(g).items()}
        if rec["checkpoint_sha256"]:
            tensors, meta = read_checkpoint(ck)
            rec["checkpoint"] = {k: tensor_summary(v) for k, v in tensors.items()}
            rec["metadata"] = {k: v for k, v in meta.items() if not k.startswith("crc32.")}
    return rec


def streams_digest(streams):
    return hashlib.sha256(json.dumps(streams, separators=(",", ":")).encode()).hexdigest()


def make_record(kind, case, rc, so, se):
    rec = {"case": case, "rc": rc, "stderr": se}
    if kind == "sched" and "--json" not in case.split(" "):
        rec["stdout"] = so
        return rec
    try:
        j = json.loads(so) if so.strip() else None
    except ValueError:
        j = None
    if j is None or not isinstance(j, dict):
        rec["stdout"] = so
        return rec
    if kind == "sched":  # the text form of the same case carries the streams
        rec["sha256"] = hashlib.sha256(so.encode()).hexdigest()
        j["streams"] = streams_digest(j.get("streams"))
    for k in DROP.get(kind, ()):
        j.pop(k, None)
    if kind in ("sim-ideal", "sim-clusters", "plan", "run"):
        drop_nested(j)
    rec["json"] = j
    return rec


def run_cases_of(kind, lines, batch, merak, fork):
    if kind == "run":
        return [run_mpi(merak, l) for l in lines]
    return [make_record(kind, *r) for r in run_batch(batch, lines, fork)]


# ---- comparing ------------------------------------------------------------

def diff_value(a, b, path, exact, out):
    """Append to out the differences of golden a and current b under path."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or a is None:
        if a != b or type(a) != type(b):
            out.append("%s: golden %s, now %s" % (path, json.dumps(a)[:200], json.dumps(b)[:200]))
    elif isinstance(a, int) and isinstance(b, int):
        if a != b:
            out.append("%s: golden %d, now %d" % (path, a, b))
    elif isinstance(a, float) and isinstance(b, float):
        d = abs(a - b)
        if (exact and a != b) or d > REL_TOL * max(abs(a), abs(b)):
            out.append("%s: golden %r, now %r (relative %.3g)" % (path, a, b, d / max(abs(a), abs(b))))
    elif isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            out.append("%s: keys golden %s, now %s" % (path, list(a), list(b)))
        for k in a:
            if k in b:
                diff_value(a[k], b[k], "%s.%s" % (path, k) if path else k, exact, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: length golden %d, now %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff_value(x, y, "%s[%d]" % (path, i), exact, out)
    else:
        out.append("%s: golden %s, now %s (type)" % (path, json.dumps(a)[:100], json.dumps(b)[:100]))


def diff_text(a, b):
    al, bl = a.split("\n"), b.split("\n")
    for i, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return "stdout line %d:\n    golden: %s\n    now:    %s" % (i + 1, x[:300], y[:300])
    return "stdout: golden %d lines, now %d" % (len(al), len(bl))


def diff_summaries(a, b, what, out):
    """Tensor summaries golden a, now b: per tensor, each of norm and
    projections within tol x norm (RUN_TOL; weights RUN_WEIGHT_TOL)."""
    if sorted(a or {}) != sorted(b or {}):
        out.append("%s: tensors golden %s, now %s" % (what, sorted(a or {})[:8], sorted(b or {})[:8]))
        return
    for k in sorted(a):
        tol = RUN_TOL if what == "grads" or k.startswith("optim.") else RUN_WEIGHT_TOL
        scale = max(a[k][0], b[k][0])
        worst = max(abs(x - y) for x, y in zip(a[k], b[k]))
        if len(a[k]) != len(b[k]) or worst > tol * scale:
            out.append("%s %s: golden %s, now %s (change %.3g of the norm, tolerance %g)" % (
                what, k, a[k][:2], b[k][:2], worst / scale if scale else float("inf"), tol))


def diff_run(g, r, out):
    """A run case: losses within RUN_LOSS_TOL relative, tensors as above."""
    gl, rl = (g.get("json") or {}).get("losses"), (r.get("json") or {}).get("losses")
    gj = dict(g.get("json") or {}, losses=None)
    rj = dict(r.get("json") or {}, losses=None)
    diff_value(gj, rj, "", True, out)
    if not isinstance(gl, list) or not isinstance(rl, list) or len(gl) != len(rl):
        out.append("losses: golden %s, now %s" % (gl, rl))
    else:
        for i, (x, y) in enumerate(zip(gl, rl)):
            if abs(x - y) > RUN_LOSS_TOL * max(abs(x), abs(y)):
                out.append("losses[%d]: golden %r, now %r (relative %.3g, tolerance %g)" % (
                    i, x, y, abs(x - y) / max(abs(x), abs(y)), RUN_LOSS_TOL))
    if g.get("metadata") != r.get("metadata"):
        out.append("checkpoint metadata: golden %s, now %s" % (
            json.dumps(g.get("metadata"))[:300], json.dumps(r.get("metadata"))[:300]))
    for what in ("grads", "checkpoint"):
        diff_summaries(g.get(what), r.get(what), what, out)


def diff_record(kind, g, r):
    out = []
    for k in ["rc", "stderr"] + ([] if kind == "run" else ["grads_sha256", "checkpoint_sha256"]):
        if g.get(k) != r.get(k):
            out.append("%s: golden %s, now %s" % (k, json.dumps(g.get(k))[:300], json.dumps(r.get(k))[:300]))
    if kind == "run":
        diff_run(g, r, out)
    elif "stdout" in g or "stdout" in r:
        if g.get("stdout") != r.get("stdout"):
            out.append(diff_text(g.get("stdout") or "", r.get("stdout") or ""))
    else:
        diff_value(g.get("json"), r.get("json"), "", kind == "sched" or EXACT, out)
        if g.get("sha256") != r.get("sha256") and not out:
            out.append("stdout bytes (sha256) differ: the same values, printed differently")
    return out


def bitwise_classes(golden, now, lines):
    """Cases the recording found bitwise equal (the same gradients or
    checkpoint bytes: schedules and recompute modes that promise identical
    results) must be equal in this run too, on whatever CPU it runs."""
    out = []
    for key in ("grads_sha256", "checkpoint_sha256"):
        first = {}
        for i, g in enumerate(golden):
            if g.get(key) is None:
                continue
            j = first.setdefault(g[key], i)
            if j != i and now[i].get(key) != now[j].get(key):
                out.append("%s: %s and %s were bitwise equal when recorded, now differ" % (
                    key, lines[j], lines[i]))
    return out


def load(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(l) for l in f]


EXACT = False  # check --exact: every real bitwise too (a proof, not the tolerance of a build)


def check(kind, path, batch, merak, sample, only=None, extra="", ignore=()):
    """extra: words appended to every case as it runs (the cases keep their
    recorded names); ignore: keys dropped from the new results, at any
    depth.  Both for proofs that an old recording still holds under an
    explicit flag (issue 34: --attention-backend unfused)."""
    golden = load(path)
    lines = list(CASES[kind]())
    if [g["case"] for g in golden] != lines:
        sys.exit("golden: %s holds %d cases, the %s grid has %d (or another order): the grid in golden.py "
                 "changed; rerun tests/golden/record.sh" % (path, len(golden), kind, len(lines)))
    if only is not None:
        if any(i < 0 or i >= len(lines) for i in only):
            sys.exit("golden: --cases: %s has cases 0 to %d" % (kind, len(lines) - 1))
        golden, lines = [golden[i] for i in only], [lines[i] for i in only]
    run_lines = [l + " " + extra for l in lines] if extra else lines
    now = run_cases_of(kind, run_lines, batch, merak, fork=False)
    for r, l in zip(now, lines):
        r["case"] = l
        strip_keys(r.get("json"), ignore)
    bad = [i for i in range(len(lines)) if diff_record(kind, golden[i], now[i])]
    if bad and kind != "run":  # state left by an earlier case, or a real change?
        again = run_cases_of(kind, [run_lines[i] for i in bad], batch, merak, fork=True)
        for r in again:
            strip_keys(r.get("json"), ignore)
        for i, r in zip(bad, again):
            if not diff_record(kind, golden[i], r):
                print("golden: %s: %s differs only after earlier cases in one process (static state?): "
                      "batch.c runs them in one process" % (kind, lines[i]))
                now[i] = r
    fails = 0
    if kind == "run":
        for x in bitwise_classes(golden, now, lines):
            fails += 1
            print("FAIL: run: " + x)
    for i in range(len(lines)):
        d = diff_record(kind, golden[i], now[i])
        if d:
            fails += 1
            if fails <= 20:
                print("FAIL: %s: merak %s" % (kind, lines[i]))
                for x in d[:8]:
                    print("    " + x)
    if sample and merak and kind != "run" and not extra and not ignore:
        picked = lines[::sample]
        for l, r in zip(picked, [make_record(kind, *x) for x in run_program(merak, picked)]):
            d = diff_record(kind, golden[lines.index(l)], r)
            if d:
                fails += 1
                print("FAIL: %s: ./merak %s (the program itself, not the batch driver)" % (kind, l))
                for x in d[:8]:
                    print("    " + x)
    print("%s: %d cases, %d differ from %s%s" % (kind, len(lines), fails, os.path.basename(path),
          " (and %d through ./merak)" % len(lines[::sample]) if sample and kind != "run" else ""))
    return 1 if fails else 0


def record(kind, path, batch, merak):
    lines = list(CASES[kind]())
    recs = run_cases_of(kind, lines, batch, merak, fork=True)
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as f:
        for r in recs:
            f.write((json.dumps(r, separators=(",", ":")) + "\n").encode())
    print("%s: %d cases -> %s (%d bytes)" % (kind, len(lines), path, os.path.getsize(path)))
    return 0


def main(argv):
    opts = {"--batch": None, "--merak": None, "--sample": "0", "--cases": None, "--extra": "", "--ignore": ""}
    pos = []
    it = iter(argv)
    global EXACT
    for a in it:
        if a == "--exact":
            EXACT = True
        elif a in opts:
            opts[a] = next(it)
        else:
            pos.append(a)
    if len(pos) < 2 or pos[0] not in ("record", "check", "cases") or pos[1] not in CASES:
        sys.exit(__doc__)
    kind = pos[1]
    if pos[0] == "cases":
        for l in CASES[kind]():
            print(l)
        return 0
    if len(pos) != 3:
        sys.exit(__doc__)
    if pos[0] == "record":
        return record(kind, pos[2], opts["--batch"], opts["--merak"])
    only = [int(x) for x in opts["--cases"].split(",")] if opts["--cases"] else None
    ignore = [k for k in opts["--ignore"].split(",") if k]
    return check(kind, pos[2], opts["--batch"], opts["--merak"], int(opts["--sample"]), only, opts["--extra"], ignore)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
