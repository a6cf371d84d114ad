/*
 * train_loop.c - the training loop: one step per batch (train/model/step.c),
 * and around it the learning-rate schedule, progress lines, the CSV log,
 * evaluations, checkpoints, divergence and signals.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "args.h"
#include "dist.h"
#include "files.h"
#include "meter.h"
#include "train.h"

/* SIGINT, SIGTERM, SIGHUP (a closed terminal), SIGUSR2 and SIGALRM (a
 * scheduler's or `timeout -s`'s warning before a kill; on_stop_signals):
 * the first one lets the current step finish (and the run save, with
 * --save), or, during an
 * evaluation, the group of windows or problems being scored (the
 * evaluation is cut short: the step it follows is saved); a second SIGINT
 * leaves at once, and a checkpoint being written then is not: its temporary
 * file is removed and the file it would have replaced stays as it was. */
static volatile sig_atomic_t stop_signal;
static ag_atomic_file checkpoint_out;   /* the checkpoint being written, if any */
static const char *save_name;           /* --save as given, for the message */

/* SIGUSR1 (a scheduler's warning before a time limit, or a user wanting a
 * snapshot): save after the current step, as --save-every would, and go
 * on.  The handler only counts; the loop saves when the count any rank has
 * seen grows, so several in one step give one save, and one that comes
 * while a checkpoint is written waits for the step after.  SA_RESTART: a
 * checkpoint being written to a pipe is not cut short by it. */
static volatile sig_atomic_t save_signals;

static void on_save_signal(int sig)
{
    (void)sig;
    if (save_signals < SIG_ATOMIC_MAX)
        save_signals++;
}

void train_watch_save_signal(void) { on_signal_restarting(SIGUSR1, on_save_signal); }

static void say(const char *s)
{
    ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
    (void)ignored;
}

static void on_signal(int sig)
{
    if (!stop_signal || sig != SIGINT) {
        stop_signal = sig;
        return;
    }
    /* a second SIGINT: leave now */
    int undone = outputs_discard();
    if (undone < 0) {
        say("attograd train: interrupted again: leaving at once\n");
    } else if (undone) {
        say("attograd train: interrupted again while saving: ");
        say(save_name);
        say(access(checkpoint_out.path, F_OK) == 0 ? " was not written; the previous checkpoint is kept\n"
                                                   : " was not written\n");
    } else {
        say("attograd train: interrupted again after saving: ");
        say(save_name);
        say(" is written\n");
    }
    _exit(130);
}

/* Whether progress can still be printed (on stdout, or where report_stream
 * sends it).  Output to a closed pipe or a hung-up terminal fails (SIGPIPE
 * is ignored, see cmd_train): from then on the run prints nothing more
 * there, and trains and saves as before. */
static int stdout_open(void)
{
    static int closed;
    if (!closed && report_flush() != 0) {
        closed = 1;
        /* closed (a pipe's reader gone, >&-, a hung-up terminal), or it
         * failed otherwise (>/dev/full, a full disk): said as such */
        int e = report_errno();
        if (e == EPIPE || e == EBADF || e == EIO)
            fprintf(stderr, "attograd train: standard output is closed; training goes on without progress lines\n");
        else
            fprintf(stderr, "attograd train: cannot write standard output: %s; training goes on without progress "
                            "lines\n", strerror(e));
    }
    return !closed;
}

/* Push the log's rows to its file.  A write that fails (a full disk, a
 * device like /dev/full) is said once, in one line; the run goes on without
 * the log, saves as before, and exits 1: the log asked for is incomplete. */
static void log_flush(trainer *t)
{
    if (!t->log || (fflush(t->log) == 0 && !ferror(t->log)))
        return;
    warn("train", "cannot write log %s: %s; training goes on without it", t->o.log_path, strerror(errno ? errno : EIO));
    fclose(t->log);
    t->log = NULL;
    t->log_failed = 1;
}

/* The process's peak resident memory so far. */
static double peak_rss_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0;   /* kilobytes on Linux */
}

/* One optimizer step on the batch of `step` (0-based).  When the ranks
 * lose each other in it (dist_lost()), nothing is updated: the state is
 * still the last step's. */
