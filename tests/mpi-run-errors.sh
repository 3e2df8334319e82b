#!/bin/sh
# `mpiexec -n N merak run` with a bad layout: one message (rank 0 only),
# every rank exits 2, no hang.
. "$top_srcdir/tests/lib.sh"
mpi() { n=$1; shift; "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run "$@"; }
expect_fail "dp*pp*tp != world" "2 but there are 4 ranks" -- mpi 4 --dp 2
expect_fail "tp does not divide the heads" "does not divide" -- mpi 3 --tp 3
expect_fail "pp larger than the blocks" "exceeds the model's 1 blocks" -- mpi 2 --pp 2 --num-layers 1
expect_fail "interleaved with m not a multiple of pp" "multiple of pp" -- mpi 2 --pp 2 --schedule interleaved --gbs 3
expect_fail "plan with layout flags" "combine" -- mpi 2 --plan p.json --dp 2
expect_fail "bad flag on every rank" "unknown option" -- mpi 4 --dp 4 --bogus
expect_fail "bad schedule on every rank" "unknown schedule" -- mpi 4 --dp 4 --schedule foo
finish
