/*
 * model.c - the tiny GPT: token + position embeddings, dropout, n_layer
 * pre-norm blocks (attention and a GELU MLP, each added back to the residual
 * stream), a final norm and the output head.  The attn-only architecture
 * keeps only the tutorials' part: x = x + attn(x) per block (their
 * MultiHeadAttention added back to the residual stream; no layer norms, no
 * MLP).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

const char *model_arch_name(int arch) { return arch == ARCH_GPT ? "gpt" : "attn-only"; }

int model_arch_parse(const char *name)
{
    if (strcmp(name, "gpt") == 0)
        return ARCH_GPT;
    if (strcmp(name, "attn-only") == 0)
        return ARCH_ATTN_ONLY;
    return -1;
}

/* What model_declare registers, counted: */
double model_param_count(const model_config *c)
{
    double d = c->d_model, V = c->vocab_size;
    /* W_query, W_key, W_value, out_proj [d,d]; out_proj's bias; the qkv biases */
    double attn = 4 * d * d + d + (c->qkv_bias ? 3 * d : 0);
    double block = attn;
    if (c->arch == ARCH_GPT)   /* two norms (gain and shift), fc1 [4d,d] + bias, fc2 [d,4d] + bias */
        block += 4 * d + (d * 4 * d + 4 * d) + (4 * d * d + d);
    /* token and position embeddings, the blocks, the head [V,d] (no bias) */
    double total = V * d + (double)c->context * d + c->n_layer * block + V * d;
    if (c->arch == ARCH_GPT)
        total += 2 * d;        /* the final norm */
    return total;
}

/* The packing buffers of a linear layer's products in a training step:
 * y = x W^T ([rows,in] x [in,out]), dx = dy W and dW = dy^T x. */
static double linear_scratch(int rows, int in, int out, int precision)
{
    double f = (double)ag_matmul_scratch_bytes(rows, out, in, precision);
    double dx = (double)ag_matmul_scratch_bytes(rows, in, out, precision);
    double dw = (double)ag_matmul_scratch_bytes(out, in, rows, precision);
    return fmax(f, fmax(dx, dw));
}

double model_train_bytes(const model_config *c, int B, int T, int moments, int bf16)
{
    const double d = c->d_model, V = c->vocab_size, rows = (double)B * T;
    const int gpt = c->arch == ARCH_GPT, dropout = c->dropout > 0, precision = bf16 ? AG_BF16 : AG_FP32;
    /* The products' scratch is asked of the kernels in int rows, at most
     * 2^24 of them: B x T can pass INT_MAX (2^20 x 4096), and long before
     * that the arena's term, in double, is what says a run cannot fit (it
     * grows with n_layer x 36 d values a row, the scratch with a few d). */
    const int D = c->d_model, R = rows > (1 << 24) ? 1 << 24 : B * T;
    /* Values per row and layer.  A GPT block's forward keeps 18 d-wide
     * tensors (norms, q|k|v, attention, projections, the 4d MLP twice,
     * residual sums) and backward gives each a gradient: 36 d; the norms'
     * mean and 1/std; dropout's masks and outputs.  An attn-only block:
     * q|k|v, attention, projection, sum and gradients.  What attention
     * keeps besides, the engine says. */
    double layer = gpt ? 36 * d + 4 + (dropout ? 4 * d : 0) : 12 * d;
    /* embeddings and head: token and summed embeddings, the final norm,
     * logits, softmax and their gradient, per-row losses */
    double outer = 3 * V + (gpt ? 6 * d + 5 : 4 * d + 5) + (dropout ? 2 * d : 0);
    double arena = sizeof(ag_real) * (rows * (c->n_layer * layer + outer) + 2.0 * T * d) +
                   c->n_layer * (double)ag_attention_arena_bytes(B, T, D, c->n_head, precision);
    double state = model_param_count(c) * sizeof(ag_real) * (2 + moments);
    /* The kernels' buffers, kept between steps: the largest product's (the
     * products of one precision share them) and attention's. */
    double products = fmax(linear_scratch(R, D, 3 * D, precision), linear_scratch(R, D, D, precision));
    products = fmax(products, linear_scratch(R, D, c->vocab_size, precision));
    if (gpt)
        products = fmax(products, fmax(linear_scratch(R, D, 4 * D, precision), linear_scratch(R, 4 * D, D, precision)));
    double scratch = products + (double)ag_attention_scratch_bytes(B, T, D, c->n_head);
    /* the program itself: code, C library, thread stacks (3 MB measured on Linux) */
    return state + arena + scratch + 3e6;
}

