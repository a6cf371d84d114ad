/*
 * run.c - data, evaluation and generation shared by the subcommands (see
 * run.h).
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"

int dataset_open_task(dataset *d, const char *name, uint64_t seed, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (task_open(&d->task, name, err, errlen) != 0)
        return -1;
    d->is_task = 1;
    d->n_heldout = task_heldout(&d->task, seed, &d->heldout);
    if (d->n_heldout < 0) {
        snprintf(err, errlen, "out of memory building the held-out set of task %s", name);
        return -1;
    }
    return 0;
}

int dataset_open_text(dataset *d, const char *path, const uint8_t *vocab, int vocab_size, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    return text_load_vocab(&d->text, path, vocab, vocab_size, err, errlen);
}

void dataset_free(dataset *d)
{
    if (!d->is_task)
        text_free(&d->text);
    free(d->heldout);
    memset(d, 0, sizeof *d);
}

int dataset_vocab_size(const dataset *d) { return d->is_task ? d->task.vocab : d->text.vocab_size; }
int dataset_seq_len(const dataset *d, int T) { return d->is_task ? d->task.len : T; }

void dataset_batch(const dataset *d, int random_order, ag_pcg32 *rng, long step, int B, int T,
                   int32_t *x, int32_t *y)
{
    if (d->is_task)
        task_train_batch(&d->task, rng, B, x, y);
    else
        text_batch(&d->text, random_order, rng, step, B, T, x, y);
}

int text_check_unchanged(const ckpt *ck, const text_data *d, int same_file, char *err, size_t errlen)
{
    const char *bytes = ckpt_meta(ck, "text_bytes"), *hash = ckpt_meta(ck, "text_fnv1a64");
    if (!bytes || !hash)
        return 0;                   /* saved before checkpoints recorded it */
    /* as this file writes them: decimal digits, and 16 lowercase hex ones */
    size_t nd = strspn(bytes, "0123456789"), nh = strspn(hash, "0123456789abcdef");
    int bad_bytes = nd == 0 || nd > 19 || bytes[nd];
    if (bad_bytes || nh != 16 || hash[nh]) {
        ag_set_err(err, errlen, "the checkpoint's metadata %s = '%.40s%s' is not %s, so %s cannot be compared "
                   "with the text it was trained on", bad_bytes ? "text_bytes" : "text_fnv1a64", bad_bytes ? bytes : hash,
                   meta_more(bad_bytes ? bytes : hash), bad_bytes ? "a byte count" : "16 hexadecimal digits", d->name);
        return -2;
    }
    char now[24];
    snprintf(now, sizeof now, "%016llx", (unsigned long long)text_fingerprint(d));
    unsigned long long then = strtoull(bytes, NULL, 10);
    if (then == (unsigned long long)d->n && strcmp(hash, now) == 0)
        return 0;
    /* the file named then, changed since; or another file (or one not known
     * to be it), which differs from the text named */
    const char *trained = ckpt_meta(ck, "text_path");
    const char *what = same_file ? " has changed since the checkpoint was saved" : " differs from ";
    const char *named = same_file ? "" : trained ? trained : "the text";
    const char *then_was = same_file ? "" : ", the text the checkpoint was trained on";
    const char *was = same_file ? "then" : "recorded", *is = same_file ? "now" : "here";
    if (then != (unsigned long long)d->n)
        ag_set_err(err, errlen, "%s%s%s%s: %llu bytes %s, %zu %s", d->name, what, named, then_was, then, was, d->n, is);
    else
        ag_set_err(err, errlen, "%s%s%s%s: the same %zu bytes, other contents (FNV-1a %s %s, %s %s)", d->name, what,
                   named, then_was, d->n, hash, was, now, is);
    return -1;
}

