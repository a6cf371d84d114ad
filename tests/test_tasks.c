/*
 * test_tasks.c - the toy tasks and the text reader: answers checked by logic
 * written here from the layouts in data/README.md, loss masks, the held-out
 * rule re-derived from its documented hash, batch windows against their
 * formulas, and every error message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tasks.h"

#define MAXL 32

static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* The held-out rule as data/README.md states it: FNV-1a 64 over the task
 * name's bytes then the prompt tokens (one byte each), the splitmix64
 * finalizer, held out when the result is 0 mod 10. */
static int doc_heldout(const char *name, const int32_t *prompt, int P)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; name[i]; i++) {
        h ^= (unsigned char)name[i];
        h *= 0x100000001b3ULL;
    }
    for (int i = 0; i < P; i++) {
        h ^= (uint64_t)(prompt[i] & 0xff);
        h *= 0x100000001b3ULL;
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h = h ^ (h >> 31);
    return h % 10 == 0;
}

/* Whether seq (L + 1 tokens) is a correct example of the task, by the
 * layouts of data/README.md. */
static int doc_correct(const task *t, const int32_t *s)
{
    if (strcmp(t->name, "copy") == 0 || strcmp(t->name, "reverse") == 0) {
        int rev = t->name[0] == 'r';
        for (int i = 0; i < 8; i++)
            if (s[i] < 0 || s[i] > 9)
                return 0;
        if (s[8] != 10)
            return 0;
        for (int i = 0; i < 8; i++)
            if (s[9 + i] != (rev ? s[7 - i] : s[i]))
                return 0;
        return 1;
    }
    if (strcmp(t->name, "sort") == 0) {
        int cin[3] = {0}, cout[3] = {0};
        for (int i = 0; i < 6; i++) {
            if (s[i] < 0 || s[i] > 2 || s[6 + i] < 0 || s[6 + i] > 2)
                return 0;
            cin[s[i]]++, cout[s[6 + i]]++;
            if (i > 0 && s[6 + i] < s[5 + i])
                return 0;
        }
        return cin[0] == cout[0] && cin[1] == cout[1] && cin[2] == cout[2];
    }
    /* add: d d + d d = then the sum's digits, ones first. */
    for (int i = 0; i < 9; i++)
        if (i != 2 && i != 5 && (s[i] < 0 || s[i] > 9))
            return 0;
    if (s[2] != 10 || s[5] != 11)
        return 0;
    int a = s[0] * 10 + s[1], b = s[3] * 10 + s[4];
    return s[6] + 10 * s[7] + 100 * s[8] == a + b;
}

/* A problem's index in its small space: sort = base-3 digits, add = 100a + b. */
static int problem_index(const task *t, const int32_t *s)
{
    if (t->kind == TASK_SORT) {
        int v = 0;
        for (int i = 0; i < 6; i++)
            v = v * 3 + s[i];
        return v;
    }
    return (s[0] * 10 + s[1]) * 100 + s[3] * 10 + s[4];
}

static void test_open(void)
{
    char err[256];
    task t;
    /* name, vocab, L, P, answer length as documented */
    struct { const char *name; int vocab, L, P; const char *chars; } want[] = {
        {"copy", 11, 16, 9, "abcdefghij|"},
        {"reverse", 11, 16, 9, "abcdefghij|"},
        {"sort", 3, 11, 6, "012"},
        {"add", 12, 8, 6, "0123456789+="},
    };
    for (int i = 0; i < 4; i++) {
        int rc = task_open(&t, want[i].name, err, sizeof err);
        CHECK(rc == 0, "task_open(%s) failed: %s", want[i].name, err);
        CHECK(strcmp(t.name, want[i].name) == 0, "name %s", t.name);
        CHECK(t.vocab == want[i].vocab && t.len == want[i].L && t.prompt == want[i].P,
              "%s: vocab %d L %d P %d", t.name, t.vocab, t.len, t.prompt);
        CHECK(strcmp(t.chars, want[i].chars) == 0 && (int)strlen(t.chars) == t.vocab,
              "%s chars '%s'", t.name, t.chars);
        CHECK(contains(task_names(), want[i].name), "task_names lacks %s", want[i].name);
        CHECK(task_check_context(&t, t.len, err, sizeof err) == 0, "%s: context L refused", t.name);
        CHECK(task_check_context(&t, 4 * t.len, err, sizeof err) == 0, "%s: context 4L", t.name);
        err[0] = 0;
        CHECK(task_check_context(&t, t.len - 1, err, sizeof err) == -1 &&
                  contains(err, "needs a context of at least") && contains(err, t.name),
              "%s: short context: '%s'", t.name, err);
        /* the example prompt is well formed */
        int32_t tok[MAXL];
        int n = task_parse(&t, t.example, tok, MAXL, err, sizeof err);
        CHECK(n == t.prompt && task_check_prompt(&t, tok, n, err, sizeof err) == 0,
              "%s example '%s' not a prompt", t.name, t.example);
    }
    err[0] = 0;
    CHECK(task_open(&t, "copi", err, sizeof err) == -1 && contains(err, "unknown task 'copi'") &&
              contains(err, "copy, reverse, sort, add"),
          "unknown task: '%s'", err);
}

