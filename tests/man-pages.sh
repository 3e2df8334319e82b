#!/bin/sh
# The man pages (man/*.1, written from --help by `make man`, committed so a
# build needs no help2man) say what --help says: every long option a
# subcommand's --help names appears in its page.  A flag added without
# `make man` fails here.
. "${top_srcdir:-.}/tests/lib.sh"
cmds=$($MERAK --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\)  .*$/\1/p')
check "subcommands listed" sh -c "[ -n '$cmds' ]"
for c in $cmds; do
  page="$top_srcdir/man/merak-$c.1"
  check "man page of $c" test -f "$page"
  [ -f "$page" ] || continue
  $MERAK "$c" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmpdir/help"
  sed 's/\\-/-/g; s/\\f[BIRP]//g' "$page" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmpdir/man"
  missing=$(comm -23 "$tmpdir/help" "$tmpdir/man" | tr '\n' ' ')
  check "merak-$c.1 names every option of 'merak $c --help'${missing:+ (missing: $missing; run make man)}" \
    sh -c "[ -z '$missing' ]"
done
finish
