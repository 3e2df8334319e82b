#!/bin/sh
# The MPI-split search from a program linking libmerak (issue 33): 2 ranks
# of tests/test_planner_mpi agree with one process's search.
. "${top_srcdir:-.}/tests/lib.sh"
prog="$top_builddir/tests/test_planner_mpi"
[ -x "$prog" ] || { echo "no $prog: skipped"; exit 77; }
expect_ok "mpiexec -n 2 test_planner_mpi" $MPIEXEC $MPIEXEC_FLAGS -n 2 "$prog"
cat "$tmpdir/out"
finish
