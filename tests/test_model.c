/*
 * test_model.c - MultiHeadAttention and a whole model step gradient-checked
 * (tolerances in gradcheck.h): causal and non-causal, several heads, qkv
 * bias on and off, cross-attention, dropout with a fixed seed; the GPT and
 * attn-only models end to end through cross-entropy; parameter names and
 * counts as the checkpoint contract states them; the run settings a
 * checkpoint records, through a file and back; the step's refusal of
 * gradients and weights that are not finite.
 */
#include <float.h>
#include <limits.h>
#include <unistd.h>

#include "expect_error.h"
#include "gradcheck.h"
#include "model.h"
#include "run.h"
#include "step.h"

typedef struct mha_case {
    int heads, qkv_bias, causal, cross;
    double dropout;
} mha_case;

/* m built from cfg and initialized from PCG32 stream (seed, 1). */
static void build_model(model *m, const model_config *cfg, uint64_t seed)
{
    model_build(m, cfg);
    ag_pcg32 init;
    ag_pcg32_seed(&init, seed, 1);
    model_init(m, &init);
}

/* Inputs: x [2,5,6] (and kv [2,3,6] for cross-attention) plus the layer's
 * parameters, all registered in one ag_params so every gradient is checked. */
static ag_tensor *f_mha(ag_ctx *c, ag_tensor **in, const void *arg)
{
    const nn_mha *a = arg;
    ag_pcg32_seed(ag_dropout_rng(c), 11, 2);   /* the same dropout mask on every evaluation */
    ag_tensor *kv = a->causal ? NULL : in[1];
    return nn_mha_forward(c, a, in[0], kv, 1, NULL);
}

static void check_mha(const char *label, mha_case mc)
{
    ag_params *ps = ag_params_new();
    ag_params_add(ps, "x", 3, (int[]){2, 5, 6});
    ag_params_add(ps, "kv", 3, (int[]){2, mc.cross ? 3 : 5, 6});
    nn_mha a = nn_mha_new(ps, "attn", 6, mc.heads, mc.qkv_bias, mc.dropout, mc.causal);
    ag_params_alloc(ps);
    for (int i = 0; i < ps->count; i++)
        fill(ps->list[i], -1, 1, 0);
    if (mc.causal) {
        /* causal self-attention ignores kv: keep it out of the comparison */
        ps->list[1]->requires_grad = 0;
    }
    gradcheck(label, f_mha, ps, &a);
    ag_params_free(ps);
}

/* nn_mha_forward (one projection + the fused ag_attention op) against
 * nn_mha_forward_explicit (the tutorials' op-by-op composition) on the same
 * self-attention input, the same dropout draws and the same loss
 * sum(out * R): outputs and attention weights must agree to TOL_PATHS
 * relative (|a - b| <= TOL_PATHS (1 + |b|)), and each parameter's gradient
 * to TOL_PATHS (1 + its largest element).  The fused op sums in another
 * order (keys in blocks, weights recomputed from the log-sum-exp in
 * backward), so a gradient element that is a sum of many terms of either
 * sign differs by rounding relative to those terms, not to itself. */
#ifdef AG_DOUBLE
#define TOL_PATHS 1e-12
#else
#define TOL_PATHS 1e-4
#endif

static double max_rel_diff(const ag_real *a, const ag_real *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(d <= worst))
            worst = d;   /* NaN sticks */
    }
    return worst;
}

static void check_fused_equals_explicit(const char *label, mha_case mc, int B, int T, int d)
{
    ag_params *ps = ag_params_new();
    ag_tensor *x = ag_params_add(ps, "x", 3, (int[]){B, T, d});
    nn_mha a = nn_mha_new(ps, "attn", d, mc.heads, mc.qkv_bias, mc.dropout, mc.causal);
    ag_params_alloc(ps);
    for (int i = 0; i < ps->count; i++)
        fill(ps->list[i], -1, 1, 0);
    ag_real *grads[2], *outs[2], *weights[2];
    ag_ctx *ctx[2] = { ag_ctx_new(), ag_ctx_new() };
    ag_tensor *out[2];
    for (int path = 0; path < 2; path++) {
        ag_pcg32_seed(ag_dropout_rng(ctx[path]), 21, 5);
        ag_tensor *w = NULL;
        out[path] = path ? nn_mha_forward_explicit(ctx[path], &a, x, NULL, 1, &w)
                         : nn_mha_forward(ctx[path], &a, x, NULL, 1, &w);
        ag_pcg32 r;
        ag_pcg32_seed(&r, 3, 3);
        ag_tensor *R = ag_new(ctx[path], 3, out[path]->shape);
        for (size_t i = 0; i < R->size; i++)
            R->data[i] = (ag_real)(2 * ag_pcg32_uniform(&r) - 1);
        ag_params_zero_grad(ps);
        ag_backward(ctx[path], ag_sum_all(ctx[path], ag_mul(ctx[path], out[path], R)));
        grads[path] = malloc(ps->total * sizeof(ag_real));
        memcpy(grads[path], ps->grad, ps->total * sizeof(ag_real));
        outs[path] = out[path]->data;
        weights[path] = w->data;
        CHECK(w->size == (size_t)B * mc.heads * T * T, "%s: weights are [B,H,T,T] on path %d", label, path);
    }
    double dout = max_rel_diff(outs[0], outs[1], out[0]->size);
    double dw = max_rel_diff(weights[0], weights[1], (size_t)B * mc.heads * T * T);
    double dg = 0;
    for (int i = 0; i < ps->count; i++) {
        const ag_tensor *t = ps->list[i];
        size_t off = (size_t)(t->data - ps->data);
        double worst = 0, largest = 0;
        for (size_t k = 0; k < t->size; k++) {
            double diff = fabs((double)grads[0][off + k] - grads[1][off + k]);
            worst = diff > worst || diff != diff ? diff : worst;
            largest = fabs((double)grads[1][off + k]) > largest ? fabs((double)grads[1][off + k]) : largest;
        }
        worst /= 1 + largest;
        dg = worst > dg || worst != worst ? worst : dg;
    }
    CHECK(dout <= TOL_PATHS && dw <= TOL_PATHS && dg <= TOL_PATHS,
          "%s: fused vs explicit, max relative difference: output %.2g, weights %.2g, gradients (per tensor) %.2g", label,
          dout, dw, dg);
    /* and the gradients are not trivially equal because they are all zero */
    double norm = 0;
    for (size_t i = 0; i < ps->total; i++)
        norm += fabs((double)grads[0][i]);
    CHECK(norm > 1e-3, "%s: gradients carry signal (sum |g| = %g)", label, norm);
    free(grads[0]);
    free(grads[1]);
    ag_ctx_free(ctx[0]);
    ag_ctx_free(ctx[1]);
    ag_params_free(ps);
}

