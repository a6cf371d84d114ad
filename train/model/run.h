/*
 * run.h - what the subcommands share: the data a model trains on (a toy
 * task or a text file), evaluation (loss, and exact-match accuracy of greedy
 * completions on a task's held-out problems), sampling, timing, and the
 * settings of a run that its checkpoint records.
 */
#ifndef ATTOGRAD_RUN_H
#define ATTOGRAD_RUN_H

#include <math.h>
#include <signal.h>

#include "attograd.h"
#include "checkpoint.h"
#include "model.h"
#include "number.h"
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
    int stopped;            /* cut short (eval_progress.stop): the stop value; loss and counts are partial */
} eval_result;

/* Windows of the validation split each evaluation during training scores
 * (the last one scores them all). */
#define TRAIN_EVAL_WINDOWS 100

/* Told after each group an evaluation scores how many of its items are
 * done, of how many: a program shows progress on a long one (every window
 * of a large text).  A NULL eval_progress, or fn, tells nobody.  stop, when
 * set, is looked at after each group: once it is non-zero (a signal handler
 * sets it) the evaluation ends there, cut short, its result's `stopped` set
 * to that value, so a long one stops within a group of a Ctrl-C. */
typedef struct eval_progress {
    void (*fn)(void *user, long done, long total);
    void *user;
    volatile sig_atomic_t *stop;
} eval_progress;

/* split: TEXT_TRAIN, TEXT_VAL, or -1 for all (text only).  Text: every
 * non-overlapping window, or at most max_windows of them when > 0.
 * Task: the held-out problems.  Scored `batch` items at a time (eval_group),
 * the groups added up in order. */
eval_result evaluate(ag_ctx *ctx, model *m, dataset *d, int split, long max_windows, int batch,
                     const eval_progress *progress);
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
 * text_fnv1a64) match.  -1 with one line saying what differs; 0 when they
 * match or the checkpoint recorded none; -2 with one line when what it
 * recorded is not a byte count and 16 hex digits.  same_file: d was read from the
 * file the checkpoint names (text_path), so a difference is that file's
 * change ("has changed since"); 0: another file, or one not known to be
 * it, which "differs from" the text named. */
int text_check_unchanged(const ckpt *ck, const text_data *d, int same_file, char *err, size_t errlen);

/* The input of one step shown on its own (attograd graph, the playground's
 * graph view), into *x and *y (allocated together: free(*x)): for a task
 * (data names it), one training problem drawn from seed and split as in
 * training (only answer tokens scored); for "text" (or data NULL: not
 * recorded), the vocabulary in order, each id predicting the next.  tokens 0: the whole problem, or min(context, 8).  *room: the most
 * tokens there can be (the task's length, or the context).  Returns the
 * tokens, or -1 with err (tokens > *room, an unknown task, no memory). */
int example_input(const char *data, const model *m, int tokens, uint64_t seed, int32_t **x, int32_t **y, int *room,
                  char *err, size_t errlen);

/* ---- a run's settings, as its checkpoint records them ----------------------
 *
 * The one list of what a run's checkpoint keeps so that a resume (train
 * --resume, the playground's Open checkpoint) continues the run exactly:
 * the command and the playground write and read it through RUN_RECORDED. */
typedef struct run_settings {
    double lr, momentum, weight_decay, beta1, beta2, eps, clip, min_lr;
    long warmup;                /* cosine: steps of linear warmup */
    int batch;
    int64_t seed;               /* 64 bits wherever a long is 32 (WebAssembly) */
    long steps;
    const char *schedule;       /* "constant" or "cosine" */
    const char *order;          /* text windows: "random" or "sequential" */
    const char *precision;      /* the matrix multiplies': "fp32" or "bf16" */
    long schedule_steps;        /* the steps the schedule was set for: a resume asked
                                 * for more steps does not stretch it */
    const char *text_path;      /* the text trained on; NULL: a task */
    int micro_batch;            /* rows per micro-batch; 0: whole batches */
    const char *log_path;       /* the run's CSV log, continued on resume; or NULL */
} run_settings;

/* The ranges of a run's batch and learning rate, as `attograd train` and
 * the playground check them. */
enum { RUN_MAX_BATCH = 1 << 20 };
#define RUN_MAX_LR 1e6
/* The largest seed: 9200000000000000000, exactly (a double, as the ranges
 * are; integers are compared with it as integers, run_int_in_range). */
#define RUN_MAX_SEED 9.2e18

/* Whether an integer v is in the range [min, max] (or (min, max] when
 * min_open) of the doubles that bound a setting, compared exactly: through
 * a double, 9200000000000000512 would compare equal to 9.2e18.  A bound at
 * or past 2^63 in size bounds nothing a long long holds. */
