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
 * [K][8] each (N padded to a multiple of 8), so the loop over k reads it
 * in order (rows of N would put every k a row apart, into the same few
 * cache sets); op(A) is read in place when A is stored [M, K], and four
 * of its rows at a time are copied to one strip [K][4] when it is stored
 * [K, M]; C is written from the vector registers.
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

/* One tile of C: rows i0..i0+3, columns j..j+7 (eight vector
 * accumulators: each B load serves four rows, each A value eight columns,
 * and the accumulators stay in registers).  a[r]: row r of op(A), its K
 * values `as` apart; b: op(B)'s panel [K][8]; c[r]: row r of C from
 * column j, NULL past M (a[r] then repeats a row whose sums are not
 * stored); n: the columns of C there, 8 or fewer (the rest go to `tail`,
 * [4][8], not C). */
static void tile(const float *const a[4], long as, const float *b, int K, float *const c[4], int n, float beta,
                 float *tail)
{
    v128_t s[8];
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    for (int k = 0; k < K; k++, b += 8, a0 += as, a1 += as, a2 += as, a3 += as) {
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
    if (n == 8) {
        const v128_t vb = wasm_f32x4_splat(beta);
        for (int r = 0; r < 4 && c[r]; r++) {
            put4(c[r], s[2 * r], vb, beta == 0);
            put4(c[r] + 4, s[2 * r + 1], vb, beta == 0);
        }
    } else {                    /* the last, ragged columns, element by element as ref_gemm */
        for (int r = 0; r < 8; r++)
            wasm_v128_store(tail + 4 * r, s[r]);
        for (int r = 0; r < 4 && c[r]; r++)
            for (int jj = 0; jj < n; jj++) {
                float sum = tail[8 * r + jj];
                c[r][jj] = beta == 0 ? sum : beta * c[r][jj] + sum;
            }
    }
}

/* op(B)[k][j0..j0+7] -> panel[8 k ..], for each panel of eight columns
 * (the last padded with zeros).  B stored [K, N] is copied a row's eight
 * at a time; stored [N, K], four k of four columns at a time through a
 * 4 x 4 transpose in registers. */
static void pack_b(int trans_b, int N, int K, const float *B, int ldb, float *bp)
{
    for (int j0 = 0; j0 < N; j0 += 8) {
        float *panel = bp + (size_t)j0 * K;
        int k = 0;
        if (j0 + 8 <= N && !trans_b)
            for (; k < K; k++) {
                const float *row = B + (long)k * ldb + j0;
                wasm_v128_store(panel + 8 * k, wasm_v128_load(row));
                wasm_v128_store(panel + 8 * k + 4, wasm_v128_load(row + 4));
            }
        else if (j0 + 8 <= N)
            for (; k + 4 <= K; k += 4)
                for (int h = 0; h < 8; h += 4) {
                    const float *col = B + (long)(j0 + h) * ldb + k;    /* op(B)[k..k+3][j0+h+r] */
                    v128_t r0 = wasm_v128_load(col), r1 = wasm_v128_load(col + ldb);
                    v128_t r2 = wasm_v128_load(col + 2 * (long)ldb), r3 = wasm_v128_load(col + 3 * (long)ldb);
                    v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7);
                    v128_t t2 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
                    float *out = panel + 8 * k + h;
                    wasm_v128_store(out, wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5));
                    wasm_v128_store(out + 8, wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7));
                    wasm_v128_store(out + 16, wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5));
                    wasm_v128_store(out + 24, wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7));
                }
        for (; k < K; k++)      /* the ragged last panel, and k past the transposes' fours */
            for (int j = j0; j < j0 + 8; j++)
                panel[8 * k + j - j0] = j >= N ? 0 : trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
    }
}

/* op(B)'s panels [K,Np], the ragged tail [4][8] and op(A)'s strip [K][4] */
static size_t scratch_floats(int N, int K)
{
    const size_t Np = (size_t)(N + 7) & ~(size_t)7;
    return (size_t)K * Np + 32 + 4 * (size_t)K;
}

size_t ag_wasm_gemm_scratch(int M, int N, int K)
{
    (void)M;
    return scratch_floats(N, K) * sizeof(float);
}

/* C[M,N] = beta C + op(A)[M,K] op(B)[K,N], as ref_gemm: four rows of C at
 * a time, each across all of op(B)'s panels. */
void ag_wasm_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                  int ldb, ag_real beta, ag_real *C, int ldc)
{
    const int Np = (N + 7) & ~7;
    float *bp = ag_wasm_scratch(AG_WASM_GEMM, scratch_floats(N, K) * sizeof(float));
    float *tail = bp + (size_t)K * Np, *strip = tail + 32;
    pack_b(trans_b, N, K, B, ldb, bp);
    /* op(A)[i][k] is A[i lda + k], read in place, or A[k lda + i] when A
     * is stored transposed: read down a column, each k would be another
     * cache line, so rows i0..i0+3 go to a strip, strip[4 k + r] */
    const long as = trans_a ? 4 : 1;
    for (int i0 = 0; i0 < M; i0 += 4) {
        const int rows = M - i0 < 4 ? M - i0 : 4;
        const float *a[4];
        float *c[4];
        if (trans_a) {
            const float *col = A + i0;
            if (rows == 4)
                for (int k = 0; k < K; k++)
                    wasm_v128_store(strip + 4 * k, wasm_v128_load(col + (long)k * lda));
            else
                for (int k = 0; k < K; k++)
                    for (int r = 0; r < 4; r++)
                        strip[4 * k + r] = col[(long)k * lda + (r < rows ? r : rows - 1)];
        }
        for (int r = 0; r < 4; r++) {
            const int i = i0 + (r < rows ? r : rows - 1);
            a[r] = trans_a ? strip + r : A + (long)i * lda;
            c[r] = r < rows ? C + (long)(i0 + r) * ldc : NULL;
        }
        for (int j = 0; j < Np; j += 8) {
            float *cj[4];
            for (int r = 0; r < 4; r++)
                cj[r] = c[r] ? c[r] + j : NULL;
            tile(a, as, bp + (size_t)j * K, K, cj, N - j < 8 ? N - j : 8, beta, tail);
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
