/*
 * tasks.h - the data attograd trains on: four toy next-token tasks (copy,
 * reverse, sort, add) with a held-out split that never leaks into training,
 * and character-level text read from a file, cut into batches of windows.
 */
#ifndef ATTOGRAD_TASKS_H
#define ATTOGRAD_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "attograd_io.h"

/* ---- toy tasks ---------------------------------------------------------- */

/*
 * An example is a fixed-length sequence seq[0..len] (len + 1 tokens).  The
 * model reads x = seq[0..len-1] and predicts y = seq[1..len].  The prompt is
 * seq[0..prompt-1]; the answer seq[prompt..len] is what greedy completion
 * must reproduce, and the only part the loss scores: y[t] = -1 (ignored)
 * unless t + 1 >= prompt.  data/README.md shows each layout.
 */
typedef enum task_kind { TASK_COPY, TASK_REVERSE, TASK_SORT, TASK_ADD } task_kind;

typedef struct task {
    task_kind kind;
    const char *name;       /* "copy", "reverse", "sort", "add" */
    const char *chars;      /* chars[i] is how token i is written; strlen = vocab */
    int vocab;              /* number of token ids */
    int len;                /* L: tokens the model reads (example has L + 1) */
    int prompt;             /* P: tokens given before the answer */
    int symbols;            /* distinct content symbols (copy/reverse/sort) */
    int k;                  /* content symbols in the prompt (copy/reverse/sort) */
    const char *example;    /* a well-formed prompt, for help and error text */
} task;

/* Fixed number of distinct held-out problems evaluated for copy and reverse,
 * whose problem spaces are too big to list. */
#define TASK_HELDOUT_SAMPLED 500

/* Fill *t for a task by name; 0, or -1 with a message naming the valid tasks. */
int task_open(task *t, const char *name, char *err, size_t errlen);
/* "copy, reverse, sort, add", for help text. */
const char *task_names(void);
/* The model's context T must hold the L tokens of an example. */
int task_check_context(const task *t, int T, char *err, size_t errlen);

/* One random training problem: seq gets L + 1 tokens; never a held-out one. */
void task_draw(const task *t, ag_pcg32 *rng, int32_t *seq);
/* Inputs and scored targets of one example: x, y get L tokens each. */
void task_split(const task *t, const int32_t *seq, int32_t *x, int32_t *y);
/* B training problems drawn from rng: x, y are B*L, row-major. */
void task_train_batch(const task *t, ag_pcg32 *rng, int B, int32_t *x, int32_t *y);
/* Fill seq[P..L] with the correct answer to the prompt seq[0..P-1]. */
void task_answer(const task *t, int32_t *seq);

/* Whether the problem posed by the prompt seq[0..P-1] is held out: a fixed
 * hash of the task name and the prompt tokens, ~1 in 10 (data/README.md). */
int task_is_heldout(const task *t, const int32_t *seq);
/* The held-out evaluation set, n examples of L + 1 tokens in a malloc'd
 * array (*seqs, caller frees); returns n, or -1 when out of memory.  sort
 * and add: every held-out problem in counting order (seed unused).  copy and
 * reverse: TASK_HELDOUT_SAMPLED distinct held-out problems drawn from a
 * generator seeded with seed. */
int task_heldout(const task *t, uint64_t seed, int32_t **seqs);

/* Tokens as text, one character each (out always NUL-terminated; tokens out
 * of range show as '?'). */
void task_format(const task *t, const int32_t *tokens, int n, char *out, size_t outlen);
/* Text back to tokens, whitespace ignored; returns the count, or -1 with a
 * message naming the first bad character or, past maxn tokens, how many
 * the text holds. */
int task_parse(const task *t, const char *text, int32_t *tokens, int maxn, char *err, size_t errlen);
/* Whether tokens[0..n-1] is a complete, well-formed prompt (n == P). */
int task_check_prompt(const task *t, const int32_t *tokens, int n, char *err, size_t errlen);

/* ---- character-level text ----------------------------------------------- */

/*
 * Each byte is one token; the vocabulary is a sorted list of distinct byte
 * values and a token id is an index in it.  tokens[0, n_train) is the
 * training split, tokens[n_train, n) the validation split, n_train =
 * n - n/10.
 */
