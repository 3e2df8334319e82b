#!/bin/sh
# Fault injection: a full disk (a 4 MiB tmpfs, so this needs root and is
# skipped, exit 77, where mount is not allowed).  A save that meets ENOSPC
# fails with one line naming the file, leaves no temporary and keeps the
# previous checkpoint / trace / plan byte for byte.
. "$top_srcdir/tests/lib.sh"
mnt=$tmpdir/mnt
mkdir "$mnt"
mount -t tmpfs -o size=4m merak-full "$mnt" 2>/dev/null || { echo "skip: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$mnt"; rm -rf "$tmpdir"' EXIT
sim() { "$MERAK" sim --model gpt-tiny --mbs 1 --gbs 2 "$@"; }

expect_ok "checkpoint on the small disk" timeout 60 "$MERAK" run --steps 0 --save "$mnt/c.st"
expect_ok "trace on the small disk" sim --trace "$mnt/t.json"
expect_ok "plan on the small disk" "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan "$mnt/p.json"
for f in c.st t.json p.json; do cp "$mnt/$f" "$tmpdir/$f"; done
dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null # until ENOSPC

# a training run's own failure at the end is exit 1 (not a usage error)
timeout 60 "$MERAK" run --steps 0 --save "$mnt/c.st" >/dev/null 2>"$tmpdir/err"; rc=$?
check "full disk: the save fails (rc=$rc)" test $rc -ne 0 -a $rc -ne 124
# (after run's first line, which names the kernels: the run was set up)
check "full disk: one line naming the checkpoint and ENOSPC" \
  test "$(grep -v -c '^merak run: the cpu backend on' "$tmpdir/err")" -eq 1 -a \
    -n "$(grep "cannot write checkpoint '.*c.st': No space left on device" "$tmpdir/err")"
cat "$tmpdir/err"
expect_fail "full disk: trace" "cannot write trace file '.*t.json': No space left on device" -- sim --trace "$mnt/t.json"
expect_fail "full disk: plan" "cannot write plan file '.*p.json': No space left on device" -- \
  "$MERAK" plan --model gpt-tiny --gpus 2 --gbs 4 --save-plan "$mnt/p.json"
for f in c.st t.json p.json; do
  check "full disk: previous $f byte-identical" cmp -s "$mnt/$f" "$tmpdir/$f"
done
check "full disk: no temporary left" test -z "$(ls "$mnt" | grep '\.tmp\.')"
finish
