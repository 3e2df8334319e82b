#!/bin/sh
# The flag sweep (tests/sweep-lib.sh) of the subcommands that start MPI
# (singleton MPI_Init, no mpiexec): every numeric flag of merak run and
# merak profile with 0, -1, 2^31-1, 2^63, abc, 1e-320 and nan.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/sweep-lib.sh"

check "merak run --help lists its numeric flags" test "$(sweep_flags run | wc -l)" -ge 25
# the reproducers: one clear line, exit 2
mpi() { n=$1; shift; "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" "$@"; }
expect_fail "run with a 2^30-sequence micro-batch" "--mbs must be at most 65536" -- mpi 1 run --mbs 1073741824
expect_fail "run whose buffers exceed the machine" "more than this machine's" -- \
  mpi 1 run --seq-length 1048576 --steps 1
expect_fail "a denormal learning rate" "--lr 1e-320 is out of range" -- mpi 1 run --lr 1e-320
expect_fail "a decay horizon above the step maximum" "--lr-decay-iters must be at most 10000000" -- \
  mpi 1 run --lr-decay-iters 2147483647
expect_fail "plan argument error under mpiexec: rank 0 only" "--gbs must be an integer" -- mpi 2 plan --gbs abc
sweep run profile
check "the sweep ran" test "$sweep_runs" -ge 200
finish
