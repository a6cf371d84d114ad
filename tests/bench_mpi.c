/*
 * bench_mpi.c - one training step (forward, cross-entropy, backward, clip,
 * AdamW) on the small and medium models of tests/bench_train.c, on one or
 * more ranks; built with mpicc by `make bench-mpi` (tests/bench_mpi.sh).
 * Usage:
 *   mpirun -np N bench_mpi [--threads T] [--micro-batch M] [--steps S] [--overlap 0|1] small|medium
 * --micro-batch 0 (one rank only) is the plain whole-batch step; M > 0 is
 * the micro-batched step of train/dist/microbatch.c, whose gradient
 * exchange overlaps the backward pass (--overlap 1, the default, as
 * training does) or starts after it (--overlap 0).  Rank 0 prints the median
 * ms per step, the part of it spent in collectives (waiting included), the
 * bytes this rank sent per step, and a checksum of the weights after the
 * steps: the same for the same M on any number of ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "microbatch.h"

typedef struct bench_config {
    const char *name;
    int vocab, context, d_model, n_head, n_layer, batch;
    int warmup, steps;
} bench_config;

/* tests/bench_train.c's small and medium (GPT, AdamW lr 3e-3). */
static const bench_config CONFIGS[] = {
    { "small", 65, 64, 128, 4, 4, 12, 2, 30 },
    { "medium", 65, 256, 384, 6, 6, 16, 1, 5 },
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* FNV-1a over the weights' bytes. */
static unsigned long long checksum(const ag_params *ps)
{
    unsigned long long h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)ps->data;
    for (size_t i = 0; i < ps->total * sizeof(ag_real); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void run(const bench_config *c, int micro_batch, int steps, int overlap)
{
    model_config cfg = { ARCH_GPT, c->vocab, c->n_layer, c->n_head, c->d_model, c->context, 0, 0.0 };
    model m;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 1, 1);
    model_build(&m, &cfg);
    model_init(&m, &rng);
    ag_ctx *ctx = ag_ctx_new();
    ag_optim *opt = ag_optim_adamw(m.params, 0.9, 0.999, 1e-8, 0.0);
    int n = c->batch * c->context;
    int32_t *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double *ms = malloc((size_t)steps * sizeof *ms), *comm = malloc((size_t)steps * sizeof *comm);
    if (!x || !y || !ms || !comm) {
        fprintf(stderr, "bench_mpi: out of memory\n");
        exit(1);
    }
    mb_plan plan;
    char err[256];
    if (micro_batch > 0 && mb_plan_init(&plan, m.params, c->batch, micro_batch, c->context, err, sizeof err)) {
        fprintf(stderr, "bench_mpi: %s\n", err);
        exit(2);
    }
    if (micro_batch > 0)
        plan.overlap = overlap;
    double loss = 0, bytes0 = 0;
    for (int s = 0; s < c->warmup + steps; s++) {
        for (int i = 0; i < n; i++) {      /* the same batch on every rank */
            x[i] = (int32_t)ag_pcg32_below(&rng, (uint32_t)c->vocab);
            y[i] = (int32_t)ag_pcg32_below(&rng, (uint32_t)c->vocab);
        }
        if (s == c->warmup)
            bytes0 = dist_bytes_sent();
        double t0 = now_seconds(), c0 = dist_comm_seconds();
        if (micro_batch > 0) {
            loss = mb_gradient(&plan, ctx, &m, x, y, 1, s);
        } else {
            ag_reset(ctx);
            ag_tensor *l = ag_cross_entropy(ctx, model_forward(ctx, &m, x, c->batch, c->context, 1, NULL), y);
            ag_params_zero_grad(m.params);
            ag_backward(ctx, l);
            loss = l->data[0];
        }
        ag_clip_grad_norm(m.params, 1.0);
        ag_optim_step(opt, 3e-3);
        if (s >= c->warmup) {
            ms[s - c->warmup] = 1e3 * (now_seconds() - t0);
            comm[s - c->warmup] = 1e3 * (dist_comm_seconds() - c0);
        }
    }
    double bytes = (dist_bytes_sent() - bytes0) / steps;
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    qsort(comm, (size_t)steps, sizeof *comm, cmp_double);
    if (dist_rank() == 0) {
        char mb[32];
        snprintf(mb, sizeof mb, micro_batch ? "%d" : "whole", micro_batch);
        printf("config %-6s params %9zu  B %2d T %3d  ranks %d threads %d  micro-batch %-5s  overlap %d  ms/step %9.2f  "
               "comm ms/step %8.2f  sent MB/step %7.2f  loss %.6f  weights %016llx\n", c->name, m.params->total,
               c->batch, c->context, dist_size(), ag_get_threads(), mb, overlap, ms[steps / 2], comm[steps / 2], bytes / 1e6,
               loss, checksum(m.params));
        fflush(stdout);
    }
    if (micro_batch > 0)
        mb_plan_free(&plan);
    free(x);
    free(y);
    free(ms);
    free(comm);
    ag_optim_free(opt);
    ag_ctx_free(ctx);
    model_free(&m);
}

int main(int argc, char **argv)
{
    dist_start("bench");
    int threads = 1, micro_batch = 0, steps = 0, overlap = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--micro-batch") == 0 && i + 1 < argc) {
            micro_batch = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--overlap") == 0 && i + 1 < argc) {
            overlap = atoi(argv[++i]) != 0;
        } else {
            const bench_config *c = NULL;
            for (size_t k = 0; k < sizeof CONFIGS / sizeof CONFIGS[0]; k++)
                if (strcmp(argv[i], CONFIGS[k].name) == 0)
                    c = &CONFIGS[k];
            if (!c || (micro_batch == 0 && dist_size() > 1)) {
                fprintf(stderr, "usage: mpirun -np N bench_mpi [--threads T] [--micro-batch M] [--steps S] "
                                "[--overlap 0|1] small|medium (M = 0, whole batches, on one rank only)\n");
                return dist_end(2, 0);
            }
            ag_set_threads(threads);
            run(c, micro_batch, steps > 0 ? steps : c->steps, overlap);
        }
    }
    return dist_end(0, 1);
}
