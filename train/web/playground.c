/*
 * playground.c - what the browser playground's Worker calls: one run (data,
 * model, optimizer, generators) built from the page's settings or from a
 * checkpoint, trained a step at a time, evaluated, looked into (attention
 * weights for a prompt) and saved, all through the model library.
 *
 * The run is the one `attograd train` makes from the same settings: the
 * same three PCG32 streams of --seed, the same default options, the same
 * checkpoint metadata, so a checkpoint saved here is the reference build's
 * byte for byte (tests/web_playground.sh checks it).  Every function
 * returns 0 (or a count) on success and -1 with pg_error() set otherwise;
 * the engine's own errors (ag_error) come back the same way.
 */
#include <ctype.h>
#include <emscripten/heap.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "run.h"
#include "step.h"
#include "walkthrough.h"

/* The three generators of a run, as train_setup.c seeds them. */
enum { STREAM_INIT = 1, STREAM_DROPOUT = 2, STREAM_DATA = 3, STREAM_SAMPLE = 4 };

static struct {
    int live;                   /* a model exists */
    int trainable;              /* and its training data is here (not a text model opened alone) */
    run_settings o;             /* what its checkpoint records (run.h): the command's defaults
                                 * but for optimizer, lr, batch, steps and seed */
    int adamw, cosine, random_order;
    dataset data;
    char text_name[256];        /* the text file's name (checkpoint metadata text_path) */
    uint8_t vocab[256];
    int vocab_size;
    model m;
    ag_ctx *ctx;                /* the training steps' arena */
    ag_ctx *look;               /* evaluation, attention, completion */
    ag_optim *optim;
    ag_pcg32 data_rng;
    int S;                      /* tokens per training row */
    int32_t *x, *y;             /* one batch, [B,S] each */
    long step;                  /* steps taken */
    char trained_as[80];        /* an opened checkpoint's bf16 or micro-batches, which the page
                                 * does not train with ("" when neither) */
    char unlinked[320];         /* its settings the page's link cannot hold ("" when none) */
    char from_page[80];         /* what an opened file did not say, taken from the page's Heads
                                 * and Task ("" when it said all) */
    struct {                    /* an evaluation scored in parts (pg_eval_begin) */
        int on;                 /* under way: begun, not finished, the model unchanged since */
        long items, first;      /* the windows (or problems) it scores; the next group's first */
        double total[3];        /* the groups' sums so far, added in order as evaluate() adds them */
    } ev;
} pg;

static char error_text[512];
const char *pg_error(void) { return error_text; }

/* The engine's errors (ag_error: out of memory, misuse) end the entry point
 * that is running with -1: each one sets this jump first (ENTER), and the
 * Worker calls one at a time. */
static jmp_buf engine_jump;

static void engine_error(const char *msg, void *user)
{
    (void)user;
    snprintf(error_text, sizeof error_text, "%s", msg);
    longjmp(engine_jump, 1);
}

#define ENTER(failed)                                   \
    do {                                                \
        if (setjmp(engine_jump))                        \
            return failed;                              \
        ag_set_error_handler(engine_error, NULL);       \
    } while (0)

/* Whatever a run holds, also one an engine error (out of memory) left half
 * built: every part starts NULL and each free takes NULL. */
static void run_free(void)
{
    free(pg.x);
    free(pg.y);
    ag_optim_free(pg.optim);
    ag_ctx_free(pg.ctx);
    ag_ctx_free(pg.look);
    model_free(&pg.m);
    dataset_free(&pg.data);
    memset(&pg, 0, sizeof pg);
}

static void take_vocab(void)
{
    pg.vocab_size = dataset_vocab_size(&pg.data);
    for (int i = 0; i < pg.vocab_size; i++)
        pg.vocab[i] = pg.data.is_task ? (uint8_t)pg.data.task.chars[i] : pg.data.text.vocab[i];
}

/* Data from a task name, or the text file at text_path (named name in the
 * checkpoint) with vocabulary vocab (NULL: the file's own). */
static int open_data(dataset *d, const char *task_name, const char *text_path, const uint8_t *vocab,
                     int vocab_size, uint64_t seed)
{
    if (task_name)
        return dataset_open_task(d, task_name, seed, error_text, sizeof error_text);
    memset(d, 0, sizeof *d);
    return text_load_vocab(&d->text, text_path, vocab, vocab_size, error_text, sizeof error_text);
}

/* The optimizer, contexts and batch buffers of a run whose model, data and
 * settings are in place. */
static void run_finish(void)
{
    pg.ctx = ag_ctx_new();
    pg.look = ag_ctx_new();
    ag_pcg32_seed(ag_dropout_rng(pg.ctx), (uint64_t)pg.o.seed, STREAM_DROPOUT);
    ag_pcg32_seed(&pg.data_rng, (uint64_t)pg.o.seed, STREAM_DATA);
    pg.cosine = strcmp(pg.o.schedule, "cosine") == 0;
    pg.random_order = strcmp(pg.o.order, "random") == 0;
    pg.optim = pg.adamw ? ag_optim_adamw(pg.m.params, pg.o.beta1, pg.o.beta2, pg.o.eps, pg.o.weight_decay)
                          : ag_optim_sgd(pg.m.params, pg.o.momentum, pg.o.weight_decay);
    pg.S = dataset_seq_len(&pg.data, pg.m.cfg.context);
    pg.x = malloc((size_t)pg.o.batch * pg.S * sizeof *pg.x);
    pg.y = malloc((size_t)pg.o.batch * pg.S * sizeof *pg.y);
    if (!pg.x || !pg.y)
        ag_error("out of memory for a batch of %d x %d tokens", pg.o.batch, pg.S);
    pg.live = 1;
}

/* A setting of the page's, which may hold anything a number field or a
 * link does (NaN: empty or not a number): 0 when v is in [lo, hi] (ABOVE
 * lo, for a learning rate), else -1 with one line naming the control.
 * (A whole number's: whole_in.) */