static step_result train_step(trainer *t, long step, double lr)
{
    if (t->mb) {                                                    /* micro-batches, any ranks */
        double loss = train_dist_gradient(t, step);
        if (dist_lost())
            return (step_result){ loss, STEP_OK, NULL };
        return step_update(t->m.params, t->optim, loss, t->o.clip, lr);
    }
    dataset_batch(&t->data, t->random_order, &t->data_rng, step, t->B, t->S, t->x, t->y);  /* x, y: [B,S] */
    step_rows batch = { t->x, t->y, t->B, t->S, 1, NULL };
    return step_take(t->ctx, &t->m, t->optim, &batch, t->o.clip, lr);
}

static void report_divergence(const trainer *t, long step, step_result r, int saved)
{
    /* what --save holds now: this run's last checkpoint, the file it
     * started from (--resume), one that was there before, or nothing */
    char kept[64 + PATH_MAX] = "";
    if (t->o.save && (saved || (t->o.resume && strcmp(t->o.save, t->o.resume) == 0)))
        snprintf(kept, sizeof kept, "; the last saved checkpoint is kept");
    else if (t->o.save && access(t->o.save, F_OK) != 0)
        snprintf(kept, sizeof kept, "; %s was not written", t->o.save);
    else if (t->o.save)
        snprintf(kept, sizeof kept, "; %s is left as it was", t->o.save);
    const char *advice = t->o.clip > 0 ? "lower --lr or --clip" : "lower --lr or use --clip";
    char loss[32];
    snprintf(loss, sizeof loss, isnan(r.loss) ? "NaN" : "%g", r.loss);    /* not "-nan" */
    if (r.status == STEP_BAD_GRAD)
        fprintf(stderr, "attograd train: the gradient of %s is not finite at step %ld; stopping without saving "
                        "(%s)%s\n", r.bad->name, step + 1, advice, kept);
    else if (r.status == STEP_BAD_LOSS)
        fprintf(stderr, "attograd train: loss is %s at step %ld; stopping without saving (%s)%s\n", loss, step + 1,
                advice, kept);
    else
        fprintf(stderr, "attograd train: the update at step %ld made %s not finite; stopping without saving "
                        "(%s)%s\n", step + 1, r.bad->name, advice, kept);
}

/* Write the checkpoint: 0, or -1 with err. */
static int write_checkpoint(trainer *t, long step, char *err, size_t errlen)
{
    ckpt_state state = { t->optim, &t->data_rng, ag_dropout_rng(t->ctx), t->record.kv, t->record.n };
    const char *data_name = t->data.is_task ? t->data.task.name : "text";
    return ckpt_save(&checkpoint_out, t->o.save, &t->m, data_name, t->vocab, t->vocab_size, step, &state, err,
                     errlen);
}

/* Write the checkpoint and, when told to, say so. */
static int save(trainer *t, long step, int announce)
{
    FILE *out = report_stream();
    char err[ERR_MAX];
    if (write_checkpoint(t, step, err, sizeof err)) {
        warn("train", "%s", err);
        return -1;
    }
    if (announce && stdout_open()) {
        fprintf(out, "saved %s (step %ld)\n", t->o.save, step);
        report_flush();
    }
    return 0;
}

/* The save SIGUSR1 asked for, after step `done` (saved_now: --save-every
 * has just written it), said in one line on stderr; 1 when the checkpoint
 * holds that step.  No file to save to, or a save that fails, is said, and
 * the run goes on: the signal never ends it.  Ranks above 0 have no --save
 * (rank 0 writes) and say nothing. */
static int save_on_signal(trainer *t, long done, int saved_now)
{
    char err[ERR_MAX];
    if (!t->o.save) {
        if (!t->fault_save)
            warn("train", "SIGUSR1: nothing to save to (no --save FILE); training goes on");
        return 0;
    }
    if (!saved_now && write_checkpoint(t, done, err, sizeof err)) {
        warn("train", "SIGUSR1: not saved: %s; training goes on", err);
        return 0;
    }
    warn("train", "SIGUSR1: saved %s (step %ld); training goes on", t->o.save, done);
    return 1;
}

/* The ranks have lost each other (dist.h) and this one has given up; it
 * holds the state after step `completed`, as every rank that completed it
 * does.  The lowest-numbered rank still running saves it (each side of a
 * cut network has one) and says what happened in one line (in_eval: in
 * the evaluation after that step, else during the next step); the others
 * wait until it has, then leave quietly.  A run that completed no step
 * saves nothing: --save is left as it was.  Returns the exit status. */
