/*
 * ops_elementwise.c - add, sub, mul with PyTorch broadcasting; scalar scale
 * and shift; the pointwise nonlinearities exp, log, tanh, relu, gelu.
 * The two-input ops share one forward (binary_forward) and the one-input
 * ops another (pointwise); each is followed by the ops' backwards.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- broadcasting ------------------------------------------------------ */

static void pad4(const ag_tensor *t, int *dims)
{
    int off = 4 - t->ndim;
    for (int i = 0; i < 4; i++)
        dims[i] = i < off ? 1 : t->shape[i - off];
}

static void strides4(const int *dims, const int *out, size_t *s)
{
    size_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        s[i] = dims[i] == 1 && out[i] != 1 ? 0 : stride;
        stride *= (size_t)dims[i];
    }
}

ag_bcast ag_broadcast(const char *op, const ag_tensor *a, const ag_tensor *b)
{
    ag_bcast bc;
    int da[4], db[4];
    pad4(a, da);
    pad4(b, db);
    for (int i = 0; i < 4; i++) {
        if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
            char sa[64], sb[64];
            ag_error("%s: shapes cannot broadcast: %s and %s", op, ag_shape_str(a, sa, sizeof sa),
                     ag_shape_str(b, sb, sizeof sb));
        }
        bc.n[i] = da[i] > db[i] ? da[i] : db[i];
    }
    strides4(da, bc.n, bc.sa);
    strides4(db, bc.n, bc.sb);
    bc.out_ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < bc.out_ndim; i++)
        bc.out_shape[i] = bc.n[4 - bc.out_ndim + i];
    return bc;
}

enum { BIN_ADD, BIN_SUB, BIN_MUL };

/* Whether neither operand is broadcast (no zero stride on a dim longer than
 * 1, equal strides): then a, b and the output share one layout, and one
 * flat loop serves. */
static int same_shape(const ag_bcast *bc)
{
    for (int i = 0; i < 4; i++)
        if (bc->sa[i] != bc->sb[i] || (bc->sa[i] == 0 && bc->n[i] > 1))
            return 0;
    return 1;
}

/* The arguments of the flat element-wise loops below, for ag_parallel_for. */
typedef struct {
    int kind;                       /* binary_flat: BIN_ADD, BIN_SUB or BIN_MUL (reduce_flat: unused) */
    const ag_real *a, *b;           /* binary_flat's operands; reduce_flat's gradient and other operand */
    ag_real *out;
    ag_real sign;                   /* reduce_flat: +1 or -1 */
    int store;                      /* reduce_flat: = instead of += */
} flat_args;

static void binary_flat(void *ctx, size_t lo, size_t hi)
{
    const flat_args *f = ctx;
    const ag_real *restrict a = f->a, *restrict b = f->b;
    ag_real *restrict out = f->out;
    if (f->kind == BIN_ADD)
        for (size_t i = lo; i < hi; i++) out[i] = a[i] + b[i];
    else if (f->kind == BIN_SUB)
        for (size_t i = lo; i < hi; i++) out[i] = a[i] - b[i];
    else
        for (size_t i = lo; i < hi; i++) out[i] = a[i] * b[i];
}

/* out[i] += a[i] * b[i], or out[i] += sign * a[i] without b; with `store`,
 * out[i] = sign * a[i] (the first gradient of an operand) */
static void reduce_flat(void *ctx, size_t lo, size_t hi)
{
    const flat_args *f = ctx;
    const ag_real *restrict g = f->a, *restrict other = f->b;
    ag_real *restrict dst = f->out;
    const ag_real sign = f->sign;
    if (f->store)
        for (size_t i = lo; i < hi; i++) dst[i] = sign * g[i];
    else if (other)
        for (size_t i = lo; i < hi; i++) dst[i] += g[i] * other[i];
    else
        for (size_t i = lo; i < hi; i++) dst[i] += sign * g[i];
}

/* out[i] = a[ia] (op) b[ib] over the broadcast index space. */
static void binary_forward(int kind, const ag_bcast *bc, const ag_real *a, const ag_real *b, ag_real *out)
{
    if (same_shape(bc)) {
        size_t n = (size_t)bc->n[0] * bc->n[1] * bc->n[2] * bc->n[3];
        flat_args f = { kind, a, b, out, 1, 0 };
        ag_parallel_for(n, n, binary_flat, &f);
        return;
    }
    size_t o = 0;
    for (int i0 = 0; i0 < bc->n[0]; i0++)
        for (int i1 = 0; i1 < bc->n[1]; i1++)
            for (int i2 = 0; i2 < bc->n[2]; i2++) {
                const ag_real *pa = a + i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
                const ag_real *pb = b + i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
                size_t s3a = bc->sa[3], s3b = bc->sb[3];
                ag_real *po = out + o;
                int n3 = bc->n[3];
                if (kind == BIN_ADD)
                    for (int j = 0; j < n3; j++) po[j] = pa[j * s3a] + pb[j * s3b];
                else if (kind == BIN_SUB)
                    for (int j = 0; j < n3; j++) po[j] = pa[j * s3a] - pb[j * s3b];
                else
                    for (int j = 0; j < n3; j++) po[j] = pa[j * s3a] * pb[j * s3b];
                o += (size_t)n3;
            }
}

