/*
 * bench_train.c - speed of one full training step (train/model/step.c's
 * step_take, as the command runs it: forward, cross-entropy, backward, the
 * finiteness checks, clip, optimizer) on the configurations
 * tests/bench_torch.py runs in PyTorch.  Usage:
 *   bench_train [--threads N] [--soak N] [--precision fp32|bf16] [--explicit]
 *               [toy|small|medium|LxHxDxTxB[xSTEPS]]...
 * --soak N runs N more steps after the timed ones and reports peak RSS
 * before and after them: memory must stay flat across steps.  LxHxDxTxB is
 * a GPT of L layers, H heads, d_model D, context T, batch B (AdamW, V 65),
 * timed over STEPS steps (default 3) after one untimed.  --explicit runs
 * attention as the op-by-op composition instead of the fused op.  Each
 * config is best run in its own process, so peak RSS is its own.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "model.h"
#include "pool.h"
#include "run.h"
#include "step.h"

typedef struct bench_config {
    const char *name;
    int arch, vocab, context, d_model, n_head, n_layer, batch;
    int adamw;              /* 0: SGD lr 0.1 momentum 0.9; 1: AdamW lr 3e-3 */
    int warmup, steps;      /* untimed, then timed */
} bench_config;

static const bench_config CONFIGS[] = {
    { "toy", ARCH_ATTN_ONLY, 65, 32, 64, 4, 1, 16, 0, 5, 200 },
    { "small", ARCH_GPT, 65, 64, 128, 4, 4, 12, 1, 2, 30 },
    { "medium", ARCH_GPT, 65, 256, 384, 6, 6, 16, 1, 1, 5 },
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Inputs and next-token targets: uniform tokens in [0, V) from PCG32. */
static void random_batch(ag_pcg32 *rng, int V, int n, int32_t *x, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        x[i] = (int32_t)ag_pcg32_below(rng, (uint32_t)V);
        y[i] = (int32_t)ag_pcg32_below(rng, (uint32_t)V);
    }
}

/* FLOPs of one step.  Matmuls against the weights cost 2 flops per parameter
 * per token forward and 4 backward: 6 N tokens (counting the embeddings too,
 * a slight overestimate).  Attention adds Q K^T and W V, each 2 T^2 d per
 * sequence and layer forward, twice that backward: 12 L B T^2 d. */
static double step_flops(const bench_config *c, double n_params)
{
    double tokens = (double)c->batch * c->context;
    double T = c->context, d = c->d_model;
    return 6 * n_params * tokens + 12.0 * c->n_layer * c->batch * T * T * d;
}

static long soak_steps;
static int precision = AG_FP32, explicit_attention;
static double start_rss;    /* the process before any model: libc, the program */

static double max_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);   /* ru_maxrss is in kilobytes on Linux */
    return (double)ru.ru_maxrss / 1024.0;
}

static void run_config(const bench_config *c)
{
    model_config cfg = { c->arch, c->vocab, c->n_layer, c->n_head, c->d_model, c->context, 0, 0.0 };
    model m;
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 1, 1);
    model_build(&m, &cfg);
    model_init(&m, &rng);
    m.explicit_attention = explicit_attention;
    ag_ctx *ctx = ag_ctx_new();
    if (ag_set_precision(ctx, precision) != 0) {
        const char *fact;
        ag_bf16_status(&fact);
        fprintf(stderr, "bench_train: bf16 cannot run here: %s\n", fact);
        exit(2);
    }
    ag_optim *opt = c->adamw ? ag_optim_adamw(m.params, 0.9, 0.999, 1e-8, 0.0) : ag_optim_sgd(m.params, 0.9, 0.0);
    double lr = c->adamw ? 3e-3 : 0.1;
    int n = c->batch * c->context;
    int32_t *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double *ms = malloc((size_t)c->steps * sizeof *ms);
    if (!x || !y || !ms) {
        fprintf(stderr, "bench_train: out of memory\n");
        exit(1);
    }
    double loss = 0, rss_before = 0;
    long total = c->warmup + c->steps + soak_steps;
    for (long s = 0; s < total; s++) {
        if (s == c->warmup + c->steps)
            rss_before = max_rss_mb();
        random_batch(&rng, c->vocab, n, x, y);
        double t0 = now_seconds();
        /* the step every trainer takes (train/model/step.c): forward,
         * cross-entropy, backward, the finiteness checks, clipping, update */
        const step_rows batch = { x, y, c->batch, c->context, 1.0, NULL };
        step_result r = step_take(ctx, &m, opt, &batch, 1.0, lr);
        double t1 = now_seconds();
        if (r.status != STEP_OK) {
            fprintf(stderr, "bench_train: step %ld of %s: the loss or a gradient is not finite\n", s + 1, c->name);
            exit(1);
        }
        loss = r.loss;
        if (s >= c->warmup && s < c->warmup + c->steps)
            ms[s - c->warmup] = 1e3 * (t1 - t0);
    }
    qsort(ms, (size_t)c->steps, sizeof *ms, cmp_double);
    double med = c->steps % 2 ? ms[c->steps / 2] : 0.5 * (ms[c->steps / 2 - 1] + ms[c->steps / 2]);
    double n_params = (double)m.params->total;
    /* parameters, gradients and optimizer moments: the model's lasting state */
    double state_mb = (double)m.params->total * sizeof(ag_real) * (c->adamw ? 4 : 3) / 1e6;
    printf("config %-6s params %9.0f  B %2d T %3d  steps %3d  ms/step %9.3f  tokens/s %9.0f  GFLOP/s %7.2f  "
           "peak_rss_MB %7.1f  start_rss_MB %5.1f  arena_peak_MB %7.1f  state_MB %7.1f  loss %.3f\n",
           c->name, n_params, c->batch, c->context, c->steps, med, n / (med / 1e3),
           step_flops(c, n_params) / (med / 1e3) / 1e9, max_rss_mb(), start_rss, (double)ag_arena_peak(ctx) / 1e6,
           state_mb, loss);
    if (soak_steps > 0)
        printf("soak   %-6s peak RSS %.1f MB after %d steps, %.1f MB after %ld more\n", c->name, rss_before,
               c->warmup + c->steps, max_rss_mb(), soak_steps);
    fflush(stdout);
    free(x);
    free(y);
    free(ms);
    ag_optim_free(opt);
    ag_ctx_free(ctx);
    model_free(&m);
}

