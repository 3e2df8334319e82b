#!/bin/sh
# `make install` into a DESTDIR, then use the installed files as a user
# would: a C program including only <merak/merak.h> built with mpicc and
# the flags of `pkg-config --static merak` (libmerak.a, no LD_LIBRARY_PATH),
# and a C and a C++ program built with cc and c++ and pkg-config's flags
# alone against the shared libmerak (libmerak.so.1, only the API
# exported); the public API is at most 12 headers, each compiles alone as
# C and C++, none but run.h names MPI, none Jansson; man pages for merak and each subcommand `merak --help` lists; the
# plot scripts; the installed merak finding the installed model and cluster
# files by name and its plot scripts.  Skipped without pkg-config or mpicc.
. "${top_srcdir:-.}/tests/lib.sh"
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skipped"; exit 77; }
command -v mpicc >/dev/null 2>&1 || { echo "no mpicc: skipped"; exit 77; }
: "${MAKE:=make}"
d=$tmpdir/dest
# the folders and the compiler of the build, expanded by make itself
dirs=$(printf 'mk-dirs:\n\t@echo $(bindir) $(libdir) $(includedir) $(pkgdatadir) $(mandir) $(pkglibdir)\n\t@echo $(CC) $(CFLAGS)\n\t@echo x $(CFLAGS)\n' |
  $MAKE -s -C "$top_builddir" -f Makefile -f - mk-dirs | grep -v -e 'Entering directory' -e 'Leaving directory') ||
  { echo "FAIL: make cannot print the folders"; exit 1; }
# $CC: mpicc, with the build's CFLAGS (the sanitizer stage's libmerak.a needs its -fsanitize)
CC=$(echo "$dirs" | sed -n 2p)
# the build's CFLAGS alone (-g -O2; the sanitizer stage's -fsanitize), for cc and c++
BUILD_CFLAGS=$(echo "$dirs" | sed -n 3p | sed 's/^x//')
BUILD_CXXFLAGS=$(echo "$BUILD_CFLAGS" | sed 's/-std=[^ ]*//g')
set -- $(echo "$dirs" | sed -n 1p); bindir=$1 libdir=$2 includedir=$3 pkgdatadir=$4 mandir=$5 pkglibdir=$6
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
#include <merak/merak.h>
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
# the shared library with the plain compilers: no MPI wrapper, no MPI or
# Jansson header reached from <merak/merak.h>
cat >"$tmpdir/prog.cpp" <<'PROG'
#include <merak/merak.h>
#include <iostream>
#include <string>

int main()
{
    std::string all;
    for (const char *const *p = mk_cluster_preset_names(); *p; p++) all += std::string(*p) + "\n";
    std::cout << all;
    return all.empty() ? 1 : 0;
}
PROG
cc=${MK_TEST_CC:-cc} cxx=${MK_TEST_CXX:-c++}
# shellcheck disable=SC2086
expect_ok "cc prog.c \$(pkg-config --cflags --libs merak)" $cc $BUILD_CFLAGS -Wall -Wextra -Werror -o "$tmpdir/prog-shared" \
  "$tmpdir/prog.c" $shared
expect_ok "prog-shared runs with LD_LIBRARY_PATH" env LD_LIBRARY_PATH="$d$libdir" "$tmpdir/prog-shared"
check "prog-shared uses libmerak.so.1" sh -c "readelf -d '$tmpdir/prog-shared' | grep -q 'libmerak.so.1'"
check "prog-shared lists the cluster presets (dgx-a100)" grep -qx dgx-a100 "$tmpdir/out"
if command -v "$cxx" >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  expect_ok "c++ prog.cpp \$(pkg-config --cflags --libs merak)" $cxx $BUILD_CXXFLAGS -Wall -Wextra -Werror \
    -o "$tmpdir/prog-cxx" "$tmpdir/prog.cpp" $shared
  expect_ok "prog-cxx runs" env LD_LIBRARY_PATH="$d$libdir" "$tmpdir/prog-cxx"
  check "prog-cxx lists the cluster presets (dgx-a100)" grep -qx dgx-a100 "$tmpdir/out"
else
  echo "FAIL: no C++ compiler ($cxx) for the C++ program"; fails=$((fails + 1))
fi
check "the soname is libmerak.so.1" sh -c "readelf -d '$d$libdir/libmerak.so' | grep -q 'SONAME.*libmerak.so.1'"
# only the API is exported: an internal function (the planner's queue) is not
check "libmerak.so exports mk_cluster_preset_names and hides the internals" sh -c \
  "nm -D --defined-only '$d$libdir/libmerak.so' | grep -q ' mk_cluster_preset_names\$' &&
   ! nm -D --defined-only '$d$libdir/libmerak.so' | grep -q ' mk_pl_heap_push\$'"

