/*
 * train_dist.c - `attograd train` on several ranks, or in micro-batches on
 * one: the checks of the number of ranks and the micro-batch, the plan
 * (microbatch.c), and the steps, evaluations and stops every rank takes
 * together.  Whole-batch runs of the plain build pass straight through.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "dist.h"
#include "files.h"
#include "microbatch.h"
#include "train.h"

static const char *CMD = "train";

/* "1, 2, 4 or 8": the numbers of ranks that can run batches of B rows in
 * micro-batches of M rows (M = 0: whole batches, one rank only); the first
 * 8 and "..." when there are more. */
static const char *rank_counts(int B, int M, char *buf, size_t len)
{
    int fit[9], n = 0;
    for (int N = 1; N <= B && n < 9; N++)
        if (B % N == 0 && (M ? (B / N) % M == 0 : N == 1))
            fit[n++] = N;
    int more = n == 9;
    if (more)
        n = 8;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i == 0 ? "" : i == n - 1 && !more ? " or " : ", ",
                                 fit[i]);
    if (more && used < len)
        snprintf(buf + used, len - used, ", ...");
    return buf;
}

#ifdef AG_MPI
/* The cores this rank may use (mpirun binds a rank to one core when it
 * starts one or two), and the machine's. */
static int visible_cores;
static long online_cores;

/* Threads per rank when --threads is 0: the cores this rank may use,
 * shared with the other ranks on this machine. */
static int threads_per_rank(void)
{
    int share = online_cores > 0 ? (int)(online_cores / dist_local_size()) : visible_cores;
    int n = share < visible_cores ? share : visible_cores;
    return n > 0 ? n : 1;
}
#endif

void train_dist_configure(trainer *t, opt *micro_batch)
{
    train_opts *o = &t->o;
    const int N = dist_size(), B = o->batch;
    char fit[64];
    dist_set_timeout(o->mpi_timeout);
    (void)micro_batch;          /* given or not: the MPI build's default */
    const char *whose = o->resume ? "the checkpoint's " : "";
    /* a micro-batch is a part of a rank's share of the batch, so of the
     * batch: a checkpoint whose two contradict each other (written by hand,
     * or by another program) runs on no number of ranks */
    if (o->resume && o->micro_batch && B % o->micro_batch != 0)
        die(CMD, "%s: metadata micro_batch = %d does not divide batch = %d (a micro-batch is a part of the batch), so "
                 "the run cannot be resumed", o->resume, o->micro_batch, B);
    if (B % N != 0) {
        if (o->resume)
            die(CMD, "the checkpoint's --batch %d does not split evenly over %d ranks: resume it on %s ranks", B,
                N, rank_counts(B, o->micro_batch, fit, sizeof fit));
        /* with a --micro-batch given, each rank's share must hold whole micro-batches too */
        long unit = micro_batch && micro_batch->given ? (long)N * o->micro_batch : N;
        char by[64] = "";
        if (unit != N)
            snprintf(by, sizeof by, " (%d ranks x --micro-batch %d)", N, o->micro_batch);
        die(CMD, "--batch %d does not split evenly over %d ranks: give a --batch that %ld divides%s, such as %ld", B,
            N, unit, by, (B / unit + 1) * unit);
    }
    if (o->resume && !o->micro_batch && N > 1)
        die(CMD, "%s was trained in whole batches (no --micro-batch), which only one process continues exactly: "
                 "resume it on one rank, or start a new run from its weights with --init", o->resume);
    int by_default = 0;
#ifdef AG_MPI
    ag_set_threads(0);
    visible_cores = ag_get_threads();
    online_cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (!o->resume && !micro_batch->given) {
        o->micro_batch = mb_default(B);
        by_default = 1;
    }
    if (o->threads == 0)
        o->threads = threads_per_rank();
#endif
    if (o->micro_batch && (B / N) % o->micro_batch != 0) {
        /* what is divided: the whole batch in one process, a rank's share of it on several */
        char rows[96];
        if (N == 1)
            snprintf(rows, sizeof rows, "%s--batch %d", o->resume ? "its " : "", B);
        else
            snprintf(rows, sizeof rows, "the %d row%s each of %d ranks gets from %s--batch %d", B / N,
                     B / N == 1 ? "" : "s", N, o->resume ? "its " : "", B);
        if (o->resume)
            die(CMD, "the checkpoint's --micro-batch %d does not divide %s: resume it on %s ranks", o->micro_batch,
                rows, rank_counts(B, o->micro_batch, fit, sizeof fit));
        die(CMD, "%s--micro-batch %d%s does not divide %s: give a --micro-batch that divides %d", whose,
            o->micro_batch, by_default ? " (the default)" : "", rows, B / N);
    }
    /* rank 0 alone writes: the checkpoint, the log, the progress; but any
     * rank may have to save after a fault (train_loop.c) */
    t->fault_save = o->save;
    if (dist_rank() > 0) {
        o->save = NULL;
        o->log_path = NULL;
        o->quiet = 1;
    }
}

