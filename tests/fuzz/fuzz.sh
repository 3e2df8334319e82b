#!/bin/sh
# `make fuzz`: build the libFuzzer harnesses with clang and run each one.
#
# The library is built with mpicc (gcc); libFuzzer needs the objects it
# covers compiled by clang with -fsanitize=fuzzer-no-link, so this script
# compiles the library's C sources again with clang into $FUZZ_BUILD (an
# object is rebuilt when its source or any header is newer) and links one
# binary per reader against that archive.  No harness calls MPI_Init; the
# MPI flags are there only because headers and some objects refer to MPI.
#
# Each fuzzer then runs for FUZZ_SECONDS in libFuzzer's fork mode (a crash,
# timeout or out-of-memory input is recorded and fuzzing goes on), from
# the committed seeds (tests/fuzz/corpus/READER, only read) and from what
# earlier runs found; new inputs and reproducers go under $FUZZ_WORK, never
# into the source tree.  Exits 1 when a run left a new reproducer (listed).
#
# Set by fuzz.mk (all have defaults): CLANG, FUZZ_SRCDIR, FUZZ_CPPFLAGS,
# FUZZ_LIBS, FUZZ_LIBSRCS, FUZZ_SECONDS, FUZZ_MAX_LEN, FUZZ_RSS_MB,
# FUZZ_TIMEOUT, FUZZ_READERS, FUZZ_BUILD, FUZZ_WORK, FUZZ_JOBS.
set -u
: "${CLANG:=clang}" "${FUZZ_SRCDIR:=.}" "${FUZZ_CPPFLAGS:=}" "${FUZZ_LIBS:=}" "${FUZZ_LIBSRCS:=}"
: "${FUZZ_SECONDS:=60}" "${FUZZ_MAX_LEN:=65536}" "${FUZZ_RSS_MB:=2048}" "${FUZZ_TIMEOUT:=10}"
: "${FUZZ_READERS:=model cluster plan trace safetensors data}" "${FUZZ_JOBS:=2}"
: "${FUZZ_BUILD:=tests/fuzz/build}" "${FUZZ_WORK:=tests/fuzz/work}"
src=$FUZZ_SRCDIR
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

die() { echo "make fuzz: $*" >&2; exit 2; }
command -v "$CLANG" >/dev/null 2>&1 || die "$CLANG not found: install the Debian packages 'clang libclang-rt-dev'"

# MPI include and link flags from the wrapper (MPICH: -show; Open MPI: --showme).
mpi_cflags= mpi_libs=
for w in $(mpicc -show 2>/dev/null || mpicc --showme 2>/dev/null || pkg-config --cflags --libs mpich); do
  case $w in -I*) mpi_cflags="$mpi_cflags $w" ;; -L*|-l*|-Wl,*) mpi_libs="$mpi_libs $w" ;; esac
done

mkdir -p "$FUZZ_BUILD/obj" "$FUZZ_WORK" || die "cannot create $FUZZ_BUILD and $FUZZ_WORK"
newest_h=$(ls -t "$src"/include/merak/*.h "$src"/src/*/*.h "$src"/sim/*.h "$src"/tests/fuzz/fuzz.h \
  config.h 2>/dev/null | head -1)

# compile SRC OBJ FLAGS...: clang, only when out of date; no object on failure.
compile() {
  s=$1 o=$2; shift 2
  [ -f "$o" ] && [ ! "$s" -nt "$o" ] && [ ! "$newest_h" -nt "$o" ] && return 0
  echo "  CLANG    $s"
  rm -f "$o"
  # FUZZ_CPPFLAGS is shell words as make's recipe writes them (quotes and
  # all: -DMK_DATADIR='"/usr/local/share/merak-c"'): eval parses them again
  eval "\$CLANG \$cflags \"\$@\" $FUZZ_CPPFLAGS \$mpi_cflags -c \"\$s\" -o \"\$o\""
}

echo "make fuzz: compiling the library with $CLANG (fuzzer-no-link, ASan, UBSan)"
objs= n=0
for s in $FUZZ_LIBSRCS; do
  case $s in *.c) ;; *) continue ;; esac
  o="$FUZZ_BUILD/obj/$(echo "$s" | tr / _ | sed 's/\.c$/.o/')"
  objs="$objs $o"
  compile "$src/$s" "$o" -fsanitize=fuzzer-no-link &
  n=$((n + 1)); [ $((n % FUZZ_JOBS)) -eq 0 ] && wait
done
wait
for o in $objs; do [ -f "$o" ] || die "compiling the library failed"; done
lib="$FUZZ_BUILD/libmerak-fuzz.a"
rm -f "$lib" && ar rcs "$lib" $objs || die "cannot archive $lib"

bins=
for r in $FUZZ_READERS; do
  [ -f "$src/tests/fuzz/fuzz_$r.c" ] || die "no harness for '$r' (tests/fuzz/fuzz_$r.c)"
  compile "$src/tests/fuzz/fuzz_$r.c" "$FUZZ_BUILD/fuzz_$r.o" -fsanitize=fuzzer-no-link || die "compiling fuzz_$r.c failed"
  compile "$src/tests/fuzz/fuzz_common.c" "$FUZZ_BUILD/fuzz_common.o" || die "compiling fuzz_common.c failed"
  echo "  LINK     $FUZZ_BUILD/fuzz-$r"
  # shellcheck disable=SC2086
  $CLANG $cflags -fsanitize=fuzzer -o "$FUZZ_BUILD/fuzz-$r" "$FUZZ_BUILD/fuzz_$r.o" "$FUZZ_BUILD/fuzz_common.o" \
    "$lib" $FUZZ_LIBS $mpi_libs -lm || die "linking fuzz-$r failed"
  bins="$bins $r"
done

# The JSON readers share one dictionary of the formats' keys and tokens.
found=0
for r in $bins; do
  dict=
  case $r in model|cluster|plan|trace) dict="-dict=$src/tests/fuzz/json.dict" ;; esac
  # scratch files of a crashed job (tests/fuzz/fuzz_common.c) stay here, not in /tmp
  mkdir -p "$FUZZ_WORK/$r" "$FUZZ_WORK/$r-artifacts" "$FUZZ_WORK/tmp"
  before=$(ls "$FUZZ_WORK/$r-artifacts" | wc -l)
  echo "make fuzz: $r for $FUZZ_SECONDS s (log: $FUZZ_WORK/$r.log)"
  # shellcheck disable=SC2086
  TMPDIR="$FUZZ_WORK/tmp" ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}" \
  "$FUZZ_BUILD/fuzz-$r" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$FUZZ_SECONDS" -max_len="$FUZZ_MAX_LEN" -rss_limit_mb="$FUZZ_RSS_MB" \
    -timeout="$FUZZ_TIMEOUT" -artifact_prefix="$FUZZ_WORK/$r-artifacts/" $dict \
    "$FUZZ_WORK/$r" "$src/tests/fuzz/corpus/$r" >"$FUZZ_WORK/$r.log" 2>&1
  grep -E '^#[0-9]+: cov' "$FUZZ_WORK/$r.log" | tail -1 | sed "s/^/  $r: /"
  after=$(ls "$FUZZ_WORK/$r-artifacts" | wc -l)
  if [ "$after" -gt "$before" ]; then
    found=1
    echo "  $r: $((after - before)) new reproducer(s) in $FUZZ_WORK/$r-artifacts:"
    ls -t "$FUZZ_WORK/$r-artifacts" | head -n $((after - before)) | sed 's/^/    /'
  fi
done
exit $found
