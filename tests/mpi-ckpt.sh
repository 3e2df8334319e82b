#!/bin/sh
# Checkpoints: names and shapes (tests/st_read.py), same-layout resume is
# bitwise identical to not stopping, a checkpoint written at dp=2 pp=2 tp=2
# continues at dp=1 pp=4 tp=2 and on one rank with the uninterrupted losses
# (1e-5), and a save killed midway (exit, SIGTERM, SIGINT) leaves the
# previous file intact and, but for a hard kill, no temporary; the next
# save removes a dead process's temporary.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=${PYTHON:-python3}
ST="$top_srcdir/tests/st_read.py"
run8() { timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 8 "$MERAK" run --gbs 8 --json --lr-decay-iters 4 "$@"; }
lastn() { losses_of "$1" | tr ' ' '\n' | tail -n "$2" | tr '\n' ' '; }
rm_first() { sed "s/\"losses\":\[[^,]*,[^,]*,/\"losses\":[/" "$1"; }

run8 --dp 2 --pp 2 --tp 2 --steps 4 >"$tmpdir/full.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
expect_ok "save at step 2 (dp=2 pp=2 tp=2)" run8 --dp 2 --pp 2 --tp 2 --steps 2 --save "$tmpdir/c.st"
expect_ok "resume, same layout" run8 --dp 2 --pp 2 --tp 2 --steps 2 --load "$tmpdir/c.st"
cp "$tmpdir/out" "$tmpdir/same.json"
check "same layout: bitwise the uninterrupted losses" \
  test "$(lastn "$tmpdir/full.json" 2)" = "$(lastn "$tmpdir/same.json" 2)"
expect_ok "resume at dp=1 pp=4 tp=2" run8 --dp 1 --pp 4 --tp 2 --steps 2 --load "$tmpdir/c.st"
rm_first "$tmpdir/full.json" >"$tmpdir/tail.json"
check "dp=1 pp=4 tp=2 continues with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
expect_ok "resume on one rank" "$MERAK" run --gbs 8 --json --steps 2 --load "$tmpdir/c.st"
check "one rank continues with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"

# names and shapes (gpt-tiny: 4 blocks, C 64, V 256, S 64)
"$PY" "$ST" "$tmpdir/c.st" --check=transformer.wte.weight=256x64 --check=transformer.wpe.weight=64x64 \
  --check=transformer.h.0.ln_1.weight=64 --check=transformer.h.3.attn.c_attn.weight=64x192 \
  --check=transformer.h.0.attn.c_attn.bias=192 --check=transformer.h.1.attn.c_proj.weight=64x64 \
  --check=transformer.h.2.mlp.c_fc.weight=64x256 --check=transformer.h.2.mlp.c_fc.bias=256 \
  --check=transformer.h.3.mlp.c_proj.weight=256x64 --check=transformer.ln_f.bias=64 \
  --check=optim.m.transformer.wte.weight=256x64 --check=optim.v.transformer.h.0.mlp.c_proj.bias=64 \
  >"$tmpdir/names" 2>&1
check "st_read.py: documented names and shapes" test $? -eq 0
check "156 tensors (52 weights, m, v)" test "$(grep -c ' F32 ' "$tmpdir/names")" -eq 156
check "metadata: step 2, config" grep -q '"step": "2".*' "$tmpdir/names"
check "no lm_head copy in the file" test -z "$(grep lm_head "$tmpdir/names")"
# the 8-rank file holds the one-rank model (TP shards reassembled, q|k|v order)
"$MERAK" run --gbs 8 --steps 2 --lr-decay-iters 4 --save "$tmpdir/one.st" 2>/dev/null
check "8-rank and 1-rank checkpoints agree (1e-5)" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read
_, a = st_read.read(sys.argv[2]); _, b = st_read.read(sys.argv[3])
assert a.keys() == b.keys()
for k in a:
    assert a[k][0] == b[k][0], k
    assert max(abs(x - y) for x, y in zip(a[k][1], b[k][1])) < 1e-5, k' "$top_srcdir/tests" "$tmpdir/c.st" "$tmpdir/one.st"
