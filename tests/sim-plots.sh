#!/bin/sh
# The plotting scripts draw any trace (skipped without matplotlib): lanes,
# a window, the density view of a long pipeline; the title comes from the
# trace's metadata; a bad file is one line, exit 2.
. "${top_srcdir:-.}/tests/lib.sh"
"$PYTHON" -c "import matplotlib, numpy" 2>/dev/null || { echo "no matplotlib: skipped"; exit 77; }
E="$top_srcdir/experiments"
$MERAK sim --model gpt-tiny --cluster dgx-a100 --gbs 16 --dp 2 --pp 4 --tp 2 --schedule merak \
  --recompute stage-aware:0.5 --trace "$tmpdir/t.json" >/dev/null
$MERAK sim --model gpt-tiny --cluster dgx-a100 --gbs 16 --dp 2 --pp 4 --tp 2 --trace "$tmpdir/u.json" >/dev/null
# 256 micro-batches and a ZeRO-1 tied embedding (AR.tied on dp's second lane)
$MERAK sim --model gpt2-124m --cluster dgx-a100 --gbs 256 --pp 4 --tp 2 --zero 1 --trace "$tmpdir/long.json" >/dev/null
expect_ok "plot_timeline" "$PYTHON" "$E/plot_timeline.py" "$tmpdir/t.json" -o "$tmpdir/t.png"
expect_ok "plot_timeline --overlay" "$PYTHON" "$E/plot_timeline.py" "$tmpdir/t.json" \
  --overlay "$tmpdir/u.json" -o "$tmpdir/o.png"
expect_ok "plot_timeline, 256 micro-batches (auto: density)" "$PYTHON" "$E/plot_timeline.py" "$tmpdir/long.json" \
  -o "$tmpdir/long.png"
expect_ok "... --window 0:40 (events)" "$PYTHON" "$E/plot_timeline.py" "$tmpdir/long.json" -o "$tmpdir/w.png" \
  --window 0:40
expect_ok "plot_memory" "$PYTHON" "$E/plot_memory.py" "$tmpdir/t.json" -o "$tmpdir/m.png"
expect_ok "plot_memory --window" "$PYTHON" "$E/plot_memory.py" "$tmpdir/long.json" -o "$tmpdir/mw.png" --window 0:60
check "PNGs written" sh -c "for f in t o long w m mw; do [ -s $tmpdir/\$f.png ] || exit 1; done"
check "title from the metadata; auto view: density at 256 micro-batches, events in a window; lane rows" \
  "$PYTHON" -c '
import sys
sys.path.insert(0, sys.argv[1])
import plot_timeline as p
ev, meta, names = p.load(sys.argv[2])
t = p.title_of(sys.argv[2], meta)
assert t == "gpt2-124m, dp 1 x pp 4 x tp 2, 1f1b, 256 micro-batches; merak sim", t
assert p.track_label((0, 13), names) == "rank 0 dp #2" and p.track_label((0, 13), {}) == "rank 0 dp #2"
rows = sorted({(0, 13), (0, 3), (0, 1), (2, 0)}, key=p.track_key)
assert rows == [(0, 1), (0, 3), (0, 13), (2, 0)], rows
' "$E" "$tmpdir/long.json"
# bad input: one line naming the file, exit 2 (no traceback)
printf '{"traceEvents":[' >"$tmpdir/cut.json"
printf '{"traceEvents":[{"ph":"X","name":"F0","pid":0,"ts":"a","dur":1}]}' >"$tmpdir/badts.json"
for s in plot_timeline plot_memory; do
  expect_fail "$s: missing file" "^$s: .*none.json: cannot read" -- "$PYTHON" "$E/$s.py" "$tmpdir/none.json" -o "$tmpdir/x.png"
  expect_fail "$s: truncated JSON" "^$s: .*cut.json: not a JSON trace" -- "$PYTHON" "$E/$s.py" "$tmpdir/cut.json" -o "$tmpdir/x.png"
  expect_fail "$s: unwritable output" "^$s: .*cannot write" -- "$PYTHON" "$E/$s.py" "$tmpdir/t.json" -o "$tmpdir/no/x.png"
done
expect_fail "plot_timeline: a bad event" "badts.json: complete event 0 needs" -- \
  "$PYTHON" "$E/plot_timeline.py" "$tmpdir/badts.json" -o "$tmpdir/x.png"
expect_fail "plot_memory: no counters" "badts.json: no memory counter events" -- \
  "$PYTHON" "$E/plot_memory.py" "$tmpdir/badts.json" -o "$tmpdir/x.png"
expect_fail "plot_timeline: bad window" "window 5:1: want 0 <= T0 < T1" -- \
  "$PYTHON" "$E/plot_timeline.py" "$tmpdir/t.json" -o "$tmpdir/x.png" --window 5:1
finish