# the CUDA backend: a module in $(pkglibdir) (merak_cuda.so), never linked
# into libmerak or its flags; a fake driver reporting one device
# (MERAK_CUDA_DRIVER) gets the loader to the installed module, loaded by the
# installed merak and by a program using the shared libmerak (no symbol of
# the module may resolve to libmerak's mk_cuda_* of the same names)
check "libmerak.so and pkg-config merak need no CUDA library" \
  sh -c "! readelf -d '$d$libdir/libmerak.so' | grep -q -E 'cublas|cudart' && ! echo '$static' | grep -q cublas"
if grep -q '^#define MK_HAVE_CUDA 1' "$top_builddir/config.h"; then
  mod=$d$pkglibdir/merak_cuda.so
  check "the CUDA module installed as \$(pkglibdir)/merak_cuda.so" [ -s "$mod" ]
  printf 'int cuInit(unsigned f) { return 0; }\nint cuDeviceGetCount(int *n) { *n = 1; return 0; }\n' >"$tmpdir/drv.c"
  # a CUDA table comes only from a loaded module (creating it touches no device)
  cat >"$tmpdir/cuda.c" <<'PROG'
#include <merak/run.h>
#include <stdio.h>

int main(void)
{
    /* the module loads (the fake driver has a device); the CUDA runtime
       then sees none on a machine without a GPU: refused, saying so */
    struct mk_backend *be = mk_backend_new("cuda");
    printf("%s\n", be ? mk_backend_name(be) : mk_error_last());
    mk_backend_free(be);
    return 0;
}
PROG
  # shellcheck disable=SC2086
  expect_ok "fake driver, prog-cuda against the shared libmerak" sh -c "$CC -shared -fPIC -o '$tmpdir/fakecuda.so' \
    '$tmpdir/drv.c' && $CC -o '$tmpdir/prog-cuda' '$tmpdir/cuda.c' $shared"
  expect_ok "prog-cuda loads the installed module" env LD_LIBRARY_PATH="$d$libdir" MERAK_CUDA_DRIVER="$tmpdir/fakecuda.so" \
    MERAK_CUDA_MODULE="$mod" "$tmpdir/prog-cuda"
  check "prog-cuda: a CUDA table, or the loaded module's runtime sees no device ($(cat "$tmpdir/out"))" \
    grep -q -x -e 'cuda' -e '--backend cuda: no CUDA device is visible; use --backend cpu' "$tmpdir/out"
  expect_ok "installed merak version" env MERAK_CUDA_DRIVER="$tmpdir/fakecuda.so" MERAK_CUDA_MODULE="$mod" \
    "$d$bindir/merak" version
  check "installed merak loads the installed module ($(grep cuda: "$tmpdir/out"))" grep -q -F "cuda: yes (cuBLAS, module $mod;" "$tmpdir/out"
fi

# every installed header alone, as C and C++, with the installed tree's
# flags only; at most 12; MPI named only by run.h (comments aside), Jansson by none
cflags=$(flags --cflags)
bad=0 n=0
for h in "$d$includedir"/merak/*.h; do
  b=$(basename "$h") n=$((n + 1))
  [ -f "$top_srcdir/include/merak/$b" ] || { echo "installed but not in include/merak: $b"; bad=1; continue; }
  printf '#include <merak/%s>\n' "$b" >"$tmpdir/h.c"
  cp "$tmpdir/h.c" "$tmpdir/h.cpp"
  # shellcheck disable=SC2086
  $CC -Wall -Wextra -Werror -fsyntax-only $cflags "$tmpdir/h.c" || { echo "does not compile: merak/$b"; bad=1; }
  # shellcheck disable=SC2086
  ${MK_TEST_CXX:-c++} $BUILD_CXXFLAGS -Wall -Wextra -Werror -fsyntax-only $cflags "$tmpdir/h.cpp" ||
    { echo "not C++: merak/$b"; bad=1; }
  grep -q 'include.*config\.h' "$h" && { echo "includes config.h: merak/$b"; bad=1; }
  code=$(sed 's://.*$::' "$h" | tr '\n' ' ' | sed 's:/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/: :g')
  case $b in run.h) ;; *) echo "$code" | grep -q 'MPI\|mpi\.h' && { echo "names MPI: merak/$b"; bad=1; } ;; esac
  echo "$code" | grep -q -i -w -E 'json_t|jansson' && { echo "names Jansson: merak/$b"; bad=1; }
done
[ $n -le 12 ] || { echo "$n headers installed, at most 12 (the public API)"; bad=1; }
check "the public API: $n headers, each compiles alone (C, C++), no MPI but in run.h, no Jansson" [ $bad -eq 0 ]

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