/* A string's bytes and its NUL (so "ab", "c" and "a", "bc" differ), or a
 * byte no string holds for NULL. */
static uint64_t fnv_str(uint64_t h, const char *s)
{
    return s ? fnv1a64(h, s, strlen(s) + 1) : fnv1a64(h, "\377", 1);
}

/* The ranks meet (dist_agree) and compare a hash of what each was given:
 * entry 2k (after dist_exit's) the largest hash of any rank, 2k + 1 the
 * complement of the smallest (~ reverses the order), so that every rank
 * knows whether all were equal.  When the meeting fails (a rank gone), the
 * rank leaves without a save: nothing has been trained. */
static int ranks_differ(long *v, int k)
{
    return v[DIST_AGREE_FIRST + 2 * k] != ~v[DIST_AGREE_FIRST + 1 + 2 * k];
}

static void agree_or_leave(long *v, int last)
{
    if (dist_agree(v, last) == 0)
        return;
    if (dist_lowest_alive())
        dist_say("%s before training started; nothing was trained, nothing is saved", dist_lost_reason());
    exit(DIST_LOST);
}

/* Every rank must run the same training: options, data and first weights.
 * A rank given other options (mpirun's "-np 1 ... : -np 1 ..." with
 * other flags), another text (a host with another copy of the file) or
 * another checkpoint would train on silently, each rank updating its own
 * weights with the gradient summed over all, and rank 0 would save a model
 * no single run gives; other steps or evaluations would leave the ranks
 * waiting on collectives that never match.  Before anything is written
 * (the log), the ranks compare hashes of the three and refuse to start,
 * every one with status 2 and one line from rank 0.  --threads, --quiet,
 * --log, --log-every, --save, --save-every and --mpi-timeout may differ:
 * they are rank 0's alone, or change no number. */
void train_dist_check(trainer *t)
{
    if (dist_size() == 1)
        return;
    const train_opts *o = &t->o;
    const model_config *c = &t->m.cfg;
    uint64_t h[3] = { FNV1A64_BASIS, FNV1A64_BASIS, FNV1A64_BASIS };
    const char *strs[] = { t->data.is_task ? t->data.task.name : "text", o->optimizer, o->schedule, o->order,
                           o->precision };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        h[0] = fnv_str(h[0], strs[i]);
    const long longs[] = { c->arch, c->vocab_size, c->n_layer, c->n_head, c->d_model, c->context, c->qkv_bias,
                           t->B, t->S, o->micro_batch, t->precision, o->steps, o->eval_every, o->warmup,
                           o->schedule_steps, t->start };
    const double dbls[] = { c->dropout, o->lr, o->momentum, o->weight_decay, o->beta1, o->beta2, o->eps, o->clip,
                            o->min_lr };
    h[0] = fnv1a64(h[0], longs, sizeof longs);
    h[0] = fnv1a64(h[0], dbls, sizeof dbls);
    h[0] = fnv1a64(h[0], &o->seed, sizeof o->seed);
    if (!t->data.is_task) {
        const text_data *d = &t->data.text;
        uint64_t text[] = { text_fingerprint(d), d->n, d->n_train };
        h[1] = fnv1a64(h[1], text, sizeof text);
    }
    h[2] = fnv1a64(h[2], t->m.params->data, t->m.params->total * sizeof *t->m.params->data);
    h[2] = fnv1a64(h[2], &t->data_rng, sizeof t->data_rng);
    _Static_assert(DIST_AGREE_FIRST + 6 <= DIST_AGREE_N, "three hashes and their complements");
    long v[DIST_AGREE_N] = { 0 };
    for (int k = 0; k < 3; k++) {
        v[DIST_AGREE_FIRST + 2 * k] = (long)h[k];
        v[DIST_AGREE_FIRST + 1 + 2 * k] = ~(long)h[k];
    }
    agree_or_leave(v, 0);
    const char *may = "they may differ only in --threads, --quiet, --log, --log-every, --save, --save-every and "
                      "--mpi-timeout";
    /* checkpoints that differ give other options too (their steps, at least): the files are the cause */
    if (ranks_differ(v, 2) && t->from)
        die(CMD, "the ranks start from different weights: %s %s is not the same checkpoint on every rank: give every "
                 "host the same copy", o->resume ? "--resume" : "--init", t->from);
    if (ranks_differ(v, 0))
        die(CMD, "the ranks were started with different options: give every rank the same (%s)", may);
    if (ranks_differ(v, 1))
        die(CMD, "the ranks read different text: %s is not the same file on every rank (its bytes differ): give "
                 "every host the same copy", o->text);
    if (ranks_differ(v, 2))
        die(CMD, "the ranks initialized different weights from the same seed: their hosts compute differently "
                 "(another attograd build, C library or kind of CPU), and the ranks would drift apart: run on hosts "
                 "alike");
}