int example_input(const char *data, const model *m, int tokens, uint64_t seed, int32_t **x, int32_t **y, int *room,
                  char *err, size_t errlen)
{
    int T = m->cfg.context, V = m->cfg.vocab_size;
    int is_text = !data || strcmp(data, "text") == 0;
    task t;
    if (!is_text && task_open(&t, data, err, errlen))
        return -1;
    *room = is_text ? T : t.len;
    if (tokens > *room) {
        snprintf(err, errlen, "%d tokens are more than the %s (%d)", tokens,
                 is_text ? "model's context" : "task's sequence length", *room);
        return -1;
    }
    int n = tokens ? tokens : is_text ? (T < 8 ? T : 8) : t.len;
    if (!(*x = malloc((size_t)2 * (*room + 1) * sizeof **x))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *y = *x + *room + 1;
    if (!is_text) {
        ag_pcg32 rng;
        ag_pcg32_seed(&rng, seed, 5);
        int32_t ex[256];
        task_draw(&t, &rng, ex);
        task_split(&t, ex, *x, *y);
    } else {
        for (int i = 0; i < n; i++) {
            (*x)[i] = i % V;
            (*y)[i] = (i + 1) % V;
        }
    }
    return n;
}

/* ---- a run's settings, as its checkpoint records them -------------------- */

const run_settings RUN_DEFAULTS = {
    .lr = 0, .momentum = 0.9, .weight_decay = 0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .clip = 1.0,
    .min_lr = 0, .warmup = 0, .batch = 32, .seed = 1, .steps = 400, .schedule = "constant", .order = "random",
    .precision = "fp32", .schedule_steps = 400, .text_path = NULL, .micro_batch = 0, .log_path = NULL,
};

double run_default_lr(int adamw) { return adamw ? 3e-3 : 0.1; }

static const char *const SCHEDULES[] = { "constant", "cosine", NULL };
static const char *const ORDERS[] = { "random", "sequential", NULL };
static const char *const PRECISIONS[] = { "fp32", "bf16", NULL };

#define AT(field) offsetof(run_settings, field)
/* The ranges: what the flags of `attograd train` take (its option rows read
 * them from here). */
const run_recorded RUN_RECORDED[RUN_N_RECORDED] = {
    { "lr", RUN_REAL, AT(lr), NULL, NULL, 0, RUN_MAX_LR, 1 },
    { "momentum", RUN_REAL, AT(momentum), NULL, NULL, 0, 0.999999, 0 },
    { "weight_decay", RUN_REAL, AT(weight_decay), NULL, NULL, 0, 1e6, 0 },
    { "beta1", RUN_REAL, AT(beta1), NULL, NULL, 0, 0.999999, 0 },
    { "beta2", RUN_REAL, AT(beta2), NULL, NULL, 0, 0.999999999, 0 },
    { "eps", RUN_REAL, AT(eps), NULL, NULL, 0, 1, 1 },
    { "clip", RUN_REAL, AT(clip), NULL, NULL, 0, 1e308, 0 },
    { "min_lr", RUN_REAL, AT(min_lr), NULL, NULL, 0, 1e6, 0 },
    { "warmup", RUN_LONG, AT(warmup), NULL, NULL, 0, 1e15, 0 },
    { "batch", RUN_INT, AT(batch), NULL, NULL, 1, RUN_MAX_BATCH, 0 },
    { "seed", RUN_INT64, AT(seed), NULL, NULL, 0, RUN_MAX_SEED, 0 },
    { "steps", RUN_LONG, AT(steps), NULL, NULL, 0, 1e15, 0 },
    { "schedule", RUN_WORD, AT(schedule), SCHEDULES, NULL, 0, 0, 0 },
    { "order", RUN_WORD, AT(order), ORDERS, NULL, 0, 0, 0 },
    { "precision", RUN_WORD, AT(precision), PRECISIONS, "fp32", 0, 0, 0 },   /* runs saved before bf16 existed */
    { "schedule_steps", RUN_LONG, AT(schedule_steps), NULL, "@steps", 0, 1e15, 0 },
    { "text_path", RUN_PATH, AT(text_path), NULL, "", 0, 0, 0 },
    { "micro_batch", RUN_INT, AT(micro_batch), NULL, "", 1, 1 << 20, 0 },  /* whole batches (microbatch.h) */
    { "log_path", RUN_PATH, AT(log_path), NULL, "", 0, 0, 0 },
};
#undef AT

const run_recorded RUN_DROPOUT = { "dropout", RUN_REAL, 0, NULL, "0", 0, MODEL_MAX_DROPOUT, 0 };

/* Where setting k lives in s. */
#define FIELD(type, s, k) ((type *)((char *)(s) + (k)->offset))
#define CFIELD(type, s, k) ((const type *)((const char *)(s) + (k)->offset))

static int is_unset(const run_settings *s, const run_recorded *k)
{
    switch (k->kind) {
    case RUN_REAL: return *CFIELD(double, s, k) == 0;
    case RUN_LONG: return *CFIELD(long, s, k) == 0;
    case RUN_INT64: return *CFIELD(int64_t, s, k) == 0;
    case RUN_INT: return *CFIELD(int, s, k) == 0;
    default: return *CFIELD(char *, s, k) == NULL;
    }
}

void run_record_write(run_record *r, const run_settings *s, const text_data *text)
{
    r->n = 0;
#define PUT(key, ...) (snprintf(r->values[r->n], sizeof r->values[r->n], __VA_ARGS__), \
                       r->kv[2 * r->n] = (key), r->kv[2 * r->n + 1] = r->values[r->n], r->n++)
    for (int i = 0; i < RUN_N_RECORDED; i++) {
        const run_recorded *k = &RUN_RECORDED[i];
        if (k->missing && !*k->missing && is_unset(s, k))
            continue;
        if (k->kind == RUN_REAL)
            PUT(k->key, "%.17g", *CFIELD(double, s, k));
        else if (k->kind == RUN_LONG)
            PUT(k->key, "%ld", *CFIELD(long, s, k));
        else if (k->kind == RUN_INT64)
            PUT(k->key, "%" PRId64, *CFIELD(int64_t, s, k));
        else if (k->kind == RUN_INT)
            PUT(k->key, "%d", *CFIELD(int, s, k));
        else {
            r->kv[2 * r->n] = k->key;
            r->kv[2 * r->n + 1] = *CFIELD(char *, s, k);
            r->n++;
        }
        if (k->offset == offsetof(run_settings, text_path) && text) {
            PUT("text_bytes", "%zu", text->n);
            PUT("text_fnv1a64", "%016llx", (unsigned long long)text_fingerprint(text));
        }
    }
#undef PUT
}

