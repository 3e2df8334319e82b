#!/bin/sh
# experiments/memory (issue 34): the published half of the memory
# experiment runs (every row of published.json replays), and no published
# run is predicted not to fit the device it ran on.
. "${top_srcdir:-.}/tests/lib.sh"
"$PYTHON" -c "import json, csv" 2>/dev/null || { echo "no python: skipped"; exit 77; }
expect_ok "memory.py replays published.json" \
  "$PYTHON" "$top_srcdir/experiments/memory/memory.py" --merak "$MERAK" --out "$tmpdir/r" --no-run --no-plot
check "one CSV row per published run" "$PYTHON" -c "
import csv, json, sys
rows = list(csv.DictReader(open('$tmpdir/r/memory.csv')))
n = len(json.load(open('$top_srcdir/experiments/memory/published.json'))['rows'])
assert len(rows) == n > 0, (len(rows), n)"
check "every published run fits" "$PYTHON" -c "
import csv
bad = [r['run'] for r in csv.DictReader(open('$tmpdir/r/memory.csv')) if r['fits'] != '1']
assert not bad, bad"
check "summary table written" grep -q "mean abs error" "$tmpdir/r/summary.md"
finish
