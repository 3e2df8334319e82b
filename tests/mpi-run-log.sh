#!/bin/sh
# merak run's log: a step line per step (or --log-interval) and one line per
# file written on stderr, whatever stdout is; --quiet silences it; stdout
# keeps the --json document alone; under mpiexec only rank 0 logs.  Then the
# run-only Megatron-LM names, the Adam betas and the default lr warm-up.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
R="$MPIEXEC $MPIEXEC_FLAGS"
losses() { "$PY" -c 'import json,sys; print(" ".join("%.9g" % x for x in json.load(open(sys.argv[1]))["losses"]))' "$1"; }
steplines() { grep -c '^step  *[0-9]*/[0-9]*  loss [0-9.]*  lr [0-9.e+-]*  [0-9.]* ms  [0-9]* tokens/s$' "$1"; }

timeout 60 "$MERAK" run --steps 3 --save "$tmpdir/c.st" --trace "$tmpdir/t.json" --dump-grads "$tmpdir/g.bin" --json \
  >"$tmpdir/out" 2>"$tmpdir/err"
check "run: exit 0" test $? -eq 0
check "stdout: the JSON document alone" "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmpdir/out"
check "stderr (a file, not a terminal): 3 step lines" test "$(steplines "$tmpdir/err")" -eq 3
check "stderr: 'saved FILE (step 3)'" grep -q "^saved $tmpdir/c.st (step 3)\$" "$tmpdir/err"
check "stderr: 'wrote trace FILE'" grep -q "^wrote trace $tmpdir/t.json\$" "$tmpdir/err"
check "stderr: 'wrote gradients FILE'" grep -q "^wrote gradients $tmpdir/g.bin\$" "$tmpdir/err"
check "stderr: the first line names the kernels" grep -q "^merak run: the cpu backend on OpenBLAS, .* kernels (" "$tmpdir/err"
check "stderr: nothing else" test "$(wc -l <"$tmpdir/err")" -eq 7
timeout 60 "$MERAK" run --steps 3 --save "$tmpdir/c.st" --quiet --json >"$tmpdir/q.out" 2>"$tmpdir/q.err"
check "--quiet: empty stderr" test ! -s "$tmpdir/q.err"
check "--quiet: the same losses" test "$(losses "$tmpdir/q.out")" = "$(losses "$tmpdir/out")"
timeout 60 "$MERAK" run --steps 5 --log-interval 2 --save-interval 2 --save "$tmpdir/c.st" >"$tmpdir/i.out" 2>"$tmpdir/i.err"
check "--log-interval 2: steps 2, 4 and the last (5)" test "$(sed -n 's|^step *\([0-9]*\)/5 .*|\1|p' "$tmpdir/i.err" | tr '\n' ' ')" = "2 4 5 "
check "--save-interval 2: saved at steps 2, 4 and 5" \
  test "$(sed -n 's|^saved .*c.st (step \([0-9]*\))$|\1|p' "$tmpdir/i.err" | tr '\n' ' ')" = "2 4 5 "
check "no --json: stdout stays empty" test ! -s "$tmpdir/i.out"
timeout 60 $R -n 2 "$MERAK" run --pp 2 --gbs 4 --steps 2 --eval-interval 1 >"$tmpdir/m.out" 2>"$tmpdir/m.err"
check "2 ranks (pp 2, the loss on rank 1's stage): 2 step lines, from rank 0 only" test "$(steplines "$tmpdir/m.err")" -eq 2
check "2 ranks: a validation line per step" test "$(grep -c '^step  *[0-9]*  validation loss' "$tmpdir/m.err")" -eq 2

