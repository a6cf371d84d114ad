/*
 * walkthrough.c - the tutorials' worked examples, recomputed step by step
 * with the engine's ops, each step written with the function that computes
 * it: `attograd walkthrough` writes them to standard output, the browser
 * playground into its "Worked examples" view (walkthrough.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "walkthrough.h"

static FILE *out;       /* where walkthrough_write writes */

/* ---- printing ------------------------------------------------------------ */

static void print_row(const ag_real *v, int n, int dec)
{
    fprintf(out, "[");
    for (int j = 0; j < n; j++) {
        double x = (double)v[j];
        if (isinf(x))
            fprintf(out, "%s%*s", j ? ", " : "", dec + 3, x < 0 ? "-inf" : "inf");
        else
            fprintf(out, "%s%*.*f", j ? ", " : "", dec + 3, dec, x);
    }
    fprintf(out, "]");
}

/* rows x cols starting at v, one row per line under the label. */
static void print_matrix(const char *label, const ag_real *v, int rows, int cols, int dec)
{
    fprintf(out, "    %s\n", label);
    for (int i = 0; i < rows; i++) {
        fprintf(out, "      ");
        print_row(v + (size_t)i * cols, cols, dec);
        fprintf(out, "\n");
    }
}

static void print_vector(const char *label, const ag_tensor *t, int dec)
{
    fprintf(out, "    %s ", label);
    print_row(t->data, (int)t->size, dec);
    fprintf(out, "\n");
}

static void step(const char *what, const char *fns)
{
    fprintf(out, "  %-58s [%s]\n", what, fns);
}

static void section(const char *title, const char *source)
{
    fprintf(out, "\n== %s ==\n   (%s)\n", title, source);
}

