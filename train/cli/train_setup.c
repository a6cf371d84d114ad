/*
 * train_setup.c - a run's data, model and optimizer, built from its options
 * and, with --init or --resume, from a checkpoint; and the configuration
 * printed at the start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "files.h"
#include "svg.h"
#include "train.h"

static const char *CMD = "train";

enum { STREAM_INIT = 1, STREAM_DROPOUT = 2, STREAM_DATA = 3 };

/* The task or text to train on; with a checkpoint, read with its vocabulary. */
static void open_data(trainer *t)
{
    const train_opts *o = &t->o;
    const ckpt *ck = &t->ck;
    char err[ERR_MAX];
    if (o->task ? dataset_open_task(&t->data, o->task, (uint64_t)o->seed, err, sizeof err)
                : open_text(&t->data, o->text, t->from ? ck->vocab : NULL, t->from ? ck->vocab_size : 0,
                            err, sizeof err))
        die(CMD, "%s", err);
    t->vocab_size = dataset_vocab_size(&t->data);
    for (int i = 0; i < t->vocab_size; i++)
        t->vocab[i] = t->data.is_task ? (uint8_t)t->data.task.chars[i] : t->data.text.vocab[i];
    if (t->from && (t->vocab_size != ck->vocab_size || memcmp(t->vocab, ck->vocab, (size_t)t->vocab_size) != 0))
        die(CMD, "%s: its vocabulary does not match %s %s", t->from, o->task ? "task" : "text",
            o->task ? o->task : o->text);
    if (o->accept_changed_data && t->data.is_task)
        die(CMD, "--accept-changed-data applies to a run on a text file: a %s run draws its problems from the task",
            t->data.task.name);
    if (o->resume && !t->data.is_task && !o->accept_changed_data) {
        /* the recorded file changed, or --text named another: each says what
         * is true and how to go on */
        const char *trained = ckpt_meta(ck, "text_path");
        struct stat st;
        int same = is_training_file(ck, o->text);
        if (text_check_unchanged(ck, &t->data.text, same, err, sizeof err) == 0)
            return;
        if (same)
            die(CMD, "%s; --accept-changed-data resumes on it as it is now", err);
        if (trained && stat(trained, &st) == 0)
            die(CMD, "%s; leave out --text to resume on that file, or add --accept-changed-data to go on with %s", err,
                o->text);
        die(CMD, "%s; %s is no longer there: give that text with --text FILE, or add --accept-changed-data to go on "
                 "with %s", err, trained ? trained : "it", o->text);
    }
}

/* A resumed run given the run's --log again continues it from the
 * checkpoint's step.  Whole rows logged after that step are not dropped
 * unless --truncate-log says so: a run killed after its last save wrote
 * them, or the run of a copy of the checkpoint, which logs where its
 * original does (cp a.st b.st, a.st trained on, b.st resumed: a's later
 * rows would be lost); the file cannot tell which, so the resume is
 * refused, naming them and the ways on (another --log, or --truncate-log).
 * Dropped, they go first (the file replaced whole), so no step appears
 * twice, and so does a last row cut short (svg_log_row_cut, as `plot` sees it: no
 * newline, a write that a full disk stopped part way), which the next row
 * would otherwise continue ("260" and "401,..." make a row of step 260401);
 * a line says so.  The header stays as it was, byte-order mark and all
 * (svg_log_is_header), given a newline when it is the whole log and has
 * none (a header written again would lose the mark).  Which lines go is svg.c's (svg_log_resume_scan,
 * svg_log_resume_copy).  A log with no such rows is
 * left as it is, not replaced: a run resumed at its last step in a
 * directory it cannot write (where a replacement's temporary file cannot
 * be made) has nothing to drop.  A log that is not a regular file (a pipe,
 * a device) is only appended to.
 * Returns the line number of a last row cut short that was dropped, else 0,
 * and in *dropped the whole rows past step that --truncate-log dropped. */
