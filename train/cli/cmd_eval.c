/*
 * cmd_eval.c - the subcommands that read a saved model: `eval` (mean
 * next-token loss over a split), `sample` (generate text) and `info` (what a
 * checkpoint holds).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "meter.h"
#include "open.h"

/* --split: TEXT_VAL, TEXT_TRAIN, -1 (all), or -3 when not given. */
static int parse_split(const char *cmd, const char *name)
{
    if (!name)
        return -3;
    int split = strcmp(name, "val") == 0 ? TEXT_VAL : strcmp(name, "train") == 0 ? TEXT_TRAIN
              : strcmp(name, "all") == 0 ? -1 : -2;
    if (split == -2)
        die(cmd, "--split '%s' is not a split (use val, train or all)", name);
    return split;
}

/* The windows evaluate() scores on text: every window of the split (or of
 * both); none is one line and exit 2. */
static size_t count_windows(const char *cmd, const dataset *d, const char *text, int split, int T)
{
    size_t n_val = d->text.n - d->text.n_train;
    size_t windows = (split != TEXT_VAL ? text_eval_windows(d->text.n_train, T) : 0) +
                     (split != TEXT_TRAIN ? text_eval_windows(n_val, T) : 0);
    if (windows == 0 && split == -1)
        die(cmd, "%s: each split (%zu and %zu tokens) has fewer than one window of %d + 1", text, d->text.n_train,
            n_val, T);
    size_t n = split == TEXT_VAL ? n_val : d->text.n_train;
    if (windows == 0)
        die(cmd, "%s: the %s split has %zu token%s, fewer than one window of %d + 1", text,
            split == TEXT_VAL ? "val" : "train", n, n == 1 ? "" : "s", T);
    return windows;
}

/* What was scored, and whether it is the model's training file: one line,
 * whatever the paths hold (the recorded one comes from the checkpoint, and a
 * crafted one could carry a newline or a terminal's escape: made visible as
 * in an error message). */
static void print_scored(const ckpt *ck, const char *text, int split, int split_given, int own, size_t windows,
                         int T)
{
    const char *trained = ckpt_meta(ck, "text_path");
    static char line[4 * (3 * 4096 + 512)];      /* room for each byte escaped */
    size_t room = sizeof line / 4, u = 0;
    u += (size_t)snprintf(line, room, "scored %zu window%s of %d token%s (%zu token%s): %s %s", windows,
                          windows == 1 ? "" : "s", T, T == 1 ? "" : "s", windows * (size_t)T,
                          windows * (size_t)T == 1 ? "" : "s",
                          split == TEXT_VAL ? "the validation split (last tenth) of" : split == TEXT_TRAIN
                          ? "the training split (first nine tenths) of" : "all of", text);
    struct stat st;
    if (u >= room)
        ;
    else if (own)
        snprintf(line + u, room - u, ", the model's training file");
    else if (split_given)
        ;
    else if (trained && stat(trained, &st) == 0)
        snprintf(line + u, room - u, ", not the model's training file (%s)", trained);
    else if (trained)
        snprintf(line + u, room - u, ", maybe not the model's training file: %s is not found from here (--split val "
                 "scores the last tenth)", trained);
    else
        snprintf(line + u, room - u, ", which the checkpoint does not name as its training file (--split val scores "
                 "the last tenth)");
    ag_one_line(line, sizeof line);
    printf("%s\n", line);
}

#define STRINGIFY(x) #x
#define AS_TEXT(x) STRINGIFY(x)
#define HELDOUT_DRAWN AS_TEXT(TASK_HELDOUT_SAMPLED)

