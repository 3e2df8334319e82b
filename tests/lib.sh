# Shell helpers for CLI tests (sourced).  MERAK, MPIEXEC and friends come
# from tests/wrapper.sh.
fails=0
: "${MERAK:=${top_builddir:-.}/merak}"
: "${top_srcdir:=.}"
tmpdir=$(mktemp -d); trap 'rm -rf "$tmpdir"' EXIT

# expect_fail DESCRIPTION PATTERN -- CMD...: exit 2, one stderr line matching PATTERN
expect_fail() {
  desc=$1; pat=$2; shift 3
  "$@" >"$tmpdir/out" 2>"$tmpdir/err"; rc=$?
  lines=$(wc -l <"$tmpdir/err")
  if [ $rc -ne 2 ] || ! grep -q -i -E -- "$pat" "$tmpdir/err" || [ "$lines" -ne 1 ]; then
    echo "FAIL: $desc: rc=$rc (want 2), stderr ($lines lines, want 1 matching '$pat'):"; cat "$tmpdir/err"
    fails=$((fails + 1))
  else
    echo "ok: $desc: $(cat "$tmpdir/err")"
  fi
}

expect_ok() {
  desc=$1; shift
  if "$@" >"$tmpdir/out" 2>"$tmpdir/err"; then echo "ok: $desc"
  else echo "FAIL: $desc (rc=$?)"; cat "$tmpdir/err"; fails=$((fails + 1)); fi
}

check() { # check DESCRIPTION CONDITION-COMMAND...
  desc=$1; shift
  if "$@"; then echo "ok: $desc"; else echo "FAIL: $desc"; fails=$((fails + 1)); fi
}

# children PID: the pids whose parent is PID (from /proc: procps's pgrep is
# not on a minimal Debian root, and the README's install line needs none)
children() {
  parent=$1
  for st in /proc/[0-9]*/stat; do
    { read -r line <"$st"; } 2>/dev/null || continue
    set -- ${line##*) }   # the fields after "(comm)", which may hold spaces
    [ "$2" = "$parent" ] && { p=${st#/proc/}; echo "${p%/stat}"; }
  done
}

finish() { [ $fails -eq 0 ] && { echo "all passed"; exit 0; }; echo "$fails failure(s)"; exit 1; }
