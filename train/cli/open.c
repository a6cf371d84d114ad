/*
 * open.c - checkpoints and their data opened for a subcommand, and
 * --precision (see open.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "open.h"

/* A checkpoint refused for what the flags can tell (ckpt.needs,
 * ckpt.heads_refused): the line that says so with the flags, into err;
 * err is left as it is when it was refused for something else. */
static void flag_advice(const ckpt *ck, const ckpt_hints *h, char *err, size_t len)
{
    static const struct { int need; const char *what; } pass[] = {
        { CKPT_HEADS, "how many heads: pass --heads N" },
        { CKPT_DATA, "what it was trained on: pass --task NAME or --text FILE" },
        { CKPT_VOCAB, "its vocabulary: pass --text FILE (its sorted distinct bytes)" },
    };
    if (ck->heads_refused && h->heads != ck->cfg.n_head)
        snprintf(err, len, "%s: --heads %d contradicts the file's metadata n_head %d", ck->path, h->heads,
                 ck->cfg.n_head);
    else if (ck->heads_refused)
        snprintf(err, len, "%s: --heads %d does not divide d_model %d", ck->path, h->heads, ck->cfg.d_model);
    else if (ck->needs) {
        size_t used = (size_t)snprintf(err, len, "%s: the file does not say ", ck->path);
        const char *nor = "";
        for (size_t i = 0; i < sizeof pass / sizeof pass[0] && used < len; i++)
            if (ck->needs & pass[i].need) {
                used += (size_t)snprintf(err + used, len - used, "%s%s", nor, pass[i].what);
                nor = "; nor ";
            }
    }
}

void open_model(const char *cmd, const char *path, const ckpt_hints *hints, ckpt *ck, model *m)
{
    char err[ERR_MAX];
    task t;
    if (hints && hints->task && hints->text)
        die(cmd, "--task and --text both given: choose one data source");
    if (hints && hints->task && task_open(&t, hints->task, err, sizeof err))
        die(cmd, "--task: %s", err);
    if (input_check(path, "checkpoint", CKPT_MAX_BYTES, err, sizeof err))
        die(cmd, "%s", err);
    /* --text is read for a vocabulary the file does not list, or checked
     * against the one it lists: a pipe or a device (/dev/zero) is refused
     * before it is read, as every text input is */
    if (hints && hints->text && input_check(hints->text, "text file", TEXT_MAX_BYTES, err, sizeof err))
        die(cmd, "%s", err);
    if (ckpt_open_hints(ck, path, m, hints, err, sizeof err)) {
        if (hints)
            flag_advice(ck, hints, err, sizeof err);
        die(cmd, "%s", err);
    }
    if (ck->note[0])
        warn(cmd, "note: %s", ck->note);
    if (hints && (hints->task || hints->text))
        check_data_flags(cmd, ck, hints->task, hints->text);
}

void open_saved(const char *cmd, const saved_model *a, int how, ckpt *ck, model *m)
{
    ckpt_hints hints = { a->heads, a->task, a->text, (how & OPEN_DATA_OPTIONAL) != 0, (how & OPEN_FORWARD_ONLY) != 0 };
    open_model(cmd, a->path, &hints, ck, m);
}

void check_vocab_text(const char *cmd, const ckpt *ck, const char *text)
{
    char err[ERR_MAX];
    text_data td;
    if (!text || !ag_st_meta(ck->file, "vocab"))
        return;                         /* read for the vocabulary itself */
    if (text_load_vocab(&td, text, ck->vocab, ck->vocab_size, err, sizeof err))
        die(cmd, "%s", err);
    text_free(&td);
}

void check_data_flags(const char *cmd, const ckpt *ck, const char *task_name, const char *text)
{
    int is_text = strcmp(ck->data, "text") == 0;
    if (task_name && (is_text || strcmp(task_name, ck->data) != 0))
        die(cmd, "--task %s does not match the model, which was trained on %s", task_name, ck->data);
    if (text && !is_text)
        die(cmd, "--text given but the model was trained on task %s (use --task %s)", ck->data, ck->data);
}

int open_text(dataset *d, const char *path, const uint8_t *vocab, int vocab_size, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (input_check(path, "text file", TEXT_MAX_BYTES, err, errlen))
        return -1;
    return dataset_open_text(d, path, vocab, vocab_size, err, errlen);
}

int is_training_file(const ckpt *ck, const char *path)
{
    const char *trained = ckpt_meta(ck, "text_path");
    struct stat a, b;
    return trained && stat(trained, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void open_model_data(const char *cmd, dataset *d, const ckpt *ck, const char *text, uint64_t seed)
{
    char err[ERR_MAX];
    if (strcmp(ck->data, "text") != 0) {
        if (dataset_open_task(d, ck->data, seed, err, sizeof err))
            die(cmd, "%s", err);
    } else {
        if (!text)
            die(cmd, "the model was trained on text: give the text to evaluate with --text FILE");
        if (open_text(d, text, ck->vocab, ck->vocab_size, err, sizeof err))
            die(cmd, "%s", err);
    }
}

int precision_parse(const char *cmd, const char *name)
{
    if (strcmp(name, "fp32") == 0)
        return AG_FP32;
    if (strcmp(name, "bf16") != 0)
        die(cmd, "--precision '%s' is not a precision (use fp32 or bf16)", name);
    const char *fact;
    if (ag_bf16_status(&fact) != AG_BF16_READY)
        die(cmd, "--precision bf16 cannot run here: %s", fact);
    return AG_BF16;
}

double forward_check(ag_ctx *ctx, model *m, const int32_t *ids, int n)
{
    int grad = ag_set_grad_enabled(ctx, 0);
    ag_reset(ctx);
    const ag_tensor *logits = model_forward(ctx, m, ids, 1, n, 0, NULL);
    double v = 0;
    for (size_t i = 0; i < (size_t)n * m->cfg.vocab_size; i++)
        v += (double)logits->data[i] * 0;   /* 0, or NaN once a logit is not finite */
    ag_reset(ctx);
    ag_set_grad_enabled(ctx, grad);
    return v;
}

void refuse_overflow(const char *cmd, const char *path, double v, int precision)
{
    if (!isfinite(v))
        die(cmd, "%s: its forward pass gives values that are not finite (NaN): the weights overflow %s arithmetic, "
                 "so the model cannot be %s", path, precision == AG_BF16 ? "bf16" : "float",
            strcmp(cmd, "eval") == 0 ? "scored" : strcmp(cmd, "sample") == 0 ? "sampled" : "run");
}
