/*
 * ops_matmul.c - batched matmul (torch.matmul semantics for 2-D to 4-D) and
 * linear (x W^T + b, nn.Linear's layout), and linear followed by GELU as
 * one op (the MLP's first layer).  Every product goes through the gemm
 * kernel (definition: ref_gemm in src/reference.c; ref_gemm_bf16 at bf16
 * precision), whose transpose flags let backward use A^T and B^T in
 * place; the bias is a plain loop forward and the column_sums kernel
 * backward, GELU the gelu kernels.
 */
#include <limits.h>
#include <string.h>

#include "internal.h"

/* The kernels take a product's sizes in int and round them up to their
 * blocks in int: rows, columns and inner size each at most PRODUCT_MAX,
 * and at most INT_MAX products in a batch.  Past that an int wraps (2^32
 * rows of a linear layer would be 0, its output left unwritten), so the
 * ops below refuse such shapes before they allocate their output. */
#define PRODUCT_MAX (INT_MAX / 2)

/* The packing buffers the products below keep (see products()). */
size_t ag_matmul_scratch_bytes(int M, int N, int K, int precision)
{
    /* the sizes of a product of tensors (each at least 1), within what the
     * kernels round up to their blocks in int */
    if (M < 1 || N < 1 || K < 1 || M > PRODUCT_MAX || N > PRODUCT_MAX || K > PRODUCT_MAX)
        ag_error("ag_matmul_scratch_bytes: M %d, N %d, K %d (each 1 to %d)", M, N, K, PRODUCT_MAX);
    if (precision != AG_FP32 && precision != AG_BF16)
        ag_error("ag_matmul_scratch_bytes: precision %d is not AG_FP32 or AG_BF16", precision);
    if (precision == AG_BF16 && ag_kern->gemm_bf16_scratch)
        return ag_kern->gemm_bf16_scratch(M, N, K);
    return ag_kern->gemm_scratch(M, N, K);
}

/* The batch (leading) dims of a matmul, broadcast and padded to 2. */
typedef struct {
    int nb[2];                  /* output batch shape */
    long sa[2], sb[2];          /* element strides of a's and b's matrices per batch dim (0: broadcast) */
    int M, K, N;
    int precision;              /* AG_FP32 or AG_BF16, the context's when the op ran */
} mm_plan;

/* `batch` products, item i at A + i*stride_a, ...: the batched kernel, or
 * one bf16 product after another (each using every thread). */
static void products(int precision, int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                     long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta, ag_real *C,
                     long stride_c, int ldc)
{
    if (precision == AG_FP32) {
        ag_kern->gemm_batched(batch, trans_a, trans_b, M, N, K, A, stride_a, lda, B, stride_b, ldb, beta, C, stride_c,
                              ldc);
        return;
    }
    for (int i = 0; i < batch; i++)
        ag_kern->gemm_bf16(trans_a, trans_b, M, N, K, A + i * stride_a, lda, B + i * stride_b, ldb, beta,
                           C + i * stride_c, ldc);
}

static void batch_dims(const ag_tensor *t, int *d)
{
    int nbatch = t->ndim - 2;
    d[0] = d[1] = 1;
    for (int i = 0; i < nbatch; i++)
        d[2 - nbatch + i] = t->shape[i];
}

static mm_plan plan_matmul(const ag_tensor *a, const ag_tensor *b, int out_shape[AG_MAX_DIMS], int *out_ndim)
{
    char sa[64], sb[64];
    if (a->ndim < 2 || b->ndim < 2)
        ag_error("ag_matmul: operands need at least 2 dims: %s @ %s", ag_shape_str(a, sa, sizeof sa),
                 ag_shape_str(b, sb, sizeof sb));
    mm_plan p;
    p.M = a->shape[a->ndim - 2];
    p.K = a->shape[a->ndim - 1];
    p.N = b->shape[b->ndim - 1];
    if (b->shape[b->ndim - 2] != p.K)
        ag_error("ag_matmul: inner dimensions differ: %s @ %s", ag_shape_str(a, sa, sizeof sa),
                 ag_shape_str(b, sb, sizeof sb));
    int da[2], db[2];
    batch_dims(a, da);
    batch_dims(b, db);
    long mat_a = (long)p.M * p.K, mat_b = (long)p.K * p.N;
    for (int i = 0; i < 2; i++) {
        if (da[i] != db[i] && da[i] != 1 && db[i] != 1)
            ag_error("ag_matmul: batch dimensions cannot broadcast: %s @ %s", ag_shape_str(a, sa, sizeof sa),
                     ag_shape_str(b, sb, sizeof sb));
        p.nb[i] = da[i] > db[i] ? da[i] : db[i];
    }
    /* strides of the batch index in matrices: row-major over (d0, d1) */
    p.sa[1] = da[1] == 1 ? 0 : mat_a;
    p.sa[0] = da[0] == 1 ? 0 : mat_a * da[1];
    p.sb[1] = db[1] == 1 ? 0 : mat_b;
    p.sb[0] = db[0] == 1 ? 0 : mat_b * db[1];
    *out_ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    int nbatch = *out_ndim - 2;
    for (int i = 0; i < nbatch; i++)
        out_shape[i] = p.nb[2 - nbatch + i];
    out_shape[nbatch] = p.M;
    out_shape[nbatch + 1] = p.N;
    return p;
}

