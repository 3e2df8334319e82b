#!/bin/sh
# Bad input to `merak sched`: one line on stderr naming the problem, exit 2.
. "$top_srcdir/tests/lib.sh"

expect_fail "missing --pp" "--pp is required" -- "$MERAK" sched --micro-batches 8
expect_fail "missing --micro-batches" "--micro-batches is required" -- "$MERAK" sched --pp 4
expect_fail "pp 0" "--pp must be an integer >= 1" -- "$MERAK" sched --pp 0 --micro-batches 8
expect_fail "m 0" "--micro-batches must be an integer >= 1" -- "$MERAK" sched --pp 4 --micro-batches 0
expect_fail "unknown schedule" "unknown schedule '2f2b'" -- "$MERAK" sched --schedule 2f2b --pp 4 --micro-batches 8
expect_fail "unknown recompute" "unknown recompute 'some'" -- "$MERAK" sched --recompute some --pp 4 --micro-batches 8
expect_fail "bad stage-aware ratio" "ratio R in \[0, 1\]" -- \
  "$MERAK" sched --recompute stage-aware:2 --pp 4 --micro-batches 8
expect_fail "auto without a model" "auto needs a model" -- "$MERAK" sched --recompute auto --pp 4 --micro-batches 8
expect_fail "interleaved m not a multiple of p" "multiple of pipeline stages" -- \
  "$MERAK" sched --schedule interleaved --pp 4 --micro-batches 6
expect_fail "vpp without interleaved" "needs the interleaved schedule" -- \
  "$MERAK" sched --schedule 1f1b --vpp 2 --pp 4 --micro-batches 8
expect_fail "flag of another subcommand" "unknown option '--dp'" -- "$MERAK" sched --dp 2 --pp 4 --micro-batches 8
finish