/* v in k's range, compared as `attograd train` compares a flag's value. */
static int in_range(const run_recorded *k, double v)
{
    return (k->min_open ? v > k->min : v >= k->min) && v <= k->max;
}

/* A real setting's value from text, as the flags read it: 0, or -1 when
 * it is not a number in k's range (one too close to 0 for a normal double
 * is refused, as the flag refuses it). */
static int real_read(const run_recorded *k, const char *text, double *out)
{
    double v;
    if (run_read_real(text, &v) != RUN_NUMBER || !in_range(k, v))
        return -1;
    *out = v;
    return 0;
}

int run_setting_set(run_settings *s, const run_recorded *k, const char *text)
{
    if (k->kind == RUN_REAL) {
        if (real_read(k, text, FIELD(double, s, k)))
            return -1;
    } else if (k->kind == RUN_LONG || k->kind == RUN_INT64 || k->kind == RUN_INT) {
        long long v;
        long long lo = k->kind == RUN_INT ? INT_MIN : k->kind == RUN_LONG ? LONG_MIN : INT64_MIN;
        long long hi = k->kind == RUN_INT ? INT_MAX : k->kind == RUN_LONG ? LONG_MAX : INT64_MAX;
        if (run_read_integer(text, &v) != RUN_NUMBER || v < lo || v > hi ||
            !run_int_in_range(v, k->min, k->min_open, k->max))
            return -1;
        if (k->kind == RUN_LONG)
            *FIELD(long, s, k) = (long)v;
        else if (k->kind == RUN_INT64)
            *FIELD(int64_t, s, k) = (int64_t)v;
        else
            *FIELD(int, s, k) = (int)v;
    } else if (k->kind == RUN_WORD) {
        int i = 0;
        while (text && k->words[i] && strcmp(k->words[i], text) != 0)
            i++;
        if (!text || !k->words[i])
            return -1;
        *FIELD(const char *, s, k) = k->words[i];
    } else {
        if (!text || !*text)
            return -1;
        *FIELD(const char *, s, k) = text;
    }
    return 0;
}

#undef FIELD
#undef CFIELD

void run_setting_allowed(const run_recorded *k, char *buf, size_t len)
{
    if (k->kind == RUN_WORD) {
        size_t u = (size_t)snprintf(buf, len, "it must be");
        for (int i = 0; k->words[i] && u < len; i++)
            u += (size_t)snprintf(buf + u, len - u, "%s %s", i == 0 ? "" : k->words[i + 1] ? "," : " or",
                                  k->words[i]);
    } else if (k->kind == RUN_PATH) {
        snprintf(buf, len, "it must be a path");
    } else {
        /* a whole number's bounds in full (9200000000000000000, not 9.2e+18) */
        const int whole = k->kind != RUN_REAL;
        /* clip's 1e308 too: 1e309 and DBL_MAX are past it, and a line
         * saying only ">= 0" would call them in range */
        char lo[40], hi[48];
        snprintf(lo, sizeof lo, whole ? "%.0f" : "%.10g", k->min);
        snprintf(hi, sizeof hi, whole ? " and <= %.0f" : " and <= %.10g", k->max);
        snprintf(buf, len, "it must be a%s number %s %s%s", whole ? " whole" : "", k->min_open ? ">" : ">=", lo, hi);
    }
}

