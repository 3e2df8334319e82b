#!/bin/sh
# merak sim: human and JSON output, --plan round trip, traces, cluster JSON,
# a plan that does not fit (a result: exit 0 with a warning).
. "${top_srcdir:-.}/tests/lib.sh"
M="--model gpt-tiny --cluster dgx-a100 --gbs 32"

expect_ok "human summary" $MERAK sim $M --dp 2 --pp 2 --tp 2
check "summary names step time, MFU, memory and comm" sh -c \
  "grep -q 'step time' $tmpdir/out && grep -q MFU $tmpdir/out && grep -q 'peak [KMGT]iB' $tmpdir/out && grep -q 'tp (collectives)' $tmpdir/out"

expect_ok "json" $MERAK sim $M --dp 2 --pp 2 --tp 2 --json
cp "$tmpdir/out" "$tmpdir/a.json"
for k in step_time_s tokens_per_s tflops_per_gpu mfu bubble_fraction peak_memory_bytes memory_limit_bytes \
         fits exposed_comm_s overlapped_comm_s '"plan"' stage_bounds; do
  check "json has $k" grep -q "$k" "$tmpdir/a.json"
done

# --plan: the plan object from --json runs unchanged and gives the same step
"$PYTHON" -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2],'w'))" \
  "$tmpdir/a.json" "$tmpdir/plan.json"
expect_ok "--plan FILE" $MERAK sim --plan "$tmpdir/plan.json" --json
check "--plan gives the same step time" sh -c \
  "[ \"\$(grep step_time_s $tmpdir/a.json)\" = \"\$(grep step_time_s $tmpdir/out)\" ]"

# every schedule, overlap level, SP, ZeRO-1 and recompute policy runs
for opt in "--schedule gpipe" "--schedule merak" "--schedule merak-pre" "--schedule merak-last" \
           "--schedule zb-h1" "--schedule interleaved --vpp 2" "--tp-overlap 1" "--tp-overlap 2" \
           "--tp-overlap 3" "--sequence-parallel --recompute selective" "--zero 1" "--recompute auto" \
           "--recompute stage-aware:0.5" "--recompute none"; do
  expect_ok "runs with $opt" $MERAK sim $M --dp 2 --pp 2 --tp 2 $opt --json
done

# trace: Chrome Trace Event JSON with the shared names
expect_ok "trace" $MERAK sim $M --dp 2 --pp 2 --tp 2 --schedule zb-h1 --trace "$tmpdir/t.json"
check "trace is JSON with X and C events, named streams and ops" "$PYTHON" -c "
import json, sys
d = json.load(open('$tmpdir/t.json'))
ev = d['traceEvents']
names = {e['name'] for e in ev if e['ph'] == 'X'}
assert {'F0', 'B_IN0', 'B_W0', 'SEND_ACT0', 'AR.tp', 'AR.dp', 'AR.tied', 'OPT'} <= names, names
assert any(e['ph'] == 'C' for e in ev)
assert all(set(e['args']) == {'stage', 'mb', 'chunk', 'layer'} for e in ev if e['ph'] == 'X')
assert {e['pid'] for e in ev if e['ph'] == 'X'} == {0, 4}
"
check "no temporary trace file left" sh -c "! ls $tmpdir/t.json.tmp.* 2>/dev/null"

# cluster JSON gives the preset's result
expect_ok "cluster json" $MERAK sim --model gpt-tiny --gbs 32 --pp 2 --cluster "$top_srcdir/traces/clusters/rtx3090-pcie.json" --json
grep step_time_s "$tmpdir/out" >"$tmpdir/j1"
$MERAK sim --model gpt-tiny --gbs 32 --pp 2 --cluster rtx3090-pcie --json | grep step_time_s >"$tmpdir/j2"
check "cluster JSON = preset" cmp -s "$tmpdir/j1" "$tmpdir/j2"

# not fitting is a result
$MERAK sim --model gpt-20b --pp 8 --gbs 64 --json >"$tmpdir/out" 2>"$tmpdir/err"; rc=$?
check "does not fit: exit 0" [ $rc -eq 0 ]
check "does not fit: fits false" grep -q '"fits": false' "$tmpdir/out"
check "does not fit: one warning" sh -c "[ \$(wc -l <$tmpdir/err) -eq 1 ] && grep -q warning $tmpdir/err"
# gb200-nvl72 (issue 34): 72 GPUs in one NVLink domain, so dp 9 x tp 8 keeps
# its gradient all-reduce on NVLink, where dgx-b200 (8 per node) crosses
# InfiniBand: the same layout spends less on DP, and auto is flash there
for c in gb200-nvl72 dgx-b200; do
  $MERAK sim --model llama-3-8b --cluster $c --dp 9 --tp 8 --gbs 72 --json >"$tmpdir/$c.json" 2>"$tmpdir/err" ||
    echo "FAIL: sim on $c: $(cat "$tmpdir/err")"
