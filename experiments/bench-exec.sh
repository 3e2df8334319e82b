#!/bin/sh
# Executor benchmark (not part of make check): gpt2-124m, one rank, batch
# 4 x seq 64, no recompute.  Prints the median step time, the achieved
# matmul GFLOP/s (Megatron-LM's count: 72*B*s*l*h^2*(1 + s/(6h) + V/(12lh))),
# this machine's OpenBLAS sgemm GFLOP/s on the model's largest GEMM (the LM
# head: (B*s, h) x (h, V padded)) with the kernels merak runs (its
# `merak version` line: OpenBLAS's choice, OPENBLAS_CORETYPE, or merak's
# own where OpenBLAS fell back to its SSE kernels), and their ratio; then
# the same step with --bf16 (its GEMM engine: oneDNN's bf16 kernel where
# built with it and the CPU has one, else sgemm of rounded operands) and
# its speed against the fp32 step and against sgemm; and the --fp16 step
# (sgemm of rounded operands, fp16 gradient buffers) against the fp32 one.
# Usage: experiments/bench-exec.sh [MERAK] [STEPS]   (run from the build tree)
set -e
MERAK=${1:-./merak}
STEPS=${2:-4}
B=4 S=64 L=12 H=768 V=50257 VP=50304
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$MERAK" run --model gpt2-124m --seq-length $S --mbs $B --gbs $B --steps "$STEPS" \
  --recompute none --json >"$tmp/run.json"
step=$(sed -n 's/.*"step_time_s":\([0-9.eE+-]*\).*/\1/p' "$tmp/run.json")
loss=$(sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' "$tmp/run.json")
peak=$(sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$tmp/run.json")
# the same step with bf16 GEMM operands (issue 37), side by side in this run
"$MERAK" run --model gpt2-124m --seq-length $S --mbs $B --gbs $B --steps "$STEPS" \
  --recompute none --bf16 --json >"$tmp/bf16.json"
step16=$(sed -n 's/.*"step_time_s":\([0-9.eE+-]*\).*/\1/p' "$tmp/bf16.json")
gemm16=$(sed -n 's/.*"gemm":"\([^"]*\)".*/\1/p' "$tmp/bf16.json")
peak16=$(sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$tmp/bf16.json")
"$MERAK" run --model gpt2-124m --seq-length $S --mbs $B --gbs $B --steps "$STEPS" \
  --recompute none --fp16 --initial-loss-scale 65536 --json >"$tmp/fp16.json"
stepf16=$(sed -n 's/.*"step_time_s":\([0-9.eE+-]*\).*/\1/p' "$tmp/fp16.json")
peakf16=$(sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$tmp/fp16.json")

cat >"$tmp/sgemm.c" <<'C'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv)
{
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), reps = 10;
    float *a = calloc((size_t)M * K, 4), *b = calloc((size_t)N * K, 4), *c = calloc((size_t)M * N, 4);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {   /* best of reps: the machine is shared */
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, a, K, b, K, 0, c, N);
        if (now() - t0 < best) best = now() - t0;
    }
    printf("%.2f\n", 2.0 * M * N * K / best / 1e9);
    return 0;
}
C
${CC:-cc} -O2 -o "$tmp/sgemm" "$tmp/sgemm.c" $(pkg-config --cflags --libs openblas 2>/dev/null || echo -lopenblas)
blas=$("$MERAK" version | sed -n 's/^blas: OpenBLAS, \(.*\), for the cpu backend$/\1/p')
core=${blas%% kernels*}
sgemm=$(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core} "$tmp/sgemm" $((B * S)) $VP $H)

awk -v blas="$blas" -v step="$step" -v step16="$step16" -v stepf16="$stepf16" -v peakf16="$peakf16" -v gemm16="$gemm16" -v sg="$sgemm" -v B=$B -v S=$S -v L=$L -v H=$H -v V=$V -v loss="$loss" -v peak="$peak" -v peak16="$peak16" 'BEGIN {
  flops = 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H))
  gf = flops / step / 1e9
  printf "gpt2-124m, 1 rank, batch %d x seq %d, recompute none\n", B, S
  printf "  BLAS kernels          %s\n", blas
  printf "  losses                %s\n", loss
  printf "  step time (median)    %.3f s\n", step
  printf "  tokens/s              %.0f\n", B * S / step
  printf "  matmul FLOPs / step   %.1f GFLOP (Megatron-LM count)\n", flops / 1e9
  printf "  achieved              %.1f GFLOP/s\n", gf
  printf "  OpenBLAS sgemm        %.1f GFLOP/s on (%d x %d) x (%d x %d)^T\n", sg, B * S, H, 50304, H
  printf "  ratio                 %.2f\n", gf / sg
  printf "  peak memory           %.2f GB (params, grads, Adam, activations)\n", peak / 1e9
  printf "  bf16 step (median)    %.3f s, GEMMs: %s\n", step16, gemm16
  printf "  bf16 / fp32 speed     %.2fx (the fp32 step time over the bf16 one)\n", step / step16
  printf "  bf16 achieved         %.1f GFLOP/s, %.2f of fp32 sgemm\n", flops / step16 / 1e9, flops / step16 / 1e9 / sg
  printf "  bf16 peak memory      %.2f GB (16-bit weights and saved activations; fp32 masters, gradients, Adam)\n", peak16 / 1e9
  printf "  fp16 step (median)    %.3f s, %.2fx the fp32 step'"'"'s speed (loss scale 65536)\n", stepf16, step / stepf16
  printf "  fp16 peak memory      %.2f GB (16-bit weights, saved activations and gradients; fp32 masters, Adam)\n", peakf16 / 1e9
}'
