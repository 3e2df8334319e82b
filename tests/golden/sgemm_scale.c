/* A deliberately wrong GEMM for tests/mpi-golden.sh: loaded with LD_PRELOAD,
 * it forwards every cblas_sgemm to OpenBLAS with alpha scaled by
 * 1 + GOLDEN_SGEMM_SCALE (a relative error, e.g. 1e-4), so the golden test
 * can show that its tolerances still catch a kernel that is wrong by that
 * much while passing every kernel family's rounding. */
#include "config.h" /* _GNU_SOURCE (RTLD_NEXT) comes from the command line */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                         const blasint, const blasint, const blasint, const float, const float *,
                         const blasint, const float *, const blasint, const float, float *, const blasint);

void cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                 const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                 const blasint ldc)
{
    static sgemm_fn real;
    static float scale = 1.0f;
    if (!real) {
        const char *s = getenv("GOLDEN_SGEMM_SCALE");
        real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
        if (!real) { fputs("sgemm_scale: no cblas_sgemm to forward to\n", stderr); abort(); }
        if (s) scale = 1.0f + strtof(s, NULL);
    }
    real(o, ta, tb, M, N, K, alpha * scale, A, lda, B, ldb, beta, C, ldc);
}
