#!/bin/sh
# --help reads each subcommand's table of defaults (src/cli/cli_*.c): every
# @key@ of a usage text is filled in, with the value the parser uses.
. "$top_srcdir/tests/lib.sh"

for c in sim plan run sched profile trace model models; do
  "$MERAK" $c --help >"$tmpdir/$c.txt" 2>&1
  check "$c --help exits 0" [ $? -eq 0 ]
  check "$c --help leaves no @key@" sh -c "! grep -E '@[a-z_]+@' '$tmpdir/$c.txt'"
done
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
check "sched: vpp" has sched "(interleaved only; default 2)"
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
