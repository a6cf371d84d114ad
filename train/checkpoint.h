/*
 * checkpoint.h - models and training runs as safetensors files.
 *
 * Tensors: the model's parameters under their PyTorch names, F32.  A run's
 * state for an exact --resume is in the same file: "optim.m.<param>" and
 * "optim.v.<param>" (the optimizer's moments, F32) and "state.rng" (U64 [4]:
 * the data and dropout generators' state and stream).  __metadata__ holds the
 * model config, the data source and vocabulary, the step, and the training
 * options a resume reuses (keys listed in checkpoint.c).
 */
#ifndef ATTOGRAD_CHECKPOINT_H
#define ATTOGRAD_CHECKPOINT_H

#include "model.h"
#include "attograd.h"

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

typedef struct ckpt {
    ag_st_file *file;
    const char *path;               /* as given to ckpt_open (not copied) */
    model_config cfg;
    long step;
    const char *data;               /* task name or "text" */
    uint8_t vocab[256];
    int vocab_size;
    int has_state;                  /* optimizer moments and generators present */
    int optim_kind;                 /* AG_SGD / AG_ADAMW when has_state */
} ckpt;

/* Read and validate everything (format, config ranges, vocabulary, every
 * tensor's presence, dtype and shape, nothing unknown), then build *m from
 * the saved config and weights.  -1 with a one-line message naming the file
 * on any problem, and then nothing is left allocated. */
int ckpt_open(ckpt *c, const char *path, model *m, char *err, size_t errlen);
/* Restore optimizer moments and step, and the generators. */
void ckpt_load_state(const ckpt *c, ag_optim *opt, ag_pcg32 *data_rng, ag_pcg32 *dropout_rng);
const char *ckpt_meta(const ckpt *c, const char *key);
void ckpt_close(ckpt *c);

#endif