int cmd_eval(int argc, char **argv)
{
    const char *CMD = "eval", *split_name = NULL;
    saved_model a = { .precision = "fp32" };
    int batch = 32, accept_changed = 0;
    long seed = 1;
    opt opts[] = {
        { "--model", OPT_STRING, &a.path, "FILE", "checkpoint to evaluate", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--task", OPT_STRING, &a.task, "NAME", "the model's task (default: the one it was trained on)", 0, 0, 0, 0, 0 },
        { "--text", OPT_STRING, &a.text, "FILE", "text to evaluate on (default for a text model: the file it was trained on)", 0, 0, 0, 0, 0 },
        { "--split", OPT_STRING, &split_name, "S", "val, train or all (default: val of the training file, all of any other)", 0, 0, 0, 0, 0 },
        { "--seed", OPT_LONG, &seed, "S", "copy and reverse: seed of the " HELDOUT_DRAWN " held-out problems drawn (default 1)", 0, 9.2e18, 0, 0, 0 },
        { "--batch", OPT_INT, &batch, "B", "windows (or problems) scored at once (default 32)", 1, RUN_MAX_BATCH, 0, 0, 0 },
        THREADS_OPT(a, ""),
        PRECISION_OPT(a.precision),
        HEADS_OPT(a.heads),
        { "--accept-changed-data", OPT_FLAG, &accept_changed, NULL, "score the training file even if it changed since the checkpoint was saved", 0, 0, 0, 0, 0 },
    };
    args_parse(CMD, "Mean next-token cross-entropy of a saved model over every non-overlapping window of a\n"
                    "text split (s = 0, T, 2T, ... with s + T + 1 <= n), printed as 'loss X' in nats with bits\n"
                    "per byte and perplexity, and the windows it used.  The file the model was trained on\n"
                    "(metadata text_path) splits 90/10 and its last tenth is scored; any other file is\n"
                    "scored whole.  For a task, the loss and exact-match accuracy on its held-out problems.",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    int split = parse_split(CMD, split_name);
    const int prec = precision_parse(CMD, a.precision);
    ag_set_threads(a.threads);
    ckpt ck;
    model m;
    open_saved(CMD, &a, OPEN_FORWARD_ONLY, &ck, &m);
    const char *text_flag = a.text ? "--text" : "the model's training text";
    /* a text model is scored, by default, on the file it was trained on,
     * where it was (its split and identity are checked below) */
    if (!a.text && strcmp(ck.data, "text") == 0) {
        a.text = ckpt_meta(&ck, "text_path");
        if (!a.text || !*a.text)        /* absent, or "" */
            die(CMD, "%s records no text file: give the text to evaluate with --text FILE", ck.path);
        if (access(a.text, F_OK) != 0)
            die(CMD, "cannot open %s, the text the model was trained on: %s; give the text with --text FILE", a.text,
                strerror(errno));
    }
    file_arg in[] = { { "--model", a.path }, { text_flag, a.text } };
    check_stdout_apart(CMD, in, 2);
    dataset d;
    open_model_data(CMD, &d, &ck, a.text, (uint64_t)seed);
    if (d.is_task && split_name)
        die(CMD, "--split applies to text: a task model is scored on its held-out problems, which training never "
                 "draws");
    if (d.is_task && accept_changed)
        die(CMD, "--accept-changed-data applies to a text model's training file: a %s model is scored on its "
                 "held-out problems", d.task.name);
    if (args_find(opts, (int)(sizeof opts / sizeof opts[0]), "--seed")->given &&
        (!d.is_task || d.task.kind == TASK_SORT || d.task.kind == TASK_ADD))
        die(CMD, "--seed applies to the copy and reverse tasks, whose held-out problems are drawn: %s%s%s",
            d.is_task ? "every held-out problem of " : "a text is scored on every window of its split",
            d.is_task ? d.task.name : "", d.is_task ? " is scored" : "");
    int T = m.cfg.context, own = !d.is_task && is_training_file(&ck, a.text);
    if (!d.is_task && !own && accept_changed)
        die(CMD, "--accept-changed-data applies to a text model's training file: %s is not %s, and is scored whole",
            a.text, ckpt_meta(&ck, "text_path") ? ckpt_meta(&ck, "text_path") : "the file the checkpoint records");
    char err[ERR_MAX];
    int changed = own && !accept_changed ? text_check_unchanged(&ck, &d.text, 1, err, sizeof err) : 0;
    if (changed)
        die(CMD, "%s%s; --accept-changed-data scores it as it is now", err,
            changed == -1 ? ": its splits are not the ones the model was trained and validated on" : "");
    if (split == -3)
        split = own ? TEXT_VAL : -1;
    size_t windows = d.is_task ? 0 : count_windows(CMD, &d, a.text, split, T);
    ag_ctx *ctx = ag_ctx_new();
    ag_set_precision(ctx, prec);
    meter mt;
    meter_start(&mt, stderr, 1, "evaluating", d.is_task ? "problems" : "windows");
    const eval_progress progress = { meter_tick, &mt, NULL };   /* a signal ends eval at once */
    eval_result r = evaluate(ctx, &m, &d, split, 0, batch, &progress);
    meter_end(&mt);
    refuse_overflow(CMD, ck.path, r.loss, prec);
    /* a token is a byte of text; the loss is in nats per token */
    printf("loss %.6f (%.4f bits per %s, perplexity %.4g)\n", r.loss, r.loss / log(2.0), d.is_task ? "token" : "byte",
           exp(r.loss));
    if (d.is_task) {
        printf("accuracy %.6f (%ld/%ld exact)\n", (double)r.correct / (double)r.total, r.correct, r.total);
        printf("scored %ld held-out problems of task %s\n", r.total, d.task.name);
    } else {
        print_scored(&ck, a.text, split, split_name != NULL, own, windows, T);
    }
    ag_ctx_free(ctx);
    dataset_free(&d);
    model_free(&m);
    ckpt_close(&ck);
    return 0;
}

/* sample: SIGINT or SIGTERM stops generating after the current token; what
 * was printed stays, followed by a newline.  A SIGINT ignored when sample
 * started (a command run with `&` by a shell without job control) stays
 * ignored, as in train (files.h, on_stop_signals). */
static volatile sig_atomic_t stop_sampling;

static void on_stop(int sig) { stop_sampling = sig; }

/* Each new token is printed as soon as it is drawn; a write that fails (a
 * full disk, >/dev/full) stops the drawing there: nothing more could be
 * printed, and the exit says why (main's check of standard output). */
static int print_token(void *user, int32_t token)
{
    const text_data *td = user;
    char c[2];
    fwrite(c, 1, text_decode(td, &token, 1, c, sizeof c), stdout);
    fflush(stdout);
    return stop_sampling != 0 || ferror(stdout);
}

/* A seed for a run that names none: different from call to call (time and
 * process id, mixed by splitmix64's finalizer), short enough to type back. */
static long fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 40;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return (long)((x ^ (x >> 31)) % 1000000000u);
}

/* A text model's prompt as tokens in buf (room for the samples after it),
 * or the first vocabulary byte when there is none; returns their count. */
static int text_prompt(const char *path, const ckpt *ck, const char *prompt, text_data *td, int32_t *buf)
{
    const char *CMD = "sample";
    char err[ERR_MAX];
    if (text_vocab_only(td, ck->vocab, ck->vocab_size, err, sizeof err))
        die(CMD, "%s: %s", path, err);
    if (!prompt) {
        buf[0] = 0;     /* start from the first vocabulary byte, usually a newline */
        return 1;
    }
    long k = text_encode(td, prompt, buf, strlen(prompt) + 1, err, sizeof err);
    if (k < 0)
        die(CMD, "--prompt: %s", err);
    return (int)k;
}

/* A text model's tokens after the n in buf, printed as they are drawn;
 * returns the exit status (130 or 143 when a signal stopped it). */
static int sample_text(ag_ctx *ctx, model *m, text_data *td, const char *prompt, int32_t *buf, int n, long tokens,
                       double temperature, int top_k, ag_pcg32 *rng)
{
    if (!signal_ignored(SIGINT))
        signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    if (prompt)
        fputs(prompt, stdout);   /* all its bytes are in the vocabulary: as the tokens decode */
    else
        print_token(td, buf[0]);
    int total = sample_tokens(ctx, m, buf, n, (int)tokens, temperature, top_k, rng, print_token, td);
    printf("\n");
    if (!stop_sampling)
        return 0;
    fprintf(stderr, "attograd sample: %s after %d token%s\n", stop_sampling == SIGINT ? "interrupted" : "terminated",
            total - n, total - n == 1 ? "" : "s");
    return stop_sampling == SIGINT ? 130 : 143;
}

/* A task model's problem: the prompt as tokens, checked, into seq (room for
 * L + 1); buf has room for a token per byte of the prompt, so that a long
 * one is refused by its count of tokens against the task's, not against a
 * buffer's size. */
static void task_prompt(const char *path, const ckpt *ck, const char *prompt, task *t, int32_t *seq, int32_t *buf)
{
    const char *CMD = "sample";
    char err[ERR_MAX];
    if (task_open(t, ck->data, err, sizeof err))
        die(CMD, "%s: %s", path, err);
    if (!prompt)
        die(CMD, "--prompt is required for a task model (e.g. --prompt '%s')", t->example);
    size_t cap = strlen(prompt) + 1;
    int k = task_parse(t, prompt, buf, cap < INT_MAX ? (int)cap : INT_MAX, err, sizeof err);
    if (k < 0 || task_check_prompt(t, buf, k, err, sizeof err))
        die(CMD, "--prompt: %s", err);
    memcpy(seq, buf, (size_t)k * sizeof *seq);
}

int cmd_sample(int argc, char **argv)
{
    const char *CMD = "sample", *prompt = NULL;
    saved_model a = { .precision = "fp32" };
    long tokens = 200, seed = 1;
    double temperature = 1.0;
    int top_k = 0;
    opt opts[] = {
        { "--model", OPT_STRING, &a.path, "FILE", "checkpoint to sample from", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--prompt", OPT_STRING, &prompt, "STR", "text to continue (task models: a problem, e.g. abcdefgh|)", 0, 0, 0, 0, 0 },
        { "--tokens", OPT_LONG, &tokens, "N", "tokens to generate, printed as they come (default 200; task models: the answer)", 1, 1e7, 0, 0, 0 },
        { "--temperature", OPT_DOUBLE, &temperature, "X", "sampling temperature; 0 = greedy (default 1; task models: 0)", 0, 100, 0, 0, 0 },
        { "--top-k", OPT_INT, &top_k, "K", "sample among the K most likely tokens; 0 = all (default)", 0, 256, 0, 0, 0 },
        { "--seed", OPT_LONG, &seed, "S", "seed of the sampling (default: a new one each time, shown on stderr)", 0, 9.2e18, 0, 0, 0 },
        PRECISION_OPT(a.precision),
        SAVED_MODEL_OPTS(a),
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);
    args_parse(CMD, "Generate tokens from a saved model.  Text is printed token by token as it is drawn;\n"
                    "Ctrl-C stops there (exit status 130) and keeps what was printed.  Greedy sampling\n"
                    "(--temperature 0; a task model's default) takes the most likely token each time:\n"
                    "--top-k and --seed have no effect there, and a line on stderr says so.",
               argc, argv, opts, nopts);
    file_arg in[] = { { "--model", a.path }, { "--text", a.text } };
    check_stdout_apart(CMD, in, 2);
    const int prec = precision_parse(CMD, a.precision);
    ag_set_threads(a.threads);
    ckpt ck;
    model m;
    open_saved(CMD, &a, OPEN_FORWARD_ONLY, &ck, &m);
    check_vocab_text(CMD, &ck, a.text);
    int is_text = strcmp(ck.data, "text") == 0;
    if (!is_text && args_find(opts, nopts, "--tokens")->given)
        die(CMD, "--tokens applies to text models: a %s model writes its task's answer, no more and no less", ck.data);
    /* a task model answers greedily unless a temperature is asked for */
    int greedy = temperature == 0 || (!is_text && !args_find(opts, nopts, "--temperature")->given);
    size_t plen = prompt ? strlen(prompt) : 0;
    int32_t *buf = malloc((plen + (size_t)tokens + 2) * sizeof *buf);
    if (!buf)
        die(CMD, "out of memory for %ld tokens", tokens);
    task t;
    text_data td;
    int32_t seq[64];
    int n = is_text ? text_prompt(a.path, &ck, prompt, &td, buf) : 0;
    if (!is_text)
        task_prompt(a.path, &ck, prompt, &t, seq, buf);
    ag_ctx *ctx = ag_ctx_new();
    ag_set_precision(ctx, prec);
    /* the tokens the first is drawn after: the prompt's (its last context's) */
    int T = m.cfg.context, first = is_text ? (n < T ? n : T) : t.prompt;
    refuse_overflow(CMD, ck.path, forward_check(ctx, &m, is_text ? buf + n - first : seq, first), prec);
    /* settings of the draw given to no draw: said, not silently dropped
     * (the output is greedy's, as without them), once the model and the
     * prompt are found good, so that a refusal stays one line */
    int top_k_given = args_find(opts, nopts, "--top-k")->given, seed_given = args_find(opts, nopts, "--seed")->given;
    if (greedy && (top_k_given || seed_given))
        warn(CMD, "%s%s%s %s no effect: %s takes the most likely token each time", top_k_given ? "--top-k" : "",
             top_k_given && seed_given ? " and " : "", seed_given ? "--seed" : "",
             top_k_given && seed_given ? "have" : "has",
             temperature == 0 ? "--temperature 0" : "a task model without --temperature");
    if (!greedy && !seed_given) {
        seed = fresh_seed();
        fprintf(stderr, "attograd sample: seed %ld (--seed %ld repeats this sample)\n", seed, seed);
    }
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, (uint64_t)seed, 4);
    int status = 0;
    if (is_text) {
        status = sample_text(ctx, &m, &td, prompt, buf, n, tokens, temperature, top_k, &rng);
        text_free(&td);
    } else {
        if (greedy)
            complete_greedy(ctx, &m, seq, 1, t.len + 1, t.prompt, t.len + 1, 1);
        else
            sample_tokens(ctx, &m, seq, t.prompt, t.len + 1 - t.prompt, temperature, top_k, &rng, NULL, NULL);
        char out[128];
        task_format(&t, seq, t.len + 1, out, sizeof out);
        printf("%s\n", out);
    }
    free(buf);
    ag_ctx_free(ctx);
    model_free(&m);
    ckpt_close(&ck);
    return status;
}

/* A name or value from the file, padded to width: a control byte (a
 * newline, a terminal's escape) is shown as \xNN, so a crafted file
 * cannot add lines to the listing or drive the terminal. */
static void print_visible(const char *s, int width)
{
    int n = 0;
    for (; *s; s++, n++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            n += printf("\\x%02x", c) - 1;
        else
            putchar(c);
    }
    printf("%*s", n < width ? width - n : 0, "");
}

int cmd_info(int argc, char **argv)
{
    const char *CMD = "info", *path = NULL;
    int heads = 0, nrest = 0, nfiles = 0;
    opt opts[] = { HEADS_OPT(heads) };
    /* the one argument that is not an option (nor --heads' value) is the
     * file; after "--" every argument is one (a file named "-x") */
    char **rest = malloc((size_t)(argc + 1) * sizeof *rest);
    if (!rest)
        die(CMD, "out of memory");
    int files_only = 0;
    for (int i = 0; i < argc; i++) {
        if (!files_only && strcmp(argv[i], "--") == 0) {
            files_only = 1;
            continue;
        }
        if (files_only || (argv[i][0] != '-' && (i == 0 || strcmp(argv[i - 1], "--heads") != 0))) {
            path = nfiles++ ? path : argv[i];
            continue;
        }
        rest[nrest++] = argv[i];
    }
    args_parse(CMD, "attograd info FILE [--heads N]: A checkpoint's config, parameter count, metadata and tensors.\n"
               "A FILE whose name begins with - follows -- (attograd info -- -old.st).",
               nrest, rest, opts, 1);
    free(rest);
    if (nfiles != 1)
        die(CMD, "expects exactly one checkpoint file (usage: attograd info FILE [--heads N])");
    file_arg in[] = { { "checkpoint", path } };
    check_stdout_apart(CMD, in, 1);
    ckpt ck;
    model m;
    ckpt_hints hints = { heads, NULL, NULL, 1, 1 };
    open_model(CMD, path, &hints, &ck, &m);
    const model_config *c = &m.cfg;
    char step[32] = "unknown";
    if (ck.step >= 0)
        snprintf(step, sizeof step, "%ld", ck.step);
    printf("%s\n", path);
    printf("  arch %s, vocab %d, %d layer%s, %d head%s, d_model %d, context %d, qkv_bias %s, dropout %g\n",
           model_arch_name(c->arch), c->vocab_size, c->n_layer, c->n_layer == 1 ? "" : "s", c->n_head,
           c->n_head == 1 ? "" : "s", c->d_model, c->context, c->qkv_bias ? "true" : "false", c->dropout);
    printf("  trained on %s, step %s, %zu parameters%s\n", ck.data ? ck.data : "unknown data", step,
           m.params->total, ck.has_state ? ", with optimizer state (resumable)" : "");
    if (ck.foreign)
        printf("  not written by attograd: what the metadata does not say is taken from the tensors\n");
    printf("  metadata:\n");
    for (int i = 0; i < ag_st_meta_count(ck.file); i++) {
        const char *k = ag_st_meta_key(ck.file, i);
        printf("    ");
        print_visible(k, 16);
        printf(" ");
        print_visible(ag_st_meta(ck.file, k), 0);
        printf("\n");
    }
    printf("  tensors:\n");
    for (int i = 0; i < ag_st_count(ck.file); i++) {
        const ag_st_tensor *t = ag_st_at(ck.file, i);
        char shape[96] = "[";
        size_t u = 1;
        for (int k = 0; k < t->ndim; k++)
            u += (size_t)snprintf(shape + u, sizeof shape - u, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        snprintf(shape + u, sizeof shape - u, "]");
        printf("    ");
        print_visible(t->name, 40);
        printf(" %-4s %s\n", ag_st_dtype_name(t->dtype), shape);
    }
    model_free(&m);
    ckpt_close(&ck);
    return 0;
}
