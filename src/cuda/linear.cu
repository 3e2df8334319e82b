// Linear layers through cuBLAS.  Row-major X (r,c) is column-major X^T
// (c,r) with leading dimension c, so every row-major product below is one
// column-major cuBLAS call on the transposed problem.
#include "config.h"
#include "common.cuh"

// Math mode -> cuBLAS compute type.  Storage stays fp32 everywhere (the
// weights are the fp32 master copy): TF32 and bf16 round the multiplicands
// inside the GEMM and accumulate in fp32.
static cublasComputeType_t compute_type(mkc_math_t m)
{
    switch (m) {
    case MKC_MATH_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case MKC_MATH_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return CUBLAS_COMPUTE_32F;
    }
}

void mkc_gemm(mkc_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
              const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
              float beta, float *C, int ldc, long long sc, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0) return;
    if (batch == 1)
        CKB(c, cublasGemmEx(c->h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                         &beta, C, CUDA_R_32F, ldc, compute_type(c->math), CUBLAS_GEMM_DEFAULT));
    else
        CKB(c, cublasGemmStridedBatchedEx(c->h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B,
                                       CUDA_R_32F, ldb, sb, &beta, C, CUDA_R_32F, ldc, sc, batch,
                                       compute_type(c->math), CUBLAS_GEMM_DEFAULT));
    if (c->sync_each) LAUNCHED(c);
}

// out (N,OC) rows = bias
__global__ void k_bias_rows(float *out, const float *bias, int N, int OC)
{
    size_t total = (size_t)N * OC;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

// dbias[o] += dout[n][o] for n = 0..N-1 in order (as the CPU loop)
__global__ void k_bias_grad(float *dbias, const float *dout, int N, int OC)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = dbias[o];
    for (int n = 0; n < N; n++) s += dout[(size_t)n * OC + o];
    dbias[o] = s;
}

void mkc_linear_fwd(void *ctx, float *out, const float *inp, const float *w, const float *bias, int N, int IC, int OC)
{
    mkc_ctx_t *c = mkc(ctx);
    if (bias) {
        k_bias_rows<<<mkc_grid((size_t)N * OC, 256), 256, 0, c->s>>>(out, bias, N, OC);
        LAUNCHED(c);
    }
    // out^T (OC,N) = W (OC,IC) inp^T (IC,N); W is stored as W^T (IC,OC) ld IC
    mkc_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, 1.0f, w, IC, 0, inp, IC, 0, bias ? 1.0f : 0.0f,
             out, OC, 0, 1);
}

void mkc_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!dinp) return;
    // dinp^T (IC,N) += W^T (IC,OC) dout^T (OC,N)
    mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, 1.0f, w, IC, 0, dout, OC, 0, 1.0f, dinp, IC, 0, 1);
}

void mkc_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp, int N, int IC, int OC)
{
    mkc_ctx_t *c = mkc(ctx);
    // dw^T (IC,OC) += inp^T (IC,N) dout (N,OC); dout is stored as dout^T (OC,N) ld OC
    if (dw) mkc_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, 1.0f, inp, IC, 0, dout, OC, 0, 1.0f, dw, IC, 0, 1);
    if (!dbias) return;
    k_bias_grad<<<(OC + 255) / 256, 256, 0, c->s>>>(dbias, dout, N, OC);
    LAUNCHED(c);
}
