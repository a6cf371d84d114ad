/*
 * wasm.h - the browser build's kernels (src/kernels/wasm_*.c, make web):
 * the engine's exp and erf over arrays, two f64x2 lanes at a time
 * (src/mathfn.c), and the kernels the build's table takes from them.
 */
#ifndef ATTOGRAD_WASM_H
#define ATTOGRAD_WASM_H

#include "../kernels.h"

/* y[i] = ag_math_exp(x[i]), y[i] = ag_math_erf(x[i]) for i < n, bit for bit */
void ag_math_exp_n(const double *x, double *y, size_t n);
void ag_math_erf_n(const double *x, double *y, size_t n);


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
void ag_wasm_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y);
void ag_wasm_gelu_backward(const ag_real *x, const ag_real *b, const ag_real *dy, size_t rows, size_t cols,
                           ag_real *dx, int assign, ag_real *db);


/* A kernel's grow-only buffer of at least `bytes` (the browser build runs
 * one thread, and no kernel calls another's while it holds its own). */
enum { AG_WASM_GEMM, AG_WASM_ATTENTION, AG_WASM_BUFFERS };
void *ag_wasm_scratch(int which, size_t bytes);

#endif