enum { REAL, ABOVE };

static int setting_ok(const char *label, double v, double lo, double hi, int kind)
{
    if (v >= lo && v <= hi && (kind != ABOVE || v > lo))
        return 0;
    char is[40];
    snprintf(is, sizeof is, isnan(v) ? "empty or not a number" : "%.17g", v);
    snprintf(error_text, sizeof error_text, "%s must be %s %.15g %s %.15g (it is %s)", label,
             kind == ABOVE ? "a number above" : "a number from", lo,
             kind == ABOVE ? "and at most" : "to", hi, is);
    return -1;
}

/* A number field's text (what the page's fields and links hold: a number
 * or empty) read as `attograd train` reads a flag's number: decimal and
 * the whole text, -0 as 0.  Into *v, NaN when empty or not a number (the
 * range check names it); a number too close to 0 for a double's normal
 * range (1e-320, or 1e-400, which JavaScript reads as 0) refused naming
 * label as the flag refuses it: -1. */
static int setting_read(const char *label, const char *text, double *v)
{
    int r = run_read_real(text, v);
    if (r == RUN_NEAR_0) {
        snprintf(error_text, sizeof error_text, "%s %.40s is too close to 0: below a double's smallest normal "
                 "magnitude (about 2.2e-308)", label, text);
        return -1;
    }
    if (r == RUN_NOT_NUMBER)
        *v = NAN;
    return 0;
}

/* A whole-number setting's text read as `attograd train` reads an integer
 * flag's (run_read_integer: "1e0", "1.0", " 5" and "0x10" are not
 * integers), from lo to hi: 0 with *v, else -1 naming label (a whole
 * number written otherwise told to be written in digits). */
static int whole_in(const char *label, const char *text, double lo, double hi, double *v)
{
    long long n;
    int r = run_read_integer(text, &n);
    *v = r == RUN_NOT_NUMBER ? NAN : r == RUN_PAST_RANGE ? (n < 0 ? -HUGE_VAL : HUGE_VAL) : (double)n;
    if (*v >= lo && *v <= hi)
        return 0;
    double d;
    int otherwise = r == RUN_NOT_NUMBER && run_read_real(text, &d) == RUN_NUMBER && d >= lo && d <= hi &&
                    d == floor(d);
    snprintf(error_text, sizeof error_text, "%s must be a whole number from %.15g to %.15g%s (it is %.40s)", label, lo,
             hi, otherwise ? ", written in digits" : "", *text ? text : "empty or not a number");
    return -1;
}

/* A setting read from its text and checked against the range the model
 * library keeps for the command's flag (k: its row of RUN_RECORDED, or
 * RUN_DROPOUT), within hi where the page holds less (Steps in a 32-bit
 * long); 0 with *v, else -1 naming label. */
static int setting_in(const char *label, const char *text, const run_recorded *k, double hi, double *v)
{
    if (k->kind != RUN_REAL)
        return whole_in(label, text, k->min_open ? k->min + 1 : k->min, k->max < hi ? k->max : hi, v);
    if (setting_read(label, text, v))
        return -1;
    return setting_ok(label, *v, k->min, k->max < hi ? k->max : hi, k->min_open ? ABOVE : REAL);
}

/* The most a step's memory may be: what WebAssembly's 32-bit memory can
 * grow to, less a fifth for the page's other buffers (a text, the
 * attention weights shown, the heap's own waste). */
static double memory_budget(void) { return 0.8 * (double)emscripten_get_heap_max(); }

/* model_train_bytes (the command's estimate; its margin is in the budget),
 * or infinity where the engine refuses even to count them in 32 bits. */
static jmp_buf count_jump;
static void count_error(const char *msg, void *user)
{
    (void)msg;
    (void)user;
    longjmp(count_jump, 1);
}

static double train_bytes(const model_config *cfg, int adamw, int batch, int S)
{
    volatile double need = INFINITY;
    ag_set_error_handler(count_error, NULL);
    if (!setjmp(count_jump))
        need = model_train_bytes(cfg, batch, S, adamw ? 2 : 1, 0);
    ag_set_error_handler(engine_error, NULL);
    return need;
}

/* The largest n in [0, hi] (a Batch, or a text's Context at batch) whose
 * run fits; 0 when none. */