static ag_tensor *from_doubles(ag_ctx *ctx, int ndim, const int *shape, const double *v)
{
    ag_tensor *t = ag_new(ctx, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (ag_real)v[i];
    return t;
}

static double max_abs_diff(const ag_tensor *a, const ag_tensor *b)
{
    double m = 0;
    for (size_t i = 0; i < a->size; i++) {
        double d = fabs((double)a->data[i] - (double)b->data[i]);
        m = d > m || isnan(d) ? d : m;
    }
    return m;
}

/* 1 above the diagonal: key j is in query i's future (torch.triu(ones, 1)),
 * the same mask MultiHeadAttention uses. */
static ag_tensor *future_mask(ag_ctx *ctx, int T) { return nn_causal_mask(ctx, T, T); }

/* Lower-triangular ones (torch.tril(ones)): the future zeroed in the ones. */
static ag_tensor *tril_ones(ag_ctx *ctx, int T)
{
    return ag_masked_fill(ctx, ag_full(ctx, 2, (int[]){T, T}, 1), future_mask(ctx, T), 0);
}

/* Each row divided by its sum.  The engine has no division op, so 1/s is
 * exp(-log s), broadcast over the row. */
static ag_tensor *normalize_rows(ag_ctx *ctx, ag_tensor *a)
{
    ag_tensor *sums = ag_sum(ctx, a, -1, 1);
    return ag_mul(ctx, a, ag_exp(ctx, ag_scale(ctx, ag_log(ctx, sums), -1)));
}

/* ---- the examples' data ---------------------------------------------------- */

/* "Your journey starts with one step": one 3-d embedding per word. */
static const double JOURNEY[6][3] = {
    { 0.43, 0.15, 0.89 }, { 0.55, 0.87, 0.66 }, { 0.57, 0.85, 0.64 },
    { 0.22, 0.58, 0.33 }, { 0.77, 0.25, 0.10 }, { 0.05, 0.80, 0.55 },
};
static const char *const JOURNEY_WORDS[6] = { "Your", "journey", "starts", "with", "one", "step" };

/* The trainable-weights example's projections, x W layout [d_in 3, d_out 2]
 * (torch.rand after torch.manual_seed(123), to 4 decimals as the book prints). */
static const double WQ_A[3][2] = { { 0.2961, 0.5166 }, { 0.2517, 0.6886 }, { 0.0740, 0.8665 } };
static const double WK_A[3][2] = { { 0.1366, 0.1025 }, { 0.1841, 0.7264 }, { 0.3153, 0.6871 } };
static const double WV_A[3][2] = { { 0.0756, 0.1966 }, { 0.3164, 0.4017 }, { 0.1186, 0.8274 } };

/* The causal-attention example's projections: the weights of the notebook's
 * three nn.Linear(3, 2, bias=False) after torch.manual_seed(789), transposed
 * to x W layout.  With them the engine reproduces the notebook's matrices. */
static const double WQ_B[3][2] = { { 0.31605908, -0.16828540 }, { 0.45680857, -0.33787704 }, { 0.51183486, -0.09177387 } };
static const double WK_B[3][2] = { { 0.40580583, 0.21336074 }, { -0.47042054, -0.26005065 }, { 0.23680520, -0.51054299 } };
static const double WV_B[3][2] = { { 0.25256988, 0.51910740 }, { -0.14147827, -0.08516758 }, { -0.19618134, -0.20432705 } };

/* ---- 1. dot products, softmax, weighted sum ------------------------------- */

static void hello_shiny_sun(ag_ctx *ctx)
{
    static const double E[3][3] = { { 0.34, 0.22, 0.54 }, { 0.53, 0.34, 0.98 }, { 0.29, 0.54, 0.93 } };
    section("1. \"Hello shiny sun!\": self-attention without weights, query = \"shiny\"",
            "from: 4. Attention Mechanisms, Calculating Attention Weights: A Step-by-Step Example");
    ag_reset(ctx);
    ag_tensor *emb = from_doubles(ctx, 2, (int[]){3, 3}, &E[0][0]);
    print_matrix("embeddings (Hello, shiny, sun)", emb->data, 3, 3, 2);

    step("step 1: scores w_j = x_shiny . x_j", "ag_slice, ag_transpose, ag_matmul");
    ag_tensor *query = ag_slice(ctx, emb, 0, 1, 1);                                  /* [1,3] */
    ag_tensor *scores = ag_matmul(ctx, query, ag_transpose(ctx, emb, 0, 1));         /* [1,3] */
    print_vector("attention scores:", scores, 4);

    step("step 2: weights a_j = exp(w_j) / sum_k exp(w_k)", "ag_softmax");
    ag_tensor *weights = ag_softmax(ctx, scores, -1);
    print_vector("attention weights:", weights, 4);

    step("step 3: weighted embeddings a_j x_j, summed over j", "ag_transpose, ag_mul, ag_sum");
    ag_tensor *weighted = ag_mul(ctx, ag_transpose(ctx, weights, 0, 1), emb);       /* [3,1]*[3,3] */
    print_matrix("weighted embeddings (Hello, shiny, sun)", weighted->data, 3, 3, 4);
    ag_tensor *context = ag_sum(ctx, weighted, 0, 0);
    print_vector("context vector:", context, 4);
    ag_tensor *direct = ag_matmul(ctx, weights, emb);
    fprintf(out, "    the same as one matmul a E [ag_matmul]: max |difference| %.1e\n", max_abs_diff(context, direct));
    fprintf(out, "    (the tutorial rounds every intermediate to 4 decimals and so prints\n"
           "     [0.3992, 0.3858, 0.8610]; unrounded the context is the one above)\n");
}

/* ---- 2. trainable query, key and value projections ------------------------ */

static void journey_trainable(ag_ctx *ctx)
{
    section("2. \"Your journey starts with one step\": trainable W_query, W_key, W_value",
            "from: Build a LLM from scratch ch. 3 notebook, Self-Attention with Weights");
    ag_params *ps = ag_params_new();
    ag_tensor *Wq = ag_params_add(ps, "W_query", 2, (int[]){3, 2});
    ag_tensor *Wk = ag_params_add(ps, "W_key", 2, (int[]){3, 2});
    ag_tensor *Wv = ag_params_add(ps, "W_value", 2, (int[]){3, 2});
    ag_params_alloc(ps);
    for (int i = 0; i < 6; i++) {
        Wq->data[i] = (ag_real)WQ_A[i / 2][i % 2];
        Wk->data[i] = (ag_real)WK_A[i / 2][i % 2];
        Wv->data[i] = (ag_real)WV_A[i / 2][i % 2];
    }
    ag_reset(ctx);
    ag_tensor *X = from_doubles(ctx, 2, (int[]){6, 3}, &JOURNEY[0][0]);
    print_matrix("W_query (parameter, x W layout)", Wq->data, 3, 2, 4);
    print_matrix("W_key", Wk->data, 3, 2, 4);
    print_matrix("W_value", Wv->data, 3, 2, 4);

    step("query_2 = x_journey W_query", "ag_slice, ag_matmul");
    ag_tensor *q2 = ag_matmul(ctx, ag_slice(ctx, X, 0, 1, 1), Wq);
    print_vector("query_2:", q2, 4);
    step("keys = X W_key, values = X W_value", "ag_matmul");
    ag_tensor *keys = ag_matmul(ctx, X, Wk), *values = ag_matmul(ctx, X, Wv);
    print_matrix("keys", keys->data, 6, 2, 4);
    print_matrix("values", values->data, 6, 2, 4);
    step("scores_2 = query_2 keys^T", "ag_transpose, ag_matmul");
    ag_tensor *scores = ag_matmul(ctx, q2, ag_transpose(ctx, keys, 0, 1));
    print_vector("attention scores:", scores, 4);
    step("weights_2 = softmax(scores_2 / sqrt(d_k)), d_k = 2", "ag_scale, ag_softmax");
    ag_tensor *weights = ag_softmax(ctx, ag_scale(ctx, scores, (ag_real)(1 / sqrt(2.0))), -1);
    print_vector("attention weights:", weights, 4);
    step("context_2 = weights_2 values", "ag_matmul");
    ag_tensor *context = ag_matmul(ctx, weights, values);
    print_vector("context vector for journey:", context, 4);

    step("trainable: d(sum context_2)/dW through softmax", "ag_sum_all, ag_backward");
    ag_params_zero_grad(ps);
    ag_backward(ctx, ag_sum_all(ctx, context));
    print_matrix("dL/dW_query", Wq->grad, 3, 2, 4);
    print_matrix("dL/dW_key", Wk->grad, 3, 2, 4);
    print_matrix("dL/dW_value", Wv->grad, 3, 2, 4);
    ag_params_free(ps);
}

/* ---- 3. the causal mask two ways; 4. dropout ------------------------------ */

static void causal_mask(ag_ctx *ctx)
{
    section("3. Causal mask two ways: multiply + renormalize, or -inf before softmax",
            "from: ch. 3 notebook, Causal-Attention; weights of its nn.Linear after manual_seed(789)");
    ag_reset(ctx);
    ag_tensor *X = from_doubles(ctx, 2, (int[]){6, 3}, &JOURNEY[0][0]);
    ag_tensor *Q = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &WQ_B[0][0]));
    ag_tensor *K = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &WK_B[0][0]));
    ag_tensor *V = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &WV_B[0][0]));
    ag_real scale = (ag_real)(1 / sqrt(2.0));

    step("scores = Q K^T, weights = softmax(scores / sqrt(2))", "ag_matmul, ag_transpose, ag_scale, ag_softmax");
    ag_tensor *scores = ag_matmul(ctx, Q, ag_transpose(ctx, K, 0, 1));
    ag_tensor *weights = ag_softmax(ctx, ag_scale(ctx, scores, scale), -1);
    print_matrix("attention weights (no mask)", weights->data, 6, 6, 6);

    step("(a) weights * tril(ones): the future zeroed", "ag_masked_fill, ag_mul");
    ag_tensor *mask_ones = tril_ones(ctx, 6);
    print_matrix("simple mask", mask_ones->data, 6, 6, 0);
    ag_tensor *masked = ag_mul(ctx, weights, mask_ones);
    step("(a) renormalize: each row / its sum", "ag_sum, ag_log, ag_exp, ag_mul");
    ag_tensor *wa = normalize_rows(ctx, masked);
    print_matrix("renormalized masked weights", wa->data, 6, 6, 6);

    step("(b) scores with -inf above the diagonal", "ag_masked_fill");
    ag_tensor *inf_scores = ag_masked_fill(ctx, scores, future_mask(ctx, 6), -INFINITY);
    print_matrix("masked scores", inf_scores->data, 6, 6, 6);
    step("(b) softmax(masked scores / sqrt(2)): exp(-inf) = 0", "ag_scale, ag_softmax");
    ag_tensor *wb = ag_softmax(ctx, ag_scale(ctx, inf_scores, scale), -1);
    print_matrix("masked weights", wb->data, 6, 6, 6);
    fprintf(out, "    (a) and (b) agree: max |difference| %.1e\n", max_abs_diff(wa, wb));

    step("context = masked weights V", "ag_matmul");
    ag_tensor *ca = ag_matmul(ctx, wa, V), *cb = ag_matmul(ctx, wb, V);
    print_matrix("context matrix from (b)", cb->data, 6, 2, 4);
    fprintf(out, "    from (a) the same: max |difference| %.1e\n", max_abs_diff(ca, cb));
}