done
check "gb200-nvl72: DP inside the 72-GPU NVLink domain costs less than across dgx-b200 nodes, attention flash" \
  "${PYTHON:-python3}" -c "import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
dp = lambda j: j['exposed_comm_s']['dp'] + j['overlapped_comm_s']['dp']
assert a['attention'] == 'flash' and a['fits'], a['attention']
assert dp(a) < dp(b) / 5, (dp(a), dp(b))" "$tmpdir/gb200-nvl72.json" "$tmpdir/dgx-b200.json"
# h100-96gb-500w (issue 34): torchtitan's benchmark H100, 96 GB less the
# CUDA context (287,047,680 bytes, every GPU preset), flash
check "h100-96gb-500w: a 96 GB limit less the CUDA context, attention flash" sh -c "$MERAK sim --model llama-3-8b --cluster h100-96gb-500w \
  --dp 8 --zero 3 --gbs 16 --mbs 2 --json | '${PYTHON:-python3}' -c \"import json, sys
j = json.load(sys.stdin); assert j['memory_limit_bytes'] == 96e9 - 287047680 and j['attention'] == 'flash', j['memory_limit_bytes']\""
# a100-800g (issue 38): dgx-a100 with half its NICs (vTrain's 800 Gb/s a
# node).  Inside a node the same step to the bit; across two nodes the DP
# all-reduce's inter-node phase (dp 16 less dp 8 on dgx-a100: the intra-node
# phases are the same) takes twice as long, so it adds one such phase
for c in dgx-a100 a100-800g; do for d in 8 16; do
  $MERAK sim --cluster $c --model gpt-2.5b --dp $d --gbs $((d * 4)) --mbs 4 --no-overlap-grad-reduce --json \
    >"$tmpdir/$c-$d.json" || echo "FAIL: sim on $c at dp $d"
done; done
check "a100-800g: dgx-a100 inside a node, its inter-node all-reduce phase twice as long" "${PYTHON:-python3}" -c "
import json, sys
j = {f: json.load(open(sys.argv[1] + '/' + f + '.json')) for f in ('dgx-a100-8', 'dgx-a100-16', 'a100-800g-8', 'a100-800g-16')}
dp = lambda f: j[f]['exposed_comm_s']['dp']
assert j['a100-800g-8']['step_time_s'] == j['dgx-a100-8']['step_time_s'], 'one node differs'
inter, extra = dp('dgx-a100-16') - dp('dgx-a100-8'), dp('a100-800g-16') - dp('dgx-a100-16')
assert inter > 0.01 and abs(extra / inter - 1) < 0.03, (inter, extra)" "$tmpdir"
# --scatter-gather-tensors-in-pipeline (issue 38; the sends' closed form is
# test_sim's): the headline says so, a plan file keeps it and replays to the
# same step, the step is shorter across nodes, merak plan takes it, run refuses it
S="--model gpt-8.3b --cluster dgx-a100 --pp 2 --tp 8 --gbs 8 --mbs 1"
$MERAK sim $S --json >"$tmpdir/sg0.json" && $MERAK sim $S --scatter-gather-tensors-in-pipeline --json >"$tmpdir/sg1.json" &&
  $MERAK sim $S --scatter-gather-tensors-in-pipeline >"$tmpdir/sg1.txt" || echo "FAIL: sim --scatter-gather-tensors-in-pipeline"
check "scatter-gather: named, kept in the plan, a shorter step" "${PYTHON:-python3}" -c "
import json, sys
a, b = (json.load(open(sys.argv[1] + '/sg%d.json' % i)) for i in (0, 1))
assert b['plan']['scatter_gather_tensors_in_pipeline'] is True and 'scatter_gather_tensors_in_pipeline' not in a['plan']
assert b['step_time_s'] < a['step_time_s'], (a['step_time_s'], b['step_time_s'])
assert 'pipeline sends scatter-gathered: 1/8' in open(sys.argv[1] + '/sg1.txt').read()
json.dump(b['plan'], open(sys.argv[1] + '/sg.plan.json', 'w'))" "$tmpdir"
check "scatter-gather: the plan file replays to the same step" sh -c "'$MERAK' sim --plan '$tmpdir/sg.plan.json' --json |
  '${PYTHON:-python3}' -c 'import json, sys; a = json.load(sys.stdin); b = json.load(open(sys.argv[1]));