int main(int argc, char **argv)
{
    start_rss = max_rss_mb();
    int threads = 2, chosen[N_CONFIGS] = { 0 }, any = 0, n_custom = 0;
    bench_config custom[16];
    char names[16][48];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--soak") == 0 && i + 1 < argc) {
            soak_steps = atol(argv[++i]);
            continue;
        }
        if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            precision = strcmp(argv[++i], "bf16") == 0 ? AG_BF16 : AG_FP32;
            continue;
        }
        if (strcmp(argv[i], "--explicit") == 0) {
            explicit_attention = 1;
            continue;
        }
        int found = 0, L, H, D, T, B, steps = 3, end = 0;
        for (int k = 0; k < N_CONFIGS; k++)
            if (strcmp(argv[i], CONFIGS[k].name) == 0)
                chosen[k] = found = any = 1;
        if (!found && n_custom < 16 &&
            (sscanf(argv[i], "%dx%dx%dx%dx%dx%d%n", &L, &H, &D, &T, &B, &steps, &end) == 6 ||
             sscanf(argv[i], "%dx%dx%dx%dx%d%n", &L, &H, &D, &T, &B, &end) == 5) &&
            argv[i][end] == 0 && L > 0 && H > 0 && D % H == 0 && T > 0 && B > 0 && steps > 0) {
            snprintf(names[n_custom], sizeof names[n_custom], "%s", argv[i]);
            custom[n_custom] = (bench_config){ names[n_custom], ARCH_GPT, 65, T, D, H, L, B, 1, 1, steps };
            n_custom++;
            found = any = 1;
        }
        if (!found) {
            fprintf(stderr, "bench_train: '%s' is not a config (toy, small, medium, LxHxDxTxB[xSTEPS]) or an "
                            "option\n", argv[i]);
            return 2;
        }
    }
    ag_set_threads(threads);
    printf("attograd %s precision (matrix multiplies %s), %s kernels, %d thread%s; GFLOP/s = (6 * params * B*T + "
           "12 * n_layer * B * T^2 * d) / median step time\n", AG_PRECISION_NAME,
           precision == AG_BF16 ? "bf16" : "fp32", ag_kernels_name(), ag_get_threads(),
           ag_get_threads() == 1 ? "" : "s");
    if (ag_get_threads() > 1) {
        double wake, fork_us, spin, elem;
        size_t least;
        ag_threads_measured(&wake, &fork_us, &spin, &elem, &least);
        printf("threads measured (src/pool.c): wake-up %.1f us, fork %.2f us, element %.3f ns; idle threads poll ",
               wake, fork_us, elem);
        if (spin < 0)
            printf("without end");
        else
            printf("%.0f us", spin);
        printf(", loops of fewer than %zu elements run on one thread\n", least);
    }
    for (int k = 0; k < N_CONFIGS; k++)
        if (!any || chosen[k])
            run_config(&CONFIGS[k]);
    for (int k = 0; k < n_custom; k++)
        run_config(&custom[k]);
    return 0;
}
