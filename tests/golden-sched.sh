#!/bin/sh
# The scheduler's streams against tests/golden/sched.jsonl.gz (a permanent
# invariant, issue 14): every schedule over p, m, recompute and vpp, the
# text form (streams, unit-cost timeline) and --json exactly, refusals with
# their exit status and message.  Every 250th case also runs through
# ./merak itself.  Regenerate: tests/golden/record.sh (read it first).
: "${MERAK:=${top_builddir:-.}/merak}"
"${PYTHON:-python3}" -c "import gzip, json" 2>/dev/null || { echo "no python3: skipped"; exit 77; }
exec "${PYTHON:-python3}" "$top_srcdir/tests/golden/golden.py" check sched "$top_srcdir/tests/golden/sched.jsonl.gz" \
  --batch "$top_builddir/tests/golden/batch" --merak "$MERAK" --sample 250