sys.exit(0 if a[\"step_time_s\"] == b[\"step_time_s\"] else 1)' '$tmpdir/sg1.json'"
expect_ok "merak plan takes --scatter-gather-tensors-in-pipeline" $MERAK plan --model gpt-tiny --gpus 4 --gbs 8 \
  --scatter-gather-tensors-in-pipeline --top 1
expect_fail "merak run refuses --scatter-gather-tensors-in-pipeline" "is for merak sim and merak plan" -- $MERAK run \
  --scatter-gather-tensors-in-pipeline
# uneven first and last stages (issue 35; Megatron-Core's
# --decoder-first/last-pipeline-num-layers): llama-3-8b's 32 blocks over
# pp 4 as 7 / 9 / 9 / 7 (the first stage also holds the embedding, the
# last the head: 2 layers a block); the plan file names them and replays;
# a split that does not divide, one with vpp > 1 and one under another
# partition are refused
U="--model llama-3-8b --cluster dgx-h100 --pp 4 --gbs 16"
$MERAK sim $U --decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 --json >"$tmpdir/u.json" ||
  echo "FAIL: sim uneven stages"
check "uneven stages: bounds [0, 15, 33, 51, 66], named in the plan, the plan file replays" "${PYTHON:-python3}" -c "
import json, subprocess, sys
j = json.load(open('$tmpdir/u.json')); p = j['plan']
assert p['stage_bounds'] == [0, 15, 33, 51, 66], p['stage_bounds']
assert p['decoder_first_pipeline_num_layers'] == 7 and p['decoder_last_pipeline_num_layers'] == 7
json.dump(p, open('$tmpdir/up.json', 'w'))
r = json.loads(subprocess.run(['$MERAK', 'sim', '--plan', '$tmpdir/up.json', '--json'], capture_output=True,
                              text=True, check=True).stdout)
assert r['step_time_s'] == j['step_time_s'] and r['plan']['stage_bounds'] == p['stage_bounds']"
expect_fail "uneven stages that do not divide" "do not split into first 6" -- $MERAK sim $U \
  --decoder-first-pipeline-num-layers 6
expect_fail "uneven stages with vpp 2" "need pp >= 2 and vpp 1" -- $MERAK sim $U --schedule interleaved --vpp 2 \
  --decoder-first-pipeline-num-layers 6
expect_fail "uneven stages under the compute partition" "need --partition uniform" -- $MERAK sim $U \
  --partition compute --decoder-last-pipeline-num-layers 7
# issue 35's acceptance: on the ideal cluster zb-h2, zb-v and dualpipev
# idle less than 1f1b at pp 4 with 8 micro-batches
for k in 1f1b zb-h2 zb-v dualpipev; do
  "$MERAK" sim --cluster ideal --model gpt2-124m --pp 4 --gbs 8 --schedule $k --json >"$tmpdir/b-$k.json" 2>&1
done
check "zb-h2, zb-v, dualpipev idle less than 1f1b (ideal, pp 4, m 8)" "$PYTHON" -c '
import json, sys
idle = {}
for k in ("1f1b", "zb-h2", "zb-v", "dualpipev"):
    o = json.load(open("%s/b-%s.json" % (sys.argv[1], k)))
    assert o["plan"]["schedule"] == k and o["plan"]["micro_batches"] == 8, o["plan"]
    idle[k] = sum(o["bubble_fraction"]) / len(o["bubble_fraction"])
assert all(idle[k] < idle["1f1b"] for k in ("zb-h2", "zb-v", "dualpipev")), idle
' "$tmpdir"
# dualpipev's pairs hide EP all-to-alls behind the other op's compute
# (MoE, ep 4): part of its all-to-all time is overlapped, none of zb-v's
# (the same V placement and split backward, no pairs); the same
# all-to-all time in all, and a shorter step
for k in zb-v dualpipev; do
  "$MERAK" sim --model moe-tiny --cluster dgx-a100 --dp 4 --ep 4 --pp 2 --gbs 32 --schedule $k --json >"$tmpdir/e-$k.json" 2>&1
done
check "dualpipev overlaps EP all-to-alls, zb-v none" "$PYTHON" -c '
import json, sys
z, d = (json.load(open("%s/e-%s.json" % (sys.argv[1], k))) for k in ("zb-v", "dualpipev"))
tot = lambda o: o["exposed_comm_s"]["ep"] + o["overlapped_comm_s"]["ep"]
assert z["overlapped_comm_s"]["ep"] == 0 and d["overlapped_comm_s"]["ep"] > 0, (z["overlapped_comm_s"], d["overlapped_comm_s"])
assert abs(tot(z) - tot(d)) <= 1e-12 * tot(z) and d["step_time_s"] < z["step_time_s"]
' "$tmpdir"
finish