static int largest_fitting(const model_config *cfg, int adamw, int batch, int hi, int vary_batch)
{
    int lo = 0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        model_config c = *cfg;
        if (!vary_batch)
            c.context = mid;
        if (train_bytes(&c, adamw, vary_batch ? mid : batch, vary_batch ? c.context : mid) <= memory_budget())
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* A run that cannot fit is refused before anything big is allocated,
 * naming the largest Batch that would, and for a text (is_text) the
 * largest Context at its Batch, as attograd train names them; an opened
 * checkpoint's (opened) keeps its batch and context, as train --resume
 * does, so that run goes elsewhere. */
static int memory_ok(const model_config *cfg, int adamw, int batch, int S, int opened, int is_text)
{
    double need = train_bytes(cfg, adamw, batch, S);
    if (need <= memory_budget())
        return 0;
    int b = opened ? 0 : largest_fitting(cfg, adamw, batch, batch, 1);
    int ctx = opened || !is_text ? 0 : largest_fitting(cfg, adamw, batch, S, 0);
    size_t u = (size_t)snprintf(error_text, sizeof error_text, "this run needs %s%.1f GB for a %d x %d batch, more "
                                "than the page's %.1f GB: ", isinf(need) ? "over " : "about ",
                                (isinf(need) ? (double)SIZE_MAX : need) / 1e9, batch, S, memory_budget() / 1e9);
    if (opened)
        snprintf(error_text + u, sizeof error_text - u, "a resumed run keeps its batch, so go on with attograd train --resume");
    else if (b && ctx)
        snprintf(error_text + u, sizeof error_text - u, "Batch %d would fit, or Context %d at Batch %d", b, ctx, batch);
    else if (b)
        snprintf(error_text + u, sizeof error_text - u, "Batch %d would fit", b);
    else if (ctx)
        snprintf(error_text + u, sizeof error_text - u, "Context %d would fit at Batch %d", ctx, batch);
    else
        snprintf(error_text + u, sizeof error_text - u, "not even Batch 1 fits: lower d_model, Layers or Context");
    return -1;
}

/* A seed as the page holds it, text (a JS number loses digits past 2^53):
 * into *seed when it is a whole number from 0 to RUN_MAX_SEED, the range
 * `attograd train --seed` takes, written as the flag takes it (decimal
 * digits: not "3e9" nor "7.0"); else -1 with one line naming label. */
static int seed_ok(const char *label, const char *text, int64_t *seed)
{
    long long v;
    if (run_read_integer(text, &v) == RUN_NUMBER && run_int_in_range(v, 0, 0, RUN_MAX_SEED)) {
        *seed = v;
        return 0;
    }
    snprintf(error_text, sizeof error_text, "%s must be a whole number from 0 to %.0f (it is %.40s)", label,
             RUN_MAX_SEED, *text && !isspace((unsigned char)*text) ? text : "empty or not a number");
    return -1;
}

/* A new run: task is "copy", "reverse", "sort" or "add", or "text" with
 * the text at text_path (its name for the checkpoint: text_name).  The
 * numbers come as the page's fields hold them and are checked here, as
 * `attograd train` checks its flags, within what a run in the page can
 * hold (Steps is a `long`, 32 bits in WebAssembly; Seed comes as text, a
 * 64-bit number); context 0: the task's length, 64 for text.  Everything
 * is checked, the data read and the memory counted before the run there
 * is goes: on a refusal it is as it was. */
int pg_new(const char *task_name, const char *text_path, const char *text_name, const char *layers_text,
           const char *heads_text, const char *d_model_text, const char *context_text, const char *dropout_text,
           int adamw, const char *lr_text, const char *batch_text, const char *steps_text, const char *seed_text)
{
    ENTER(-1);
    int64_t seed;
    double layers, heads, d_model, context, dropout, lr, batch, steps;
    if (whole_in("Layers", layers_text, 1, MODEL_MAX_LAYERS, &layers) ||
        whole_in("Heads", heads_text, 1, MODEL_MAX_HEADS, &heads) ||
        whole_in("d_model", d_model_text, 1, MODEL_MAX_D_MODEL, &d_model) ||
        whole_in("Context", context_text, 0, MODEL_MAX_CONTEXT, &context) ||
        setting_in("Dropout", dropout_text, &RUN_DROPOUT, INFINITY, &dropout) ||
        setting_in("Learning rate", lr_text, run_recorded_find("lr"), INFINITY, &lr) ||
        setting_in("Batch", batch_text, run_recorded_find("batch"), INFINITY, &batch) ||
        setting_in("Steps", steps_text, run_recorded_find("steps"), LONG_MAX, &steps) ||
        seed_ok("Seed", seed_text, &seed))
        return -1;
    if ((int)d_model % (int)heads != 0) {
        snprintf(error_text, sizeof error_text, "Heads %d does not divide d_model %d (each head gets d_model/heads dims)",
                 (int)heads, (int)d_model);
        return -1;
    }
    int is_text = strcmp(task_name, "text") == 0;
    dataset d;
    if (open_data(&d, is_text ? NULL : task_name, text_path, NULL, 0, (uint64_t)seed)) {
        dataset_free(&d);
        return -1;
    }
    model_config cfg = { ARCH_GPT, dataset_vocab_size(&d), (int)layers, (int)heads, (int)d_model, (int)context, 0,
                         dropout };
    if (!cfg.context)
        cfg.context = d.is_task ? d.task.len : 64;
    if ((d.is_task ? task_check_context(&d.task, cfg.context, error_text, sizeof error_text)
                   : text_check_context(&d.text, cfg.context, 1, error_text, sizeof error_text)) ||
        memory_ok(&cfg, adamw, (int)batch, dataset_seq_len(&d, cfg.context), 0, !d.is_task)) {
        dataset_free(&d);
        return -1;
    }
    run_free();
    pg.data = d;
    pg.o = RUN_DEFAULTS;
    pg.adamw = adamw;
    pg.o.lr = lr;
    pg.o.batch = (int)batch;
    pg.o.steps = pg.o.schedule_steps = (long)steps;
    pg.o.seed = seed;
    snprintf(pg.text_name, sizeof pg.text_name, "%s", is_text ? text_name : "");
    pg.o.text_path = is_text ? pg.text_name : NULL;     /* the page knows the file's name, not where it lives */
    take_vocab();
    ag_pcg32 init_rng;
    ag_pcg32_seed(&init_rng, (uint64_t)pg.o.seed, STREAM_INIT);
    model_build(&pg.m, &cfg);
    model_init(&pg.m, &init_rng);
    run_finish();
    pg.trainable = 1;
    return 0;
}

/* One optimizer step on the batch of pg.step (the step every trainer takes,
 * step.h); NaN with error_text set when it diverged. */
static double train_step(double lr)
{
    dataset_batch(&pg.data, pg.random_order, &pg.data_rng, pg.step, pg.o.batch, pg.S, pg.x, pg.y);
    step_rows batch = { pg.x, pg.y, pg.o.batch, pg.S, 1.0, NULL };
    step_result r = step_take(pg.ctx, &pg.m, pg.optim, &batch, pg.o.clip, lr);
    if (r.status == STEP_OK)
        return r.loss;
    if (r.status == STEP_BAD_LOSS)
        snprintf(error_text, sizeof error_text, "loss is %g at step %ld: lower the Learning rate", r.loss, pg.step + 1);
    else if (r.status == STEP_BAD_GRAD)
        snprintf(error_text, sizeof error_text, "the gradient of %s is not finite at step %ld: lower the Learning rate",
                 r.bad->name, pg.step + 1);
    else
        snprintf(error_text, sizeof error_text, "the update at step %ld made %s not finite: lower the Learning rate",
                 pg.step + 1, r.bad->name);
    return NAN;
}

/* Up to n steps (not past Steps): their losses into losses[]; returns how
 * many were taken, or -1 (pg_error) when a step diverged. */
int pg_train(int n, float *losses)
{
    ENTER(-1);
    int done = 0;
    if (!pg.live || !pg.trainable) {
        snprintf(error_text, sizeof error_text, pg.live ? "this model's text is not loaded: choose it under Text "
                 "to train on" : "no model");
        return -1;
    }
    pg.ev.on = 0;                    /* the model an evaluation under way scored changes */
    for (; done < n && pg.step < pg.o.steps; done++) {
        double lr = lr_schedule(pg.cosine, pg.step, pg.o.warmup, pg.o.schedule_steps, pg.o.lr, pg.o.min_lr);
        double l = train_step(lr);
        if (isnan(l))
            return -1;
        losses[done] = (float)l;
        pg.step++;
    }
    return done;
}

/* Steps raised (or lowered, not below the steps taken) on the run as it
 * is, as `attograd train --resume --steps N` does: a constant schedule
 * has no end to keep, a cosine one keeps the horizon it was started with
 * (schedule_steps), so more steps never raise the learning rate again. */
int pg_set_steps(const char *steps_text)
{
    ENTER(-1);
    double steps;
    if (!pg.live) {
        snprintf(error_text, sizeof error_text, "no model");
        return -1;
    }
    if (setting_in("Steps", steps_text, run_recorded_find("steps"), LONG_MAX, &steps))     /* as pg_new reads it */
        return -1;
    if ((long)steps < pg.step) {
        snprintf(error_text, sizeof error_text, "Steps %ld is less than the %ld step%s the run has taken", (long)steps,
                 pg.step, pg.step == 1 ? "" : "s");
        return -1;
    }
    pg.o.steps = (long)steps;
    if (!pg.cosine)
        pg.o.schedule_steps = pg.o.steps;
    return 0;
}

/* An evaluation in parts, so that the Worker hears a Pause between them:
 * the validation split's windows (at most max_windows; 0 = all) or a task's
 * held-out problems, scored a group of `batch` at a time by pg_eval_next,
 * and added in order: the same sums, so the same result, as evaluate()'s
 * (the last step's evaluation of a large text's every window takes minutes
 * in the page).  Returns the items it scores, or -1.  A training step ends
 * it (pg_eval_next then refuses). */
long pg_eval_begin(int max_windows)
{
    if (!pg.live || !pg.trainable) {
        snprintf(error_text, sizeof error_text, "nothing to evaluate on");
        return -1;
    }
    pg.ev.items = eval_items(&pg.data, &pg.m, TEXT_VAL, max_windows);
    pg.ev.first = 0;
    pg.ev.total[0] = pg.ev.total[1] = pg.ev.total[2] = 0;
    pg.ev.on = 1;
    return pg.ev.items;
}

/* Scores up to `groups` more groups of the evaluation begun; out[5]: loss,
 * correct, total (the result once it is done), items scored, items in all.
 * Returns 1 when it is done, 0 while items remain, -1 on an error. */
int pg_eval_next(int groups, double *out)
{
    ENTER(-1);
    if (!pg.live || !pg.ev.on) {
        snprintf(error_text, sizeof error_text, "no evaluation under way");
        return -1;
    }
    const int batch = pg.o.batch, old = ag_set_grad_enabled(pg.look, 0);
    for (int g = 0; g < groups && pg.ev.first < pg.ev.items; g++, pg.ev.first += batch) {
        double v[3];
        eval_group(pg.look, &pg.m, &pg.data, TEXT_VAL, pg.ev.items, pg.ev.first, batch, v);
        for (int i = 0; i < 3; i++)
            pg.ev.total[i] += v[i];
    }
    ag_set_grad_enabled(pg.look, old);
    const int done = pg.ev.first >= pg.ev.items;
    eval_result r = eval_result_of(&pg.data, pg.ev.total);
    out[0] = r.loss;
    out[1] = (double)r.correct;
    out[2] = (double)r.total;
    out[3] = (double)(done ? pg.ev.items : pg.ev.first);
    out[4] = (double)pg.ev.items;
    pg.ev.on = !done;
    return done;
}

/* Validation loss (and a task's held-out exact matches) into out[5] (as
 * pg_eval_next's): the whole evaluation at once.  max_windows as in
 * evaluate(): 0 = all. */
int pg_evaluate(int max_windows, double *out)
{
    if (pg_eval_begin(max_windows) < 0)
        return -1;
    return pg_eval_next(INT_MAX, out) < 0 ? -1 : 0;
}

/* A prompt as token ids (at most max); -1 with a message that names the
 * Prompt, as the command's name --prompt (its length first: the model
 * library's own message for a long one speaks of a text). */
static int encode(const char *prompt, int32_t *ids, int max)
{
    size_t n = 0;
    for (const char *c = prompt; *c; c++)
        n += !pg.data.is_task || !isspace((unsigned char)*c);
    if (n > (size_t)max) {
        snprintf(error_text, sizeof error_text, "Prompt: %zu %s, more than the %d the page reads", n,
                 pg.data.is_task ? "tokens" : "bytes", max);
        return -1;
    }
    char e[sizeof error_text - 16];
    int k = pg.data.is_task ? task_parse(&pg.data.task, prompt, ids, max, e, sizeof e)
                            : (int)text_encode(&pg.data.text, prompt, ids, (size_t)max, e, sizeof e);
    if (k < 0)
        snprintf(error_text, sizeof error_text, "Prompt: %s", e);
    return k;
}

static float *attention_weights;    /* [n_layer][n_head][T][T] of the last pg_attention */

/* Every layer's and head's attention weights for the prompt's last
 * (at most Context) tokens; returns T, the weights at pg_attention_data(). */
int pg_attention(const char *prompt, int32_t *ids_out)
{
    ENTER(-1);
    int T = 0;
    if (!pg.live) {
        snprintf(error_text, sizeof error_text, "no model");
        return -1;
    }
    const int C = pg.m.cfg.context, L = pg.m.cfg.n_layer, H = pg.m.cfg.n_head;
    int32_t ids[1024];
    int n = encode(prompt, ids, 1024);
    if (n < 0)
        return -1;
    if (n == 0) {
        snprintf(error_text, sizeof error_text, "Prompt: empty");
        return -1;
    }
    T = n < C ? n : C;
    memcpy(ids_out, ids + n - T, (size_t)T * sizeof *ids);
    ag_tensor *attn[MODEL_MAX_LAYERS];
    int old = ag_set_grad_enabled(pg.look, 0);
    ag_reset(pg.look);
    model_forward(pg.look, &pg.m, ids_out, 1, T, 0, attn);
    ag_set_grad_enabled(pg.look, old);
    free(attention_weights);
    attention_weights = malloc((size_t)L * H * T * T * sizeof *attention_weights);
    if (!attention_weights)
        ag_error("out of memory for the attention weights");
    for (int l = 0; l < L; l++)
        for (size_t i = 0; i < (size_t)H * T * T; i++)
            attention_weights[(size_t)l * H * T * T + i] = (float)attn[l]->data[i];
    return T;
}

const float *pg_attention_data(void) { return attention_weights; }

static char completion[4096];
static size_t completion_bytes;     /* its length: a text's bytes may hold a NUL */

/* The prompt completed: a task's answer (greedy at temperature 0, drawn
 * otherwise), or n_new tokens of text; as `attograd sample` prints it. */
const char *pg_complete(const char *prompt, int n_new, const char *temperature_text, const char *seed_text)
{
    ENTER(NULL);
    double temperature;
    completion[0] = 0;
    completion_bytes = 0;
    error_text[0] = 0;
    if (!pg.live) {
        snprintf(error_text, sizeof error_text, "no model");
        return NULL;
    }
    if (setting_read("Temperature", temperature_text, &temperature))     /* as the flag reads it */
        return NULL;
    if (!(temperature >= 0 && temperature <= 100)) {     /* attograd sample's range */
        snprintf(error_text, sizeof error_text, "Temperature must be a number from 0 (greedy) to 100");
        return NULL;
    }
    int64_t seed = 0;       /* greedy draws nothing */
    if (temperature > 0 && seed_ok("Seed", seed_text, &seed))
        return NULL;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, (uint64_t)seed, STREAM_SAMPLE);
    if (pg.data.is_task) {
        const task *t = &pg.data.task;
        static int32_t seq[1024];
        char e[sizeof error_text - 16];
        int k = encode(prompt, seq, 1024);
        if (k < 0)
            return NULL;
        if (task_check_prompt(t, seq, k, e, sizeof e)) {
            snprintf(error_text, sizeof error_text, "Prompt: %s", e);
            return NULL;
        }
        if (temperature <= 0)
            complete_greedy(pg.look, &pg.m, seq, 1, t->len + 1, t->prompt, t->len + 1, 1);
        else
            sample_tokens(pg.look, &pg.m, seq, t->prompt, t->len + 1 - t->prompt, temperature, 0, &rng, NULL, NULL);
        task_format(t, seq, t->len + 1, completion, sizeof completion);
        completion_bytes = strlen(completion);
    } else {
        enum { MAX = 2048 };
        static int32_t buf[MAX + 1];
        if (n_new > MAX / 2)
            n_new = MAX / 2;
        int n = encode(prompt, buf, MAX / 2);
        if (n < 0)
            return NULL;
        if (n == 0)
            buf[n++] = 0;       /* as sample: from the first vocabulary byte */
        n = sample_tokens(pg.look, &pg.m, buf, n, n_new, temperature, 0, &rng, NULL, NULL);
        completion_bytes = text_decode(&pg.data.text, buf, (size_t)n, completion, sizeof completion);
    }
    return completion;
}

