/*
 * tasks.c - the toy next-token tasks (generators, answers, held-out split,
 * text form) and the character-level text reader with its batch windows.
 * Everything random draws from a caller's PCG32, so batches follow the seed.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tasks.h"

/* A byte as it reads in a message: 'a' (0x61) when printable, else 0x0a. */
static const char *show_byte(unsigned char c, char buf[16])
{
    if (isprint(c) && c != '\'')
        snprintf(buf, 16, "'%c' (0x%02x)", c, c);
    else
        snprintf(buf, 16, "0x%02x", c);
    return buf;
}

/* ---- toy tasks ---------------------------------------------------------- */

/* Layouts (data/README.md):
 *   copy    k = 8 symbols of 10 (a-j), '|', the same 8      L = 16, P = 9
 *   reverse k = 8 symbols of 10 (a-j), '|', the 8 reversed  L = 16, P = 9
 *   sort    6 symbols of 3 (0-2), then the same 6 sorted    L = 11, P = 6
 *   add     a a + b b = s s s, two-digit operands, the sum's three digits
 *           least significant first                         L = 8,  P = 6
 * The reversed sum lets a causal model emit each digit right after the
 * digits (and carry) it depends on. */
enum { ADD_PLUS = 10, ADD_EQ = 11 };

static const task task_table[] = {
    {TASK_COPY, "copy", "abcdefghij|", 11, 16, 9, 10, 8, "abcdefgh|"},
    {TASK_REVERSE, "reverse", "abcdefghij|", 11, 16, 9, 10, 8, "abcdefgh|"},
    {TASK_SORT, "sort", "012", 3, 11, 6, 3, 6, "210120"},
    {TASK_ADD, "add", "0123456789+=", 12, 8, 6, 10, 0, "27+58="},
};
#define N_TASKS ((int)(sizeof task_table / sizeof task_table[0]))

const char *task_names(void) { return "copy, reverse, sort, add"; }

int task_open(task *t, const char *name, char *err, size_t errlen)
{
    for (int i = 0; i < N_TASKS; i++) {
        if (name && strcmp(name, task_table[i].name) == 0) {
            *t = task_table[i];
            return 0;
        }
    }
    ag_set_err(err, errlen, "unknown task '%s' (tasks: %s)", name ? name : "", task_names());
    return -1;
}

int task_check_context(const task *t, int T, char *err, size_t errlen)
{
    if (T < t->len) {
        ag_set_err(err, errlen, "task %s needs a context of at least %d tokens (got %d)", t->name,
                   t->len, T);
        return -1;
    }
    return 0;
}

/* FNV-1a over the task name and the prompt tokens (one byte each: every
 * token id is < 256), then the splitmix64 finalizer so the low digits mix
 * all input bits.  Held out iff the result is 0 mod 10. */