/* softmax(mask(Q K^T) / sqrt(2)) of section 3, for the dropout example. */
static ag_tensor *causal_weights(ag_ctx *ctx)
{
    ag_tensor *X = from_doubles(ctx, 2, (int[]){6, 3}, &JOURNEY[0][0]);
    ag_tensor *Q = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &WQ_B[0][0]));
    ag_tensor *K = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &WK_B[0][0]));
    ag_tensor *s = ag_masked_fill(ctx, ag_matmul(ctx, Q, ag_transpose(ctx, K, 0, 1)), future_mask(ctx, 6), -INFINITY);
    return ag_softmax(ctx, ag_scale(ctx, s, (ag_real)(1 / sqrt(2.0))), -1);
}

static void dropout(ag_ctx *ctx)
{
    ag_reset(ctx);
    section("4. Dropout on the attention weights, p = 0.5",
            "from: ch. 3 notebook, Dropout; 4. Attention Mechanisms, Masking Additional Attention Weights");
    ag_tensor *wb = causal_weights(ctx);
    print_matrix("masked weights (section 3)", wb->data, 6, 6, 6);
    step("zero each weight with probability p, scale the rest 1/(1-p)", "ag_dropout");
    ag_pcg32_seed(ag_dropout_rng(ctx), 123, 0);
    ag_tensor *dropped = ag_dropout(ctx, wb, (ag_real)0.5, 1);
    print_matrix("dropout(masked weights)", dropped->data, 6, 6, 6);
    int kept = 0, zeroed = 0;
    for (int i = 0; i < 36; i++)
        if (wb->data[i] != 0 && dropped->data[i] != 0)
            kept++;
        else if (wb->data[i] != 0)
            zeroed++;
    fprintf(out, "    %d of 21 weights kept (each exactly doubled), %d zeroed; masked ones stay 0.\n"
           "    Which ones survive depends on the generator (attograd's PCG32, seeded 123),\n"
           "    so the pattern differs from the notebook's; the rule is the same.\n", kept, zeroed);
    fprintf(out, "    Without training (training = 0) dropout is the identity.\n");
}

