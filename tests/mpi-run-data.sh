#!/bin/sh
# --data: the same global batches whatever the layout (GPT and Llama),
# validation losses in --json, and a resumed run continues the same data stream.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
D="$top_srcdir/experiments/train-shakespeare/tinyshakespeare.txt"
one() { "$MERAK" run --gbs 8 --json --data "$D" --eval-interval 2 --eval-batches 2 --lr-decay-iters 4 "$@"; }
one --steps 4 >"$tmpdir/ref.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
check "val_losses at steps 2 and 4" grep -q '"val_losses":\[{"step":2,"loss":[0-9.]*},{"step":4,"loss":[0-9.]*}\]' "$tmpdir/ref.json"
expect_ok "4 ranks dp=2 pp=2" timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --json \
  --data "$D" --eval-interval 2 --eval-batches 2 --lr-decay-iters 4 --steps 4
check "same losses as one rank (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
vals() { sed -n 's/.*"val_losses":\[\([^]]*\)\].*/\1/p' "$1" | tr -c '0-9.\n' ' ' | awk '{for (i = 1; i <= NF; i++) printf "%.4f ", $i}'; }
check "same validation losses (4 decimals): $(vals "$tmpdir/out")" test "$(vals "$tmpdir/out")" = "$(vals "$tmpdir/ref.json")"
expect_ok "save at step 2" one --steps 2 --save "$tmpdir/c.st"
expect_ok "resume: steps 3-4" one --steps 2 --load "$tmpdir/c.st"
sed 's/"losses":\[[^,]*,[^,]*,/"losses":[/' "$tmpdir/ref.json" >"$tmpdir/tail.json"
check "the resumed run continues the data stream (same losses)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
# the Llama family reads the same batches (uint16 files: tests/llama-numpy.sh)
expect_ok "llama-tiny, one rank" one --model llama-tiny --steps 4
cp "$tmpdir/out" "$tmpdir/lref.json"
expect_ok "llama-tiny, 4 ranks dp=2 tp=2" timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --model llama-tiny \
  --dp 2 --tp 2 --gbs 8 --json --data "$D" --eval-interval 2 --eval-batches 2 --lr-decay-iters 4 --steps 4
check "llama-tiny: same losses as one rank (1e-5)" same_losses "$tmpdir/out" "$tmpdir/lref.json"
check "llama-tiny: same validation losses (4 decimals): $(vals "$tmpdir/out")" \
  test -n "$(vals "$tmpdir/out")" -a "$(vals "$tmpdir/out")" = "$(vals "$tmpdir/lref.json")"
printf '\001\002\003\004' >"$tmpdir/ids.u16"
expect_fail "uint16 ids above the vocabulary" "not below the vocabulary size 256" -- \
  "$MERAK" run --data "$tmpdir/ids.u16" --seq-length 1 --vocab-size 256
finish
