/*
 * train.h - `attograd train` in three steps: cmd_train.c reads and checks
 * the options, train_setup.c builds the data, the model and the optimizer
 * from them, train_loop.c runs the steps (train_step is one of them).
 */
#ifndef ATTOGRAD_TRAIN_H
#define ATTOGRAD_TRAIN_H

#include "checkpoint.h"
#include "run.h"

typedef struct train_opts {
    const char *task, *text, *arch, *optimizer, *schedule, *order, *log_path;
    const char *save, *init, *resume, *precision;
    int layers, heads, d_model, context, qkv_bias, batch, threads, quiet;
    double dropout, lr, momentum, weight_decay, beta1, beta2, eps, clip, min_lr;
    long steps, seed, eval_every, log_every, warmup, save_every;
    long schedule_steps;        /* the --steps the schedule was set for (see cmd_train.c) */
} train_opts;

/* The training options a run's checkpoint keeps for --resume (cmd_train.c
 * fills them in): metadata key, value, key, value... */
enum { TRAIN_SAVED_MAX = 20 };

/* A run, from setup to the end. */
typedef struct trainer {
    train_opts o;
    const char *from;           /* the --init or --resume checkpoint, or NULL */
    ckpt ck;                    /* its contents when from is set */
    int adamw, cosine, random_order;
    int precision;              /* AG_FP32 or AG_BF16: the matrix multiplies' */
    dataset data;
    uint8_t vocab[256];         /* token id -> byte (text) or character (task) */
    int vocab_size;
    model m;
    ag_ctx *ctx;                /* the arena every step's tensors come from */
    ag_optim *optim;
    ag_pcg32 data_rng;          /* which windows or problems each batch holds */
    int B, S;                   /* batch rows, tokens per row */
    double estimate;            /* bytes the run was estimated to need at its peak */
    int32_t *x, *y;             /* one batch's inputs and targets, [B,S] each */
    long start;                 /* steps taken before this run (--resume) */
    const char *saved[2 * TRAIN_SAVED_MAX];
    char saved_values[TRAIN_SAVED_MAX][40];
    int n_saved;
    FILE *log;                  /* --log, or NULL */
} trainer;

/* Data, model, optimizer, generators and the log, from t->o and t->ck;
 * exits 2 with one line on anything that does not fit. */
void train_setup(trainer *t);
/* The steps from t->start to t->o.steps, then the final save and summary;
 * returns the exit status (0, 1 save failed, 3 diverged, 128 + signal). */
int train_loop(trainer *t);
void train_free(trainer *t);

#endif
