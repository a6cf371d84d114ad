/*
 * wasm.h - the browser build's kernels (src/kernels/wasm_*.c, make web):
 * the engine's exp and erf over arrays, two f64x2 lanes at a time
 * (src/mathfn.c), and the kernels the build's table takes from them.
 */
#ifndef ATTOGRAD_WASM_H
#define ATTOGRAD_WASM_H

#include <wasm_simd128.h>

#include "../kernels.h"

/* A float vector's low and high pairs widened to double (exactly), and two
 * double pairs rounded to one float vector: the (double) casts and the
 * (ag_real) roundings of the reference's mixed expressions, lane by lane. */
static inline v128_t ag_wasm_lo(v128_t f) { return wasm_f64x2_promote_low_f32x4(f); }
static inline v128_t ag_wasm_hi(v128_t f) { return wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(f, f, 2, 3, 2, 3)); }
static inline v128_t ag_wasm_narrow(v128_t lo, v128_t hi)
{
    return wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo), wasm_f32x4_demote_f64x2_zero(hi), 0, 1, 4, 5);
}

/* y[i] = ag_math_exp(x[i]), y[i] = ag_math_erf(x[i]) for i < n, bit for bit */
void ag_math_exp_n(const double *x, double *y, size_t n);
void ag_math_erf_n(const double *x, double *y, size_t n);

/* sum_k exp(x_k - m) for k < n in double, in order, as the reference's
 * sum_exp forms it; ex[k] keeps each exp (arg: room for n doubles) */
static inline double ag_wasm_sum_exp(const ag_real *x, int n, ag_real m, double *arg, double *ex)
{
    double sum = 0;
    for (int k = 0; k < n; k++)
        arg[k] = (double)(x[k] - m);
    ag_math_exp_n(arg, ex, (size_t)n);
    for (int k = 0; k < n; k++)
        sum += ex[k];
    return sum;
}


/* The kernels that replace the reference's in the browser build's table
 * (wasm_table.c), each with the reference kernel's bits. */
void ag_wasm_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                  int ldb, ag_real beta, ag_real *C, int ldc);
void ag_wasm_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                          long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta,
                          ag_real *C, long stride_c, int ldc);
void ag_wasm_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                       ag_real *lse, ag_real *weights, ag_real *keep);
void ag_wasm_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                ag_real *dq, ag_real *dk, ag_real *dv, int assign);
size_t ag_wasm_attention_scratch(const ag_attn *a);
size_t ag_wasm_gemm_scratch(int M, int N, int K);
void ag_wasm_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep);
size_t ag_wasm_gelu_keep(size_t n);
void ag_wasm_gelu_backward(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                           size_t cols, ag_real *dx, int assign, ag_real *db);
void ag_wasm_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                        ag_real *y, ag_real *mean, ag_real *rstd);
void ag_wasm_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                 const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                 ag_real *db);
void ag_wasm_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                           double *loss);
void ag_wasm_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V, ag_real scale,
                                    ag_real *dlogits, int assign);
void ag_wasm_sgd(ag_real *p, const ag_real *g, ag_real *buf, size_t n, ag_real lr, ag_real momentum, ag_real decay,
                 int first);


/* A kernel's grow-only buffer of at least `bytes` (the browser build runs
 * one thread, and no kernel calls another's while it holds its own). */
enum { AG_WASM_GEMM, AG_WASM_ATTENTION, AG_WASM_ROWS, AG_WASM_BUFFERS };
void *ag_wasm_scratch(int which, size_t bytes);

#endif