void model_declare(model *m, const model_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    int d = cfg->d_model, V = cfg->vocab_size;
    ag_params *ps = m->params = ag_params_new();
    m->tok_emb = ag_params_add(ps, "tok_emb.weight", 2, (int[]){V, d});
    m->pos_emb = ag_params_add(ps, "pos_emb.weight", 2, (int[]){cfg->context, d});
    m->blocks = calloc((size_t)cfg->n_layer, sizeof *m->blocks);
    m->positions = malloc((size_t)cfg->context * sizeof *m->positions);
    if (!m->blocks || !m->positions)
        ag_error("out of memory building %d blocks", cfg->n_layer);
    for (int i = 0; i < cfg->n_layer; i++) {
        model_block *b = &m->blocks[i];
        char p[64];
        if (cfg->arch == ARCH_GPT) {
            snprintf(p, sizeof p, "blocks.%d.norm1", i);
            b->norm1 = nn_layer_norm_new(ps, p, d);
        }
        snprintf(p, sizeof p, "blocks.%d.attn", i);
        b->attn = nn_mha_new(ps, p, d, cfg->n_head, cfg->qkv_bias, cfg->dropout, 1);
        if (cfg->arch == ARCH_GPT) {
            snprintf(p, sizeof p, "blocks.%d.norm2", i);
            b->norm2 = nn_layer_norm_new(ps, p, d);
            snprintf(p, sizeof p, "blocks.%d.mlp.fc1", i);
            b->fc1 = nn_linear_new(ps, p, d, 4 * d, 1);
            snprintf(p, sizeof p, "blocks.%d.mlp.fc2", i);
            b->fc2 = nn_linear_new(ps, p, 4 * d, d, 1);
        }
    }
    if (cfg->arch == ARCH_GPT)
        m->final_norm = nn_layer_norm_new(ps, "final_norm", d);
    m->out_head = nn_linear_new(ps, "out_head", d, V, 0);
    /* Weight decay pulls the matrices (embeddings, projections, the head)
     * toward zero, never the biases or the layer norms' gains and shifts,
     * as GPT-2 and nanoGPT train. */
    for (int i = 0; i < ps->count; i++)
        ps->list[i]->decay = ps->list[i]->ndim >= 2;
    for (int t = 0; t < cfg->context; t++)
        m->positions[t] = t;
}

void model_build(model *m, const model_config *cfg)
{
    model_declare(m, cfg);
    ag_params_alloc(m->params);
}

void model_init(model *m, ag_pcg32 *rng)
{
    ag_params *ps = m->params;
    for (int i = 0; i < ps->count; i++) {
        ag_tensor *t = ps->list[i];
        const char *name = t->name;
        size_t len = strlen(name);
        int is_norm = strstr(name, "norm") != NULL;
        int is_bias = len >= 5 && strcmp(name + len - 5, ".bias") == 0;
        for (size_t k = 0; k < t->size; k++) {
            if (is_bias)
                t->data[k] = 0;
            else if (is_norm)
                t->data[k] = 1;
            else
                t->data[k] = (ag_real)(0.02 * ag_pcg32_normal(rng));   /* N(0, 0.02^2), as GPT-2 */
        }
    }
}

void model_copy_weights(model *dst, const model *src)
{
    const ag_params *d = dst->params, *s = src->params;
    if (d->count != s->count || dst->cfg.context > src->cfg.context)
        ag_error("model_copy_weights: the models differ (%d and %d parameters, contexts %d and %d)", d->count,
                 s->count, dst->cfg.context, src->cfg.context);
    for (int i = 0; i < d->count; i++) {
        const ag_tensor *from = s->list[i];
        ag_tensor *to = d->list[i];
        /* the same names in the same order; dst's [context,d] position
         * embeddings are src's first rows, which in row-major order are its
         * first context*d values */
        if (strcmp(to->name, from->name) != 0 || to->size > from->size)
            ag_error("model_copy_weights: %s does not match %s", to->name, from->name);
        memcpy(to->data, from->data, to->size * sizeof *to->data);
    }
}

void model_free(model *m)
{
    ag_params_free(m->params);
    free(m->blocks);
    free(m->positions);
    memset(m, 0, sizeof *m);
}

/* Block i on x [B,T,d]: attention (over the cache's earlier positions when
 * cache is not NULL) and, in a GPT, the MLP, each added to the residual
 * stream. */
static ag_tensor *block_forward(ag_ctx *ctx, model *m, int i, ag_tensor *x, int training, ag_tensor **w,
                                model_cache *cache)
{
    const model_config *c = &m->cfg;
    model_block *b = &m->blocks[i];
    ag_tensor *h = c->arch == ARCH_GPT ? nn_layer_norm_forward(ctx, &b->norm1, x) : x;
    if (cache)
        h = nn_mha_forward_cached(ctx, &b->attn, h, cache->k[i], cache->v[i], cache->len);
    else if (m->explicit_attention)
        h = nn_mha_forward_explicit(ctx, &b->attn, h, NULL, training, w);
    else
        h = nn_mha_forward(ctx, &b->attn, h, NULL, training, w);
    if (c->arch == ARCH_ATTN_ONLY)
        return ag_add(ctx, x, h);
    x = ag_add(ctx, x, ag_dropout(ctx, h, (ag_real)c->dropout, training));
    h = nn_linear_gelu_forward(ctx, &b->fc1, nn_layer_norm_forward(ctx, &b->norm2, x));
    h = nn_linear_forward(ctx, &b->fc2, h);
    return ag_add(ctx, x, ag_dropout(ctx, h, (ag_real)c->dropout, training));
}

