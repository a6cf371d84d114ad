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
static ag_tensor *causal_mask(ag_ctx *c, int T)
{
    ag_tensor *m = ag_new(c, 2, (int[]){T, T});
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++)
            m->data[i * T + j] = 1;
    return m;
}

static ag_tensor *f_masked_softmax(ag_ctx *c, ag_tensor **x, const void *a)
{
    (void)a;
    ag_tensor *s = ag_masked_fill(c, x[0], causal_mask(c, x[0]->shape[x[0]->ndim - 1]), -INFINITY);
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
    ag_tensor *w = ag_softmax(c, ag_masked_fill(c, s, causal_mask(c, T), -INFINITY), -1);
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
    return check_done();
}
