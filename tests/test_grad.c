/*
 * test_grad.c - every op's backward checked against central finite
 * differences (tolerances in gradcheck.h), on shapes with batch dimensions
 * and broadcasting.
 */
#include "gradcheck.h"

/* ---- the forward functions under test --------------------------------- */

static ag_tensor *f_add(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_add(c, x[0], x[1]); }
static ag_tensor *f_sub(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_sub(c, x[0], x[1]); }
static ag_tensor *f_mul(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_mul(c, x[0], x[1]); }
static ag_tensor *f_square(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_mul(c, x[0], x[0]); }
static ag_tensor *f_scale(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_scale(c, x[0], (ag_real)-1.7); }
static ag_tensor *f_add_scalar(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_mul(c, ag_add_scalar(c, x[0], (ag_real)0.3), x[0]);
}
static ag_tensor *f_exp(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_exp(c, x[0]); }
static ag_tensor *f_log(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_log(c, x[0]); }
static ag_tensor *f_tanh(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_tanh(c, x[0]); }
static ag_tensor *f_relu(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_relu(c, x[0]); }
static ag_tensor *f_gelu(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_gelu(c, x[0]); }
static ag_tensor *f_matmul(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_matmul(c, x[0], x[1]); }
static ag_tensor *f_linear(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_linear(c, x[0], x[1], x[2]); }
static ag_tensor *f_linear_nobias(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_linear(c, x[0], x[1], NULL); }
static ag_tensor *f_linear_gelu(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_linear_gelu(c, x[0], x[1], x[2]); }
static ag_tensor *f_linear_gelu_nobias(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear_gelu(c, x[0], x[1], NULL);
}

static ag_tensor *f_transpose(ag_ctx *c, ag_tensor **x, const void *a)
{
    const int *d = a;
    return ag_transpose(c, x[0], d[0], d[1]);
}

static ag_tensor *f_reshape(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* a view feeding a product, and the base used again: both paths must add up */
    ag_tensor *v = ag_reshape(c, x[0], 2, (int[]){-1, 4});
    return ag_add(c, ag_mul(c, v, v), ag_reshape(c, ag_tanh(c, x[0]), 2, (int[]){6, 4}));
}

static ag_tensor *f_concat(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_tensor *parts[3] = { x[0], x[1], x[0] };
    return ag_concat(c, parts, 3, 1);
}

static ag_tensor *f_slice(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_mul(c, ag_slice(c, x[0], 1, 1, 2), ag_slice(c, x[0], 1, 0, 2));
}

static ag_tensor *f_sum(ag_ctx *c, ag_tensor **x, const void *a)
{
    const int *d = a;
    return ag_sum(c, ag_mul(c, x[0], x[0]), d[0], d[1]);
}

static ag_tensor *f_mean(ag_ctx *c, ag_tensor **x, const void *a)
{
    const int *d = a;
    return ag_mean(c, ag_mul(c, x[0], x[0]), d[0], d[1]);
}

static ag_tensor *f_sum_all(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_sum_all(c, ag_exp(c, x[0])); }
static ag_tensor *f_mean_all(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_mean_all(c, ag_exp(c, x[0])); }

static ag_tensor *f_softmax(ag_ctx *c, ag_tensor **x, const void *a) { return ag_softmax(c, x[0], *(const int *)a); }
static ag_tensor *f_log_softmax(ag_ctx *c, ag_tensor **x, const void *a) { return ag_log_softmax(c, x[0], *(const int *)a); }

/* Causal masking as attention does it: scores [B,H,T,T], -inf above the diagonal. */
static ag_tensor *f_masked_softmax(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_tensor *s = ag_masked_fill(c, x[0], check_future_mask(c, x[0]->shape[x[0]->ndim - 1]), -INFINITY);
    return ag_softmax(c, s, -1);
}

static ag_tensor *f_masked_fill_value(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* a mask of shape [3,1] broadcast over the columns */
    ag_tensor *m = ag_from(c, 2, (int[]){3, 1}, (ag_real[]){0, 1, 0});
    return ag_mul(c, ag_masked_fill(c, x[0], m, (ag_real)2.5), x[0]);
}

static ag_tensor *f_masked_log_softmax(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* row 1 is masked entirely: its output is -inf, its gradient must be 0 */
    ag_tensor *m = ag_from(c, 2, (int[]){3, 1}, (ag_real[]){0, 1, 0});
    ag_tensor *y = ag_log_softmax(c, ag_masked_fill(c, x[0], m, -INFINITY), -1);
    return ag_masked_fill(c, y, m, 0);
}

static ag_tensor *f_dropout(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_pcg32_seed(ag_dropout_rng(c), 7, 3);   /* the same mask on every evaluation */
    return ag_dropout(c, ag_tanh(c, x[0]), (ag_real)0.4, 1);
}

static ag_tensor *f_embedding(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t ids[6] = { 3, 1, 3, 0, 3, 1 };   /* repeated rows collect every use */
    return ag_tanh(c, ag_embedding(c, x[0], ids, 2, (int[]){2, 3}));
}

static ag_tensor *f_layer_norm(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, x[0], x[1], x[2], (ag_real)1e-5);
}

static ag_tensor *f_cross_entropy(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t targets[8] = { 2, 0, -1, 4, 1, -1, 3, 3 };   /* -1: not counted */
    return ag_cross_entropy(c, x[0], targets);
}

/* A fixed tensor made inside the forward (no gradient wanted): the ops'
 * backward must skip it and still give the other operands theirs. */
