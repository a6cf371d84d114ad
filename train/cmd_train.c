/*
 * cmd_train.c - `attograd train`: build a model, train it with SGD or
 * AdamW on a toy task or a text file, report progress, evaluate, save.
 *
 * Randomness: one --seed feeds three PCG32 streams -- initialization (1),
 * dropout (2) and data (3) -- so a run is reproducible bit for bit.
 */
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "checkpoint.h"
#include "run.h"

enum { STREAM_INIT = 1, STREAM_DROPOUT = 2, STREAM_DATA = 3 };

typedef struct train_opts {
    const char *task, *text, *arch, *optimizer, *schedule, *order, *log_path;
    const char *save, *init, *resume;
    int layers, heads, d_model, context, qkv_bias, batch, threads, quiet;
    double dropout, lr, momentum, weight_decay, beta1, beta2, eps, clip, min_lr;
    long steps, seed, eval_every, log_every, warmup, save_every;
} train_opts;

static const char *CMD = "train";

/* SIGINT/SIGTERM: the first one lets the current step finish (and the run
 * save, with --save); a second SIGINT leaves at once without touching the
 * checkpoint. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    if (stop_signal && sig == SIGINT)
        _exit(130);
    stop_signal = sig;
}

/* A training option saved in a resumable checkpoint; exit 2 unless it is a
 * number in [lo, hi] (lo excluded when lo_open). */
static double resume_number(const ckpt *ck, const char *key, double lo, double hi, int lo_open)
{
    const char *s = ckpt_meta(ck, key);
    if (!s)
        die(CMD, "%s: metadata '%s' is missing, so the run cannot be resumed", ck->path, key);
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || (lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
        die(CMD, "%s: metadata %s = '%.40s' is not a valid value, so the run cannot be resumed", ck->path, key, s);
    return v;
}

/* The same for an integer option (seeds need all 64 bits, beyond a double's). */
static long resume_integer(const ckpt *ck, const char *key, long lo, long hi)
{
    const char *s = ckpt_meta(ck, key);
    if (!s)
        die(CMD, "%s: metadata '%s' is missing, so the run cannot be resumed", ck->path, key);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        die(CMD, "%s: metadata %s = '%.40s' is not a valid value, so the run cannot be resumed", ck->path, key, s);
    return v;
}

/* The first parameter whose gradient (or value) holds a NaN or infinity. */
static const ag_tensor *first_not_finite(const ag_params *ps, int grads)
{
    for (int i = 0; i < ps->count; i++) {
        const ag_tensor *t = ps->list[i];
        const ag_real *v = grads ? t->grad : t->data;
        ag_real acc = 0;
        for (size_t k = 0; k < t->size; k++)
            acc += v[k] * 0;           /* 0 * x is NaN exactly when x is NaN or inf */
        if (acc != acc)
            return t;
    }
    return NULL;
}

/* Bytes one training step's activations, their gradients and saved values
 * take in the arena, estimated per token and layer from the ops the model
 * records (the attention weights and, with dropout, their mask: [B,H,T,T]
 * each; about 48 d-wide tensors), plus the logits.  Checked against
 * measured arena peaks of gpt models with and without dropout: it errs high
 * by 10-40% (more for attn-only models). */
static double activation_bytes(const model_config *c, int B, int S)
{
    double rows = (double)(B > 32 ? B : 32) * S;   /* evaluation runs 64 rows without gradients */
    double per_layer = 2.0 * c->n_head * S + 48.0 * c->d_model;
    return rows * sizeof(ag_real) * (c->n_layer * per_layer + 3.0 * c->vocab_size + 4.0 * c->d_model);
}

static double physical_memory(void)
{
#ifdef _SC_PHYS_PAGES
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0)
        return (double)pages * (double)size;
#endif
    return 16e9;
}

