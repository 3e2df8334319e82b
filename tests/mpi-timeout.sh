#!/bin/sh
# --distributed-timeout-minutes (issue 32, Megatron-LM's flag; fractions
# here): a rank that stops answering (MK_TEST_STOP=RANK:STEP: it sends
# itself SIGSTOP, as a hung device or a dead node without a TCP reset
# would leave it) must not leave the others waiting forever.  A rank whose
# wait completes nothing for the timeout says on one line what it waited
# for (peer rank, stream, instruction), and the job ends non-zero, the
# stopped rank included; the checkpoint of the last save is untouched.
. "$top_srcdir/tests/lib.sh"
stopped_left() { # processes of this test's job still alive (the stopped rank)
  for c in /proc/[0-9]*/cmdline; do
    tr '\0' ' ' <"$c" 2>/dev/null | grep -q -- "$tmpdir/s" && echo "${c%/cmdline}"
  done
}
stall() { # stall RANKS STOP FLAGS...: the job, its stderr in $tmpdir/err; seconds in $secs
  n=$1 stop=$2; shift 2
  t0=$(date +%s)
  MK_TEST_STOP=$stop timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run --steps 6 --quiet \
    --distributed-timeout-minutes 0.05 --save "$tmpdir/s.st" --save-interval 1 "$@" >/dev/null 2>"$tmpdir/err"
  rc=$?
  secs=$(( $(date +%s) - t0 ))
}
case_stall() { # WHAT RANKS STOP PATTERN FLAGS...
  what=$1 pat=$4; n=$2 stop=$3; shift 4
  rm -f "$tmpdir/s.st"
  stall "$n" "$stop" "$@"
  check "$what: the job fails (rc=$rc, not the harness's 124)" test $rc -ne 0 -a $rc -ne 124
  check "$what: ends within 30 s of a 3 s timeout (took ${secs}s)" test "$secs" -le 30
  check "$what: one line names the wait: '$pat'" test "$(grep -c -E "$pat" "$tmpdir/err")" -ge 1
  grep -E "timed out" "$tmpdir/err" | head -2
  # the launcher's teardown of the other ranks is asynchronous to its exit
  # (a loaded machine was seen to take over a second): a grace of 10 s
  left=$(stopped_left); w=0
  while [ -n "$left" ] && [ $w -lt 20 ]; do sleep 0.5; w=$((w + 1)); left=$(stopped_left); done
  check "$what: no rank left behind" test -z "$left"
  [ -n "$left" ] && for p in $left; do kill -KILL "${p#/proc/}" 2>/dev/null; done
  "$PYTHON" "$top_srcdir/tests/st_read.py" "$tmpdir/s.st" >"$tmpdir/st" 2>&1
  check "$what: the checkpoint of step 2 is whole (checksums verified)" grep -q '"step": "2"' "$tmpdir/st"
}
case_stall "pp 2, stage 1 stopped at step 2" 2 1:2 \
  "^merak run: rank 0: timed out after 0.05 min \(--distributed-timeout-minutes\) waiting for the gradients of the stage after \(peer rank 1; stage 0's stream, instruction [0-9]+: RECV_GRAD mb [0-9]+ chunk 0\)$" \
  --pp 2
case_stall "dp 4, rank 3 stopped at step 2" 4 3:2 \
  "^merak run: rank [0-2]: timed out after 0.05 min \(--distributed-timeout-minutes\) waiting for the (DP gradient all-reduce|step's loss and norm sums)" \
  --dp 4
case_stall "pp 2 x tp 2, rank 2 stopped at step 2" 4 2:2 "^merak run: rank [013]: timed out after 0.05 min" --pp 2 --tp 2
# a run that keeps its peers busy is not cut short by a short timeout
expect_ok "a healthy 4-rank run with a 0.05 min timeout" timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run \
  --pp 2 --dp 2 --steps 3 --quiet --distributed-timeout-minutes 0.05
expect_fail "the timeout is a number" "--distributed-timeout-minutes must be a non-negative number, got 'ten'" -- \
  "$MERAK" run --distributed-timeout-minutes ten
expect_fail "at most a week" "--distributed-timeout-minutes must be at most 10080" -- \
  "$MERAK" run --distributed-timeout-minutes 20000
expect_fail "a test hook set to garbage is refused, not fired at step 0" "^merak: MK_TEST_STOP must be RANK:step" -- \
  env MK_TEST_STOP=x "$MERAK" run --steps 1
finish
