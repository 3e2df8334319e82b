# Helpers for the executor's MPI tests (sourced after tests/lib.sh): run
# `merak run` on N ranks and compare its losses and step-1 gradients with
# the one-rank reference.
GRADCMP="$top_builddir/tests/test_gpt_gradcmp"
RUN_COMMON="--gbs 8 --steps 3 --json"

losses_of() { sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' "$1" | tr ',' ' '; }

# same_losses A.json B.json: every step within 1e-5 relative
same_losses() {
  a=$(losses_of "$1"); b=$(losses_of "$2")
  [ -n "$a" ] && [ -n "$b" ] && echo "$a|$b" | awk -F'|' '{
    n = split($1, x, " "); m = split($2, y, " "); if (n != m || n == 0) exit 1
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * y[i]) exit 1 }
    exit 0 }'
}

# reference: one rank, no mpiexec
make_reference() {
  "$MERAK" run $RUN_COMMON "$@" --dump-grads "$tmpdir/ref.bin" >"$tmpdir/ref.json" 2>"$tmpdir/ref.err" ||
    { echo "FAIL: one-rank reference"; cat "$tmpdir/ref.err"; exit 1; }
}

# equiv DP PP TP [merak run flags]: losses and gradients equal the reference
# (a run past EQUIV_TIMEOUT seconds, default 300, fails); EQUIV_CP=C runs
# it with --cp C on dp*pp*tp*C ranks
equiv() {
  dp=$1; pp=$2; tp=$3; shift 3
  cp=${EQUIV_CP:-1}
  n=$((dp * pp * tp * cp))
  desc="dp=$dp pp=$pp tp=$tp cp=$cp $*"
  rm -f "$tmpdir/g.bin"  # a dump left by an earlier case must not stand in for this one's
  if ! timeout "${EQUIV_TIMEOUT:-300}" "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --dp $dp --pp $pp --tp $tp --cp $cp $RUN_COMMON "$@" \
      --dump-grads "$tmpdir/g.bin" >"$tmpdir/o.json" 2>"$tmpdir/o.err"; then
    echo "FAIL: $desc: run failed"; cat "$tmpdir/o.err"; fails=$((fails + 1)); return
  fi
  if ! same_losses "$tmpdir/o.json" "$tmpdir/ref.json"; then
    echo "FAIL: $desc: losses $(losses_of "$tmpdir/o.json") vs $(losses_of "$tmpdir/ref.json")"
    fails=$((fails + 1)); return
  fi
  if [ ! -f "$tmpdir/g.bin" ]; then
    echo "FAIL: $desc: no gradient dump written"; fails=$((fails + 1)); return
  fi
  if ! g=$("$GRADCMP" "$tmpdir/g.bin" "$tmpdir/ref.bin" 1e-5 2>&1); then
    echo "FAIL: $desc: gradients: $g"; fails=$((fails + 1)); return
  fi
  echo "ok: $desc: $(echo "$g" | tail -1)"
}

# same_checkpoints A B: two checkpoint files hold the same tensors, shapes
# and values (1e-5)
same_checkpoints() {
  "${PY:-${PYTHON:-python3}}" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read
_, a = st_read.read(sys.argv[2]); _, b = st_read.read(sys.argv[3])
assert a.keys() == b.keys()
for k in a:
    assert a[k][0] == b[k][0], k
    assert max(abs(x - y) for x, y in zip(a[k][1], b[k][1])) < 1e-5, k' "$top_srcdir/tests" "$1" "$2"
}
