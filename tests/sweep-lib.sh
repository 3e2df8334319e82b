# The flag sweep (sourced after lib.sh by flag-sweep.sh and
# mpi-run-sweep.sh): every numeric flag a subcommand lists under "Numeric
# limits" in its --help, so a new flag is swept without editing the tests,
# with values at and past every edge.  Each run must exit 0 or 2 (never a
# signal or another code) within 10 s, with one stderr line on exit 2.
SWEEP_VALUES="0 -1 2147483647 9223372036854775808 abc 1e-320 nan"

# Subcommands `merak --help` lists.
sweep_commands() { "$MERAK" --help | sed -n '/^Subcommands:/,/^$/ s/^  \([a-z]*\) .*/\1/p'; }

# The numeric flags of CMD (the first name of each line; aliases share it).
sweep_flags() { "$MERAK" "$1" --help | sed -n '/^Numeric limits/,$ s/^  --\([a-z-]*\).*/\1/p'; }

# Arguments that keep a run whose value is accepted small and fast.
sweep_base() {
  case $1 in
    model|sim) echo "--model gpt-tiny" ;;
    sched) echo "--pp 2 --micro-batches 4" ;;
    plan) echo "--model gpt-tiny --gpus 4 --gbs 8" ;;
    run) echo "--model gpt-tiny --steps 1" ;;
    profile) echo "--quick --out profile.json" ;;
  esac
}

# sweep_one CMD FLAG VALUE: one run in its own folder (outputs land there);
# prints "ok ..." or "FAIL ...".
sweep_one() {
  d=$(mktemp -d "$tmpdir/run.XXXXXX")
  # shellcheck disable=SC2046
  # a base flag that is the swept one goes (a flag given twice is refused)
  (cd "$d" && exec timeout -k 5 10 "$MERAK" "$1" $(sweep_base "$1" | sed "s/--$2 [^ ]*//") "--$2" "$3" >out 2>err)
  rc=$?
  lines=$(wc -l <"$d/err")
  what="merak $1 --$2 $3: rc=$rc"
  case $rc in
    0) echo "ok: $what" ;;
    2) if [ "$lines" -eq 1 ]; then echo "ok: $what: $(cat "$d/err")"
       else echo "FAIL: $what with $lines stderr lines (want 1):"; cat "$d/err"; fi ;;
    124|137) echo "FAIL: $what: did not finish within 10 s" ;;
    *) echo "FAIL: $what (want 0 or 2; >= 128 is a signal):"; tail -3 "$d/err" ;;
  esac
  rm -rf "$d"
}

# sweep CMD...: every numeric flag of each CMD with every value, two runs
# at a time (each is mostly process start-up); counts the failures.
sweep() {
  n=0
  for cmd in "$@"; do
    flags=$(sweep_flags "$cmd")
    [ -n "$flags" ] || continue
    for f in $flags; do
      for v in $SWEEP_VALUES; do
        sweep_one "$cmd" "$f" "$v" >"$tmpdir/res.$n" &
        n=$((n + 1))
        [ $((n % 2)) -eq 0 ] && wait
      done
    done
  done
  wait
  i=0
  while [ $i -lt $n ]; do
    cat "$tmpdir/res.$i"
    grep -q '^FAIL' "$tmpdir/res.$i" && fails=$((fails + 1))
    i=$((i + 1))
  done
  echo "swept $n runs of: $*"
  sweep_runs=$n
}
