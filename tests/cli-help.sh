#!/bin/sh
# --help reads each subcommand's table of defaults (src/cli/cli_*.c): every
# @key@ of a usage text is filled in, with the value the parser uses.
. "$top_srcdir/tests/lib.sh"

for c in sim plan run sched profile trace model models; do
  "$MERAK" $c --help >"$tmpdir/$c.txt" 2>&1
  check "$c --help exits 0" [ $? -eq 0 ]
  check "$c --help leaves no @key@" sh -c "! grep -E '@[a-z_]+@' '$tmpdir/$c.txt'"
done
# every subcommand `merak --help` lists takes --help and -h (exit 0, usage on stdout)
subs=$("$MERAK" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z]*\) .*/\1/p')
check "merak --help lists the subcommands ($(echo $subs))" test "$(echo "$subs" | wc -w)" -ge 9
for c in $subs; do
  for h in --help -h; do
    "$MERAK" $c $h >"$tmpdir/h.txt" 2>"$tmpdir/h.err"
    check "$c $h: exit 0, usage on stdout, nothing on stderr" sh -c "[ $? -eq 0 ] && grep -q '^usage:' '$tmpdir/h.txt' && [ ! -s '$tmpdir/h.err' ]"
  done
  "$MERAK" help $c >"$tmpdir/h2.txt"
  check "merak help $c = merak $c --help" cmp -s "$tmpdir/h.txt" "$tmpdir/h2.txt"
  # a file a help text names is shipped (in the tarball: EXTRA_DIST of a *.mk or Makefile.am)
  for f in $(grep -o '[A-Za-z0-9_/.-]*\.md' "$tmpdir/h.txt" | sort -u); do
    check "$c --help names $f: it exists and is distributed" sh -c "[ -f '$top_srcdir/$f' ] &&
      grep -q -F '$f' '$top_srcdir/Makefile.am' $top_srcdir/src/*/*.mk $top_srcdir/sim/*.mk $top_srcdir/tests/*/*.mk"
  done
done
# merak --version and merak version: the version, then one line per build feature
for v in --version version; do
  "$MERAK" $v >"$tmpdir/v.txt"
  check "merak $v: exit 0" test $? -eq 0
  check "merak $v: the package version" grep -q '^merak (Merak-C) [0-9][0-9.]*' "$tmpdir/v.txt"
  check "merak $v: cuda yes/no" grep -q -E '^cuda: (yes|no)' "$tmpdir/v.txt"
  check "merak $v: the MPI library" grep -q -E '^mpi: .*(MPICH|Open MPI|MPI).* \(MPI [0-9]\.[0-9]\)$' "$tmpdir/v.txt"
done
check "merak version extra argument: exit 2" sh -c "'$MERAK' version x 2>/dev/null; [ \$? -eq 2 ]"
has() { grep -q -F -- "$2" "$tmpdir/$1.txt"; }
check "sim: model, cluster, batch" sh -c "grep -qF '(default gpt-8.3b)' '$tmpdir/sim.txt' &&
  grep -qF '(default rtx3090-pcie)' '$tmpdir/sim.txt' && grep -qF '(default 1, 512)' '$tmpdir/sim.txt'"
check "sim: schedule, recompute, partition" has sim "1f1b (default)"
check "sim: recompute" has sim "full (default)"
check "sim: partition" has sim "uniform (default), parameters"
check "run: model" has run "(default gpt-tiny)"
check "run: steps" has run "optimizer steps (default 10)"
check "run: optimizer" has run "(default 6e-4); --min-lr"
check "run: optimizer 2" has run "--weight-decay (0.1); --clip-grad (1.0);"
check "run: optimizer 3" has run "--adam-eps (1e-8); --seed N (1234)"
check "plan: gpus, batch, top" sh -c "grep -qF 'GPUs to use (default 64)' '$tmpdir/plan.txt' &&
  grep -qF '(default 512)' '$tmpdir/plan.txt' && grep -qF 'plans to show (default 5)' '$tmpdir/plan.txt'"
check "sched: vpp" has sched "default 2)"
check "profile: out" has profile "(default profile.json)"
check "model: model, gbs" sh -c "grep -qF '(default gpt-8.3b)' '$tmpdir/model.txt' &&
  grep -qF 'per iteration (default 512)' '$tmpdir/model.txt'"
# the parser uses the same values: the defaults run as documented
"$MERAK" sched --pp 2 --micro-batches 2 --schedule interleaved --json >"$tmpdir/s.json"
check "sched: interleaved defaults to vpp 2" grep -q '"vpp": 2' "$tmpdir/s.json"
"$MERAK" sim --model gpt-tiny --cluster ideal --json >"$tmpdir/sim.json"
check "sim: gbs 512, 1f1b" sh -c "grep -q '\"global_batch_size\": 512' '$tmpdir/sim.json' &&
  grep -q '\"schedule\": \"1f1b\"' '$tmpdir/sim.json' && grep -q '\"recompute\": \"full\"' '$tmpdir/sim.json'"
finish
