// Linear layers through cuBLAS.  Row-major X (r,c) is column-major X^T
// (c,r) with leading dimension c, so every row-major product below is one
// column-major cuBLAS call on the transposed problem.  In a 16-bit run
// (set_gemm_dtype) their GEMMs take 16-bit operands (mkc_gemm16).
#include "config.h"
#include "common.cuh"
#include "merak/model.h"

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

void mkc_set_gemm_dtype(void *ctx, int dtype)
{
    mkc_ctx_t *c = (mkc_ctx_t *)ctx;
    c->gemm16 = dtype == MK_DTYPE_BF16 || dtype == MK_DTYPE_FP16 ? dtype : 0;
}

size_t mkc_scratch_bytes(void *ctx) { return ((mkc_ctx_t *)ctx)->s16_cap * sizeof(uint16_t); }

uint16_t *mkc_scratch16(mkc_ctx_t *c, size_t n)
{
    if (n <= c->s16_cap) return c->s16;
    // stream-ordered: the old buffer goes after the GEMMs queued on it
    if (c->s16) CK(c, cudaFreeAsync(c->s16, c->s));
    c->s16 = NULL, c->s16_cap = 0;
    if (cudaMallocAsync((void **)&c->s16, n * sizeof(uint16_t), c->s) != cudaSuccess) {
        cudaGetLastError();
        c->s16 = NULL;
        mkc_fail(c, "out of device memory for the 16-bit GEMM operands", __FILE__, __LINE__);
        return NULL;
    }
    c->s16_cap = n;
    return c->s16;
}

// A linear's GEMM (as mkc_gemm, one batch) with both operands rounded to
// the context's 16-bit type into the scratch and their products summed in
// fp32 (CUBLAS_COMPUTE_32F): what the CPU's rounded-operand sgemm computes
// (src/cpu/gemm_cpu.c), mixed precision's matmul.  The operands' copies
// are whole (no panels as on the CPU: the GPU holds a 16-bit copy of the
// weights anyway in the frameworks this mirrors).
static void gemm_linear(mkc_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (!c->gemm16) {
        mkc_gemm(c, ta, tb, m, n, k, 1.0f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
        return;
    }
    if (m <= 0 || n <= 0) return;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;  // A as stored
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    size_t na = ((size_t)ar * ac + 7) & ~(size_t)7;  // B at a 16-byte boundary
    uint16_t *s = mkc_scratch16(c, na + (size_t)br * bc);
    if (!s) return;
    mkc_pack16_2d(c, s, A, ar, ac, lda, c->gemm16);
    mkc_pack16_2d(c, s + na, B, br, bc, ldb, c->gemm16);
    cudaDataType_t t = c->gemm16 == MK_DTYPE_FP16 ? CUDA_R_16F : CUDA_R_16BF;
    float alpha = 1.0f;
    CKB(c, cublasGemmEx(c->h, ta, tb, m, n, k, &alpha, s, t, ar > 0 ? ar : 1, s + na, t, br > 0 ? br : 1, &beta, C,
                     CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
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
    gemm_linear(c, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, w, IC, inp, IC, bias ? 1.0f : 0.0f, out, OC);
}

void mkc_linear_bwd_in(void *ctx, float *dinp, const float *dout, const float *w, int N, int IC, int OC)
{
    mkc_ctx_t *c = mkc(ctx);
    if (!dinp) return;
    // dinp^T (IC,N) += W^T (IC,OC) dout^T (OC,N)
    gemm_linear(c, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, w, IC, dout, OC, 1.0f, dinp, IC);
}

void mkc_linear_bwd_w(void *ctx, float *dw, float *dbias, const float *dout, const float *inp, int N, int IC, int OC)
{
    mkc_ctx_t *c = mkc(ctx);
    // dw^T (IC,OC) += inp^T (IC,N) dout (N,OC); dout is stored as dout^T (OC,N) ld OC
    if (dw) gemm_linear(c, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, inp, IC, dout, OC, 1.0f, dw, IC);
    if (!dbias) return;
    k_bias_grad<<<(OC + 255) / 256, 256, 0, c->s>>>(dbias, dout, N, OC);
    LAUNCHED(c);
}