void train_dist_setup(trainer *t)
{
    train_opts *o = &t->o;
    static mb_plan plan;
    char err[ERR_MAX];
    if (o->micro_batch && mb_plan_init(&plan, t->m.params, t->B, o->micro_batch, t->S, err, sizeof err))
        die(CMD, "%s", err);
    /* the last meeting before training: a rank that failed alone since the
     * last (rank 0's log, this plan) is heard of here */
    long ready[DIST_AGREE_N] = { 0 };
    agree_or_leave(ready, 1);
    if (!o->micro_batch)
        return;
    t->mb = &plan;
    if (o->quiet)
        return;
    int threads = ag_get_threads();
    FILE *out = report_stream();
    fprintf(out, "  ranks      %d rank%s x %d thread%s, micro-batches of %d row%s (%d per step, %d per rank), "
            "gradients added in a fixed tree\n", plan.size, plan.size == 1 ? "" : "s", threads,
            threads == 1 ? "" : "s", plan.M, plan.M == 1 ? "" : "s", plan.n, plan.per_rank);
#ifdef AG_MPI
    if (threads > visible_cores)
        fprintf(out, "  note       %d threads on the %d core%s this rank may use: start it with mpirun --bind-to none "
                "(or --map-by slot:PE=%d)\n", threads, visible_cores, visible_cores == 1 ? "" : "s", threads);
    else if (online_cores > 0 && (long)threads * dist_local_size() > online_cores && threads > 1)
        fprintf(out, "  note       %d ranks x %d threads exceed this machine's %ld cores: give fewer --threads "
                "(%ld)\n", dist_local_size(), threads, online_cores,
                online_cores / dist_local_size() > 1 ? online_cores / dist_local_size() : 1);
    else if (online_cores > 0 && dist_local_size() > online_cores)
        /* one thread each: fewer threads is no way out */
        fprintf(out, "  note       %d ranks on this machine's %ld core%s take turns: start at most %ld here\n",
                dist_local_size(), online_cores, online_cores == 1 ? "" : "s", online_cores);
#endif
    report_flush();
}

double train_dist_gradient(trainer *t, long step)
{
    ag_pcg32 before = t->data_rng;
    dataset_batch(&t->data, t->random_order, &t->data_rng, step, t->B, t->S, t->x, t->y);  /* the whole batch */
    double loss = mb_gradient(t->mb, t->ctx, &t->m, t->x, t->y, (uint64_t)t->o.seed, step);
    if (dist_lost())
        t->data_rng = before;           /* the state of the last completed step, to save */
    return loss;
}

eval_result train_evaluate(trainer *t, long max_windows, const eval_progress *progress)
{
    if (t->mb)
        return mb_evaluate(t->ctx, &t->m, &t->data, max_windows, t->B, progress);
    return evaluate(t->ctx, &t->m, &t->data, TEXT_VAL, max_windows, t->B, progress);
}

train_requests train_dist_requests(int stop, long saves)
{
    long v[2] = { stop, saves };        /* one reduction carries both */
    dist_max(v, 2);
    return (train_requests){ (int)v[0], v[1] };
}

int train_dist_end(trainer *t, int status)
{
    if (t->mb)
        mb_plan_free(t->mb);
    t->mb = NULL;
    /* every rank finishes with the same status, except a save failed on
     * rank 0 (1) */
    return dist_end(status, status != 1);
}