const run_recorded *run_recorded_find(const char *key)
{
    for (int i = 0; i < RUN_N_RECORDED; i++)
        if (strcmp(RUN_RECORDED[i].key, key) == 0)
            return &RUN_RECORDED[i];
    return NULL;
}

const char *run_recorded_text(const ckpt *ck, const run_recorded *k)
{
    const char *v = ckpt_meta(ck, k->key);
    if (v || !k->missing || !*k->missing)
        return v;
    return k->missing[0] == '@' ? ckpt_meta(ck, k->missing + 1) : k->missing;
}

int run_settings_read(run_settings *s, const ckpt *ck, char *err, size_t errlen)
{
    run_settings read = RUN_DEFAULTS;
    for (int i = 0; i < RUN_N_RECORDED; i++) {
        const run_recorded *k = &RUN_RECORDED[i];
        const char *v = run_recorded_text(ck, k);
        if (!v && k->missing && !*k->missing)
            continue;                   /* unset */
        if (!v && !k->missing) {
            ag_set_err(err, errlen, "%s: metadata '%s' is missing", ck->path, k->key);
            return -1;
        }
        if (!v || run_setting_set(&read, k, v)) {
            char allowed[96];
            run_setting_allowed(k, allowed, sizeof allowed);
            ag_set_err(err, errlen, "%s: metadata %s = '%.40s%s' is not a valid value (%s)", ck->path, k->key,
                       v ? v : "", meta_more(v), allowed);
            return -1;
        }
    }
    /* what a new run's flags may not say together (a resumed run's horizon
     * is schedule_steps, which --steps set when the run began) */
    if (strcmp(read.schedule, "cosine") == 0 && read.warmup > read.schedule_steps) {
        ag_set_err(err, errlen, "%s: metadata warmup = %ld is past schedule_steps = %ld (a cosine schedule's warmup "
                   "must be at most its steps)", ck->path, read.warmup, read.schedule_steps);
        return -1;
    }
    if (strcmp(read.schedule, "cosine") == 0 && read.min_lr > read.lr) {
        ag_set_err(err, errlen, "%s: metadata min_lr = %.40s%s is above lr = %.40s%s (a cosine schedule's min_lr "
                   "must be at most its lr)", ck->path, ckpt_meta(ck, "min_lr"), meta_more(ckpt_meta(ck, "min_lr")),
                   ckpt_meta(ck, "lr"), meta_more(ckpt_meta(ck, "lr")));
        return -1;
    }
    *s = read;
    return 0;
}

int run_dropout_read(const ckpt *ck, double *p, char *err, size_t errlen)
{
    const char *v = ckpt_meta(ck, RUN_DROPOUT.key);
    if (real_read(&RUN_DROPOUT, v ? v : RUN_DROPOUT.missing, p)) {
        char allowed[96];
        run_setting_allowed(&RUN_DROPOUT, allowed, sizeof allowed);
        ag_set_err(err, errlen, "%s: metadata %s = '%.40s%s' is not a valid value (%s)", ck->path, RUN_DROPOUT.key,
                   v ? v : "", meta_more(v), allowed);
        return -1;
    }
    return 0;
}