static void print_config(const train_opts *o, const model_config *c, const dataset *d, const model *m)
{
    char buf[32];
    printf("attograd train: %s %s, %d layer%s, %d head%s, d_model %d, context %d%s, dropout %g\n",
           d->is_task ? "task" : "text", d->is_task ? d->task.name : o->text, c->n_layer,
           c->n_layer == 1 ? "" : "s", c->n_head, c->n_head == 1 ? "" : "s", c->d_model, c->context,
           c->qkv_bias ? ", qkv bias" : "", c->dropout);
    printf("  model      %s, vocab %d, %s parameters (%zu)\n", model_arch_name(c->arch), c->vocab_size,
           human((double)m->params->total, buf, sizeof buf), m->params->total);
    if (strcmp(o->optimizer, "sgd") == 0)
        printf("  optimizer  sgd, lr %g, momentum %g, weight decay %g", o->lr, o->momentum, o->weight_decay);
    else
        printf("  optimizer  adamw, lr %g, betas (%g, %g), eps %g, weight decay %g", o->lr, o->beta1, o->beta2,
               o->eps, o->weight_decay);
    printf(", clip %s, schedule %s", o->clip > 0 ? (snprintf(buf, sizeof buf, "%g", o->clip), buf) : "off",
           o->schedule);
    if (strcmp(o->schedule, "cosine") == 0)
        printf(" (warmup %ld, min lr %g)", o->warmup, o->min_lr);
    printf("\n  run        %ld steps, batch %d, seed %ld, %d thread%s, order %s, %s precision\n", o->steps,
           o->batch, o->seed, ag_get_threads(), ag_get_threads() == 1 ? "" : "s", o->order, AG_PRECISION_NAME);
    if (d->is_task)
        printf("  data       %s: %d tokens per example, %d held-out problems never trained on\n", d->task.name,
               d->task.len + 1, d->n_heldout);
    else {
        size_t windows = text_eval_windows(d->text.n - d->text.n_train, c->context);
        printf("  data       %s: %zu tokens, %zu train / %zu validation (%zu windows of %d; evaluations during "
               "training score the first %zu, the last one all)\n", o->text, d->text.n, d->text.n_train,
               d->text.n - d->text.n_train, windows, c->context,
               windows < TRAIN_EVAL_WINDOWS ? windows : (size_t)TRAIN_EVAL_WINDOWS);
    }
    fflush(stdout);
}

static void progress_bar(long step, long total, double loss, double elapsed, long done)
{
    int width = 30, filled = total ? (int)(width * step / total) : width;
    double eta = done > 0 ? elapsed / (double)done * (double)(total - step) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    printf("\r[%s] %ld/%ld  loss %.4f  ETA %.0fs   ", bar, step, total, loss, eta);
    fflush(stdout);
}

static void show_examples(ag_ctx *ctx, model *m, dataset *d, int n)
{
    const task *t = &d->task;
    int L = t->len;
    if (n > d->n_heldout)
        n = d->n_heldout;
    int32_t *seqs = malloc((size_t)n * (L + 1) * sizeof *seqs);
    if (!seqs)
        return;
    memcpy(seqs, d->heldout, (size_t)n * (L + 1) * sizeof *seqs);
    complete_greedy(ctx, m, seqs, n, L + 1, t->prompt, L + 1);
    printf("held-out examples (prompt -> completion):\n");
    for (int i = 0; i < n; i++) {
        char prompt[128], got[128], want[128];
        const int32_t *s = seqs + (size_t)i * (L + 1), *ref = d->heldout + (size_t)i * (L + 1);
        task_format(t, s, t->prompt, prompt, sizeof prompt);
        task_format(t, s + t->prompt, L + 1 - t->prompt, got, sizeof got);
        task_format(t, ref + t->prompt, L + 1 - t->prompt, want, sizeof want);
        int ok = strcmp(got, want) == 0;
        printf("  %s -> %s  %s", prompt, got, ok ? "ok" : "WRONG");
        if (!ok)
            printf(" (want %s)", want);
        printf("\n");
    }
    free(seqs);
}

