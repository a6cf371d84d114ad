/*
 * fuzz_text.c - libFuzzer entry point for the character-level text reader
 * and the task prompt parser.  Any bytes are either refused with a message
 * or become tokens that decode back to exactly those bytes, whose training
 * and evaluation windows stay inside their split.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc -Itrain/model tests/fuzz_text.c train/model/tasks.c src/pcg32.c -o fuzz_text
 *   ./fuzz_text corpus tests/corpus/text -max_total_time=60
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* pcg32.c names a NULL generator through the engine's error handler, which
 * is not linked here (tensor.c): the reader never passes one, so it is a
 * bug there too. */
void ag_error(const char *fmt, ...)
{
    (void)fmt;
    abort();
}

/* A broken invariant is a bug in the reader: crash so the fuzzer records it. */
#define MUST(cond) do { if (!(cond)) abort(); } while (0)

enum { MAX_T = 64, ROWS = 3 };

/* The vocabulary is strictly increasing, id[] is its inverse (and -1 for
 * bytes outside it), and the tokens spell the input. */
static void check_text(const text_data *d, const uint8_t *bytes, size_t n)
{
    MUST(d->vocab_size >= 2 && d->vocab_size <= 256);
    for (int i = 1; i < d->vocab_size; i++)
        MUST(d->vocab[i] > d->vocab[i - 1]);
    int mapped = 0;
    for (int b = 0; b < 256; b++) {
        if (d->id[b] < 0)
            continue;
        MUST(d->id[b] < d->vocab_size && d->vocab[d->id[b]] == b);
        mapped++;
    }
    MUST(mapped == d->vocab_size);
    MUST(d->n == n && d->n_train == n - n / 10 && d->tokens);
    for (size_t i = 0; i < n; i++)
        MUST(d->tokens[i] >= 0 && d->tokens[i] < d->vocab_size && d->vocab[d->tokens[i]] == bytes[i]);
    /* decode is the exact inverse, and never writes past outlen */
    char *out = malloc(n + 1);
    MUST(out);
    MUST(text_decode(d, d->tokens, n, out, n + 1) == n && memcmp(out, bytes, n) == 0 && out[n] == 0);
    if (n > 1)
        MUST(text_decode(d, d->tokens, n, out, n) == n - 1 && out[n - 1] == 0);
    free(out);
}

/* Windows of T tokens: x = tokens[s, s+T) and y = x shifted by one, with
 * s + T inside the split (training) or s = jT, s + T + 1 <= n (evaluation). */
static void check_windows(const text_data *d, int T, long step)
{
    char err[512] = "";
    int ok = text_check_context(d, T, 0, err, sizeof err) == 0;
    MUST(ok == (d->n_train >= (size_t)T + 1));
    MUST(ok || err[0]);
    if (!ok)
        return;
    int32_t x[ROWS * MAX_T], y[ROWS * MAX_T];
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, (uint64_t)step, 3);
    for (int order = 0; order < 2; order++) {
        text_batch(d, order, &rng, step, ROWS, T, x, y);
        for (int r = 0; r < ROWS; r++) {
            const int32_t *xr = x + r * T, *yr = y + r * T;
            /* find the window: the first start s whose T+1 tokens match */
            size_t s = 0, m = d->n_train - (size_t)T;
            while (s < m && (memcmp(d->tokens + s, xr, (size_t)T * sizeof *xr) != 0 ||
                             d->tokens[s + T] != yr[T - 1]))
                s++;
            MUST(s < m);
            MUST(memcmp(xr + 1, yr, (size_t)(T - 1) * sizeof *xr) == 0);
        }
    }
    for (int split = TEXT_TRAIN; split <= TEXT_VAL; split++) {
        size_t n = split == TEXT_VAL ? d->n - d->n_train : d->n_train;
        const int32_t *base = d->tokens + (split == TEXT_VAL ? d->n_train : 0);
        size_t windows = text_eval_windows(n, T);
        MUST(windows * (size_t)T + 1 <= n || windows == 0);
        MUST((windows + 1) * (size_t)T + 1 > n);
        size_t first = windows > 1 ? windows - 2 : 0;
        int rows = text_eval_batch(d, split, first, ROWS, T, x, y);
        MUST(rows >= 0 && (size_t)rows == (windows - first < ROWS ? windows - first : ROWS));
        for (int r = 0; r < rows; r++) {
            const int32_t *w = base + (first + (size_t)r) * (size_t)T;
            MUST(memcmp(x + r * T, w, (size_t)T * sizeof *x) == 0);
            MUST(memcmp(y + r * T, w + 1, (size_t)T * sizeof *y) == 0);
        }
    }
}

