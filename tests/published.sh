#!/bin/sh
# Fidelity regression (issue 15): replay the fixed subset of the published
# measured runs (experiments/published/) with merak sim and fail when its
# MAPE is more than one point above the committed figure (recorded.json,
# written by experiments/published/run.sh --record).  A regression check,
# not a timed test.
. "${top_srcdir:-.}/tests/lib.sh"
dir="$top_srcdir/experiments/published"
"$PYTHON" -c "import json" 2>/dev/null || { echo "no python: skipped"; exit 77; }
expect_ok "subset replay within a point of the recorded MAPE" \
  "$PYTHON" "$dir/replay.py" --merak "$MERAK" --out "$tmpdir/r" --check "$dir/recorded.json" --no-plot
cat "$tmpdir/out"
check "CSV has the subset's rows" sh -c "[ \$(wc -l <'$tmpdir/r/replay.csv') -ge 20 ]"
# breakdown.py: every replayed row in exactly one line of its table; bad input exits 2
"$PYTHON" "$dir/breakdown.py" --csv "$tmpdir/r/replay.csv" --by hidden,pp >"$tmpdir/bd" 2>&1
check "breakdown.py counts every subset row once" sh -c "
  [ \$(awk 'NR > 1 { n += \$3 } END { print n }' '$tmpdir/bd') -eq \$(($(wc -l <"$tmpdir/r/replay.csv") - 1)) ]"
check "breakdown.py refuses an unknown column with exit 2" sh -c "
  '$PYTHON' '$dir/breakdown.py' --csv '$tmpdir/r/replay.csv' --by nosuch 2>'$tmpdir/bde'; [ \$? -eq 2 ] &&
  grep -q 'unknown column nosuch' '$tmpdir/bde'"
# --fit: t = m (a + b L) + (c + d L) recovered exactly from rows made by it (a, b, c, d = 5, 3, 2, 0.4
# ms predicted, twice that measured); a pp > 1 row is left out; too few points are reported, not fitted
"$PYTHON" -c "
import csv, sys
w = csv.writer(open(sys.argv[1], 'w', newline=''))
w.writerow(['row', 'model', 'dp', 'pp', 'tp', 'mbs', 'measured_s', 'predicted_s', 'error', 'flags'])
i = 0
for L in (12, 16, 20, 24):
    for gbs in (8, 16, 32):
        t = (gbs // 2) * (5 + 3 * L) + (2 + 0.4 * L)
        w.writerow(['single-node#%d' % i, '%dx1024' % L, 1, 1, 1, 2, 2 * t / 1e3, t / 1e3, 1.0, '--gbs %d --mbs 2' % gbs])
        i += 1
w.writerow(['single-node#%d' % i, '12x1024', 1, 2, 1, 2, 1.0, 0.5, 1.0, '--gbs 8'])
w.writerow(['single-node#%d' % (i + 1), '12x2048', 1, 1, 1, 2, 1.0, 0.5, 1.0, '--gbs 8'])
" "$tmpdir/fit.csv"
"$PYTHON" "$dir/breakdown.py" --csv "$tmpdir/fit.csv" --by hidden,tp --fit >"$tmpdir/fit.out" 2>&1
cat "$tmpdir/fit.out"
check "breakdown.py --fit recovers a, b, c, d and leaves out pp > 1" sh -c "
  grep -Eq '^ *1024 +1 +12 [|] +10[.]00  6[.]00  4[.]00  0[.]80 [|] +5[.]00  3[.]00  2[.]00  0[.]40' '$tmpdir/fit.out' &&
  grep -Eq '^ *2048 +1 +1 [|] not fitted' '$tmpdir/fit.out'"
# the check can fail: against a recorded MAPE of 0 (more than a point below any
# figure the replay reaches) it must
"$PYTHON" -c "
import json, sys
r = json.load(open(sys.argv[1])); r['subset']['mape'] = 0.0
json.dump(r, open(sys.argv[2], 'w'))" "$dir/recorded.json" "$tmpdir/low.json"
check "a regression fails the check" sh -c "! '$PYTHON' '$dir/replay.py' --merak '$MERAK' --out '$tmpdir/r2' \
  --check '$tmpdir/low.json' --no-plot >'$tmpdir/low.out' 2>&1 && grep -q REGRESSED '$tmpdir/low.out'"
# an MoE row (model fields experts, topk, moe_ffn; the row's ep) is expressed, not reported unsupported
cat >"$tmpdir/moe.json" <<'EOF'
[{"source": "an MoE row, 2024", "table": "t", "model": {"arch": "llama", "layers": 4, "hidden": 1024, "heads": 8,
  "kv_heads": 8, "ffn": 2048, "seq": 1024, "vocab": 32000, "experts": 8, "topk": 2, "moe_ffn": 512}, "gpus": 8,
  "gpu_type": "H100", "tp": 1, "pp": 1, "dp": 8, "cp": null, "ep": 4, "vpp": null, "mbs": 1, "gbs": 16, "dtype": "bf16",
  "recompute": "none", "sequence_parallel": null, "distributed_optimizer": null,
  "measured": {"kind": "iteration_s", "value": 1.0}}]
EOF
"$PYTHON" "$dir/replay.py" --merak "$MERAK" --out "$tmpdir/m" --no-plot "$tmpdir/moe.json" >/dev/null 2>&1
check "an MoE row replays with its experts and ep" grep -q -- "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 .*--ep 4" \
  "$tmpdir/m/replay.csv"
# the MoE Model Zoo rows: ep folding tp ranks (32 over tp 2 x dp 16), DeepEP's dispatcher, Qwen3's
# head width and q/k norms expressed; the overlapped-all-to-all row with --overlap-moe-expert-parallel-comm
"$PYTHON" "$dir/replay.py" --merak "$MERAK" --out "$tmpdir/z" --no-plot "$dir/moe-modelzoo.json" >/dev/null 2>&1
check "MoE Model Zoo: the DeepEP row with ep 32 over tp 2 x dp 16, Qwen3's heads" grep -q -- \
  "--kv-channels 128 --qk-layernorm .*--dp 16 --pp 8 --tp 2 .*--ep 32 --moe-enable-deepep" "$tmpdir/z/replay.csv"
check "MoE Model Zoo: all 5 rows replayed, the A2A_OVERLAP row with Megatron-Core's merged 1F1B steps" sh -c "
  [ \$(grep -c '^moe-modelzoo#' '$tmpdir/z/replay.csv') -eq 5 ] &&
  grep -q '^moe-modelzoo#1,.*--moe-enable-deepep --overlap-moe-expert-parallel-comm' '$tmpdir/z/replay.csv' &&
  ! grep -q '^moe-modelzoo#' '$tmpdir/z/unsupported.csv'"
finish
