/*
 * cmd_eval.c - the subcommands that read a saved model: `eval` (mean
 * next-token loss over a split), `sample` (generate text) and `info` (what a
 * checkpoint holds).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "cli.h"
#include "files.h"
#include "run.h"

/* Open the data a model is evaluated on: a task by name, or a text file read
 * with the model's own vocabulary. */
static void open_data(const char *cmd, dataset *d, const ckpt *ck, const char *task_name, const char *text,
                      uint64_t seed)
{
    char err[ERR_MAX];
    int is_text = strcmp(ck->data, "text") == 0;
    if (task_name && text)
        die(cmd, "--task and --text both given: choose one data source");
    if (!task_name && !text) {
        if (is_text)
            die(cmd, "the model was trained on text: give the text to evaluate with --text FILE");
        task_name = ck->data;
    }
    if (task_name) {
        if (is_text || strcmp(task_name, ck->data) != 0)
            die(cmd, "--task %s does not match the model, which was trained on %s", task_name, ck->data);
        if (dataset_open_task(d, task_name, seed, err, sizeof err))
            die(cmd, "%s", err);
    } else {
        if (!is_text)
            die(cmd, "--text given but the model was trained on task %s (use --task %s)", ck->data, ck->data);
        if (dataset_open_text(d, text, ck->vocab, ck->vocab_size, err, sizeof err))
            die(cmd, "%s", err);
    }
}

