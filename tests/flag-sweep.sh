#!/bin/sh
# Every numeric flag of every subcommand that does not start MPI (merak run
# and merak profile are swept by mpi-run-sweep.sh) with 0, -1, 2^31-1, 2^63,
# abc, 1e-320 and nan: exit 0 or 2, never a signal, within seconds, and one
# stderr line on exit 2 (tests/sweep-lib.sh).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/sweep-lib.sh"

cmds=$(sweep_commands | grep -v -x -e run -e profile)
check "merak --help lists the subcommands" test "$(echo "$cmds" | wc -w)" -ge 5
check "merak sim --help lists its numeric flags" test "$(sweep_flags sim | wc -l)" -ge 15
# shellcheck disable=SC2086
sweep $cmds
check "the sweep ran" test "$sweep_runs" -ge 200
finish
