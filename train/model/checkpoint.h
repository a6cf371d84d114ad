/*
 * checkpoint.h - models and training runs as safetensors files.
 *
 * Tensors: the model's parameters under their PyTorch names, F32.  A run's
 * state for an exact --resume is in the same file: "optim.m.<param>" and
 * "optim.v.<param>" (the optimizer's moments, F32) and "state.rng" (U64 [4]:
 * the data and dropout generators' state and stream).  __metadata__ holds the
 * model config, the data source and vocabulary, the step, and the training
 * settings a resume reuses (run.h's RUN_RECORDED).
 */
#ifndef ATTOGRAD_CHECKPOINT_H
#define ATTOGRAD_CHECKPOINT_H

#include "model.h"
#include "attograd_io.h"

#define CKPT_FORMAT "attograd/1"

/* What a run adds to a checkpoint so it can be resumed; NULL = weights only. */
typedef struct ckpt_state {
    const ag_optim *optim;
    const ag_pcg32 *data_rng, *dropout_rng;
    const char *const *options;     /* extra metadata pairs: key, value, ... */
    int n_options;
} ckpt_state;

/* Write atomically through out (ag_atomic_open ... ag_atomic_commit, so a
 * signal handler can discard it); data_name: a task name or "text". */
int ckpt_save(ag_atomic_file *out, const char *path, const model *m, const char *data_name, const uint8_t *vocab,
              int vocab_size, long step, const ckpt_state *state, char *err, size_t errlen);

/* What the caller knows of a file that does not say everything: a
 * PyTorch state_dict saved without attograd's metadata. */
typedef struct ckpt_hints {
    int heads;                      /* the number of heads; 0 = not known */
    const char *task;               /* the data, when the file names none */
    const char *text;               /* a text file: the data, and the vocabulary (the file's
                                     * sorted distinct bytes) when the file lists none */
    int data_optional;              /* the data may stay unknown (data NULL) */
    int forward_only;               /* the model will only run forward (eval, sample, info):
                                     * its parameters get no gradients (ag_params_alloc_no_grad),
                                     * and the optimizer state is checked but not kept */
} ckpt_hints;

/* What a file does not say that hints can (ckpt.needs). */
enum { CKPT_HEADS = 1, CKPT_DATA = 2, CKPT_VOCAB = 4 };

typedef struct ckpt {
    ag_st_file *file;
    const char *path;               /* as given to ckpt_open_hints (not copied) */
    model_config cfg;
    long step;                      /* -1 when the file does not say */
    const char *data;               /* task name or "text"; NULL only with data_optional */
    char data_name[64];
    uint8_t vocab[256];
    int vocab_size;                 /* 0 when unknown (data_optional) */
    int foreign;                    /* not written by attograd (no format attograd/1) */
    char note[640];                 /* what loading assumed (tied weights), or "" */
    int has_state;                  /* optimizer moments and generators present */
    int optim_kind;                 /* AG_SGD / AG_ADAMW when has_state */
    long optim_step;
    /* Why ckpt_open_hints failed, where hints could mend it, for a caller
     * that words its own advice: */
    int needs;                      /* CKPT_*: what neither the file nor the hints say */
    int heads_refused;              /* hints->heads contradicts the metadata's n_head (then
                                     * cfg.n_head) or does not divide cfg.d_model */
} ckpt;

/* Read and validate everything (format, config ranges, vocabulary, every
 * tensor's presence, dtype and shape, nothing unknown), then build *m from
 * the config and weights.  -1 with a one-line message naming the file on any
 * problem, and then nothing is left allocated.
 *
 * Metadata values are parsed as JSON.  Only the architecture is required,
 * and where the metadata does not give it, the tensors do: vocab_size and
 * d_model from tok_emb.weight, context_length from pos_emb.weight, n_layer
 * from the blocks present, arch from the layer norms, qkv_bias from the
 * query bias; n_head from hints->heads.  The data comes from hints->task or
 * hints->text when the file names none, and the vocabulary from the task or
 * the text.  Everything still unknown is reported in one message.  dropout
 * (0) and step (-1) are optional.  Weights in F64, F16 or BF16 are converted
 * to float; a file not written by attograd may store tok_emb.weight and
 * out_head.weight once (tied), which c->note then says.  A task model whose
 * vocabulary or context does not fit its task is refused.  hints may be
 * NULL: attograd's own metadata is then needed for heads, data and vocab. */
int ckpt_open_hints(ckpt *c, const char *path, model *m, const ckpt_hints *hints, char *err, size_t errlen);
/* Restore optimizer moments and step, and the generators (of a file not
 * opened forward_only, which keeps no moments). */
void ckpt_load_state(const ckpt *c, ag_optim *opt, ag_pcg32 *data_rng, ag_pcg32 *dropout_rng);
const char *ckpt_meta(const ckpt *c, const char *key);
/* A metadata value in a message is cut to its first META_SHOWN bytes
 * ("%.40s%s", v, meta_more(v)): meta_more is "..." when that cut something,
 * else "" (and "" for NULL). */
#define META_SHOWN 40
const char *meta_more(const char *v);
/* The file's tensor bytes released (a run's optimizer moments, once
 * ckpt_load_state has copied them), its metadata kept until ckpt_close. */
void ckpt_drop_tensors(ckpt *c);
void ckpt_close(ckpt *c);

#endif
