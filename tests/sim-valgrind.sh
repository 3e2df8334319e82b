#!/bin/sh
# valgrind is clean on a small simulation (all schedules' code paths: TP,
# DP buckets, ZeRO-1, tied reduction, trace writer).
. "${top_srcdir:-.}/tests/lib.sh"
[ -n "$VALGRIND" ] || { echo "valgrind not found: skipped"; exit 77; }
V="$VALGRIND --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite -q"
expect_ok "valgrind: merak sim zb-h1 + trace" $V $MERAK sim --model gpt-tiny --cluster dgx-a100 --gbs 16 \
  --dp 2 --pp 2 --tp 2 --schedule zb-h1 --zero 1 --tp-overlap 2 --trace "$tmpdir/t.json" --json
expect_ok "valgrind: merak sim merak + auto" $V $MERAK sim --model gpt-tiny --cluster rtx3090-pcie --gbs 16 \
  --dp 2 --pp 4 --schedule merak --recompute auto --sequence-parallel
expect_ok "valgrind: interleaved from a cluster JSON" $V $MERAK sim --model gpt-tiny --gbs 16 --pp 2 --vpp 2 \
  --cluster "$top_srcdir/traces/clusters/rtx3090-pcie.json"
finish