/* Many training rows of one task: x/y agree, masks cover exactly the answer,
 * answers are right, nothing held out appears. */
static void test_batches(const char *name)
{
    char err[256];
    task t;
    task_open(&t, name, err, sizeof err);
    int L = t.len, P = t.prompt, B = 50, steps = 200;
    int answer_len = t.kind == TASK_ADD ? 3 : t.kind == TASK_SORT ? 6 : 8;
    int32_t *x = malloc(sizeof(int32_t) * B * L), *y = malloc(sizeof(int32_t) * B * L);
    int *seen = calloc(10000, sizeof *seen);
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 7, 1);
    int bad_mask = 0, bad_shift = 0, bad_answer = 0, heldout = 0, lib_heldout = 0;
    for (int step = 0; step < steps; step++) {
        task_train_batch(&t, &rng, B, x, y);
        for (int b = 0; b < B; b++) {
            const int32_t *xr = x + b * L, *yr = y + b * L;
            int32_t seq[MAXL + 1];
            memcpy(seq, xr, sizeof(int32_t) * L);
            seq[L] = yr[L - 1];
            int scored = 0;
            for (int i = 0; i < L; i++) {
                int should = i + 1 >= L - answer_len + 1;   /* seq[i+1] is an answer token */
                if (should != (yr[i] != -1))
                    bad_mask++;
                scored += yr[i] != -1;
                if (yr[i] != -1 && i + 1 < L && yr[i] != xr[i + 1])
                    bad_shift++;
            }
            if (scored != answer_len || P != L + 1 - answer_len)
                bad_mask++;
            bad_answer += !doc_correct(&t, seq);
            heldout += doc_heldout(t.name, seq, P);
            lib_heldout += task_is_heldout(&t, seq);
            if (t.kind == TASK_SORT || t.kind == TASK_ADD)
                seen[problem_index(&t, seq)]++;
        }
    }
    CHECK(bad_mask == 0, "%s: %d rows/positions with a wrong mask", name, bad_mask);
    CHECK(bad_shift == 0, "%s: %d targets not the next input", name, bad_shift);
    CHECK(bad_answer == 0, "%s: %d wrong answers", name, bad_answer);
    CHECK(heldout == 0 && lib_heldout == 0, "%s: %d held-out problems in training (%d)", name,
          heldout, lib_heldout);
    if (t.kind == TASK_SORT) {
        /* 10000 draws over ~656 training problems: every one should show up. */
        int missing = 0;
        for (int i = 0; i < 729; i++) {
            int32_t p[6];
            for (int j = 5, v = i; j >= 0; j--, v /= 3)
                p[j] = v % 3;
            if (!doc_heldout("sort", p, 6) && !seen[i])
                missing++;
        }
        CHECK(missing == 0, "sort: %d training problems never drawn", missing);
    }
    if (t.kind == TASK_ADD) {
        /* a and b uniform: the tens digit of a is 0..9 about equally often. */
        int tens[10] = {0};
        for (int i = 0; i < 10000; i++)
            tens[i / 1000] += seen[i];
        for (int d = 0; d < 10; d++)
            CHECK(tens[d] > 700 && tens[d] < 1300, "add: a's tens digit %d drawn %d/10000", d,
                  tens[d]);
    }
    free(x);
    free(y);
    free(seen);
}