/* The last completion's length in bytes (the text's NUL is a byte like any). */
size_t pg_completion_bytes(void) { return completion_bytes; }

/* What the page shows of the run, as JSON. */
const char *pg_info(void)
{
    static char info[4096];
    const model_config *c = &pg.m.cfg;
    char chars[256 * 7 + 1];
    size_t u = 0;
    for (int i = 0; i < pg.vocab_size; i++)
        u += (size_t)snprintf(chars + u, sizeof chars - u, "%s%d", i ? "," : "", pg.vocab[i]);
    chars[u] = 0;
    snprintf(info, sizeof info,
             "{\"live\":%d,\"trainable\":%d,\"task\":\"%s\",\"layers\":%d,\"heads\":%d,\"d_model\":%d,"
             "\"context\":%d,\"dropout\":%.17g,\"optimizer\":\"%s\",\"lr\":%.17g,\"batch\":%d,\"steps\":%ld,"
             "\"seed\":\"%" PRId64 "\",\"step\":%ld,\"params\":%zu,\"prompt_len\":%d,\"len\":%d,\"vocab\":[%s],"
             "\"trained_as\":\"%s\",\"unlinked\":\"%s\",\"from_page\":\"%s\"}",
             pg.live, pg.trainable, !pg.live ? "" : pg.data.is_task ? pg.data.task.name : "text", c->n_layer,
             c->n_head, c->d_model, c->context, c->dropout, pg.adamw ? "adamw" : "sgd", pg.o.lr, pg.o.batch,
             pg.o.steps, pg.o.seed, pg.step, pg.live ? pg.m.params->total : (size_t)0,
             pg.live && pg.data.is_task ? pg.data.task.prompt : 0, pg.live && pg.data.is_task ? pg.data.task.len : 0,
             chars, pg.trained_as, pg.unlinked, pg.from_page);
    return info;
}

