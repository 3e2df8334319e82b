#!/bin/sh
# The MPI-split search from a program linking libmerak (issue 33), over
# the program's own communicators: 3 ranks of tests/test_planner_mpi split
# into a group of 2 and one of 1, each agreeing with one process's search.
. "${top_srcdir:-.}/tests/lib.sh"
prog="$top_builddir/tests/test_planner_mpi"
[ -x "$prog" ] || { echo "no $prog: skipped"; exit 77; }
expect_ok "mpiexec -n 3 test_planner_mpi" $MPIEXEC $MPIEXEC_FLAGS -n 3 "$prog"
cat "$tmpdir/out"
finish
