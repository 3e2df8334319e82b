#!/bin/sh
# The README's two commands on a fresh minimal Debian 12 root (issue 32), as
# a new user would run them: debootstrap's minbase variant, the committed
# tree cloned into it, the README's first command (install, build, the main
# job) and its second (make check) run inside it with chroot.  Not part of
# make check: it needs root, mount and Debian's mirror (about 300 MB).
#
#   sudo sh tests/debian-root.sh [ROOT]     (default ROOT: /tmp/merak-debian-root)
#
# Output: the log in ROOT.log; the test summary and "debian-root: ok" (exit
# 0) or what failed (exit 1).  ROOT is removed first if it exists.
set -u
root=${1:-/tmp/merak-debian-root}
src=$(cd "$(dirname "$0")/.." && pwd)
log=$root.log
die() { echo "debian-root: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mount, chroot)"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not found (apt-get install debootstrap)"
command -v git >/dev/null 2>&1 || die "git not found (the tree is cloned into the root)"
umount_all() { for m in sys dev/shm dev proc; do umount "$root/$m" 2>/dev/null; done; }
umount_all
rm -rf "$root"
echo "debian-root: debootstrap --variant=minbase bookworm $root (log: $log)"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$log" 2>&1 || die "debootstrap failed"
trap umount_all EXIT
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" && mount --bind /dev/shm "$root/dev/shm" &&
  mount -t sysfs sys "$root/sys" || die "cannot mount /proc, /dev, /sys in the root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone -q "$src" "$root/root/merak" || die "git clone failed"
# the README's two commands: the first sh block's line, the second's
sed -n '/^```sh$/{n;p;}' "$src/README.md" | head -2 >"$root/root/readme.sh"
[ "$(wc -l <"$root/root/readme.sh")" -eq 2 ] || die "README.md does not open with two sh blocks"
echo "debian-root: running, in the root: $(head -c 60 "$root/root/readme.sh")... && make check"
env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
  chroot "$root" /bin/sh -c 'cd /root/merak && sh -e /root/readme.sh' >>"$log" 2>&1
rc=$?
grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR):' "$log"
[ $rc -eq 0 ] || die "the README's commands failed (exit $rc): see $log"
echo "debian-root: ok"