/* The tutorials' worked examples, as `attograd walkthrough` prints them
 * (train/model/walkthrough.c). */
const char *pg_walkthrough(void)
{
    static char *text;
    size_t len;
    ENTER(NULL);
    free(text);
    text = NULL;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        snprintf(error_text, sizeof error_text, "out of memory for the worked examples");
        return NULL;
    }
    walkthrough_write(f, 0);
    fclose(f);
    return text;
}

/* ---- one step's autograd graph -------------------------------------------- */

/* What the graph's JSON is written with: the output, and the leaves seen so
 * far (a leaf used by several ops is listed once, keyed by its data). */
typedef struct graph_out {
    FILE *f, *leaves;           /* the ops' JSON, the leaves' */
    int n_ops;
    const ag_real *leaf[512];
    int n_leaves;
} graph_out;

static void json_shape(FILE *f, const ag_tensor *t)
{
    fputc('[', f);
    for (int d = 0; d < t->ndim; d++)
        fprintf(f, "%s%d", d ? "," : "", t->shape[d]);
    fputc(']', f);
}

/* ||g||_2 of a tensor's gradient, or null where none reached it. */
static void json_grad(FILE *f, const ag_tensor *t)
{
    if (!t->grad) {
        fputs("null", f);
        return;
    }
    double s = 0;
    for (size_t i = 0; i < t->size; i++)
        s += (double)t->grad[i] * t->grad[i];
    fprintf(f, "%.6g", sqrt(s));
}