static int save_after_fault(trainer *t, long completed, int in_eval)
{
    int status = stop_signal ? 128 + stop_signal : DIST_LOST;
    if (!dist_lowest_alive()) {
        dist_await_saver();
        return status;
    }
    dist_saving();
    const char *path = t->fault_save;
    char when[64];
    snprintf(when, sizeof when, in_eval ? "during the evaluation at step %ld" : "during step %ld",
             in_eval ? completed : completed + 1);
    if (completed == t->start) {
        /* no step taken: the state is the one the run started from (the
         * --resume file holds it, or the seed makes it again), and --save
         * may hold another run's work, which an untrained model must not
         * replace */
        dist_say("%s %s; no step was completed, so nothing is saved%s%s%s", dist_lost_reason(), when,
                 path ? " (" : "", path ? path : "", path ? " is left as it was)" : "");
    } else if (!path) {
        dist_say("%s %s; no --save, so the %ld steps taken are lost", dist_lost_reason(), when, completed - t->start);
    } else if (dist_rank() > 0 && ag_stream_fd(path) >= 0) {
        /* /dev/stdout, /dev/fd/N: rank 0's descriptor; this rank's goes nowhere (dist.h) */
        dist_say("%s %s; --save %s is rank 0's own stream, which this rank cannot write, so the %ld steps taken "
                 "are lost", dist_lost_reason(), when, path, completed - t->start);
    } else {
        t->o.save = path;
        char err[ERR_MAX];
        if (write_checkpoint(t, completed, err, sizeof err)) {
            /* in this line: the standard error of a rank above 0 goes nowhere (dist.h) */
            dist_say("%s %s; not saved: %s", dist_lost_reason(), when, err);
            status = 1;
        } else {
            dist_say("%s %s: saved %s at step %ld, the last step completed (train --resume %s goes on)",
                     dist_lost_reason(), when, path, completed, path);
        }
    }
    dist_saver_done();
    return status;
}

static const char *stop_words(int sig)
{
    return sig == SIGINT ? "interrupted" : sig == SIGHUP ? "hung up" : sig == SIGUSR2 ? "SIGUSR2"
           : sig == SIGALRM ? "SIGALRM" : "terminated";
}

static void progress_bar(long step, long total, double loss, double elapsed, long done)
{
    FILE *out = report_stream();
    int width = 30, filled = total ? (int)(width * step / total) : width;
    double eta = done > 0 ? elapsed / (double)done * (double)(total - step) : 0;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    fprintf(out, "\r[%s] %ld/%ld  loss %.4f  ETA %.0fs   ", bar, step, total, loss, eta);
    report_flush();
}

/* An evaluation of the run.  One that scores everything (max_windows 0,
 * the last: every window of the validation split, or every held-out
 * problem) draws its progress on a terminal: on a large text it is long.
 * A stop signal cuts it short (every rank at the same group): ev.stopped. */
static eval_result evaluate_run(trainer *t, long max_windows)
{
    meter mt;
    meter_start(&mt, stderr, max_windows == 0 && !t->o.quiet, "evaluating",
                t->data.is_task ? "problems" : "windows");
    const eval_progress progress = { meter_tick, &mt, &stop_signal };
    eval_result ev = train_evaluate(t, max_windows, &progress);
    meter_end(&mt);
    return ev;
}

/* Progress between log lines: time and steps since the last one. */
typedef struct progress {
    double t_start, t_mark;
    long mark_step;
    int tty;
    eval_result final;          /* the last step's full evaluation, for the summary */
    int have_final;
} progress;

/* A progress line (and CSV row) every --log-every steps, an evaluation
 * every --eval-every steps, and both at the last step.  Returns 1 when a
 * stop signal cut the evaluation short: the line and the row are then
 * those of a step without one (no validation loss), as --log-every has
 * them, or none. */