/* ---- 5. heads: split, attend, merge, project ------------------------------ */

static void multi_head(ag_ctx *ctx)
{
    section("5. Two heads: split d_out = 4 into 2 heads of 2, attend, merge, project",
            "from: ch. 3 notebook and 4. Attention Mechanisms, Multi-Head Attention");
    enum { B = 2, T = 6, D_IN = 3, D = 4, H = 2, HD = 2 };
    /* W = [W_A | W_B]: head 0 projects with section 2's weights, head 1 with
     * section 3's, so each head is a single-head attention seen above. */
    double wq[D_IN][D], wk[D_IN][D], wv[D_IN][D];
    for (int i = 0; i < D_IN; i++)
        for (int j = 0; j < HD; j++) {
            wq[i][j] = WQ_A[i][j], wq[i][HD + j] = WQ_B[i][j];
            wk[i][j] = WK_A[i][j], wk[i][HD + j] = WK_B[i][j];
            wv[i][j] = WV_A[i][j], wv[i][HD + j] = WV_B[i][j];
        }
    ag_reset(ctx);
    double xb[B][T][D_IN];
    for (int b = 0; b < B; b++)
        memcpy(xb[b], JOURNEY, sizeof JOURNEY);
    ag_tensor *x = from_doubles(ctx, 3, (int[]){B, T, D_IN}, &xb[0][0][0]);
    fprintf(out, "    batch: the journey sentence twice, shape [2,6,3]\n");

    step("Q, K, V = x W, shape [2,6,4]", "ag_matmul");
    ag_tensor *Q = ag_matmul(ctx, x, from_doubles(ctx, 2, (int[]){D_IN, D}, &wq[0][0]));
    ag_tensor *K = ag_matmul(ctx, x, from_doubles(ctx, 2, (int[]){D_IN, D}, &wk[0][0]));
    ag_tensor *V = ag_matmul(ctx, x, from_doubles(ctx, 2, (int[]){D_IN, D}, &wv[0][0]));
    step("split: view [2,6,2,2], then swap T and H: [2,2,6,2]", "ag_reshape, ag_transpose");
    ag_tensor *heads[3] = { Q, K, V };
    for (int k = 0; k < 3; k++)
        heads[k] = ag_transpose(ctx, ag_reshape(ctx, heads[k], 4, (int[]){B, T, H, HD}), 1, 2);
    print_matrix("queries of head 0 (= section 2's X W_query)", heads[0]->data, T, HD, 4);
    print_matrix("queries of head 1 (= section 3's Q)", heads[0]->data + T * HD, T, HD, 4);
    step("per head: softmax(mask(Q K^T) / sqrt(2)) V", "ag_matmul, ag_masked_fill, ag_softmax");
    ag_tensor *s = ag_matmul(ctx, heads[0], ag_transpose(ctx, heads[1], 2, 3));        /* [2,2,6,6] */
    s = ag_masked_fill(ctx, s, future_mask(ctx, T), -INFINITY);
    ag_tensor *w = ag_softmax(ctx, ag_scale(ctx, s, (ag_real)(1 / sqrt((double)HD))), -1);
    ag_tensor *ctxv = ag_matmul(ctx, w, heads[2]);                                      /* [2,2,6,2] */
    step("merge: swap back [2,6,2,2], view [2,6,4]", "ag_transpose, ag_reshape");
    ag_tensor *merged = ag_reshape(ctx, ag_transpose(ctx, ctxv, 1, 2), 3, (int[]){B, T, D});
    print_matrix("merged context, batch 0: head 0 | head 1 (= section 3's context)", merged->data, T, D, 4);

    step("the same with the library's MultiHeadAttention", "nn_mha_forward");
    ag_params *ps = ag_params_new();
    nn_mha mha = nn_mha_new(ps, "attn", D, H, 0, 0.0, 1);
    ag_params_alloc(ps);
    /* nn.Linear keeps W as [out, in]; the input here has d_in = 3, so feed
     * x padded with a zero column to d_model = 4. */
    double(*src[3])[D] = { wq, wk, wv };
    nn_linear *dst[3] = { &mha.W_query, &mha.W_key, &mha.W_value };
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < D; o++)
            for (int i = 0; i < D; i++)
                dst[k]->weight->data[o * D + i] = (ag_real)(i < D_IN ? src[k][i][o] : 0);
    for (int o = 0; o < D; o++)
        mha.out_proj.weight->data[o * D + o] = 1;   /* identity out_proj, zero bias */
    double xp[B][T][D] = { { { 0 } } };
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D_IN; i++)
                xp[b][t][i] = JOURNEY[t][i];
    ag_tensor *y = nn_mha_forward(ctx, &mha, from_doubles(ctx, 3, (int[]){B, T, D}, &xp[0][0][0]), NULL, 0, NULL);
    fprintf(out, "    with out_proj = identity it returns the merged context: max |difference| %.1e\n",
           max_abs_diff(y, merged));
    fprintf(out, "    (out_proj, a trained d_out x d_out Linear, mixes the heads' outputs)\n");
    ag_params_free(ps);
}

