#!/bin/sh
# merak run --trace: one Chrome trace of the last step, all ranks merged by
# rank 0, with the simulator's event names; `merak trace summary` reads it.
. "$top_srcdir/tests/lib.sh"
T="$tmpdir/t.json"
expect_ok "8 ranks traced" timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 8 "$MERAK" run --dp 2 --pp 2 --tp 2 \
  --gbs 8 --steps 2 --schedule zb-h1 --json --trace "$T"
check "trace written, no temporary left" test -s "$T" -a -z "$(ls "$tmpdir" | grep tmp)"
for n in '"F0"' '"B_IN0"' '"B_W1"' '"SEND_ACT0"' '"RECV_GRAD1"' '"AR.tp"' '"AR.dp"' '"AR.tied"' '"OPT"' \
         '"ph":"C"' '"tid":3' '"pid":7'; do
  check "trace has $n" grep -q "$n" "$T"
done
check "events carry stage, mb, chunk, layer" grep -q '"args":{"stage":1,"mb":0,"chunk":0,"layer":' "$T"
expect_ok "trace summary reads it" "$MERAK" trace summary "$T"
check "summary shows 8 ranks" grep -q '8 ranks' "$tmpdir/out"
check "valid JSON" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$T"
finish