static int report(trainer *t, progress *p, long done, double loss, double lr)
{
    FILE *out = report_stream();
    const train_opts *o = &t->o;
    int log_now = done % o->log_every == 0 || done == o->steps;
    int eval_now = (o->eval_every > 0 && done % o->eval_every == 0) || done == o->steps;
    if (!log_now && !eval_now) {
        if (p->tty && done % 5 == 0 && stdout_open())
            progress_bar(done, o->steps, loss, now_seconds() - p->t_start, done - t->start);
        return 0;
    }
    double ms = 1e3 * (now_seconds() - p->t_mark) / (double)(done - p->mark_step);
    double tps = (double)t->B * t->S / (ms / 1e3);
    eval_result ev = { NAN, 0, 0, 0 };
    if (eval_now)
        ev = evaluate_run(t, done == o->steps ? 0 : TRAIN_EVAL_WINDOWS);
    if (dist_lost() || ev.stopped) {            /* the evaluation was not finished */
        eval_now = 0;
        if (!log_now)
            return 1;
    }
    if (done == o->steps && !ev.stopped) {
        p->final = ev;
        p->have_final = 1;
    }
    if (!o->quiet && stdout_open()) {
        if (p->tty)
            fprintf(out, "\r%*s\r", 80, "");
        fprintf(out, "step %6ld/%ld | loss %.4f | lr %.2e | %7.2f ms/step | %8.0f tok/s", done, o->steps, loss, lr, ms,
                tps);
        if (eval_now) {
            fprintf(out, " | val loss %.4f", ev.loss);
            if (t->data.is_task)
                fprintf(out, " | held-out acc %.1f%%", 100.0 * (double)ev.correct / (double)ev.total);
        }
        fprintf(out, "\n");
        report_flush();
    }
    if (t->log) {
        fprintf(t->log, "%ld,%.6f,", done, loss);
        if (eval_now)
            fprintf(t->log, "%.6f,", ev.loss);
        else
            fprintf(t->log, ",");
        if (eval_now && t->data.is_task)
            fprintf(t->log, "%.6f", (double)ev.correct / (double)ev.total);
        fprintf(t->log, ",%.6g,%.3f,%.0f\n", lr, ms, tps);
        log_flush(t);
    }
    p->t_mark = now_seconds();          /* evaluation time is not training time */
    p->mark_step = done;
    return ev.stopped || dist_lost();
}

static void show_examples(trainer *t, int n)
{
    FILE *out = report_stream();
    const task *tk = &t->data.task;
    int L = tk->len;
    if (n > t->data.n_heldout)
        n = t->data.n_heldout;
    int32_t *seqs = malloc((size_t)n * (L + 1) * sizeof *seqs);
    if (!seqs)
        return;
    memcpy(seqs, t->data.heldout, (size_t)n * (L + 1) * sizeof *seqs);
    complete_greedy(t->ctx, &t->m, seqs, n, L + 1, tk->prompt, L + 1, t->B);
    fprintf(out, "held-out examples (prompt -> completion):\n");
    for (int i = 0; i < n; i++) {
        char prompt[128], got[128], want[128];
        const int32_t *s = seqs + (size_t)i * (L + 1), *ref = t->data.heldout + (size_t)i * (L + 1);
        task_format(tk, s, tk->prompt, prompt, sizeof prompt);
        task_format(tk, s + tk->prompt, L + 1 - tk->prompt, got, sizeof got);
        task_format(tk, ref + tk->prompt, L + 1 - tk->prompt, want, sizeof want);
        int ok = strcmp(got, want) == 0;
        fprintf(out, "  %s -> %s  %s", prompt, got, ok ? "ok" : "WRONG");
        if (!ok)
            fprintf(out, " (want %s)", want);
        fprintf(out, "\n");
    }
    free(seqs);
}

/* The last line; 0, or 128 + the signal that cut short the evaluation it
 * needed (a run with no steps to take scores its model here). */
static int summary(trainer *t, const progress *p, long step, double loss, double elapsed)
{
    FILE *out = report_stream();
    eval_result ev = p->have_final ? p->final : evaluate_run(t, 0);   /* every rank takes part */
    if (dist_lost()) {                  /* nothing to save: the run took no step */
        if (dist_lowest_alive())
            dist_say("%s during the evaluation at step %ld; nothing to save", dist_lost_reason(), step);
        return stop_signal ? 128 + stop_signal : DIST_LOST;
    }
    if (ev.stopped) {
        fprintf(stderr, "attograd train: %s during the evaluation at step %ld: stopping (nothing to save)\n",
                stop_words(ev.stopped), step);
        return 128 + ev.stopped;
    }
    if (!stdout_open())
        return 0;
    int is_task = t->data.is_task;
    if (step == t->start)
        fprintf(out, "done: no steps to take (the run is at step %ld of %ld), %s loss %.4f", step, t->o.steps,
                is_task ? "held-out" : "validation", ev.loss);
    else
        fprintf(out, "done: %ld step%s in %.1f s, final train loss %.4f, %s loss %.4f", step - t->start,
                step - t->start == 1 ? "" : "s", elapsed, loss,
                is_task ? "held-out" : "validation", ev.loss);
    if (is_task)
        fprintf(out, ", held-out exact match %.1f%% (%ld/%ld)", 100.0 * (double)ev.correct / (double)ev.total,
                ev.correct, ev.total);
    fprintf(out, ", peak memory %.1f MB (estimated %.1f MB), arena peak %.1f MB\n", peak_rss_bytes() / 1e6,
            t->estimate / 1e6, (double)ag_arena_peak(t->ctx) / 1e6);
    if (is_task && !t->o.quiet)
        show_examples(t, 5);
    return 0;
}