static inline int run_int_in_range(long long v, double min, int min_open, double max)
{
    const double top = 0x1p63;    /* 2^63: past every long long */
    if (!(min < -top)) {
        if (min >= top)
            return 0;
        const double least = min_open ? floor(min) + 1 : ceil(min);   /* the least whole number in range */
        if (least >= top || v < (long long)least)
            return 0;
    }
    if (!(max >= top)) {
        if (max < -top)
            return 0;
        const double most = floor(max);
        if (most < -top || v > (long long)most)
            return 0;
    }
    return 1;
}

/* What a run starts from (`attograd train`'s defaults, the playground's);
 * lr 0: run_default_lr's for the optimizer. */
extern const run_settings RUN_DEFAULTS;
double run_default_lr(int adamw);

typedef enum { RUN_REAL, RUN_LONG, RUN_INT64, RUN_INT, RUN_WORD, RUN_PATH } run_kind;

/* One recorded setting: its metadata key, its type and place in
 * run_settings, the words it may be (RUN_WORD), and what a checkpoint
 * without the key means: NULL, the run cannot be resumed; "", the setting
 * is unset (0 or NULL; an unset setting is not recorded); "@KEY", the value
 * recorded as KEY; else this value.  A number's range, [min, max] ((min,
 * max] when min_open), is the one place it is kept: `attograd train`'s
 * flag for the setting takes it from here (its option row), and a
 * checkpoint's value is checked against it wherever a run is resumed. */
typedef struct run_recorded {
    const char *key;
    run_kind kind;
    size_t offset;
    const char *const *words;
    const char *missing;
    double min, max;
    int min_open;
} run_recorded;

/* In the order of the metadata.  A text's identity (text_bytes and
 * text_fnv1a64, text_check_unchanged) is recorded after text_path. */
enum { RUN_N_RECORDED = 19 };
extern const run_recorded RUN_RECORDED[RUN_N_RECORDED];

/* The model's dropout probability: recorded with the architecture
 * (checkpoint.c), not among the run's settings, but its range is kept here
 * with theirs: `attograd train --dropout` takes it from this row, and a
 * checkpoint that `train --resume` or `--init` opens is checked against it
 * (run_dropout_read), the value read the way the flag reads it. */
extern const run_recorded RUN_DROPOUT;
/* ck's dropout into *p (0 when the file records none): 0, or -1 with one
 * line naming the file and saying what the value must be. */
int run_dropout_read(const ckpt *ck, double *p, char *err, size_t errlen);

/* The metadata pairs of a run's settings (ckpt_state.options). */
enum { RUN_RECORD_MAX = RUN_N_RECORDED + 2 };
typedef struct run_record {
    const char *kv[2 * RUN_RECORD_MAX];     /* key, value, key, value, ... */
    char values[RUN_RECORD_MAX][40];        /* the numbers, as text */
    int n;                                  /* pairs */
} run_record;

/* s as metadata pairs in r: numbers as text that reads back to the same
 * value (reals to 17 digits), words and paths as they are (r points at
 * them), unset settings left out; text: the text's identity, recorded when
 * s->text_path is set. */
void run_record_write(run_record *r, const run_settings *s, const text_data *text);
/* Setting k of s from text, as the metadata holds it: a decimal number in
 * k's range (whole for an integer kind), or one of k's words (s then points
 * at the word of the table), or a path (s points at text).  -1, with s
 * unchanged, when it is none. */
int run_setting_set(run_settings *s, const run_recorded *k, const char *text);
/* What a value of k must be, as a clause for a message: "it must be a
 * number >= 0 and <= 0.999999", "it must be constant or cosine". */
void run_setting_allowed(const run_recorded *k, char *buf, size_t len);
/* The row of RUN_RECORDED for key, or NULL. */
const run_recorded *run_recorded_find(const char *key);
/* What ck records for k, its `missing` applied: the text, or NULL when the
 * key is absent and the setting unset or required. */
const char *run_recorded_text(const ckpt *ck, const run_recorded *k);
/* Every recorded setting of ck into s (paths point into ck's metadata,
 * valid while ck is open).  -1 with one line naming the file and the key
 * when a required one is absent or a value is not valid (saying what it
 * must be), or when the settings contradict each other as a new run's are
 * refused (a cosine schedule's warmup past its steps, or its min_lr above
 * its lr).  `attograd train --resume` and the playground's Open checkpoint
 * both refuse a run this refuses. */
int run_settings_read(run_settings *s, const ckpt *ck, char *err, size_t errlen);

/* Learning rate at 0-based `step`: linear warmup over `warmup` steps to lr, then
 * cosine decay to min_lr at `total` steps (constant lr when cosine == 0). */
double lr_schedule(int cosine, long step, long warmup, long total, double lr, double min_lr);

double now_seconds(void);
/* "1.23 M", "456 k": for parameter counts and rates. */
const char *human(double v, char *buf, size_t len);

#endif