/* Saturated attention: each query's scores differ by thousands, so its
 * weights are exactly one-hot (on its own position) and moving q or k a
 * little changes nothing: their gradients must be exactly 0, not rounding
 * noise (which, scaled by large keys, can overflow).  T = 5 is one block of
 * the attention kernel; T = 68 is two, the second of 4 keys. */
static void check_one_hot_gradient(int T)
{
    enum { B = 2, H = 2, D = 4 };                        /* head size 2 */
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *qkv = ag_new(ctx, 3, (int[]){B, T, 3 * D});
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < D; c++) {
                ag_real *row = qkv->data + ((size_t)b * T + t) * 3 * D;
                row[c] = c % 2 == 0 ? 1000 : 0;                  /* q: (1000, 0) per head */
                row[D + c] = c % 2 == 0 ? (ag_real)(10 * t) : 1;  /* k: (10 t, 1): key t scores 10000 t */
                row[2 * D + c] = (ag_real)sin(1.7 * t + 0.3 * c + b);           /* v: all mantissa bits */
            }
    ag_requires_grad(qkv);
    ag_tensor *w = NULL;
    ag_tensor *y = ag_attention(ctx, qkv, H, 1, 0, 1, &w);
    ag_tensor *R = ag_new(ctx, 3, y->shape);
    for (size_t i = 0; i < R->size; i++)
        R->data[i] = (ag_real)cos(0.37 * (double)i);
    ag_backward(ctx, ag_sum_all(ctx, ag_mul(ctx, y, R)));
    int one_hot = 1, qk_zero = 1, v_nonzero = 0;
    for (int item = 0; item < B * H; item++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                one_hot &= w->data[((size_t)item * T + i) * T + j] == (i == j);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int c = 0; c < 3 * D; c++) {
            ag_real g = qkv->grad[r * 3 * D + c];
            if (c < 2 * D)
                qk_zero &= g == 0;
            else
                v_nonzero |= g != 0;
        }
    CHECK(one_hot && qk_zero && v_nonzero,
          "saturated attention, T %d: weights one-hot (%d), q and k gradients exactly 0 (%d), v's not (%d)", T,
          one_hot, qk_zero, v_nonzero);
    ag_ctx_free(ctx);
}

/* Generation with the key/value cache against plain forward passes: the
 * logits of positions fed a few at a time equal the full forward's (to
 * rounding: the attention sums run over other blocks), greedy sampling
 * picks the tokens the full forward picks while the window fits the
 * context, and after the window slides, the tokens a forward over the last
 * half context (plus the tokens since) picks, as sample_tokens documents. */
static void check_cache(int arch)
{
    enum { T = 12, B = 2, V = 9 };
    model_config cfg = { arch, V, 2, 3, 12, T, 1, 0 };
    model m;
    build_model(&m, &cfg, 8);
    for (size_t i = 0; i < m.params->total; i++)
        m.params->data[i] += (ag_real)(0.5 * ag_pcg32_normal(&rng));
    ag_ctx *ctx = ag_ctx_new();
    int32_t ids[B * T];
    for (int i = 0; i < B * T; i++)
        ids[i] = (int32_t)ag_pcg32_below(&rng, V);
    ag_tensor *full = model_forward(ctx, &m, ids, B, T, 0, NULL);
    model_cache cache;
    model_cache_init(&cache, &m, B);
    const int steps[] = { 3, 1, 1, 4, 2, 1 };   /* 12 positions in pieces */
    double worst = 0;
    for (int s = 0, pos = 0; s < 6; pos += steps[s], s++) {
        int32_t piece[B * T];
        for (int b = 0; b < B; b++)
            memcpy(piece + b * steps[s], ids + b * T + pos, (size_t)steps[s] * sizeof *piece);
        ag_tensor *l = model_forward_cached(ctx, &m, &cache, piece, B, steps[s]);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < steps[s]; t++)
                for (int v = 0; v < V; v++) {
                    double want = full->data[((size_t)b * T + pos + t) * V + v];
                    double got = l->data[((size_t)b * steps[s] + t) * V + v];
                    worst = fmax(worst, fabs(got - want) / (1 + fabs(want)));
                }
    }
    CHECK(worst <= TOL_PATHS && cache.len == T, "%s: cached logits vs full forward: %.3g", model_arch_name(arch),
          worst);
    model_cache_free(&cache);

    /* greedy sampling: 4 prompt tokens, 20 new ones (the window slides at 12) */
    enum { PROMPT = 4, NEW = 20 };
    int32_t seq[PROMPT + NEW];
    memcpy(seq, ids, PROMPT * sizeof *seq);
    int n = sample_tokens(ctx, &m, seq, PROMPT, NEW, 0, 0, &rng, NULL, NULL);
    int agree = n == PROMPT + NEW;
    for (int i = PROMPT; i < PROMPT + NEW; i++) {
        /* the window: everything up to the context, then after each slide
         * the last T/2 tokens and those drawn since */
        int win = i <= T ? i : T / 2 + (i - T - 1) % (T / 2 + 1);
        ag_reset(ctx);
        ag_tensor *l = model_forward(ctx, &m, seq + i - win, 1, win, 0, NULL);
        const ag_real *last = l->data + (size_t)(win - 1) * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            best = last[v] > last[best] ? v : best;
        agree &= seq[i] == best;
    }
    CHECK(agree, "%s: greedy sampling with the cache picks what the documented windows pick", model_arch_name(arch));
    ag_ctx_free(ctx);
    model_free(&m);
}

/* Without gradients the forward releases each layer's temporaries: the same
 * logits (bit for bit) as with gradients on, at a fraction of the arena. */
