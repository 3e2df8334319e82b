#!/bin/sh
# Regenerate the man pages from --help (the maintainer target `make man`):
#
#   HELP2MAN=help2man man/mkman.sh MERAK OUTDIR VERSION
#
# Writes OUTDIR/merak.1 and OUTDIR/merak-CMD.1 for every subcommand that
# `MERAK --help` lists (its "Subcommands:" block), with Debian's help2man.
# The pages are committed, so a build needs no help2man; a subcommand added
# without its page here fails tests/install.sh.  --version-string: the page
# must not depend on what `merak --version` sees (GPUs, for one).
set -eu
merak=$1 out=$2 version=$3
h2m=${HELP2MAN:-help2man}
command -v "$h2m" >/dev/null 2>&1 || { echo "mkman.sh: help2man not found (apt-get install help2man)" >&2; exit 1; }
list=$("$merak" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\)  *\(.*\)$/\1	\2/p')
[ -n "$list" ] || { echo "mkman.sh: no subcommands in '$merak --help'" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
opts="--no-info --no-discard-stderr --version-string=$version --manual=Merak-C"
see=
tab=$(printf '\t')
printf '[SEE ALSO]\n.BR merak (1)\n' >"$tmp/see-merak"
echo "$list" | { while IFS=$tab read -r cmd about; do
    # shellcheck disable=SC2086
    "$h2m" $opts --source="Merak-C $version" --name="$about" --include="$tmp/see-merak" --output="$tmp/page" "$merak $cmd"
    # the page's title: MERAK-CMD, not help2man's MERAK (the program's name)
    sed -e "s/^\.TH MERAK /.TH MERAK-$(echo "$cmd" | tr a-z A-Z) /" -e "s/^merak $cmd \\\\-/merak-$cmd \\\\-/" "$tmp/page" >"$tmp/merak-$cmd.1"
    see="$see${see:+,
}.BR merak-$cmd (1)"
  done
  printf '[SEE ALSO]\n%s\n' "$see" >"$tmp/see-also"
}
# shellcheck disable=SC2086
"$h2m" $opts --source="Merak-C $version" --name="automated 3D parallelism for transformer training" --include="$tmp/see-also" \
  --output="$tmp/merak.1" "$merak"
for f in "$tmp"/*.1; do cp "$f" "$out/"; echo "  wrote $out/$(basename "$f")"; done
