/*
 * gemm.h - the one matrix-multiply kernel every matmul, linear and their
 * backward passes go through.  Row-major; transposed operands are read in
 * place, so backward never materializes a transpose.
 */
#ifndef ATTOGRAD_GEMM_H
#define ATTOGRAD_GEMM_H

#include "attograd.h"

/* C[M,N] = beta*C + op(A) op(B); op(A) = A[M,K] or (A[K,M])^T, likewise B.
 * beta is 0 (C's old contents ignored) or 1 (accumulate). */
void ag_gemm(int trans_a, int trans_b, int M, int N, int K,
             const ag_real *A, int lda, const ag_real *B, int ldb,
             ag_real beta, ag_real *C, int ldc);

/* `batch` independent products; a stride of 0 broadcasts that operand. */
void ag_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K,
                     const ag_real *A, long stride_a, int lda,
                     const ag_real *B, long stride_b, int ldb,
                     ag_real beta, ag_real *C, long stride_c, int ldc);

#endif