/* dst[id] += sign * g[i] (g[i] * other[io] when other is given), where i
 * runs over the output and id, io are the elements of dst and other that
 * output element i read (strides sd and so): summing over the dims that dst
 * was broadcast along, since the adjoint of broadcasting is a sum.  add and
 * sub pass sign +1 or -1 and no other; mul passes the other operand and +1.
 * The flat case, every residual add's, keeps the two apart so its loop does
 * no more than it must. */
static void binary_reduce(const ag_bcast *bc, const size_t *sd, ag_real *dst, const ag_real *g,
                          const size_t *so, const ag_real *other, ag_real sign)
{
    if (same_shape(bc)) {
        /* no broadcasting: one flat loop, every element its own */
        size_t n = (size_t)bc->n[0] * bc->n[1] * bc->n[2] * bc->n[3];
        flat_args f = { BIN_ADD, g, other, dst, sign, 0 };
        ag_parallel_for(n, n, reduce_flat, &f);
        return;
    }
    size_t o = 0;
    for (int i0 = 0; i0 < bc->n[0]; i0++)
        for (int i1 = 0; i1 < bc->n[1]; i1++)
            for (int i2 = 0; i2 < bc->n[2]; i2++) {
                ag_real *pd = dst + i0 * sd[0] + i1 * sd[1] + i2 * sd[2];
                const ag_real *pg = g + o;
                const ag_real *po = other ? other + i0 * so[0] + i1 * so[1] + i2 * so[2] : NULL;
                for (int j = 0; j < bc->n[3]; j++)
                    pd[j * sd[3]] += sign * pg[j] * (po ? po[j * so[3]] : 1);
                o += (size_t)bc->n[3];
            }
}

static ag_tensor *binary(ag_ctx *ctx, int kind, int op, const char *name, ag_tensor *a, ag_tensor *b)
{
    ag_need(name, "ctx", ctx);
    ag_need_data(name, "a", a);
    ag_need_data(name, "b", b);
    ag_bcast bc = ag_broadcast(name, a, b);
    ag_tensor *out = ag_empty(ctx, bc.out_ndim, bc.out_shape);
    binary_forward(kind, &bc, a->data, b->data, out->data);
    if (ag_should_record(ctx, out, a, b, NULL)) {
        ag_bcast *saved = ag_alloc(ctx, sizeof *saved);
        *saved = bc;
        ag_record(ctx, op, out, a, b, NULL)->saved = saved;
    }
    return out;
}

ag_tensor *ag_add(ag_ctx *ctx, ag_tensor *a, ag_tensor *b) { return binary(ctx, BIN_ADD, AG_OP_ADD, "ag_add", a, b); }
ag_tensor *ag_sub(ag_ctx *ctx, ag_tensor *a, ag_tensor *b) { return binary(ctx, BIN_SUB, AG_OP_SUB, "ag_sub", a, b); }
ag_tensor *ag_mul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b) { return binary(ctx, BIN_MUL, AG_OP_MUL, "ag_mul", a, b); }

/* y = a + b  =>  da += dy,  db += dy;   y = a - b  =>  da += dy,  db -= dy;
 * each summed over the dims its operand was broadcast along. */
static void add_sub_backward(ag_ctx *ctx, ag_node *n, ag_real sign_b)
{
    const ag_bcast *bc = n->saved;
    const ag_real *g = n->out->grad;
    for (int k = 0; k < 2; k++) {
        ag_tensor *t = n->in[k];
        ag_real sign = k ? sign_b : 1;
        if (!t->requires_grad)
            continue;
        if (t->grad || t->size != n->out->size) {
            binary_reduce(bc, k ? bc->sb : bc->sa, ag_grad(ctx, t), g, NULL, NULL, sign);
            continue;
        }
        /* The first gradient of an operand as large as the output (so not
         * broadcast): store it rather than zero a buffer and add (t->grad
         * was NULL, so ag_grad_begin's assign is 1: the store below). */
        int assign;
        ag_real *d = ag_grad_begin(ctx, t, &assign);
        flat_args f = { BIN_ADD, g, NULL, d, sign, 1 };
        ag_parallel_for(t->size, t->size, reduce_flat, &f);
    }
}

void ag_backward_add(ag_ctx *ctx, ag_node *n) { add_sub_backward(ctx, n, 1); }
void ag_backward_sub(ag_ctx *ctx, ag_node *n) { add_sub_backward(ctx, n, -1); }

/* y = a * b  =>  da += dy * b,  db += dy * a  (each summed over the dims
 * its operand was broadcast along) */