/* A prompt string (up to the first NUL) against a vocabulary: encoded ids
 * spell it, or the message is about length or an unknown byte. */
static void check_encode(const text_data *d, const char *s, size_t maxn)
{
    size_t len = strlen(s);
    int32_t *out = malloc((maxn + 1) * sizeof *out);
    char err[512] = "";
    MUST(out);
    long k = text_encode(d, s, out, maxn, err, sizeof err);
    int known = 1;
    for (size_t i = 0; i < len; i++)
        known &= d->id[(unsigned char)s[i]] >= 0;
    MUST((k >= 0) == (len <= maxn && known));
    if (k >= 0) {
        MUST((size_t)k == len);
        for (size_t i = 0; i < len; i++)
            MUST(out[i] >= 0 && out[i] < d->vocab_size && d->vocab[out[i]] == (unsigned char)s[i]);
    } else {
        MUST(err[0]);
    }
    free(out);
}

/* Every task's prompt parser: tokens in range, formatted back to the same
 * text without whitespace; a well-formed prompt has an answer in range. */
static void check_tasks(const char *s)
{
    static const char *const names[] = { "copy", "reverse", "sort", "add" };
    for (int k = 0; k < 4; k++) {
        task t;
        char err[512] = "";
        MUST(task_open(&t, names[k], err, sizeof err) == 0);
        int32_t tok[MAX_T];
        int n = task_parse(&t, s, tok, MAX_T, err, sizeof err);
        if (n < 0) {
            MUST(err[0]);
            continue;
        }
        MUST(n <= MAX_T);
        char back[2 * MAX_T + 2], want[2 * MAX_T + 2];
        size_t w = 0;
        for (size_t i = 0; s[i]; i++)
            if (!strchr(" \t\n\v\f\r", s[i]))
                want[w++] = s[i];
        want[w] = 0;
        for (int i = 0; i < n; i++)
            MUST(tok[i] >= 0 && tok[i] < t.vocab);
        task_format(&t, tok, n, back, sizeof back);
        MUST(strcmp(back, want) == 0);
        if (task_check_prompt(&t, tok, n, err, sizeof err) == 0) {
            MUST(n == t.prompt);
            int32_t seq[MAX_T + 1];
            memcpy(seq, tok, (size_t)n * sizeof *seq);
            task_answer(&t, seq);
            for (int i = 0; i <= t.len; i++)
                MUST(seq[i] >= 0 && seq[i] < t.vocab);
            (void)task_is_heldout(&t, seq);
        } else {
            MUST(err[0]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    /* the input as a C string, cut at its first NUL */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    int T = size ? 1 + data[0] % MAX_T : 1;

    /* the whole input as a text file */
    text_data d;
    if (text_from_bytes(&d, data, size, err, sizeof err) == 0) {
        check_text(&d, data, size);
        check_windows(&d, T, (long)size * 7919);
        check_encode(&d, s, size);
        check_encode(&d, s, size / 2);
        text_free(&d);
    } else {
        MUST(err[0] && d.tokens == NULL);
        size_t distinct = 0;
        uint8_t seen[256] = {0};
        for (size_t i = 0; i < size; i++)
            if (!seen[data[i]]) {
                seen[data[i]] = 1;
                distinct++;
            }
        MUST(distinct < 2);     /* only an empty or one-byte-value text is refused */
    }

    /* the first k bytes as a checkpoint's vocabulary, the rest as text read with it */
    if (size >= 1) {
        int k = data[0] % 64 + 1;
        if ((size_t)k + 1 <= size) {
            const uint8_t *vocab = data + 1, *rest = data + 1 + k;
            size_t nrest = size - 1 - (size_t)k;
            int increasing = k >= 2;
            for (int i = 1; i < k; i++)
                increasing &= vocab[i] > vocab[i - 1];
            text_data v;
            int rc = text_vocab_only(&v, vocab, k, err, sizeof err);
            MUST((rc == 0) == increasing);
            if (rc == 0) {
                MUST(v.vocab_size == k && v.n == 0);
                check_encode(&v, s, size);
                text_free(&v);
            }
            rc = text_from_bytes_vocab(&v, "fuzz", rest, nrest, vocab, k, err, sizeof err);
            int inside = increasing && nrest > 0;
            for (size_t i = 0; inside && i < nrest; i++)
                inside = memchr(vocab, rest[i], (size_t)k) != NULL;
            MUST((rc == 0) == inside);
            if (rc == 0) {
                check_text(&v, rest, nrest);
                check_windows(&v, T, 3);
                text_free(&v);
            } else {
                MUST(err[0] && strstr(err, "fuzz"));
            }
        }
    }

    check_tasks(s);
    free(s);
    return 0;
}