expect_ok "--steps 0 --save writes the initial model" "$MERAK" run --steps 0 --save "$tmpdir/init.st"
check "initial model: ln_1 scales are ones" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read
m, t = st_read.read(sys.argv[2]); assert m["step"] == "0" and set(t["transformer.h.0.ln_1.weight"][1]) == {1.0}' \
  "$top_srcdir/tests" "$tmpdir/init.st"

# a save killed after 5 tensors: the previous checkpoint is untouched
cp "$tmpdir/c.st" "$tmpdir/keep.st"
MK_TEST_SAVE_DIE_AFTER=5 timeout 30 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 1 \
  --load "$tmpdir/c.st" --save "$tmpdir/c.st" >/dev/null 2>"$tmpdir/kill.err"
rc=$?
check "killed save: the run fails (rc=$rc)" test $rc -ne 0 -a $rc -ne 124
check "killed save: previous checkpoint byte-identical" cmp -s "$tmpdir/c.st" "$tmpdir/keep.st"
check "killed save: previous checkpoint readable" "$PY" "$ST" "$tmpdir/c.st" --check=transformer.wte.weight=256x64
# _exit leaves its temporary (as SIGKILL would); the next save removes it
check "killed save: its temporary is left" test -n "$(ls "$tmpdir" | grep 'c\.st\.tmp\.')"
expect_ok "a later save to the same path" "$MERAK" run --gbs 8 --steps 1 --load "$tmpdir/c.st" --save "$tmpdir/c.st"
check "the dead process's temporary is removed" test -z "$(ls "$tmpdir" | grep 'c\.st\.tmp\.')"
cp "$tmpdir/keep.st" "$tmpdir/c.st"

# SIGTERM / SIGINT mid-save (MK_TEST_WRITE_PAUSE holds the whole file in
# its temporary before the rename): the temporary is removed, the previous
# checkpoint kept, and the job fails.  Signals go to rank 0 (whose pid ends
# the temporary's name) and, as Ctrl-C does, to mpiexec, which forwards
# them.  Hydra's proxy counts processes it signalled itself as a forced
# cleanup and reports those not yet reaped as exit 0, so mpiexec's status
# is then racy (0 in about half the trials, even for `mpiexec -n 1 sleep 9`):
# only the files and the message are checked in that case.
signal_save() { # signal_save SIG rank0|mpiexec
  MK_TEST_WRITE_PAUSE=30 timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --dp 2 --gbs 8 --steps 1 \
    --load "$tmpdir/c.st" --save "$tmpdir/c.st" >/dev/null 2>"$tmpdir/sig.err" &
  job=$!
  i=0; while [ -z "$(ls "$tmpdir" | grep 'c\.st\.tmp\.')" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  tmp=$(ls "$tmpdir" | grep 'c\.st\.tmp\.' | head -n 1)
  if [ "$2" = rank0 ]; then kill -s "$1" "${tmp##*.}"; else kill -s "$1" "$(pgrep -P "$job")"; fi
  wait $job
}
for sig in TERM INT; do
  signal_save $sig rank0; rc=$?
  check "SIG$sig to rank 0 mid-save: the job fails (rc=$rc)" test $rc -ne 0 -a $rc -ne 124
  check "SIG$sig to rank 0 mid-save: no temporary left" test -z "$(ls "$tmpdir" | grep 'c\.st\.tmp\.')"
  check "SIG$sig to rank 0 mid-save: says so" grep -q "SIG$sig: removed the unfinished file" "$tmpdir/sig.err"
  check "SIG$sig to rank 0 mid-save: previous checkpoint byte-identical" cmp -s "$tmpdir/c.st" "$tmpdir/keep.st"
  signal_save $sig mpiexec; rc=$?
  check "SIG$sig to mpiexec mid-save: ended (rc=$rc)" test $rc -ne 124
  check "SIG$sig to mpiexec mid-save: no temporary left" test -z "$(ls "$tmpdir" | grep 'c\.st\.tmp\.')"
  check "SIG$sig to mpiexec mid-save: says so" grep -q "SIG$sig: removed the unfinished file" "$tmpdir/sig.err"
  check "SIG$sig to mpiexec mid-save: previous checkpoint byte-identical" cmp -s "$tmpdir/c.st" "$tmpdir/keep.st"
done
finish