static ag_tensor *constant(ag_ctx *c, int ndim, const int *shape)
{
    ag_tensor *t = ag_new(c, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (ag_real)(0.5 + 0.75 * sin(1.3 * (double)i + 0.2));
    return t;
}

static ag_tensor *f_sub_const(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_sub(c, constant(c, x[0]->ndim, x[0]->shape), x[0]);
}

static ag_tensor *f_matmul_const_b(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_matmul(c, x[0], constant(c, 2, (int[]){x[0]->shape[x[0]->ndim - 1], 3}));
}

static ag_tensor *f_matmul_const_a(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_matmul(c, constant(c, 3, (int[]){2, 3, x[0]->shape[x[0]->ndim - 2]}), x[0]);
}

static ag_tensor *f_linear_const_bias(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear(c, x[0], x[1], constant(c, 1, (int[]){x[1]->shape[0]}));
}

static ag_tensor *f_linear_gelu_const_bias(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear_gelu(c, x[0], x[1], constant(c, 1, (int[]){x[1]->shape[0]}));
}

static ag_tensor *f_layer_norm_const_x(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, constant(c, 2, (int[]){4, x[0]->shape[0]}), x[0], x[1], (ag_real)1e-5);
}

static ag_tensor *f_layer_norm_const_w(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, x[0], constant(c, 1, (int[]){x[0]->shape[x[0]->ndim - 1]}), x[1], (ag_real)1e-5);
}

static ag_tensor *f_concat_const(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_tensor *parts[3] = { constant(c, 2, (int[]){x[0]->shape[0], 2}), x[0], constant(c, 2, (int[]){x[0]->shape[0], 1}) };
    return ag_tanh(c, ag_concat(c, parts, 3, 1));
}

/* A whole causal attention head: q, k, v projections, scaled scores, mask,
 * softmax, weighted sum, for inputs [B,T,d]. */
static ag_tensor *f_attention_head(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_tensor *in = x[0];
    ag_tensor *q = ag_linear(c, in, x[1], NULL), *k = ag_linear(c, in, x[2], NULL), *v = ag_linear(c, in, x[3], NULL);
    int T = in->shape[1], hd = x[1]->shape[0];
    ag_tensor *s = ag_scale(c, ag_matmul(c, q, ag_transpose(c, k, 1, 2)), (ag_real)(1.0 / sqrt(hd)));
    ag_tensor *w = ag_softmax(c, ag_masked_fill(c, s, check_future_mask(c, T), -INFINITY), -1);
    return ag_matmul(c, w, v);
}

/* The fused attention op on a packed [B,T,3d] input: heads, causal flag and
 * dropout from the argument (the mask is redrawn identically each time). */
typedef struct { int heads, causal; double dropout; } attn_arg;

static ag_tensor *f_attention(ag_ctx *c, ag_tensor **x, const void *a)
{
    const attn_arg *at = a;
    ag_pcg32_seed(ag_dropout_rng(c), 9, 4);
    return ag_attention(c, x[0], at->heads, at->causal, (ag_real)at->dropout, 1, NULL);
}


/* ---- the audit's cases: size-1 and odd dims, broadcasting on both sides,
 * an input used twice (by one op, or by two ops in either order, so an op
 * that stores a fresh gradient and one that adds to it both run), constants
 * beside inputs, and edge values ------------------------------------------- */

static ag_tensor *f_add_self(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_add(c, x[0], x[0]); }
static ag_tensor *f_sub_self_sq(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* x - x is 0 whatever x is: its gradient must cancel to 0 */
    return ag_add(c, ag_sub(c, x[0], x[0]), ag_mul(c, x[0], x[0]));
}
static ag_tensor *f_matmul_self(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_matmul(c, x[0], x[0]); }
static ag_tensor *f_linear_self(ag_ctx *c, ag_tensor **x, const void *a) { (void)a; return ag_linear(c, x[0], x[0], x[1]); }
static ag_tensor *f_linear_gelu_self(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear_gelu(c, x[0], x[0], x[1]);
}
static ag_tensor *f_layer_norm_wb_same(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, x[0], x[1], x[1], (ag_real)1e-5);
}
static ag_tensor *f_softmax_times_x(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_mul(c, ag_softmax(c, x[0], -1), x[0]);
}

/* Tied weights, as a language model's embedding and output layer: W read
 * by ag_embedding and by ag_linear. */
static ag_tensor *f_tied_embedding(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t ids[5] = { 2, 0, 2, 4, 1 };
    return ag_linear(c, ag_embedding(c, x[0], ids, 2, (int[]){1, 5}), x[0], NULL);
}

/* An op F on x and tanh(x) of the same x, added: `order` 0 records F first
 * (backward runs tanh's entry first, so F adds to a gradient x already
 * has), 1 records F last (F's entry stores x's first gradient). */
typedef struct { int op, order; } twice_arg;
enum { TW_LINEAR, TW_LINEAR_GELU, TW_LAYER_NORM, TW_CROSS_ENTROPY, TW_GELU, TW_ATTENTION, TW_SOFTMAX, TW_ADD,
       TW_MASKED_FILL, TW_DROPOUT, TW_COUNT };
static const char *const twice_name[TW_COUNT] = { "linear", "linear_gelu", "layer_norm", "cross_entropy", "gelu",
                                                  "attention", "log_softmax", "add", "masked_fill", "dropout" };

static ag_tensor *twice_op(ag_ctx *c, ag_tensor *in, ag_tensor *W, int op)
{
    static const int32_t targets[4] = { 1, -1, 0, 2 };
    switch (op) {
    case TW_LINEAR: return ag_linear(c, in, W, NULL);
    case TW_LINEAR_GELU: return ag_linear_gelu(c, in, W, NULL);
    case TW_LAYER_NORM: return ag_layer_norm(c, in, NULL, NULL, (ag_real)1e-5);
    case TW_CROSS_ENTROPY: return ag_cross_entropy(c, in, targets);
    case TW_GELU: return ag_gelu(c, in);
    case TW_ATTENTION: {
        ag_tensor *o = ag_attention(c, ag_reshape(c, in, 3, (int[]){1, in->shape[0], in->shape[1]}), 1, 1, 0, 1, NULL);
        return ag_reshape(c, o, 2, (int[]){in->shape[0], -1});
    }
    case TW_SOFTMAX: return ag_log_softmax(c, in, -1);
    case TW_ADD: return ag_add(c, in, constant(c, in->ndim, in->shape));
    case TW_MASKED_FILL: return ag_masked_fill(c, in, ag_from(c, 2, (int[]){1, 3}, (ag_real[]){0, 1, 0}), 0.5);
    default:
        ag_pcg32_seed(ag_dropout_rng(c), 5, 1);
        return ag_dropout(c, in, (ag_real)0.3, 1);
    }
}

