/*
 * model.c - the tiny GPT: token + position embeddings, dropout, n_layer
 * pre-norm blocks (attention and a GELU MLP, each added back to the residual
 * stream), a final norm and the output head.  The attn-only architecture is
 * the tutorials' minimal model: x = x + attn(x) per block, nothing else.
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

double model_param_count(const model_config *c)
{
    double d = c->d_model, V = c->vocab_size;
    double attn = 4 * d * d + d + (c->qkv_bias ? 3 * d : 0);
    double block = attn;
    if (c->arch == ARCH_GPT)
        block += 4 * d /* two norms */ + (d * 4 * d + 4 * d) + (4 * d * d + d);
    double total = V * d + (double)c->context * d + c->n_layer * block + V * d;
    if (c->arch == ARCH_GPT)
        total += 2 * d;
    return total;
}

double model_param_bytes(const model_config *c) { return 2 * model_param_count(c) * sizeof(ag_real); }

void model_build(model *m, const model_config *cfg)
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
    ag_params_alloc(ps);
    for (int t = 0; t < cfg->context; t++)
        m->positions[t] = t;
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
                t->data[k] = (ag_real)(0.02 * ag_pcg32_normal(rng));
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
        /* the same names in the same order; [T,d] position embeddings keep
         * their first rows, which in row-major order is the first T*d values */
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

ag_tensor *model_forward(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int training,
                         ag_tensor **attn_out)
{
    const model_config *c = &m->cfg;
    if (T < 1 || T > c->context)
        ag_error("model_forward: %d tokens but the model's context is %d", T, c->context);
    ag_tensor *tok = ag_embedding(ctx, m->tok_emb, ids, 2, (int[]){B, T});       /* [B,T,d] */
    ag_tensor *pos = ag_embedding(ctx, m->pos_emb, m->positions, 1, (int[]){T});   /* [T,d] */
    ag_tensor *x = ag_dropout(ctx, ag_add(ctx, tok, pos), (ag_real)c->dropout, training);
    for (int i = 0; i < c->n_layer; i++) {
        model_block *b = &m->blocks[i];
        ag_tensor **w = attn_out ? &attn_out[i] : NULL;
        if (c->arch == ARCH_ATTN_ONLY) {
            x = ag_add(ctx, x, nn_mha_forward(ctx, &b->attn, x, NULL, training, w));
            continue;
        }
        ag_tensor *h = nn_mha_forward(ctx, &b->attn, nn_layer_norm_forward(ctx, &b->norm1, x), NULL, training, w);
        x = ag_add(ctx, x, ag_dropout(ctx, h, (ag_real)c->dropout, training));
        h = nn_linear_forward(ctx, &b->fc1, nn_layer_norm_forward(ctx, &b->norm2, x));
        h = nn_linear_forward(ctx, &b->fc2, ag_gelu(ctx, h));
        x = ag_add(ctx, x, ag_dropout(ctx, h, (ag_real)c->dropout, training));
    }
    if (c->arch == ARCH_GPT)
        x = nn_layer_norm_forward(ctx, &m->final_norm, x);
    return nn_linear_forward(ctx, &m->out_head, x);                              /* [B,T,V] */
}
