/*
 * model.h - the tiny GPT and its attention-only sibling, as a user of the
 * engine would write them.  Parameter names are PyTorch's state_dict keys of
 * the twin model in tests/twin.py, and the checkpoint's tensor names.
 */
#ifndef ATTOGRAD_MODEL_H
#define ATTOGRAD_MODEL_H

#include "attograd.h"
#include "nn.h"

enum { ARCH_GPT, ARCH_ATTN_ONLY };

/* The largest model built or read (attograd train's flags, the
 * playground's fields, a checkpoint's sizes): one set of bounds, so the
 * three cannot drift apart.  Within them every shape and count the engine
 * forms fits its int sizes, and model_train_bytes says whether the run fits
 * the machine. */
enum {
    MODEL_MAX_LAYERS = 256,
    MODEL_MAX_HEADS = 4096,
    MODEL_MAX_D_MODEL = 65536,
    MODEL_MAX_CONTEXT = 65536,
    MODEL_MAX_VOCAB = 256,          /* bytes */
};
#define MODEL_MAX_DROPOUT 0.999999  /* p < 1: a kept value is scaled by 1/(1-p) */

typedef struct model_config {
    int arch;               /* ARCH_GPT or ARCH_ATTN_ONLY */
    int vocab_size;
    int n_layer, n_head, d_model;
    int context;            /* positions the model knows (the tutorials' context_length): a batch's T
                             * is at most this */
    int qkv_bias;
    double dropout;
} model_config;

typedef struct model_block {
    nn_layer_norm norm1, norm2;     /* gpt only */
    nn_mha attn;
    nn_linear fc1, fc2;             /* gpt only: d -> 4d -> d */
} model_block;

typedef struct model {
    model_config cfg;
    ag_params *params;
    ag_tensor *tok_emb, *pos_emb;   /* [V,d], [context,d] */
    model_block *blocks;
    nn_layer_norm final_norm;       /* gpt only */
    nn_linear out_head;             /* [V,d], no bias */
    int32_t *positions;             /* 0, 1, ..., context-1: ids into pos_emb */
    int explicit_attention;         /* attention by the op-by-op composition (comparisons, benchmarks) */
} model;

const char *model_arch_name(int arch);
/* -1 when the name is not an architecture. */
int model_arch_parse(const char *name);
/* The number of parameters a configuration has, without building it. */
double model_param_count(const model_config *cfg);

/* Bytes a training run of B x T batches holds at its peak, estimated before
 * anything is allocated: the parameters, their gradients and `moments`
 * optimizer values per parameter (1 SGD with momentum, 2 AdamW), and one
 * step's arena (every activation, its gradient and what backward saves,
 * counted per row and layer from the ops model_forward records; with
 * dropout and with bf16 products there is more to keep), the buffers the
 * kernels keep (which the engine reports) and the program itself.  Evaluation of
 * B-row batches needs less.  The memory-estimate test holds the measured
 * peak to within 25% of it. */
double model_train_bytes(const model_config *cfg, int B, int T, int moments, int bf16);

/* Register and allocate every parameter (zeroed). */
void model_build(model *m, const model_config *cfg);
/* Register every parameter, its name and shape, without storage: the
 * parameters' data comes with ag_params_alloc(m->params).  A checkpoint's
 * tensors are checked against these before a config read from the file
 * allocates anything. */
void model_declare(model *m, const model_config *cfg);
/* Weights ~ N(0, 0.02^2) (standard deviation 0.02, as GPT-2), biases 0, layer-norm weights 1,
 * drawn in registration order. */
void model_init(model *m, ag_pcg32 *rng);
/* Copy every weight of src into dst, a model of the same architecture,
 * layers, heads, width and vocabulary whose context may be shorter: its
 * position embeddings are src's first rows (cropping, as nanoGPT does). */
void model_copy_weights(model *dst, const model *src);
void model_free(model *m);

/* ids: [B,T] with T <= context.  Returns logits [B,T,V].  attn_out, if not
 * NULL, receives each layer's attention weights [B,H,T,T] (n_layer entries).
 * Without gradients (ag_set_grad_enabled(ctx, 0)) and without attn_out,
 * each layer's temporaries are released as soon as its output exists, so
 * the arena holds one layer's worth at a time. */
ag_tensor *model_forward(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int training,
                         ag_tensor **attn_out);
/* Layer `layer`'s attention weights [B,H,T,T] on ids [B,T], without dropout
 * or gradients: the layers before it keep nothing (the arena holds one
 * layer's worth at a time, as in model_forward without gradients), and the
 * layers after it do not run.  The same weights as model_forward's attn_out
 * gives for that layer. */
ag_tensor *model_attention(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int layer);

/* The keys and values of the positions seen so far, per layer, for
 * generating a sequence a few tokens at a time (model_forward_cached). */
typedef struct model_cache {
    ag_ctx *ctx;            /* owns the tensors below; never reset */
    ag_tensor **k, **v;     /* per layer, [B, context, d] */
    int B;
    int len;                /* positions filled: the next tokens go at len, len+1, ... */
} model_cache;

void model_cache_init(model_cache *c, const model *m, int B);
void model_cache_free(model_cache *c);
/* Forward of the next T tokens ids [B,T] at positions c->len..c->len+T-1
 * (c->len + T <= context), attending to every earlier position through the
 * cache, which they extend.  Returns their logits [B,T,V]: the same as the
 * last T rows of model_forward over all c->len + T tokens.  No gradient. */
ag_tensor *model_forward_cached(ag_ctx *ctx, model *m, model_cache *c, const int32_t *ids, int B, int T);

#endif