typedef struct text_data {
    const char *name;       /* the file (or "text"), for error messages; not copied */
    uint8_t vocab[256];     /* token id -> byte, strictly increasing */
    int vocab_size;
    int16_t id[256];        /* byte -> token id, -1 when not in the vocabulary */
    int32_t *tokens;        /* n token ids (malloc'd; NULL when n == 0) */
    size_t n;
    size_t n_train;
} text_data;

enum { TEXT_TRAIN = 0, TEXT_VAL = 1 };

/* Read a whole file and take its vocabulary from the distinct bytes in it.
 * Errors name the file: cannot open, is a directory, read error, changed
 * size while reading, empty, only one distinct byte. */
int text_load(text_data *d, const char *path, char *err, size_t errlen);
/* The same against a given vocabulary (e.g. from a checkpoint): a byte outside
 * it is an error naming the byte and its offset.  vocab == NULL derives it. */
int text_load_vocab(text_data *d, const char *path, const uint8_t *vocab, int vocab_size,
                    char *err, size_t errlen);
/* From bytes in memory; name labels error messages (NULL: "text"). */
int text_from_bytes(text_data *d, const uint8_t *bytes, size_t n, char *err, size_t errlen);
int text_from_bytes_vocab(text_data *d, const char *name, const uint8_t *bytes, size_t n,
                          const uint8_t *vocab, int vocab_size, char *err, size_t errlen);
/* A vocabulary without text (n == 0), for encoding prompts with a checkpoint's
 * byte list: 1 to 256 strictly increasing bytes. */
int text_vocab_only(text_data *d, const uint8_t *vocab, int vocab_size, char *err, size_t errlen);
void text_free(text_data *d);

/* Training needs n_train >= T + 1 (one window and its next token); with
 * need_val the validation split needs n - n_train >= T + 1 as well. */
int text_check_context(const text_data *d, int T, int need_val, char *err, size_t errlen);

/* A C string to token ids; returns the count, or -1 with a message naming a
 * byte that is not in the vocabulary and its position, or saying the string
 * is longer than maxn. */
long text_encode(const text_data *d, const char *s, int32_t *out, size_t maxn, char *err, size_t errlen);
/* Token ids to bytes: writes min(n, outlen - 1) bytes and a NUL; returns the
 * number of bytes written.  Ids out of range become '?'. */
size_t text_decode(const text_data *d, const int32_t *tokens, size_t n, char *out, size_t outlen);

/* A training batch, x and y B*T row-major.  random_order: each row's start s
 * is uniform in [0, n_train - T) from rng.  Otherwise row b of step k starts
 * at ((k*B + b) * T) mod (n_train - T).  x = tokens[s, s+T), y = tokens[s+1, s+T].
 * Needs n_train >= T + 1 (text_check_context). */
void text_batch(const text_data *d, int random_order, ag_pcg32 *rng, long step, int B, int T,
                int32_t *x, int32_t *y);
/* Evaluation windows over a split of n tokens: the non-overlapping starts
 * s = 0, T, 2T, ... with s + T + 1 <= n.  Returns how many. */
size_t text_eval_windows(size_t n_split, int T);
/* Windows first, first+1, ... of split (TEXT_TRAIN or TEXT_VAL) into up to
 * B rows of x and y; returns the number of rows filled. */
int text_eval_batch(const text_data *d, int split, size_t first, int B, int T, int32_t *x, int32_t *y);
/* FNV-1a, 64 bits: from FNV1A64_BASIS, h = (h XOR byte) * 0x100000001b3 for
 * each byte.  Not a cryptographic hash, but any edit, reordering or append
 * changes it with overwhelming likelihood, at a multiply per byte.
 * fnv1a64 continues h over n bytes; fnv1a64_byte takes one. */
#define FNV1A64_BASIS 0xcbf29ce484222325ULL
static inline uint64_t fnv1a64_byte(uint64_t h, unsigned char byte) { return (h ^ byte) * 0x100000001b3ULL; }
uint64_t fnv1a64(uint64_t h, const void *bytes, size_t n);
/* The FNV-1a 64-bit hash of the text's bytes (the file as it was read), which
 * a checkpoint records beside the size to tell a changed file from the same. */
uint64_t text_fingerprint(const text_data *d);

#endif