int train_loop(trainer *t)
{
    FILE *out = report_stream();
    const train_opts *o = &t->o;
    save_name = o->save;
    output_track(&checkpoint_out);
    on_stop_signals(on_signal);
    dist_watch_stop(&stop_signal);

    progress p = { now_seconds(), 0, t->start, dist_terminal(report_stream()) && !o->quiet, { NAN, 0, 0, 0 }, 0 };
    p.t_mark = p.t_start;
    double loss = NAN;
    long step = t->start;
    int status = 0, saved = 0;
    long saves_done = 0;                /* the SIGUSR1s served (the most any rank counted) */
    for (; step < o->steps; step++) {
        double lr = lr_schedule(t->cosine, step, o->warmup, o->schedule_steps, o->lr, o->min_lr);
        step_result r = train_step(t, step, lr);
        loss = r.loss;
        if (dist_lost()) {
            status = save_after_fault(t, step, 0);
            break;
        }
        if (r.status != STEP_OK) {
            if (p.tty)
                fprintf(out, "\n");
            report_divergence(t, step, r, saved);
            status = 3;
            break;
        }
        long done = step + 1;
        int cut = report(t, &p, done, loss, lr);     /* a stop signal cut its evaluation short */
        if (dist_lost()) {
            status = save_after_fault(t, ++step, cut);
            break;
        }
        int saved_now = 0;
        if (o->save && o->save_every > 0 && done % o->save_every == 0 && done != o->steps) {
            if (p.tty)
                fprintf(out, "\r%*s\r", 80, "");
            if (save(t, done, !o->quiet)) {
                status = 1;
                break;
            }
            saved = saved_now = 1;
        }
        /* every rank stops, or saves, at the same step: the one after which
         * the largest signal any rank had when it joined the reduction was
         * not 0.  A signal this rank gets while it waits there is left up for
         * the next step's (the agreement is no reason to forget it). */
        train_requests rq = train_dist_requests(stop_signal, save_signals);
        if (dist_lost()) {              /* after a stop the evaluation's rounds agreed on: said as that */
            status = save_after_fault(t, ++step, cut);
            break;
        }
        if (rq.saves > saves_done && !rq.stop && done != o->steps) {   /* else the save after the loop */
            saves_done = rq.saves;
            if (p.tty) {
                fprintf(out, "\r%*s\r", 80, "");     /* the bar goes before the line on stderr */
                report_flush();
            }
            if (save_on_signal(t, done, saved_now))
                saved = 1;
        }
        if (rq.stop) {
            stop_signal = rq.stop;      /* the signal another rank had, on a rank that had none */
            step++;
            if (p.tty)
                fprintf(out, "\n");
            fprintf(stderr, "attograd train: %s %s step %ld: stopping%s\n", stop_words(stop_signal),
                    cut ? "during the evaluation at" : "at", step, o->save ? " and saving" : "");
            status = 128 + stop_signal;
            break;
        }
    }
    double elapsed = now_seconds() - p.t_start;

    if ((status == 0 || status >= 128) && o->save && !dist_lost() && save(t, step, 1))
        status = 1;
    if (status == 0 && t->kept && stdout_open())
        fprintf(out, "%s left as it was (step %ld: no steps taken, nothing to save)\n", t->kept, step);
    if (status == 0)
        status = summary(t, &p, step, loss, elapsed);
    log_flush(t);                       /* the header of a run with no steps to take */
    return status == 0 && t->log_failed ? 1 : status;
}