/* Sections 6 and 7 draw their inputs from PCG32 seeded 1337, each on its
 * own stream, into an emptied arena. */
static ag_pcg32 seeded_section(ag_ctx *ctx, uint64_t stream)
{
    ag_reset(ctx);
    ag_pcg32 g;
    ag_pcg32_seed(&g, 1337, stream);
    return g;
}

/* ---- 6. bag of words: the running mean three ways ------------------------- */

static void bag_of_words(ag_ctx *ctx)
{
    section("6. Bag of words: x_bow[b,t] = mean of x[b,0..t], three ways",
            "from: self_attn.sync.py, notes on Karpathy's lecture");
    enum { B = 4, T = 8, C = 2 };
    ag_pcg32 g = seeded_section(ctx, 0);
    ag_tensor *x = ag_new(ctx, 3, (int[]){B, T, C});
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (ag_real)ag_pcg32_uniform(&g);
    fprintf(out, "    x: [4,8,2] uniform in [0,1) (PCG32 seeded 1337); batch 0 shown\n");
    print_matrix("x[0]", x->data, T, C, 4);

    step("(1) loop: for t, mean of x[:, 0..t]", "ag_slice, ag_mean, ag_concat");
    ag_tensor *rows[T];
    for (int t = 0; t < T; t++)
        rows[t] = ag_mean(ctx, ag_slice(ctx, x, 1, 0, t + 1), 1, 1);                 /* [B,1,C] */
    ag_tensor *xbow1 = ag_concat(ctx, rows, T, 1);
    print_matrix("xbow[0] by loop", xbow1->data, T, C, 4);

    step("(2) matmul: tril(ones) rows / row sums, [8,8] @ [4,8,2]", "ag_masked_fill, ag_sum, ag_matmul");
    ag_tensor *avg = normalize_rows(ctx, tril_ones(ctx, T));
    print_matrix("averaging matrix", avg->data, T, T, 4);
    ag_tensor *xbow2 = ag_matmul(ctx, avg, x);
    fprintf(out, "    xbow by matmul: max |difference| to the loop %.1e\n", max_abs_diff(xbow2, xbow1));

    step("(3) softmax of zeros with -inf above the diagonal", "ag_masked_fill, ag_softmax, ag_matmul");
    ag_tensor *wei = ag_softmax(ctx, ag_masked_fill(ctx, ag_new(ctx, 2, (int[]){T, T}), future_mask(ctx, T),
                                                    -INFINITY), -1);
    ag_tensor *xbow3 = ag_matmul(ctx, wei, x);
    fprintf(out, "    softmax weights = the averaging matrix: max |difference| %.1e\n", max_abs_diff(wei, avg));
    fprintf(out, "    xbow by masked softmax: max |difference| to the loop %.1e\n", max_abs_diff(xbow3, xbow1));
    fprintf(out, "    Attention is this average with data-dependent scores in place of the zeros.\n");
}

