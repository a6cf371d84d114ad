/*
 * ops_shape.c - ops that move or sum elements without arithmetic on them:
 * reshape (a view), transpose, concat and slice along a dim, and the sum and
 * mean reductions.  Many of them view a tensor as [outer, n, inner] around
 * one dim, which turns any-dim logic into three plain loops.
 */
#include <limits.h>
#include <string.h>

#include "internal.h"

/* ---- reshape: a view ---------------------------------------------------- */

ag_tensor *ag_reshape(ag_ctx *ctx, ag_tensor *a, int ndim, const int *shape)
{
    ag_need("ag_reshape", "ctx", ctx);
    char sa[64];
    ag_need_data("ag_reshape", "a", a);
    ag_need("ag_reshape", "shape", shape);
    if (ndim < 1 || ndim > AG_MAX_DIMS)
        ag_error("ag_reshape: %d dimensions (1 to %d supported)", ndim, AG_MAX_DIMS);
    int s[AG_MAX_DIMS], infer = -1;
    size_t known = 1;
    ag_tensor want = { .ndim = ndim };
    memcpy(want.shape, shape, (size_t)ndim * sizeof(int));
    char sw[64];
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && infer < 0)
            infer = i;
        else if (s[i] < 1)
            ag_error("ag_reshape: bad size %d at dim %d for %s", s[i], i, ag_shape_str(a, sa, sizeof sa));
        else if (known > a->size / (size_t)s[i])   /* more than a has, before the product could wrap */
            ag_error("ag_reshape: cannot view %s (%zu elements) as %s (more elements)",
                     ag_shape_str(a, sa, sizeof sa), a->size, ag_shape_str(&want, sw, sizeof sw));
        else
            known *= (size_t)s[i];
    }
    if (infer >= 0) {
        if (known == 0 || a->size % known)
            ag_error("ag_reshape: cannot view %s (%zu elements) as %s", ag_shape_str(a, sa, sizeof sa), a->size,
                     ag_shape_str(&want, sw, sizeof sw));
        /* a dim is an int: an inferred size past INT_MAX is refused, not
         * cut to its low bits */
        if (a->size / known > INT_MAX)
            ag_error("ag_reshape: cannot view %s (%zu elements) as %s: dim %d would have %zu entries (at most %d)",
                     ag_shape_str(a, sa, sizeof sa), a->size, ag_shape_str(&want, sw, sizeof sw), infer,
                     a->size / known, INT_MAX);
        s[infer] = (int)(a->size / known);
        known *= (size_t)s[infer];
    }
    if (known != a->size)
        ag_error("ag_reshape: cannot view %s (%zu elements) as %s (%zu elements)", ag_shape_str(a, sa, sizeof sa),
                 a->size, ag_shape_str(&want, sw, sizeof sw), known);
    ag_tensor *out = ag_view_of(ctx, a, ndim, s);
    if (ag_should_record(ctx, out, a, NULL, NULL)) {
        /* The view shares the gradient buffer too, so backward has nothing to do.
         * The input is checked first: a buffer created here for a tensor of
         * another context's tape would stay its gradient after the refusal,
         * in this arena (and freed with it). */
        ag_same_tape(ctx, AG_OP_RESHAPE, a);
        out->grad = ag_grad(ctx, a);
        ag_record(ctx, AG_OP_RESHAPE, out, a, NULL, NULL);
    }
    return out;
}

/* y = x viewed in another shape  =>  dx += dy, which is already done: y's
 * gradient buffer is x's (set by ag_reshape), so every addition into dy
 * went into dx. */
void ag_backward_reshape(ag_ctx *ctx, ag_node *n) { (void)ctx; (void)n; }

/* ---- transpose: a copy -------------------------------------------------- */

/* t's shape padded on the left with 1s to 4 dims; returns how many were added. */
static int shape_of_4(const ag_tensor *t, int shape4[4])
{
    int off = 4 - t->ndim;
    for (int i = 0; i < 4; i++)
        shape4[i] = i < off ? 1 : t->shape[i - off];
    return off;
}