static void check_inference_memory(void)
{
    model_config cfg = { ARCH_GPT, 11, 4, 2, 16, 32, 0, 0 };
    model m;
    build_model(&m, &cfg, 9);
    int32_t ids[4 * 32];
    for (int i = 0; i < 4 * 32; i++)
        ids[i] = (int32_t)ag_pcg32_below(&rng, 11);
    ag_ctx *with = ag_ctx_new(), *without = ag_ctx_new();
    ag_set_grad_enabled(without, 0);
    ag_tensor *a = model_forward(with, &m, ids, 4, 32, 0, NULL), *b = model_forward(without, &m, ids, 4, 32, 0, NULL);
    CHECK(memcmp(a->data, b->data, a->size * sizeof(ag_real)) == 0, "no-grad forward: the same logits");
    CHECK(ag_arena_peak(without) * 3 < ag_arena_peak(with),
          "no-grad forward of 4 layers holds one layer at a time: arena peak %zu vs %zu bytes",
          ag_arena_peak(without), ag_arena_peak(with));
    ag_ctx_free(with);
    ag_ctx_free(without);
    model_free(&m);
}

typedef struct step_case {
    model *m;
    int32_t ids[2 * 7], targets[2 * 7];
    int dropout;
} step_case;

static ag_tensor *f_model(ag_ctx *c, ag_tensor **in, const void *arg)
{
    (void)in;
    const step_case *s = arg;
    ag_pcg32_seed(ag_dropout_rng(c), 5, 2);
    ag_tensor *logits = model_forward(c, s->m, s->ids, 2, 7, s->dropout, NULL);
    return ag_cross_entropy(c, logits, s->targets);
}

static void check_model(const char *label, int arch, int qkv_bias, double dropout)
{
    model_config cfg = { arch, 9, 2, 3, 6, 8, qkv_bias, dropout };   /* odd sizes: 3 heads of 2 */
    model m;
    build_model(&m, &cfg, 3);
    /* larger weights than the 0.02 init so every path carries signal */
    for (size_t i = 0; i < m.params->total; i++)
        m.params->data[i] += (ag_real)(0.3 * ag_pcg32_normal(&rng));
    step_case s = { &m, {0}, {0}, dropout > 0 };
    for (int i = 0; i < 14; i++) {
        s.ids[i] = (int32_t)ag_pcg32_below(&rng, 9);
        s.targets[i] = i % 5 == 0 ? -1 : (int32_t)ag_pcg32_below(&rng, 9);
    }
    gradcheck(label, f_model, m.params, &s);

    /* the checkpoint contract: names and count */
    CHECK(ag_params_find(m.params, "tok_emb.weight") && ag_params_find(m.params, "pos_emb.weight") &&
              ag_params_find(m.params, "blocks.1.attn.W_query.weight") &&
              ag_params_find(m.params, "blocks.0.attn.out_proj.bias") && ag_params_find(m.params, "out_head.weight") &&
              !ag_params_find(m.params, "out_head.bias"),
          "%s: parameter names", label);
    CHECK((ag_params_find(m.params, "blocks.0.attn.W_key.bias") != NULL) == qkv_bias, "%s: qkv bias", label);
    CHECK((ag_params_find(m.params, "final_norm.weight") != NULL) == (arch == ARCH_GPT) &&
              (ag_params_find(m.params, "blocks.1.mlp.fc2.weight") != NULL) == (arch == ARCH_GPT),
          "%s: gpt-only parameters", label);
    CHECK((double)m.params->total == model_param_count(&cfg), "%s: %zu parameters, model_param_count says %.0f",
          label, m.params->total, model_param_count(&cfg));
    model_free(&m);
}

/* The grad-ready hook over a whole GPT step (the joined query/key/value
 * weights are one leaf): every parameter is named exactly once, its
 * gradient is then already what backward leaves, and the output head's is
 * final before the embeddings' (what lets a data-parallel step send the
 * last layers' gradients while backward still runs). */
typedef struct ready_count {
    const ag_params *ps;
    int *times, *order, next;
    ag_real *seen;                              /* each parameter's gradient when named */
    int outside;                                /* leaves that are not parameters */
} ready_count;

static void count_ready(ag_tensor *leaf, void *user)
{
    ready_count *rc = user;
    const ag_params *ps = rc->ps;
    int any = 0;
    for (int i = 0; i < ps->count; i++) {
        const ag_tensor *p = ps->list[i];
        if (p->grad >= leaf->grad && p->grad + p->size <= leaf->grad + leaf->size) {
            rc->times[i]++;
            rc->order[i] = rc->next++;
            memcpy(rc->seen + (p->grad - ps->grad), p->grad, p->size * sizeof(ag_real));
            any = 1;
        }
    }
    rc->outside += !any;
}