static void test_determinism(void)
{
    char err[256];
    const char *names[] = {"copy", "reverse", "sort", "add"};
    for (int k = 0; k < 4; k++) {
        task t;
        task_open(&t, names[k], err, sizeof err);
        int n = 16 * t.len;
        int32_t x1[16 * MAXL], y1[16 * MAXL], x2[16 * MAXL], y2[16 * MAXL];
        ag_pcg32 a, b, c;
        ag_pcg32_seed(&a, 42, 3);
        ag_pcg32_seed(&b, 42, 3);
        ag_pcg32_seed(&c, 43, 3);
        task_train_batch(&t, &a, 16, x1, y1);
        task_train_batch(&t, &b, 16, x2, y2);
        CHECK(memcmp(x1, x2, sizeof(int32_t) * n) == 0 && memcmp(y1, y2, sizeof(int32_t) * n) == 0,
              "%s: same seed, different batch", names[k]);
        task_train_batch(&t, &c, 16, x2, y2);
        CHECK(memcmp(x1, x2, sizeof(int32_t) * n) != 0, "%s: seeds 42 and 43 gave the same batch",
              names[k]);
        /* the next batch from the same stream differs from the first */
        task_train_batch(&t, &a, 16, x2, y2);
        CHECK(memcmp(x1, x2, sizeof(int32_t) * n) != 0, "%s: consecutive batches equal", names[k]);
    }
}

static void test_heldout(const char *name)
{
    char err[256];
    task t;
    task_open(&t, name, err, sizeof err);
    int ex = t.len + 1, P = t.prompt;
    int32_t *h = NULL, *h2 = NULL;
    int n = task_heldout(&t, 5, &h);
    CHECK(n > 0 && h != NULL, "%s: no held-out set", name);
    if (n <= 0)
        return;
    int expected = TASK_HELDOUT_SAMPLED;
    if (t.kind == TASK_SORT || t.kind == TASK_ADD) {
        /* every problem, counted independently */
        int total = t.kind == TASK_SORT ? 729 : 10000;
        expected = 0;
        for (int i = 0; i < total; i++) {
            int32_t p[6];
            if (t.kind == TASK_SORT) {
                for (int j = 5, v = i; j >= 0; j--, v /= 3)
                    p[j] = v % 3;
            } else {
                p[0] = i / 1000, p[1] = i / 100 % 10, p[2] = 10, p[3] = i / 10 % 10,
                p[4] = i % 10, p[5] = 11;
            }
            expected += doc_heldout(name, p, 6);
        }
        CHECK(expected > total / 20 && expected < total * 3 / 20, "%s: %d of %d held out", name,
              expected, total);
    }
    CHECK(n == expected, "%s: held-out set has %d, expected %d", name, n, expected);
    int bad = 0, dup = 0, wrong = 0, increasing = 1;
    for (int i = 0; i < n; i++) {
        bad += !doc_heldout(name, h + i * ex, P);
        wrong += !doc_correct(&t, h + i * ex);
        for (int j = 0; j < i; j++)
            dup += memcmp(h + i * ex, h + j * ex, sizeof(int32_t) * P) == 0;
        if (i > 0 && (t.kind == TASK_SORT || t.kind == TASK_ADD))
            increasing &= problem_index(&t, h + i * ex) > problem_index(&t, h + (i - 1) * ex);
    }
    CHECK(bad == 0, "%s: %d held-out entries fail the held-out rule", name, bad);
    CHECK(wrong == 0, "%s: %d held-out answers wrong", name, wrong);
    CHECK(dup == 0, "%s: %d duplicate held-out problems", name, dup);
    CHECK(increasing, "%s: held-out problems not in counting order", name);
    int n2 = task_heldout(&t, 5, &h2);
    CHECK(n2 == n && memcmp(h, h2, sizeof(int32_t) * n * ex) == 0, "%s: held-out set not repeatable",
          name);
    free(h2);
    n2 = task_heldout(&t, 6, &h2);
    if (t.kind == TASK_SORT || t.kind == TASK_ADD)
        CHECK(n2 == n && memcmp(h, h2, sizeof(int32_t) * n * ex) == 0,
              "%s: held-out set depends on the seed", name);
    else
        CHECK(n2 == n && memcmp(h, h2, sizeof(int32_t) * n * ex) != 0,
              "%s: seeds 5 and 6 gave the same held-out sample", name);
    free(h2);
    free(h);
}