void ag_backward_mul(ag_ctx *ctx, ag_node *n)
{
    const ag_bcast *bc = n->saved;
    ag_tensor *a = n->in[0], *b = n->in[1];
    if (a->requires_grad)
        binary_reduce(bc, bc->sa, ag_grad(ctx, a), n->out->grad, bc->sb, b->data, 1);
    if (b->requires_grad)
        binary_reduce(bc, bc->sb, ag_grad(ctx, b), n->out->grad, bc->sa, a->data, 1);
}

/* ---- scalars and pointwise nonlinearities ------------------------------ */

/* y = f(x) element by element: x * s, x + s, exp, log, tanh, relu, gelu
 * (s is read by scale and add_scalar alone). */
static ag_tensor *pointwise(ag_ctx *ctx, int op, const char *name, ag_tensor *a, ag_real s)
{
    ag_need(name, "ctx", ctx);
    ag_need_data(name, "a", a);
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    const ag_real *x = a->data;
    ag_real *y = out->data;
    size_t n = a->size;
    switch (op) {
    case AG_OP_SCALE:      for (size_t i = 0; i < n; i++) y[i] = x[i] * s; break;
    case AG_OP_ADD_SCALAR: for (size_t i = 0; i < n; i++) y[i] = x[i] + s; break;
    case AG_OP_EXP:        for (size_t i = 0; i < n; i++) y[i] = ag_math_exp(x[i]); break;
    case AG_OP_LOG:        for (size_t i = 0; i < n; i++) y[i] = ag_math_log(x[i]); break;
    case AG_OP_TANH:       for (size_t i = 0; i < n; i++) y[i] = ag_math_tanh(x[i]); break;
    case AG_OP_RELU:       for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; break;
    case AG_OP_GELU:       ag_kern->gelu(x, NULL, 1, n, y, NULL); break;   /* x Phi(x): ref_gelu in src/reference.c */
    }
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, op, out, a, NULL, NULL)->farg = s;
    return out;
}

ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *a, ag_real s) { return pointwise(ctx, AG_OP_SCALE, "ag_scale", a, s); }
ag_tensor *ag_add_scalar(ag_ctx *ctx, ag_tensor *a, ag_real s)
{
    return pointwise(ctx, AG_OP_ADD_SCALAR, "ag_add_scalar", a, s);
}
ag_tensor *ag_exp(ag_ctx *ctx, ag_tensor *a) { return pointwise(ctx, AG_OP_EXP, "ag_exp", a, 0); }
ag_tensor *ag_log(ag_ctx *ctx, ag_tensor *a) { return pointwise(ctx, AG_OP_LOG, "ag_log", a, 0); }
ag_tensor *ag_tanh(ag_ctx *ctx, ag_tensor *a) { return pointwise(ctx, AG_OP_TANH, "ag_tanh", a, 0); }
ag_tensor *ag_relu(ag_ctx *ctx, ag_tensor *a) { return pointwise(ctx, AG_OP_RELU, "ag_relu", a, 0); }
ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *a) { return pointwise(ctx, AG_OP_GELU, "ag_gelu", a, 0); }

/* y = s x  =>  dx += s dy */
void ag_backward_scale(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad;
    ag_real s = n->farg;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += s * dy[i];
}

/* y = x + s  =>  dx += dy */
void ag_backward_add_scalar(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i];
}

/* y = exp(x)  =>  dx += dy * y  (the output is exp(x): nothing computed again) */
void ag_backward_exp(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad, *y = n->out->data;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i] * y[i];
}

/* y = log(x)  =>  dx += dy / x */
void ag_backward_log(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad, *x = n->in[0]->data;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i] / x[i];
}

/* y = tanh(x)  =>  dx += dy * (1 - y^2) */
void ag_backward_tanh(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad, *y = n->out->data;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i] * (1 - y[i] * y[i]);
}

/* y = relu(x)  =>  dx += dy * [x > 0]  (the derivative at 0 is taken as 0, as PyTorch does) */
void ag_backward_relu(ag_ctx *ctx, ag_node *n)
{
    ag_real *dx = ag_grad(ctx, n->in[0]);
    const ag_real *dy = n->out->grad, *x = n->in[0]->data;
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += x[i] > 0 ? dy[i] : 0;
}

/* y = gelu(x) = x Phi(x)  =>  dx (+)= dy * (Phi(x) + x phi(x)), phi = Phi' the
 * standard normal density (ref_gelu_backward in src/reference.c); the first
 * gradient of x is stored, not added */
void ag_backward_gelu(ag_ctx *ctx, ag_node *n)
{
    int assign;
    ag_real *dx = ag_grad_begin(ctx, n->in[0], &assign);
    ag_kern->gelu_backward(n->in[0]->data, NULL, NULL, n->out->grad, 1, n->out->size, dx, assign, NULL);
}