/* The index of leaf t in g's list, adding it (and its JSON) when new. */
static int graph_leaf(graph_out *g, const ag_tensor *t)
{
    for (int k = 0; k < g->n_leaves; k++)
        if (g->leaf[k] == t->data)
            return k;
    if (g->n_leaves == (int)(sizeof g->leaf / sizeof g->leaf[0]))
        ag_error("more than %d leaves to draw", g->n_leaves);
    FILE *leaves = g->leaves;
    fprintf(leaves, "%s{\"name\":\"%s\",\"param\":%d,\"shape\":", g->n_leaves ? "," : "",
            t->is_param ? t->name : "input", t->is_param);
    json_shape(leaves, t);
    fputs(",\"grad\":", leaves);
    json_grad(leaves, t);
    fputc('}', leaves);
    g->leaf[g->n_leaves] = t->data;
    return g->n_leaves++;
}

/* One op as JSON (ag_graph_walk's callback in pg_graph): its tape id, name,
 * output shape, gradient norm, and inputs ({"op":id} or {"leaf":k}). */
static void graph_op(const ag_graph_op *op, void *user)
{
    graph_out *g = user;
    fprintf(g->f, "%s{\"id\":%d,\"op\":\"%s\",\"shape\":", g->n_ops++ ? "," : "", op->id, op->name);
    json_shape(g->f, op->out);
    fputs(",\"grad\":", g->f);
    json_grad(g->f, op->out);
    fputs(",\"in\":[", g->f);
    int k = 0;
    for (int i = 0; i < op->n_in; i++) {
        const ag_tensor *t = op->in[i];
        if (!t)
            continue;
        if (ag_op_id(t) >= 0)
            fprintf(g->f, "%s{\"op\":%d}", k++ ? "," : "", ag_op_id(t));
        else
            fprintf(g->f, "%s{\"leaf\":%d}", k++ ? "," : "", graph_leaf(g, t));
    }
    fputs("]}", g->f);
}

/* The graph of one training step on the current model, the one `attograd
 * graph --model (this run saved) --seed S` draws: a training problem drawn
 * from seed (or, for text, the vocabulary in order; example_input), the
 * forward pass with dropout as in training, the loss, then backward, in a
 * context of its own so the run's generators do not move.  As JSON: the
 * loss, the tape's length, the ops (last first) and the leaves. */
const char *pg_graph(const char *seed_text)
{
    static char *text;
    static ag_ctx *ctx;
    static int32_t *x;
    char *ops = NULL, *leaves = NULL;
    size_t len;
    ENTER(NULL);
    free(text);
    free(x);
    text = NULL;
    x = NULL;
    if (ctx)
        ag_ctx_free(ctx);       /* the last call's, or one an engine error left */
    ctx = NULL;
    if (!pg.live) {
        snprintf(error_text, sizeof error_text, "no model");
        return NULL;
    }
    int32_t *y;
    int room;
    int64_t seed;
    if (seed_ok("Seed", seed_text, &seed))
        return NULL;
    int n = example_input(pg.data.is_task ? pg.data.task.name : "text", &pg.m, 0, (uint64_t)seed, &x, &y, &room,
                          error_text, sizeof error_text);
    if (n < 0)
        return NULL;
    ctx = ag_ctx_new();
    step_rows rows = { x, y, 1, n, 1, NULL };
    ag_tensor *loss = step_loss(ctx, &pg.m, &rows);
    ag_params_zero_grad(pg.m.params);
    ag_backward(ctx, loss);
    graph_out g = { 0 };
    g.f = open_memstream(&ops, &len);
    g.leaves = open_memstream(&leaves, &len);
    if (!g.f || !g.leaves)
        ag_error("out of memory for the graph");
    ag_graph_walk(ctx, loss, graph_op, &g);
    fclose(g.f);
    fclose(g.leaves);
    ag_params_zero_grad(pg.m.params);   /* a training step starts from zero gradients anyway */
    FILE *f = open_memstream(&text, &len);
    if (!f)
        ag_error("out of memory for the graph");
    fprintf(f, "{\"loss\":%.17g,\"tape\":%d,\"tokens\":%d,\"ops\":[%s],\"leaves\":[%s]}", (double)loss->data[0],
            ag_tape_length(ctx), n, ops, leaves);
    fclose(f);
    free(ops);
    free(leaves);
    return text;
}

/* ---- checkpoints ---------------------------------------------------------- */

