#!/bin/sh
# Every file merak writes goes through one safe writer (src/util/fileio.c):
# non-regular targets are refused and left alone, symlinks are written
# through, stale temporaries of dead processes are removed, a signal
# mid-save leaves no temporary and a failed exit, and output flags are
# checked before any work.  Also: a directory given as a JSON input.
. "$top_srcdir/tests/lib.sh"
T=$tmpdir
sim() { "$MERAK" sim --model gpt-tiny --mbs 1 --gbs 2 "$@"; }
no_tmp() { ! ls "$1".tmp.* >/dev/null 2>&1; }

# --- non-regular targets: refused, untouched
mkfifo "$T/fifo"; mkdir "$T/dir"; echo keep >"$T/dir/inside"
expect_fail "sim --trace FIFO refused" "'.*fifo': it is a FIFO, not a regular file" -- sim --trace "$T/fifo"
check "FIFO still a FIFO" test -p "$T/fifo"
expect_fail "sim --trace directory refused" "it is a directory, not a regular file" -- sim --trace "$T/dir"
expect_fail "plan --save-plan directory refused" "--save-plan: .*directory, not a regular file" -- \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan "$T/dir"
check "directory and its content untouched" test -d "$T/dir" -a "$(cat "$T/dir/inside")" = keep
# a character device of our own (never the real /dev/null: a regression
# would turn it into a regular file for the whole machine)
if mknod "$T/null" c 1 3 2>/dev/null; then
  expect_fail "sim --trace to a character device refused" "character device, not a regular file" -- sim --trace "$T/null"
  check "the device is still a character device" test -c "$T/null"
else
  echo "skip: mknod not allowed (not root)"
fi
ln -s "$T/fifo" "$T/to-fifo"
expect_fail "a symlink to a FIFO refused" "'.*to-fifo' -> '.*fifo': it is a FIFO" -- sim --trace "$T/to-fifo"

# --- symlinks: written through, the link kept
echo old >"$T/real.json"; ln -s real.json "$T/link.json"
expect_ok "sim --trace through a symlink" sim --trace "$T/link.json"
check "the link is still a link" test -L "$T/link.json"
check "its target holds the trace" grep -q traceEvents "$T/real.json"
mkdir "$T/sub"; ln -s sub/new.json "$T/dangling.json"
expect_ok "plan --save-plan through a dangling symlink" \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan "$T/dangling.json"
check "the dangling link's target was created" test -L "$T/dangling.json" -a -s "$T/sub/new.json"
check "no temporary left next to the link or the target" no_tmp "$T/dangling.json" && no_tmp "$T/sub/new.json"
chmod 600 "$T/real.json"
expect_ok "rewrite a 0600 file" sim --trace "$T/real.json"
check "permission bits kept (0600)" test "$(stat -c %a "$T/real.json")" = 600

# --- stale temporaries: dead pids removed, live and other names kept
dead=$(sh -c 'echo $$')
for n in "$dead" 2147483646 $$ 12x abc; do echo partial >"$T/s.json.tmp.$n"; done
echo partial >"$T/other.json.tmp.$dead"
expect_ok "sim --trace with stale temporaries around" sim --trace "$T/s.json"
check "dead process's temporary removed" test ! -e "$T/s.json.tmp.$dead" -a ! -e "$T/s.json.tmp.2147483646"
check "live process's temporary kept" test -e "$T/s.json.tmp.$$"
check "names not PATH.tmp.PID kept" test -e "$T/s.json.tmp.12x" -a -e "$T/s.json.tmp.abc" -a -e "$T/other.json.tmp.$dead"

# --- a signal mid-save: no temporary, killed by the signal, old file intact
for sig in TERM INT; do
  echo old >"$T/k.json"
  # env --default-signal: a background job of a script starts with SIGINT ignored
  MK_TEST_WRITE_PAUSE=20 env --default-signal=INT "$MERAK" sim --model gpt-tiny --mbs 1 --gbs 2 \
    --trace "$T/k.json" >/dev/null 2>"$T/k.err" &
  pid=$!
  i=0; while no_tmp "$T/k.json" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  check "SIG$sig: the temporary exists mid-save" test $i -lt 100
  kill -s "$sig" $pid; wait $pid; rc=$?
  check "SIG$sig mid-save: killed by the signal (rc=$rc)" test $rc -gt 128
  check "SIG$sig mid-save: no temporary left" no_tmp "$T/k.json"
  check "SIG$sig mid-save: one line says so" test "$(grep -c "^merak: SIG$sig: removed the unfinished file '.*k.json.tmp.$pid'$" "$T/k.err")" -eq 1
  check "SIG$sig mid-save: old file intact" test "$(cat "$T/k.json")" = old
done

# --- output flags checked before any work (exit 2 at once)
expect_fail "sim --trace in a missing directory" "--trace: cannot write trace file .*directory '/missing' does not exist" -- \
  sim --trace /missing/t.json
expect_fail "plan --save-plan in a missing directory" "--save-plan: .*does not exist" -- \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan /missing/p.json
expect_fail "plan --trace in a missing directory" "--trace: .*does not exist" -- \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --trace /missing/t.json
expect_fail "plan: a file used as a directory" "--save-plan: .*is not a directory" -- \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan "$T/real.json/p.json"
expect_fail "profile --out in a missing directory" "--out: .*does not exist" -- \
  timeout 20 "$MERAK" profile --out /missing/p.json
# 100000 steps would take minutes: the refusal must come first
expect_fail "run --save in a missing directory, before training" "--save: cannot write checkpoint .*does not exist" -- \
  timeout 20 "$MERAK" run --steps 100000 --save /missing/x.st
expect_fail "run --trace to a directory, before training" "--trace: .*directory, not a regular file" -- \
  timeout 20 "$MERAK" run --steps 100000 --trace "$T/dir"
check "nothing created by the checks" test "$(ls "$T/dir")" = inside
expect_fail "run --save and --trace the same file" "--save .* and --trace .* are the same file" -- \
  timeout 20 "$MERAK" run --steps 100000 --save "$T/same" --trace "$T/same"

# --- a directory given as a JSON input
mkdir "$T/m.json"
expect_fail "model: a directory" "cannot read model description '.*m.json': it is a directory" -- \
  "$MERAK" model --model "$T/m.json"
expect_fail "cluster: a directory" "cannot read cluster file .*is a directory" -- sim --cluster "$T/m.json"
expect_fail "plan file: a directory" "cannot read plan file .*is a directory" -- "$MERAK" sim --plan "$T/m.json"
expect_fail "trace: a directory" "cannot read trace .*is a directory" -- "$MERAK" trace summary "$T/m.json"
finish
