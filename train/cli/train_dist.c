/*
 * train_dist.c - `attograd train` on several ranks, or in micro-batches on
 * one: the checks of the number of ranks and the micro-batch, the plan
 * (microbatch.c), and the steps, evaluations and stops every rank takes
 * together.  Whole-batch runs of the plain build pass straight through.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "dist.h"
#include "files.h"
#include "microbatch.h"
#include "train.h"

static const char *CMD = "train";

/* "1, 2, 4 or 8": the numbers of ranks that can run batches of B rows in
 * micro-batches of M rows (M = 0: whole batches, one rank only). */
static const char *rank_counts(int B, int M, char *buf, size_t len)
{
    int fit[8], n = 0;
    for (int N = 1; N <= B && n < 8; N++)
        if (B % N == 0 && (M ? (B / N) % M == 0 : N == 1))
            fit[n++] = N;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i == 0 ? "" : i == n - 1 ? " or " : ", ", fit[i]);
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
        die(CMD, "--batch %d does not split evenly over %d ranks: give a --batch that %d divides, such as %d", B, N,
            N, (B / N + 1) * N);
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
            snprintf(rows, sizeof rows, "the %d rows each of %d ranks gets from %s--batch %d", B / N, N,
                     o->resume ? "its " : "", B);
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

void train_dist_setup(trainer *t)
{
    train_opts *o = &t->o;
    if (!o->micro_batch)
        return;
    static mb_plan plan;
    char err[ERR_MAX];
    if (mb_plan_init(&plan, t->m.params, t->B, o->micro_batch, t->S, err, sizeof err))
        die(CMD, "%s", err);
    t->mb = &plan;
    if (o->quiet)
        return;
    int threads = ag_get_threads();
    FILE *out = report_stream();
    fprintf(out, "  ranks      %d rank%s x %d thread%s, micro-batches of %d rows (%d per step, %d per rank), "
            "gradients added in a fixed tree\n", plan.size, plan.size == 1 ? "" : "s", threads,
            threads == 1 ? "" : "s", plan.M, plan.n, plan.per_rank);
#ifdef AG_MPI
    if (threads > visible_cores)
        fprintf(out, "  note       %d threads on the %d core%s this rank may use: start it with mpirun --bind-to none "
                "(or --map-by slot:PE=%d)\n", threads, visible_cores, visible_cores == 1 ? "" : "s", threads);
    else if (online_cores > 0 && (long)threads * dist_local_size() > online_cores)
        fprintf(out, "  note       %d ranks x %d threads exceed this machine's %ld cores: give fewer --threads\n",
                dist_local_size(), threads, online_cores);
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