/* The run as a checkpoint at path (the Worker's in-memory file system). */
int pg_save(const char *path)
{
    ENTER(-1);
    if (!pg.live) {
        snprintf(error_text, sizeof error_text, "no model to save");
        return -1;
    }
    run_record rec;         /* the settings as `attograd train` records them */
    run_record_write(&rec, &pg.o, pg.data.is_task ? NULL : &pg.data.text);
    ckpt_state state = { pg.optim, &pg.data_rng, ag_dropout_rng(pg.ctx), rec.kv, rec.n };
    ag_atomic_file out;
    if (ckpt_save(&out, path, &pg.m, pg.data.is_task ? pg.data.task.name : "text", pg.vocab, pg.vocab_size,
                  pg.step, pg.trainable ? &state : NULL, error_text, sizeof error_text))
        return -1;
    return 0;
}

/* A run the command recorded on a 64-bit machine may hold a number (Steps
 * past 2^31, within the flag's range) that a long here, 32 bits, cannot:
 * error_text says so, where run_settings_read calls that value invalid.
 * (The seed, an int64_t, takes any the command does.) */
static void past_long(const ckpt *ck)
{
    for (int i = 0; i < RUN_N_RECORDED; i++) {
        const run_recorded *k = &RUN_RECORDED[i];
        const char *v = k->kind == RUN_LONG ? run_recorded_text(ck, k) : NULL;
        char named[64];
        snprintf(named, sizeof named, "metadata %s = ", k->key);
        if (v && strtod(v, NULL) > LONG_MAX && strtod(v, NULL) <= k->max && strstr(error_text, named))
            snprintf(error_text, sizeof error_text, "its %s, %.20s, is more than the page can hold (%ld): attograd "
                     "train --resume goes on with it", k->key, v, LONG_MAX);
    }
}

/* What an opened checkpoint's run has that the page's does not: into
 * trained_as, its bf16 multiplies or micro-batches (the page trains in fp32 on
 * whole batches, so its steps differ from train --resume's); into unlinked,
 * the settings the page's controls, and so its link, cannot hold (the link
 * builds a run without them).  Each "" when there are none. */
static void opened_notes(const ckpt *ck, const run_settings *o, const model_config *c, int adamw, int is_text,
                         char trained_as[80], char unlinked[320])
{
    int bf16 = ck->has_state && o->precision && strcmp(o->precision, "fp32") != 0;
    int micro = ck->has_state && o->micro_batch > 0;
    char rows[40] = "";
    if (micro)
        snprintf(rows, sizeof rows, " with micro-batches of %d", o->micro_batch);
    snprintf(trained_as, 80, "%s%s%s", bf16 || micro ? "trained" : "", bf16 ? " in bf16" : "", rows);
    size_t u = 0;
    unlinked[0] = 0;
#define UNLINKED(...) (u += (size_t)snprintf(unlinked + u, u < 320 ? 320 - u : 0, "%s", u ? ", " : ""), \
                       u += (size_t)snprintf(unlinked + u, u < 320 ? 320 - u : 0, __VA_ARGS__))
    const run_settings *d = &RUN_DEFAULTS;
    if (c->arch != ARCH_GPT)
        UNLINKED("attention-only layers");
    if (c->qkv_bias)
        UNLINKED("QKV bias");
    if (ck->has_state) {
        if (!adamw && o->momentum != d->momentum)
            UNLINKED("momentum %g", o->momentum);
        if (adamw && (o->beta1 != d->beta1 || o->beta2 != d->beta2 || o->eps != d->eps))
            UNLINKED("AdamW betas %g, %g and eps %g", o->beta1, o->beta2, o->eps);
        if (o->weight_decay != d->weight_decay)
            UNLINKED("weight decay %g", o->weight_decay);
        if (o->clip != d->clip)
            UNLINKED("clip %g", o->clip);
        if (strcmp(o->schedule, "cosine") == 0)
            UNLINKED("cosine schedule (warmup %ld, min lr %g, over %ld steps)", o->warmup, o->min_lr, o->schedule_steps);
        if (is_text && strcmp(o->order, d->order) != 0)
            UNLINKED("%s order", o->order);
    }
#undef UNLINKED
    if (u >= 320)
        snprintf(unlinked + 320 - 4, 4, "...");
}

/* The checkpoint at path read into *ck and *m; one that does not say its
 * heads or its data (a PyTorch state_dict saved without attograd's
 * metadata) read again with the page's Heads and Task (a text's: Task text
 * and the page's text at hint_text, its sorted distinct bytes the
 * vocabulary), as `attograd sample` reads one with --heads, --task and
 * --text.  Into from_page, what the page's controls said ("" when none);
 * refused, the message names what the learner must set. */