double lr_schedule(int cosine, long step, long warmup, long total, double lr, double min_lr)
{
    if (!cosine)
        return lr;
    if (step < warmup)
        return lr * (double)(step + 1) / (double)warmup;
    long span = total - warmup;
    double progress = span > 0 ? (double)(step - warmup) / (double)span : 1;
    if (progress > 1)
        progress = 1;
    return min_lr + 0.5 * (lr - min_lr) * (1 + ag_math_cos(3.14159265358979323846 * progress));
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *human(double v, char *buf, size_t len)
{
    if (v >= 1e9)
        snprintf(buf, len, "%.2f G", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, len, "%.2f M", v / 1e6);
    else if (v >= 1e4)
        snprintf(buf, len, "%.1f k", v / 1e3);
    else
        snprintf(buf, len, "%.0f", v);
    return buf;
}

/* ---- evaluation --------------------------------------------------------- */

long eval_items(const dataset *d, const model *m, int split, long max_windows)
{
    if (d->is_task)
        return d->n_heldout;
    const text_data *td = &d->text;
    size_t windows = text_eval_windows(split == TEXT_TRAIN ? td->n_train : td->n - td->n_train, m->cfg.context);
    if (max_windows > 0 && windows > (size_t)max_windows)
        windows = (size_t)max_windows;
    return (long)windows;
}

/* One forward pass: the loss summed over the counted targets, and their count. */
static void score(ag_ctx *ctx, model *m, const int32_t *x, const int32_t *y, int rows, int S, double *v)
{
    long k = 0;
    for (size_t j = 0; j < (size_t)rows * S; j++)
        k += y[j] >= 0;
    ag_reset(ctx);
    ag_tensor *logits = model_forward(ctx, m, x, rows, S, 0, NULL);
    v[0] = (double)ag_cross_entropy(ctx, logits, y)->data[0] * (double)k;
    v[1] = (double)k;
}

void eval_group(ag_ctx *ctx, model *m, dataset *d, int split, long items, long first, int rows, double v[3])
{
    v[0] = v[1] = v[2] = 0;
    if (rows > items - first)
        rows = (int)(items - first);
    if (rows <= 0)
        return;
    const int S = d->is_task ? d->task.len : m->cfg.context;
    int32_t *x = malloc((size_t)rows * S * sizeof *x), *y = malloc((size_t)rows * S * sizeof *y);
    int32_t *work = d->is_task ? malloc((size_t)rows * (S + 1) * sizeof *work) : NULL;
    if (!x || !y || (d->is_task && !work))
        ag_error("out of memory evaluating %d rows", rows);
    if (d->is_task) {
        const task *t = &d->task;
        const int32_t *problems = d->heldout + (size_t)first * (S + 1);
        for (int r = 0; r < rows; r++)
            task_split(t, problems + (size_t)r * (S + 1), x + (size_t)r * S, y + (size_t)r * S);
        score(ctx, m, x, y, rows, S, v);
        memcpy(work, problems, (size_t)rows * (S + 1) * sizeof *work);
        complete_greedy(ctx, m, work, rows, S + 1, t->prompt, S + 1, rows);
        for (int r = 0; r < rows; r++)
            v[2] += memcmp(work + (size_t)r * (S + 1), problems + (size_t)r * (S + 1),
                           (size_t)(S + 1) * sizeof *work) == 0;
    } else {
        rows = text_eval_batch(&d->text, split, (size_t)first, rows, S, x, y);
        if (rows > 0)
            score(ctx, m, x, y, rows, S, v);
    }
    free(x);
    free(y);
    free(work);
}

eval_result eval_result_of(const dataset *d, const double total[3])
{
    eval_result r = { total[1] > 0 ? total[0] / total[1] : NAN, (long)total[2], d->is_task ? d->n_heldout : 0, 0 };
    return r;
}

eval_result evaluate(ag_ctx *ctx, model *m, dataset *d, int split, long max_windows, int batch,
                     const eval_progress *progress)
{
    int old = ag_set_grad_enabled(ctx, 0);
    int splits[2] = { split, split }, ns = 1;
    if (!d->is_task && split < 0) {
        splits[0] = TEXT_TRAIN;
        splits[1] = TEXT_VAL;
        ns = 2;
    }
    double total[3] = { 0, 0, 0 };
    long items_of[2], all = 0, done = 0;
    int stopped = 0;
    for (int s = 0; s < ns; s++)
        all += items_of[s] = eval_items(d, m, splits[s], max_windows);
    for (int s = 0; s < ns && !stopped; s++) {
        const long items = items_of[s];
        for (long first = 0; first < items && !stopped; first += batch) {
            double v[3];
            eval_group(ctx, m, d, splits[s], items, first, batch, v);
            for (int i = 0; i < 3; i++)
                total[i] += v[i];
            done += items - first < batch ? items - first : batch;
            if (progress && progress->fn)
                progress->fn(progress->user, done, all);
            if (progress && progress->stop && done < all)
                stopped = *progress->stop;
        }
    }
    ag_set_grad_enabled(ctx, old);
    eval_result r = eval_result_of(d, total);
    r.stopped = stopped;
    return r;
}

/* ---- generation --------------------------------------------------------- */

static int argmax(const ag_real *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

void complete_greedy(ag_ctx *ctx, model *m, int32_t *seqs, int n, int stride, int prompt, int len, int batch)
{
    int V = m->cfg.vocab_size;
    int32_t *x = malloc((size_t)batch * len * sizeof *x);
    if (!x)
        ag_error("out of memory for greedy completion");
    for (int first = 0; first < n; first += batch) {
        int rows = n - first < batch ? n - first : batch;
        /* The prompts once, then each new token alone: the earlier
         * positions' keys and values come from the cache. */
        model_cache cache;
        model_cache_init(&cache, m, rows);
        for (int t = prompt; t < len; t++) {
            int from = cache.len, count = t - from;
            for (int r = 0; r < rows; r++)
                memcpy(x + (size_t)r * count, seqs + (size_t)(first + r) * stride + from, (size_t)count * sizeof *x);
            ag_reset(ctx);
            ag_tensor *logits = model_forward_cached(ctx, m, &cache, x, rows, count);
            for (int r = 0; r < rows; r++)
                seqs[(size_t)(first + r) * stride + t] =
                    argmax(logits->data + ((size_t)r * count + (size_t)(count - 1)) * V, V);
        }
        model_cache_free(&cache);
    }
    free(x);
}

/* The next token from the last position's logits: greedy at temperature
 * 0, else a draw from softmax(logits / temperature) over the top_k
 * largest (ties at the cut kept; top_k 0: all).  p: scratch for V values. */
static int choose(const ag_real *last, int V, double temperature, int top_k, ag_pcg32 *rng, double *p)
{
    if (temperature <= 0)
        return argmax(last, V);
    double cut = -INFINITY;
    if (top_k > 0 && top_k < V) {
        for (int k = 0; k < V; k++)
            p[k] = last[k];
        for (int k = 0; k < top_k; k++) {
            int b = 0;
            for (int j = 1; j < V; j++)
                if (p[j] > p[b])
                    b = j;
            cut = p[b];
            p[b] = -INFINITY;
        }
    }
    double max = -INFINITY, sum = 0;
    for (int k = 0; k < V; k++)
        if (last[k] >= cut && last[k] > max)
            max = last[k];
    for (int k = 0; k < V; k++) {
        p[k] = last[k] >= cut ? ag_math_exp((last[k] - max) / temperature) : 0;
        sum += p[k];
    }
    double u = ag_pcg32_uniform(rng) * sum;
    int next = V - 1;
    for (int k = 0; k < V; k++) {
        if (u < p[k]) {
            next = k;
            break;
        }
        u -= p[k];
    }
    while (p[next] == 0 && next > 0)
        next--;
    return next;
}

/* The prompt's last (at most context) tokens run once; then each new token
 * runs alone, attending to the earlier ones through the key/value cache.
 * When the cache is full the window would slide past the context, and
 * with learned absolute positions every kept token then sits at a new
 * position, so its keys and values must be recomputed: the last half
 * context of tokens is run again from position 0, once per half context of
 * new tokens (not once per token), so the window is between half and a
 * whole context long. */
int sample_tokens(ag_ctx *ctx, model *m, int32_t *tokens, int n, int n_new, double temperature, int top_k,
                  ag_pcg32 *rng, int (*each)(void *user, int32_t token), void *user)
{
    const int V = m->cfg.vocab_size, T = m->cfg.context;
    double *p = malloc((size_t)V * sizeof *p);
    if (!p)
        ag_error("out of memory sampling");
    model_cache cache;
    model_cache_init(&cache, m, 1);
    int run = n < T ? n : T;                    /* tokens to run: the window's */
    for (int i = 0; i < n_new && run > 0; i++) {
        ag_reset(ctx);
        ag_tensor *logits = model_forward_cached(ctx, m, &cache, tokens + n - run, 1, run);
        int next = choose(logits->data + (size_t)(run - 1) * V, V, temperature, top_k, rng, p);
        tokens[n++] = next;
        if (each && each(user, next))
            break;
        run = 1;
        if (cache.len == T) {                   /* full: keep the last half context */
            cache.len = 0;
            run = T / 2 > 0 ? T / 2 : 1;
        }
    }
    model_cache_free(&cache);
    free(p);
    return n;
}
