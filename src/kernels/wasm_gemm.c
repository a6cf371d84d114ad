/*
 * wasm_gemm.c - the browser build's matrix multiply (make web): on
 * WebAssembly SIMD128, with the reference's bits exactly (src/reference.c).
 *
 * Why exactly: the reference forms each C[i][j] as sum = 0, then
 * sum += op(A)[i][k] * op(B)[k][j] for k = 0, 1, ..., K-1, each product and
 * each sum rounded to float.  Here eight neighbouring j of four rows are
 * computed side by side in vector lanes, each lane doing those same
 * multiplies and adds in the same k order (no fused multiply-add: SIMD128
 * has none), so every lane rounds as the scalar loop does.  Only the
 * memory order changes: op(B) is packed into panels of eight columns,
 * [K][8] each (N padded to a multiple of 8), so the loop over k reads
 * memory in order; four rows of op(A) at a time into [K][4] vectors, each
 * value already in all four lanes (a load, not a load and a shuffle, in
 * the loop).
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <wasm_simd128.h>

#include "wasm.h"

/* Four rows of C at a time, eight columns per step (eight vector
 * accumulators: each B load serves four rows, each A vector eight columns,
 * and the accumulators stay in registers; more of them, and the browser's
 * compiler keeps some in memory).  ap: op(A)'s rows i0..i0+3 as [K][4]
 * vectors (rows past M zero), bp: op(B) as Np/8 panels [K][8]; sums [4][Np]. */
static void rows4(const v128_t *ap, const float *bp, int K, int Np, float *sums)
{
    for (int j = 0; j < Np; j += 8) {
        v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
               c31 = c00;
        const float *b = bp + (size_t)j * K;
        const v128_t *a = ap;
        for (int k = 0; k < K; k++, b += 8, a += 4) {
            v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
            c00 = wasm_f32x4_add(c00, wasm_f32x4_mul(a[0], b0));
            c01 = wasm_f32x4_add(c01, wasm_f32x4_mul(a[0], b1));
            c10 = wasm_f32x4_add(c10, wasm_f32x4_mul(a[1], b0));
            c11 = wasm_f32x4_add(c11, wasm_f32x4_mul(a[1], b1));
            c20 = wasm_f32x4_add(c20, wasm_f32x4_mul(a[2], b0));
            c21 = wasm_f32x4_add(c21, wasm_f32x4_mul(a[2], b1));
            c30 = wasm_f32x4_add(c30, wasm_f32x4_mul(a[3], b0));
            c31 = wasm_f32x4_add(c31, wasm_f32x4_mul(a[3], b1));
        }
        wasm_v128_store(sums + j, c00);
        wasm_v128_store(sums + j + 4, c01);
        wasm_v128_store(sums + Np + j, c10);
        wasm_v128_store(sums + Np + j + 4, c11);
        wasm_v128_store(sums + 2 * Np + j, c20);
        wasm_v128_store(sums + 2 * Np + j + 4, c21);
        wasm_v128_store(sums + 3 * Np + j, c30);
        wasm_v128_store(sums + 3 * Np + j + 4, c31);
    }
}

/* op(B)'s panels [K,Np] and four rows of op(A) [K][4] vectors (first: the
 * vectors are 16-byte aligned, as malloc's buffer is), their sums [4,Np] */
static size_t scratch_floats(int N, int K)
{
    const size_t Np = (size_t)(N + 7) & ~(size_t)7;
    return (size_t)16 * K + (size_t)K * Np + 4 * Np;
}

size_t ag_wasm_gemm_scratch(int M, int N, int K)
{
    (void)M;
    return scratch_floats(N, K) * sizeof(float);
}

/* C[M,N] = beta C + op(A)[M,K] op(B)[K,N], as ref_gemm. */
void ag_wasm_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                  int ldb, ag_real beta, ag_real *C, int ldc)
{
    const int Np = (N + 7) & ~7;
    v128_t *ap = ag_wasm_scratch(AG_WASM_GEMM, scratch_floats(N, K) * sizeof(float));
    float *bp = (float *)(ap + (size_t)4 * K), *sums = bp + (size_t)K * Np;
    for (int j0 = 0; j0 < Np; j0 += 8)
        for (int k = 0; k < K; k++)
            for (int j = j0; j < j0 + 8; j++)
                bp[(size_t)j0 * K + 8 * k + j - j0] = j >= N ? 0 : trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
    for (int i0 = 0; i0 < M; i0 += 4) {
        int rows = M - i0 < 4 ? M - i0 : 4;
        for (int k = 0; k < K; k++)
            for (int r = 0; r < 4; r++)
                ap[4 * k + r] = wasm_f32x4_splat(r >= rows  ? 0
                                                 : trans_a ? A[(long)k * lda + i0 + r]
                                                           : A[(long)(i0 + r) * lda + k]);
        rows4(ap, bp, K, Np, sums);
        for (int r = 0; r < rows; r++) {
            ag_real *c = C + (long)(i0 + r) * ldc;
            const float *sr = sums + (size_t)r * Np;
            for (int j = 0; j < N; j++)
                c[j] = beta == 0 ? sr[j] : beta * c[j] + sr[j];    /* beta 0 ignores C, even a NaN in it */
        }
    }
}

void ag_wasm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                          long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta,
                          ag_real *C, long stride_c, int ldc)
{
    for (int b = 0; b < batch; b++)
        ag_wasm_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
                     C + b * stride_c, ldc);
}
#endif
