/*
 * ops_attention.c - multi-head self-attention as one op, the engine's fast
 * path for the computation train/nn.c also spells out op by op (and the
 * walkthrough shows step by step).  Per batch item b and head h, with q, k
 * and v the head's hd columns of the packed [B,T,3d] input:
 *
 *   S = q k^T                      [T,T]   one small matrix multiply
 *   W = softmax(scale * mask(S))           row by row
 *   O = dropout(W) v               [T,hd]  written straight into [B,T,d]
 *
 * Nothing is transposed or copied: each head is read in place with a row
 * stride of 3d and written with a row stride of d.  The op keeps W
 * transposed, W^T[j][i] = W[i][j] (it computes S^T = k q^T directly): a
 * query's row of W is then a column, so the softmax's per-row maximum and
 * sum become elementwise maxima and sums down the rows of W^T, vectorized
 * over all queries at once, instead of short horizontal reductions, one per
 * query.  Every product then reads W^T in whichever orientation it needs.
 *
 * The items are independent, so threads take whole items; every number is
 * computed by one thread, the same way whatever the thread count.
 */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fastmath.h"
#include "gemm.h"
#include "internal.h"

/* The loops here are short (one row of T) and dominated by exp: full-width
 * AVX-512 vectors do them in half the instructions of the 256-bit ones gcc
 * otherwise prefers. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

/* Below this many multiply-adds in total the op runs on one thread. */
#define ATTN_PARALLEL_MIN (256.0 * 1024)

typedef struct {
    const ag_real *wt;      /* W^T per item: [B,H,T,T] with wt[j*T + i] = W[i][j] */
    const ag_real *drop;    /* dropout multipliers (0 or 1/(1-p)) in W's own layout, or NULL */
    ag_real scale;          /* 1/sqrt(hd) */
} attn_saved;

/* The geometry: where an item's q, k, v, output and weights live. */
typedef struct {
    int B, T, H, hd, d;
    int ld_qkv;             /* 3d: row stride of q, k and v */
} attn_dims;

static long qkv_offset(const attn_dims *a, int b, int h) { return (long)b * a->T * a->ld_qkv + (long)h * a->hd; }
static long out_offset(const attn_dims *a, int b, int h) { return (long)b * a->T * a->d + (long)h * a->hd; }
static long w_offset(const attn_dims *a, int item) { return (long)item * a->T * a->T; }

static attn_dims dims_of(const ag_tensor *qkv, int n_head)
{
    int d = qkv->shape[2] / 3;
    attn_dims a = { qkv->shape[0], qkv->shape[1], n_head, d / n_head, d, qkv->shape[2] };
    return a;
}

/* With the causal mask W^T is upper triangular (W^T[j][i] = 0 for i < j),
 * and so is dS^T: the products skip what is known to be zero, a band of
 * BAND rows at a time (whole vectors wide, so no ragged tiles), and row j
 * of S^T is computed from its band's first row on.  What is still computed
 * of the zeros is exact: adding 0 * x changes no sum. */
#define BAND 32

static int min_int(int a, int b) { return a < b ? a : b; }

/* The first column computed in row j: its band's first row (0 without the mask). */
static int band_start(int j, int causal) { return causal ? j / BAND * BAND : 0; }

/* W^T from S^T in place: scale, mask (key j after query i), softmax down
 * each column.  With the causal mask, row j of S^T was computed only from
 * its band's start (see below): the columns before it are masked anyway and
 * are not read, and every entry is written.  col is scratch for 2 T values. */
static void softmax_columns(ag_real *st, int T, int causal, ag_real scale, ag_real *col)
{
    ag_real *shift = col, *sum = col + T;
    for (int i = 0; i < T; i++)
        shift[i] = -INFINITY;
    for (int j = 0; j < T; j++) {
        ag_real *r = st + (long)j * T;
        for (int i = band_start(j, causal); i < T; i++) {
            ag_real x = causal && j > i ? -INFINITY : r[i] * scale;
            r[i] = x;
            shift[i] = x > shift[i] ? x : shift[i];
        }
    }
    for (int i = 0; i < T; i++) {
        shift[i] = shift[i] == -INFINITY ? 0 : shift[i];   /* a column of -inf: all weights 0 */
        sum[i] = 0;
    }
    for (int j = 0; j < T; j++) {
        ag_real *r = st + (long)j * T;
        for (int i = band_start(j, causal); i < T; i++) {
            r[i] = ag_fast_exp(r[i] - shift[i]);
            sum[i] += r[i];
        }
    }
    for (int i = 0; i < T; i++)
        sum[i] = sum[i] > 0 ? 1 / sum[i] : 0;
    for (int j = 0; j < T; j++) {
        ag_real *r = st + (long)j * T;
        int lo = band_start(j, causal);
        for (int i = 0; i < lo; i++)
            r[i] = 0;
        for (int i = lo; i < T; i++)
            r[i] *= sum[i];
    }
}

/* The products, with the band structure above. */

/* C[T,T] = X Y^T for X, Y [T,hd] (row strides ldx, ldy), row by row of C;
 * causal: row j only from column j's band start on (S^T = k q^T, v dO^T). */