/* The token and position embeddings of ids [B,T] at positions pos.. */
static ag_tensor *embed(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int pos, int training)
{
    ag_tensor *tok = ag_embedding(ctx, m->tok_emb, ids, 2, (int[]){B, T});               /* [B,T,d] */
    ag_tensor *pe = ag_embedding(ctx, m->pos_emb, m->positions + pos, 1, (int[]){T});      /* [T,d] */
    return ag_dropout(ctx, ag_add(ctx, tok, pe), (ag_real)m->cfg.dropout, training);
}

/* Embeddings of ids [B,T] at positions pos.., the blocks, the head. */
static ag_tensor *forward(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int pos, int training,
                          ag_tensor **attn_out, model_cache *cache)
{
    const model_config *c = &m->cfg;
    /* Without gradients nothing reads a layer's temporaries once its output
     * exists: rewind the arena to here after each layer (not when the
     * attention weights are wanted: they live in the layers). */
    const int rewind = !ag_grad_enabled(ctx) && !attn_out;
    ag_mark start = ag_arena_mark(ctx);
    ag_tensor *x = embed(ctx, m, ids, B, T, pos, training);
    if (rewind)
        x = ag_arena_rewind(ctx, start, x);
    for (int i = 0; i < c->n_layer; i++) {
        x = block_forward(ctx, m, i, x, training, attn_out ? &attn_out[i] : NULL, cache);
        if (rewind)
            x = ag_arena_rewind(ctx, start, x);
    }
    if (c->arch == ARCH_GPT)
        x = nn_layer_norm_forward(ctx, &m->final_norm, x);
    return nn_linear_forward(ctx, &m->out_head, x);                                      /* [B,T,V] */
}

ag_tensor *model_forward(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int training,
                         ag_tensor **attn_out)
{
    if (T < 1 || T > m->cfg.context)
        ag_error("model_forward: %d tokens but the model's context is %d", T, m->cfg.context);
    return forward(ctx, m, ids, B, T, 0, training, attn_out, NULL);
}

ag_tensor *model_attention(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int layer)
{
    if (T < 1 || T > m->cfg.context)
        ag_error("model_attention: %d tokens but the model's context is %d", T, m->cfg.context);
    if (layer < 0 || layer >= m->cfg.n_layer)
        ag_error("model_attention: layer %d of a model of %d layers", layer, m->cfg.n_layer);
    const int grad = ag_grad_enabled(ctx);
    ag_set_grad_enabled(ctx, 0);
    ag_mark start = ag_arena_mark(ctx);
    ag_tensor *x = embed(ctx, m, ids, B, T, 0, 0), *w = NULL;
    for (int i = 0; i < layer; i++)
        x = ag_arena_rewind(ctx, start, block_forward(ctx, m, i, x, 0, NULL, NULL));
    (void)block_forward(ctx, m, layer, x, 0, &w, NULL);
    ag_set_grad_enabled(ctx, grad);
    return w;
}

void model_cache_init(model_cache *c, const model *m, int B)
{
    const int L = m->cfg.n_layer;
    c->ctx = ag_ctx_new();
    c->k = malloc((size_t)L * sizeof *c->k);
    c->v = malloc((size_t)L * sizeof *c->v);
    if (!c->k || !c->v)
        ag_error("out of memory for a key/value cache of %d layers", L);
    for (int i = 0; i < L; i++) {
        c->k[i] = ag_new(c->ctx, 3, (int[]){B, m->cfg.context, m->cfg.d_model});
        c->v[i] = ag_new(c->ctx, 3, (int[]){B, m->cfg.context, m->cfg.d_model});
    }
    c->B = B;
    c->len = 0;
}

void model_cache_free(model_cache *c)
{
    ag_ctx_free(c->ctx);
    free(c->k);
    free(c->v);
    memset(c, 0, sizeof *c);
}

ag_tensor *model_forward_cached(ag_ctx *ctx, model *m, model_cache *c, const int32_t *ids, int B, int T)
{
    if (B != c->B || T < 1 || c->len + T > m->cfg.context)
        ag_error("model_forward_cached: %d x %d tokens after %d cached positions do not fit a cache of %d x %d", B, T,
                 c->len, c->B, m->cfg.context);
    int old = ag_set_grad_enabled(ctx, 0);
    ag_tensor *logits = forward(ctx, m, ids, B, T, c->len, 0, NULL, c);
    ag_set_grad_enabled(ctx, old);
    c->len += T;
    return logits;
}
