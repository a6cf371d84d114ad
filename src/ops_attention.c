/*
 * ops_attention.c - multi-head self-attention as one op, the engine's fast
 * path for the computation train/nn.c also spells out op by op (and the
 * walkthrough shows step by step).  Per batch item b and head h, with q, k
 * and v the head's hd columns of the packed [B,T,3d] input:
 *
 *   S = q k^T                      [T,T]   one small matrix multiply
 *   W = softmax(scale * mask(S))           row by row, in place
 *   O = dropout(W) v               [T,hd]  written straight into [B,T,d]
 *
 * Nothing is transposed or copied: each head is read in place with a row
 * stride of 3d and written with a row stride of d.  The items are
 * independent, so threads take whole items; every number is computed by one
 * thread with the same arithmetic as the explicit ops, whatever the thread
 * count.  W is kept for backward (and for anyone who wants to look at it).
 */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fastmath.h"
#include "gemm.h"
#include "internal.h"

/* Below this many multiply-adds in total the op runs on one thread. */
#define ATTN_PARALLEL_MIN (256.0 * 1024)

typedef struct {
    ag_tensor *weights;     /* W, [B,H,T,T] */
    const ag_real *drop;    /* dropout mask (0 or 1/(1-p)) per element of W, or NULL */
    ag_real scale;          /* 1/sqrt(hd) */
} attn_saved;

/* The geometry of one (batch item, head): where its q, k, v, output and
 * weights live. */
typedef struct {
    int B, T, H, hd, d;
    long ld_qkv;            /* 3d: row stride of q, k and v */
} attn_dims;

static long qkv_offset(const attn_dims *a, int b, int h) { return (long)b * a->T * a->ld_qkv + (long)h * a->hd; }
static long out_offset(const attn_dims *a, int b, int h) { return (long)b * a->T * a->d + (long)h * a->hd; }
static long w_offset(const attn_dims *a, int item) { return (long)item * a->T * a->T; }

static attn_dims dims_of(const ag_tensor *qkv, int n_head)
{
    attn_dims a = { qkv->shape[0], qkv->shape[1], n_head, qkv->shape[2] / 3 / n_head, qkv->shape[2] / 3,
                    qkv->shape[2] };
    return a;
}

/* Row i of W from row i of S, in place: scale, mask the keys after i, softmax.
 * The same arithmetic, in the same order, as masked_fill -> scale -> softmax. */
static void weights_row(ag_real *row, int T, int i, int causal, ag_real scale)
{
    for (int j = 0; j < T; j++)
        row[j] = causal && j > i ? -INFINITY : row[j] * scale;
    ag_real max = ag_max_lanes(row, (size_t)T);
    if (max == -INFINITY) {          /* every score -inf: no weight anywhere */
        for (int j = 0; j < T; j++)
            row[j] = 0;
        return;
    }
    for (int j = 0; j < T; j++)
        row[j] = ag_fast_exp(row[j] - max);
    ag_real inv = (ag_real)(1.0 / ag_sum_lanes(row, (size_t)T));
    for (int j = 0; j < T; j++)
        row[j] *= inv;
}

/* dst = W * mask elementwise (the weights after dropout). */
static void apply_mask(const ag_real *w, const ag_real *mask, ag_real *dst, long n)
{
    for (long i = 0; i < n; i++)
        dst[i] = w[i] * mask[i];
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

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *qkv, int n_head, int causal, ag_real dropout, int training,
                        ag_tensor **weights)
{
    char s[64];
    if (qkv->ndim != 3 || n_head < 1 || qkv->shape[2] % (3 * n_head) != 0)
        ag_error("ag_attention: input %s is not [B,T,3d] with d divisible by %d heads",
                 ag_shape_str(qkv, s, sizeof s), n_head);
    if (!(dropout >= 0 && dropout < 1))
        ag_error("ag_attention: dropout p = %g is outside [0, 1)", (double)dropout);
    attn_dims a = dims_of(qkv, n_head);
    const int T = a.T, items = a.B * a.H;
    const ag_real scale = (ag_real)(1.0 / sqrt((double)a.hd));
    ag_tensor *out = ag_empty(ctx, 3, (int[]){a.B, T, a.d});
    ag_tensor *w = ag_empty(ctx, 4, (int[]){a.B, a.H, T, T});
    /* Drawn up front in W's element order, exactly as ag_dropout on W would. */
    const ag_real *drop = training && dropout > 0 ? ag_dropout_mask(ctx, w->size, dropout) : NULL;
    const int nth = threads_for(&a);
    ag_real *scratch = drop ? ag_alloc(ctx, (size_t)nth * T * T * sizeof(ag_real)) : NULL;

    #pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int item = 0; item < items; item++) {
        const int b = item / a.H, h = item % a.H;
        const ag_real *q = qkv->data + qkv_offset(&a, b, h), *k = q + a.d, *v = q + 2 * a.d;
        ag_real *wi = w->data + w_offset(&a, item);
        ag_gemm(0, 1, T, T, a.hd, q, (int)a.ld_qkv, k, (int)a.ld_qkv, 0, wi, T);   /* S = q k^T */
        for (int i = 0; i < T; i++)
            weights_row(wi + (long)i * T, T, i, causal, scale);
        const ag_real *wd = wi;
        if (drop) {
            ag_real *tmp = scratch + (long)thread_id() * T * T;
            apply_mask(wi, drop + w_offset(&a, item), tmp, (long)T * T);
            wd = tmp;
        }
        ag_gemm(0, 0, T, a.hd, T, wd, T, v, (int)a.ld_qkv, 0, out->data + out_offset(&a, b, h), a.d);
    }
    if (weights)
        *weights = w;
    if (ag_should_record(ctx, out, qkv, NULL, NULL)) {
        attn_saved *sv = ag_alloc(ctx, sizeof *sv);
        sv->weights = w;
        sv->drop = drop;
        sv->scale = scale;
        ag_node *n = ag_record(ctx, AG_OP_ATTENTION, out, qkv, NULL, NULL);
        n->iarg[0] = n_head;
        n->iarg[1] = causal;
        n->saved = sv;
    }
    return out;
}