/* dst = src with dims d0 and d1 swapped (dst += that, with accumulate);
 * shape4 is src's shape padded to 4 dims. */
static void transpose_copy(const ag_real *src, ag_real *dst, const int *shape4, int d0, int d1, int accumulate)
{
    size_t in_stride[4], stride = 1;
    for (int i = 3; i >= 0; i--) {
        in_stride[i] = stride;
        stride *= (size_t)shape4[i];
    }
    int out_shape[4];
    size_t perm_stride[4];   /* stride in src for each dim of dst */
    for (int i = 0; i < 4; i++) {
        int from = i == d0 ? d1 : i == d1 ? d0 : i;
        out_shape[i] = shape4[from];
        perm_stride[i] = in_stride[from];
    }
    size_t o = 0;
    for (int i0 = 0; i0 < out_shape[0]; i0++)
        for (int i1 = 0; i1 < out_shape[1]; i1++)
            for (int i2 = 0; i2 < out_shape[2]; i2++) {
                const ag_real *s = src + i0 * perm_stride[0] + i1 * perm_stride[1] + i2 * perm_stride[2];
                size_t s3 = perm_stride[3];
                ag_real *d = dst + o;
                if (accumulate)
                    for (int j = 0; j < out_shape[3]; j++) d[j] += s[j * s3];
                else
                    for (int j = 0; j < out_shape[3]; j++) d[j] = s[j * s3];
                o += (size_t)out_shape[3];
            }
}

ag_tensor *ag_transpose(ag_ctx *ctx, ag_tensor *a, int dim0, int dim1)
{
    ag_need("ag_transpose", "ctx", ctx);
    ag_need_data("ag_transpose", "a", a);
    int d0 = ag_norm_dim("ag_transpose", a, dim0), d1 = ag_norm_dim("ag_transpose", a, dim1);
    int shape[AG_MAX_DIMS], shape4[4], off = shape_of_4(a, shape4);
    memcpy(shape, a->shape, sizeof shape);
    shape[d0] = a->shape[d1];
    shape[d1] = a->shape[d0];
    ag_tensor *out = ag_empty(ctx, a->ndim, shape);
    transpose_copy(a->data, out->data, shape4, d0 + off, d1 + off, 0);
    if (ag_should_record(ctx, out, a, NULL, NULL)) {
        ag_node *n = ag_record(ctx, AG_OP_TRANSPOSE, out, a, NULL, NULL);
        n->iarg[0] = d0 + off;
        n->iarg[1] = d1 + off;
    }
    return out;
}

/* y = x with dims d0, d1 swapped  =>  dx += dy with d0, d1 swapped again
 * (a swap undoes itself). */
void ag_backward_transpose(ag_ctx *ctx, ag_node *n)
{
    int shape4[4];
    shape_of_4(n->out, shape4);
    transpose_copy(n->out->grad, ag_grad(ctx, n->in[0]), shape4, n->iarg[0], n->iarg[1], 1);
}

/* ---- concat and slice --------------------------------------------------- */