static void test_format_parse(void)
{
    char err[256], buf[128];
    task t;
    task_open(&t, "add", err, sizeof err);
    int32_t tok[MAXL];
    int n = task_parse(&t, "27+58=", tok, MAXL, err, sizeof err);
    CHECK(n == 6 && task_check_prompt(&t, tok, n, err, sizeof err) == 0, "parse 27+58=: %d", n);
    task_answer(&t, tok);
    task_format(&t, tok, 9, buf, sizeof buf);
    CHECK(strcmp(buf, "27+58=580") == 0, "27+58 formatted as '%s'", buf);
    n = task_parse(&t, "99+99=", tok, MAXL, err, sizeof err);
    task_answer(&t, tok);
    task_format(&t, tok, 9, buf, sizeof buf);
    CHECK(strcmp(buf, "99+99=891") == 0, "99+99 formatted as '%s'", buf);
    n = task_parse(&t, "0 5 + 0 3 =", tok, MAXL, err, sizeof err);
    CHECK(n == 6 && tok[1] == 5 && tok[2] == 10 && tok[4] == 3 && tok[5] == 11,
          "whitespace not skipped: %d", n);
    err[0] = 0;
    CHECK(task_parse(&t, "12-34=", tok, MAXL, err, sizeof err) == -1 &&
              contains(err, "'-' (0x2d) at position 3") && contains(err, "not a token of task add"),
          "bad char: '%s'", err);
    err[0] = 0;
    /* past maxn, the count the text holds (it spoke of an "add text") */
    CHECK(task_parse(&t, "12+34=", tok, 4, err, sizeof err) == -1 &&
              strcmp(err, "6 tokens, more than the 4 allowed") == 0,
          "too long: '%s'", err);
    task_parse(&t, "12+34", tok, MAXL, err, sizeof err);
    err[0] = 0;
    CHECK(task_check_prompt(&t, tok, 5, err, sizeof err) == -1 &&
              contains(err, "task add takes a prompt of 6 tokens") && contains(err, "(got 5 tokens: \"12+34\")"),
          "short prompt: '%s'", err);
    task_parse(&t, "1+234=", tok, MAXL, err, sizeof err);
    err[0] = 0;
    CHECK(task_check_prompt(&t, tok, 6, err, sizeof err) == -1 && contains(err, "27+58="),
          "misshapen prompt: '%s'", err);

    task_open(&t, "copy", err, sizeof err);
    n = task_parse(&t, "abcdefgh|", tok, MAXL, err, sizeof err);
    CHECK(n == 9 && tok[0] == 0 && tok[7] == 7 && tok[8] == 10, "copy parse");
    task_answer(&t, tok);
    task_format(&t, tok, 17, buf, sizeof buf);
    CHECK(strcmp(buf, "abcdefgh|abcdefgh") == 0, "copy formatted '%s'", buf);
    task_parse(&t, "abcdefg|h", tok, MAXL, err, sizeof err);
    CHECK(task_check_prompt(&t, tok, 9, err, sizeof err) == -1, "separator misplaced accepted");
    task_open(&t, "reverse", err, sizeof err);
    task_parse(&t, "jabbcdei|", tok, MAXL, err, sizeof err);
    task_answer(&t, tok);
    task_format(&t, tok, 17, buf, sizeof buf);
    CHECK(strcmp(buf, "jabbcdei|iedcbbaj") == 0, "reverse formatted '%s'", buf);
    task_open(&t, "sort", err, sizeof err);
    task_parse(&t, "210120", tok, MAXL, err, sizeof err);
    task_answer(&t, tok);
    task_format(&t, tok, 12, buf, sizeof buf);
    CHECK(strcmp(buf, "210120001122") == 0, "sort formatted '%s'", buf);
    /* truncation keeps the NUL; out-of-range tokens show as '?' */
    int32_t odd[3] = {0, 7, -1};
    task_format(&t, odd, 3, buf, 3);
    CHECK(strcmp(buf, "0?") == 0, "truncated/odd format '%s'", buf);

    /* round trip over random examples of every task */
    const char *names[] = {"copy", "reverse", "sort", "add"};
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 11, 0);
    int fails = 0;
    for (int k = 0; k < 4; k++) {
        task_open(&t, names[k], err, sizeof err);
        for (int i = 0; i < 200; i++) {
            int32_t seq[MAXL + 1], back[MAXL + 1];
            task_draw(&t, &rng, seq);
            task_format(&t, seq, t.len + 1, buf, sizeof buf);
            int m = task_parse(&t, buf, back, MAXL + 1, err, sizeof err);
            fails += m != t.len + 1 || memcmp(seq, back, sizeof(int32_t) * m) != 0 ||
                     (int)strlen(buf) != t.len + 1;
            fails += task_check_prompt(&t, seq, t.prompt, err, sizeof err) != 0;
        }
    }
    CHECK(fails == 0, "%d format/parse round trips failed", fails);
}