static long log_drop_after(const char *path, long step, const char *from, int truncate, long *dropped)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    FILE *in = fopen(path, "r");
    if (!in)
        return 0;                       /* opening it to append says why */
    char err[ERR_MAX];
    long cut = 0;
    if (svg_log_resume_scan(in, step, &cut) != 1 || fseek(in, 0, SEEK_SET) != 0) {
        fclose(in);
        return 0;                       /* nothing to drop, or a read error: opening it to append says why */
    }
    double last;
    long rows = svg_log_rows_after(in, step, &last);
    if (rows > 0 && !truncate) {
        fclose(in);
        die(CMD, "log %s holds %ld row%s past step %ld, %s's (to step %.0f), logged after it was saved (by its run "
                 "before it stopped, or by the run of a copy of it); continuing the log would drop %s: give --log "
                 "FILE to log the rest of the run in another file, or --truncate-log to drop %s",
            path, rows, rows == 1 ? "" : "s", step, from, last, rows == 1 ? "it" : "them", rows == 1 ? "it" : "them");
    }
    if (fseek(in, 0, SEEK_SET) != 0) {
        fclose(in);
        return 0;
    }
    static ag_atomic_file out;          /* tracked: a signal meanwhile removes its temporary file */
    output_track(&out);
    if (ag_atomic_open(&out, path, err, sizeof err)) {
        fclose(in);
        die(CMD, "%s", err);
    }
    int failed = svg_log_resume_copy(in, out.f, step) != 0;
    fclose(in);
    if (failed) {                       /* a log read in part is not to replace the whole */
        ag_atomic_abort(&out);
        die(CMD, "cannot read log %s: %s", path, strerror(errno ? errno : EIO));
    }
    if (ag_atomic_commit(&out, err, sizeof err))
        die(CMD, "%s", err);
    *dropped = rows > 0 ? rows : 0;
    return cut;
}

/* A log a resumed run is to append to must be one: a file whose first line
 * is not the header (something else named by --log, or put where the run's
 * log was) is refused, not given rows it would hold as neither. */
static void check_log_to_continue(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
        return;
    FILE *in = fopen(path, "r");
    if (!in)
        return;                         /* opening it to append says why */
    int ok = svg_log_starts_with_header(in);    /* as `plot` reads it */
    fclose(in);
    if (!ok)
        die(CMD, "--log %s does not begin with a training log's header line (%.4s...), so it is no log to "
                 "continue: give --log with a new file or a log of this run", path, SVG_LOG_HEADER);
}

/* The model's config: the flags', or the checkpoint's architecture (and,
 * with --resume, all of it; --init takes dropout and a context no longer
 * than the saved one from the flags). */
