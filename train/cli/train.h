/*
 * train.h - `attograd train` in three steps: cmd_train.c reads and checks
 * the options, train_setup.c builds the data, the model and the optimizer
 * from them, train_loop.c runs the steps (train/model/step.c).
 */
#ifndef ATTOGRAD_TRAIN_H
#define ATTOGRAD_TRAIN_H

#include <limits.h>

#include "checkpoint.h"
#include "open.h"
#include "run.h"
#include "step.h"

typedef struct train_opts {
    const char *task, *text, *arch, *optimizer, *schedule, *order, *log_path;
    const char *save, *init, *resume, *precision;
    int layers, heads, d_model, context, qkv_bias, batch, threads, quiet;
    int accept_changed_data;    /* --resume on a text that changed since the checkpoint */
    int truncate_log;           /* --resume: drop the log's rows past the checkpoint's step */
    double dropout, lr, momentum, weight_decay, beta1, beta2, eps, clip, min_lr;
    long steps, eval_every, log_every, warmup, save_every;
    int64_t seed;
    long schedule_steps;        /* the --steps the schedule was set for (see cmd_train.c) */
    int micro_batch;            /* rows per micro-batch; 0: whole batches (see microbatch.h) */
    long mpi_timeout;           /* seconds a rank waits for the others (dist.h) */
} train_opts;

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
    run_record record;          /* the settings its checkpoints record (run.h) */
    char text_path[PATH_MAX];   /* --text, absolute, as saved: found from any directory */
    char log_abs[PATH_MAX];     /* --log, absolute, as saved: --resume continues it */
    FILE *log;                  /* --log, or NULL */
    int log_failed;             /* a write to the log failed: it was closed, and the run exits 1 */
    struct mb_plan *mb;         /* micro-batched steps (train_dist.c), or NULL: whole batches */
    const char *fault_save;     /* --save on every rank: where the rank that saves after a fault writes */
    const char *kept;           /* a resumed run at its last step: its file, the save's target, not rewritten */
} trainer;

/* Data, model, optimizer, generators and the log, from t->o and t->ck;
 * exits 2 with one line on anything that does not fit. */
void train_setup(trainer *t);
/* The steps from t->start to t->o.steps, then the final save and summary;
 * returns the exit status (0, 1 save or log failed, 3 diverged, 128 + signal). */
int train_loop(trainer *t);
void train_free(trainer *t);
/* From here on SIGUSR1 asks the run for a checkpoint after the current
 * step (train_loop.c); before, it is ignored (main.c). */
void train_watch_save_signal(void);

/* train_dist.c: training on several ranks (dist.h), or in micro-batches on
 * one (microbatch.h).  After the options and files are checked: the number
 * of ranks and the micro-batch (exit 2 with one line when they do not fit
 * the batch); ranks above 0 drop their outputs. */
struct opt;
void train_dist_configure(trainer *t, struct opt *micro_batch);
/* In train_setup, once the data, the model and its state are there and
 * before the log is written: every rank was given the same (exit 2 with
 * one line when not). */
void train_dist_check(trainer *t);
/* After train_setup: the micro-batch plan and its line of configuration. */
void train_dist_setup(trainer *t);
/* Draw the batch of `step` and leave its gradient in the parameters' (every
 * rank the same); returns the loss. */
double train_dist_gradient(trainer *t, long step);
/* The validation loss (and a task's held-out accuracy) as the run scores
 * it; progress (NULL: none) is told how far it is. */
eval_result train_evaluate(trainer *t, long max_windows, const eval_progress *progress);
/* What the ranks agree on after each step, the same on every rank: the
 * stop signal any rank has received (0: none), and the most SIGUSR1s any
 * rank has counted (a save is asked for when that grows). */
typedef struct train_requests {
    int stop;
    long saves;
} train_requests;
train_requests train_dist_requests(int stop, long saves);
/* The process's exit status, after leaving the run. */
int train_dist_end(trainer *t, int status);

#endif
