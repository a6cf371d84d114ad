/*
 * nn.c - Linear, LayerNorm and MultiHeadAttention from the engine's ops.
 * MultiHeadAttention, in nn_mha_forward_explicit, follows the tutorials step
 * by step: project to queries, keys and values; split d into heads by view +
 * transpose; scores Q K^T; causal mask with -inf; scale by 1/sqrt(head_dim);
 * softmax; dropout on the weights; weighted sum of values; merge heads;
 * output projection.  nn_mha_forward computes the same with one projection
 * to [q|k|v] and the engine's fused ag_attention op, several times faster.
 */
#include <math.h>
#include <stdio.h>

#include "nn.h"

static ag_tensor *param(ag_params *ps, const char *prefix, const char *suffix, int ndim, const int *shape)
{
    char name[256];
    if (snprintf(name, sizeof name, "%s.%s", prefix, suffix) >= (int)sizeof name)
        ag_error("parameter name too long: %s.%s", prefix, suffix);
    return ag_params_add(ps, name, ndim, shape);
}

nn_linear nn_linear_new(ag_params *ps, const char *prefix, int in, int out, int bias)
{
    nn_linear l;
    l.weight = param(ps, prefix, "weight", 2, (int[]){out, in});
    l.bias = bias ? param(ps, prefix, "bias", 1, (int[]){out}) : NULL;
    return l;
}

ag_tensor *nn_linear_forward(ag_ctx *ctx, const nn_linear *l, ag_tensor *x)
{
    return ag_linear(ctx, x, l->weight, l->bias);
}

ag_tensor *nn_linear_gelu_forward(ag_ctx *ctx, const nn_linear *l, ag_tensor *x)
{
    return ag_linear_gelu(ctx, x, l->weight, l->bias);
}

nn_layer_norm nn_layer_norm_new(ag_params *ps, const char *prefix, int d)
{
    nn_layer_norm n;
    n.weight = param(ps, prefix, "weight", 1, (int[]){d});
    n.bias = param(ps, prefix, "bias", 1, (int[]){d});
    return n;
}

ag_tensor *nn_layer_norm_forward(ag_ctx *ctx, const nn_layer_norm *n, ag_tensor *x)
{
    return ag_layer_norm(ctx, x, n->weight, n->bias, (ag_real)1e-5);   /* eps: torch.nn.LayerNorm's default */
}

nn_mha nn_mha_new(ag_params *ps, const char *prefix, int d_model, int n_head, int qkv_bias,
                  double dropout, int causal)
{
    if (n_head < 1 || d_model % n_head != 0)
        ag_error("nn_mha_new: d_model %d is not divisible by %d heads", d_model, n_head);
    nn_mha a;
    static const char *const parts[4] = { "W_query", "W_key", "W_value", "out_proj" };
    nn_linear *layers[4] = { &a.W_query, &a.W_key, &a.W_value, &a.out_proj };
    char name[4][256];
    for (int i = 0; i < 4; i++)
        if (snprintf(name[i], sizeof name[i], "%s.%s", prefix, parts[i]) >= (int)sizeof name[i])
            ag_error("parameter name too long: %s.%s", prefix, parts[i]);
    /* query, key and value weights back to back, then their biases */
    for (int i = 0; i < 3; i++) {
        layers[i]->weight = param(ps, name[i], "weight", 2, (int[]){d_model, d_model});
        layers[i]->bias = NULL;
    }
    for (int i = 0; i < 3 && qkv_bias; i++)
        layers[i]->bias = param(ps, name[i], "bias", 1, (int[]){d_model});
    a.out_proj = nn_linear_new(ps, name[3], d_model, d_model, 1);
    a.d_model = d_model;
    a.n_head = n_head;
    a.head_dim = d_model / n_head;
    a.dropout = dropout;
    a.causal = causal;
    return a;
}

ag_tensor *nn_causal_mask(ag_ctx *ctx, int T, int S)
{
    ag_tensor *m = ag_new(ctx, 2, (int[]){T, S});
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < S; j++)
            m->data[(size_t)i * S + j] = 1;
    return m;
}

/* [B,T,d] -> [B,H,T,hd]: a view that splits d into heads, then a transpose. */
static ag_tensor *split_heads(ag_ctx *ctx, ag_tensor *x, int H, int hd)
{
    ag_tensor *v = ag_reshape(ctx, x, 4, (int[]){x->shape[0], x->shape[1], H, hd});
    return ag_transpose(ctx, v, 1, 2);
}

/* Checks shared by the three paths, errors naming fn; returns the
 * keys/values input (x itself for self-attention). */
