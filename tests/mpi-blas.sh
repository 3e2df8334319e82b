#!/bin/sh
# OpenBLAS's kernel family (issue 37, src/cli/cli_blas.c): a user's
# OPENBLAS_CORETYPE wins and is named; where OpenBLAS falls back to its
# pre-AVX kernels (MK_TEST_BLAS_GENERIC=1 makes merak see that on any CPU)
# and the CPU has AVX2 or AVX-512, merak runs again with the best family
# the CPU has (AVX-512 F/BW/VL/DQ: SkylakeX, with BF16 Cooperlake; AVX2 and
# FMA: Haswell), says so in `merak version` and in run's first line, under
# mpiexec too, and trains the same.
. "$top_srcdir/tests/lib.sh"
want=
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  if has avx512_bf16; then want=Cooperlake; else want=SkylakeX; fi
elif has avx2 && has fma; then want=Haswell
elif has avx; then want=Sandybridge
fi

expect_ok "a user's OPENBLAS_CORETYPE wins" env OPENBLAS_CORETYPE=Prescott "$MERAK" version
check "  named as the user's" grep -q "^blas: OpenBLAS, Prescott kernels (OPENBLAS_CORETYPE=Prescott)" "$tmpdir/out"
expect_ok "OpenBLAS's own choice" env -u OPENBLAS_CORETYPE "$MERAK" version
check "  named: $(grep '^blas' "$tmpdir/out")" grep -q "^blas: OpenBLAS, .* kernels (\(OpenBLAS's choice\|merak's choice: OpenBLAS chose .*\))" \
  "$tmpdir/out"
expect_fail "a bad MK_TEST_BLAS_GENERIC" "MK_TEST_BLAS_GENERIC must be a switch from 0 to 1" -- \
  env MK_TEST_BLAS_GENERIC=2 "$MERAK" sim --model gpt-tiny
# under mpiexec OpenBLAS's idle workers sleep at once (they would spin on
# the other ranks' cores for ~0.1 s); a user's OPENBLAS_THREAD_TIMEOUT wins
W="env -u OPENBLAS_THREAD_TIMEOUT -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS"
expect_ok "mpiexec: OpenBLAS's idle threads sleep" $W "$MPIEXEC" $MPIEXEC_FLAGS -n 1 "$MERAK" version
check "  version says so" grep -q "^blas: OpenBLAS, .*, idle threads asleep after 2^4 cycles" "$tmpdir/out"
# one OpenBLAS thread (its variables' order): no workers to put asleep, no second image
for v in "OPENBLAS_NUM_THREADS=1" "GOTO_NUM_THREADS=1" "OMP_NUM_THREADS=1"; do
  expect_ok "mpiexec, $v: no re-execution" $W $v "$MPIEXEC" $MPIEXEC_FLAGS -n 1 "$MERAK" version
  check "  no thread setting" sh -c "! grep -q 'idle threads' '$tmpdir/out'"
done
expect_ok "mpiexec, OPENBLAS_NUM_THREADS=2 over OMP_NUM_THREADS=1: asleep" $W OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 \
  "$MPIEXEC" $MPIEXEC_FLAGS -n 1 "$MERAK" version
check "  version says so" grep -q "idle threads asleep after 2^4 cycles" "$tmpdir/out"
expect_ok "mpiexec: the user's OPENBLAS_THREAD_TIMEOUT" env OPENBLAS_THREAD_TIMEOUT=12 "$MPIEXEC" $MPIEXEC_FLAGS -n 1 \
  "$MERAK" version
check "  kept" grep -q "^blas: OpenBLAS, .*, idle threads asleep after 2^12 cycles" "$tmpdir/out"
expect_ok "no mpiexec: OpenBLAS as it loads" env -u OPENBLAS_THREAD_TIMEOUT "$MERAK" version
check "  no thread setting" sh -c "! grep -q 'idle threads' '$tmpdir/out'"
if [ -z "$want" ]; then
  echo "no AVX on this CPU: nothing beats OpenBLAS's SSE kernels, the re-execution is not tried"
  finish
fi
G="env -u OPENBLAS_CORETYPE MK_TEST_BLAS_GENERIC=1"
expect_ok "OpenBLAS's SSE fallback: merak runs again with $want" $G "$MERAK" version
check "  version says $want, merak's choice" grep -q "^blas: OpenBLAS, $want kernels (merak's choice: OpenBLAS chose Prescott)" \
  "$tmpdir/out"
R="--model gpt-tiny --gbs 4 --steps 2 --json"
expect_ok "train with OpenBLAS's own kernels" env OPENBLAS_CORETYPE=$want "$MERAK" run $R
cp "$tmpdir/out" "$tmpdir/own.json"
expect_ok "train after the re-execution, dp 2" $G "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run $R --dp 2
check "  run's first line names the kernels" grep -q "^merak run: the cpu backend on OpenBLAS, $want kernels (merak's choice" \
  "$tmpdir/err"
"${PYTHON:-python3}" -c '
import json, sys
a, b = (json.load(open(f))["losses"] for f in sys.argv[1:])
assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b)), (a, b)' \
  "$tmpdir/out" "$tmpdir/own.json" && echo "ok: the same losses as one rank with $want set by hand" ||
  { echo "FAIL: losses differ"; fails=$((fails + 1)); }
finish