static model_config model_config_of(trainer *t)
{
    const train_opts *o = &t->o;
    if (t->from) {
        model_config c = t->ck.cfg;
        if (o->init) {
            c.dropout = o->dropout;
            if (o->context)
                c.context = o->context;
        }
        return c;
    }
    model_config c = { model_arch_parse(o->arch), t->vocab_size, o->layers, o->heads, o->d_model, o->context,
                       o->qkv_bias, o->dropout };
    if (!c.context)
        c.context = t->data.is_task ? t->data.task.len : 64;
    return c;
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

/* Memory a run of B x T batches needs (see model_train_bytes), with a
 * checkpoint read for --init or --resume still loaded, and a text's token
 * ids (4 bytes a byte of the file: a 9 MB text holds 36 MB of them). */
static double run_bytes(const trainer *t, const model_config *c, int B, int T)
{
    const int moments = t->adamw ? 2 : 1;
    double loaded = t->from ? model_param_count(c) * sizeof(float) * (1 + (t->o.resume ? moments : 0)) : 0;
    double text = t->data.is_task ? 0 : (double)t->data.text.n * sizeof *t->data.text.tokens;
    return model_train_bytes(c, B, T, moments, t->precision == AG_BF16) + loaded + text;
}

/* The largest n in [1, hi] with fits(n) (memory grows with n), or 0. */
static int largest_fitting(const trainer *t, const model_config *c, int hi, int vary_batch, double budget)
{
    int lo = 0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        double need = vary_batch ? run_bytes(t, c, mid, t->S) : run_bytes(t, c, t->B, mid);
        if (need <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* A run that cannot fit is refused before anything big is allocated,
 * naming the largest batch (and, for text, context) that would fit. */
static void check_memory(trainer *t, const model_config *c)
{
    double need = run_bytes(t, c, t->B, t->S), have = physical_memory(), budget = 0.8 * have;
    t->estimate = need;
    if (need <= budget)
        return;
    int b = largest_fitting(t, c, t->B, 1, budget), ctx = t->data.is_task ? 0 : largest_fitting(t, c, t->S, 0, budget);
    char fits[128];
    if (b == 0 && ctx == 0)
        snprintf(fits, sizeof fits, "not even --batch 1 fits: reduce --d-model or --layers");
    else if (ctx == 0)
        snprintf(fits, sizeof fits, "--batch %d would fit", b);
    else if (b == 0)
        snprintf(fits, sizeof fits, "--context %d would fit at --batch %d", ctx, t->B);
    else
        snprintf(fits, sizeof fits, "--batch %d would fit, or --context %d at --batch %d", b, ctx, t->B);
    double state = model_param_count(c) * sizeof(ag_real) * (2 + (t->adamw ? 2 : 1));
    die(CMD, "this run needs about %.1f GB (%.1f GB for parameters, gradients and optimizer state) for a %d x %d "
             "batch, but the machine has %.1f GB (80%% of it usable): %s", need / 1e9, state / 1e9, t->B, t->S,
        have / 1e9, fits);
}

static void print_config(const trainer *t)
{
    FILE *out = report_stream();
    const train_opts *o = &t->o;
    const model_config *c = &t->m.cfg;
    const dataset *d = &t->data;
    char buf[32];
    /* the text's path as messages show it: on a resume, the one the
     * checkpoint records, which may hold a newline or an escape */
    static char text[SHOWN_MAX];
    path_shown(o->text, text, sizeof text);
    fprintf(out, "attograd train: %s %s, %d layer%s, %d head%s, d_model %d, context %d%s, dropout %g\n",
            d->is_task ? "task" : "text", d->is_task ? d->task.name : text, c->n_layer,
            c->n_layer == 1 ? "" : "s", c->n_head, c->n_head == 1 ? "" : "s", c->d_model, c->context,
            c->qkv_bias ? ", qkv bias" : "", c->dropout);
    fprintf(out, "  model      %s, vocab %d, %s parameters (%zu)\n", model_arch_name(c->arch), c->vocab_size,
            human((double)t->m.params->total, buf, sizeof buf), t->m.params->total);
    if (!t->adamw)
        fprintf(out, "  optimizer  sgd, lr %g, momentum %g, weight decay %g", o->lr, o->momentum, o->weight_decay);
    else
        fprintf(out, "  optimizer  adamw, lr %g, betas (%g, %g), eps %g, weight decay %g", o->lr, o->beta1, o->beta2,
                o->eps, o->weight_decay);
    fprintf(out, ", clip %s, schedule %s", o->clip > 0 ? (snprintf(buf, sizeof buf, "%g", o->clip), buf) : "off",
            o->schedule);
    if (t->cosine)
        fprintf(out, " (warmup %ld, min lr %g)", o->warmup, o->min_lr);
    const char *bf16_kernel = "";
    if (t->precision == AG_BF16)
        ag_bf16_status(&bf16_kernel);       /* ready (checked with the options): the kernel that runs */
    fprintf(out,
            "\n  run        %ld step%s, batch %d, seed %" PRId64 ", %d thread%s, order %s, %s precision%s%s%s, %s kernels\n",
            o->steps, o->steps == 1 ? "" : "s", o->batch, o->seed, ag_get_threads(), ag_get_threads() == 1 ? "" : "s", o->order,
            AG_PRECISION_NAME, t->precision == AG_BF16 ? " with bf16 matrix multiplies (" : "", bf16_kernel,
            t->precision == AG_BF16 ? " kernel)" : "", ag_kernels_name());
    if (d->is_task)
        fprintf(out, "  data       %s: %d tokens per example, %d held-out problems never trained on\n", d->task.name,
                d->task.len + 1, d->n_heldout);
    else {
        size_t windows = text_eval_windows(d->text.n - d->text.n_train, c->context);
        fprintf(out, "  data       %s: %zu tokens, %zu train / %zu validation (%zu window%s of %d; evaluations during "
                "training score the first %zu, the last one all)\n", text, d->text.n, d->text.n_train,
                d->text.n - d->text.n_train, windows, windows == 1 ? "" : "s", c->context,
                windows < TRAIN_EVAL_WINDOWS ? windows : (size_t)TRAIN_EVAL_WINDOWS);
    }
    if (t->from && t->ck.step >= 0)
        fprintf(out, "  %s %s at step %ld\n", o->resume ? "resuming" : "initialized from", t->from, t->ck.step);
    else if (t->from)
        fprintf(out, "  %s %s at step unknown\n", o->resume ? "resuming" : "initialized from", t->from);
    report_flush();
}

/* A resumed cosine run asked to go past the end of its schedule: one line. */
static void say_extension(const train_opts *o, int cosine)
{
    FILE *out = report_stream();
    if (cosine && o->steps > o->schedule_steps) {
        fprintf(out, "  schedule   the cosine schedule ends at step %ld, the run's first --steps; steps %ld to %ld "
                "continue at --min-lr %g\n", o->schedule_steps, o->schedule_steps + 1, o->steps, o->min_lr);
        report_flush();
    }
}

void train_setup(trainer *t)
{
    train_opts *o = &t->o;
    t->start = o->resume ? t->ck.step : 0;
    ag_set_threads(o->threads);

    open_data(t);
    model_config cfg = model_config_of(t);
    char err[ERR_MAX];
    if (t->data.is_task ? task_check_context(&t->data.task, cfg.context, err, sizeof err)
                        : text_check_context(&t->data.text, cfg.context, 1, err, sizeof err))
        die(CMD, "%s", err);
    t->B = o->batch;
    t->S = dataset_seq_len(&t->data, cfg.context);
    check_memory(t, &cfg);

    /* the model (already loaded from a checkpoint), the optimizer, the generators */
    ag_pcg32 init_rng;
    ag_pcg32_seed(&init_rng, (uint64_t)o->seed, STREAM_INIT);
    ag_pcg32_seed(&t->data_rng, (uint64_t)o->seed, STREAM_DATA);
    if (!t->from) {
        model_build(&t->m, &cfg);
        model_init(&t->m, &init_rng);
    } else if (cfg.context != t->m.cfg.context || cfg.dropout != t->m.cfg.dropout) {
        model saved = t->m;                 /* --init with another context or dropout */
        model_build(&t->m, &cfg);
        model_copy_weights(&t->m, &saved);
        model_free(&saved);
    }
    t->ctx = ag_ctx_new();
    ag_set_precision(t->ctx, t->precision);     /* available: checked with the options */
    ag_pcg32_seed(ag_dropout_rng(t->ctx), (uint64_t)o->seed, STREAM_DROPOUT);
    t->optim = t->adamw ? ag_optim_adamw(t->m.params, o->beta1, o->beta2, o->eps, o->weight_decay)
                        : ag_optim_sgd(t->m.params, o->momentum, o->weight_decay);
    if (o->resume)
        ckpt_load_state(&t->ck, t->optim, &t->data_rng, ag_dropout_rng(t->ctx));
    /* the file's moments (copied, or unused by --init) are not held through
     * the run; its metadata, which the options point into, is */
    if (t->from)
        ckpt_drop_tensors(&t->ck);
    train_dist_check(t);                /* the ranks were given the same run (train_dist.c) */

    int stream = o->log_path ? ag_stream_fd(o->log_path) : -1, log_restarted = 0;
    long log_cut = 0, log_dropped = 0;
    if (stream >= 0) {
        /* one of the process's own descriptors (--log /dev/stdout): the rows
         * go where it stands, after a header; it has no earlier rows to drop */
        if (!(t->log = ag_stream_open(stream, o->log_path, err, sizeof err)))
            die(CMD, "cannot write log %s", err);
        fprintf(t->log, "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n");
    } else if (o->log_path) {
        struct stat st;
        if (o->resume && stat(o->log_path, &st) != 0)   /* moved or deleted since: start it again */
            log_restarted = 1;
        else if (o->resume) {
            check_log_to_continue(o->log_path);
            log_cut = log_drop_after(o->log_path, t->ck.step, o->resume, o->truncate_log, &log_dropped);
        }
        /* a resumed run with no steps to take adds no row to a log that
         * holds its header: it is not opened, and may be read-only as the
         * checkpoint left as it was may be */
        int nothing_to_add = o->resume && t->ck.step == o->steps && stat(o->log_path, &st) == 0 &&
                             S_ISREG(st.st_mode) && st.st_size > 0;
        if (!nothing_to_add && !(t->log = fopen(o->log_path, o->resume ? "a" : "w"))) {
            int e = errno;
            /* the log a resumed run continues where the checkpoint names
             * it: its directory gone, the way on is another --log */
            const char *recorded = o->resume ? ckpt_meta(&t->ck, "log_path") : NULL;
            /* open(2) gives a socket ENXIO, "No such device or address" */
            const char *why = stat(o->log_path, &st) == 0 && S_ISSOCK(st.st_mode)
                                  ? "a socket, which is not written as a file" : strerror(e);
            if (recorded && strcmp(recorded, o->log_path) == 0)
                die(CMD, "cannot write log %s, the run's log the checkpoint names: %s; give --log FILE to continue "
                         "it elsewhere", o->log_path, why);
            die(CMD, "cannot write log %s: %s", o->log_path, why);
        }
        if (t->log && (!o->resume || ftell(t->log) == 0))
            fprintf(t->log, "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n");
    }
    if (!o->quiet)
        print_config(t);
    static char log_shown[SHOWN_MAX];     /* the log as messages show it (its path may be the checkpoint's) */
    path_shown(o->log_path, log_shown, sizeof log_shown);
    if (log_restarted) {    /* after the configuration, among its lines */
        /* the checkpoint's log, gone; its path as written by hand or by
         * another program, relative, which is taken from the current
         * directory as the page's bare text name is (README); or a --log
         * given for the rest of the run, new */
        const char *recorded = ckpt_meta(&t->ck, "log_path");
        const char *what = !recorded || strcmp(recorded, o->log_path) != 0 ? "is a new file"
                           : recorded[0] != '/' ? "(the checkpoint's log_path, relative: taken from the current "
                                                  "directory) does not exist"
                                                : "no longer exists";
        fprintf(report_stream(), "  log        %s %s: a new log starts at step %ld\n", log_shown, what,
                t->ck.step + 1);
    }
    if (log_dropped)
        fprintf(report_stream(), "  log        %s: %ld row%s past step %ld dropped (--truncate-log)\n", log_shown,
                log_dropped, log_dropped == 1 ? "" : "s", t->ck.step);
    if (log_cut)
        fprintf(report_stream(), "  log        %s:%ld: the last row was cut short (no newline at its end): dropped\n",
                log_shown, log_cut);
    say_extension(o, t->cosine);
    t->x = malloc((size_t)t->B * t->S * sizeof *t->x);
    t->y = malloc((size_t)t->B * t->S * sizeof *t->y);
    if (!t->x || !t->y)
        die(CMD, "out of memory for a batch of %d x %d tokens", t->B, t->S);
}

void train_free(trainer *t)
{
    if (t->log)
        fclose(t->log);
    free(t->x);
    free(t->y);
    ag_optim_free(t->optim);
    ag_ctx_free(t->ctx);
    model_free(&t->m);
    dataset_free(&t->data);
    if (t->from)
        ckpt_close(&t->ck);
}