static void upper_xyt(int T, int hd, int causal, const ag_real *x, int ldx, const ag_real *y, int ldy, ag_real *c)
{
    for (int j0 = 0; j0 < T; j0 += causal ? BAND : T) {
        int j1 = min_int(T, j0 + (causal ? BAND : T)), i0 = causal ? j0 : 0;
        ag_gemm(0, 1, j1 - j0, T - i0, hd, x + (long)j0 * ldx, ldx, y + (long)i0 * ldy, ldy, 0,
                c + (long)j0 * T + i0, T);
    }
}

/* C[T,hd] (+)= A^T B for upper-triangular A [T,T]: row i of C sums A[j][i]
 * B[j] over j <= i (O = W v, dq = dS k). */
static void upper_atb(int T, int hd, int causal, const ag_real *a, const ag_real *b, int ldb, ag_real beta,
                      ag_real *c, int ldc)
{
    for (int i0 = 0; i0 < T; i0 += causal ? BAND : T) {
        int i1 = min_int(T, i0 + (causal ? BAND : T));
        ag_gemm(1, 0, i1 - i0, hd, causal ? i1 : T, a + i0, T, b, ldb, beta, c + (long)i0 * ldc, ldc);
    }
}

/* C[T,hd] (+)= A B for upper-triangular A [T,T]: row j of C sums A[j][i]
 * B[i] over i >= j (dv = Wd^T dO, dk = dS^T q). */
static void upper_ab(int T, int hd, int causal, const ag_real *a, const ag_real *b, int ldb, ag_real beta,
                     ag_real *c, int ldc)
{
    for (int j0 = 0; j0 < T; j0 += causal ? BAND : T) {
        int j1 = min_int(T, j0 + (causal ? BAND : T)), k0 = causal ? j0 : 0;
        ag_gemm(0, 0, j1 - j0, hd, T - k0, a + (long)j0 * T + k0, T, b + (long)k0 * ldb, ldb, beta,
                c + (long)j0 * ldc, ldc);
    }
}

/* dst = W^T * mask^T (the weights after dropout, transposed); the mask is in
 * W's layout. */
static void drop_transposed(const ag_real *wt, const ag_real *mask, ag_real *dst, int T)
{
    for (int j = 0; j < T; j++)
        for (int i = 0; i < T; i++)
            dst[(long)j * T + i] = wt[(long)j * T + i] * mask[(long)i * T + j];
}

static int threads_for(const attn_dims *a)
{
#ifdef _OPENMP
    double work = (double)a->B * a->H * a->T * a->T * a->hd;
    return work < ATTN_PARALLEL_MIN || omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    (void)a;
    return 1;
#endif
}


ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *qkv, int n_head, int causal, ag_real dropout, int training,
                        ag_tensor **weights)
{
    char s[64];
    if (qkv->ndim != 3 || n_head < 1 || qkv->shape[2] % 3 != 0 || qkv->shape[2] / 3 % n_head != 0)
        ag_error("ag_attention: input %s is not [B,T,3d] with d divisible by %d heads",
                 ag_shape_str(qkv, s, sizeof s), n_head);
    if (!(dropout >= 0 && dropout < 1))
        ag_error("ag_attention: dropout p = %g is outside [0, 1)", (double)dropout);
    attn_dims a = dims_of(qkv, n_head);
    const int T = a.T, items = a.B * a.H, ld = a.ld_qkv;
    const ag_real scale = (ag_real)(1.0 / sqrt((double)a.hd));
    const size_t nw = (size_t)items * T * T;
    ag_tensor *out = ag_empty(ctx, 3, (int[]){a.B, T, a.d});
    ag_real *wt = ag_alloc(ctx, nw * sizeof(ag_real));
    /* Drawn up front in W's element order, exactly as ag_dropout on W would. */
    const ag_real *drop = training && dropout > 0 ? ag_dropout_mask(ctx, nw, dropout) : NULL;
    const int nth = threads_for(&a);
    const long per_thread = 2L * T + (drop ? (long)T * T : 0);
    ag_real *scratch = ag_alloc(ctx, (size_t)nth * per_thread * sizeof(ag_real));

    #pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int item = 0; item < items; item++) {
        const int b = item / a.H, h = item % a.H;
        const ag_real *q = qkv->data + qkv_offset(&a, b, h), *k = q + a.d, *v = q + 2 * a.d;
        ag_real *st = wt + w_offset(&a, item), *col = scratch + ag_thread_id() * per_thread;
        upper_xyt(T, a.hd, causal, k, ld, q, ld, st);                        /* S^T = k q^T */
        softmax_columns(st, T, causal, scale, col);
        const ag_real *wd = st;
        if (drop) {
            drop_transposed(st, drop + w_offset(&a, item), col + 2 * T, T);
            wd = col + 2 * T;
        }
        upper_atb(T, a.hd, causal, wd, v, ld, 0, out->data + out_offset(&a, b, h), a.d);   /* O = W v */
    }
    if (weights) {
        /* W itself, for anyone who wants to look at it */
        *weights = ag_empty(ctx, 4, (int[]){a.B, a.H, T, T});
        for (int item = 0; item < items; item++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    (*weights)->data[w_offset(&a, item) + (long)i * T + j] = wt[w_offset(&a, item) + (long)j * T + i];
    }
    if (ag_should_record(ctx, out, qkv, NULL, NULL)) {
        attn_saved *sv = ag_alloc(ctx, sizeof *sv);
        sv->wt = wt;
        sv->drop = drop;
        sv->scale = scale;
        ag_node *n = ag_record(ctx, AG_OP_ATTENTION, out, qkv, NULL, NULL);
        n->iarg[0] = n_head;
        n->iarg[1] = causal;
        n->saved = sv;
    }
    return out;
}

