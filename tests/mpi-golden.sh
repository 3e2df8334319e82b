#!/bin/sh
# The executor against tests/golden/run.jsonl.gz (guards the restructuring
# of issue 14): gpt-tiny, 3 steps, on one rank and on layouts of the
# equivalence tests (8 ranks x schedules, ZeRO-1, a padded vocabulary).
# On any CPU (issue 32): losses, and per tensor the norm and projections of
# the step-1 gradients (--dump-grads) and of the checkpoint after the last
# step (--save), within tolerances that another OpenBLAS kernel family's
# rounding stays far inside (tests/golden/README.md); and bitwise where the
# recording was bitwise between cases (schedules that promise equal bytes).
# Then the same comparison must catch a GEMM wrong by 1e-4 (an LD_PRELOADed
# cblas_sgemm, tests/golden/sgemm_scale.c) and pass one off by 2^-23.
# Regenerate: tests/golden/record.sh (read it first).
: "${MERAK:=${top_builddir:-.}/merak}"
: "${PYTHON:=python3}"
"$PYTHON" -c "import gzip, json, numpy" 2>/dev/null || { echo "no python3 with numpy (python3-numpy): skipped"; exit 77; }
golden() { "$PYTHON" "$top_srcdir/tests/golden/golden.py" check run "$top_srcdir/tests/golden/run.jsonl.gz" \
  --merak "$MERAK" "$@"; }
golden || exit 1
shim=${top_builddir:-.}/tests/golden/.libs/sgemm_scale.so
[ -f "$shim" ] || { echo "FAIL: $shim not built (make check builds it)"; exit 1; }
out=$(mktemp); trap 'rm -f "$out"' EXIT
# one rank and dp 2 x pp 2 x tp 2 (cases 0 and 3)
LD_PRELOAD=$shim GOLDEN_SGEMM_SCALE=1e-4 golden --cases 0,3 >"$out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "2 differ" "$out"; then
  echo "ok: a GEMM wrong by 1e-4 is caught: $(grep -c '^    ' "$out") differences, e.g. $(grep -m1 '^    ' "$out")"
else
  echo "FAIL: a GEMM wrong by 1e-4 was not caught (rc=$rc):"; cat "$out"; exit 1
fi
if LD_PRELOAD=$shim GOLDEN_SGEMM_SCALE=1.1920929e-07 golden --cases 0,3 >"$out" 2>&1; then
  echo "ok: a GEMM off by 2^-23 (rounding) passes"
else
  echo "FAIL: a GEMM off by 2^-23 fails the tolerances (too tight for another CPU):"; cat "$out"; exit 1
fi