static ag_tensor *check_mha_inputs(const char *fn, const nn_mha *a, ag_tensor *x, ag_tensor *kv)
{
    char sx[64];
    if (x->ndim != 3 || x->shape[2] != a->d_model)
        ag_error("%s: input %s is not [B,T,%d]", fn, ag_shape_str(x, sx, sizeof sx), a->d_model);
    if (!kv)
        kv = x;
    if (kv->ndim != 3 || kv->shape[0] != x->shape[0] || kv->shape[2] != a->d_model)
        ag_error("%s: keys/values %s do not fit queries %s", fn, ag_shape_str(kv, sx, sizeof sx),
                 ag_shape_str(x, (char[64]){0}, 64));
    if (a->causal && kv->shape[1] != x->shape[1])
        ag_error("%s: a causal mask needs as many keys (%d) as queries (%d)", fn, kv->shape[1], x->shape[1]);
    return kv;
}

/* q, k and v of every position from one [3d,d] product: [B,T,3d]. */
static ag_tensor *qkv_projection(ag_ctx *ctx, const nn_mha *a, ag_tensor *x)
{
    ag_tensor *w[3] = { a->W_query.weight, a->W_key.weight, a->W_value.weight };
    ag_tensor *b[3] = { a->W_query.bias, a->W_key.bias, a->W_value.bias };
    return ag_linear(ctx, x, ag_params_join(ctx, w, 3), b[0] ? ag_params_join(ctx, b, 3) : NULL);
}

ag_tensor *nn_mha_forward(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *kv, int training,
                          ag_tensor **weights_out)
{
    if (check_mha_inputs("nn_mha_forward", a, x, kv) != x)
        return nn_mha_forward_explicit(ctx, a, x, kv, training, weights_out);
    /* Self-attention: one projection, then the fused op. */
    ag_tensor *y = ag_attention(ctx, qkv_projection(ctx, a, x), a->n_head, a->causal, (ag_real)a->dropout, training,
                                weights_out);
    return nn_linear_forward(ctx, &a->out_proj, y);
}

ag_tensor *nn_mha_forward_cached(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *k_cache, ag_tensor *v_cache,
                                 int pos)
{
    check_mha_inputs("nn_mha_forward_cached", a, x, NULL);
    if (!a->causal)
        ag_error("nn_mha_forward_cached: a key/value cache serves causal attention only");
    ag_tensor *y = ag_attention_cached(ctx, qkv_projection(ctx, a, x), a->n_head, k_cache, v_cache, pos);
    return nn_linear_forward(ctx, &a->out_proj, y);
}

ag_tensor *nn_mha_forward_explicit(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *kv, int training,
                                   ag_tensor **weights_out)
{
    kv = check_mha_inputs("nn_mha_forward_explicit", a, x, kv);
    int B = x->shape[0], T = x->shape[1], S = kv->shape[1], H = a->n_head, hd = a->head_dim;

    ag_tensor *q = split_heads(ctx, nn_linear_forward(ctx, &a->W_query, x), H, hd);   /* [B,H,T,hd] */
    ag_tensor *k = split_heads(ctx, nn_linear_forward(ctx, &a->W_key, kv), H, hd);    /* [B,H,S,hd] */
    ag_tensor *v = split_heads(ctx, nn_linear_forward(ctx, &a->W_value, kv), H, hd);  /* [B,H,S,hd] */

    /* scores[b,h,i,j] = q_i . k_j, one row of keys per query */
    ag_tensor *scores = ag_matmul(ctx, q, ag_transpose(ctx, k, 2, 3));               /* [B,H,T,S] */
    if (a->causal)
        scores = ag_masked_fill(ctx, scores, nn_causal_mask(ctx, T, S), -INFINITY);
    /* Dividing by sqrt(hd) keeps the scores' variance near 1 whatever the
     * head size, so softmax does not saturate into a one-hot. */
    scores = ag_scale(ctx, scores, (ag_real)(1.0 / sqrt((double)hd)));
    ag_tensor *w = ag_softmax(ctx, scores, -1);
    if (weights_out)
        *weights_out = w;
    w = ag_dropout(ctx, w, (ag_real)a->dropout, training);

    ag_tensor *y = ag_matmul(ctx, w, v);                                               /* [B,H,T,hd] */
    y = ag_transpose(ctx, y, 1, 2);                                                    /* [B,T,H,hd] */
    y = ag_reshape(ctx, y, 3, (int[]){B, T, a->d_model});                              /* heads merged */
    return nn_linear_forward(ctx, &a->out_proj, y);
}
