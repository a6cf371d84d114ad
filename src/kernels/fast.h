/*
 * fast.h - what the fast kernels in src/kernels/ share: their entry points
 * (gathered into ag_kernels_fast by table.c; each computes what the
 * function of the same name in src/reference.c defines) and their helpers;
 * threads come from src/pool.h.
 */
#ifndef ATTOGRAD_FAST_H
#define ATTOGRAD_FAST_H

#include <math.h>
#include <stdlib.h>

#include "kernels.h"
#include "pool.h"

/* gemm.c */
void ag_fast_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                  int ldb, ag_real beta, ag_real *C, int ldc);
void ag_fast_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                          long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta,
                          ag_real *C, long stride_c, int ldc);
size_t ag_fast_gemm_scratch(int M, int N, int K);
/* The time of one multiply-add of a small product on this machine, in ns
 * (measured on the first call): what a product's sharing is decided by. */
double ag_fast_gemm_madd_ns(void);
/* A monotonic clock in seconds, for the kernels that time themselves once. */
double ag_fast_seconds(void);

/* The matrix multiply's cache blocking (gemm.c's model): K block, rows and
 * columns of the packed blocks, for the given caches, or NULL: this CPU's. */
struct ag_cpu_caches;
void ag_fast_gemm_blocking(const struct ag_cpu_caches *caches, int *kc, int *mc, int *nc);

/* rows.c */
void ag_fast_softmax(const ag_real *x, ag_real *y, size_t outer, size_t n, size_t inner, int log_out);
void ag_fast_softmax_backward(const ag_real *y, const ag_real *dy, ag_real *dx, size_t outer, size_t n,
                              size_t inner, int log_out);
void ag_fast_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                           double *loss);
void ag_fast_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V,
                                    ag_real scale, ag_real *dlogits, int assign);
void ag_fast_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                        ag_real *y, ag_real *mean, ag_real *rstd);
void ag_fast_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                 const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                 ag_real *db);
void ag_fast_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep);
void ag_fast_gelu_backward(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                           size_t cols, ag_real *dx, int assign, ag_real *db);
size_t ag_fast_gelu_keep(size_t n);
int ag_fast_gelu_keep_in_x(void);

/* attention.c */
void ag_fast_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                       ag_real *lse, ag_real *weights, ag_real *keep);
void ag_fast_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                ag_real *dq, ag_real *dk, ag_real *dv, int assign);
size_t ag_fast_attention_keep(const ag_attn *a);
size_t ag_fast_attention_scratch(const ag_attn *a);

/* update.c */
void ag_fast_sgd(ag_real *p, const ag_real *g, ag_real *buf, size_t n, ag_real lr, ag_real momentum,
                 ag_real decay, int first);
void ag_fast_adamw(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const ag_adamw_args *a);
double ag_fast_sum_squares(const ag_real *x, size_t n);
void ag_fast_column_sums(const ag_real *x, size_t rows, size_t cols, ag_real *dst);
/* Sums over rows go in blocks of rows (update.c): at most AG_ROW_BLOCKS of
 * at least AG_ROW_BLOCK_MIN rows, and no more than AG_ROW_PARTIALS partial
 * sums (or one block) in all, ag_fast_row_block(rows, cols) rows each (the
 * last may be short); each block's partial sums, [blocks, cols], are added
 * to dst in block order by ag_fast_add_partials. */
enum { AG_ROW_BLOCKS = 64, AG_ROW_BLOCK_MIN = 32, AG_ROW_PARTIALS = 1 << 18 };
size_t ag_fast_row_block(size_t rows, size_t cols);
void ag_fast_add_partials(const ag_real *partials, size_t blocks, size_t cols, ag_real *dst);

static inline int ag_min_int(int a, int b) { return a < b ? a : b; }

/* A buffer a thread keeps between calls (declare it static _Thread_local),
 * grown to at least `bytes` (never shrunk), 64-byte aligned; each kernel
 * file has its own, so a kernel that calls another keeps its data.  `what`
 * names it in the out-of-memory message. */
typedef struct ag_scratch {
    void *p;
    size_t cap;
} ag_scratch;

static inline void *ag_scratch_get(ag_scratch *s, size_t bytes, const char *what)
{
    bytes = (bytes + 63) / 64 * 64;
    if (bytes > s->cap) {
        if (!s->p)
            ag_thread_owns(&s->p);      /* freed when the thread ends */
        free(s->p);
        s->p = aligned_alloc(64, bytes);
        s->cap = s->p ? bytes : 0;
        if (!s->p)
            ag_error("out of memory: %zu bytes for %s", bytes, what);
    }
    return s->p;
}

/* A matrix multiply's sizes and leading dimensions, checked (the
 * conventions of kernels.h's gemm); misuse is an ag_error naming fn. */
static inline void ag_gemm_check_args(const char *fn, int trans_a, int trans_b, int M, int N, int K, long lda,
                                      long ldb, long ldc)
{
    if (M < 0 || N < 0 || K < 0)
        ag_error("%s: negative size %dx%dx%d", fn, M, N, K);
    if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N)
        ag_error("%s: leading dimension too small (lda %ld, ldb %ld, ldc %ld for %s%s %dx%dx%d)", fn, lda, ldb, ldc,
                 trans_a ? "T" : "N", trans_b ? "T" : "N", M, N, K);
}

/* c + a*b with one rounding where the hardware has a fused multiply-add,
 * as the matrix multiply's vector tiles compute it; without hardware FMA
 * the library call would be slow, and the tiles then multiply and add
 * separately too.  Sums written with it round exactly like the matrix
 * multiply's.  The hardware is known by FP_FAST_FMA* (which glibc sets
 * from gcc's __FP_FAST_FMA*) or by the target's own macro: clang sets
 * __FMA__ for x86's FMA3 but not __FP_FAST_FMAF, and its tiles still fuse,
 * so without the second test its sums here rounded twice where the tiles'
 * rounded once (the attention backward's D = dO . O then missed dP by a
 * bit, and saturated attention's q and k gradients were not exactly 0). */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define AG_HW_FMA 1
#endif
#ifdef AG_DOUBLE
#if defined(FP_FAST_FMA) || defined(AG_HW_FMA)
#define AG_FMA(a, b, c) fma((a), (b), (c))
#endif
#else
#if defined(FP_FAST_FMAF) || defined(AG_HW_FMA)
#define AG_FMA(a, b, c) fmaf((a), (b), (c))
#endif
#endif
#ifndef AG_FMA
#define AG_FMA(a, b, c) ((a) * (b) + (c))
#endif

#endif
