#!/bin/sh
# The plotting scripts draw any trace (skipped without matplotlib).
. "${top_srcdir:-.}/tests/lib.sh"
"$PYTHON" -c "import matplotlib" 2>/dev/null || { echo "no matplotlib: skipped"; exit 77; }
$MERAK sim --model gpt-tiny --cluster dgx-a100 --gbs 16 --dp 2 --pp 4 --tp 2 --schedule merak \
  --recompute stage-aware:0.5 --trace "$tmpdir/t.json" >/dev/null
$MERAK sim --model gpt-tiny --cluster dgx-a100 --gbs 16 --dp 2 --pp 4 --tp 2 --trace "$tmpdir/u.json" >/dev/null
expect_ok "plot_timeline" "$PYTHON" "$top_srcdir/experiments/plot_timeline.py" "$tmpdir/t.json" -o "$tmpdir/t.png"
expect_ok "plot_timeline --overlay" "$PYTHON" "$top_srcdir/experiments/plot_timeline.py" "$tmpdir/t.json" \
  --overlay "$tmpdir/u.json" -o "$tmpdir/o.png"
expect_ok "plot_memory" "$PYTHON" "$top_srcdir/experiments/plot_memory.py" "$tmpdir/t.json" -o "$tmpdir/m.png"
check "PNGs written" sh -c "[ -s $tmpdir/t.png ] && [ -s $tmpdir/o.png ] && [ -s $tmpdir/m.png ]"
finish