/* ---- text --------------------------------------------------------------- */

static void test_text_vocab(void)
{
    char err[256];
    text_data d;
    const char *s = "hello world";
    CHECK(text_from_bytes(&d, (const uint8_t *)s, strlen(s), err, sizeof err) == 0, "%s", err);
    CHECK(d.vocab_size == 8 && memcmp(d.vocab, " dehlorw", 8) == 0, "vocab of hello world: %d",
          d.vocab_size);
    CHECK(d.n == 11 && d.n_train == 10, "split %zu/%zu", d.n, d.n_train);
    int ok = 1;
    for (size_t i = 0; i < d.n; i++)
        ok &= d.vocab[d.tokens[i]] == (uint8_t)s[i];
    CHECK(ok, "tokens do not map back to bytes");
    char back[32];
    size_t m = text_decode(&d, d.tokens, d.n, back, sizeof back);
    CHECK(m == 11 && strcmp(back, s) == 0, "decode '%s'", back);
    m = text_decode(&d, d.tokens, d.n, back, 6);
    CHECK(m == 5 && strcmp(back, "hello") == 0, "truncated decode '%s'", back);
    int32_t enc[32];
    long e = text_encode(&d, "old howl", enc, 32, err, sizeof err);
    text_decode(&d, enc, (size_t)e, back, sizeof back);
    CHECK(e == 8 && strcmp(back, "old howl") == 0, "encode/decode round trip '%s'", back);
    err[0] = 0;
    CHECK(text_encode(&d, "hex", enc, 32, err, sizeof err) == -1 &&
              contains(err, "'x' (0x78) at position 3") && contains(err, "not in the vocabulary"),
          "encode unknown byte: '%s'", err);
    err[0] = 0;
    CHECK(text_encode(&d, "hello", enc, 4, err, sizeof err) == -1 && contains(err, "longer than"),
          "encode too long: '%s'", err);
    text_free(&d);

    /* every byte value: the vocabulary is the identity, sorted */
    uint8_t all[512];
    for (int i = 0; i < 512; i++)
        all[i] = (uint8_t)(255 - i % 256);
    CHECK(text_from_bytes(&d, all, 512, err, sizeof err) == 0 && d.vocab_size == 256, "256 bytes");
    ok = 1;
    for (int i = 0; i < 256; i++)
        ok &= d.vocab[i] == i && d.id[i] == i;
    for (int i = 0; i < 512; i++)
        ok &= d.tokens[i] == 255 - i % 256;
    CHECK(ok, "identity vocabulary wrong");
    text_free(&d);

    /* split sizes n - n/10 (integer division) */
    uint8_t ab[300];
    for (int i = 0; i < 300; i++)
        ab[i] = "ab"[i % 2];
    int bad = 0;
    for (size_t n = 2; n <= 300; n++) {
        text_from_bytes(&d, ab, n, err, sizeof err);
        bad += d.n != n || d.n_train != n - n / 10 || d.vocab_size != 2;
        text_free(&d);
    }
    CHECK(bad == 0, "%d wrong split sizes", bad);

    /* against a given vocabulary (a checkpoint's) */
    const uint8_t vocab[] = {'\n', ' ', 'a', 'b', 'c'};
    const char *t = "abc ab\nca";
    CHECK(text_from_bytes_vocab(&d, "given", (const uint8_t *)t, strlen(t), vocab, 5, err,
                                sizeof err) == 0 &&
              d.vocab_size == 5 && d.tokens[6] == 0 && d.tokens[0] == 2,
          "given vocabulary: %s", err);
    text_free(&d);
    err[0] = 0;
    const char *u = "abc aXb";
    CHECK(text_from_bytes_vocab(&d, "given", (const uint8_t *)u, strlen(u), vocab, 5, err,
                                sizeof err) == -1 &&
              contains(err, "given: byte 'X' (0x58) at offset 5 is not in the vocabulary"),
          "byte outside given vocab: '%s'", err);
    CHECK(d.tokens == NULL, "tokens kept after an error");
    err[0] = 0;
    const uint8_t unsorted[] = {'a', 'c', 'b'};
    CHECK(text_from_bytes_vocab(&d, "given", (const uint8_t *)"abc", 3, unsorted, 3, err,
                                sizeof err) == -1 &&
              contains(err, "not strictly increasing"),
          "unsorted vocab: '%s'", err);
    err[0] = 0;
    CHECK(text_vocab_only(&d, vocab, 1, err, sizeof err) == -1 && contains(err, "need 2 to 256"),
          "tiny vocab: '%s'", err);
    CHECK(text_vocab_only(&d, vocab, 5, err, sizeof err) == 0 && d.n == 0 && d.tokens == NULL,
          "vocab only: %s", err);
    e = text_encode(&d, "cab\n", enc, 32, err, sizeof err);
    CHECK(e == 4 && enc[0] == 4 && enc[1] == 2 && enc[2] == 3 && enc[3] == 0, "vocab-only encode");
    text_free(&d);

    err[0] = 0;
    CHECK(text_from_bytes(&d, (const uint8_t *)"", 0, err, sizeof err) == -1 &&
              contains(err, "text is empty"),
          "empty: '%s'", err);
    err[0] = 0;
    CHECK(text_from_bytes(&d, (const uint8_t *)"zzzz", 4, err, sizeof err) == -1 &&
              contains(err, "only one distinct byte value, 'z' (0x7a)"),
          "one byte: '%s'", err);
}

