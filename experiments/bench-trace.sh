#!/bin/sh
# Trace reading speed: `merak trace summary` and `trace diff` on the
# simulator's own 16,384-GPU trace (GPT-175B, dp 32 x pp 64 x tp 8, gbs
# 32768 on dgx-a100: 134 MB, 931k events).  Prints wall seconds and peak
# RSS of each (/usr/bin/time).  The quadratic reader took 114 s and 2.0 GB
# for the summary; target: under 10 s.
MERAK=${MERAK:-./merak}
T=${TMPDIR:-/tmp}/bench-trace.$$.json
trap 'rm -f "$T"' EXIT
"$MERAK" sim --model gpt-175b --cluster dgx-a100 --dp 32 --pp 64 --tp 8 --gbs 32768 --trace "$T" >/dev/null || exit 1
echo "trace: $(wc -c <"$T") bytes"
for cmd in "summary $T" "diff $T $T"; do
  /usr/bin/time -f "trace ${cmd%% *}: %e s wall, %M KB peak" "$MERAK" trace $cmd >/dev/null
done
