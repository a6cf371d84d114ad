/*
 * kernels.h - the few computations worth making fast, behind one interface.
 *
 * The ops in src/ops_*.c do the bookkeeping -- shapes, broadcasting, the
 * tape, allocation -- in plain loops, and call a kernel through `ag_kern`
 * for the heavy arithmetic.  Every kernel exists twice:
 *
 *   src/reference.c  its definition: scalar loops written to be read, one
 *                    shape comment per buffer, each backward restating the
 *                    forward line it differentiates.  Read this to learn
 *                    what an op computes.
 *   src/kernels/     the same results, fast: blocking, vector code,
 *                    threads.  Read this to learn how it is made fast.
 *
 * The default build runs the fast kernels; `make REFERENCE=1` builds
 * everything from the reference alone (no src/kernels/, one thread) into
 * build-ref/.  tests/test_kernels.c checks each fast kernel against its
 * reference.
 *
 * Conventions: matrices are row-major; "[R,C] with row stride ld" means
 * element (r, c) is at r*ld + c.  A kernel that computes a gradient adds to
 * its destination (+=) unless told `assign`, in which case it stores (the
 * destination is a fresh, uninitialized buffer).
 */
#ifndef ATTOGRAD_KERNELS_H
#define ATTOGRAD_KERNELS_H

#include "attograd.h"

/* Multi-head attention over heads read in place.  For batch item b, head h,
 * query i (0 <= i < Tq) and key j (0 <= j < Tk), the head's hd values are at
 *     q + b*q_bs + i*q_ld + h*hd     (likewise k, v with their strides)
 * and the output is written at o + b*o_bs + i*o_ld + h*hd.  Key j is
 * visible to query i unless `causal` and j > i + q_pos0 (q_pos0 is the
 * position of query 0 among the keys: 0 for self-attention, the number of
 * earlier keys when new queries follow a cache; a negative q_pos0 leaves the
 * first queries with no key at all, and their output is 0).
 * With dropout > 0 the weight (b, h, i, j) is multiplied by draw number
 * ((b*H + h)*Tq + i)*Tk + j of `rng` (0 with probability p, else 1/(1-p)):
 * exactly the mask ag_dropout would draw from that generator for the
 * [B,H,Tq,Tk] weights, regenerated where needed instead of stored. */
typedef struct ag_attn {
    int B, H, Tq, Tk, hd;
    int causal, q_pos0;
    int bf16;               /* mixed precision: the weights and their gradient are rounded to bf16
                             * before the products they enter (q, k, v, do_ come rounded) */
    long q_bs, q_ld, k_bs, k_ld, v_bs, v_ld, o_bs, o_ld;   /* strides, in elements */
    ag_real scale;                                        /* usually 1/sqrt(hd) */
    ag_real dropout;                                      /* p in [0, 1) */
    ag_pcg32 rng;                                         /* dropout's generator before draw 0 */
} ag_attn;

/* Dropout's multiplier for one 32-bit draw: 0 when the draw is below
 * n = floor(p 2^32), so with probability p' = n / 2^32, else 1/(1-p'),
 * which keeps the expected value exactly ("inverted" dropout: evaluation
 * needs no rescaling).  p' is p itself wherever p 2^32 is whole: every
 * float p from 2^-9 up, every double that is a multiple of 2^-32; else
 * p' < p by less than 2^-32 (a scale of 1/(1-p) would then make the
 * expected value 1 + (p - p')/(1 - p), 4/3 at 1 - p = 1.5 2^-32).  Below a
 * keep probability 1 - p of 2^-32 the draws would keep 2^-32 of the
 * elements, not 1 - p: ag_dropout_p_ok refuses such p (only a double p
 * can be one; the ops say so in one line). */
static inline uint32_t ag_dropout_threshold(ag_real p) { return (uint32_t)((double)p * 4294967296.0); }
static inline ag_real ag_dropout_scale(ag_real p)
{
    return (ag_real)(4294967296.0 / (4294967296.0 - (double)ag_dropout_threshold(p)));
}
/* p in [0, 1) with a keep probability 1 - p of at least 2^-32. */
static inline int ag_dropout_p_ok(ag_real p) { return p >= 0 && p < 1 && (1 - (double)p) * 4294967296.0 >= 1; }
static inline ag_real ag_dropout_multiplier(uint32_t draw, uint32_t threshold, ag_real scale)
{
    return draw >= threshold ? scale : 0;
}

/* Whether key j is visible to query i. */
static inline int ag_attn_visible(const ag_attn *a, int i, int j) { return !a->causal || j <= i + a->q_pos0; }

/* The AdamW update's constants for one step. */
typedef struct ag_adamw_args {
    double lr, beta1, beta2, eps;
    double decay;           /* weight decay for this parameter (0: none) */
    long t;                 /* 1-based step number, for the bias corrections */
} ag_adamw_args;

