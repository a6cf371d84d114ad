/*
 * bf16_ref.c - the plain definitions of bf16 rounding and of the bf16
 * matrix multiply: scalar loops, no intrinsics, no threads.  The fast
 * kernels in gemm_bf16.c are tested against these.
 */
#include "gemm_bf16.h"

#include <string.h>

/*
 * A float's bits, sign | exponent (8) | fraction (23), read as an integer
 * are ordered like the magnitudes, so rounding to the top 16 bits is integer
 * rounding of the low 16: add half (0x8000), minus one unless the kept part
 * is odd (ties go to the even neighbour), and truncate.  A carry out of the
 * fraction moves to the next binade, and from the largest finite values to
 * the infinity pattern 0x7f80, as IEEE rounding does; subnormals round the
 * same way.  The one exception is NaN, whose payload must not carry into
 * the exponent (it could become inf): keep its top bits, set the quiet bit.
 */
uint16_t ag_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ag_bf16_to_float(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float ag_bf16_round(float x) { return ag_bf16_to_float(ag_bf16_bits(x)); }

void ref_f32_to_bf16(uint16_t *dst, const float *src, long n)
{
    for (long i = 0; i < n; i++) dst[i] = ag_bf16_bits(src[i]);
}

void ref_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const float *A, long lda,
                   const float *B, long ldb, float beta, float *C, long ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            /* op(A)[i][k] is A[i][k], or A[k][i] when A is stored [K, M];
             * op(B)[k][j] is B[k][j], or B[j][k] when B is stored [N, K]. */
            float sum = 0;
            for (int k = 0; k < K; k++) {
                const float a = trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k];
                const float b = trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                sum += ag_bf16_round(a) * ag_bf16_round(b);
            }
            float *c = &C[(long)i * ldc + j];
            *c = beta == 0 ? sum : beta * *c + sum;
        }
    }
}