static void write_file(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(s, 1, n, f);
        fclose(f);
    }
}

/* Loading path (by text_load_vocab given a vocabulary, else by text_load)
 * is refused in a message that names the file and says want. */
static void check_load_refused(const char *what, const char *path, const uint8_t *vocab, int vocab_size,
                               const char *want)
{
    char err[512] = "";
    text_data d;
    int rc = vocab ? text_load_vocab(&d, path, vocab, vocab_size, err, sizeof err)
                   : text_load(&d, path, err, sizeof err);
    CHECK(rc == -1 && contains(err, want) && contains(err, path), "%s: '%s'", what, err);
}

static void test_text_files(void)
{
    char err[512], dir[] = "/tmp/attograd_tasks_XXXXXX", path[600];
    text_data d;
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");

    snprintf(path, sizeof path, "%s/ok.txt", dir);
    write_file(path, "the cat sat on the mat.\n", 24);
    CHECK(text_load(&d, path, err, sizeof err) == 0 && d.n == 24 && d.n_train == 22, "load: %s",
          err);
    text_free(&d);

    snprintf(path, sizeof path, "%s/missing.txt", dir);
    check_load_refused("missing", path, NULL, 0, "cannot open");
    check_load_refused("directory", dir, NULL, 0, "is a directory");
    snprintf(path, sizeof path, "%s/empty.txt", dir);
    write_file(path, "", 0);
    check_load_refused("empty", path, NULL, 0, "is empty");
    snprintf(path, sizeof path, "%s/same.txt", dir);
    write_file(path, "\n\n\n", 3);
    check_load_refused("one distinct byte", path, NULL, 0, "only one distinct byte value, 0x0a");
    snprintf(path, sizeof path, "%s/outside.txt", dir);
    write_file(path, "ab\x01", 3);
    check_load_refused("outside vocab", path, (const uint8_t[]){'a', 'b'}, 2, "byte 0x01 at offset 2");
    /* /proc files: regular, size 0 in stat, yet they have contents */
    if (access("/proc/self/status", R_OK) == 0)
        check_load_refused("changed size", "/proc/self/status", NULL, 0,
                           "/proc/self/status changed size while reading");
    /* reading address 0 of one's own memory fails with EIO */
    if (access("/proc/self/mem", R_OK) == 0)
        check_load_refused("read error", "/proc/self/mem", NULL, 0, "read error on /proc/self/mem");

    /* context limits: 100 bytes = 90 train + 10 validation */
    snprintf(path, sizeof path, "%s/hundred.txt", dir);
    char hundred[100];
    for (int i = 0; i < 100; i++)
        hundred[i] = (char)('a' + i % 7);
    write_file(path, hundred, 100);
    CHECK(text_load(&d, path, err, sizeof err) == 0 && d.n_train == 90, "hundred: %s", err);
    CHECK(text_check_context(&d, 89, 0, err, sizeof err) == 0, "T=89 train-only refused: %s", err);
    CHECK(text_check_context(&d, 9, 1, err, sizeof err) == 0, "T=9 with validation refused: %s", err);
    err[0] = 0;
    CHECK(text_check_context(&d, 90, 0, err, sizeof err) == -1 && contains(err, path) &&
              contains(err, "too short for context 90") && contains(err, "training split has 90") &&
              contains(err, "at least 101 bytes"),
          "T=90: '%s'", err);
    err[0] = 0;
    CHECK(text_check_context(&d, 10, 1, err, sizeof err) == -1 &&
              contains(err, "validation split (last tenth) has 10") &&
              contains(err, "at least 110 bytes"),
          "T=10 validation: '%s'", err);
    err[0] = 0;
    CHECK(text_check_context(&d, 0, 0, err, sizeof err) == -1 && contains(err, "at least 1"),
          "T=0: '%s'", err);
    text_free(&d);

    const char *names[] = {"ok.txt", "empty.txt", "same.txt", "outside.txt", "hundred.txt"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* 256 distinct bytes in order: token id == position, so a window's first x
 * token is its start. */
static void identity_text(text_data *d)
{
    uint8_t b[256];
    char err[256];
    for (int i = 0; i < 256; i++)
        b[i] = (uint8_t)i;
    text_from_bytes(d, b, 256, err, sizeof err);
}

static void test_text_batches(void)
{
    text_data d;
    identity_text(&d);
    const int B = 5, T = 8;
    size_t m = d.n_train - T;   /* 231 - 8 = 223 possible starts */
    CHECK(d.n_train == 231 && m == 223, "identity split %zu", d.n_train);
    int32_t x[5 * 8], y[5 * 8];
    int bad = 0;
    for (long k = 0; k < 200; k++) {
        text_batch(&d, 0, NULL, k, B, T, x, y);
        for (int b = 0; b < B; b++) {
            size_t s = (size_t)((k * B + b) * T) % m;
            for (int i = 0; i < T; i++)
                bad += x[b * T + i] != (int32_t)(s + i) || y[b * T + i] != (int32_t)(s + i + 1);
        }
    }
    CHECK(bad == 0, "%d sequential window tokens wrong", bad);
    /* a step far out: the formula reduced mod m */
    text_batch(&d, 0, NULL, 1000003, B, T, x, y);
    CHECK(x[3 * T] == (int32_t)(((1000003L * B + 3) * T) % (long)m), "step 1000003 row 3 starts at %d",
          x[3 * T]);

    ag_pcg32 rng, rng2;
    ag_pcg32_seed(&rng, 9, 2);
    int hits[256] = {0};
    bad = 0;
    for (int k = 0; k < 2000; k++) {
        text_batch(&d, 1, &rng, k, B, T, x, y);
        for (int b = 0; b < B; b++) {
            int32_t s = x[b * T];
            if (s < 0 || (size_t)s >= m) {
                bad++;
                continue;
            }
            hits[s]++;
            for (int i = 0; i < T; i++)
                bad += x[b * T + i] != s + i || y[b * T + i] != s + i + 1;
        }
    }
    CHECK(bad == 0, "%d random windows out of range or not contiguous", bad);
    int missing = 0;
    for (size_t s = 0; s < m; s++)
        missing += hits[s] == 0;
    CHECK(missing == 0 && hits[0] > 0 && hits[m - 1] > 0, "%d starts never drawn", missing);
    int32_t x2[5 * 8], y2[5 * 8];
    ag_pcg32_seed(&rng, 9, 2);
    ag_pcg32_seed(&rng2, 9, 2);
    text_batch(&d, 1, &rng, 0, B, T, x, y);
    text_batch(&d, 1, &rng2, 0, B, T, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) == 0, "same seed, different random windows");
    ag_pcg32_seed(&rng2, 10, 2);
    text_batch(&d, 1, &rng2, 0, B, T, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) != 0, "seeds 9 and 10 gave the same windows");

    /* eval windows: count by brute force */
    bad = 0;
    for (size_t n = 0; n < 60; n++)
        for (int t = 1; t < 9; t++) {
            size_t count = 0;
            for (size_t s = 0; s + t + 1 <= n; s += t)
                count++;
            bad += text_eval_windows(n, t) != count;
        }
    CHECK(bad == 0, "%d eval window counts wrong", bad);
    CHECK(text_eval_windows(25, 8) == 3 && text_eval_windows(24, 8) == 2, "eval windows 24/25");

    /* validation split 25 tokens (231..255), T = 8: windows at 0, 8, 16 */
    size_t nw = text_eval_windows(d.n - d.n_train, T);
    int rows = text_eval_batch(&d, TEXT_VAL, 1, B, T, x, y);
    CHECK(nw == 3 && rows == 2, "val windows %zu rows %d", nw, rows);
    CHECK(x[0] == 231 + 8 && y[0] == 231 + 9 && x[T] == 231 + 16 && y[2 * T - 1] == 231 + 24,
          "val window contents %d %d %d", x[0], y[0], x[T]);
    CHECK(text_eval_batch(&d, TEXT_VAL, 3, B, T, x, y) == 0, "window past the end");
    rows = text_eval_batch(&d, TEXT_TRAIN, 26, B, T, x, y);   /* 230/8 = 28 windows */
    CHECK(rows == 2 && x[0] == 26 * 8 && y[2 * T - 1] == 27 * 8 + 8, "train windows %d, x0 %d",
          rows, x[0]);
    text_free(&d);
}