static uint64_t problem_hash(const task *t, const int32_t *seq)
{
    uint64_t h = fnv1a64(FNV1A64_BASIS, t->name, strlen(t->name));
    for (int i = 0; i < t->prompt; i++)
        h = fnv1a64_byte(h, (uint8_t)seq[i]);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

int task_is_heldout(const task *t, const int32_t *seq) { return problem_hash(t, seq) % 10 == 0; }

static void draw_prompt(const task *t, ag_pcg32 *rng, int32_t *seq)
{
    if (t->kind == TASK_ADD) {
        int a = (int)ag_pcg32_below(rng, 100), b = (int)ag_pcg32_below(rng, 100);
        seq[0] = a / 10, seq[1] = a % 10, seq[2] = ADD_PLUS;
        seq[3] = b / 10, seq[4] = b % 10, seq[5] = ADD_EQ;
        return;
    }
    for (int i = 0; i < t->k; i++)
        seq[i] = (int32_t)ag_pcg32_below(rng, (uint32_t)t->symbols);
    if (t->prompt > t->k)
        seq[t->k] = t->symbols;   /* the separator, the token after the symbols */
}

void task_answer(const task *t, int32_t *seq)
{
    int32_t *ans = seq + t->prompt;
    switch (t->kind) {
    case TASK_COPY:
        memcpy(ans, seq, (size_t)t->k * sizeof *seq);
        break;
    case TASK_REVERSE:
        for (int i = 0; i < t->k; i++)
            ans[i] = seq[t->k - 1 - i];
        break;
    case TASK_SORT: {
        /* Counting sort: the symbols are 0 .. symbols-1. */
        int count[16] = {0};
        for (int i = 0; i < t->k; i++)
            count[seq[i]]++;
        for (int v = 0, j = 0; v < t->symbols; v++)
            for (int c = 0; c < count[v]; c++)
                ans[j++] = v;
        break;
    }
    case TASK_ADD: {
        int s = (seq[0] * 10 + seq[1]) + (seq[3] * 10 + seq[4]);
        ans[0] = s % 10, ans[1] = s / 10 % 10, ans[2] = s / 100;
        break;
    }
    }
}

void task_draw(const task *t, ag_pcg32 *rng, int32_t *seq)
{
    /* Rejection keeps the held-out ~10% out of training entirely; the other
     * problems stay equally likely. */
    do
        draw_prompt(t, rng, seq);
    while (task_is_heldout(t, seq));
    task_answer(t, seq);
}

void task_split(const task *t, const int32_t *seq, int32_t *x, int32_t *y)
{
    int L = t->len, first_scored = t->prompt - 1;   /* y[t] = seq[t+1]: scored when t+1 >= P */
    memcpy(x, seq, (size_t)L * sizeof *x);
    for (int i = 0; i < first_scored; i++)
        y[i] = -1;
    memcpy(y + first_scored, seq + t->prompt, (size_t)(L - first_scored) * sizeof *y);
}

void task_train_batch(const task *t, ag_pcg32 *rng, int B, int32_t *x, int32_t *y)
{
    int32_t seq[64];
    for (int b = 0; b < B; b++) {
        task_draw(t, rng, seq);
        task_split(t, seq, x + (size_t)b * t->len, y + (size_t)b * t->len);
    }
}

/* Problem number i of a small problem space, in counting order: the prompt
 * digits of i written most significant first. */
static void nth_prompt(const task *t, long i, int32_t *seq)
{
    if (t->kind == TASK_ADD) {
        int a = (int)(i / 100), b = (int)(i % 100);
        seq[0] = a / 10, seq[1] = a % 10, seq[2] = ADD_PLUS;
        seq[3] = b / 10, seq[4] = b % 10, seq[5] = ADD_EQ;
        return;
    }
    for (int j = t->k - 1; j >= 0; j--, i /= t->symbols)
        seq[j] = (int32_t)(i % t->symbols);
}

static int heldout_enumerate(const task *t, int32_t **seqs)
{
    long total = 1;
    if (t->kind == TASK_ADD)
        total = 100 * 100;
    else
        for (int j = 0; j < t->k; j++)
            total *= t->symbols;
    size_t ex = (size_t)t->len + 1;
    int32_t *out = malloc((size_t)total * ex * sizeof *out);   /* upper bound */
    if (!out)
        return -1;
    int n = 0;
    for (long i = 0; i < total; i++) {
        int32_t *seq = out + (size_t)n * ex;
        nth_prompt(t, i, seq);
        if (task_is_heldout(t, seq)) {
            task_answer(t, seq);
            n++;
        }
    }
    *seqs = out;
    return n;
}

static int heldout_sample(const task *t, uint64_t seed, int32_t **seqs)
{
    size_t ex = (size_t)t->len + 1;
    int32_t *out = malloc(TASK_HELDOUT_SAMPLED * ex * sizeof *out);
    if (!out)
        return -1;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, seed, 0x68656c64U);   /* its own stream: "held" */
    int n = 0;
    while (n < TASK_HELDOUT_SAMPLED) {
        int32_t *seq = out + (size_t)n * ex;
        draw_prompt(t, &rng, seq);
        if (!task_is_heldout(t, seq))
            continue;
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup = memcmp(out + (size_t)j * ex, seq, (size_t)t->prompt * sizeof *seq) == 0;
        if (dup)
            continue;
        task_answer(t, seq);
        n++;
    }
    *seqs = out;
    return n;
}

int task_heldout(const task *t, uint64_t seed, int32_t **seqs)
{
    *seqs = NULL;
    if (t->kind == TASK_SORT || t->kind == TASK_ADD)
        return heldout_enumerate(t, seqs);
    return heldout_sample(t, seed, seqs);
}

