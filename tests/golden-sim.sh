#!/bin/sh
# `merak sim --json` against tests/golden: on the ideal cluster (a permanent
# invariant, issue 14) and on dgx-a100 and rtx3090-pcie (guards the
# restructuring), and a few small `merak plan --json` searches.  Reals to
# 1e-12 relative, everything else exactly.  Every 250th case also runs
# through ./merak itself.  Regenerate: tests/golden/record.sh (read it first).
. "$top_srcdir/tests/lib.sh"
"${PYTHON:-python3}" -c "import gzip, json" 2>/dev/null || { echo "no python3: skipped"; exit 77; }
for k in sim-ideal sim-clusters plan; do
  "${PYTHON:-python3}" "$top_srcdir/tests/golden/golden.py" check $k "$top_srcdir/tests/golden/$k.jsonl.gz" \
    --batch "$top_builddir/tests/golden/batch" --merak "$MERAK" --sample 250 || fails=$((fails + 1))
done
finish
