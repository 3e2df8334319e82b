#!/bin/sh
# The executor as it runs on a device backend, without a GPU: MK_TEST_STAGED=1 makes the cpu backend's
# buffers look like a device's (src/cpu/backend_cpu.c cpu_staged), so every buffer handed to MPI goes
# through a host copy that starts as NaNs (src/exec/comm.c mk_comm_stage / mk_comm_unstage) and the 16-bit
# weight and gradient stores stay off (mk_exec_store16), the CUDA backend's configuration.
# In fp32 the copies are exact, so every layout trains as it does unstaged, bit for bit: DP with ZeRO-0..3
# (gradient buckets, reduce-scatters, the weights' gathers), pipelines (1f1b, interleaved, merak, zb-h1,
# zb-v and dualpipev: sends both ways, two chunks a rank), TP with and without sequence parallelism and
# sub-pipelined (--tp-overlap 2), CP (ring and all-gather), EP (the all-to-alls), the
# tied embedding across pp, 4 ranks at dp 2 x pp 2, the gradient dump with ZeRO-1 and -3.  A copy the
# executor forgot (a send's data not copied in, a received buffer not copied out) reads NaNs and shows
# here.  MPI handed a device buffer itself, not its staged copy, is refused by tests/mpi_guard.c (an
# LD_PRELOAD shim over the MPI calls the executor makes; the staged buffers are memfd mappings it finds
# in /proc/self/maps): ZeRO-1's reduce-scatter, weight gather and gradient dump did that before this
# test, EP's all-to-alls until the session that wrote it, and the ZeRO-1 dump of a model sharded in units
# (moe-tiny's dense and expert parts) until the next (checked: the old call refused here).  CP's exchanges run without the guard:
# its layers are the CPU's only (the CUDA backend refuses them) and hand MPI their buffers, which the
# guard is checked to refuse.
# In 16 bits: GEMM operands, layer outputs and saved activations 16-bit over fp32 weights and gradients
# (the stores off).  The state is 16 bytes a parameter (fp32 weights, gradients and Adam) against 18 with
# 16-bit weights over fp32 masters; the losses are the stores' within 1e-4 (the norms' and embeddings'
# weights read unrounded); pp 2 (16-bit sends, staged) trains as one rank bit for bit, tp 2 and dp 2 with
# ZeRO-1 within 1e-4 (measured: 1.5e-5 and below, the sums' order flipping a rounding now and then);
# fp16 rounds its gradients in fp32 buffers.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"; }
losses() { "$PY" -c 'import json,sys; print(" ".join("%.9f" % x for x in json.load(open(sys.argv[1]))["losses"]))' "$1"; }
GUARD=${top_builddir:-.}/tests/.libs/mpi_guard.so
[ -f "$GUARD" ] || { echo "FAIL: no $GUARD (make check builds it)"; exit 1; }
# run N OUT STAGED GUARD FLAGS...: merak run on N ranks, MK_TEST_STAGED=STAGED, the guard preloaded when GUARD is 1
run() {
  r_n=$1 r_out=$2 r_st=$3 r_pre=; [ "$4" = 1 ] && r_pre=$GUARD
  shift 4
  MK_TEST_STAGED=$r_st LD_PRELOAD=$r_pre timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n "$r_n" "$MERAK" run --steps 3 --json \
    "$@" >"$tmpdir/$r_out" 2>"$tmpdir/err" </dev/null ||
    { echo "FAIL: merak run -n $r_n $* (staged $r_st)"; cat "$tmpdir/err"; fails=$((fails + 1)); }
}
while read n flags; do
  case " $flags " in *" --cp "*) gd=0 ;; *) gd=1 ;; esac
  run "$n" plain.json 0 0 $flags
  run "$n" staged.json 1 $gd $flags
  a=$(losses "$tmpdir/plain.json" 2>/dev/null) b=$(losses "$tmpdir/staged.json" 2>/dev/null)
  check "staged, $n ranks, $flags$([ $gd = 1 ] && echo ', guarded'): the unstaged losses bit for bit ($b)" \
    test -n "$a" -a "$a" = "$b"