/* Whether operand strides make the batch one regular sequence (stride s per
 * item over the flattened batch), so one batched kernel call covers it. */
static int regular(const long *s, const int *nb, long *stride)
{
    *stride = 0;
    if (s[0] == 0 && s[1] == 0)
        return 1;
    if (nb[0] == 1 || s[0] == s[1] * nb[1]) { *stride = s[1]; return s[1] != 0 || nb[1] == 1; }
    return 0;
}

/* Whether b is one matrix shared by every batch item and a's items lie one
 * after another: then the batch is one tall product of a's stacked rows,
 * [items*M, K] x [K, N] (and, backward, dB = sum over items of A_i^T dC_i =
 * (stacked A)^T (stacked dC)). */
static int stacked(const mm_plan *p)
{
    long stride_a;
    return p->sb[0] == 0 && p->sb[1] == 0 && regular(p->sa, p->nb, &stride_a) && stride_a == (long)p->M * p->K;
}

ag_tensor *ag_matmul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b)
{
    ag_need("ag_matmul", "ctx", ctx);
    ag_need_data("ag_matmul", "a", a);
    ag_need_data("ag_matmul", "b", b);
    int shape[AG_MAX_DIMS], ndim;
    mm_plan p = plan_matmul(a, b, shape, &ndim);
    /* the sizes the kernels are given below: one tall product of the
     * stacked rows of a, or `items` products of M rows */
    const long long items = (long long)p.nb[0] * p.nb[1];
    const int tall = stacked(&p);
    const long long rows = tall ? items * p.M : p.M;
    if (rows > PRODUCT_MAX || p.N > PRODUCT_MAX || p.K > PRODUCT_MAX || items > INT_MAX) {
        char sa[64], sb[64];
        const long long products = tall ? 1 : items;
        ag_error("ag_matmul: %s @ %s is too large: %lld product%s of %lld rows x %d columns x %d inner "
                 "(the matrix multiply takes at most %d products, each size at most %d)",
                 ag_shape_str(a, sa, sizeof sa), ag_shape_str(b, sb, sizeof sb), products, products == 1 ? "" : "s",
                 rows, p.N, p.K, INT_MAX, PRODUCT_MAX);
    }
    p.precision = ctx->precision;
    const ag_gemm_fn gemm = ag_gemm_of(p.precision);
    ag_tensor *out = ag_empty(ctx, ndim, shape);
    long mat_c = (long)p.M * p.N, stride_a, stride_b;
    int batch = p.nb[0] * p.nb[1];
    if (tall) {
        gemm(0, 0, batch * p.M, p.N, p.K, a->data, p.K, b->data, p.N, 0, out->data, p.N);
    } else if (regular(p.sa, p.nb, &stride_a) && regular(p.sb, p.nb, &stride_b)) {
        products(p.precision, batch, 0, 0, p.M, p.N, p.K, a->data, stride_a, p.K, b->data, stride_b, p.N, 0,
                 out->data, mat_c, p.N);
    } else {
        /* batch dims broadcast irregularly: one product per item */
        for (int i = 0; i < p.nb[0]; i++)
            for (int j = 0; j < p.nb[1]; j++)
                gemm(0, 0, p.M, p.N, p.K, a->data + i * p.sa[0] + j * p.sa[1], p.K,
                     b->data + i * p.sb[0] + j * p.sb[1], p.N, 0, out->data + (i * p.nb[1] + j) * mat_c, p.N);
    }
    if (ag_should_record(ctx, out, a, b, NULL)) {
        mm_plan *saved = ag_alloc(ctx, sizeof *saved);
        *saved = p;
        ag_record(ctx, AG_OP_MATMUL, out, a, b, NULL)->saved = saved;
    }
    return out;
}

/* C = A B  =>  dA += dC B^T,  dB += A^T dC  (per batch item; a broadcast
 * operand sums the contributions of every item it was used in). */