void task_format(const task *t, const int32_t *tokens, int n, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    size_t pos = 0;
    for (int i = 0; i < n && pos + 1 < outlen; i++)
        out[pos++] = (tokens[i] >= 0 && tokens[i] < t->vocab) ? t->chars[tokens[i]] : '?';
    out[pos] = '\0';
}

int task_parse(const task *t, const char *text, int32_t *tokens, int maxn, char *err, size_t errlen)
{
    int n = 0;
    for (size_t i = 0; text[i]; i++) {
        unsigned char c = (unsigned char)text[i];
        if (isspace(c))
            continue;
        const char *hit = strchr(t->chars, c);
        if (!hit) {
            char b[16];
            ag_set_err(err, errlen, "%s at position %zu is not a token of task %s (tokens: %s)",
                       show_byte(c, b), i + 1, t->name, t->chars);
            return -1;
        }
        if (n == maxn) {
            size_t all = (size_t)n;
            for (size_t j = i; text[j]; j++)
                all += !isspace((unsigned char)text[j]);
            ag_set_err(err, errlen, "%zu tokens, more than the %d allowed", all, maxn);
            return -1;
        }
        tokens[n++] = (int32_t)(hit - t->chars);
    }
    return n;
}

static int is_well_formed(const task *t, const int32_t *p)
{
    for (int i = 0; i < t->prompt; i++)
        if (p[i] < 0 || p[i] >= t->vocab)
            return 0;
    if (t->kind == TASK_ADD)
        return p[0] < 10 && p[1] < 10 && p[2] == ADD_PLUS && p[3] < 10 && p[4] < 10 &&
               p[5] == ADD_EQ;
    for (int i = 0; i < t->k; i++)
        if (p[i] >= t->symbols)
            return 0;
    return t->prompt == t->k || p[t->k] == t->symbols;
}

int task_check_prompt(const task *t, const int32_t *tokens, int n, char *err, size_t errlen)
{
    if (n != t->prompt || !is_well_formed(t, tokens)) {
        /* the prompt given, its first 40 tokens; its count when it is not P */
        char got[48], count[32] = "";
        task_format(t, tokens, n < 40 ? n : 40, got, sizeof got);
        if (n > 40)
            strcat(got, "...");
        if (n != t->prompt)
            snprintf(count, sizeof count, "%d token%s: ", n, n == 1 ? "" : "s");
        ag_set_err(err, errlen, "task %s takes a prompt of %d tokens shaped like \"%s\" (got %s\"%s\")", t->name,
                   t->prompt, t->example, count, got);
        return -1;
    }
    return 0;
}

/* ---- character-level text ----------------------------------------------- */

static void set_name(text_data *d, const char *name)
{
    d->name = name ? name : "text";
}

static void index_vocab(text_data *d)
{
    for (int b = 0; b < 256; b++)
        d->id[b] = -1;
    for (int i = 0; i < d->vocab_size; i++)
        d->id[d->vocab[i]] = (int16_t)i;
}

static int set_vocab(text_data *d, const uint8_t *vocab, int vocab_size, char *err, size_t errlen)
{
    if (vocab_size < 2 || vocab_size > 256) {
        ag_set_err(err, errlen, "%s: vocabulary has %d bytes; need 2 to 256", d->name, vocab_size);
        return -1;
    }
    for (int i = 1; i < vocab_size; i++) {
        if (vocab[i] <= vocab[i - 1]) {
            ag_set_err(err, errlen, "%s: vocabulary bytes are not strictly increasing at index %d",
                       d->name, i);
            return -1;
        }
    }
    memcpy(d->vocab, vocab, (size_t)vocab_size);
    d->vocab_size = vocab_size;
    index_vocab(d);
    return 0;
}

/* The sorted set of distinct bytes: counting presence is already sorted. */
static int derive_vocab(text_data *d, const uint8_t *bytes, size_t n, char *err, size_t errlen)
{
    uint8_t seen[256] = {0};
    for (size_t i = 0; i < n; i++)
        seen[bytes[i]] = 1;
    d->vocab_size = 0;
    for (int b = 0; b < 256; b++)
        if (seen[b])
            d->vocab[d->vocab_size++] = (uint8_t)b;
    if (d->vocab_size < 2) {
        char b[16];
        ag_set_err(err, errlen, "%s has only one distinct byte value, %s; need at least two", d->name,
                   show_byte(bytes[0], b));
        return -1;
    }
    index_vocab(d);
    return 0;
}