static int open_with_page(ckpt *ck, model *m, const char *path, const char *heads_text, const char *task_name,
                          const char *hint_text, char from_page[80])
{
    from_page[0] = 0;
    if (!ckpt_open_hints(ck, path, m, NULL, error_text, sizeof error_text))
        return 0;
    if (!ck->needs)
        return -1;
    int needs = ck->needs, text = strcmp(task_name, "text") == 0;
    double heads = NAN;
    int heads_read = whole_in("Heads", heads_text, 1, MODEL_MAX_HEADS, &heads) == 0;
    ckpt_hints h = { heads_read ? (int)heads : 0, text ? NULL : task_name, text && hint_text[0] ? hint_text : NULL,
                     0, 0 };
    char used[80], e[sizeof error_text];
    size_t u = 0;
    used[0] = 0;
    if (needs & CKPT_HEADS)
        u += (size_t)snprintf(used + u, sizeof used - u, "Heads %.10s", heads_text);
    if (needs & (CKPT_DATA | CKPT_VOCAB))
        snprintf(used + u, sizeof used - u, "%sTask %s", u ? " and " : "", text && !h.text ? "text without a text" : task_name);
    if (!ckpt_open_hints(ck, path, m, &h, e, sizeof e)) {
        snprintf(from_page, 80, "%s", used);
        return 0;
    }
    /* what to set, and what the page's settings met with */
    size_t p = strlen(path), o = 0;
    const char *why = strncmp(e, path, p) == 0 && e[p] == ':' && e[p + 1] == ' ' ? e + p + 2 : e;
    o += (size_t)snprintf(error_text + o, sizeof error_text - o, "%s: the file does not say %s%s%s%s%s: set ", path,
                          needs & CKPT_HEADS ? "how many heads" : "",
                          needs & CKPT_HEADS && needs & (CKPT_DATA | CKPT_VOCAB) ? " nor " : "",
                          needs & CKPT_DATA ? "what it was trained on" : "",
                          needs & CKPT_DATA && needs & CKPT_VOCAB ? " nor " : "",
                          needs & CKPT_VOCAB ? "its vocabulary" : "");
    if (o < sizeof error_text)
        o += (size_t)snprintf(error_text + o, sizeof error_text - o, "%s%s%s to the model's%s, then open it again",
                              needs & CKPT_HEADS ? "Heads" : "", needs & CKPT_HEADS && needs & (CKPT_DATA | CKPT_VOCAB) ? " and " : "",
                              needs & (CKPT_DATA | CKPT_VOCAB) ? "Task" : "",
                              needs & (CKPT_DATA | CKPT_VOCAB) ? " (a text model's: Task text, its text given under Text)" : "");
    if (o < sizeof error_text && !ck->needs)
        snprintf(error_text + o, sizeof error_text - o, " (with the page's %s: %s)", used, why);
    else if (o < sizeof error_text && ck->needs & CKPT_HEADS)
        snprintf(error_text + o, sizeof error_text - o, " (the page's Heads, %.20s, is not a whole number from 1 to %d)",
                 *heads_text ? heads_text : "empty", MODEL_MAX_HEADS);
    else if (o < sizeof error_text)
        snprintf(error_text + o, sizeof error_text - o, " (the page's Task is text, with no text given)");
    return -1;
}

/* Replace the run by the checkpoint at path: its model, and where it holds
 * a run's state its optimizer and generators too, so training goes on as
 * `attograd train --resume` would.  A text model's text comes from
 * text_path when given ("" = none: it can complete, not train).  Its
 * recorded settings are checked as train --resume checks them
 * (run_settings_read: each in its flag's range, and together as a new
 * run's must be).  On any problem the run is left as it was. */
int pg_open(const char *path, const char *text_path, const char *text_name, const char *heads_text,
            const char *task_name, const char *hint_text, const char *hint_name)
{
    ENTER(-1);
    ckpt ck;
    model m;
    char from_page[sizeof pg.from_page];
    if (open_with_page(&ck, &m, path, heads_text, task_name, hint_text, from_page))
        return -1;
    if (from_page[0] && strcmp(ck.data, "text") == 0 && !text_path[0] && hint_text[0]) {
        text_path = hint_text;      /* the text that gave the vocabulary is the one it trains on */
        text_name = hint_name;
    }
    int is_text = strcmp(ck.data, "text") == 0;
    int have_text = is_text && text_path[0];
    dataset d;
    memset(&d, 0, sizeof d);
    run_settings o = RUN_DEFAULTS;
    int adamw = ck.has_state && ck.optim_kind == AG_ADAMW, failed;
    if (ck.has_state) {
        failed = run_settings_read(&o, &ck, error_text, sizeof error_text);
        if (failed)
            past_long(&ck);
    } else {
        o.lr = run_default_lr(adamw);
        failed = 0;
    }
    if (!failed && ck.has_state && ck.step > o.steps) {     /* as train --resume refuses it */
        snprintf(error_text, sizeof error_text, "%s: metadata steps = %ld is less than the %ld steps the checkpoint has "
                 "already taken", ck.path, o.steps, ck.step);
        failed = 1;
    }
    if (!failed && is_text && !have_text)
        failed = text_vocab_only(&d.text, ck.vocab, ck.vocab_size, error_text, sizeof error_text);
    else if (!failed)
        failed = open_data(&d, is_text ? NULL : ck.data, text_path, ck.vocab, ck.vocab_size, (uint64_t)o.seed);
    /* a text that changed since it was saved is refused, as train --resume
     * refuses it; a run past the page's memory, as pg_new refuses one */
    if (!failed && have_text)
        failed = text_check_unchanged(&ck, &d.text, 0, error_text, sizeof error_text);
    if (!failed && ck.has_state)
        failed = memory_ok(&m.cfg, adamw, o.batch, dataset_seq_len(&d, m.cfg.context), 1, is_text);
    if (failed) {
        dataset_free(&d);       /* what was read (d starts zeroed: nothing) */
        model_free(&m);
        ckpt_close(&ck);
        return -1;
    }
    char trained_as[sizeof pg.trained_as], unlinked[sizeof pg.unlinked];
    opened_notes(&ck, &o, &m.cfg, adamw, is_text, trained_as, unlinked);
    run_free();
    memcpy(pg.trained_as, trained_as, sizeof trained_as);
    memcpy(pg.unlinked, unlinked, sizeof unlinked);
    memcpy(pg.from_page, from_page, sizeof from_page);
    pg.data = d;
    pg.m = m;
    snprintf(pg.text_name, sizeof pg.text_name, "%s", is_text ? (have_text ? text_name : "") : "");
    take_vocab();
    pg.o = o;
    /* the page trains whole batches in fp32 and keeps no log */
    pg.o.precision = RUN_DEFAULTS.precision;
    pg.o.micro_batch = 0;
    pg.o.log_path = NULL;
    pg.o.text_path = have_text ? pg.text_name : NULL;
    pg.adamw = adamw;
    run_finish();
    pg.trainable = !is_text || have_text;
    if (ck.has_state) {
        ckpt_load_state(&ck, pg.optim, &pg.data_rng, ag_dropout_rng(pg.ctx));
        pg.step = ck.step > 0 ? ck.step : 0;
    }
    ckpt_close(&ck);
    return 0;
}