static void check_grad_ready(const char *label, int qkv_bias, double dropout)
{
    model_config cfg = { ARCH_GPT, 9, 2, 3, 6, 8, qkv_bias, dropout };
    model m;
    build_model(&m, &cfg, 5);
    const ag_params *ps = m.params;
    ready_count rc = { ps, calloc((size_t)ps->count, sizeof(int)), calloc((size_t)ps->count, sizeof(int)), 0,
                       malloc(ps->total * sizeof(ag_real)), 0 };
    int32_t ids[16], targets[16];
    for (int i = 0; i < 16; i++) {
        ids[i] = (int32_t)ag_pcg32_below(&rng, 9);
        targets[i] = (int32_t)ag_pcg32_below(&rng, 9);
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss = ag_cross_entropy(ctx, model_forward(ctx, &m, ids, 2, 8, 1, NULL), targets);
    ag_params_zero_grad(m.params);
    ag_set_grad_ready_hook(ctx, count_ready, &rc);
    ag_backward(ctx, loss);
    int once = 1, final = 1;
    for (int i = 0; i < ps->count; i++) {
        const ag_tensor *p = ps->list[i];
        if (rc.times[i] != 1) {
            once = 0;
            printf("  %s named %d times\n", p->name, rc.times[i]);
        }
        if (memcmp(rc.seen + (p->grad - ps->grad), p->grad, p->size * sizeof(ag_real))) {
            final = 0;
            printf("  %s's gradient changed after it was named\n", p->name);
        }
    }
    CHECK(once, "%s: grad-ready hook names each of %d parameters once", label, ps->count);
    CHECK(final, "%s: grad-ready hook names a gradient only once it is final", label);
    CHECK(rc.outside == 0, "%s: grad-ready hook named %d leaves that are no parameters", label, rc.outside);
    int head = -1, emb = -1;
    for (int i = 0; i < ps->count; i++) {
        if (!strcmp(ps->list[i]->name, "out_head.weight"))
            head = rc.order[i];
        if (!strcmp(ps->list[i]->name, "pos_emb.weight"))
            emb = rc.order[i];
    }
    CHECK(head >= 0 && emb >= 0 && head < emb, "%s: the head's gradient final (%d) before the embedding's (%d)",
          label, head, emb);
    ag_ctx_free(ctx);
    free(rc.times);
    free(rc.order);
    free(rc.seen);
    model_free(&m);
}

/* Whether setting k holds the same value in a and b. */
static int same_setting(const run_settings *a, const run_settings *b, const run_recorded *k)
{
    const char *pa = (const char *)a + k->offset, *pb = (const char *)b + k->offset;
    if (k->kind == RUN_WORD || k->kind == RUN_PATH) {
        const char *wa = *(const char *const *)pa, *wb = *(const char *const *)pb;
        return wa == wb || (wa && wb && strcmp(wa, wb) == 0);
    }
    size_t size = k->kind == RUN_REAL ? sizeof(double) : k->kind == RUN_LONG ? sizeof(long)
                : k->kind == RUN_INT64 ? sizeof(int64_t) : sizeof(int);
    return memcmp(pa, pb, size) == 0;
}

/* A small model's checkpoint at path with the metadata pairs kv: a text
 * run's (the vocabulary of text), with its optimizer and generators. */
static void save_run(const char *path, const text_data *text, const char *const *kv, int n)
{
    model_config cfg = { ARCH_GPT, text->vocab_size, 1, 2, 4, 4, 0, 0 };
    model m;
    model_build(&m, &cfg);
    ag_pcg32 init, data_rng, dropout_rng;
    ag_pcg32_seed(&init, 3, 1);
    ag_pcg32_seed(&data_rng, 3, 3);
    ag_pcg32_seed(&dropout_rng, 3, 2);
    model_init(&m, &init);
    ag_optim *opt = ag_optim_adamw(m.params, 0.9, 0.999, 1e-8, 0);
    opt->step = 5;                      /* a run's state at step 5: one update a step */
    ckpt_state state = { opt, &data_rng, &dropout_rng, kv, n };
    ag_atomic_file out;
    char err[400];
    int rc = ckpt_save(&out, path, &m, "text", text->vocab, text->vocab_size, 5, &state, err, sizeof err);
    CHECK(rc == 0, "recorded settings: saving %s: %s", path, err);
    ag_optim_free(opt);
    model_free(&m);
}

/* A temporary directory holding a small text (text_path) and the name of
 * a checkpoint beside it (path), for the recorded-settings checks; 0, or
 * -1 (failed check) when it cannot be made. */
static int run_files(const char *what, char *dir, char *text_path, size_t tlen, char *path, size_t plen,
                     text_data *text)
{
    char err[400];
    if (!mkdtemp(dir)) {
        CHECK(0, "%s: no temporary directory", what);
        return -1;
    }
    snprintf(text_path, tlen, "%s/t.txt", dir);
    snprintf(path, plen, "%s/run.st", dir);
    FILE *f = fopen(text_path, "w");
    fputs("the quick brown fox jumps over the lazy dog\n", f);
    fclose(f);
    CHECK(text_load(text, text_path, err, sizeof err) == 0, "%s: %s", what, err);
    return 0;
}

/* What run_files made (the text read, the files, the directory), removed. */
static void run_files_remove(const char *dir, const char *text_path, const char *path, text_data *text)
{
    text_free(text);
    remove(text_path);
    remove(path);
    rmdir(dir);
}

/* The run settings a checkpoint records (run.h's RUN_RECORDED, which
 * `attograd train` and the playground both write and read): every one,
 * given a value other than its default, comes back from the file as it
 * was written; an absent one means what its row says; a required one
 * absent, or a bad value, is refused naming the key. */
static void check_recorded_settings(void)
{
    char dir[] = "/tmp/attograd-run-XXXXXX", text_path[64], path[64], err[400];
    text_data text;
    if (run_files("recorded settings", dir, text_path, sizeof text_path, path, sizeof path, &text))
        return;
    run_settings s = {
        .lr = 0.012345678901234567, .momentum = 0.77, .weight_decay = 1.0 / 3, .beta1 = 0.81, .beta2 = 0.9987,
        .eps = 3e-9, .clip = 0.25, .min_lr = 1e-5, .warmup = 7, .batch = 5, .seed = INT64_C(9199999999999999999), .steps = 99,
        .schedule = "cosine", .order = "sequential", .precision = "bf16", .schedule_steps = 77,
        .text_path = text_path, .micro_batch = 3, .log_path = "/runs/log.csv",
    };
    for (int i = 0; i < RUN_N_RECORDED; i++)
        CHECK(!same_setting(&s, &RUN_DEFAULTS, &RUN_RECORDED[i]), "recorded settings: %s is its default here",
              RUN_RECORDED[i].key);
    run_record r;
    run_record_write(&r, &s, &text);
    CHECK(r.n == RUN_N_RECORDED + 2, "recorded settings: %d pairs written, %d settings and the text's identity",
          r.n, RUN_N_RECORDED);
    save_run(path, &text, r.kv, r.n);
    ckpt ck;
    model m;
    run_settings back;
    memset(&back, 0, sizeof back);
    if (ckpt_open_hints(&ck, path, &m, NULL, err, sizeof err) == 0) {
        CHECK(run_settings_read(&back, &ck, err, sizeof err) == 0, "recorded settings: reading: %s", err);
        for (int i = 0; i < RUN_N_RECORDED; i++)
            CHECK(same_setting(&s, &back, &RUN_RECORDED[i]), "recorded settings: %s does not come back as written",
                  RUN_RECORDED[i].key);
        CHECK(text_check_unchanged(&ck, &text, 1, err, sizeof err) == 0, "recorded settings: text identity: %s", err);
        model_free(&m);
        ckpt_close(&ck);
    } else {
        CHECK(0, "recorded settings: %s", err);
    }

    /* without the keys whose absence has a meaning, and unset ones not written */
    const char *kv[2 * RUN_RECORD_MAX];
    int n = 0;
    for (int i = 0; i < r.n; i++)
        if (strcmp(r.kv[2 * i], "precision") && strcmp(r.kv[2 * i], "schedule_steps") &&
            strcmp(r.kv[2 * i], "text_path") && strcmp(r.kv[2 * i], "micro_batch") && strcmp(r.kv[2 * i], "log_path")) {
            kv[2 * n] = r.kv[2 * i];
            kv[2 * n + 1] = r.kv[2 * i + 1];
            n++;
        }
    save_run(path, &text, kv, n);
    if (ckpt_open_hints(&ck, path, &m, NULL, err, sizeof err) == 0) {
        CHECK(run_settings_read(&back, &ck, err, sizeof err) == 0, "recorded settings: absent keys: %s", err);
        CHECK(strcmp(back.precision, "fp32") == 0 && back.schedule_steps == s.steps && !back.text_path &&
                  back.micro_batch == 0 && !back.log_path,
              "recorded settings: absent keys read as precision %s, schedule_steps %ld (steps %ld), text_path %s, "
              "micro_batch %d, log_path %s", back.precision, back.schedule_steps, s.steps,
              back.text_path ? back.text_path : "NULL", back.micro_batch, back.log_path ? back.log_path : "NULL");
        model_free(&m);
        ckpt_close(&ck);
    }
    run_settings unset = s;
    unset.text_path = unset.log_path = NULL;
    unset.micro_batch = 0;
    run_record_write(&r, &unset, &text);
    CHECK(r.n == RUN_N_RECORDED - 3, "recorded settings: %d pairs for a run with no text, log or micro-batch", r.n);

    /* a required key absent (lr), a value not valid (order) */
    CHECK(strcmp(kv[0], "lr") == 0, "recorded settings: lr first (%s)", kv[0]);
    for (int bad = 0; bad < 2; bad++) {
        const char **from = bad ? kv : kv + 2;
        if (bad) {
            /* a value's control bytes reach the message shown, not as they are */
            for (int i = 0; i < n; i++)
                if (strcmp(kv[2 * i], "order") == 0)
                    kv[2 * i + 1] = "shuffled\x1b[2J\t\x7f\n";
            kv[1] = "0.1";
        }
        save_run(path, &text, from, bad ? n : n - 1);
        if (ckpt_open_hints(&ck, path, &m, NULL, err, sizeof err) == 0) {
            err[0] = 0;
            int rc = run_settings_read(&back, &ck, err, sizeof err);
            const char *want = bad ? "metadata order = 'shuffled\\x1b[2J\t\\x7f ' is not a valid value"
                                   : "metadata 'lr' is missing";
            int printable = 1;
            for (const unsigned char *c = (const unsigned char *)err; *c; c++)
                printable &= (*c >= 0x20 || *c == '\t') && *c != 0x7F;
            CHECK(rc == -1 && strstr(err, want) && printable, "recorded settings: %s: got '%s'", want, err);
            model_free(&m);
            ckpt_close(&ck);
        }
    }

    /* the library says what is wrong with the file, not which flag mends it
     * (the command line adds that from ckpt.heads_refused and ckpt.needs) */
    ckpt_hints hints = { 3, NULL, NULL, 0, 0 };
    err[0] = 0;
    int rc = ckpt_open_hints(&ck, path, &m, &hints, err, sizeof err);
    CHECK(rc == -1 && ck.heads_refused && ck.cfg.n_head == 2 && !ck.needs && strstr(err, "n_head") &&
              !strstr(err, "--"), "3 heads given for a file of 2: refused as a fact (%d, %d heads, '%s')",
          ck.heads_refused, ck.cfg.n_head, err);
    if (rc == 0) {
        model_free(&m);
        ckpt_close(&ck);
    }
    run_files_remove(dir, text_path, path, &text);
}

/* path rewritten with its metadata key set to value (the tensors as they
 * were): 0, or -1 with err. */
static int set_meta(const char *path, const char *key, const char *value, char *err, size_t errlen)
{
    ag_st_file *f = ag_st_load(path, err, errlen);
    if (!f)
        return -1;
    enum { MAX_META = 64, MAX_T = 64 };
    const char *meta[2 * MAX_META];
    ag_st_tensor ts[MAX_T];
    int nm = 0, nt = ag_st_count(f), rc = -1;
    for (int i = 0; i < ag_st_meta_count(f) && nm < MAX_META; i++, nm++) {
        meta[2 * nm] = ag_st_meta_key(f, i);
        meta[2 * nm + 1] = strcmp(meta[2 * nm], key) == 0 ? value : ag_st_meta(f, meta[2 * nm]);
    }
    if (nt <= MAX_T) {
        for (int i = 0; i < nt; i++)
            ts[i] = *ag_st_at(f, i);
        rc = ag_st_save(path, ts, nt, meta, nm, err, errlen);
    } else {
        snprintf(err, errlen, "%s: more than %d tensors", path, MAX_T);
    }
    ag_st_free(f);
    return rc;
}

/* A checkpoint refused for a value that holds a newline or a carriage
 * return is refused in one line, as checkpoint.h promises: the message
 * shows each of them as a space. */
static void check_message_one_line(void)
{
    char dir[] = "/tmp/attograd-line-XXXXXX", text_path[64], path[64], err[400];
    text_data text;
    if (run_files("one-line message", dir, text_path, sizeof text_path, path, sizeof path, &text))
        return;
    static const struct { const char *key, *value, *shown; } cases[] = {
        { "arch", "gpt\nrnn", "metadata arch is gpt rnn (expected" },
        { "qkv_bias", "true\r\nfalse", "metadata qkv_bias is true  false (expected" },
        { "d_model", "4\r4", "metadata d_model = '4 4' is not an integer" },
        { "format", "attograd/2\nx", "metadata format is 'attograd/2 x', which" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_config cfg = { ARCH_GPT, text.vocab_size, 1, 2, 4, 4, 0, 0 };
        model m;
        model_build(&m, &cfg);
        ag_atomic_file out;
        int rc = ckpt_save(&out, path, &m, "text", text.vocab, text.vocab_size, 1, NULL, err, sizeof err);
        model_free(&m);
        if (rc == 0)
            rc = set_meta(path, cases[i].key, cases[i].value, err, sizeof err);
        CHECK(rc == 0, "one-line message: writing %s: %s", path, err);
        ckpt ck;
        err[0] = 0;
        rc = ckpt_open_hints(&ck, path, &m, NULL, err, sizeof err);
        CHECK(rc == -1 && !strpbrk(err, "\n\r") && strstr(err, cases[i].shown) && strstr(err, path),
              "one-line message: metadata %s refused in one line naming the file (%d: '%s')", cases[i].key, rc, err);
        if (rc == 0) {
            model_free(&m);
            ckpt_close(&ck);
        }
    }
    run_files_remove(dir, text_path, path, &text);
}

/* One reading of a number for the flags, recorded settings and the page
 * (run_read_integer, run_read_real): the whole text, decimal, nothing
 * before it; what is past a type's range or too close to 0 said apart. */
static void check_number_reading(void)
{
    static const struct { const char *text; int r; long long v; } ints[] = {
        { "42", RUN_NUMBER, 42 }, { "-7", RUN_NUMBER, -7 }, { "+5", RUN_NUMBER, 5 }, { "-0", RUN_NUMBER, 0 },
        { "", RUN_NOT_NUMBER, 0 }, { " 5", RUN_NOT_NUMBER, 0 }, { "5 ", RUN_NOT_NUMBER, 0 },
        { "1e0", RUN_NOT_NUMBER, 0 }, { "1.0", RUN_NOT_NUMBER, 0 }, { "0x10", RUN_NOT_NUMBER, 0 },
        { "-", RUN_NOT_NUMBER, 0 }, { "abc", RUN_NOT_NUMBER, 0 },
        { "9223372036854775807", RUN_NUMBER, LLONG_MAX }, { "9223372036854775808", RUN_PAST_RANGE, LLONG_MAX },
        { "-99999999999999999999", RUN_PAST_RANGE, LLONG_MIN },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        long long v = 0;
        int r = run_read_integer(ints[i].text, &v);
        CHECK(r == ints[i].r && (r == RUN_NOT_NUMBER || v == ints[i].v), "integer '%s': %d, %lld", ints[i].text, r, v);
    }
    static const struct { const char *text; int r; double v; } reals[] = {
        { "0.5", RUN_NUMBER, 0.5 }, { "1e3", RUN_NUMBER, 1000 }, { "-2.5e-3", RUN_NUMBER, -2.5e-3 },
        { "", RUN_NOT_NUMBER, 0 }, { "\t1", RUN_NOT_NUMBER, 0 }, { "1x", RUN_NOT_NUMBER, 0 },
        { "0x1p3", RUN_NOT_NUMBER, 0 }, { "inf", RUN_NOT_NUMBER, 0 }, { "nan", RUN_NOT_NUMBER, 0 },
        { "1e400", RUN_PAST_RANGE, HUGE_VAL }, { "-1e400", RUN_PAST_RANGE, -HUGE_VAL },
        { "1e-320", RUN_NEAR_0, 0 }, { "1e-400", RUN_NEAR_0, 0 }, { "2.3e-308", RUN_NUMBER, 2.3e-308 },
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = 0;
        int r = run_read_real(reals[i].text, &v);
        CHECK(r == reals[i].r && (r == RUN_NOT_NUMBER || r == RUN_NEAR_0 || v == reals[i].v), "real '%s': %d, %g",
              reals[i].text, r, v);
    }
    double z = 1;
    CHECK(run_read_real("-0", &z) == RUN_NUMBER && z == 0 && !signbit(z), "real '-0' is read as 0 (%g)", z);
}

/* The ranges of the recorded settings (RUN_RECORDED's, which train's flags
 * take): a checkpoint holding a value out of one -- each number just below
 * and just above its range, a hex float -- is refused by run_settings_read
 * (the playground's Open checkpoint, train --resume) in one line naming the
 * key, the value and the range; each bound itself is accepted; and a cosine
 * schedule's warmup past its steps, or min_lr above lr, is refused as a new
 * run's flags are. */
static void check_recorded_ranges(void)
{
    char dir[] = "/tmp/attograd-range-XXXXXX", text_path[64], path[64], err[400];
    text_data text;
    if (run_files("recorded ranges", dir, text_path, sizeof text_path, path, sizeof path, &text))
        return;
    run_settings s = RUN_DEFAULTS;
    s.lr = 0.01;
    s.micro_batch = 4;
    s.text_path = text_path;
    /* rows RUN_N_RECORDED + 0, 1, 2: the cosine checks (out, out, in) */
    int refused = 0, accepted = 0, cases = 0;
    for (int i = 0; i < RUN_N_RECORDED + 3; i++) {
        const run_recorded *k = i < RUN_N_RECORDED ? &RUN_RECORDED[i] : NULL;
        if (k && (k->kind == RUN_WORD || k->kind == RUN_PATH))
            continue;
        char vals[5][40];
        int nv = 0;
        if (k) {
            int whole = k->kind != RUN_REAL;
            /* out: below, above, a hex float; in: each bound */
            snprintf(vals[nv++], 40, "%.17g", k->min_open ? k->min : k->min - (whole ? 1 : 0.5));
            if (k->max >= 1e300)
                snprintf(vals[nv++], 40, "1e309");
            else if (whole && k->max < 0x1p63)     /* the next integer exactly (9200000000000000001) */
                snprintf(vals[nv++], 40, "%lld", (long long)k->max + 1);
            else
                snprintf(vals[nv++], 40, whole ? "%.0f" : "%.17g", k->max * (1 + 1e-3));
            snprintf(vals[nv++], 40, "0x1");
            if (!k->min_open)
                snprintf(vals[nv++], 40, "%.17g", k->min);
            snprintf(vals[nv++], 40, whole ? "%.0f" : "%.17g", k->max);
        }
        for (int j = 0; j < (k ? nv : 1); j++) {
            int out = k ? j < 3 : 1;
            run_settings t = s;
            if (!k) {       /* cosine: warmup past the steps, min_lr above lr; or both at their limit (in) */
                t.schedule = "cosine";
                t.warmup = i == RUN_N_RECORDED ? t.schedule_steps + 1 : 0;
                t.min_lr = i == RUN_N_RECORDED + 1 ? t.lr * 2 : 0;
                if (i == RUN_N_RECORDED + 2) {
                    t.warmup = t.schedule_steps;
                    t.min_lr = t.lr;
                    out = 0;
                }
            }
            run_record r;
            run_record_write(&r, &t, &text);
            for (int p = 0; k && p < r.n; p++)
                if (strcmp(r.kv[2 * p], k->key) == 0)
                    r.kv[2 * p + 1] = vals[j];
            save_run(path, &text, r.kv, r.n);
            ckpt ck;
            model m;
            if (ckpt_open_hints(&ck, path, &m, NULL, err, sizeof err) != 0) {
                CHECK(0, "recorded ranges: %s", err);
                continue;
            }
            run_settings back;
            err[0] = 0;
            int rc = run_settings_read(&back, &ck, err, sizeof err);
            char want[400], allowed[96];
            if (k) {
                run_setting_allowed(k, allowed, sizeof allowed);
                snprintf(want, sizeof want, "metadata %s = '%s' is not a valid value (%s)", k->key, vals[j], allowed);
            } else {
                snprintf(want, sizeof want, "%s", i == RUN_N_RECORDED ? "metadata warmup = 401 is past schedule_steps = 400"
                                                                      : "metadata min_lr = 0.02 is above lr = 0.01");
            }
            cases++;
            if (out) {
                refused += rc == -1;
                CHECK(rc == -1 && strstr(err, want) && !strchr(err, '\n'), "recorded ranges: %s %s refused as '%s' (%d: '%s')",
                      k ? k->key : "cosine", k ? vals[j] : "", want, rc, err);
            } else {
                accepted += rc == 0;
                CHECK(rc == 0, "recorded ranges: %s %s, at its bound, accepted ('%s')", k ? k->key : "cosine",
                      k ? vals[j] : "", err);
            }
            model_free(&m);
            ckpt_close(&ck);
        }
    }
    CHECK(cases > 50 && refused + accepted == cases, "recorded ranges: %d of %d cases as they should be",
          refused + accepted, cases);
    run_files_remove(dir, text_path, path, &text);
}

/* step_update refuses what is not finite: a NaN, +inf or -inf anywhere in
 * any parameter's gradient (first, inner and last elements, the ragged
 * tail a vector loop leaves) stops the step before any update and names
 * that parameter; finite extremes (the largest float, subnormals, -0) pass;
 * a weight the update leaves infinite is named after it. */
static void check_step_guards(void)
{
    model_config cfg = { ARCH_GPT, 9, 2, 3, 6, 8, 0, 0 };
    model m;
    build_model(&m, &cfg, 4);
    ag_params *ps = m.params;
    ag_optim *sgd = ag_optim_sgd(ps, 0, 0);
    ag_real *before = malloc(ps->total * sizeof(ag_real));
    const ag_real bad[3] = { NAN, INFINITY, -INFINITY };
    int caught = 0, named = 0, untouched = 0, cases = 0;
    for (int p = 0; p < ps->count; p += ps->count / 3 > 0 ? ps->count / 3 : 1) {
        const ag_tensor *t = ps->list[p];
        const size_t where[4] = { 0, t->size / 2, t->size - 1, t->size > 17 ? t->size - 17 : 0 };
        for (int w = 0; w < 4; w++)
            for (int b = 0; b < 3; b++) {
                ag_params_zero_grad(ps);
                t->grad[where[w]] = bad[b];
                memcpy(before, ps->data, ps->total * sizeof(ag_real));
                step_result r = step_update(ps, sgd, 1.0, 1.0, 0.1);
                cases++;
                caught += r.status == STEP_BAD_GRAD;
                named += r.bad == t;
                untouched += memcmp(before, ps->data, ps->total * sizeof(ag_real)) == 0;
            }
    }
    CHECK(caught == cases && named == cases && untouched == cases,
          "a NaN or infinity in a gradient: refused %d, named %d, no update %d of %d", caught, named, untouched, cases);
    ag_params_zero_grad(ps);
    ag_tensor *last = ps->list[ps->count - 1];
    last->grad[0] = FLT_MAX;
    last->grad[last->size - 1] = -0.0f;
    ps->list[0]->grad[0] = FLT_MIN / 8;                      /* subnormal */
    step_result ok = step_update(ps, sgd, 1.0, 0, 0);      /* lr 0: the weights stay finite */
    CHECK(ok.status == STEP_OK, "finite extremes in the gradients pass (status %d)", (int)ok.status);
    CHECK(step_update(ps, sgd, NAN, 0, 0.1).status == STEP_BAD_LOSS, "a NaN loss is refused");
    ag_params_zero_grad(ps);
    ag_tensor *mid = ps->list[ps->count / 2];
    mid->data[mid->size - 1] = INFINITY;
    step_result up = step_update(ps, sgd, 1.0, 0, 0.1);
    CHECK(up.status == STEP_BAD_UPDATE && up.bad == mid, "an infinite weight after the update is named (status %d)",
          (int)up.status);
    free(before);
    ag_optim_free(sgd);
    model_free(&m);
}

/* The model library's misuses are refused in a line naming the problem
 * (an error handler that jumps back sees each one: expect_error.h). */
static void check_misuse(void)
{
    model_config cfg = { ARCH_GPT, 9, 2, 3, 6, 8, 0, 0 }, other = { ARCH_GPT, 9, 1, 3, 6, 8, 0, 0 };
    model m, o;
    build_model(&m, &cfg, 4);
    build_model(&o, &other, 4);
    ag_ctx *ctx = ag_ctx_new();
    int32_t ids[2 * 9] = { 0 };
    model_cache c;
    model_cache_init(&c, &m, 1);
    ag_params *ps = ag_params_new();
    nn_mha causal = nn_mha_new(ps, "a", 6, 2, 0, 0, 1), open = nn_mha_new(ps, "b", 6, 2, 0, 0, 0);
    ag_params_alloc(ps);
    ag_set_error_handler(record_error, NULL);
    EXPECT_ERROR((void)model_forward(ctx, &m, ids, 1, 9, 0, NULL), "9 tokens but the model's context is 8");
    EXPECT_ERROR((void)model_forward(ctx, &m, ids, 1, 0, 0, NULL), "0 tokens but the model's context is 8");
    EXPECT_ERROR((void)model_forward_cached(ctx, &m, &c, ids, 2, 1), "2 x 1 tokens after 0 cached positions");
    EXPECT_ERROR((void)model_forward_cached(ctx, &m, &c, ids, 1, 9), "1 x 9 tokens after 0 cached positions");
    EXPECT_ERROR(model_copy_weights(&m, &o), "model_copy_weights: the models differ");
    EXPECT_ERROR((void)nn_mha_new(ps, "c", 6, 4, 0, 0, 1), "d_model 6 is not divisible by 4 heads");
    ag_tensor *x = ag_new(ctx, 3, (int[]){ 1, 2, 6 }), *flat = ag_new(ctx, 2, (int[]){ 2, 6 });
    ag_tensor *kv = ag_new(ctx, 3, (int[]){ 2, 2, 6 }), *cache = ag_new(ctx, 3, (int[]){ 1, 4, 6 });
    EXPECT_ERROR((void)nn_mha_forward(ctx, &causal, flat, NULL, 0, NULL), "input [2,6] is not [B,T,6]");
    EXPECT_ERROR((void)nn_mha_forward(ctx, &open, x, kv, 0, NULL), "keys/values [2,2,6] do not fit queries [1,2,6]");
    EXPECT_ERROR((void)nn_mha_forward_cached(ctx, &open, x, cache, cache, 0), "serves causal attention only");
    ag_set_error_handler(NULL, NULL);
    ag_params_free(ps);
    model_cache_free(&c);
    ag_ctx_free(ctx);
    model_free(&m);
    model_free(&o);
}

int main(void)
{
    ag_pcg32_seed(&rng, 99, 1);
    check_step_guards();
    check_misuse();
    printf("model gradient checks in %s precision\n", AG_PRECISION_NAME);
    check_mha("mha causal, 1 head", (mha_case){ 1, 0, 1, 0, 0 });
    check_mha("mha causal, 3 heads, qkv bias", (mha_case){ 3, 1, 1, 0, 0 });
    check_mha("mha non-causal, 2 heads", (mha_case){ 2, 0, 0, 0, 0 });
    check_mha("mha cross-attention, 3 heads, qkv bias", (mha_case){ 3, 1, 0, 1, 0 });
    check_mha("mha causal, 2 heads, dropout 0.3", (mha_case){ 2, 0, 1, 0, 0.3 });
    check_fused_equals_explicit("fused attention, causal, 4 heads", (mha_case){ 4, 0, 1, 0, 0 }, 3, 9, 16);
    check_fused_equals_explicit("fused attention, non-causal, 2 heads, qkv bias", (mha_case){ 2, 1, 0, 0, 0 }, 2,
                                7, 10);
    check_fused_equals_explicit("fused attention, causal, 3 heads, dropout 0.25", (mha_case){ 3, 0, 1, 0, 0.25 },
                                2, 12, 12);
    check_fused_equals_explicit("fused attention, T = 1", (mha_case){ 2, 1, 1, 0, 0 }, 3, 1, 8);
    /* large enough to run on several threads */
    check_fused_equals_explicit("fused attention, causal, 4 heads, T = 70", (mha_case){ 4, 0, 1, 0, 0.1 }, 8, 70,
                                64);
    check_one_hot_gradient(5);
    check_one_hot_gradient(68);
    check_model("gpt step", ARCH_GPT, 0, 0);
    check_model("gpt step, qkv bias, dropout 0.2", ARCH_GPT, 1, 0.2);
    check_model("attn-only step", ARCH_ATTN_ONLY, 1, 0);
    check_grad_ready("gpt step", 0, 0);
    check_grad_ready("gpt step, qkv bias, dropout 0.2", 1, 0.2);
    check_recorded_settings();
    check_message_one_line();
    check_recorded_ranges();
    check_number_reading();

    /* The causal mask means position t never sees t+1..: changing the last
     * token must leave the logits of every earlier position unchanged. */
    model_config cfg = { ARCH_GPT, 9, 2, 3, 6, 8, 0, 0 };
    model m;
    build_model(&m, &cfg, 4);
    for (size_t i = 0; i < m.params->total; i++)
        m.params->data[i] += (ag_real)(0.3 * ag_pcg32_normal(&rng));
    ag_ctx *ctx = ag_ctx_new();
    int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, b[8] = { 1, 2, 3, 4, 5, 6, 7, 0 };
    ag_tensor *la = model_forward(ctx, &m, a, 1, 8, 0, NULL), *lb = model_forward(ctx, &m, b, 1, 8, 0, NULL);
    int same_prefix = memcmp(la->data, lb->data, 7 * 9 * sizeof(ag_real)) == 0;
    int last_differs = memcmp(la->data + 7 * 9, lb->data + 7 * 9, 9 * sizeof(ag_real)) != 0;
    CHECK(same_prefix && last_differs, "causal: earlier logits unchanged (%d), last changed (%d)", same_prefix,
          last_differs);
    ag_tensor *w[2];
    model_forward(ctx, &m, a, 1, 8, 0, w);
    int upper_zero = 1, rows_sum_one = 1;
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < 8; i++) {
            double s = 0;
            for (int j = 0; j < 8; j++) {
                ag_real v = w[1]->data[(h * 8 + i) * 8 + j];
                s += v;
                if (j > i && v != 0)
                    upper_zero = 0;
            }
            if (fabs(s - 1) > 1e-5)
                rows_sum_one = 0;
        }
    CHECK(w[1]->ndim == 4 && w[1]->shape[1] == 3 && upper_zero && rows_sum_one,
          "attention weights: [B,H,T,T], zero above the diagonal, rows sum to 1");
    /* the whole model on the op-by-op attention (model.explicit_attention,
     * which the benchmarks compare against): the fused op's logits and weights */
    ag_tensor *we[2];
    m.explicit_attention = 1;
    ag_tensor *le = model_forward(ctx, &m, a, 1, 8, 0, we);
    m.explicit_attention = 0;
    double dl = max_rel_diff(le->data, la->data, 8 * 9), dw = 0;
    for (int l = 0; l < 2; l++)
        dw = fmax(dw, max_rel_diff(we[l]->data, w[l]->data, 3 * 8 * 8));
    CHECK(dl <= TOL_PATHS && dw <= TOL_PATHS, "explicit attention model: logits %.2g, weights %.2g from the fused op's",
          dl, dw);
    ag_ctx_free(ctx);
    model_free(&m);
    check_cache(ARCH_GPT);
    check_cache(ARCH_ATTN_ONLY);
    check_inference_memory();
    return check_done();
}