/* The default corpus the CLI's --text demos use. */
static void test_corpus(void)
{
    char err[512];
    text_data d;
    int rc = text_load(&d, "data/tiny.txt", err, sizeof err);
    CHECK(rc == 0, "data/tiny.txt: %s", err);
    if (rc)
        return;
    CHECK(d.n >= 30000 && d.n <= 60000, "data/tiny.txt is %zu bytes", d.n);
    int printable = 1;
    for (int i = 0; i < d.vocab_size; i++)
        printable &= d.vocab[i] == '\n' || (d.vocab[i] >= 32 && d.vocab[i] < 127);
    CHECK(printable && d.vocab_size >= 20 && d.vocab_size <= 80, "corpus vocabulary: %d bytes",
          d.vocab_size);
    CHECK(text_check_context(&d, 128, 1, err, sizeof err) == 0, "corpus too short: %s", err);
    text_free(&d);
}

/* The fingerprint a checkpoint records of its text: FNV-1a 64 of the bytes
 * (the published reference values of "a" and "foobar"), and a reordering
 * of the same bytes or one byte more changes it. */
static void test_text_fingerprint(void)
{
    char err[256];
    const struct { const char *s; uint64_t h; } known[] = {
        { "a", 0xaf63dc4c8601ec8cull }, { "foobar", 0x85944171f73967e8ull },
    };
    for (int i = 0; i < 2; i++) {
        text_data d;
        const char *s = known[i].s;
        /* one distinct byte is refused as a text: score it through a vocabulary */
        uint8_t vocab[] = { 'a', 'b', 'f', 'o', 'r' };
        CHECK(text_from_bytes_vocab(&d, "t", (const uint8_t *)s, strlen(s), vocab, 5, err, sizeof err) == 0,
              "%s", err);
        CHECK(text_fingerprint(&d) == known[i].h, "FNV-1a of \"%s\": %016llx", s,
              (unsigned long long)text_fingerprint(&d));
        text_free(&d);
    }
    const char *texts[] = { "abcabc", "cbacba", "abcabca" };
    uint64_t h[3];
    for (int i = 0; i < 3; i++) {
        text_data d;
        CHECK(text_from_bytes(&d, (const uint8_t *)texts[i], strlen(texts[i]), err, sizeof err) == 0, "%s", err);
        h[i] = text_fingerprint(&d);
        text_free(&d);
    }
    CHECK(h[0] != h[1] && h[0] != h[2], "a reordered or longer text has another fingerprint");
}

int main(void)
{
    test_open();
    test_text_fingerprint();
    test_determinism();
    const char *names[] = {"copy", "reverse", "sort", "add"};
    for (int k = 0; k < 4; k++) {
        test_batches(names[k]);
        test_heldout(names[k]);
    }
    test_format_parse();
    test_text_vocab();
    test_text_files();
    test_text_batches();
    test_corpus();
    return check_done();
}