void ag_backward_matmul(ag_ctx *ctx, ag_node *n)
{
    const mm_plan *p = n->saved;
    const ag_gemm_fn gemm = ag_gemm_of(p->precision);
    ag_tensor *a = n->in[0], *b = n->in[1];
    const ag_real *dc = n->out->grad;
    long mat_c = (long)p->M * p->N, stride_a, stride_b;
    int batch = p->nb[0] * p->nb[1];
    const int a_reg = regular(p->sa, p->nb, &stride_a), b_reg = regular(p->sb, p->nb, &stride_b);
    const int tall = stacked(p);
    /* A gradient is written by one product per item only where no two items
     * share its memory (stride 0: broadcast); else item by item, each adding
     * its share in turn. */
    if (a->requires_grad) {             /* dA += dC B^T */
        ag_real *da = ag_grad(ctx, a);
        if (tall)
            gemm(0, 1, batch * p->M, p->K, p->N, dc, p->N, b->data, p->N, 1, da, p->K);
        else if (a_reg && stride_a != 0 && b_reg)
            products(p->precision, batch, 0, 1, p->M, p->K, p->N, dc, mat_c, p->N, b->data, stride_b, p->N, 1, da,
                     stride_a, p->K);
        else
            for (int i = 0; i < p->nb[0]; i++)
                for (int j = 0; j < p->nb[1]; j++)
                    gemm(0, 1, p->M, p->K, p->N, dc + (i * p->nb[1] + j) * mat_c, p->N,
                         b->data + i * p->sb[0] + j * p->sb[1], p->N, 1, da + i * p->sa[0] + j * p->sa[1], p->K);
    }
    if (b->requires_grad) {             /* dB += A^T dC */
        ag_real *db = ag_grad(ctx, b);
        if (tall)
            gemm(1, 0, p->K, p->N, batch * p->M, a->data, p->K, dc, p->N, 1, db, p->N);
        else if (b_reg && stride_b != 0 && a_reg)
            products(p->precision, batch, 1, 0, p->K, p->N, p->M, a->data, stride_a, p->K, dc, mat_c, p->N, 1, db,
                     stride_b, p->N);
        else
            for (int i = 0; i < p->nb[0]; i++)
                for (int j = 0; j < p->nb[1]; j++)
                    gemm(1, 0, p->K, p->N, p->M, a->data + i * p->sa[0] + j * p->sa[1], p->K,
                         dc + (i * p->nb[1] + j) * mat_c, p->N, 1, db + i * p->sb[0] + j * p->sb[1], p->N);
    }
}

/* ---- linear ------------------------------------------------------------ */

/* y[r, :] += b for rows [lo, hi) */
typedef struct {
    ag_real *y;
    const ag_real *b;
    int outf;
} bias_args;

static void add_bias_rows(void *ctx, size_t lo, size_t hi)
{
    const bias_args *a = ctx;
    const ag_real *restrict b = a->b;
    const int outf = a->outf;
    for (size_t r = lo; r < hi; r++) {
        ag_real *restrict y = a->y + r * (size_t)outf;
        for (int o = 0; o < outf; o++)
            y[o] += b[o];
    }
}

/* x W^T into a new tensor of x's shape with its last dim W's rows, after
 * checking the shapes for `op`; *rows gets the rows of x. */
static ag_tensor *linear_product(ag_ctx *ctx, const char *op, ag_tensor *x, ag_tensor *W, ag_tensor *b, int *rows)
{
    char sx[64], sw[64], sb[64];
    ag_need_data(op, "x", x);
    ag_need_data(op, "W", W);
    if (b)
        ag_need_data(op, "b", b);
    int in = x->shape[x->ndim - 1];
    if (W->ndim != 2 || W->shape[1] != in)
        ag_error("%s: weight %s does not fit input %s (need [out,%d])", op, ag_shape_str(W, sw, sizeof sw),
                 ag_shape_str(x, sx, sizeof sx), in);
    int outf = W->shape[0];
    if (b && (b->ndim != 1 || b->shape[0] != outf))
        ag_error("%s: bias %s does not fit weight %s (need [%d])", op, ag_shape_str(b, sb, sizeof sb),
                 ag_shape_str(W, sw, sizeof sw), outf);
    const size_t n_rows = x->size / (size_t)in;
    if (n_rows > PRODUCT_MAX || outf > PRODUCT_MAX || in > PRODUCT_MAX)
        ag_error("%s: input %s and weight %s are too large: %zu rows x %d outputs x %d inputs "
                 "(the matrix multiply takes each size at most %d)", op, ag_shape_str(x, sx, sizeof sx),
                 ag_shape_str(W, sw, sizeof sw), n_rows, outf, in, PRODUCT_MAX);
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = outf;
    ag_tensor *out = ag_empty(ctx, x->ndim, shape);
    *rows = (int)n_rows;
    /* y[r, o] = sum_i x[r, i] W[o, i] : W read transposed in place */
    ag_gemm_of(ctx->precision)(0, 1, *rows, outf, in, x->data, in, W->data, in, 0, out->data, outf);
    return out;
}