done <<'LAYOUTS'
2 --model gpt-tiny --gbs 8 --dp 2
2 --model gpt-tiny --gbs 8 --dp 2 --zero 1
2 --model gpt-tiny --gbs 8 --dp 2 --zero 2
2 --model gpt-tiny --gbs 8 --dp 2 --zero 3
2 --model gpt-tiny --gbs 8 --pp 2
2 --model gpt-tiny --gbs 8 --pp 2 --schedule zb-v
2 --model gpt-tiny --gbs 8 --pp 2 --schedule interleaved
2 --model gpt-tiny --gbs 8 --pp 2 --schedule dualpipev
2 --model gpt-tiny --gbs 8 --pp 2 --schedule merak
2 --model gpt-tiny --gbs 8 --pp 2 --schedule zb-h1 --recompute none
2 --model gpt-tiny --gbs 8 --tp 2 --tp-overlap 2
2 --model llama-tiny --gbs 8 --tp 2
2 --model llama-tiny --gbs 8 --tp 2 --sequence-parallel
2 --model llama-tiny --gbs 8 --cp 2 --seq-length 256
2 --model llama-tiny --gbs 8 --cp 2 --seq-length 256 --cp-comm-type allgather
2 --model moe-tiny --gbs 8 --ep 2 --dp 2
4 --model gpt-tiny --gbs 8 --dp 2 --pp 2
LAYOUTS

# the guard refuses a device buffer handed to MPI: CP's ring exchange (the CPU's only) under it
MK_TEST_STAGED=1 LD_PRELOAD=$GUARD timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --model llama-tiny --gbs 8 \
  --cp 2 --seq-length 256 --steps 1 </dev/null >/dev/null 2>"$tmpdir/err"
check "the guard refuses MPI a staged device buffer (CP's exchange): $(grep -m1 mpi_guard "$tmpdir/err")" \
  grep -q "mpi_guard: MPI_.* was handed a device buffer" "$tmpdir/err"
# the first step's gradients dumped with ZeRO-1 (the pieces gathered into the block) and ZeRO-3, byte for byte;
# moe-tiny's ZeRO-1 shards its dense and expert parts as units of their own, gathered unit by unit
# (exec.c dump_units: it handed MPI the device pieces before src/exec/comm.c's mk_comm_allgatherv)
for z in "1 --model gpt-tiny" "3 --model gpt-tiny" "1 --model moe-tiny --ep 2"; do
  for st in 0 1; do
    run 2 dump.json $st $st --gbs 8 --dp 2 --zero $z --dump-grads "$tmpdir/g$st.bin"
  done
  check "staged, dp 2 --zero $z: the gradient dump byte for byte" cmp "$tmpdir/g0.bin" "$tmpdir/g1.bin"
done

# 16-bit runs as on a device
P="--model gpt-tiny --seq-length 256 --gbs 4 --steps 4 --json"
MK_TEST_STAGED=1 LD_PRELOAD=$GUARD "$MERAK" run $P --bf16 >"$tmpdir/d1.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
"$MERAK" run $P --bf16 >"$tmpdir/s1.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
check "staged bf16 (fp32 weights under 16-bit GEMMs): state $(field "$tmpdir/d1.json" state_memory_bytes), 16/18 \
of the 16-bit store's $(field "$tmpdir/s1.json" state_memory_bytes); losses within 1e-4; the precision says so" "$PY" -c '
import json, sys
d, s = (json.load(open(f)) for f in sys.argv[1:])
a, b = d["state_memory_bytes"][0], s["state_memory_bytes"][0]
assert abs(a / b - 16 / 18) < 0.01, (a, b)
assert all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(d["losses"], s["losses"])) and len(d["losses"]) == 4
assert d["dtype"] == "bf16" and d["precision"].startswith("16-bit GEMM operands") and "fp32 weights" in d["precision"]' \
  "$tmpdir/d1.json" "$tmpdir/s1.json"
within() { "$PY" -c '
import json, sys; a, b = (json.load(open(f))["losses"] for f in sys.argv[1:3]); t = float(sys.argv[3])
sys.exit(not (a and len(a) == len(b) and all(abs(x - y) <= t * abs(y) for x, y in zip(a, b))))' "$@"; }
for L in "--pp 2" "--tp 2" "--dp 2 --zero 1"; do
  MK_TEST_STAGED=1 LD_PRELOAD=$GUARD timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run $P --bf16 $L >"$tmpdir/d2.json" \
    2>"$tmpdir/err" </dev/null || cat "$tmpdir/err"
  tol=1e-4; [ "$L" = "--pp 2" ] && tol=0
  check "staged bf16, $L: one rank's losses (within $tol)" within "$tmpdir/d2.json" "$tmpdir/d1.json" $tol
done
MK_TEST_STAGED=1 LD_PRELOAD=$GUARD "$MERAK" run $P --fp16 --initial-loss-scale 65536 >"$tmpdir/d16.json" 2>"$tmpdir/err" ||
  cat "$tmpdir/err"
check "staged fp16: \"grads\" $(field "$tmpdir/d16.json" grads), loss scale $(field "$tmpdir/d16.json" loss_scale)" \
  test "$(field "$tmpdir/d16.json" grads)" = fp16 -a "$(field "$tmpdir/d16.json" loss_scale)" = 65536.0
finish
