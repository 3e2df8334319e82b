#!/bin/sh
# Regenerate the golden outputs (tests/golden/*.jsonl.gz) from the current
# build; the tests golden-sched.sh, golden-sim.sh and mpi-golden.sh compare
# every later build with them.  The case grids are in golden.py.
#
# When to rerun: almost never.
#   sched.jsonl.gz, sim-ideal.jsonl.gz   PERMANENT INVARIANTS (issue 14): the
#       scheduler's streams and every `merak sim` result on the ideal cluster
#       (only F/B/R matmuls cost).  No later change to the cost model may
#       alter them; rerun only to ADD cases (a new schedule, a new grid
#       point), and check with `git diff` (zcat) that no old case changed.
#   sim-clusters.jsonl.gz, plan.jsonl.gz, run.jsonl.gz   guard the
#       restructuring of issue 14.  A later issue that deliberately changes
#       the cost model (or the executor's arithmetic) may rerun this script,
#       with a note in that issue saying what changed and why.
#
# Usage (from the top of a configured build tree, after `make`):
#   sh tests/golden/record.sh [KIND...]     KIND: sched sim-ideal sim-clusters plan run
# It builds tests/golden/batch, runs every case in a fresh process (batch
# --fork; run cases under mpiexec -n 8 and less) and writes the files into
# the source tree.  Takes a few minutes (about 30 ms a case).
set -e
: "${top_builddir:=.}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${PYTHON:=python3}"
: "${MPIEXEC:=mpiexec}"
: "${OPENBLAS_NUM_THREADS:=1}"
export MPIEXEC OPENBLAS_NUM_THREADS
kinds=${*:-sched sim-ideal sim-clusters plan run}
make -C "$top_builddir" merak tests/golden/batch >/dev/null
for k in $kinds; do
  "$PYTHON" "$top_srcdir/tests/golden/golden.py" record "$k" "$top_srcdir/tests/golden/$k.jsonl.gz" \
    --batch "$top_builddir/tests/golden/batch" --merak "$top_builddir/merak"
done