ag_tensor *ag_concat(ag_ctx *ctx, ag_tensor **ts, int n, int dim)
{
    ag_need("ag_concat", "ctx", ctx);
    if (n < 1)
        ag_error("ag_concat: no tensors given");
    ag_need("ag_concat", "ts", ts);
    for (int i = 0; i < n; i++)
        if (!ts[i])
            ag_error("ag_concat: ts[%d] is NULL", i);
        else if (!ts[i]->data)
            ag_error("ag_concat: ts[%d] has no storage (a parameter used before ag_params_alloc)", i);
    int d = ag_norm_dim("ag_concat", ts[0], dim);
    int shape[AG_MAX_DIMS];
    memcpy(shape, ts[0]->shape, sizeof shape);
    long long joined = 0;           /* in a wider type: a sum past INT_MAX is refused, not wrapped */
    for (int i = 0; i < n; i++) {
        char s0[64], si[64];
        int same = ts[i]->ndim == ts[0]->ndim;
        for (int k = 0; same && k < ts[0]->ndim; k++)
            same = k == d || ts[i]->shape[k] == ts[0]->shape[k];
        if (!same)
            ag_error("ag_concat: shapes differ outside dim %d: %s and %s", d, ag_shape_str(ts[0], s0, sizeof s0),
                     ag_shape_str(ts[i], si, sizeof si));
        joined += ts[i]->shape[d];
    }
    if (joined > INT_MAX)
        ag_error("ag_concat: dim %d would have %lld entries (at most %d)", d, joined, INT_MAX);
    shape[d] = (int)joined;
    ag_tensor *out = ag_empty(ctx, ts[0]->ndim, shape);
    size_t outer = ag_span(out, 0, d), inner = ag_span(out, d + 1, out->ndim);
    size_t row = (size_t)shape[d] * inner, at = 0;
    int any = 0;
    for (int i = 0; i < n; i++) {
        size_t w = (size_t)ts[i]->shape[d] * inner;
        for (size_t o = 0; o < outer; o++)
            memcpy(out->data + o * row + at, ts[i]->data + o * w, w * sizeof(ag_real));
        at += w;
        any |= ts[i]->requires_grad;
    }
    out->requires_grad = ctx->grad_enabled && any;
    if (out->requires_grad) {
        for (int i = 0; i < n; i++)
            ag_same_tape(ctx, AG_OP_CONCAT, ts[i]);
        ag_node *node = ag_record(ctx, AG_OP_CONCAT, out, NULL, NULL, NULL);
        node->in_list = ag_alloc(ctx, (size_t)n * sizeof(ag_tensor *));
        memcpy(node->in_list, ts, (size_t)n * sizeof(ag_tensor *));
        node->n_in = n;
        node->iarg[0] = d;
    }
    return out;
}

/* y = [x_0 | x_1 | ...] along dim  =>  dx_i += the part of dy that x_i filled */
void ag_backward_concat(ag_ctx *ctx, ag_node *n)
{
    int d = n->iarg[0];
    size_t outer = ag_span(n->out, 0, d), inner = ag_span(n->out, d + 1, n->out->ndim);
    size_t row = (size_t)n->out->shape[d] * inner, at = 0;
    for (int i = 0; i < n->n_in; i++) {
        ag_tensor *t = n->in_list[i];
        size_t w = (size_t)t->shape[d] * inner;
        if (t->requires_grad) {
            ag_real *g = ag_grad(ctx, t);
            for (size_t o = 0; o < outer; o++) {
                const ag_real *src = n->out->grad + o * row + at;
                for (size_t k = 0; k < w; k++)
                    g[o * w + k] += src[k];
            }
        }
        at += w;
    }
}