/* ---- 7. why divide by sqrt(head_size) ------------------------------------ */

static void scaling(ag_ctx *ctx)
{
    section("7. Scaling by 1/sqrt(head_size): unit-variance scores, a softmax that does not saturate",
            "from: self_attn.sync.py, Scaled attention");
    enum { B = 4, T = 8, HS = 16 };
    ag_pcg32 g = seeded_section(ctx, 1);
    ag_tensor *q = ag_new(ctx, 3, (int[]){B, T, HS}), *k = ag_new(ctx, 3, (int[]){B, T, HS});
    for (size_t i = 0; i < q->size; i++) {
        q->data[i] = (ag_real)ag_pcg32_normal(&g);
        k->data[i] = (ag_real)ag_pcg32_normal(&g);
    }
    step("w = q k^T for q, k ~ N(0, 1), head_size 16", "ag_transpose, ag_matmul");
    ag_tensor *w = ag_matmul(ctx, q, ag_transpose(ctx, k, 1, 2));
    ag_tensor *ws = ag_scale(ctx, w, (ag_real)(1 / sqrt((double)HS)));
    ag_tensor *vars[2] = { w, ws };
    double var[2];
    for (int i = 0; i < 2; i++) {
        ag_tensor *d = ag_sub(ctx, vars[i], ag_mean_all(ctx, vars[i]));
        var[i] = (double)ag_mean_all(ctx, ag_mul(ctx, d, d))->data[0];
    }
    fprintf(out, "    var(w) = %.2f (about head_size); var(w / sqrt(16)) = %.2f (about 1)   [ag_scale, ag_mean_all]\n",
           var[0], var[1]);
    step("softmax of scores, and of the same scores * 8", "ag_softmax");
    static const double vals[5] = { 0.1, -0.2, 0.3, -0.2, 0.5 };
    ag_tensor *v = from_doubles(ctx, 1, (int[]){5}, vals);
    print_vector("softmax([0.1, -0.2, 0.3, -0.2, 0.5]):    ", ag_softmax(ctx, v, -1), 4);
    print_vector("softmax(8 * [0.1, -0.2, 0.3, -0.2, 0.5]):", ag_softmax(ctx, ag_scale(ctx, v, 8), -1), 4);
    fprintf(out, "    Large scores push softmax toward one-hot, and its gradient toward 0.\n");
}

void walkthrough_write(FILE *f, int only)
{
    static void (*const sections[])(ag_ctx *) = { hello_shiny_sun, journey_trainable, causal_mask,
                                                  dropout, multi_head, bag_of_words, scaling };
    out = f;
    ag_ctx *ctx = ag_ctx_new();
    fprintf(out, "attograd walkthrough (%s precision); each step names the functions that compute it.\n",
            AG_PRECISION_NAME);
    fprintf(out, "Words of the journey sentence: ");
    for (int i = 0; i < 6; i++)
        fprintf(out, "%s%s", JOURNEY_WORDS[i], i < 5 ? ", " : "\n");
    for (int i = 0; i < WALKTHROUGH_SECTIONS; i++)
        if (!only || only == i + 1)
            sections[i](ctx);
    ag_ctx_free(ctx);
}