/* x [4,3] (W [5,3] for the linear layers) scaled into an intermediate h, so
 * h has no gradient until backward gives it one, then F(h) and tanh(h). */
static ag_tensor *f_twice(ag_ctx *c, ag_tensor **x, const void *a)
{
    const twice_arg *t = a;
    ag_tensor *h = ag_scale(c, x[0], (ag_real)1.25), *f = NULL, *g;
    if (t->order == 0)
        f = twice_op(c, h, x[1], t->op);
    g = ag_tanh(c, h);
    if (t->order == 1)
        f = twice_op(c, h, x[1], t->op);
    if (f->size == 1)
        return ag_add(c, g, f);                          /* a loss: broadcast */
    if (f->shape[f->ndim - 1] != g->shape[g->ndim - 1])
        return ag_add(c, ag_sum(c, g, -1, 1), f);        /* [4,1] + [4,n] */
    return ag_add(c, g, f);
}

/* Constants (no gradient wanted) beside inputs, broadcast either way. */
static ag_tensor *f_mul_const_bcast(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* x [2,3,4] times a constant [3,1], and a constant [2,3,4] times y [4] */
    ag_tensor *p = ag_mul(c, x[0], constant(c, 2, (int[]){3, 1}));
    return ag_add(c, p, ag_mul(c, constant(c, 3, (int[]){2, 3, 4}), x[1]));
}

static ag_tensor *f_linear_const_W(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear(c, x[0], constant(c, 2, (int[]){5, x[0]->shape[x[0]->ndim - 1]}), x[1]);
}

static ag_tensor *f_linear_const_x(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear(c, constant(c, 2, (int[]){3, x[0]->shape[1]}), x[0], x[1]);
}

static ag_tensor *f_linear_gelu_const_W(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear_gelu(c, x[0], constant(c, 2, (int[]){5, x[0]->shape[x[0]->ndim - 1]}), x[1]);
}

static ag_tensor *f_linear_gelu_const_x(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_linear_gelu(c, constant(c, 2, (int[]){3, x[0]->shape[1]}), x[0], x[1]);
}

static ag_tensor *f_layer_norm_const_b(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, x[0], x[1], constant(c, 1, (int[]){x[1]->shape[0]}), (ag_real)1e-5);
}

static ag_tensor *f_layer_norm_plain(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_layer_norm(c, x[0], NULL, NULL, (ag_real)1e-5);
}

static ag_tensor *f_gelu_shift(ag_ctx *c, ag_tensor **x, const void *a)
{
    /* gelu far from 0: x + shift */
    return ag_gelu(c, ag_add_scalar(c, x[0], (ag_real)*(const double *)a));
}

static ag_tensor *f_softmax_shift(ag_ctx *c, ag_tensor **x, const void *a)
{
    /* large logits: softmax(x + 1e4) is softmax(x) */
    return ag_softmax(c, ag_add_scalar(c, x[0], (ag_real)*(const double *)a), -1);
}

static ag_tensor *f_log_softmax_shift(ag_ctx *c, ag_tensor **x, const void *a)
{
    return ag_log_softmax(c, ag_add_scalar(c, x[0], (ag_real)*(const double *)a), -1);
}

/* Rows with every entry but one masked (-inf): softmax is one-hot there,
 * log_softmax 0 at the kept entry, and no gradient reaches any entry of
 * such a row (the kept one included: its output does not depend on it). */
static ag_tensor *masked_all_but_one(ag_ctx *c, ag_tensor *x)
{
    int n = x->shape[x->ndim - 1], rows = (int)(x->size / (size_t)n);
    ag_tensor *m = ag_new(c, 2, (int[]){rows, n});
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < n; k++)
            m->data[r * n + k] = r % 2 == 0 && k != (r * 7) % n;   /* even rows: all but one masked */
    return ag_masked_fill(c, x, ag_reshape(c, m, x->ndim, x->shape), -INFINITY);
}

static ag_tensor *f_softmax_one_left(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    return ag_softmax(c, masked_all_but_one(c, x[0]), -1);
}

static ag_tensor *f_log_softmax_one_left(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* the masked entries' -inf are filled back with 0 before the loss */
    ag_tensor *y = ag_log_softmax(c, masked_all_but_one(c, x[0]), -1);
    int n = x[0]->shape[x[0]->ndim - 1], rows = (int)(x[0]->size / (size_t)n);
    ag_tensor *m = ag_new(c, 2, (int[]){rows, n});
    for (size_t i = 0; i < m->size; i++)
        m->data[i] = y->data[i] == -INFINITY;
    return ag_masked_fill(c, y, m, 0);
}

static ag_tensor *f_cross_entropy_scaled(ag_ctx *c, ag_tensor **x, const void *a)
{
    /* logits scaled up: nearly one-hot softmax, losses near 0 and large */
    static const int32_t targets[6] = { 0, 3, -1, 2, 4, 1 };
    return ag_cross_entropy(c, ag_scale(c, x[0], (ag_real)*(const double *)a), targets);
}

static ag_tensor *f_cross_entropy_odd(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t targets[4] = { 0, 16, -1, 32 };
    int V = x[0]->shape[x[0]->ndim - 1];
    int32_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = targets[i] < 0 ? -1 : targets[i] % V;
    return ag_cross_entropy(c, x[0], t);
}