typedef struct ag_kernels {
    const char *name;       /* "reference" or "fast" */

    /* C[M,N] = beta C + op(A) op(B).  op(A) is A [M,K] (lda >= K) or, with
     * trans_a, A stored [K,M] (lda >= M) read transposed; likewise op(B) is
     * B [K,N] or B stored [N,K].  beta 0 overwrites (C's old contents, even
     * NaN, are ignored); K == 0 gives beta C. */
    void (*gemm)(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda,
                 const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc);
    /* `batch` independent products, item i at A + i*stride_a, B + i*stride_b,
     * C + i*stride_c; a stride of 0 broadcasts that operand (not C). */
    void (*gemm_batched)(int batch, int trans_a, int trans_b, int M, int N, int K,
                         const ag_real *A, long stride_a, int lda, const ag_real *B, long stride_b, int ldb,
                         ag_real beta, ag_real *C, long stride_c, int ldc);

    /* Softmax (or log-softmax, `log_out`) along the middle dim of x seen as
     * [outer, n, inner].  A row of all -inf gives zeros (log: -inf). */
    void (*softmax)(const ag_real *x, ag_real *y, size_t outer, size_t n, size_t inner, int log_out);
    /* dx += the gradient through it, from its output y and that output's gradient dy. */
    void (*softmax_backward)(const ag_real *y, const ag_real *dy, ag_real *dx, size_t outer, size_t n,
                             size_t inner, int log_out);

    /* Per row r of logits [rows,V]: prob[r] = softmax(logits[r]) and
     * loss[r] = -log prob[r][target[r]] (0 when target[r] < 0). */
    void (*cross_entropy)(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                          double *loss);
    /* dlogits (+)= scale (prob - onehot(target)), 0 for rows with target < 0. */
    void (*cross_entropy_backward)(const ag_real *prob, const int32_t *target, size_t rows, int V,
                                   ag_real scale, ag_real *dlogits, int assign);

    /* y = (x - mean) / sqrt(var + eps) * w + b per row of x [rows,D]; w and b
     * may be NULL (1 and 0); mean and rstd = 1/sqrt(var + eps) per row are kept. */
    void (*layer_norm)(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                       ag_real *y, ag_real *mean, ag_real *rstd);
    /* dx (+)= ..., dw += ..., db += ... (each may be NULL: not wanted). */
    void (*layer_norm_backward)(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                ag_real *db);

    /* GELU with an optional bias, x [rows,cols] and b [cols] (NULL: none):
     * y = gelu(x + b) = h Phi(h) with h = x + b, exact (erf).  The bias is
     * added in the same pass, so a linear layer's product feeds GELU with no
     * pass of its own for the bias (ag_linear_gelu).  keep, if not NULL, is
     * where the forward leaves what its backward would otherwise compute
     * again: gelu_keep(rows * cols) bytes of its own (the browser build:
     * erf), or, where gelu_keep_in_x says so, x itself, over which the
     * forward writes gelu'(x + b) (the fast build; x is then lost). */
    void (*gelu)(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep);
    /* dx (+)= gelu'(x + b) dy, and db += the column sums of what dx
     * received (the bias's gradient; NULL: not wanted), in the same pass;
     * keep: the forward's (NULL: computed again from x). */
    void (*gelu_backward)(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                          size_t cols, ag_real *dx, int assign, ag_real *db);
    /* bytes of its own a forward of n elements may keep for its backward
     * (0: none) */
    size_t (*gelu_keep)(size_t n);
    /* 1: the forward keeps gelu' over x when given keep = x, and needs no
     * bytes of its own (a caller whose x nothing else reads passes it) */
    int (*gelu_keep_in_x)(void);

    /* Attention forward (see ag_attn): o, and lse [B,H,Tq] = the log of each
     * query's softmax denominator (-inf for a query that sees no key).  If
     * weights is not NULL it receives the softmax weights [B,H,Tq,Tk]
     * before dropout.  keep, if not NULL, has attention_keep(a) elements
     * where the kernel may leave what its backward would otherwise
     * recompute (the caller passes it only when a backward will follow). */
    void (*attention)(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                      ag_real *lse, ag_real *weights, ag_real *keep);
    /* Its backward from o, do_ (o's gradient, o's strides), lse and keep (as
     * the forward left it, or NULL): dq, dk, dv have q's, k's and v's strides. */
    void (*attention_backward)(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                               const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                               ag_real *dq, ag_real *dk, ag_real *dv, int assign);
    /* The elements attention may keep for backward; 0: it recomputes all. */
    size_t (*attention_keep)(const ag_attn *a);

    /* Memory the kernels hold outside the arena: bytes of the buffers
     * gemm, gemm_bf16 (NULL in double builds) and attention with its
     * backward take for a call of these sizes, on every thread they use
     * (each kernel keeps its buffers, grown to its largest call, so later
     * calls do not allocate).  An upper bound, for any transposes. */
    size_t (*gemm_scratch)(int M, int N, int K);
    size_t (*gemm_bf16_scratch)(int M, int N, int K);
    size_t (*attention_scratch)(const ag_attn *a);

    /* One SGD step on n parameters: g' = g + decay p; buf = momentum buf + g'
     * (buf = g' on the first step); p -= lr buf (p -= lr g' without momentum). */
    void (*sgd)(ag_real *p, const ag_real *g, ag_real *buf, size_t n, ag_real lr, ag_real momentum,
                ag_real decay, int first);
    /* One AdamW step on n parameters with moments m and v. */
    void (*adamw)(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const ag_adamw_args *a);

    /* bf16 products (float builds; NULL in double builds): gemm with op(A)
     * and op(B) rounded to bfloat16 (nearest even) first and the sums in
     * fp32, as bf16 mixed-precision training computes its matrix
     * multiplies.  The fast kernel's sums run in its own fixed order. */
    void (*gemm_bf16)(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda,
                      const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc);
    /* y = bf16(x), kept in ag_real (float builds; NULL in double builds) */
    void (*round_bf16)(const ag_real *x, ag_real *y, size_t n);
    /* Whether gemm_bf16 can run on this CPU, as ag_bf16_status answers
     * (float builds; NULL in double builds). */
    int (*bf16_status)(const char **fact);

    /* sum of x[i]^2 in double */
    double (*sum_squares)(const ag_real *x, size_t n);
    /* dst[c] += sum over rows of x[r][c], x [rows,cols] (a bias's gradient) */
    void (*column_sums)(const ag_real *x, size_t rows, size_t cols, ag_real *dst);
} ag_kernels;