/* Per item, with Wd = dropout(W) and dO the output's gradient, all in the
 * transposed layout:
 *   dv    = Wd^T dO
 *   dWd^T = v dO^T,   dW^T = dWd^T * mask^T
 *   dS^T  = scale * W^T (dW^T - colsum(dW^T * W^T))   (softmax backward, then
 *                                                       scale; masked W = 0)
 *   dq    = (dS^T)^T k,   dk = dS^T q
 * Each item writes its own columns of its own rows of dqkv, and together the
 * items cover all of it: a new gradient buffer is stored, not added to. */
void ag_backward_ATTENTION(ag_ctx *ctx, ag_node *n)
{
    const attn_saved *sv = n->saved;
    ag_tensor *qkv = n->in[0];
    attn_dims a = dims_of(qkv, n->iarg[0]);
    const int T = a.T, items = a.B * a.H, causal = n->iarg[1], ld = a.ld_qkv;
    int assign;
    ag_real *dqkv = ag_grad_begin(ctx, qkv, &assign);
    const ag_real beta = assign ? 0 : 1, *dout = n->out->grad;
    const int nth = threads_for(&a);
    /* dWd^T, Wd^T, the per-query sums in ag_real and in double */
    const long per_thread = 2L * T * T + (T + (T & 1)) + 2L * T;
    ag_real *scratch = ag_alloc(ctx, (size_t)nth * per_thread * sizeof(ag_real));

    #pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int item = 0; item < items; item++) {
        const int b = item / a.H, h = item % a.H;
        const long off = qkv_offset(&a, b, h);
        const ag_real *q = qkv->data + off, *k = q + a.d, *v = q + 2 * a.d;
        ag_real *dq = dqkv + off, *dk = dq + a.d, *dv = dq + 2 * a.d;
        const ag_real *wt = sv->wt + w_offset(&a, item), *dO = dout + out_offset(&a, b, h);
        const ag_real *mask = sv->drop ? sv->drop + w_offset(&a, item) : NULL;
        ag_real *dwt = scratch + ag_thread_id() * per_thread, *wd = dwt + (long)T * T, *dotr = wd + (long)T * T;
        double *dot = (double *)(dotr + T + (T & 1));   /* 8-byte aligned: T + (T & 1) is even */

        const ag_real *wdt = wt;
        if (mask) {
            drop_transposed(wt, mask, wd, T);
            wdt = wd;
        }
        upper_ab(T, a.hd, causal, wdt, dO, a.d, beta, dv, ld);          /* dv = Wd^T dO */
        upper_xyt(T, a.hd, causal, v, ld, dO, a.d, dwt);                /* dWd^T = v dO^T */
        /* Softmax backward down the columns; with the causal mask row j
         * was computed from its band's start, and the rest of dS^T is 0.
         * The per-query sums sum_j dW[i][j] W[i][j] accumulate in double
         * from dW and W themselves (not as dO_i . O_i, equal in exact
         * arithmetic): where a query's weights are one-hot, dS is then
         * exactly 0, as the explicit ops give. */
        for (int i = 0; i < T; i++)
            dot[i] = 0;
        for (int j = 0; j < T; j++) {
            ag_real *restrict g = dwt + (long)j * T;
            const ag_real *restrict y = wt + (long)j * T;
            double *restrict acc = dot;
            if (mask)
                for (int i = band_start(j, causal); i < T; i++)
                    g[i] *= mask[(long)i * T + j];
            for (int i = band_start(j, causal); i < T; i++)
                acc[i] += (double)g[i] * y[i];
        }
        for (int i = 0; i < T; i++)
            dotr[i] = (ag_real)dot[i];
        const ag_real scale = sv->scale;
        for (int j = 0; j < T; j++) {
            ag_real *restrict g = dwt + (long)j * T;
            const ag_real *restrict y = wt + (long)j * T;
            const ag_real *restrict dt = dotr;
            int lo = band_start(j, causal);
            for (int i = 0; i < lo; i++)
                g[i] = 0;
            for (int i = lo; i < T; i++)
                g[i] = causal && j > i ? 0 : y[i] * (g[i] - dt[i]) * scale;
        }
        upper_atb(T, a.hd, causal, dwt, k, ld, beta, dq, ld);           /* dq = dS k */
        upper_ab(T, a.hd, causal, dwt, q, ld, beta, dk, ld);            /* dk = dS^T q */
    }
}