static ag_tensor *f_dropout_p(ag_ctx *c, ag_tensor **x, const void *a)
{
    ag_pcg32_seed(ag_dropout_rng(c), 11, 2);
    return ag_dropout(c, ag_tanh(c, x[0]), (ag_real)*(const double *)a, 1);
}

static ag_tensor *f_embedding_odd(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t ids[4] = { 0, 2, 2, 1 };
    return ag_gelu(c, ag_embedding(c, x[0], ids, 1, (int[]){4}));
}


static ag_tensor *f_concat_dim(ag_ctx *c, ag_tensor **x, const void *a)
{
    ag_tensor *parts[3] = { x[0], x[1], x[0] };
    return ag_tanh(c, ag_concat(c, parts, 3, *(const int *)a));
}

static ag_tensor *f_slice_last(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    /* width-1 slices of the last dim, one of them twice */
    int n = x[0]->shape[x[0]->ndim - 1];
    ag_tensor *first = ag_slice(c, x[0], -1, 0, 1), *last = ag_slice(c, x[0], -1, n - 1, 1);
    return ag_mul(c, ag_add(c, first, last), first);
}

/* A block of a transformer from every kind of op: layer norm, the qkv
 * projection, fused attention with dropout, the MLP's fused first layer,
 * the output layer and cross-entropy; inputs x [2,5,12], ln weight and
 * bias [12], Wqkv [36,12], bqkv [36], W1 [7,12], b1 [7], W2 [5,7]. */
static ag_tensor *f_block(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    static const int32_t targets[10] = { 0, 4, 2, -1, 3, 1, 1, 0, 4, 2 };
    ag_pcg32_seed(ag_dropout_rng(c), 3, 8);
    ag_tensor *h = ag_layer_norm(c, x[0], x[1], x[2], (ag_real)1e-5);
    ag_tensor *att = ag_attention(c, ag_linear(c, h, x[3], x[4]), 2, 1, (ag_real)0.2, 1, NULL);
    ag_tensor *r = ag_add(c, x[0], att);
    ag_tensor *m = ag_linear(c, ag_linear_gelu(c, r, x[5], x[6]), x[7], NULL);
    return ag_cross_entropy(c, m, targets);
}

/* Backward twice, the gradients not zeroed between: after an ag_reset
 * and the forward again (the second step's arena is the first step's
 * memory: what the ops store in a fresh gradient buffer lands where the
 * first step's values are), or (same_tape) from the same loss on the same
 * tape (what the first pass left on the intermediates, and in whatever
 * the ops saved for backward, must not count twice).  Either must add
 * the same gradient again.  The sums may round in another order when a
 * kernel adds into a gradient instead of storing it, hence a tolerance,
 * far below the finite differences'. */
