#!/bin/sh
# merak plan's progress bar (issue 20): on stderr, on a terminal or with
# MERAK_PROGRESS=1; it covers the whole search (generating, then
# simulating, then one final line) and its final counts are the summary's.
. "${top_srcdir:-.}/tests/lib.sh"
A="--model gpt-tiny --cluster dgx-a100 --gpus 8 --gbs 32"
MERAK_PROGRESS=1 "$MERAK" plan $A >"$tmpdir/out" 2>"$tmpdir/err"
check "forced: exit 0" [ $? -eq 0 ]
tr '\r' '\n' <"$tmpdir/err" | grep . >"$tmpdir/bar"
check "generating first, from 0 of the layouts" grep -q '^plan \[ *\] 1/2 generating: 0/[0-9]* layouts, 0 candidates' "$tmpdir/bar"
check "then simulating" grep -q "^plan \[.*\] 2/2 simulating: [0-9]* simulated, at most [0-9]* to go; [0-9]* settled, [0-9]* fit" "$tmpdir/bar"
tail -n 1 "$tmpdir/bar" >"$tmpdir/last"
check "the last line: a full bar, done" grep -q '^plan \[#\{30\}\] done: ' "$tmpdir/last"
# done: L layouts, C candidates, T settled, M over memory, D duplicates, S simulated, B pruned by bound
# = searched C candidates in L layouts (T settled: M over memory, D duplicates; S simulated, B pruned by bound)
set -- $(sed -n 's/.*done: \([0-9]*\) layouts, \([0-9]*\) candidates, \([0-9]*\) settled, \([0-9]*\) over memory, \([0-9]*\) duplicates, \([0-9]*\) simulated, \([0-9]*\) pruned by bound.*/\1 \2 \3 \4 \5 \6 \7/p' "$tmpdir/last")
check "... seven counts on the final line" [ $# -eq 7 ]
check "... over memory + duplicates + simulated + pruned by bound = candidates" [ $(($4 + $5 + $6 + $7)) -eq "$2" ]
check "... over memory + duplicates + simulated <= settled <= candidates" [ $(($4 + $5 + $6)) -le "$3" -a "$3" -le "$2" ]
check "... = the summary's" grep -q "^searched $2 candidates in $1 layouts ($3 settled: $4 over memory, $5 duplicates; $6 simulated, $7 pruned by bound) in " "$tmpdir/out"
check "counts never go down, layouts never past their total" awk '
/generating/ { split($0, a, "generating: "); split(a[2], b, "[/ ]"); if (b[1] + 0 > b[2] + 0 || b[1] + 0 < last) bad = 1; last = b[1] + 0 }
END { exit bad }' "$tmpdir/bar"
check "simulating: simulated + at most to go never grows (the bound only prunes more)" awk '
/simulating/ { split($0, a, "simulating: "); split(a[2], b, " "); t = b[1] + b[5]
               if (seen && t > last) bad = 1; last = t; seen = 1 }
END { exit bad || !seen }' "$tmpdir/bar"
MERAK_PROGRESS=1 "$MERAK" plan $A --json >"$tmpdir/j" 2>"$tmpdir/err"
check "--json: stdout is still one JSON object" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmpdir/j"
"$MERAK" plan $A >"$tmpdir/out" 2>"$tmpdir/err"
check "stderr not a terminal: no bar" [ ! -s "$tmpdir/err" ]
MERAK_PROGRESS=0 "$MERAK" plan $A >"$tmpdir/out" 2>"$tmpdir/err"
check "MERAK_PROGRESS=0: no bar" [ ! -s "$tmpdir/err" ]
finish