int text_from_bytes_vocab(text_data *d, const char *name, const uint8_t *bytes, size_t n,
                          const uint8_t *vocab, int vocab_size, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    set_name(d, name);
    if (n == 0) {
        ag_set_err(err, errlen, "%s is empty", d->name);
        return -1;
    }
    int rc = vocab ? set_vocab(d, vocab, vocab_size, err, errlen)
                   : derive_vocab(d, bytes, n, err, errlen);
    if (rc)
        return -1;
    d->tokens = malloc(n * sizeof *d->tokens);
    if (!d->tokens) {
        ag_set_err(err, errlen, "%s: out of memory for %zu tokens", d->name, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int id = d->id[bytes[i]];
        if (id < 0) {
            char b[16];
            ag_set_err(err, errlen, "%s: byte %s at offset %zu is not in the vocabulary", d->name,
                       show_byte(bytes[i], b), i);
            text_free(d);
            return -1;
        }
        d->tokens[i] = id;
    }
    d->n = n;
    d->n_train = n - n / 10;
    return 0;
}

int text_from_bytes(text_data *d, const uint8_t *bytes, size_t n, char *err, size_t errlen)
{
    return text_from_bytes_vocab(d, NULL, bytes, n, NULL, 0, err, errlen);
}

int text_vocab_only(text_data *d, const uint8_t *vocab, int vocab_size, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    set_name(d, NULL);
    return set_vocab(d, vocab, vocab_size, err, errlen);
}

void text_free(text_data *d)
{
    free(d->tokens);
    d->tokens = NULL;
    d->n = d->n_train = 0;
}

/* The whole file in a malloc'd buffer.  A regular file must end up exactly
 * as long as fstat said when it was opened; anything else (a pipe, a
 * terminal) is read to its end. */
static int read_file(const char *path, uint8_t **out, size_t *out_n, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ag_set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ag_set_err(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        ag_set_err(err, errlen, "%s is a directory, not a text file", path);
        close(fd);
        return -1;
    }
    int regular = S_ISREG(st.st_mode);
    size_t cap = regular ? (size_t)st.st_size + 1 : 65536, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (buf && n == cap) {
            uint8_t *grown = realloc(buf, cap * 2);
            if (!grown)
                free(buf);
            buf = grown;
            cap *= 2;
        }
        if (!buf) {
            ag_set_err(err, errlen, "out of memory reading %s", path);
            close(fd);
            return -1;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            ag_set_err(err, errlen, "read error on %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        n += (size_t)r;
    }
    close(fd);
    if (regular && (off_t)n != st.st_size) {
        ag_set_err(err, errlen, "%s changed size while reading (%lld bytes when opened, %zu read)",
                   path, (long long)st.st_size, n);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_n = n;
    return 0;
}

int text_load_vocab(text_data *d, const char *path, const uint8_t *vocab, int vocab_size,
                    char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    set_name(d, path);
    uint8_t *bytes;
    size_t n;
    if (read_file(path, &bytes, &n, err, errlen))
        return -1;
    int rc = text_from_bytes_vocab(d, path, bytes, n, vocab, vocab_size, err, errlen);
    free(bytes);
    return rc;
}

int text_load(text_data *d, const char *path, char *err, size_t errlen)
{
    return text_load_vocab(d, path, NULL, 0, err, errlen);
}

/* Smallest file whose training split (n - n/10) holds at least `need` tokens. */
static size_t min_bytes_for_train(size_t need)
{
    size_t n = need;
    while (n - n / 10 < need)
        n++;
    return n;
}

int text_check_context(const text_data *d, int T, int need_val, char *err, size_t errlen)
{
    if (T < 1) {
        ag_set_err(err, errlen, "context must be at least 1 token (got %d)", T);
        return -1;
    }
    size_t need = (size_t)T + 1, n_val = d->n - d->n_train;
    if (d->n_train < need) {
        ag_set_err(err, errlen,
                   "%s is too short for context %d: the training split has %zu tokens, needs %zu "
                   "(a file of at least %zu bytes)",
                   d->name, T, d->n_train, need, need_val ? 10 * need : min_bytes_for_train(need));
        return -1;
    }
    if (need_val && n_val < need) {
        ag_set_err(err, errlen,
                   "%s is too short for context %d: the validation split (last tenth) has %zu "
                   "tokens, needs %zu (a file of at least %zu bytes)",
                   d->name, T, n_val, need, 10 * need);
        return -1;
    }
    return 0;
}

long text_encode(const text_data *d, const char *s, int32_t *out, size_t maxn, char *err, size_t errlen)
{
    size_t len = strlen(s);
    if (len > maxn) {
        ag_set_err(err, errlen, "text is %zu bytes, longer than the %zu allowed", len, maxn);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (d->id[c] < 0) {
            char b[16];
            ag_set_err(err, errlen, "byte %s at position %zu is not in the vocabulary", show_byte(c, b),
                       i + 1);
            return -1;
        }
        out[i] = d->id[c];
    }
    return (long)len;
}

size_t text_decode(const text_data *d, const int32_t *tokens, size_t n, char *out, size_t outlen)
{
    if (outlen == 0)
        return 0;
    size_t m = n < outlen - 1 ? n : outlen - 1;
    for (size_t i = 0; i < m; i++)
        out[i] = (tokens[i] >= 0 && tokens[i] < d->vocab_size) ? (char)d->vocab[tokens[i]] : '?';
    out[m] = '\0';
    return m;
}

/* Uniform in [0, bound) for bounds past 32 bits too: two draws make 64 bits,
 * and the low 2^64 mod bound values are rejected. */
static size_t rand_below(ag_pcg32 *rng, size_t bound)
{
    if (bound <= UINT32_MAX)
        return ag_pcg32_below(rng, (uint32_t)bound);
    uint64_t b = bound, threshold = (0 - b) % b;
    for (;;) {
        uint64_t hi = ag_pcg32_next(rng), lo = ag_pcg32_next(rng);
        uint64_t r = hi << 32 | lo;
        if (r >= threshold)
            return (size_t)(r % b);
    }
}

static void copy_window(const int32_t *tokens, size_t s, int T, int32_t *x, int32_t *y)
{
    memcpy(x, tokens + s, (size_t)T * sizeof *x);
    memcpy(y, tokens + s + 1, (size_t)T * sizeof *y);
}

void text_batch(const text_data *d, int random_order, ag_pcg32 *rng, long step, int B, int T,
                int32_t *x, int32_t *y)
{
    size_t m = d->n_train - (size_t)T;   /* starts 0 .. m-1 keep tokens[s+T] in the split */
    for (int b = 0; b < B; b++) {
        size_t s;
        if (random_order) {
            s = rand_below(rng, m);
        } else {
            /* ((k*B + b) * T) mod m, reduced first so the product stays in 64 bits. */
            uint64_t row = ((uint64_t)step * (uint64_t)B + (uint64_t)b) % m;
            s = (size_t)(row * ((uint64_t)T % m) % m);
        }
        copy_window(d->tokens, s, T, x + (size_t)b * T, y + (size_t)b * T);
    }
}

size_t text_eval_windows(size_t n_split, int T)
{
    /* s = jT with jT + T + 1 <= n means j <= (n - 1)/T - 1: (n - 1)/T windows. */
    return (T < 1 || n_split == 0) ? 0 : (n_split - 1) / (size_t)T;
}

int text_eval_batch(const text_data *d, int split, size_t first, int B, int T, int32_t *x, int32_t *y)
{
    const int32_t *base = d->tokens + (split == TEXT_VAL ? d->n_train : 0);
    size_t n = split == TEXT_VAL ? d->n - d->n_train : d->n_train;
    size_t windows = text_eval_windows(n, T);
    int rows = 0;
    for (; rows < B && first + (size_t)rows < windows; rows++)
        copy_window(base, (first + (size_t)rows) * (size_t)T, T, x + (size_t)rows * T,
                    y + (size_t)rows * T);
    return rows;
}

uint64_t fnv1a64(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++)
        h = fnv1a64_byte(h, b[i]);
    return h;
}

uint64_t text_fingerprint(const text_data *d)
{
    uint64_t h = FNV1A64_BASIS;
    for (size_t i = 0; i < d->n; i++)
        h = fnv1a64_byte(h, d->vocab[d->tokens[i]]);
    return h;
}