static void second_step(const char *name, forward_fn f, int n, const int shapes[][5], const void *arg, int same_tape)
{
    ag_params *ps = inputs(n, shapes, -1, 1, 0);
    ag_ctx *ctx = ag_ctx_new();
    ag_real *first = malloc(ps->total * sizeof *first);
    ag_tensor *loss = NULL;
    ag_params_zero_grad(ps);
    for (int step = 0; step < 2; step++) {
        if (step == 0 || !same_tape) {
            ag_reset(ctx);
            ag_tensor *out = f(ctx, ps->list, arg);
            ag_tensor *R = ag_new(ctx, out->ndim, out->shape);
            for (size_t i = 0; i < R->size; i++)
                R->data[i] = (ag_real)(0.25 + 0.5 * cos(0.7 * (double)i));
            loss = ag_sum_all(ctx, ag_mul(ctx, out, R));
        }
        ag_backward(ctx, loss);
        if (step == 0)
            memcpy(first, ps->grad, ps->total * sizeof *first);
    }
    double worst = 0;
    for (size_t i = 0; i < ps->total; i++) {
        double d = fabs((double)ps->grad[i] - 2.0 * first[i]) / (1 + fabs(2.0 * first[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
#ifdef AG_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-5;
#endif
    CHECK(worst <= tol, "%s: a second backward %s added other gradients (worst %.3g)", name,
          same_tape ? "on the same tape" : "after ag_reset", worst);
    free(first);
    ag_ctx_free(ctx);
    ag_params_free(ps);
}

int main(void)
{
    ag_pcg32_seed(&rng, 1234, 1);
    printf("gradient checks in %s precision\n", AG_PRECISION_NAME);

    run("add", f_add, 2, (const int[][5]){{3, 2, 3, 4}, {3, 2, 3, 4}}, NULL, -1, 1, 0);
    run("add broadcast [2,3,4]+[3,1]", f_add, 2, (const int[][5]){{3, 2, 3, 4}, {2, 3, 1}}, NULL, -1, 1, 0);
    run("add broadcast [4]+[2,3,4]", f_add, 2, (const int[][5]){{1, 4}, {3, 2, 3, 4}}, NULL, -1, 1, 0);
    run("sub broadcast [2,1,4]-[3,4]", f_sub, 2, (const int[][5]){{3, 2, 1, 4}, {2, 3, 4}}, NULL, -1, 1, 0);
    run("sub, same shapes", f_sub, 2, (const int[][5]){{3, 2, 3, 4}, {3, 2, 3, 4}}, NULL, -1, 1, 0);
    run("mul broadcast [2,3,1,5]*[4,1]", f_mul, 2, (const int[][5]){{4, 2, 3, 1, 5}, {2, 4, 1}}, NULL, -1, 1, 0);
    run("mul, tensor used twice", f_square, 1, (const int[][5]){{2, 3, 5}}, NULL, -1, 1, 0);
    run("scale", f_scale, 1, (const int[][5]){{2, 4, 3}}, NULL, -1, 1, 0);
    run("add_scalar", f_add_scalar, 1, (const int[][5]){{2, 4, 3}}, NULL, -1, 1, 0);
    run("exp", f_exp, 1, (const int[][5]){{2, 3, 4}}, NULL, -2, 2, 0);
    run("log", f_log, 1, (const int[][5]){{2, 3, 4}}, NULL, 0.2, 3, 0);
    run("tanh", f_tanh, 1, (const int[][5]){{2, 3, 4}}, NULL, -2, 2, 0);
    run("relu (away from 0)", f_relu, 1, (const int[][5]){{2, 3, 4}}, NULL, -2, 2, 0.05);
    run("gelu", f_gelu, 1, (const int[][5]){{2, 3, 4}}, NULL, -3, 3, 0);

    run("matmul 2-D", f_matmul, 2, (const int[][5]){{2, 3, 4}, {2, 4, 5}}, NULL, -1, 1, 0);
    run("matmul batched", f_matmul, 2, (const int[][5]){{3, 2, 3, 4}, {3, 2, 4, 5}}, NULL, -1, 1, 0);
    run("matmul [2,3,4,5]@[5,3]", f_matmul, 2, (const int[][5]){{4, 2, 3, 4, 5}, {2, 5, 3}}, NULL, -1, 1, 0);
    run("matmul [3,4]@[2,4,5]", f_matmul, 2, (const int[][5]){{2, 3, 4}, {3, 2, 4, 5}}, NULL, -1, 1, 0);
    run("matmul [2,1,3,4]@[1,3,4,2]", f_matmul, 2, (const int[][5]){{4, 2, 1, 3, 4}, {4, 1, 3, 4, 2}}, NULL, -1, 1, 0);
    run("matmul [2,3,3,4]@[3,4,2]", f_matmul, 2, (const int[][5]){{4, 2, 3, 3, 4}, {3, 3, 4, 2}}, NULL, -1, 1, 0);
    run("linear", f_linear, 3, (const int[][5]){{3, 2, 3, 4}, {2, 5, 4}, {1, 5}}, NULL, -1, 1, 0);
    run("linear without bias", f_linear_nobias, 2, (const int[][5]){{2, 3, 4}, {2, 2, 4}}, NULL, -1, 1, 0);
    run("linear_gelu", f_linear_gelu, 3, (const int[][5]){{3, 2, 3, 4}, {2, 5, 4}, {1, 5}}, NULL, -1, 1, 0);
    run("linear_gelu [37,19]", f_linear_gelu, 3, (const int[][5]){{2, 37, 3}, {2, 19, 3}, {1, 19}}, NULL, -1, 1, 0);
    run("linear_gelu without bias", f_linear_gelu_nobias, 2, (const int[][5]){{2, 3, 4}, {2, 2, 4}}, NULL, -1, 1, 0);

    run("transpose(1,2) 4-D", f_transpose, 1, (const int[][5]){{4, 2, 3, 4, 2}}, (const int[]){1, 2}, -1, 1, 0);
    run("transpose(0,-1) 3-D", f_transpose, 1, (const int[][5]){{3, 2, 3, 4}}, (const int[]){0, -1}, -1, 1, 0);
    run("reshape view", f_reshape, 1, (const int[][5]){{3, 2, 3, 4}}, NULL, -1, 1, 0);
    run("concat dim 1", f_concat, 2, (const int[][5]){{3, 2, 2, 3}, {3, 2, 1, 3}}, NULL, -1, 1, 0);
    run("slice dim 1", f_slice, 1, (const int[][5]){{3, 2, 3, 2}}, NULL, -1, 1, 0);
    run("sum dim 1 keepdim", f_sum, 1, (const int[][5]){{3, 2, 3, 4}}, (const int[]){1, 1}, -1, 1, 0);
    run("sum dim -1", f_sum, 1, (const int[][5]){{3, 2, 3, 4}}, (const int[]){-1, 0}, -1, 1, 0);
    run("mean dim 0", f_mean, 1, (const int[][5]){{3, 2, 3, 4}}, (const int[]){0, 0}, -1, 1, 0);
    run("sum_all", f_sum_all, 1, (const int[][5]){{2, 3, 4}}, NULL, -1, 1, 0);
    run("mean_all", f_mean_all, 1, (const int[][5]){{2, 3, 4}}, NULL, -1, 1, 0);

    run("softmax dim -1", f_softmax, 1, (const int[][5]){{3, 2, 3, 5}}, (const int[]){-1}, -2, 2, 0);
    run("softmax dim 1", f_softmax, 1, (const int[][5]){{3, 2, 4, 3}}, (const int[]){1}, -2, 2, 0);
    run("log_softmax dim -1", f_log_softmax, 1, (const int[][5]){{2, 4, 5}}, (const int[]){-1}, -2, 2, 0);
    run("log_softmax dim 0", f_log_softmax, 1, (const int[][5]){{2, 4, 5}}, (const int[]){0}, -2, 2, 0);
    run("masked_fill -inf + softmax", f_masked_softmax, 1, (const int[][5]){{4, 2, 2, 4, 4}}, NULL, -2, 2, 0);
    run("masked_fill value, broadcast mask", f_masked_fill_value, 1, (const int[][5]){{2, 3, 4}}, NULL, -2, 2, 0);
    run("log_softmax, fully masked row", f_masked_log_softmax, 1, (const int[][5]){{2, 3, 4}}, NULL, -2, 2, 0);
    run("dropout p=0.4", f_dropout, 1, (const int[][5]){{2, 6, 5}}, NULL, -2, 2, 0);
    run("embedding, repeated ids", f_embedding, 1, (const int[][5]){{2, 4, 3}}, NULL, -1, 1, 0);
    run("layer_norm", f_layer_norm, 3, (const int[][5]){{3, 2, 3, 5}, {1, 5}, {1, 5}}, NULL, -2, 2, 0);
    run("cross_entropy, ignored rows", f_cross_entropy, 1, (const int[][5]){{3, 2, 4, 5}}, NULL, -3, 3, 0);
    /* one operand a constant: backward skips it */
    run("sub, constant - x", f_sub_const, 1, (const int[][5]){{2, 3, 4}}, NULL, -1, 1, 0);
    run("matmul, constant b", f_matmul_const_b, 1, (const int[][5]){{3, 2, 3, 4}}, NULL, -1, 1, 0);
    run("matmul, constant batched a", f_matmul_const_a, 1, (const int[][5]){{3, 2, 4, 5}}, NULL, -1, 1, 0);
    run("linear, constant bias", f_linear_const_bias, 2, (const int[][5]){{2, 3, 4}, {2, 5, 4}}, NULL, -1, 1, 0);
    run("linear_gelu, constant bias", f_linear_gelu_const_bias, 2, (const int[][5]){{2, 3, 4}, {2, 5, 4}}, NULL,
        -1, 1, 0);
    run("layer_norm, constant x", f_layer_norm_const_x, 2, (const int[][5]){{1, 5}, {1, 5}}, NULL, -2, 2, 0);
    run("layer_norm, constant weight", f_layer_norm_const_w, 2, (const int[][5]){{2, 3, 5}, {1, 5}}, NULL, -2, 2, 0);
    run("concat with constant parts", f_concat_const, 1, (const int[][5]){{2, 3, 2}}, NULL, -1, 1, 0);
    run("causal attention head", f_attention_head, 4,
        (const int[][5]){{3, 2, 4, 5}, {2, 3, 5}, {2, 3, 5}, {2, 3, 5}}, NULL, -1, 1, 0);
    run("attention op, causal, 2 heads", f_attention, 1, (const int[][5]){{3, 2, 5, 12}},
        &(attn_arg){ 2, 1, 0 }, -1, 1, 0);
    run("attention op, non-causal, 3 heads", f_attention, 1, (const int[][5]){{3, 2, 4, 9}},
        &(attn_arg){ 3, 0, 0 }, -1, 1, 0);
    run("attention op, causal, 1 head, dropout 0.3", f_attention, 1, (const int[][5]){{3, 3, 6, 6}},
        &(attn_arg){ 1, 1, 0.3 }, -1, 1, 0);

    /* ---- size-1 and odd dims, broadcasting on both sides ---- */
    run("add broadcast [3,1,4]+[5,1]", f_add, 2, (const int[][5]){{3, 3, 1, 4}, {2, 5, 1}}, NULL, -1, 1, 0);
    run("mul broadcast [1]*[2,3]", f_mul, 2, (const int[][5]){{1, 1}, {2, 2, 3}}, NULL, -1, 1, 0);
    run("sub broadcast [2,1,3,1]-[4,1,5]", f_sub, 2, (const int[][5]){{4, 2, 1, 3, 1}, {3, 4, 1, 5}}, NULL, -1, 1, 0);
    run("mul [1,3,1]*[1,3,1]", f_mul, 2, (const int[][5]){{3, 1, 3, 1}, {3, 1, 3, 1}}, NULL, -1, 1, 0);
    run("add [1,17]+[17]", f_add, 2, (const int[][5]){{2, 1, 17}, {1, 17}}, NULL, -1, 1, 0);
    run("mul [33]*[3,33]", f_mul, 2, (const int[][5]){{1, 33}, {2, 3, 33}}, NULL, -1, 1, 0);
    run("softmax [4,1]", f_softmax, 1, (const int[][5]){{2, 4, 1}}, (const int[]){-1}, -2, 2, 0);
    run("softmax [2,17]", f_softmax, 1, (const int[][5]){{2, 2, 17}}, (const int[]){-1}, -2, 2, 0);
    run("softmax [3,33]", f_softmax, 1, (const int[][5]){{2, 3, 33}}, (const int[]){-1}, -2, 2, 0);
    run("softmax dim 0 [17,3]", f_softmax, 1, (const int[][5]){{2, 17, 3}}, (const int[]){0}, -2, 2, 0);
    run("log_softmax [3,1]", f_log_softmax, 1, (const int[][5]){{2, 3, 1}}, (const int[]){-1}, -2, 2, 0);
    run("log_softmax [2,33]", f_log_softmax, 1, (const int[][5]){{2, 2, 33}}, (const int[]){-1}, -2, 2, 0);
    run("log_softmax [1,3,17]", f_log_softmax, 1, (const int[][5]){{3, 1, 3, 17}}, (const int[]){-1}, -2, 2, 0);
    run("layer_norm [2,1]", f_layer_norm, 3, (const int[][5]){{2, 2, 1}, {1, 1}, {1, 1}}, NULL, -2, 2, 0);
    run("layer_norm [4,3]", f_layer_norm, 3, (const int[][5]){{2, 4, 3}, {1, 3}, {1, 3}}, NULL, -2, 2, 0);
    run("layer_norm [3,17]", f_layer_norm, 3, (const int[][5]){{2, 3, 17}, {1, 17}, {1, 17}}, NULL, -2, 2, 0);
    run("layer_norm [2,33]", f_layer_norm, 3, (const int[][5]){{2, 2, 33}, {1, 33}, {1, 33}}, NULL, -2, 2, 0);
    run("layer_norm [2,33], no weight, no bias", f_layer_norm_plain, 1, (const int[][5]){{2, 2, 33}}, NULL, -2, 2, 0);
    run("gelu [1,1]", f_gelu, 1, (const int[][5]){{2, 1, 1}}, NULL, -3, 3, 0);
    run("gelu [3,17]", f_gelu, 1, (const int[][5]){{2, 3, 17}}, NULL, -3, 3, 0);
    run("gelu [1,33]", f_gelu, 1, (const int[][5]){{2, 1, 33}}, NULL, -3, 3, 0);
    run("linear [1,1]x[1,1]", f_linear, 3, (const int[][5]){{2, 1, 1}, {2, 1, 1}, {1, 1}}, NULL, -1, 1, 0);
    run("linear [2,17]x[33,17]", f_linear, 3, (const int[][5]){{2, 2, 17}, {2, 33, 17}, {1, 33}}, NULL, -1, 1, 0);
    run("linear [3,33]x[3,33]", f_linear, 3, (const int[][5]){{2, 3, 33}, {2, 3, 33}, {1, 3}}, NULL, -1, 1, 0);
    run("linear_gelu [1,1]x[1,1]", f_linear_gelu, 3, (const int[][5]){{2, 1, 1}, {2, 1, 1}, {1, 1}}, NULL, -1, 1, 0);
    run("linear_gelu [3,33]x[17,33]", f_linear_gelu, 3, (const int[][5]){{2, 3, 33}, {2, 17, 33}, {1, 17}}, NULL,
        -1, 1, 0);
    run("matmul [1,1]@[1,1]", f_matmul, 2, (const int[][5]){{2, 1, 1}, {2, 1, 1}}, NULL, -1, 1, 0);
    run("matmul [3,17]@[17,33]", f_matmul, 2, (const int[][5]){{2, 3, 17}, {2, 17, 33}}, NULL, -1, 1, 0);
    run("matmul [2,1,1,3]@[1,3,3,1]", f_matmul, 2, (const int[][5]){{4, 2, 1, 1, 3}, {4, 1, 3, 3, 1}}, NULL, -1, 1, 0);
    run("cross_entropy V=1", f_cross_entropy_odd, 1, (const int[][5]){{2, 4, 1}}, NULL, -3, 3, 0);
    run("cross_entropy V=3", f_cross_entropy_odd, 1, (const int[][5]){{2, 4, 3}}, NULL, -3, 3, 0);
    run("cross_entropy V=17", f_cross_entropy_odd, 1, (const int[][5]){{2, 4, 17}}, NULL, -3, 3, 0);
    run("cross_entropy V=33", f_cross_entropy_odd, 1, (const int[][5]){{2, 4, 33}}, NULL, -3, 3, 0);
    run("embedding d=17", f_embedding_odd, 1, (const int[][5]){{2, 3, 17}}, NULL, -1, 1, 0);
    run("matmul [3,4]@[2,2,4,5]", f_matmul, 2, (const int[][5]){{2, 3, 4}, {4, 2, 2, 4, 5}}, NULL, -1, 1, 0);
    run("matmul [2,2,3,4]@[4,1]", f_matmul, 2, (const int[][5]){{4, 2, 2, 3, 4}, {2, 4, 1}}, NULL, -1, 1, 0);
    run("matmul [2,1,3,4]@[2,4,5]", f_matmul, 2, (const int[][5]){{4, 2, 1, 3, 4}, {3, 2, 4, 5}}, NULL, -1, 1, 0);
    run("sum dim 0 of [5]", f_sum, 1, (const int[][5]){{1, 5}}, (const int[]){0, 0}, -1, 1, 0);
    run("concat dim 0", f_concat_dim, 2, (const int[][5]){{2, 2, 3}, {2, 1, 3}}, (const int[]){0}, -1, 1, 0);
    run("concat dim -1, width 1", f_concat_dim, 2, (const int[][5]){{3, 2, 3, 1}, {3, 2, 3, 17}}, (const int[]){-1}, -1,
        1, 0);
    run("slices of width 1", f_slice_last, 1, (const int[][5]){{2, 3, 17}}, NULL, -1, 1, 0);
    run("transpose(1,1) of [2,3]", f_transpose, 1, (const int[][5]){{2, 2, 3}}, (const int[]){1, 1}, -1, 1, 0);
    run("transpose [1,17,1,3] (1,3)", f_transpose, 1, (const int[][5]){{4, 1, 17, 1, 3}}, (const int[]){1, 3}, -1, 1, 0);
    run("sum dim 0 of [1,3]", f_sum, 1, (const int[][5]){{2, 1, 3}}, (const int[]){0, 0}, -1, 1, 0);
    run("mean dim -1 keepdim of [3,17]", f_mean, 1, (const int[][5]){{2, 3, 17}}, (const int[]){-1, 1}, -1, 1, 0);
    run("attention op, T=1, 2 heads", f_attention, 1, (const int[][5]){{3, 2, 1, 12}}, &(attn_arg){ 2, 1, 0 }, -1, 1, 0);
    run("attention op, T=1, non-causal", f_attention, 1, (const int[][5]){{3, 1, 1, 6}}, &(attn_arg){ 1, 0, 0 }, -1,
        1, 0);
    run("attention op, hd=1, 3 heads", f_attention, 1, (const int[][5]){{3, 2, 4, 9}}, &(attn_arg){ 3, 1, 0 }, -1, 1, 0);
    run("attention op, hd=3, 2 heads", f_attention, 1, (const int[][5]){{3, 2, 5, 18}}, &(attn_arg){ 2, 1, 0 }, -1, 1, 0);
    /* longer than the fast kernel's block of 64 queries and keys, which it
     * keeps the weights of and recomputes past */
    run("attention op, causal T=70", f_attention, 1, (const int[][5]){{3, 1, 70, 6}}, &(attn_arg){ 1, 1, 0 }, -1, 1, 0);
    run("attention op, non-causal T=65, 2 heads", f_attention, 1, (const int[][5]){{3, 1, 65, 12}},
        &(attn_arg){ 2, 0, 0 }, -1, 1, 0);
    run("attention op, causal T=67, dropout 0.2", f_attention, 1, (const int[][5]){{3, 1, 67, 6}},
        &(attn_arg){ 1, 1, 0.2 }, -1, 1, 0);

    /* ---- an input used twice ---- */
    run("add(x, x)", f_add_self, 1, (const int[][5]){{2, 3, 4}}, NULL, -1, 1, 0);
    run("x - x + x*x", f_sub_self_sq, 1, (const int[][5]){{2, 3, 4}}, NULL, -1, 1, 0);
    run("matmul(x, x)", f_matmul_self, 1, (const int[][5]){{2, 4, 4}}, NULL, -1, 1, 0);
    run("matmul(x, x) batched", f_matmul_self, 1, (const int[][5]){{3, 2, 3, 3}}, NULL, -1, 1, 0);
    run("linear(x, x, b)", f_linear_self, 2, (const int[][5]){{2, 4, 4}, {1, 4}}, NULL, -1, 1, 0);
    run("linear_gelu(x, x, b)", f_linear_gelu_self, 2, (const int[][5]){{2, 5, 5}, {1, 5}}, NULL, -1, 1, 0);
    run("layer_norm weight = bias", f_layer_norm_wb_same, 2, (const int[][5]){{2, 3, 6}, {1, 6}}, NULL, -2, 2, 0);
    run("softmax(x) * x", f_softmax_times_x, 1, (const int[][5]){{2, 3, 5}}, NULL, -2, 2, 0);
    run("tied embedding and output weights", f_tied_embedding, 1, (const int[][5]){{2, 5, 3}}, NULL, -1, 1, 0);
    for (int op = 0; op < TW_COUNT; op++)
        for (int order = 0; order < 2; order++) {
            char name[96];
            snprintf(name, sizeof name, "%s(h) and tanh(h) of one h, %s recorded %s", twice_name[op], twice_name[op],
                     order ? "last" : "first");
            run(name, f_twice, 2, (const int[][5]){{2, 4, 3}, {2, 5, 3}}, &(twice_arg){ op, order }, -1, 1, 0);
        }

    /* ---- constants beside inputs ---- */
    run("mul, constants broadcast either way", f_mul_const_bcast, 2, (const int[][5]){{3, 2, 3, 4}, {1, 4}}, NULL,
        -1, 1, 0);
    run("linear, constant weight", f_linear_const_W, 2, (const int[][5]){{3, 2, 3, 4}, {1, 5}}, NULL, -1, 1, 0);
    run("linear, constant input", f_linear_const_x, 2, (const int[][5]){{2, 5, 4}, {1, 5}}, NULL, -1, 1, 0);
    run("linear_gelu, constant weight", f_linear_gelu_const_W, 2, (const int[][5]){{3, 2, 3, 4}, {1, 5}}, NULL, -1, 1,
        0);
    run("linear_gelu, constant input", f_linear_gelu_const_x, 2, (const int[][5]){{2, 5, 4}, {1, 5}}, NULL, -1, 1, 0);
    run("layer_norm, constant bias", f_layer_norm_const_b, 2, (const int[][5]){{2, 3, 5}, {1, 5}}, NULL, -2, 2, 0);

    /* ---- edge values ---- */
    run("softmax, rows with all but one masked", f_softmax_one_left, 1, (const int[][5]){{2, 4, 5}}, NULL, -2, 2, 0);
    run("log_softmax, rows with all but one masked", f_log_softmax_one_left, 1, (const int[][5]){{2, 4, 17}}, NULL,
        -2, 2, 0);
    run("softmax of logits near 1e4", f_softmax_shift, 1, (const int[][5]){{2, 3, 17}}, &(double){ 1e4 }, -2, 2, 0);
    run("log_softmax of logits near -1e4", f_log_softmax_shift, 1, (const int[][5]){{2, 3, 5}}, &(double){ -1e4 },
        -2, 2, 0);
    run("cross_entropy of logits x 30", f_cross_entropy_scaled, 1, (const int[][5]){{2, 6, 5}}, &(double){ 30 }, -1,
        1, 0);
#ifdef AG_DOUBLE
    /* (float's differences of 1e-2 are no derivative at the scale sqrt(eps) = 3e-3) */
    run("layer_norm of nearly constant rows", f_layer_norm, 3, (const int[][5]){{2, 3, 17}, {1, 17}, {1, 17}}, NULL,
        0.5, 0.5 + 1e-9, 0);
#endif
    run("gelu near 6", f_gelu_shift, 1, (const int[][5]){{2, 3, 17}}, &(double){ 6 }, -1, 1, 0);
    run("gelu near -6", f_gelu_shift, 1, (const int[][5]){{2, 3, 17}}, &(double){ -6 }, -1, 1, 0);
    run("gelu near 40", f_gelu_shift, 1, (const int[][5]){{2, 2, 3}}, &(double){ 40 }, -1, 1, 0);
    run("gelu near -40", f_gelu_shift, 1, (const int[][5]){{2, 2, 3}}, &(double){ -40 }, -1, 1, 0);
    run("dropout p=0 (identity)", f_dropout_p, 1, (const int[][5]){{2, 3, 5}}, &(double){ 0 }, -2, 2, 0);
    run("dropout p=0.97", f_dropout_p, 1, (const int[][5]){{2, 10, 10}}, &(double){ 0.97 }, -2, 2, 0);

    /* ---- a whole block, and a second step after ag_reset ---- */
    static const int block[8][5] = { {3, 2, 5, 12}, {1, 12}, {1, 12}, {2, 36, 12}, {1, 36}, {2, 7, 12}, {1, 7},
                                     {2, 5, 7} };
    run("transformer block", f_block, 8, block, NULL, -1, 1, 0);
    for (int same_tape = 0; same_tape < 2; same_tape++) {
        second_step("transformer block", f_block, 8, block, NULL, same_tape);
        for (int op = 0; op < TW_COUNT; op++)
            for (int order = 0; order < 2; order++)
                second_step(twice_name[op], f_twice, 2, (const int[][5]){{2, 4, 3}, {2, 5, 3}},
                            &(twice_arg){ op, order }, same_tape);
        second_step("attention T=70", f_attention, 1, (const int[][5]){{3, 1, 70, 6}}, &(attn_arg){ 1, 1, 0.1 },
                    same_tape);
        second_step("linear_gelu", f_linear_gelu, 3, (const int[][5]){{3, 2, 3, 4}, {2, 5, 4}, {1, 5}}, NULL,
                    same_tape);
    }
    return check_done();
}
