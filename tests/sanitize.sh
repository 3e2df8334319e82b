#!/bin/sh
# Sanitizer stage (run by .ci/run after the main `make check`):
#
#   tests/sanitize.sh [BUILD_DIR]      (default: build-asan in the source tree)
#
# Builds the project again in BUILD_DIR (a VPATH build) with
# -fsanitize=address,undefined, then runs every test whose name does not
# start with mpi- (the corpus replay included) with the sanitizers set to
# stop at the first error and LeakSanitizer on.  tests/lsan.supp lists the
# third-party leaks that are suppressed (nothing of ours).  Left out:
# sim-valgrind.sh (valgrind cannot run an ASan binary) and the CUDA backend
# (configured --without-cuda: nvcc code is not instrumented).
#
# Output: the build log in BUILD_DIR/make.out, the tests' in
# BUILD_DIR/check.out, failing logs' tails on stdout, and the test-suite
# summary ("# PASS: N" ...).  Exit status: make check's (0 when all passed).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-asan}
jobs=${JOBS:-2}
san="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$build" && build=$(cd "$build" && pwd) || exit 1

# automake refuses a VPATH build from a source tree configured in place
# (as .ci/run's main stage leaves it): build from a copy of the distributed
# files instead, which also checks that the tests are all in EXTRA_DIST.
top=$src
if [ -f "$src/config.status" ]; then
  rm -rf "$build/src"
  make -C "$src" distdir distdir="$build/src" >"$build/distdir.out" 2>&1 || {
    tail -20 "$build/distdir.out"; exit 1; }
  top=$build/src
fi
mkdir -p "$build/obj"
cd "$build/obj" || exit 1
# --without-dnnl: oneDNN's JIT code is not ours to instrument (the bf16 GEMMs round and call sgemm there)
"$top/configure" --without-cuda --without-dnnl CFLAGS="$san" >"$build/configure.out" 2>&1 &&
  make -j"$jobs" >"$build/make.out" 2>&1 || {
  tail -40 "$build/configure.out" "$build/make.out"; exit 1; }

# Every TESTS entry but the MPI ones, from the generated Makefile.
tests=$(printf 'mk-print-tests:\n\t@echo $(TESTS)\n' | make -s -f Makefile -f - mk-print-tests)
list=
for t in $tests; do
  case $(basename "$t") in mpi-*|sim-valgrind.sh) ;; *) list="$list $t" ;; esac
done

ulimit -c 0
ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:print_stacktrace=1:strict_string_checks=1"
UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
LSAN_OPTIONS="suppressions=$src/tests/lsan.supp:print_suppressions=0"
# hwloc's PCI plugin (libpciaccess) allocates at topology load and is
# dlclose()d with the pointer: LeakSanitizer then reports an unnamed
# ("<unknown module>") leak that no suppression can match.  The tests need
# no PCI devices in the topology, so the plugin is not loaded.
HWLOC_PLUGINS_BLACKLIST=hwloc_pci
export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS HWLOC_PLUGINS_BLACKLIST
make -j"$jobs" check TESTS="$list" >"$build/check.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  for t in $list; do
    b=${t%.sh}; b=${b%.py}
    grep -q -E '^:test-result: (FAIL|ERROR)' "$b.trs" 2>/dev/null && { echo "== $b.log"; tail -40 "$b.log"; }
  done
fi
grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR):' "$build/check.out"
exit $rc