ag_tensor *ag_slice(ag_ctx *ctx, ag_tensor *a, int dim, int start, int len)
{
    ag_need("ag_slice", "ctx", ctx);
    ag_need_data("ag_slice", "a", a);
    int d = ag_norm_dim("ag_slice", a, dim);
    if (start < 0 || len < 1 || start > a->shape[d] - len) {
        char s[64];
        ag_error("ag_slice: [%d, %lld) is outside dim %d of %s", start, (long long)start + len, d,
                 ag_shape_str(a, s, sizeof s));
    }
    int shape[AG_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[d] = len;
    ag_tensor *out = ag_empty(ctx, a->ndim, shape);
    size_t outer = ag_span(a, 0, d), inner = ag_span(a, d + 1, a->ndim);
    size_t row = (size_t)a->shape[d] * inner, w = (size_t)len * inner;
    for (size_t o = 0; o < outer; o++)
        memcpy(out->data + o * w, a->data + o * row + (size_t)start * inner, w * sizeof(ag_real));
    if (ag_should_record(ctx, out, a, NULL, NULL)) {
        ag_node *n = ag_record(ctx, AG_OP_SLICE, out, a, NULL, NULL);
        n->iarg[0] = d;
        n->iarg[1] = start;
    }
    return out;
}

/* y = x[start, start+len) along dim  =>  dx[start, start+len) += dy, the
 * rest of x gets nothing */
void ag_backward_slice(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *a = n->in[0];
    int d = n->iarg[0], start = n->iarg[1];
    size_t outer = ag_span(a, 0, d), inner = ag_span(a, d + 1, a->ndim);
    size_t row = (size_t)a->shape[d] * inner, w = (size_t)n->out->shape[d] * inner;
    ag_real *g = ag_grad(ctx, a);
    for (size_t o = 0; o < outer; o++) {
        ag_real *dst = g + o * row + (size_t)start * inner;
        const ag_real *src = n->out->grad + o * w;
        for (size_t k = 0; k < w; k++)
            dst[k] += src[k];
    }
}

/* ---- reductions --------------------------------------------------------- */

ag_tensor *ag_sum(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim)
{
    ag_need("ag_sum", "ctx", ctx);
    ag_need_data("ag_sum", "a", a);
    int d = ag_norm_dim("ag_sum", a, dim);
    int shape[AG_MAX_DIMS], ndim = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (i != d)
            shape[ndim++] = a->shape[i];
        else if (keepdim)
            shape[ndim++] = 1;
    }
    if (ndim == 0)
        shape[ndim++] = 1;           /* summing a 1-D tensor gives shape [1] */
    ag_tensor *out = ag_new(ctx, ndim, shape);
    size_t outer = ag_span(a, 0, d), n = (size_t)a->shape[d], inner = ag_span(a, d + 1, a->ndim);
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < n; k++) {
            const ag_real *src = a->data + (o * n + k) * inner;
            ag_real *dst = out->data + o * inner;
            for (size_t i = 0; i < inner; i++)
                dst[i] += src[i];
        }
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_SUM, out, a, NULL, NULL)->iarg[0] = d;
    return out;
}

/* y = sum_k x_k  =>  dx_k += dy (broadcast back along the summed dim) */
void ag_backward_sum(ag_ctx *ctx, ag_node *node)
{
    ag_tensor *a = node->in[0];
    int d = node->iarg[0];
    size_t outer = ag_span(a, 0, d), n = (size_t)a->shape[d], inner = ag_span(a, d + 1, a->ndim);
    ag_real *g = ag_grad(ctx, a);
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < n; k++) {
            ag_real *dst = g + (o * n + k) * inner;
            const ag_real *src = node->out->grad + o * inner;
            for (size_t i = 0; i < inner; i++)
                dst[i] += src[i];
        }
}

ag_tensor *ag_mean(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim)
{
    ag_need("ag_mean", "ctx", ctx);
    ag_need_data("ag_mean", "a", a);
    int d = ag_norm_dim("ag_mean", a, dim);
    return ag_scale(ctx, ag_sum(ctx, a, d, keepdim), (ag_real)(1.0 / a->shape[d]));
}

ag_tensor *ag_sum_all(ag_ctx *ctx, ag_tensor *a)
{
    ag_need("ag_sum_all", "ctx", ctx);
    ag_need_data("ag_sum_all", "a", a);
    ag_tensor *out = ag_empty(ctx, 1, (int[]){1});
    double s = 0;                   /* accumulate in double: sums of many floats */
    for (size_t i = 0; i < a->size; i++)
        s += a->data[i];
    out->data[0] = (ag_real)s;
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_SUM_ALL, out, a, NULL, NULL);
    return out;
}

/* y = sum_i x_i  =>  dx_i += dy */
void ag_backward_sum_all(ag_ctx *ctx, ag_node *n)
{
    ag_real *g = ag_grad(ctx, n->in[0]), dy = n->out->grad[0];
    for (size_t i = 0; i < n->in[0]->size; i++)
        g[i] += dy;
}

ag_tensor *ag_mean_all(ag_ctx *ctx, ag_tensor *a)
{
    ag_need("ag_mean_all", "ctx", ctx);
    ag_need_data("ag_mean_all", "a", a);
    return ag_scale(ctx, ag_sum_all(ctx, a), (ag_real)(1.0 / (double)a->size));
}
