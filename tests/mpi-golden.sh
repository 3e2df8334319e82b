#!/bin/sh
# The executor against tests/golden/run.jsonl.gz (guards the restructuring
# of issue 14): gpt-tiny, 3 steps, on one rank and on layouts of the
# equivalence tests (8 ranks x schedules, ZeRO-1, a padded vocabulary).
# Bitwise at the same layout: the losses as printed, and SHA-256 digests of
# the step-1 gradients (--dump-grads) and of the checkpoint after the last
# step (--save).  Regenerate: tests/golden/record.sh (read it first).
: "${MERAK:=${top_builddir:-.}/merak}"
"${PYTHON:-python3}" -c "import gzip, json" 2>/dev/null || { echo "no python3: skipped"; exit 77; }
exec "${PYTHON:-python3}" "$top_srcdir/tests/golden/golden.py" check run "$top_srcdir/tests/golden/run.jsonl.gz" \
  --merak "$MERAK"
