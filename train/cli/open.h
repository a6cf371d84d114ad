/*
 * open.h - what the subcommands share above the model library: a
 * checkpoint opened, and checked against --task and --text, with one-line
 * errors; the data a saved model is scored on; --precision and --heads.
 */
#ifndef ATTOGRAD_OPEN_H
#define ATTOGRAD_OPEN_H

#include "args.h"
#include "checkpoint.h"
#include "run.h"

/* ckpt_open_hints for a subcommand, then the --task and --text of hints
 * checked against the data the checkpoint names (check_data_flags): on any
 * problem (also --task and --text both given), its one-line message and
 * exit 2; a note from loading (tied weights) goes to stderr. */
void open_model(const char *cmd, const char *path, const ckpt_hints *hints, ckpt *ck, model *m);
/* The one check of a checkpoint's data against the flags: --task or --text
 * given beside a checkpoint that names its data must agree with it;
 * otherwise one line and exit 2. */
void check_data_flags(const char *cmd, const ckpt *ck, const char *task_name, const char *text);
/* dataset_open_text of a file that passes input_check (a regular file
 * within TEXT_MAX_BYTES, files.h). */
int open_text(dataset *d, const char *path, const uint8_t *vocab, int vocab_size, char *err, size_t errlen);
/* Whether path is the file the model was trained on, which a checkpoint
 * names in its metadata text_path: the same device and inode. */
int is_training_file(const ckpt *ck, const char *path);
/* The data a saved model is scored on: its task by name (held-out problems
 * from seed), or the --text file read with the model's own vocabulary. */
void open_model_data(const char *cmd, dataset *d, const ckpt *ck, const char *text, uint64_t seed);

/* The options of a subcommand that reads a saved model. */
typedef struct saved_model {
    const char *path;           /* --model FILE */
    const char *task, *text;    /* --task NAME, --text FILE */
    const char *precision;      /* --precision */
    int heads, threads;         /* --heads N, --threads N */
} saved_model;
/* Rows of their option tables: --task and --text for a file that does not
 * say what it was trained on (sample, attn), --heads, --threads. */
#define SAVED_TASK_OPT(a) { "--task", OPT_STRING, &(a).task, "NAME", "the model's task, for a file that does not name it", 0, 0, 0, 0, 0 }
#define SAVED_VOCAB_OPT(a) { "--text", OPT_STRING, &(a).text, "FILE", "a text model's vocabulary: FILE's sorted distinct bytes, for a file that does not list it", 0, 0, 0, 0, 0 }
#define THREADS_OPT(a, dflt) { "--threads", OPT_INT, &(a).threads, "N", "threads; 0 = all cores (default" dflt ")", 0, 1024, 0, 0, 0 }
/* The rows of a command that reads a model from a file that may not say
 * everything (sample, attn): --threads, --task, --text, --heads. */
#define SAVED_MODEL_OPTS(a) THREADS_OPT(a, ""), SAVED_TASK_OPT(a), SAVED_VOCAB_OPT(a), HEADS_OPT((a).heads)
/* open_model of a->path with a's --heads, --task and --text; how: 0 or
 * OPEN_DATA_OPTIONAL (the data may stay unknown: graph), or'ed with
 * OPEN_FORWARD_ONLY (a model that is only run forward, whose parameters
 * need no gradients: eval, sample, attn). */
enum { OPEN_DATA_OPTIONAL = 1, OPEN_FORWARD_ONLY = 2 };
void open_saved(const char *cmd, const saved_model *a, int how, ckpt *ck, model *m);
/* --text beside a file that lists its vocabulary (sample, attn): the text
 * must stay inside it, else one line and exit 2; a --text that does
 * nothing is not taken without a look. */
void check_vocab_text(const char *cmd, const ckpt *ck, const char *text);

/* --precision: "fp32" (AG_FP32) or "bf16" (AG_BF16); anything else, or
 * bf16 where this build or CPU has no bf16 products, is one line and exit 2. */
int precision_parse(const char *cmd, const char *name);
/* A model whose forward pass overflows (finite weights too large for its
 * arithmetic: 1e38 in float) gives NaN where a loss, a token or an
 * attention weight is due.  When v (a loss, or a sum of values times 0) is
 * not finite: one line naming the file and exit 2, before anything is
 * printed; precision is the one the model ran in. */
void refuse_overflow(const char *cmd, const char *path, double v, int precision);
/* 0, or NaN when a logit of the forward pass of ids [1, n] in ctx's
 * precision is not finite (the arena is reset before and after). */
double forward_check(ag_ctx *ctx, model *m, const int32_t *ids, int n);
#define PRECISION_OPT(p) { "--precision", OPT_STRING, &(p), "P", "matrix multiplies: fp32 (default) or bf16 (bf16 inputs, fp32 sums)", 0, 0, 0, 0, 0 }
#define HEADS_OPT(h) { "--heads", OPT_INT, &(h), "N", "attention heads, for a file that does not say (e.g. a PyTorch state_dict)", 1, 4096, 0, 0, 0 }

#endif