int cmd_train(int argc, char **argv)
{
    train_opts o = {
        .arch = "gpt", .optimizer = "sgd", .schedule = "constant", .order = "random",
        .layers = 2, .heads = 4, .d_model = 64, .context = 0, .batch = 32, .threads = 0,
        .dropout = 0, .lr = -1, .momentum = 0.9, .weight_decay = 0, .beta1 = 0.9, .beta2 = 0.999,
        .eps = 1e-8, .clip = 1.0, .min_lr = 0, .steps = 400, .seed = 1, .eval_every = 100,
        .log_every = 50, .warmup = 0, .save_every = 0,
    };
    const double BIG = 1e308;
    opt opts[] = {
        { "--task", OPT_STRING, &o.task, "NAME", "toy task: copy (default), reverse, sort, add", 0, 0, 0, 0 },
        { "--text", OPT_STRING, &o.text, "FILE", "character-level language modeling on a file", 0, 0, 0, 0 },
        { "--arch", OPT_STRING, &o.arch, "A", "gpt (default) or attn-only", 0, 0, 0, 0 },
        { "--layers", OPT_INT, &o.layers, "N", "transformer blocks (default 2)", 1, 256, 0, 0 },
        { "--heads", OPT_INT, &o.heads, "N", "attention heads; must divide d-model (default 4)", 1, 4096, 0, 0 },
        { "--d-model", OPT_INT, &o.d_model, "N", "embedding width (default 64)", 1, 65536, 0, 0 },
        { "--context", OPT_INT, &o.context, "T", "context length (default: task length, or 64 for text)", 1, 65536, 0, 0 },
        { "--dropout", OPT_DOUBLE, &o.dropout, "P", "dropout probability in [0,1) (default 0)", 0, 0.999999, 0, 0 },
        { "--qkv-bias", OPT_FLAG, &o.qkv_bias, NULL, "biases on the query/key/value projections", 0, 0, 0, 0 },
        { "--optimizer", OPT_STRING, &o.optimizer, "O", "sgd (default) or adamw", 0, 0, 0, 0 },
        { "--lr", OPT_DOUBLE, &o.lr, "X", "learning rate > 0 (default 0.1 sgd, 3e-3 adamw)", 0, 1e6, 1, 0 },
        { "--momentum", OPT_DOUBLE, &o.momentum, "X", "SGD momentum in [0,1) (default 0.9)", 0, 0.999999, 0, 0 },
        { "--weight-decay", OPT_DOUBLE, &o.weight_decay, "X", "weight decay >= 0 (default 0)", 0, 1e6, 0, 0 },
        { "--beta1", OPT_DOUBLE, &o.beta1, "X", "AdamW beta1 in [0,1) (default 0.9)", 0, 0.999999, 0, 0 },
        { "--beta2", OPT_DOUBLE, &o.beta2, "X", "AdamW beta2 in [0,1) (default 0.999)", 0, 0.999999999, 0, 0 },
        { "--eps", OPT_DOUBLE, &o.eps, "X", "AdamW epsilon > 0 (default 1e-8)", 0, 1, 1, 0 },
        { "--clip", OPT_DOUBLE, &o.clip, "X", "clip the global gradient norm to X; 0 = off (default 1)", 0, BIG, 0, 0 },
        { "--schedule", OPT_STRING, &o.schedule, "S", "constant (default) or cosine", 0, 0, 0, 0 },
        { "--warmup", OPT_LONG, &o.warmup, "N", "cosine: linear warmup steps (default 0)", 0, 1e15, 0, 0 },
        { "--min-lr", OPT_DOUBLE, &o.min_lr, "X", "cosine: final learning rate (default 0)", 0, 1e6, 0, 0 },
        { "--batch", OPT_INT, &o.batch, "B", "sequences per step (default 32)", 1, 1 << 20, 0, 0 },
        { "--steps", OPT_LONG, &o.steps, "N", "optimizer steps (default 400)", 0, 1e15, 0, 0 },
        { "--seed", OPT_LONG, &o.seed, "S", "seed of every random choice (default 1)", 0, 9.2e18, 0, 0 },
        { "--eval-every", OPT_LONG, &o.eval_every, "N", "evaluate every N steps; 0 = only at the end (default 100)", 0, 1e15, 0, 0 },
        { "--log-every", OPT_LONG, &o.log_every, "N", "print a progress line every N steps (default 50)", 1, 1e15, 0, 0 },
        { "--threads", OPT_INT, &o.threads, "N", "threads; 0 = all cores (default)", 0, 1024, 0, 0 },
        { "--log", OPT_STRING, &o.log_path, "FILE", "write step, losses, lr and speed as CSV", 0, 0, 0, 0 },
        { "--order", OPT_STRING, &o.order, "O", "text windows: random (default) or sequential", 0, 0, 0, 0 },
        { "--save", OPT_STRING, &o.save, "FILE", "save the model (safetensors) at the end", 0, 0, 0, 0 },
        { "--save-every", OPT_LONG, &o.save_every, "N", "also save every N steps (needs --save)", 0, 1e15, 0, 0 },
        { "--init", OPT_STRING, &o.init, "FILE", "start from a checkpoint's weights and config", 0, 0, 0, 0 },
        { "--resume", OPT_STRING, &o.resume, "FILE", "continue a saved run exactly", 0, 0, 0, 0 },
        { "--quiet", OPT_FLAG, &o.quiet, NULL, "only the summary", 0, 0, 0, 0 },
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    args_parse(CMD, "Train a multi-head causal attention model on a toy next-token task or a text file.",
               argc, argv, opts, nopts);

    /* ---- validate combinations before touching anything ---- */
    if (o.task && o.text)
        die(CMD, "--task and --text both given: choose one data source");
    if (o.init && o.resume)
        die(CMD, "--init and --resume both given: --init starts a new run from weights, --resume continues one");
    if (o.save_every > 0 && !o.save)
        die(CMD, "--save-every needs --save FILE");
    if (o.save) {
        /* find out now, not after training, that the checkpoint cannot be written */
        struct stat st;
        if (stat(o.save, &st) == 0 && S_ISDIR(st.st_mode))
            die(CMD, "--save %s is a directory; give a file name", o.save);
        char dir[1024];
        const char *slash = strrchr(o.save, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o.save) + (slash == o.save) : 1, slash ? o.save : ".");
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            die(CMD, "--save %s: directory %s does not exist", o.save, dir);
        if (access(dir, W_OK) != 0)
            die(CMD, "--save %s: cannot write in directory %s: %s", o.save, dir, strerror(errno));
    }
    static const char *const model_flags[] = { "--arch", "--layers", "--heads", "--d-model", "--context",
                                               "--dropout", "--qkv-bias" };
    static const char *const run_flags[] = { "--task", "--optimizer", "--lr", "--momentum", "--weight-decay",
                                             "--beta1", "--beta2", "--eps", "--clip", "--schedule", "--warmup",
                                             "--min-lr", "--batch", "--seed", "--order" };
    const char *from = o.resume ? o.resume : o.init;
    for (size_t i = 0; from && i < sizeof model_flags / sizeof model_flags[0]; i++)
        if (args_find(opts, nopts, model_flags[i])->given)
            die(CMD, "%s cannot be used with %s: the model's config comes from the checkpoint", model_flags[i],
                o.resume ? "--resume" : "--init");
    for (size_t i = 0; o.resume && i < sizeof run_flags / sizeof run_flags[0]; i++)
        if (args_find(opts, nopts, run_flags[i])->given)
            die(CMD, "%s cannot be changed with --resume, which continues the saved run exactly "
                     "(use --init FILE to start a new run from its weights)", run_flags[i]);

    char err[512];
    ckpt ck;
    model m;
    memset(&ck, 0, sizeof ck);
    if (from && ckpt_open(&ck, from, &m, err, sizeof err))
        die(CMD, "%s", err);
    if (o.resume) {
        if (!ck.has_state)
            die(CMD, "%s holds weights only, no optimizer state to resume (use --init %s)", o.resume, o.resume);
        /* the saved run's options, as they were, each checked like the flag it came from */
        o.optimizer = ck.optim_kind == AG_ADAMW ? "adamw" : "sgd";
        o.lr = resume_number(&ck, "lr", 0, 1e6, 1);
        o.momentum = resume_number(&ck, "momentum", 0, 0.999999, 0);
        o.weight_decay = resume_number(&ck, "weight_decay", 0, 1e6, 0);
        o.beta1 = resume_number(&ck, "beta1", 0, 0.999999, 0);
        o.beta2 = resume_number(&ck, "beta2", 0, 0.999999999, 0);
        o.eps = resume_number(&ck, "eps", 0, 1, 1);
        o.clip = resume_number(&ck, "clip", 0, 1e308, 0);
        o.min_lr = resume_number(&ck, "min_lr", 0, 1e6, 0);
        o.warmup = resume_integer(&ck, "warmup", 0, 1000000000000000L);
        o.batch = (int)resume_integer(&ck, "batch", 1, 1 << 20);
        o.seed = resume_integer(&ck, "seed", 0, LONG_MAX);
        if (!args_find(opts, nopts, "--steps")->given)
            o.steps = resume_integer(&ck, "steps", 0, 1000000000000000L);
        const char *s;
        if ((s = ckpt_meta(&ck, "schedule"))) o.schedule = s;
        if ((s = ckpt_meta(&ck, "order"))) o.order = s;
    }
    if (from) {
        int is_text = strcmp(ck.data, "text") == 0;
        if (o.task && (is_text || strcmp(o.task, ck.data) != 0))
            die(CMD, "--task %s does not match the checkpoint, which was trained on %s", o.task, ck.data);
        if (o.text && !is_text)
            die(CMD, "--text given but the checkpoint was trained on task %s", ck.data);
        if (is_text && !o.text && !(o.text = ckpt_meta(&ck, "text_path")))
            die(CMD, "the checkpoint was trained on a text file: give it with --text FILE");
        if (!is_text)
            o.task = ck.data;
    }
    int arch = from ? ck.cfg.arch : model_arch_parse(o.arch);
    if (arch < 0)
        die(CMD, "--arch '%s' is not an architecture (use gpt or attn-only)", o.arch);
    int adamw = strcmp(o.optimizer, "adamw") == 0;
    if (!adamw && strcmp(o.optimizer, "sgd") != 0)
        die(CMD, "--optimizer '%s' is not an optimizer (use sgd or adamw)", o.optimizer);
    int cosine = strcmp(o.schedule, "cosine") == 0;
    if (!cosine && strcmp(o.schedule, "constant") != 0)
        die(CMD, "--schedule '%s' is not a schedule (use constant or cosine)", o.schedule);
    int random_order = strcmp(o.order, "random") == 0;
    if (!random_order && strcmp(o.order, "sequential") != 0)
        die(CMD, "--order '%s' is not an order (use random or sequential)", o.order);
    if (!from && o.d_model % o.heads != 0)
        die(CMD, "--heads %d does not divide --d-model %d (each head gets d_model/heads dims)", o.heads, o.d_model);
    if (o.lr < 0)
        o.lr = adamw ? 3e-3 : 0.1;
    if (!o.task && !o.text)
        o.task = "copy";
    long start = o.resume ? ck.step : 0;
    if (o.resume && o.steps < start)
        die(CMD, "--steps %ld is less than the %ld steps the checkpoint has already taken", o.steps, start);
    ag_set_threads(o.threads);

    /* ---- data and model ---- */
    dataset data;
    if (o.task ? dataset_open_task(&data, o.task, (uint64_t)o.seed, err, sizeof err)
               : dataset_open_text(&data, o.text, from ? ck.vocab : NULL, from ? ck.vocab_size : 0, err, sizeof err))
        die(CMD, "%s", err);
    uint8_t vocab[256];
    int vocab_size = dataset_vocab_size(&data);
    for (int i = 0; i < vocab_size; i++)
        vocab[i] = data.is_task ? (uint8_t)data.task.chars[i] : data.text.vocab[i];
    if (from && (vocab_size != ck.vocab_size || memcmp(vocab, ck.vocab, (size_t)vocab_size) != 0))
        die(CMD, "%s: its vocabulary does not match %s %s", from, o.task ? "task" : "text", o.task ? o.task : o.text);
    model_config cfg = { arch, vocab_size, o.layers, o.heads, o.d_model, o.context, o.qkv_bias, o.dropout };
    if (from)
        cfg = ck.cfg;
    if (!cfg.context)
        cfg.context = data.is_task ? data.task.len : 64;
    if (data.is_task ? task_check_context(&data.task, cfg.context, err, sizeof err)
                     : text_check_context(&data.text, cfg.context, 1, err, sizeof err))
        die(CMD, "%s", err);
    int S = dataset_seq_len(&data, cfg.context), B = o.batch;
    double state_bytes = model_param_bytes(&cfg) * (adamw ? 2 : 1.5), act_bytes = activation_bytes(&cfg, B, S);
    double have = physical_memory();
    if (state_bytes + act_bytes > 0.8 * have)
        die(CMD, "this run needs about %.1f GB (%.1f GB for parameters, gradients and optimizer state, %.1f GB for "
                 "the activations of a %d x %d batch) but the machine has %.1f GB; reduce --batch, --context, "
                 "--d-model or --layers", (state_bytes + act_bytes) / 1e9, state_bytes / 1e9, act_bytes / 1e9, B, S,
            have / 1e9);

    ag_pcg32 init_rng, data_rng;
    ag_pcg32_seed(&init_rng, (uint64_t)o.seed, STREAM_INIT);
    ag_pcg32_seed(&data_rng, (uint64_t)o.seed, STREAM_DATA);
    if (!from) {
        model_build(&m, &cfg);
        model_init(&m, &init_rng);
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_pcg32_seed(ag_dropout_rng(ctx), (uint64_t)o.seed, STREAM_DROPOUT);
    ag_optim *optim = adamw ? ag_optim_adamw(m.params, o.beta1, o.beta2, o.eps, o.weight_decay)
                            : ag_optim_sgd(m.params, o.momentum, o.weight_decay);
    if (o.resume)
        ckpt_load_state(&ck, optim, &data_rng, ag_dropout_rng(ctx));

    /* what a later --resume needs to continue exactly */
    char ov[14][40];
    snprintf(ov[0], 40, "%.17g", o.lr);
    snprintf(ov[1], 40, "%.17g", o.momentum);
    snprintf(ov[2], 40, "%.17g", o.weight_decay);
    snprintf(ov[3], 40, "%.17g", o.beta1);
    snprintf(ov[4], 40, "%.17g", o.beta2);
    snprintf(ov[5], 40, "%.17g", o.eps);
    snprintf(ov[6], 40, "%.17g", o.clip);
    snprintf(ov[7], 40, "%.17g", o.min_lr);
    snprintf(ov[8], 40, "%ld", o.warmup);
    snprintf(ov[9], 40, "%d", o.batch);
    snprintf(ov[10], 40, "%ld", o.seed);
    snprintf(ov[11], 40, "%ld", o.steps);
    const char *options[] = { "lr", ov[0], "momentum", ov[1], "weight_decay", ov[2], "beta1", ov[3],
                              "beta2", ov[4], "eps", ov[5], "clip", ov[6], "min_lr", ov[7], "warmup", ov[8],
                              "batch", ov[9], "seed", ov[10], "steps", ov[11], "schedule", o.schedule,
                              "order", o.order, "text_path", o.text ? o.text : "" };
    int n_options = (int)(sizeof options / sizeof options[0]) / 2 - (o.text ? 0 : 1);
    ckpt_state state = { optim, &data_rng, ag_dropout_rng(ctx), options, n_options };
    const char *data_name = data.is_task ? data.task.name : "text";

    FILE *log = NULL;
    if (o.log_path) {
        log = fopen(o.log_path, o.resume ? "a" : "w");
        if (!log)
            die(CMD, "cannot write log %s: %s", o.log_path, strerror(errno));
        if (!o.resume || ftell(log) == 0)
            fprintf(log, "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n");
    }
    if (!o.quiet) {
        print_config(&o, &cfg, &data, &m);
        if (from)
            printf("  %s %s at step %ld\n", o.resume ? "resuming" : "initialized from", from, ck.step);
    }

    int32_t *x = malloc((size_t)B * S * sizeof *x), *y = malloc((size_t)B * S * sizeof *y);
    if (!x || !y)
        die(CMD, "out of memory for a batch of %d x %d tokens", B, S);
    int tty = isatty(fileno(stdout)) && !o.quiet;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    double t_start = now_seconds(), t_mark = t_start, loss = NAN;
    long mark_step = start, step = start;
    eval_result final = { NAN, 0, 0 };
    int have_final = 0;
    int status = 0;
    for (; step < o.steps; step++) {
        double lr = lr_schedule(cosine, step, o.warmup, o.steps, o.lr, o.min_lr);
        dataset_batch(&data, random_order, &data_rng, step, B, S, x, y);
        ag_reset(ctx);
        ag_tensor *logits = model_forward(ctx, &m, x, B, S, 1, NULL);
        ag_tensor *l = ag_cross_entropy(ctx, logits, y);
        ag_params_zero_grad(m.params);
        ag_backward(ctx, l);
        loss = l->data[0];
        const ag_tensor *bad = isfinite(loss) ? first_not_finite(m.params, 1) : NULL;
        if (!isfinite(loss) || bad) {
            if (tty)
                printf("\n");
            if (bad)
                fprintf(stderr, "attograd train: the gradient of %s is not finite at step %ld; stopping without "
                                "saving (lower --lr or use --clip)%s\n", bad->name, step + 1,
                        o.save ? "; the last saved checkpoint is kept" : "");
            else
                fprintf(stderr, "attograd train: loss is %g at step %ld; stopping without saving (lower --lr or "
                                "use --clip)%s\n", loss, step + 1, o.save ? "; the last saved checkpoint is kept" : "");
            status = 3;
            break;
        }
        if (o.clip > 0)
            ag_clip_grad_norm(m.params, o.clip);
        ag_optim_step(optim, lr);
        if ((bad = first_not_finite(m.params, 0))) {
            if (tty)
                printf("\n");
            fprintf(stderr, "attograd train: the update at step %ld made %s not finite; stopping without saving "
                            "(lower --lr or use --clip)%s\n", step + 1, bad->name,
                    o.save ? "; the last saved checkpoint is kept" : "");
            status = 3;
            break;
        }

        long done = step + 1;
        int log_now = done % o.log_every == 0 || done == o.steps;
        int eval_now = (o.eval_every > 0 && done % o.eval_every == 0) || done == o.steps;
        if (o.save && o.save_every > 0 && done % o.save_every == 0 && done != o.steps &&
            ckpt_save(o.save, &m, data_name, vocab, vocab_size, done, &state, err, sizeof err)) {
            fprintf(stderr, "attograd train: %s\n", err);
            status = 1;
            break;
        }
        if (log_now || eval_now) {
            double t = now_seconds(), ms = 1e3 * (t - t_mark) / (double)(done - mark_step);
            double tps = (double)B * S / (ms / 1e3);
            eval_result ev = { NAN, 0, 0 };
            if (eval_now)
                ev = evaluate(ctx, &m, &data, TEXT_VAL, done == o.steps ? 0 : TRAIN_EVAL_WINDOWS);
            if (done == o.steps) {
                final = ev;             /* the summary reuses the full last evaluation */
                have_final = 1;
            }
            if (!o.quiet) {
                if (tty)
                    printf("\r%*s\r", 80, "");
                printf("step %6ld/%ld | loss %.4f | lr %.2e | %7.2f ms/step | %8.0f tok/s", done, o.steps, loss, lr,
                       ms, tps);
                if (eval_now) {
                    printf(" | val loss %.4f", ev.loss);
                    if (data.is_task)
                        printf(" | held-out acc %.1f%%", 100.0 * (double)ev.correct / (double)ev.total);
                }
                printf("\n");
            }
            if (log) {
                fprintf(log, "%ld,%.6f,", done, loss);
                if (eval_now)
                    fprintf(log, "%.6f,", ev.loss);
                else
                    fprintf(log, ",");
                if (eval_now && data.is_task)
                    fprintf(log, "%.6f", (double)ev.correct / (double)ev.total);
                fprintf(log, ",%.6g,%.3f,%.0f\n", lr, ms, tps);
                fflush(log);
            }
            t_mark = now_seconds();     /* evaluation time is not training time */
            mark_step = done;
        } else if (tty && done % 5 == 0) {
            progress_bar(done, o.steps, loss, now_seconds() - t_start, done - start);
        }
        if (stop_signal) {
            step++;
            if (tty)
                printf("\n");
            fprintf(stderr, "attograd train: %s at step %ld: stopping%s\n",
                    stop_signal == SIGINT ? "interrupted" : "terminated", step, o.save ? " and saving" : "");
            status = stop_signal == SIGINT ? 130 : 143;
            break;
        }
    }
    double elapsed = now_seconds() - t_start;

    if ((status == 0 || status >= 128) && o.save) {
        if (ckpt_save(o.save, &m, data_name, vocab, vocab_size, step, &state, err, sizeof err)) {
            fprintf(stderr, "attograd train: %s\n", err);
            status = 1;
        } else if (!o.quiet) {
            printf("saved %s (step %ld)\n", o.save, step);
        }
    }
    if (status == 0) {
        eval_result ev = have_final ? final : evaluate(ctx, &m, &data, TEXT_VAL, 0);
        printf("done: %ld steps in %.1f s, final train loss %.4f, %s loss %.4f", step - start, elapsed, loss,
               data.is_task ? "held-out" : "validation", ev.loss);
        if (data.is_task)
            printf(", held-out exact match %.1f%% (%ld/%ld)", 100.0 * (double)ev.correct / (double)ev.total,
                   ev.correct, ev.total);
        printf(", arena peak %.1f MB\n", (double)ag_arena_peak(ctx) / 1e6);
        if (data.is_task && !o.quiet)
            show_examples(ctx, &m, &data, 5);
    }
    if (log)
        fclose(log);
    free(x);
    free(y);
    ag_optim_free(optim);
    ag_ctx_free(ctx);
    model_free(&m);
    dataset_free(&data);
    if (from)
        ckpt_close(&ck);
    return status;
}