/* Every kernel in one list: its field in ag_kernels, the fast function
 * (src/kernels/, declared in fast.h and gemm_bf16.h) and its definition
 * (src/reference.c).  Both tables are generated from it (src/kernels/table.c
 * and the end of src/reference.c), so they list the same kernels.  The
 * bf16 kernels exist in float builds only (their fields stay NULL in
 * double builds). */
#define AG_KERNEL_LIST(X)                                                                 \
    X(gemm, ag_fast_gemm, ref_gemm)                                                       \
    X(gemm_batched, ag_fast_gemm_batched, ref_gemm_batched)                               \
    X(softmax, ag_fast_softmax, ref_softmax)                                              \
    X(softmax_backward, ag_fast_softmax_backward, ref_softmax_backward)                   \
    X(cross_entropy, ag_fast_cross_entropy, ref_cross_entropy)                            \
    X(cross_entropy_backward, ag_fast_cross_entropy_backward, ref_cross_entropy_backward) \
    X(layer_norm, ag_fast_layer_norm, ref_layer_norm)                                     \
    X(layer_norm_backward, ag_fast_layer_norm_backward, ref_layer_norm_backward)          \
    X(gelu, ag_fast_gelu, ref_gelu)                                                       \
    X(gelu_backward, ag_fast_gelu_backward, ref_gelu_backward)                            \
    X(gelu_keep, ag_fast_gelu_keep, ref_gelu_keep)                                        \
    X(gelu_keep_in_x, ag_fast_gelu_keep_in_x, ref_gelu_keep_in_x)                         \
    X(attention, ag_fast_attention, ref_attention)                                        \
    X(attention_backward, ag_fast_attention_backward, ref_attention_backward)             \
    X(attention_keep, ag_fast_attention_keep, ref_attention_keep)                         \
    X(gemm_scratch, ag_fast_gemm_scratch, ref_gemm_scratch)                               \
    X(attention_scratch, ag_fast_attention_scratch, ref_attention_scratch)                \
    X(sgd, ag_fast_sgd, ref_sgd)                                                          \
    X(adamw, ag_fast_adamw, ref_adamw)                                                    \
    X(sum_squares, ag_fast_sum_squares, ref_sum_squares)                                  \
    X(column_sums, ag_fast_column_sums, ref_column_sums)

#define AG_KERNEL_LIST_BF16(X)                                        \
    X(gemm_bf16, ag_fast_gemm_bf16, ref_gemm_bf16)                    \
    X(round_bf16, ag_fast_round_bf16, ref_round_bf16)                 \
    X(bf16_status, ag_fast_bf16_status, ref_bf16_status)              \
    X(gemm_bf16_scratch, ag_fast_gemm_bf16_scratch, ref_gemm_scratch)

#ifdef AG_DOUBLE
#define AG_KERNEL_LIST_ALL(X) AG_KERNEL_LIST(X)
#else
#define AG_KERNEL_LIST_ALL(X) AG_KERNEL_LIST(X) AG_KERNEL_LIST_BF16(X)
#endif

/* bfloat16: the top half of an IEEE fp32 (sign, 8-bit exponent, 7 fraction
 * bits).  bf16(x) rounds to nearest, ties to even; NaN stays NaN (quiet),
 * +-inf stays +-inf, finite values past the largest bf16 round to +-inf.
 * As the bits of a bf16, and as the float it stands for (src/reference.c). */
uint16_t ag_bf16_bits(float x);
float ag_bf16_to_float(uint16_t h);
float ag_bf16_round(float x);

/* The definitions (src/reference.c). */
extern const ag_kernels ag_kernels_reference;
#ifndef AG_REFERENCE
/* The fast implementations (src/kernels/). */
extern const ag_kernels ag_kernels_fast;
#endif
/* The kernels the ops call: fast, or the reference in a REFERENCE build.
 * Tests may point it elsewhere. */
extern const ag_kernels *ag_kern;

#endif
