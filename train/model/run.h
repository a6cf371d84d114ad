/*
 * run.h - what the subcommands share: the data a model trains on (a toy
 * task or a text file), evaluation (loss, and exact-match accuracy of greedy
 * completions on a task's held-out problems), sampling, and timing.
 */
#ifndef ATTOGRAD_RUN_H
#define ATTOGRAD_RUN_H

#include "attograd.h"
#include "checkpoint.h"
#include "model.h"
#include "tasks.h"

typedef struct dataset {
    int is_task;
    task task;
    text_data text;
    int32_t *heldout;       /* task: n_heldout examples of len + 1 tokens */
    int n_heldout;
} dataset;

/* Open a task by name, or a text file (vocab == NULL: derived from the file). */
int dataset_open_task(dataset *d, const char *name, uint64_t seed, char *err, size_t errlen);
int dataset_open_text(dataset *d, const char *path, const uint8_t *vocab, int vocab_size, char *err, size_t errlen);
void dataset_free(dataset *d);
int dataset_vocab_size(const dataset *d);
/* Tokens per training row for a model of context T: the task's L, or T. */
int dataset_seq_len(const dataset *d, int T);
/* One training batch: x, y are B * seq_len. */
void dataset_batch(const dataset *d, int random_order, ag_pcg32 *rng, long step, int B, int T,
                   int32_t *x, int32_t *y);

typedef struct eval_result {
    double loss;            /* mean next-token cross-entropy over scored tokens */
    long correct, total;    /* task: exact-match greedy completions */
} eval_result;

/* Windows of the validation split each evaluation during training scores
 * (the last one scores them all). */
#define TRAIN_EVAL_WINDOWS 100

/* split: TEXT_TRAIN, TEXT_VAL, or -1 for all (text only).  Text: every
 * non-overlapping window, or at most max_windows of them when > 0.
 * Task: the held-out problems.  Scored `batch` items at a time (eval_group),
 * the groups added up in order. */
eval_result evaluate(ag_ctx *ctx, model *m, dataset *d, int split, long max_windows, int batch);
/* What evaluate is made of, for whoever splits the groups between ranks:
 * the items (windows of one split, or held-out problems) it scores; one
 * group, items [first, first + rows), into v = its summed loss, counted
 * targets and exact completions (a task's); and the result of the groups'
 * sums, added in group order. */
long eval_items(const dataset *d, const model *m, int split, long max_windows);
void eval_group(ag_ctx *ctx, model *m, dataset *d, int split, long items, long first, int rows, double v[3]);
eval_result eval_result_of(const dataset *d, const double total[3]);
/* Greedy completion in place: seqs are n rows of stride tokens, each with its
 * first `prompt` tokens set; positions prompt..len are filled. */
void complete_greedy(ag_ctx *ctx, model *m, int32_t *seqs, int n, int stride, int prompt, int len, int batch);
/* Sample up to n_new tokens after tokens[0..n) (buffer of n + n_new):
 * temperature 0 = greedy; top_k 0 = no cut.  Uses the last `context` tokens.
 * each (if not NULL) is called with every new token as it is drawn and
 * stops the sampling by returning non-zero.  Returns the tokens now in the
 * buffer. */
int sample_tokens(ag_ctx *ctx, model *m, int32_t *tokens, int n, int n_new, double temperature, int top_k,
                  ag_pcg32 *rng, int (*each)(void *user, int32_t token), void *user);

/* A text is the one a checkpoint was trained on as it was then: the size
 * and FNV-1a hash (text_fingerprint) recorded in its metadata (text_bytes,
 * text_fnv1a64) match.  -1 with one line saying what changed; 0 when they
 * match or the checkpoint recorded none. */
int text_check_unchanged(const ckpt *ck, const text_data *d, char *err, size_t errlen);

/* The input of one step shown on its own (attograd graph, the playground's
 * graph view), into *x and *y (allocated together: free(*x)): for a task
 * (data names it), one training problem drawn from seed and split as in
 * training (only answer tokens scored); for "text" (or data NULL: not
 * recorded), the vocabulary in order, each id predicting the next.  tokens 0: the whole problem, or min(context, 8).  *room: the most
 * tokens there can be (the task's length, or the context).  Returns the
 * tokens, or -1 with err (tokens > *room, an unknown task, no memory). */
int example_input(const char *data, const model *m, int tokens, uint64_t seed, int32_t **x, int32_t **y, int *room,
                  char *err, size_t errlen);

/* Learning rate at 0-based `step`: linear warmup over `warmup` steps to lr, then
 * cosine decay to min_lr at `total` steps (constant lr when cosine == 0). */
double lr_schedule(int cosine, long step, long warmup, long total, double lr, double min_lr);

double now_seconds(void);
/* "1.23 M", "456 k": for parameter counts and rates. */
const char *human(double v, char *buf, size_t len);

#endif
