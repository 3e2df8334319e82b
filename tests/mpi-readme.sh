#!/bin/sh
# Documented examples (issue 33): every merak command README.md shows runs,
# in the README's order, in one scratch folder (the tour's files feed the
# commands after it), and exits 0; where the README shows a `$ ` command's
# output, its first line (when it holds no timing) is what the command
# prints first.  The commands come from tests/readme_examples.py; the
# README's C program is the one tests/install.sh builds and runs.
. "${top_srcdir:-.}/tests/lib.sh"
"$PYTHON" -c "import re" 2>/dev/null || { echo "no python: skipped"; exit 77; }
"$PYTHON" "$top_srcdir/tests/readme_examples.py" "$top_srcdir/README.md" >"$tmpdir/cmds" ||
  { echo "FAIL: cannot read the README's commands"; exit 1; }
n=$(wc -l <"$tmpdir/cmds")
check "the README shows commands ($n)" [ "$n" -ge 15 ]
mkdir "$tmpdir/work"
tab=$(printf '\t')
while IFS="$tab" read -r kind cmd expect; do
  # merak and ./merak are this build's; mpiexec with the wrapper's flags
  run=$(printf '%s\n' "$cmd" | sed -e "s#^\\./merak #\"\$MERAK\" #; s#^merak #\"\$MERAK\" #; s#^merak\$#\"\$MERAK\"#" \
    -e "s#^mpiexec #\"\$MPIEXEC\" \$MPIEXEC_FLAGS #; s# \\./merak # \"\$MERAK\" #")
  (cd "$tmpdir/work" && eval "$run") >"$tmpdir/out" 2>"$tmpdir/err" </dev/null
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: README ($kind): $cmd: exit $rc"; head -5 "$tmpdir/err"; fails=$((fails + 1)); continue
  fi
  if [ -n "$expect" ] && [ "$(head -1 "$tmpdir/out")" != "$expect" ]; then
    echo "FAIL: README ($kind): $cmd: first line"; echo "  shown:  $expect"; echo "  prints: $(head -1 "$tmpdir/out")"
    fails=$((fails + 1)); continue
  fi
  echo "ok: README ($kind): $cmd"
done <"$tmpdir/cmds"
finish
