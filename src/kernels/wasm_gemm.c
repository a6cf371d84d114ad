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
 * memory order changes: op(B) is packed into rows of N (padded to a
 * multiple of 16); op(A) is read in place and C written from the vector
 * registers.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <wasm_simd128.h>

#include "wasm.h"

/* C's row c[j..j+3] = beta c + s, as ref_gemm stores each sum: beta 0 ignores
 * C (even a NaN in it); otherwise beta * c rounded, then + s rounded, lane
 * by lane as the scalar expression. */
static void put4(float *c, v128_t s, v128_t beta, int beta0)
{
    wasm_v128_store(c, beta0 ? s : wasm_f32x4_add(wasm_f32x4_mul(beta, wasm_v128_load(c)), s));
}

/* Rows i0..i0+3 of C, eight columns per step (eight vector accumulators:
 * each B load serves four rows, each A value eight columns, and the
 * accumulators stay in registers).  a[r]: row r of op(A), its K values
 * `as` apart (A read in place, either way it is stored); bp: op(B) as
 * [K, Np]; c[r]: row r of C, NULL past M (a[r] then repeats a row whose
 * sums are not stored).  Columns past N go to `tail` ([4][8]), not C. */
static void rows4(const float *const a[4], long as, const float *bp, int K, int N, int Np, float *const c[4],
                  float beta, float *tail)
{
    const v128_t vb = wasm_f32x4_splat(beta);
    for (int j = 0; j < Np; j += 8) {
        v128_t s[8];
        v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
               c31 = c00;
        const float *b = bp + j, *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
        for (int k = 0; k < K; k++, b += Np, a0 += as, a1 += as, a2 += as, a3 += as) {
            v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 4);
            v128_t x0 = wasm_v128_load32_splat(a0), x1 = wasm_v128_load32_splat(a1);
            v128_t x2 = wasm_v128_load32_splat(a2), x3 = wasm_v128_load32_splat(a3);
            c00 = wasm_f32x4_add(c00, wasm_f32x4_mul(x0, b0));
            c01 = wasm_f32x4_add(c01, wasm_f32x4_mul(x0, b1));
            c10 = wasm_f32x4_add(c10, wasm_f32x4_mul(x1, b0));
            c11 = wasm_f32x4_add(c11, wasm_f32x4_mul(x1, b1));
            c20 = wasm_f32x4_add(c20, wasm_f32x4_mul(x2, b0));
            c21 = wasm_f32x4_add(c21, wasm_f32x4_mul(x2, b1));
            c30 = wasm_f32x4_add(c30, wasm_f32x4_mul(x3, b0));
            c31 = wasm_f32x4_add(c31, wasm_f32x4_mul(x3, b1));
        }
        s[0] = c00, s[1] = c01, s[2] = c10, s[3] = c11, s[4] = c20, s[5] = c21, s[6] = c30, s[7] = c31;
        if (j + 8 <= N) {
            for (int r = 0; r < 4 && c[r]; r++) {
                put4(c[r] + j, s[2 * r], vb, beta == 0);
                put4(c[r] + j + 4, s[2 * r + 1], vb, beta == 0);
            }
        } else if (j < N) {     /* the last, ragged columns, element by element as ref_gemm */
            for (int r = 0; r < 8; r++)
                wasm_v128_store(tail + 4 * r, s[r]);
            for (int r = 0; r < 4 && c[r]; r++)
                for (int jj = j; jj < N; jj++) {
                    float sum = tail[8 * r + jj - j];
                    c[r][jj] = beta == 0 ? sum : beta * c[r][jj] + sum;
                }
        }
    }
}

/* op(B) [K,Np] and the ragged tail [4][8] */
static size_t scratch_floats(int N, int K)
{
    const size_t Np = (size_t)(N + 15) & ~(size_t)15;
    return (size_t)K * Np + 32;
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
    const int Np = (N + 15) & ~15;
    float *bp = ag_wasm_scratch(AG_WASM_GEMM, scratch_floats(N, K) * sizeof(float));
    float *tail = bp + (size_t)K * Np;
    for (int k = 0; k < K; k++) {
        float *row = bp + (size_t)k * Np;
        for (int j = 0; j < N; j++)
            row[j] = trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
        for (int j = N; j < Np; j++)
            row[j] = 0;
    }
    /* op(A)[i][k] is A[i lda + k], or A[k lda + i] when A is stored transposed */
    const long as = trans_a ? lda : 1;
    for (int i0 = 0; i0 < M; i0 += 4) {
        const int rows = M - i0 < 4 ? M - i0 : 4;
        const float *a[4];
        float *c[4];
        for (int r = 0; r < 4; r++) {
            const int i = i0 + (r < rows ? r : rows - 1);
            a[r] = trans_a ? A + i : A + (long)i * lda;
            c[r] = r < rows ? C + (long)(i0 + r) * ldc : NULL;
        }
        rows4(a, as, bp, K, N, Np, c, beta, tail);
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
