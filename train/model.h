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

typedef struct model_config {
    int arch;               /* ARCH_GPT or ARCH_ATTN_ONLY */
    int vocab_size;
    int n_layer, n_head, d_model;
    int context;            /* T: positions the model knows */
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
    ag_tensor *tok_emb, *pos_emb;   /* [V,d], [T,d] */
    model_block *blocks;
    nn_layer_norm final_norm;       /* gpt only */
    nn_linear out_head;             /* [V,d], no bias */
    int32_t *positions;             /* 0, 1, ..., context-1: ids into pos_emb */
} model;

const char *model_arch_name(int arch);
/* -1 when the name is not an architecture. */
int model_arch_parse(const char *name);
/* Bytes for parameters + gradients (what ag_params will allocate). */
double model_param_bytes(const model_config *cfg);
/* The number of parameters a configuration has, without building it. */
double model_param_count(const model_config *cfg);

/* Register and allocate every parameter (zeroed). */
void model_build(model *m, const model_config *cfg);
/* Weights ~ N(0, 0.02), biases 0, layer-norm weights 1, drawn in registration order. */
void model_init(model *m, ag_pcg32 *rng);
/* Copy every weight of src into dst, a model of the same architecture,
 * layers, heads, width and vocabulary whose context may be shorter: its
 * position embeddings are src's first rows (cropping, as nanoGPT does). */
void model_copy_weights(model *dst, const model *src);
void model_free(model *m);

/* ids: [B,T] with T <= context.  Returns logits [B,T,V].  attn_out, if not
 * NULL, receives each layer's attention weights [B,H,T,T] (n_layer entries). */
ag_tensor *model_forward(ag_ctx *ctx, model *m, const int32_t *ids, int B, int T, int training,
                         ag_tensor **attn_out);

#endif
