/*
 * gemm.h - the one matrix-multiply kernel every matmul, linear and their
 * backward passes go through.  Row-major; transposed operands are read in
 * place, so backward never materializes a transpose.
 */
#ifndef ATTOGRAD_GEMM_H
#define ATTOGRAD_GEMM_H

#include "attograd.h"

/* C[M,N] = beta*C + op(A) op(B), row-major.  op(A) is A[M,K] (lda >= K) or,
 * with trans_a, A stored [K,M] (lda >= M) read transposed; likewise op(B) is
 * B[K,N] (ldb >= N) or B stored [N,K] (ldb >= K).  beta 0 overwrites (C's old
 * contents, even NaN, are ignored), beta 1 accumulates; K == 0 gives beta*C.
 * Each element is summed in a fixed K order, so results are bitwise the same
 * for any thread count.  Safe to call from several threads at once; packing
 * buffers are per calling thread and reused, so steady state never mallocs. */
void ag_gemm(int trans_a, int trans_b, int M, int N, int K,
             const ag_real *A, int lda, const ag_real *B, int ldb,
             ag_real beta, ag_real *C, int ldc);

/* `batch` independent products: item i uses A + i*stride_a, B + i*stride_b,
 * C + i*stride_c; a stride of 0 broadcasts that operand.  The C items must
 * not overlap.  Items run in parallel, each on one thread. */
void ag_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K,
                     const ag_real *A, long stride_a, int lda,
                     const ag_real *B, long stride_b, int ldb,
                     ag_real beta, ag_real *C, long stride_c, int ldc);

#endif
