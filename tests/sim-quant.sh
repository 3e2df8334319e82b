#!/bin/sh
# Tile and wave quantization of weight GEMMs (sim/cost.c): a cluster
# file that gives the device's SM count and GEMM tile makes GEMM-bound
# steps slower than the same file without them; sms alone (the presets
# give it, for the share of SMs an all-to-all takes) quantizes nothing; a
# tile without sms is refused (src/plan/cluster.c says why the presets
# give no tile).
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
base="$top_srcdir/traces/clusters/rtx3090-pcie.json"
mk() { "$PY" -c "import json, sys
c = json.load(open(sys.argv[1])); c['device'].update(json.loads(sys.argv[3])); json.dump(c, open(sys.argv[2], 'w'))" \
  "$base" "$1" "$2"; }
step() { "$PY" -c "import json, sys; print(repr(json.load(open(sys.argv[1]))['step_time_s']))" "$1"; }
mk "$tmpdir/q.json" '{"sms": 82, "gemm_tile_m": 256, "gemm_tile_n": 128}'
mk "$tmpdir/sms.json" '{"sms": 82}'
mk "$tmpdir/bad.json" '{"gemm_tile_m": 256, "gemm_tile_n": 128}'
M="sim --model gpt-1.5b --dp 1 --pp 2 --tp 1 --gbs 8 --json"
expect_ok "without quantization" $MERAK $M --cluster "$base"
cp "$tmpdir/out" "$tmpdir/a.json"
expect_ok "with sms and tile" $MERAK $M --cluster "$tmpdir/q.json"
check "quantization makes the step slower ($(step "$tmpdir/a.json") -> $(step "$tmpdir/out"))" "$PY" -c "import sys
assert float(sys.argv[2]) > float(sys.argv[1]) * 1.01" "$(step "$tmpdir/a.json")" "$(step "$tmpdir/out")"
expect_ok "sms alone" $MERAK $M --cluster "$tmpdir/sms.json"
check "sms alone: no quantization, the same step ($(step "$tmpdir/out"))" test "$(step "$tmpdir/a.json")" = "$(step "$tmpdir/out")"
expect_fail "a tile without sms" "a GEMM tile needs sms and both gemm_tile_m and gemm_tile_n >= 1" -- \
  $MERAK $M --cluster "$tmpdir/bad.json"
finish
