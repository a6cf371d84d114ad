/*
 * wasm_gemm.c - the browser build's kernels (make web): every kernel is
 * the reference's (src/reference.c) except the matrix multiply, which runs
 * on WebAssembly SIMD128 and gives the reference's bits exactly.
 *
 * Why exactly: the reference forms each C[i][j] as sum = 0, then
 * sum += op(A)[i][k] * op(B)[k][j] for k = 0, 1, ..., K-1, each product and
 * each sum rounded to float.  Here four (sixteen) neighbouring j are
 * computed side by side in vector lanes, each lane doing those same
 * multiplies and adds in the same k order (no fused multiply-add: SIMD128
 * has none), so every lane rounds as the scalar loop does.  Only the
 * memory order changes: op(B) is packed into rows of N (padded to a
 * multiple of 16) and op(A)'s row i into K contiguous values.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <stdlib.h>
#include <wasm_simd128.h>

#include "../kernels.h"

/* Grow-only scratch (the browser build has one thread). */
static float *scratch(size_t n)
{
    static float *buf;
    static size_t cap;
    if (n > cap) {
        free(buf);
        buf = malloc(n * sizeof *buf);
        if (!buf)
            ag_error("out of memory for the matrix multiply's panels (%zu floats)", n);
        cap = n;
    }
    return buf;
}

/* C[M,N] = beta C + op(A)[M,K] op(B)[K,N], as ref_gemm. */
static void wasm_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                      int ldb, ag_real beta, ag_real *C, int ldc)
{
    const int Np = (N + 15) & ~15;
    float *bp = scratch((size_t)K * Np + (size_t)K + (size_t)Np);    /* op(B) [K,Np], op(A) row [K], sums [Np] */
    float *arow = bp + (size_t)K * Np, *sums = arow + K;
    for (int k = 0; k < K; k++) {
        float *row = bp + (size_t)k * Np;
        for (int j = 0; j < N; j++)
            row[j] = trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
        for (int j = N; j < Np; j++)
            row[j] = 0;
    }
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < K; k++)
            arow[k] = trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k];
        for (int j = 0; j < Np; j += 16) {
            v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
            const float *b = bp + j;
            for (int k = 0; k < K; k++, b += Np) {
                v128_t a = wasm_f32x4_splat(arow[k]);
                s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(a, wasm_v128_load(b)));
                s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(a, wasm_v128_load(b + 4)));
                s2 = wasm_f32x4_add(s2, wasm_f32x4_mul(a, wasm_v128_load(b + 8)));
                s3 = wasm_f32x4_add(s3, wasm_f32x4_mul(a, wasm_v128_load(b + 12)));
            }
            wasm_v128_store(sums + j, s0);
            wasm_v128_store(sums + j + 4, s1);
            wasm_v128_store(sums + j + 8, s2);
            wasm_v128_store(sums + j + 12, s3);
        }
        ag_real *c = C + (long)i * ldc;
        for (int j = 0; j < N; j++)
            c[j] = beta == 0 ? sums[j] : beta * c[j] + sums[j];    /* beta 0 ignores C, even a NaN in it */
    }
}

static void wasm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                              long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta,
                              ag_real *C, long stride_c, int ldc)
{
    for (int b = 0; b < batch; b++)
        wasm_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta, C + b * stride_c,
                  ldc);
}

static ag_kernels wasm_kernels;

/* Installed before main (and before the page's first call): the
 * reference's table with the two products replaced. */
__attribute__((constructor)) static void install(void)
{
    wasm_kernels = ag_kernels_reference;
    wasm_kernels.name = "reference, matrix multiply in WebAssembly SIMD128";
    wasm_kernels.gemm = wasm_gemm;
    wasm_kernels.gemm_batched = wasm_gemm_batched;
    ag_kern = &wasm_kernels;
}
#endif
