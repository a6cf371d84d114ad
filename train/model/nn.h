/*
 * nn.h - layers built from the engine's ops, the way a user would build
 * their own: Linear, LayerNorm and MultiHeadAttention (an embedding is
 * ag_embedding on a parameter, as model.c uses it).  Each
 * layer holds pointers to its parameters (registered in an ag_params under
 * PyTorch-style dotted names) and forward functions of its own (Linear
 * also fused with GELU; attention also cached and spelled out op by op).
 */
#ifndef ATTOGRAD_NN_H
#define ATTOGRAD_NN_H

#include "attograd.h"

typedef struct nn_linear {
    ag_tensor *weight;      /* [out, in], nn.Linear's layout */
    ag_tensor *bias;        /* [out] or NULL */
} nn_linear;

typedef struct nn_layer_norm {
    ag_tensor *weight, *bias;   /* [d] */
} nn_layer_norm;

/* The tutorials' MultiHeadAttention with d_in = d_out = d_model (d in the
 * engine's comments), num_heads = n_head (H) and head_dim = d_model / n_head
 * (hd in the engine's comments). */
typedef struct nn_mha {
    nn_linear W_query, W_key, W_value, out_proj;
    int d_model, n_head, head_dim;
    double dropout;         /* on the attention weights */
    int causal;             /* mask keys after the query's position */
} nn_mha;

/* Register "<prefix>.weight" (and "<prefix>.bias") in ps. */
nn_linear nn_linear_new(ag_params *ps, const char *prefix, int in, int out, int bias);
ag_tensor *nn_linear_forward(ag_ctx *ctx, const nn_linear *l, ag_tensor *x);
/* gelu(l(x)) as one op (ag_linear_gelu): the same bits, fewer passes. */
ag_tensor *nn_linear_gelu_forward(ag_ctx *ctx, const nn_linear *l, ag_tensor *x);

nn_layer_norm nn_layer_norm_new(ag_params *ps, const char *prefix, int d);
ag_tensor *nn_layer_norm_forward(ag_ctx *ctx, const nn_layer_norm *n, ag_tensor *x);

/* "<prefix>.W_query", ".W_key", ".W_value" (bias when qkv_bias), ".out_proj" (bias).
 * The three projection weights are registered one after another, then their
 * biases, so each trio is stored back to back (see ag_params_join). */
nn_mha nn_mha_new(ag_params *ps, const char *prefix, int d_model, int n_head, int qkv_bias,
                  double dropout, int causal);
/* x: [B,T,d] queries.  kv: [B,S,d] the sequence keys and values come from;
 * NULL for self-attention (kv = x).  A causal mask needs S == T.
 * weights_out, if not NULL, receives the attention weights [B,H,T,S]
 * (after softmax, before dropout).  Returns [B,T,d].  Self-attention runs
 * as one [3d,d] projection and the fused ag_attention op; cross-attention
 * runs the explicit ops. */
ag_tensor *nn_mha_forward(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *kv, int training,
                          ag_tensor **weights_out);
/* Self-attention of the positions pos..pos+T-1 in x [B,T,d] over every
 * position so far, with their keys and values kept in k_cache and v_cache
 * ([B,S,d], filled by earlier calls up to pos): for generating a sequence
 * a token at a time (see ag_attention_cached).  No gradient. */
ag_tensor *nn_mha_forward_cached(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *k_cache, ag_tensor *v_cache,
                                 int pos);
/* The same computation spelled out op by op, as the tutorials build it: three
 * projections, heads split by reshape + transpose, scores, causal mask,
 * scale, softmax, dropout, weighted sum, heads merged, output projection.
 * Equal to nn_mha_forward (the tests check it); slower. */
ag_tensor *nn_mha_forward_explicit(ag_ctx *ctx, const nn_mha *a, ag_tensor *x, ag_tensor *kv, int training,
                                   ag_tensor **weights_out);

/* The [T,S] mask with 1 above the diagonal (key j > query i), as torch.triu(ones, 1). */
ag_tensor *nn_causal_mask(ag_ctx *ctx, int T, int S);

#endif