ag_tensor *ag_linear(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b)
{
    ag_need("ag_linear", "ctx", ctx);
    int rows;
    ag_tensor *out = linear_product(ctx, "ag_linear", x, W, b, &rows);
    if (b) {
        bias_args ba = { out->data, b->data, W->shape[0] };
        ag_parallel_for((size_t)rows, out->size, add_bias_rows, &ba);
    }
    if (ag_should_record(ctx, out, x, W, b)) {
        ag_node *n = ag_record(ctx, AG_OP_LINEAR, out, x, W, b);
        n->iarg[0] = rows;
        n->iarg[1] = ctx->precision;
    }
    return out;
}

/* The products of a linear layer's backward, from dy = d(x W^T + b):
 * dx += dy W,  dW += dy^T x. */
static void linear_backward_products(ag_ctx *ctx, ag_node *n, const ag_real *dy)
{
    ag_tensor *x = n->in[0], *W = n->in[1];
    int rows = n->iarg[0], outf = W->shape[0], in = W->shape[1];
    const ag_gemm_fn gemm = ag_gemm_of(n->iarg[1]);
    if (x->requires_grad) {
        int assign;   /* a new dx is stored (beta 0), not zeroed and added to */
        ag_real *dx = ag_grad_begin(ctx, x, &assign);
        gemm(0, 0, rows, in, outf, dy, outf, W->data, in, assign ? 0 : 1, dx, in);
    }
    if (W->requires_grad)
        gemm(1, 0, outf, in, rows, dy, outf, x->data, in, 1, ag_grad(ctx, W), in);
}

/* y = x W^T + b  =>  dx += dy W,  dW += dy^T x,  db += sum over rows of dy */
void ag_backward_linear(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *b = n->in[2];
    const ag_real *dy = n->out->grad;
    linear_backward_products(ctx, n, dy);
    if (b && b->requires_grad)
        ag_kern->column_sums(dy, (size_t)n->iarg[0], (size_t)n->in[1]->shape[0], ag_grad(ctx, b));
}

/* What ag_linear_gelu keeps for backward: the product without its bias,
 * and what the kernel's forward left for its backward (NULL: nothing; the
 * product itself where the kernel keeps gelu' over it: nothing else reads
 * the product). */
typedef struct {
    const ag_real *h;
    void *keep;
} gelu_saved;

/* gelu(x W^T + b): the product, then the bias and GELU in one pass over
 * its output (the kernel gelu with a bias), which is kept, without the
 * bias, for backward (or replaced by GELU's derivative where the kernel
 * keeps that over it).  The same bits as ag_gelu(ag_linear(x, W, b)) with
 * one pass over the [rows, out] activations fewer each way. */
ag_tensor *ag_linear_gelu(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b)
{
    ag_need("ag_linear_gelu", "ctx", ctx);
    int rows;
    ag_tensor *product = linear_product(ctx, "ag_linear_gelu", x, W, b, &rows);
    ag_tensor *out = ag_empty(ctx, product->ndim, product->shape);
    const size_t outf = (size_t)W->shape[0], keep = ag_kern->gelu_keep((size_t)rows * outf);
    gelu_saved *sv = NULL;
    if (ag_should_record(ctx, out, x, W, b)) {
        sv = ag_alloc(ctx, sizeof *sv);
        *sv = (gelu_saved){ product->data, ag_kern->gelu_keep_in_x() ? (void *)product->data
                                           : keep ? ag_alloc(ctx, keep) : NULL };
    }
    ag_kern->gelu(product->data, b ? b->data : NULL, (size_t)rows, outf, out->data, sv ? sv->keep : NULL);
    if (sv) {
        ag_node *n = ag_record(ctx, AG_OP_LINEAR_GELU, out, x, W, b);
        n->iarg[0] = rows;
        n->iarg[1] = ctx->precision;
        n->saved = sv;
    }
    return out;
}

/* y = gelu(h), h = x W^T + b  =>  dh = dy gelu'(h) and db += sum over rows
 * of dh in one pass (the kernel gelu_backward), then dx += dh W, dW += dh^T x */
void ag_backward_linear_gelu(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *b = n->in[2];
    const size_t rows = (size_t)n->iarg[0], outf = (size_t)n->in[1]->shape[0];
    ag_real *dh = ag_alloc(ctx, rows * outf * sizeof *dh);
    const gelu_saved *sv = n->saved;
    ag_kern->gelu_backward(sv->h, b ? b->data : NULL, sv->keep, n->out->grad, rows, outf, dh, 1,
                           b && b->requires_grad ? ag_grad(ctx, b) : NULL);
    linear_backward_products(ctx, n, dh);
}
