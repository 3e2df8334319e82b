#!/bin/sh
# `make install` into a DESTDIR, then use the installed files as a user
# would: a C program including <merak/cluster.h> built with mpicc and the
# flags of `pkg-config --static merak` (libmerak.a, no LD_LIBRARY_PATH)
# and again against the shared libmerak; every public header compiles
# alone; man pages for merak and each subcommand `merak --help` lists; the
# plot scripts; the installed merak finding the installed model and cluster
# files by name and its plot scripts.  Skipped without pkg-config or mpicc.
. "${top_srcdir:-.}/tests/lib.sh"
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skipped"; exit 77; }
command -v mpicc >/dev/null 2>&1 || { echo "no mpicc: skipped"; exit 77; }
: "${MAKE:=make}"
d=$tmpdir/dest
# the folders and the compiler of the build, expanded by make itself
dirs=$(printf 'mk-dirs:\n\t@echo $(bindir) $(libdir) $(includedir) $(pkgdatadir) $(mandir)\n\t@echo $(CC) $(CFLAGS)\n' |
  $MAKE -s -C "$top_builddir" -f Makefile -f - mk-dirs | grep -v -e 'Entering directory' -e 'Leaving directory') ||
  { echo "FAIL: make cannot print the folders"; exit 1; }
# $CC: mpicc, with the build's CFLAGS (the sanitizer stage's libmerak.a needs its -fsanitize)
CC=$(echo "$dirs" | sed -n 2p)
set -- $(echo "$dirs" | sed -n 1p); bindir=$1 libdir=$2 includedir=$3 pkgdatadir=$4 mandir=$5
$MAKE -C "$top_builddir" install DESTDIR="$d" >"$tmpdir/install.log" 2>&1 ||
  { echo "FAIL: make install DESTDIR=$d"; tail -30 "$tmpdir/install.log"; exit 1; }
echo "ok: make install DESTDIR=$d (bindir $bindir, libdir $libdir, pkgdatadir $pkgdatadir)"

flags() { PKG_CONFIG_SYSROOT_DIR=$d PKG_CONFIG_PATH=$d$libdir/pkgconfig pkg-config "$@" merak; }
static=$(flags --cflags --libs --static) || { echo "FAIL: pkg-config --static merak"; exit 1; }
shared=$(flags --cflags --libs)
echo "pkg-config --cflags --libs --static merak: $static"
# PKG_CONFIG_SYSROOT_DIR prefixes every -I and -L, the dependencies' too (a
# sysroot holds a whole system): the host's folders those flags name
# outside the install (MPI, OpenBLAS, CUDA) are linked into the DESTDIR.
for w in $static; do
  case $w in
    -I"$d"*|-L"$d"*) p=${w#-?}; p=${p%/}
      [ -e "$p" ] || { mkdir -p "$(dirname "$p")" && ln -s "${p#"$d"}" "$p"; } ;;
  esac
done
cat >"$tmpdir/prog.c" <<'PROG'
#include <merak/cluster.h>
#include <stdio.h>

int main(void)
{
    int n = 0;
    for (const char *const *p = mk_cluster_preset_names(); *p; p++, n++) printf("%s\n", *p);
    return n > 0 ? 0 : 1;
}
PROG
# the static link: libmerak.a of the DESTDIR (its dependencies as the system has them)
lib_static=$(echo "$static" | sed 's/-lmerak/-Wl,-Bstatic -lmerak -Wl,-Bdynamic/')
# shellcheck disable=SC2086
expect_ok "mpicc prog.c \$(pkg-config --cflags --libs --static merak)" \
  $CC -Wall -Wextra -Werror -o "$tmpdir/prog-static" "$tmpdir/prog.c" $lib_static
check "prog-static needs no libmerak.so" sh -c "! readelf -d '$tmpdir/prog-static' | grep -q 'libmerak'"
expect_ok "prog-static runs" "$tmpdir/prog-static"
check "prog-static lists the cluster presets (dgx-a100)" grep -qx dgx-a100 "$tmpdir/out"
# shellcheck disable=SC2086
expect_ok "mpicc prog.c \$(pkg-config --cflags --libs merak)" $CC -o "$tmpdir/prog-shared" "$tmpdir/prog.c" $shared
expect_ok "prog-shared runs with LD_LIBRARY_PATH" env LD_LIBRARY_PATH="$d$libdir" "$tmpdir/prog-shared"
check "prog-shared uses libmerak.so" sh -c "readelf -d '$tmpdir/prog-shared' | grep -q 'libmerak.so'"

# every public header alone, with the installed tree's flags only
cflags=$(flags --cflags)
bad=0
for h in "$top_srcdir"/include/merak/*.h; do
  b=$(basename "$h")
  [ -f "$d$includedir/merak/$b" ] || { echo "not installed: merak/$b"; bad=1; continue; }
  printf '#include <merak/%s>\n' "$b" >"$tmpdir/h.c"
  # shellcheck disable=SC2086
  $CC -Wall -Wextra -Werror -fsyntax-only $cflags "$tmpdir/h.c" || { echo "does not compile: merak/$b"; bad=1; }
  grep -q 'include.*config\.h' "$d$includedir/merak/$b" && { echo "includes config.h: merak/$b"; bad=1; }
done
check "every header installed under include/merak, compiles alone" [ $bad -eq 0 ]

# a man page for merak and each subcommand, the plot scripts
cmds=$($MERAK --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
missing=
for c in "" $(for c in $cmds; do echo "-$c"; done); do
  [ -s "$d$mandir/man1/merak$c.1" ] || missing="$missing merak$c.1"
done
check "man pages of merak and its subcommands ($(echo $cmds)) installed${missing:+; missing:$missing}" \
  [ -n "$cmds" ] && [ -z "$missing" ]
check "plot scripts installed in \$(pkgdatadir)/plot" \
  [ -s "$d$pkgdatadir/plot/plot_timeline.py" ] && [ -s "$d$pkgdatadir/plot/plot_memory.py" ]

# the installed program: model and cluster files by name from the data folder
mk=$d$bindir/merak
export MERAK_DATADIR="$d$pkgdatadir"
mkdir "$tmpdir/cwd" && cd "$tmpdir/cwd" || exit 1
expect_ok "merak model --model gpt-small.json (installed, not in the cwd)" "$mk" model --model gpt-small.json
expect_ok "merak sim --cluster rtx3090-pcie.json (installed)" "$mk" sim --model gpt-tiny --cluster rtx3090-pcie.json \
  --gbs 4 --dp 2 --trace t.json
expect_fail "an absolute path is never looked up in the data folder" "/no/such/gpt-small.json" -- \
  "$mk" model --model /no/such/gpt-small.json
echo '{' >gpt-small.json
expect_fail "a file in the cwd comes first" "gpt-small.json" -- "$mk" model --model gpt-small.json
rm gpt-small.json
if "$PYTHON" -c 'import matplotlib' 2>/dev/null; then
  expect_ok "merak plot timeline (installed script)" "$mk" plot timeline t.json -o t.png
  expect_ok "merak plot memory" "$mk" plot memory t.json -o m.png
  check "PNGs written" [ -s t.png ] && [ -s m.png ]
else
  expect_fail "merak plot without matplotlib" "matplotlib" -- "$mk" plot timeline t.json -o t.png
fi
expect_ok "merak plot --help" "$mk" plot --help
expect_fail "merak plot with a bad kind" "unknown kind 'gantt'" -- "$mk" plot gantt t.json -o t.png
expect_fail "merak plot without a kind" "missing kind" -- "$mk" plot
finish