# run-only names of Megatron-LM: the same run as our flags
run1() { timeout 60 "$MERAK" run --quiet --json "$@"; }
D="$top_srcdir/experiments/train-shakespeare/tinyshakespeare.txt"
run1 --steps 2 --data "$D" --eval-interval 2 --eval-batches 2 >"$tmpdir/a.json"
run1 --train-iters 2 --data-path "$D" --eval-interval 2 --eval-iters 2 >"$tmpdir/b.json"
check "--train-iters --data-path --eval-iters = --steps --data --eval-batches" "$PY" -c 'import json,sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["losses"] == b["losses"] and a["val_losses"] == b["val_losses"] and a["data"] == b["data"], (a, b)' \
  "$tmpdir/a.json" "$tmpdir/b.json"
run1 --gbs 4 --mbs 2 --steps 2 >"$tmpdir/a.json"
run1 --train_micro_batch_size_per_gpu 2 --gradient_accumulation_steps 2 --train-iters 2 >"$tmpdir/b.json"
check "DeepSpeed's micro-batch and accumulation = --mbs 2 --gbs 4" test "$(losses "$tmpdir/a.json")" = "$(losses "$tmpdir/b.json")"
# the Adam betas reach the optimizer: the defaults given are bitwise the default run
run1 --steps 3 >"$tmpdir/a.json"
run1 --steps 3 --adam-beta1 0.9 --adam-beta2 0.95 >"$tmpdir/b.json"
run1 --steps 3 --adam-beta1 0.5 >"$tmpdir/c.json"
run1 --steps 3 --adam-beta2 0.5 >"$tmpdir/d.json"
check "--adam-beta1 0.9 --adam-beta2 0.95: the default run" test "$(losses "$tmpdir/a.json")" = "$(losses "$tmpdir/b.json")"
check "--adam-beta1 0.5 changes the losses" test "$(losses "$tmpdir/a.json")" != "$(losses "$tmpdir/c.json")"
check "--adam-beta2 0.5 changes the losses" test "$(losses "$tmpdir/a.json")" != "$(losses "$tmpdir/d.json")"
expect_fail "--adam-beta2 1 (bias correction 0)" "--adam-beta2 must be at most 0.9999999" -- "$MERAK" run --adam-beta2 1

# the default warm-up: 2 / (1 - beta2) steps (40), linear, then the cosine
timeout 60 "$MERAK" run --steps 10 >/dev/null 2>"$tmpdir/w.err"
lr_of() { sed -n "s|^step *$1/10 .* lr \([0-9.e+-]*\) .*|\1|p" "$tmpdir/w.err"; }
check "10 steps: warm-up over 40 (lr 1.5e-5 at step 1, 1.5e-4 at step 10): $(lr_of 1), $(lr_of 10)" \
  test "$(lr_of 1)" = "1.500e-05" -a "$(lr_of 10)" = "1.500e-04"
timeout 60 "$MERAK" run --steps 10 --adam-beta2 0.8 >/dev/null 2>"$tmpdir/w.err"
check "--adam-beta2 0.8: warm-up over 10 (the peak at step 10): $(lr_of 10)" test "$(lr_of 10)" = "6.000e-04"
timeout 60 "$MERAK" run --steps 10 --lr-warmup-iters 0 >/dev/null 2>"$tmpdir/w.err"
check "--lr-warmup-iters 0: the peak at step 1" test "$(lr_of 1)" = "6.000e-04"
# a wide model (hidden 512) that spikes without warm-up (5.76 3.29 1.45 3.69 ... with
# --lr-warmup-iters 0): with the default every loss is below the one before
W="--hidden-size 512 --num-attention-heads 8 --num-layers 2 --steps 6"
run1 $W >"$tmpdir/a.json"
run1 $W --lr-warmup-iters 0 >"$tmpdir/b.json"
echo "wide model, default warm-up: $(losses "$tmpdir/a.json"); without: $(losses "$tmpdir/b.json")"
check "wide model, default warm-up: no spike (each loss below the one before)" "$PY" -c 'import json,sys
l = json.load(open(sys.argv[1]))["losses"]
assert all(b < a for a, b in zip(l, l[1:])), l' "$tmpdir/a.json"
finish
