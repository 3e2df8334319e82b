#!/bin/sh
# Human output prints numbers in units that fit their magnitude (issue 20,
# src/cli/cli_fmt.c): no "0.0007 s", "0.01 GiB" or "0.000221B"; the why
# line says what its figures are; plurals in the cluster-size message.
# JSON output is unchanged (the goldens hold it).
. "${top_srcdir:-.}/tests/lib.sh"
expect_ok "models" "$MERAK" models
check "parameters as K / M / B" sh -c "grep -q '^  gpt-tiny .*  221 K  ' $tmpdir/out &&
  grep -q '^  gpt2-124m .*  124 M  ' $tmpdir/out && grep -q '^  gpt-1.5b .*  1.56 B  ' $tmpdir/out &&
  ! grep -q '[0-9]B  ' $tmpdir/out"
expect_ok "model" "$MERAK" model --model gpt-tiny
check "total line: count and bytes in units" grep -q '^total: 220544 parameters (221 K); activations 948 KiB per' "$tmpdir/out"
expect_ok "sim, a small model" "$MERAK" sim --model gpt-tiny --cluster dgx-a100 --gbs 32 --dp 2 --pp 2
check "step time in ms, memory in MiB, the limit in GiB, comm in µs" sh -c "
  grep -q '^step time  *[0-9.]* ms$' $tmpdir/out && grep -q 'peak MiB .*(memory in MiB)' $tmpdir/out &&
  grep -q '^memory limit 74.2 GiB per GPU' $tmpdir/out && grep -q 'exposed µs overlapped µs' $tmpdir/out"
check "the stage table says idle, not bubble" sh -c "grep -q '^stage    idle ' $tmpdir/out && ! grep -q bubble $tmpdir/out"
expect_ok "sim, a large model" "$MERAK" sim --dp 2 --pp 8 --tp 4
check "step time in s with 4 digits; memory in GiB" sh -c "
  grep -q '^step time  *[0-9][0-9]\.[0-9][0-9] s$' $tmpdir/out && grep -q 'peak GiB' $tmpdir/out"
expect_ok "plan" "$MERAK" plan --model gpt-tiny --cluster dgx-a100 --gpus 8 --gbs 32
check "plan table: step ms, idle, peak MiB" grep -q 'partition   step ms .* idle peak MiB$' "$tmpdir/out"
check "search time in ms" grep -q '^searched .* in [0-9.]* ms ([0-9.]* ms generating)$' "$tmpdir/out"
check "why: names the figure, in units (no e-05)" sh -c "
  grep -q '^why: #1 is .* faster than #2 (#1 vs #2: .*); #1 spends less on .*(.*mean per stage): [0-9.]* [mµn]*s vs [0-9.]* [mµn]*s per step$' $tmpdir/out &&
  ! grep -q 'e-0' $tmpdir/out"
check "the idle column explained" grep -q "^(idle: the compute stream's idle share" "$tmpdir/out"
expect_fail "more GPUs than the cluster: singular nodes and GPUs" \
  "8 GPUs exceed cluster 'h200', which has 1 node of 1 GPU \(1 GPU in all\)" -- \
  "$MERAK" plan --model gpt-tiny --cluster h200 --gpus 8
"$MERAK" plan --model gpt-tiny --cluster dgx-a100 --gpus 8 --gbs 32 --json >"$tmpdir/j"
check "--json keeps the planner's why text (goldens)" grep -q '"why": "#1 is .* s vs .* s per step"' "$tmpdir/j"
finish