int cmd_eval(int argc, char **argv)
{
    const char *CMD = "eval", *path = NULL, *task_name = NULL, *text = NULL, *split_name = "val";
    int threads = 0;
    long seed = 1;
    opt opts[] = {
        { "--model", OPT_STRING, &path, "FILE", "checkpoint to evaluate (required)", 0, 0, 0, 0 },
        { "--task", OPT_STRING, &task_name, "NAME", "the model's task (default: the one it was trained on)", 0, 0, 0, 0 },
        { "--text", OPT_STRING, &text, "FILE", "text to evaluate on (models trained on text)", 0, 0, 0, 0 },
        { "--split", OPT_STRING, &split_name, "S", "val (default), train or all", 0, 0, 0, 0 },
        { "--seed", OPT_LONG, &seed, "S", "task: seed of the sampled held-out problems (default 1)", 0, 9.2e18, 0, 0 },
        { "--threads", OPT_INT, &threads, "N", "threads; 0 = all cores (default)", 0, 1024, 0, 0 },
    };
    args_parse(CMD, "Mean next-token cross-entropy of a saved model over every non-overlapping window of a\n"
                    "text split (s = 0, T, 2T, ... with s + T + 1 <= n), printed as 'loss X'; for a task,\n"
                    "the loss and exact-match accuracy on its held-out problems.",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (!path)
        die(CMD, "--model FILE is required");
    int split = strcmp(split_name, "val") == 0 ? TEXT_VAL : strcmp(split_name, "train") == 0 ? TEXT_TRAIN
              : strcmp(split_name, "all") == 0 ? -1 : -2;
    if (split == -2)
        die(CMD, "--split '%s' is not a split (use val, train or all)", split_name);
    ag_set_threads(threads);
    ckpt ck;
    model m;
    open_model(CMD, path, &ck, &m);
    dataset d;
    open_data(CMD, &d, &ck, task_name, text, (uint64_t)seed);
    if (!d.is_task) {
        size_t n = split == TEXT_TRAIN ? d.text.n_train : split == TEXT_VAL ? d.text.n - d.text.n_train : d.text.n;
        if (n < (size_t)m.cfg.context + 1)
            die(CMD, "%s: the %s split has %zu tokens, fewer than one window of %d + 1", text, split_name, n,
                m.cfg.context);
    }
    ag_ctx *ctx = ag_ctx_new();
    eval_result r = evaluate(ctx, &m, &d, split, 0);
    printf("loss %.6f\n", r.loss);
    if (d.is_task)
        printf("accuracy %.6f (%ld/%ld exact)\n", (double)r.correct / (double)r.total, r.correct, r.total);
    ag_ctx_free(ctx);
    dataset_free(&d);
    model_free(&m);
    ckpt_close(&ck);
    return 0;
}

int cmd_sample(int argc, char **argv)
{
    const char *CMD = "sample", *path = NULL, *prompt = NULL;
    long tokens = 200, seed = 1;
    double temperature = 1.0;
    int top_k = 0, threads = 0;
    opt opts[] = {
        { "--model", OPT_STRING, &path, "FILE", "checkpoint to sample from (required)", 0, 0, 0, 0 },
        { "--prompt", OPT_STRING, &prompt, "STR", "text to continue (task models: a problem, e.g. abcdefgh|)", 0, 0, 0, 0 },
        { "--tokens", OPT_LONG, &tokens, "N", "tokens to generate (default 200; task models: the answer)", 1, 1e7, 0, 0 },
        { "--temperature", OPT_DOUBLE, &temperature, "X", "sampling temperature; 0 = greedy (default 1)", 0, 100, 0, 0 },
        { "--top-k", OPT_INT, &top_k, "K", "sample among the K most likely tokens; 0 = all (default)", 0, 256, 0, 0 },
        { "--seed", OPT_LONG, &seed, "S", "seed of the sampling (default 1)", 0, 9.2e18, 0, 0 },
        { "--threads", OPT_INT, &threads, "N", "threads; 0 = all cores (default)", 0, 1024, 0, 0 },
    };
    args_parse(CMD, "Generate tokens from a saved model.", argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (!path)
        die(CMD, "--model FILE is required");
    ag_set_threads(threads);
    char err[ERR_MAX];
    ckpt ck;
    model m;
    open_model(CMD, path, &ck, &m);
    int is_text = strcmp(ck.data, "text") == 0;
    size_t plen = prompt ? strlen(prompt) : 0;
    int32_t *buf = malloc((plen + (size_t)tokens + 2) * sizeof *buf);
    if (!buf)
        die(CMD, "out of memory for %ld tokens", tokens);
    int n = 0;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, (uint64_t)seed, 4);
    ag_ctx *ctx = ag_ctx_new();
    if (is_text) {
        text_data td;
        if (text_vocab_only(&td, ck.vocab, ck.vocab_size, err, sizeof err))
            die(CMD, "%s: %s", path, err);
        if (prompt) {
            long k = text_encode(&td, prompt, buf, plen + 1, err, sizeof err);
            if (k < 0)
                die(CMD, "--prompt: %s", err);
            n = (int)k;
        } else {
            buf[n++] = 0;   /* start from the first vocabulary byte, usually a newline */
        }
        int total = sample_tokens(ctx, &m, buf, n, (int)tokens, temperature, top_k, &rng);
        char *out = malloc((size_t)total + 1);
        if (!out)
            die(CMD, "out of memory");
        size_t len = text_decode(&td, buf, (size_t)total, out, (size_t)total + 1);
        fwrite(out, 1, len, stdout);
        printf("\n");
        free(out);
        text_free(&td);
    } else {
        task t;
        if (task_open(&t, ck.data, err, sizeof err))
            die(CMD, "%s: %s", path, err);
        if (!prompt)
            die(CMD, "--prompt is required for a task model (e.g. --prompt '%s')", t.example);
        int32_t seq[64];
        int k = task_parse(&t, prompt, seq, 64, err, sizeof err);
        if (k < 0 || task_check_prompt(&t, seq, k, err, sizeof err))
            die(CMD, "--prompt: %s", err);
        if (temperature == 0 || !args_find(opts, 7, "--temperature")->given)
            complete_greedy(ctx, &m, seq, 1, t.len + 1, t.prompt, t.len + 1);
        else
            sample_tokens(ctx, &m, seq, t.prompt, t.len + 1 - t.prompt, temperature, top_k, &rng);
        char out[128];
        task_format(&t, seq, t.len + 1, out, sizeof out);
        printf("%s\n", out);
    }
    free(buf);
    ag_ctx_free(ctx);
    model_free(&m);
    ckpt_close(&ck);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    const char *CMD = "info";
    if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: attograd info FILE\n\nPrint a checkpoint's config, parameter count and tensors.\n");
        return 0;
    }
    for (int i = 0; i < argc; i++)
        if (argv[i][0] == '-')
            die(CMD, "unknown option '%s' (usage: attograd info FILE)", argv[i]);
    if (argc != 1)
        die(CMD, "expects exactly one checkpoint file (usage: attograd info FILE)");
    ckpt ck;
    model m;
    open_model(CMD, argv[0], &ck, &m);
    const model_config *c = &m.cfg;
    printf("%s\n", argv[0]);
    printf("  arch %s, vocab %d, %d layers, %d heads, d_model %d, context %d, qkv_bias %s, dropout %g\n",
           model_arch_name(c->arch), c->vocab_size, c->n_layer, c->n_head, c->d_model, c->context,
           c->qkv_bias ? "true" : "false", c->dropout);
    printf("  trained on %s, step %ld, %zu parameters%s\n", ck.data, ck.step, m.params->total,
           ck.has_state ? ", with optimizer state (resumable)" : "");
    printf("  metadata:\n");
    for (int i = 0; i < ag_st_meta_count(ck.file); i++) {
        const char *k = ag_st_meta_key(ck.file, i);
        printf("    %-16s %s\n", k, ag_st_meta(ck.file, k));
    }
    printf("  tensors:\n");
    for (int i = 0; i < ag_st_count(ck.file); i++) {
        const ag_st_tensor *t = ag_st_at(ck.file, i);
        char shape[96] = "[";
        size_t u = 1;
        for (int k = 0; k < t->ndim; k++)
            u += (size_t)snprintf(shape + u, sizeof shape - u, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        snprintf(shape + u, sizeof shape - u, "]");
        printf("    %-40s %-4s %s\n", t->name, ag_st_dtype_name(t->dtype), shape);
    }
    model_free(&m);
    ckpt_close(&ck);
    return 0;
}
