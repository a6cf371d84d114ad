/*
 * cmd_viz.c - pictures of a model: `attn` (attention heatmaps of a prompt),
 * `plot` (loss curves from training logs) and `graph` (the autograd graph of
 * one training step, in Graphviz DOT).  Every file is written atomically
 * (ag_atomic_open: a temporary file beside it, fsync'ed and renamed over it);
 * attn's two are renamed only once both are whole (ag_atomic_ready).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "files.h"
#include "open.h"
#include "step.h"
#include "svg.h"

/* The files the picture commands write.  A signal that ends a command
 * while one is being written removes its temporary file. */
static ag_atomic_file out_file, csv_file;

static void track_outputs(void)
{
    output_track(&out_file);
    output_track(&csv_file);
    outputs_discard_on_signals();
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* ---- attn ---------------------------------------------------------------- */

/* The prompt as token ids (ids holds strlen(prompt) + 1), and one label per
 * token: the character it is written as.  Returns the number of tokens the
 * model reads, or -1 with err filled. */
static int encode_prompt(const ckpt *ck, const model *m, const char *prompt, int32_t *ids, char (*labels)[2],
                         char *err, size_t errlen)
{
    int T = m->cfg.context, n;
    size_t cap = strlen(prompt) + 1;
    char e[400];    /* messages about the prompt, without paths */
    if (strcmp(ck->data, "text") == 0) {
        text_data td;
        if (text_vocab_only(&td, ck->vocab, ck->vocab_size, e, sizeof e)) {
            snprintf(err, errlen, "%s: %s", ck->path, e);
            return -1;
        }
        long k = text_encode(&td, prompt, ids, cap, e, sizeof e);
        text_free(&td);
        if (k < 0) {
            snprintf(err, errlen, "--prompt: %s", e);
            return -1;
        }
        if (k > T) {
            snprintf(err, errlen, "--prompt has %ld bytes, a token each, but the model's context is %d", k, T);
            return -1;
        }
        for (long i = 0; i < k; i++)
            labels[i][0] = (char)ck->vocab[ids[i]];
        n = (int)k;
    } else {
        task t;
        if (task_open(&t, ck->data, e, sizeof e)) {
            snprintf(err, errlen, "%s: %s", ck->path, e);
            return -1;
        }
        n = task_parse(&t, prompt, ids, (int)(cap < 1000000 ? cap : 1000000), e, sizeof e);
        if (n < 0) {
            snprintf(err, errlen, "--prompt: %s", e);
            return -1;
        }
        /* A whole example has L + 1 tokens, of which training reads the first
         * L (the last is only ever a target); accept it and read L. */
        if (n == t.len + 1)
            n = t.len;
        if (n > t.len || n > T) {
            snprintf(err, errlen, "--prompt has %d tokens but a %s model reads at most %d (e.g. '%s')", n,
                     t.name, t.len < T ? t.len : T, t.example);
            return -1;
        }
        for (int i = 0; i < n; i++)
            labels[i][0] = t.chars[ids[i]];
    }
    if (n == 0) {
        snprintf(err, errlen, "--prompt has no tokens");
        return -1;
    }
    for (int i = 0; i < n; i++)
        labels[i][1] = 0;
    return n;
}

/* Which heads: "all" = -1, one index in [0, H), or -2 when neither.  The
 * index is the whole token, as for every number (args.c): strtol would
 * skip leading white space. */
static int parse_head(const char *s, int H)
{
    if (strcmp(s, "all") == 0)
        return -1;
    char *end;
    long h = strtol(s, &end, 10);
    return isspace((unsigned char)s[0]) || end == s || *end || h < 0 || h >= H ? -2 : (int)h;
}

/* Long format, one weight per line, for checking a picture by its numbers. */
static void write_weights_csv(FILE *f, int layer, int h0, int nh, const float *w, int n)
{
    fprintf(f, "layer,head,query,key,weight\n");
    for (int p = 0; p < nh; p++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                fprintf(f, "%d,%d,%d,%d,%.9g\n", layer, h0 + p, i, j, (double)w[((size_t)p * n + i) * n + j]);
}

/* One drawing of attention weights: nh panels of n x n, with its labels. */
typedef struct attn_picture {
    int layer, h0, nh, n;
    float *w;                   /* [nh,n,n], row = query */
    const char **labels;        /* [n]: each token's character */
    char (*ptitle)[32];         /* [nh]: "head h" */
    const char **ptitles;
    char title[300];
} attn_picture;

/* The title: the model, its data, step and layer, or only the layer over a
 * small picture (few tokens, one head), where a long one would not fit. */
static void attn_title(attn_picture *p, const char *path, const ckpt *ck)
{
    const char *base = strrchr(path, '/');
    char step[32] = "?";
    if (ck->step >= 0)
        snprintf(step, sizeof step, "%ld", ck->step);
    if ((size_t)p->n * p->nh >= 20)
        snprintf(p->title, sizeof p->title, "%s (%s, step %s): layer %d attention", base ? base + 1 : path,
                 ck->data, step, p->layer);
    else
        snprintf(p->title, sizeof p->title, "layer %d", p->layer);
}

/* The picture's layer's weights [1,H,n,n] after softmax, from a forward
 * pass without dropout or gradients up to that layer (model_attention).
 * The picture's buffers are allocated here; -1 when memory runs out. */
static int attn_weights(attn_picture *p, model *m, const int32_t *ids, char (*labels)[2])
{
    size_t cells = (size_t)p->nh * p->n * p->n;
    ag_ctx *ctx = ag_ctx_new();
    ag_set_grad_enabled(ctx, 0);
    p->w = malloc(cells * sizeof *p->w);
    p->labels = malloc((size_t)p->n * sizeof *p->labels);
    p->ptitle = malloc((size_t)p->nh * sizeof *p->ptitle);
    p->ptitles = malloc((size_t)p->nh * sizeof *p->ptitles);
    int ok = p->w && p->labels && p->ptitle && p->ptitles;
    if (ok) {
        const ag_real *src = model_attention(ctx, m, ids, 1, p->n, p->layer)->data + (size_t)p->h0 * p->n * p->n;
        for (size_t k = 0; k < cells; k++)
            p->w[k] = (float)src[k];
        for (int i = 0; i < p->n; i++)
            p->labels[i] = labels[i];
        for (int q = 0; q < p->nh; q++) {
            snprintf(p->ptitle[q], sizeof p->ptitle[q], "head %d", p->h0 + q);
            p->ptitles[q] = p->ptitle[q];
        }
    }
    ag_ctx_free(ctx);
    return ok ? 0 : -1;
}

static void attn_picture_free(attn_picture *p)
{
    free(p->w);
    free(p->labels);
    free(p->ptitle);
    free(p->ptitles);
}

/* An SVG writer that failed: when the file could not be written (a full
 * disk, /dev/full), the commit says so naming the file, and removes the
 * temporary file; otherwise (bad arguments) the writer's message stands. */
static void abandon_output(ag_atomic_file *a, char *err, size_t errlen)
{
    if (a->f && ferror(a->f))
        ag_atomic_commit(a, err, errlen);       /* fails: the stream is in error */
    else
        ag_atomic_abort(a);
}

/* The CSV (when asked for) and the SVG appear together or not at all: both
 * are written, flushed, synced and closed (ag_atomic_ready) before either
 * is renamed into place, so a failure of either, the SVG's last, changes
 * neither file. */
static int write_attention(const attn_picture *p, const char *out, const char *csv, const char *title,
                           svg_cells cells, char *err, size_t errlen)
{
    ag_atomic_file *svg = &out_file, *tab = &csv_file;
    if (csv) {
        if (ag_atomic_open(tab, csv, err, errlen))
            return -1;
        write_weights_csv(tab->f, p->layer, p->h0, p->nh, p->w, p->n);
        if (ag_atomic_open(svg, out, err, errlen)) {
            ag_atomic_abort(tab);
            return -1;
        }
    } else if (ag_atomic_open(svg, out, err, errlen)) {
        return -1;
    }
    if (svg_attention(svg->f, title ? title : p->title, p->nh, p->ptitles, p->w, p->n, p->n, p->labels, p->labels,
                      cells, err, errlen)) {
        abandon_output(svg, err, errlen);
        if (csv)
            ag_atomic_abort(tab);
        return -1;
    }
    if ((csv && ag_atomic_ready(tab, err, errlen)) || ag_atomic_ready(svg, err, errlen)) {
        ag_atomic_abort(svg);           /* either may be gone already: abort leaves it */
        if (csv)
            ag_atomic_abort(tab);
        return -1;
    }
    if (csv && ag_atomic_commit(tab, err, errlen)) {
        ag_atomic_abort(svg);
        return -1;
    }
    return ag_atomic_commit(svg, err, errlen);
}

int cmd_attn(int argc, char **argv)
{
    const char *CMD = "attn", *prompt = NULL, *head_s = "all", *out = NULL, *csv = NULL, *title = NULL,
               *cells_s = "auto";
    saved_model a = { 0 };
    int layer = 0;
    opt opts[] = {
        { "--model", OPT_STRING, &a.path, "FILE", "checkpoint to look inside", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--prompt", OPT_STRING, &prompt, "STR", "text model: raw text; task model: tokens, e.g. abcdefgh|abcdefgh", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--layer", OPT_INT, &layer, "L", "block whose attention is drawn, from 0 (default 0)", 0, 1e6, 0, 0, 0 },
        { "--head", OPT_STRING, &head_s, "H", "a head index, or all: one panel per head (default all)", 0, 0, 0, 0, 0 },
        { "--out", OPT_STRING, &out, "FILE", "the SVG to write", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--csv", OPT_STRING, &csv, "FILE", "also write the weights as CSV: layer,head,query,key,weight", 0, 0, 0, 0, 0 },
        { "--title", OPT_STRING, &title, "STR", "picture title (default: the model, its data, step and layer; only 'layer L' when tokens x heads drawn < 20)", 0, 0, 0, 0, 0 },
        { "--cells", OPT_STRING, &cells_s, "HOW", "rects: one element and tooltip a cell; image: a pixel a cell, one image a panel "
                                                  "(4 bytes a cell, not ~140; no tooltips); auto: image past " STRINGIFY(SVG_RECT_CELLS_MAX) " cells (default auto)", 0, 0, 0, 0, 0 },
        SAVED_MODEL_OPTS(a),
    };
    args_parse(CMD, "Heatmap of the attention weights softmax(QK^T/sqrt(head size) + causal mask) a saved\n"
                    "model puts on a prompt: queries down, keys across, the prompt's characters on both axes,\n"
                    "one panel per head.  Masked (future) keys are hatched.  A task model reads at most L\n"
                    "tokens; a whole example of L + 1 is accepted and its last token (never read in training)\n"
                    "dropped.",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    svg_cells cells = SVG_CELLS_AUTO;
    if (strcmp(cells_s, "rects") == 0)
        cells = SVG_CELLS_RECTS;
    else if (strcmp(cells_s, "image") == 0)
        cells = SVG_CELLS_IMAGE;
    else if (strcmp(cells_s, "auto") != 0)
        die(CMD, "--cells '%s' is not a way to draw cells (use auto, rects or image)", cells_s);
    /* --text is read too (the vocabulary of a file that does not list it) */
    file_arg in[] = { { "--model", a.path }, { "--text", a.text } }, outs[] = { { "--out", out }, { "--csv", csv } };
    check_distinct(CMD, in, 2, outs, 2);
    track_outputs();
    ag_set_threads(a.threads);
    char err[ERR_MAX];
    ckpt ck;
    model m;
    open_saved(CMD, &a, OPEN_FORWARD_ONLY, &ck, &m);
    check_vocab_text(CMD, &ck, a.text);
    const model_config *c = &m.cfg;
    int H = c->n_head, head = -1, failed = 1;
    size_t plen = strlen(prompt) + 1;
    attn_picture p = { .layer = layer };
    int32_t *ids = malloc(plen * sizeof *ids);
    char(*labels)[2] = malloc(plen * sizeof *labels);
    if (!ids || !labels)
        snprintf(err, sizeof err, "out of memory");
    else if (layer >= c->n_layer)
        snprintf(err, sizeof err, "--layer %d: the model has %d layer%s (0..%d)", layer, c->n_layer,
                 c->n_layer == 1 ? "" : "s", c->n_layer - 1);
    else if ((head = parse_head(head_s, H)) < -1)
        snprintf(err, sizeof err, "--head '%s' is not 'all' or a head index in 0..%d", head_s, H - 1);
    else if ((p.n = encode_prompt(&ck, &m, prompt, ids, labels, err, sizeof err)) >= 0) {
        p.h0 = head < 0 ? 0 : head;
        p.nh = head < 0 ? H : 1;
        if (attn_weights(&p, &m, ids, labels))
            snprintf(err, sizeof err, "out of memory");
        else {
            double finite = 0;
            for (size_t k = 0; k < (size_t)p.nh * p.n * p.n; k++)
                finite += p.w[k] * 0;       /* NaN when a weight is not finite */
            refuse_overflow(CMD, a.path, finite, AG_FP32);
            attn_title(&p, a.path, &ck);
            failed = write_attention(&p, out, csv, title, cells, err, sizeof err);
        }
    }
    attn_picture_free(&p);
    free(labels);
    free(ids);
    model_free(&m);
    ckpt_close(&ck);
    if (failed)
        die(CMD, "%s", err);
    return 0;
}

/* ---- plot ---------------------------------------------------------------- */

int cmd_plot(int argc, char **argv)
{
    const char *CMD = "plot", *out = NULL, *title = NULL;
    opt_list logs = { { 0 }, 0 };
    opt opts[] = {
        { "--log", OPT_STRINGS, &logs, "FILE", "a CSV log from attograd train --log; repeat to compare runs", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--out", OPT_STRING, &out, "FILE", "the SVG to write", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--title", OPT_STRING, &title, "STR", "chart title (default: training loss)", 0, 0, 0, 0, 0 },
    };
    args_parse(CMD, "Train (solid) and validation (dashed) loss against the step, one color per log (seven\n"
                    "colors, then the first again), each named in the legend by its file name without .csv,\n"
                    "with as much of its directory as tells apart two logs of one name.",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    file_arg in[sizeof logs.items / sizeof logs.items[0]], outs[] = { { "--out", out } };
    for (int i = 0; i < logs.n; i++)
        in[i] = (file_arg){ "--log", logs.items[i] };
    check_distinct(CMD, in, logs.n, outs, 1);
    /* one log twice would draw one run as two, the second over the first */
    for (int i = 0; i < logs.n; i++)
        for (int k = 0; k < i; k++)
            if (files_same(logs.items[k], logs.items[i]))
                die(CMD, "--log %s is the same file as --log %s: give each log once", logs.items[i], logs.items[k]);
    track_outputs();
    char err[ERR_MAX];
    /* Read every log first so a bad one leaves no file behind.  A last row
     * cut short (a run killed, or a disk filled, while writing it) is left
     * out, as a resumed run drops it, and a line says so. */
    for (int i = 0; i < logs.n; i++) {
        svg_log lg;
        if (input_check(logs.items[i], "CSV log", TEXT_MAX_BYTES, err, sizeof err) ||
            svg_read_log(logs.items[i], &lg, err, sizeof err))
            die(CMD, "%s", err);
        int n = lg.n, drawn = 0;
        long cut = lg.cut_line;
        for (int k = 0; k < n; k++)
            drawn += isfinite(lg.train_loss[k]) || isfinite(lg.val_loss[k]);
        svg_log_free(&lg);
        if (n == 0 && cut)
            die(CMD, "%s:%ld: the only row is cut short (no newline at its end): no whole row to draw",
                logs.items[i], cut);
        if (n == 0)
            die(CMD, "%s: no rows after the header", logs.items[i]);
        if (drawn == 0)
            die(CMD, "%s: no row has a finite train or validation loss (%d row%s): nothing to draw", logs.items[i], n,
                n == 1 ? "" : "s");
        if (cut)
            warn(CMD, "%s:%ld: the last row is cut short (no newline at its end): left out", logs.items[i], cut);
    }
    if (ag_atomic_open(&out_file, out, err, sizeof err))
        die(CMD, "%s", err);
    if (svg_plot_logs(out_file.f, title, logs.n, logs.items, err, sizeof err)) {
        abandon_output(&out_file, err, sizeof err);
        die(CMD, "%s", err);
    }
    if (ag_atomic_commit(&out_file, err, sizeof err))
        die(CMD, "%s", err);
    return 0;
}

/* ---- graph --------------------------------------------------------------- */

/* --tokens' help: the range that scores something, for each task, from the
 * task table (the one graph checks against): a step needs the first target
 * of the answer, at its prompt's length, and holds at most the task's length. */
static const char *tokens_help(char *buf, size_t len)
{
    size_t u = (size_t)snprintf(buf, len, "tokens in the step (default: a task's length, else min(context, 8)); a "
                                "task's step scores its answer, so N runs from the prompt's length to the task's:");
    const char *names = task_names();
    while (*names && u < len) {
        char name[32];
        size_t n = strcspn(names, ", ");
        snprintf(name, sizeof name, "%.*s", (int)n, names);
        names += n + strspn(names + n, ", ");
        task t;
        if (task_open(&t, name, NULL, 0) == 0)
            u += (size_t)snprintf(buf + u, len - u, " %s %d to %d%s", t.name, t.prompt, t.len, *names ? "," : "");
    }
    return buf;
}

int cmd_graph(int argc, char **argv)
{
    const char *CMD = "graph", *out = NULL;
    saved_model a = { 0 };
    int tokens = 0;
    long seed = 1;
    char tokens_text[320];
    opt opts[] = {
        { "--model", OPT_STRING, &a.path, "FILE", "checkpoint whose training step is drawn", 0, 0, 0, OPT_REQUIRED, 0 },
        HEADS_OPT(a.heads),
        { "--out", OPT_STRING, &out, "FILE", "the DOT file to write; render with dot -Tsvg", 0, 0, 0, OPT_REQUIRED, 0 },
        { "--tokens", OPT_INT, &tokens, "N", tokens_help(tokens_text, sizeof tokens_text), 1, 1e6, 0, 0, 0 },
        { "--seed", OPT_LONG, &seed, "S", "task models: seed of the problem drawn as input (default 1; a text model reads tokens 0, 1, 2, ...)", 0, 9.2e18, 0, 0, 0 },
    };
    args_parse(CMD, "The autograd graph of one training step (the forward pass, with dropout as in training,\n"
                    "and the cross-entropy loss on a batch of 1 sequence) in Graphviz DOT: one node per op\n"
                    "with its output shape, edges from its inputs, parameters as filled boxes, other inputs\n"
                    "as ellipses.  Render it with: dot -Tsvg FILE.dot -o FILE.svg",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    file_arg in[] = { { "--model", a.path } }, outs[] = { { "--out", out } };
    check_distinct(CMD, in, 1, outs, 1);
    check_stdout_apart(CMD, in, 1);     /* its line would go into the model */
    track_outputs();
    char err[ERR_MAX];
    ckpt ck;
    model m;
    open_saved(CMD, &a, OPEN_DATA_OPTIONAL, &ck, &m);
    if ((!ck.data || strcmp(ck.data, "text") == 0) &&
        args_find(opts, (int)(sizeof opts / sizeof opts[0]), "--seed")->given) {
        const char *kind = ck.data ? "text" : "data-less";
        model_free(&m);
        ckpt_close(&ck);
        die(CMD, "--seed applies to task models, whose step reads a problem drawn with it: a %s model's step reads "
                 "the tokens 0, 1, 2, ... of its vocabulary", kind);
    }
    int32_t *x = NULL, *y = NULL;
    ag_ctx *ctx = NULL;
    double value = 0;                       /* the loss; not finite: weights that overflow, nothing written */
    int room = 0, failed = 1, n = example_input(ck.data, &m, tokens, (uint64_t)seed, &x, &y, &room, err, sizeof err);
    if (n < 0 && tokens > room) {
        model_free(&m);
        ckpt_close(&ck);
        die(CMD, "--tokens: %s", err);
    }
    int first = 0;                          /* tokens up to the first scored target */
    while (n >= 0 && first < room && y[first] < 0)
        first++;
    if (n >= 0 && n <= first) {
        /* a task scores only its answer: a prompt cut before it has no loss,
         * so there is no training step to draw */
        char some[32];
        snprintf(some, sizeof some, n == 1 ? "token predicts" : "%d tokens predict", n);
        snprintf(err, sizeof err, "--tokens %d: the %s task scores only the answer, and the first %s none of it: "
                 "give --tokens %d to %d", n, ck.data, some, first + 1, room);
        free(x);
        model_free(&m);
        ckpt_close(&ck);
        die(CMD, "%s", err);
    }
    if (n >= 0) {
        int scored = 0;
        for (int i = 0; i < n; i++)
            scored += y[i] >= 0;
        ctx = ag_ctx_new();
        ag_set_threads(1);   /* one short sequence: threads would only add overhead */
        step_rows rows = { x, y, 1, n, 1, NULL };
        ag_tensor *loss = step_loss(ctx, &m, &rows);             /* the graph a training step differentiates */
        value = (double)loss->data[0];
        if (isfinite(value) && ag_atomic_open(&out_file, out, err, sizeof err) == 0) {
            ag_graph_dot(ctx, loss, out_file.f);
            failed = ag_atomic_commit(&out_file, err, sizeof err);
        }
        if (!failed)
            fprintf(report_stream(), "%s: %d ops; loss %.4f over %d scored of %d token%s\n", out,
                    ag_tape_length(ctx), value, scored, n, n == 1 ? "" : "s");
    }
    free(x);
    if (ctx)
        ag_ctx_free(ctx);
    model_free(&m);
    ckpt_close(&ck);
    refuse_overflow(CMD, a.path, value, AG_FP32);
    if (failed)
        die(CMD, "%s", err);
    return 0;
}