/* Per item, with Wd = dropout(W) and dO the output's gradient:
 *   dv  = Wd^T dO
 *   dWd = dO v^T,   dW = dWd * mask
 *   dS  = scale * W (dW - rowsum(dW * W))      (softmax backward, then scale;
 *                                               masked entries have W = 0)
 *   dq  = dS k,     dk = dS^T q
 * Each item writes its own columns of its own rows of dqkv, and together the
 * items cover all of it: a new gradient buffer is stored, not added to. */
void ag_backward_ATTENTION(ag_ctx *ctx, ag_node *n)
{
    const attn_saved *sv = n->saved;
    ag_tensor *qkv = n->in[0];
    attn_dims a = dims_of(qkv, n->iarg[0]);
    const int T = a.T, items = a.B * a.H, causal = n->iarg[1];
    int assign;
    ag_real *dqkv = ag_grad_begin(ctx, qkv, &assign);
    const ag_real beta = assign ? 0 : 1, *dout = n->out->grad;
    const int nth = threads_for(&a);
    ag_real *scratch = ag_alloc(ctx, (size_t)nth * 2 * T * T * sizeof(ag_real));

    #pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int item = 0; item < items; item++) {
        const int b = item / a.H, h = item % a.H;
        const long off = qkv_offset(&a, b, h);
        const ag_real *q = qkv->data + off, *k = q + a.d, *v = q + 2 * a.d;
        ag_real *dq = dqkv + off, *dk = dq + a.d, *dv = dq + 2 * a.d;
        const ag_real *wi = sv->weights->data + w_offset(&a, item);
        const ag_real *dO = dout + out_offset(&a, b, h);
        ag_real *dw = scratch + (long)thread_id() * 2 * T * T, *wd_buf = dw + (long)T * T;
        const int ld = (int)a.ld_qkv;

        const ag_real *wd = wi, *mask = sv->drop ? sv->drop + w_offset(&a, item) : NULL;
        if (mask) {
            apply_mask(wi, mask, wd_buf, (long)T * T);
            wd = wd_buf;
        }
        ag_gemm(1, 0, T, a.hd, T, wd, T, dO, a.d, beta, dv, ld);       /* dv = Wd^T dO */
        ag_gemm(0, 1, T, T, a.hd, dO, a.d, v, ld, 0, dw, T);           /* dWd = dO v^T */
        for (int i = 0; i < T; i++) {
            ag_real *g = dw + (long)i * T;
            const ag_real *y = wi + (long)i * T;
            if (mask)
                for (int j = 0; j < T; j++)
                    g[j] *= mask[(long)i * T + j];
            ag_real dot = (ag_real)ag_dot_lanes(g, y, (size_t)T);
            for (int j = 0; j < T; j++)
                g[j] = causal && j > i ? 0 : y[j] * (g[j] - dot) * sv->scale;
        }
        ag_gemm(0, 0, T, a.hd, T, dw, T, k, ld, beta, dq, ld);         /* dq = dS k */
        ag_gemm(1, 0, T, a.hd, T, dw, T, q, ld, beta, dk, ld);         /* dk = dS^T q */
    }
}
