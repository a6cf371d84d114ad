/*
 * test_tutorials.c - the worked examples of the attention tutorials, computed
 * through the engine's ops (matmul, transpose, softmax, masked_fill, dropout,
 * reshape) and checked twice: against the same arithmetic done here in plain
 * double loops, and against the numbers the tutorials print, at the precision
 * they print them (1e-4 for 4 decimals, 1e-6 for 8 significant digits).
 *
 * Engine vs the double loops: float inputs are rounded once, so results agree
 * to ENGINE_TOL = 2e-6 in float and 1e-12 in double.
 */
#include <math.h>
#include <string.h>

#include "attograd.h"
#include "check.h"

#ifdef AG_DOUBLE
#define ENGINE_TOL 1e-12
#define BOW_TOL 1e-6
#else
#define ENGINE_TOL 2e-6
#define BOW_TOL 1e-5
#endif
#define PRINTED_4 1e-4   /* a value printed with 4 decimals */
#define PRINTED_8 1e-6   /* a value printed with 8 significant digits, inputs rounded alike */

/* "Your journey starts with one step", one 3-d embedding per word. */
static const double journey[6][3] = {
    { 0.43, 0.15, 0.89 },   /* Your */
    { 0.55, 0.87, 0.66 },   /* journey */
    { 0.57, 0.85, 0.64 },   /* starts */
    { 0.22, 0.58, 0.33 },   /* with */
    { 0.77, 0.25, 0.10 },   /* one */
    { 0.05, 0.80, 0.55 },   /* step */
};

/* The projections of the trainable-weights example, in x W layout (d_in 3, d_out 2). */
static const double W_query[3][2] = { { 0.2961, 0.5166 }, { 0.2517, 0.6886 }, { 0.0740, 0.8665 } };
static const double W_key[3][2] = { { 0.1366, 0.1025 }, { 0.1841, 0.7264 }, { 0.3153, 0.6871 } };
static const double W_value[3][2] = { { 0.0756, 0.1966 }, { 0.3164, 0.4017 }, { 0.1186, 0.8274 } };

static ag_tensor *from_doubles(ag_ctx *ctx, int ndim, const int *shape, const double *v)
{
    ag_tensor *t = ag_new(ctx, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (ag_real)v[i];
    return t;
}

static int all_close(const ag_real *got, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            return 0;
    return 1;
}

static int all_close_d(const double *got, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            return 0;
    return 1;
}

/* C[M,N] = A[M,K] B[K,N] in double. */
static void ref_matmul(const double *A, const double *B, int M, int K, int N, double *C)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += A[m * K + k] * B[k * N + n];
            C[m * N + n] = s;
        }
}

/* One query against n keys: w = softmax(scale q.k_j), out = sum_j w_j v_j. */
static void ref_attend(const double *q, const double *keys, const double *vals, int n, int dk, int dv,
                       double scale, double *w, double *out)
{
    double max = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int k = 0; k < dk; k++)
            s += q[k] * keys[j * dk + k];
        w[j] = scale * s;
        max = w[j] > max ? w[j] : max;
    }
    for (int j = 0; j < n; j++)
        sum += w[j] = exp(w[j] - max);
    for (int k = 0; k < dv; k++)
        out[k] = 0;
    for (int j = 0; j < n; j++) {
        w[j] /= sum;
        for (int k = 0; k < dv; k++)
            out[k] += w[j] * vals[j * dv + k];
    }
}

/* The context vector of word `row` of E[n,d] with no trainable weights:
 * scores = E[row] E^T, weights = softmax(scores), context = weights E. */
static ag_tensor *engine_context(ag_ctx *ctx, ag_tensor *E, int row, ag_tensor **weights)
{
    ag_tensor *q = ag_slice(ctx, E, 0, row, 1);
    ag_tensor *scores = ag_matmul(ctx, q, ag_transpose(ctx, E, 0, 1));
    *weights = ag_softmax(ctx, scores, -1);
    return ag_matmul(ctx, *weights, E);
}

static double row_sum(const ag_real *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* ---- "Hello shiny sun!" ------------------------------------------------- */

static void test_hello_shiny_sun(ag_ctx *ctx)
{
    static const double emb[3][3] = { { 0.34, 0.22, 0.54 }, { 0.53, 0.34, 0.98 }, { 0.29, 0.54, 0.93 } };
    ag_reset(ctx);
    ag_tensor *w, *E = from_doubles(ctx, 2, (int[]){3, 3}, &emb[0][0]);
    ag_tensor *c = engine_context(ctx, E, 1, &w);
    double rw[3], rc[3];
    ref_attend(emb[1], &emb[0][0], &emb[0][0], 3, 3, 3, 1, rw, rc);
    CHECK(c->ndim == 2 && c->shape[0] == 1 && c->shape[1] == 3, "hello: context must be [1,3]");
    CHECK(fabs(row_sum(w->data, 3) - 1) <= ENGINE_TOL, "hello: weights sum to %.9g", row_sum(w->data, 3));
    CHECK(all_close(w->data, rw, 3, ENGINE_TOL), "hello: weights {%.6f, %.6f, %.6f}, want {%.6f, %.6f, %.6f}",
          (double)w->data[0], (double)w->data[1], (double)w->data[2], rw[0], rw[1], rw[2]);
    CHECK(all_close(c->data, rc, 3, ENGINE_TOL), "hello: context {%.6f, %.6f, %.6f}, want {%.6f, %.6f, %.6f}",
          (double)c->data[0], (double)c->data[1], (double)c->data[2], rc[0], rc[1], rc[2]);
    /* The tutorial prints [0.3992, 0.3858, 0.8610] after rounding every
     * intermediate to 4 decimals; unrounded, the context is [0.3990, 0.3854, 0.8610]. */
    static const double stated[3] = { 0.3990, 0.3854, 0.8610 };
    CHECK(all_close_d(rc, stated, 3, PRINTED_4) && all_close(c->data, stated, 3, PRINTED_4),
          "hello: context {%.4f, %.4f, %.4f}, want {0.3990, 0.3854, 0.8610}", (double)c->data[0],
          (double)c->data[1], (double)c->data[2]);
}

/* ---- "Your journey starts with one step": no trainable weights ---------- */

static void test_journey_plain(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *w, *X = from_doubles(ctx, 2, (int[]){6, 3}, &journey[0][0]);
    ag_tensor *c = engine_context(ctx, X, 1, &w);
    double rw[6], rc[3];
    ref_attend(journey[1], &journey[0][0], &journey[0][0], 6, 3, 3, 1, rw, rc);
    CHECK(fabs(row_sum(w->data, 6) - 1) <= ENGINE_TOL, "journey: weights sum to %.9g", row_sum(w->data, 6));
    CHECK(all_close(w->data, rw, 6, ENGINE_TOL), "journey: weights differ from the double computation");
    CHECK(all_close(c->data, rc, 3, ENGINE_TOL), "journey: context differs from the double computation");
    static const double stated_w[6] = { 0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581 };
    static const double stated_c[3] = { 0.4419, 0.6515, 0.5683 };
    CHECK(all_close_d(rw, stated_w, 6, PRINTED_4) && all_close(w->data, stated_w, 6, PRINTED_4),
          "journey: weights {%.4f, %.4f, %.4f, %.4f, %.4f, %.4f} differ from the printed ones", (double)w->data[0],
          (double)w->data[1], (double)w->data[2], (double)w->data[3], (double)w->data[4], (double)w->data[5]);
    CHECK(all_close_d(rc, stated_c, 3, PRINTED_4) && all_close(c->data, stated_c, 3, PRINTED_4),
          "journey: context {%.4f, %.4f, %.4f}, want {0.4419, 0.6515, 0.5683}", (double)c->data[0],
          (double)c->data[1], (double)c->data[2]);
}

/* ---- the same sentence with W_query, W_key, W_value --------------------- */

static void test_journey_trainable(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *X = from_doubles(ctx, 2, (int[]){6, 3}, &journey[0][0]);
    ag_tensor *Wq = from_doubles(ctx, 2, (int[]){3, 2}, &W_query[0][0]);
    ag_tensor *Wk = from_doubles(ctx, 2, (int[]){3, 2}, &W_key[0][0]);
    ag_tensor *Wv = from_doubles(ctx, 2, (int[]){3, 2}, &W_value[0][0]);
    ag_tensor *query2 = ag_matmul(ctx, ag_slice(ctx, X, 0, 1, 1), Wq);   /* [1,2] */
    ag_tensor *keys = ag_matmul(ctx, X, Wk), *values = ag_matmul(ctx, X, Wv);   /* [6,2] */
    ag_tensor *scores = ag_matmul(ctx, query2, ag_transpose(ctx, keys, 0, 1));  /* [1,6] */
    ag_tensor *w = ag_softmax(ctx, ag_scale(ctx, scores, (ag_real)(1 / sqrt(2.0))), -1);
    ag_tensor *c = ag_matmul(ctx, w, values);

    double q[2], K[12], V[12], rw[6], rc[2];
    ref_matmul(journey[1], &W_query[0][0], 1, 3, 2, q);
    ref_matmul(&journey[0][0], &W_key[0][0], 6, 3, 2, K);
    ref_matmul(&journey[0][0], &W_value[0][0], 6, 3, 2, V);
    ref_attend(q, K, V, 6, 2, 2, 1 / sqrt(2.0), rw, rc);
    CHECK(c->ndim == 2 && c->shape[0] == 1 && c->shape[1] == 2, "trainable: context must be [1,2]");
    CHECK(all_close(query2->data, q, 2, ENGINE_TOL), "trainable: query_2 differs from x_2 W_query");
    CHECK(all_close(keys->data, K, 12, ENGINE_TOL) && all_close(values->data, V, 12, ENGINE_TOL),
          "trainable: keys or values differ from X W");
    CHECK(all_close(w->data, rw, 6, ENGINE_TOL), "trainable: attention weights differ from the double computation");
    CHECK(all_close(c->data, rc, 2, ENGINE_TOL), "trainable: context {%.6f, %.6f}, want {%.6f, %.6f}",
          (double)c->data[0], (double)c->data[1], rc[0], rc[1]);
    static const double printed[2] = { 0.3061, 0.8210 };
    CHECK(all_close_d(rc, printed, 2, PRINTED_4) && all_close(c->data, printed, 2, PRINTED_4),
          "trainable: context {%.4f, %.4f}, the notebook prints {0.3061, 0.8210}", (double)c->data[0],
          (double)c->data[1]);
}

/* ---- bag of words: the running mean three ways -------------------------- */

static void test_bag_of_words(ag_ctx *ctx)
{
    enum { B = 4, T = 8, C = 2 };
    ag_reset(ctx);
    ag_pcg32 g;
    ag_pcg32_seed(&g, 1337, 1);
    ag_tensor *x = ag_new(ctx, 3, (int[]){B, T, C});
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (ag_real)ag_pcg32_uniform(&g);

    /* (1) xbow[b,t] = mean over i <= t of x[b,i], by hand */
    double xbow[B][T][C];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double s = 0;
                for (int i = 0; i <= t; i++)
                    s += x->data[(b * T + i) * C + c];
                xbow[b][t][c] = s / (t + 1);
            }

    /* (2) lower-triangular ones with rows normalized to sum 1, [T,T] @ [B,T,C] */
    ag_tensor *avg = ag_new(ctx, 2, (int[]){T, T});
    for (int t = 0; t < T; t++)
        for (int i = 0; i <= t; i++)
            avg->data[t * T + i] = (ag_real)(1.0 / (t + 1));
    ag_tensor *xbow2 = ag_matmul(ctx, avg, x);

    /* (3) zeros, -inf above the diagonal, softmax: the same uniform rows */
    ag_tensor *zeros = ag_new(ctx, 2, (int[]){T, T});
    ag_tensor *wei = ag_softmax(ctx, ag_masked_fill(ctx, zeros, check_future_mask(ctx, T), -INFINITY), -1);
    ag_tensor *xbow3 = ag_matmul(ctx, wei, x);

    CHECK(xbow2->ndim == 3 && xbow2->shape[0] == B && xbow2->shape[1] == T && xbow2->shape[2] == C,
          "bag of words: [T,T] @ [B,T,C] must broadcast to [B,T,C]");
    int w_ok = 1;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < T; i++)
            w_ok &= fabs(wei->data[t * T + i] - (i <= t ? 1.0 / (t + 1) : 0)) <= BOW_TOL;
    CHECK(w_ok, "bag of words: softmax of the masked zeros is not 1/(t+1) on and below the diagonal");
    CHECK(all_close(xbow2->data, &xbow[0][0][0], B * T * C, BOW_TOL), "bag of words: matmul average != loop average");
    CHECK(all_close(xbow3->data, &xbow[0][0][0], B * T * C, BOW_TOL), "bag of words: softmax average != loop average");
    CHECK(memcmp(xbow3->data, x->data, C * sizeof(ag_real)) == 0, "bag of words: the first token has only itself");
}

/* ---- causal masking two ways, on the journey example -------------------- */

/* Scaled scores Q K^T / sqrt(2) of the journey example, [6,6]. */
static ag_tensor *journey_scores(ag_ctx *ctx)
{
    ag_tensor *X = from_doubles(ctx, 2, (int[]){6, 3}, &journey[0][0]);
    ag_tensor *Q = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &W_query[0][0]));
    ag_tensor *K = ag_matmul(ctx, X, from_doubles(ctx, 2, (int[]){3, 2}, &W_key[0][0]));
    return ag_scale(ctx, ag_matmul(ctx, Q, ag_transpose(ctx, K, 0, 1)), (ag_real)(1 / sqrt(2.0)));
}

/* (a) softmax over everything, zero the future by multiplying with
 * lower-triangular ones, renormalize each row by its sum.  attograd has no
 * division op: w / s = exp(log w - log s), and log 0 = -inf gives exp = 0. */
static ag_tensor *mask_after_softmax(ag_ctx *ctx, ag_tensor *weights)
{
    int T = weights->shape[0];
    ag_tensor *ones = ag_full(ctx, 2, (int[]){T, T}, 1);
    ag_tensor *tril = ag_masked_fill(ctx, ones, check_future_mask(ctx, T), 0);
    ag_tensor *masked = ag_mul(ctx, weights, tril);
    ag_tensor *sums = ag_sum(ctx, masked, -1, 1);   /* [T,1] */
    return ag_exp(ctx, ag_sub(ctx, ag_log(ctx, masked), ag_log(ctx, sums)));
}

/* (b) -inf above the diagonal before the softmax. */
static ag_tensor *mask_before_softmax(ag_ctx *ctx, ag_tensor *scores)
{
    return ag_softmax(ctx, ag_masked_fill(ctx, scores, check_future_mask(ctx, scores->shape[0]), -INFINITY), -1);
}

static int causal_rows_ok(const ag_tensor *w)
{
    int T = w->shape[0], ok = w->data[0] == 1;
    for (int i = 0; i < T; i++) {
        double s = 0;
        for (int j = 0; j < T; j++) {
            s += w->data[i * T + j];
            if (j > i)
                ok &= w->data[i * T + j] == 0;
        }
        ok &= fabs(s - 1) <= 1e-6;
    }
    return ok;
}

static void test_two_causal_masks(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *scores = journey_scores(ctx);
    ag_tensor *wa = mask_after_softmax(ctx, ag_softmax(ctx, scores, -1)), *wb = mask_before_softmax(ctx, scores);
    double ref[36];
    for (int i = 0; i < 6; i++) {
        /* softmax over the first i+1 scores, in double from the engine's scores */
        double max = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++)
            max = fmax(max, scores->data[i * 6 + j]);
        for (int j = 0; j < 6; j++)
            sum += ref[i * 6 + j] = j <= i ? exp(scores->data[i * 6 + j] - max) : 0;
        for (int j = 0; j < 6; j++)
            ref[i * 6 + j] /= sum;
    }
    CHECK(causal_rows_ok(wa) && causal_rows_ok(wb), "causal masks: rows must sum to 1 with exact zeros above the diagonal");
    CHECK(all_close(wa->data, ref, 36, 1e-6), "mask after softmax + renormalize differs from the double computation");
    CHECK(all_close(wb->data, ref, 36, 1e-6), "-inf mask + softmax differs from the double computation");
    double wad[36];
    for (int i = 0; i < 36; i++)
        wad[i] = wa->data[i];
    CHECK(all_close(wb->data, wad, 36, 1e-6), "the two causal masking methods disagree");
}

/* The notebook's own printed matrices (its weights come from a seeded
 * nn.Linear): renormalizing its printed softmax weights, and softmax of its
 * printed -inf-masked scores / sqrt(2), must give its printed masked weights. */
static void test_printed_causal_masks(ag_ctx *ctx)
{
    static const double att_weight[36] = {
        0.19212602, 0.1646463,  0.16516064, 0.15499417, 0.17211477, 0.15095802,
        0.20412546, 0.16588287, 0.16621484, 0.14957766, 0.16645327, 0.1477459,
        0.20356156, 0.16592424, 0.16624875, 0.14981547, 0.16641727, 0.14803267,
        0.18688802, 0.1666883,  0.16683646, 0.15710352, 0.16609134, 0.15639237,
        0.18304484, 0.16685854, 0.16695702, 0.1588405,  0.16582507, 0.15847409,
        0.19347237, 0.16633299, 0.16656809, 0.15418623, 0.16656083, 0.15287954,
    };
    static const double sma[36] = {
        1,          0,          0,          0,          0,          0,
        0.551678,   0.44832197, 0,          0,          0,          0,
        0.3799672,  0.30971354, 0.31031927, 0,          0,          0,
        0.27584285, 0.24602847, 0.24624716, 0.23188154, 0,          0,
        0.21751536, 0.1982809,  0.19839793, 0.18875293, 0.1970528,  0,
        0.19347237, 0.16633299, 0.16656809, 0.15418623, 0.16656083, 0.15287954,
    };
    /* lower triangle of the unscaled scores (the rest is masked anyway) */
    static const double att_score[36] = {
        0.2899089,  0,          0,          0,          0,          0,
        0.4656424,  0.17225963, 0,          0,          0,          0,
        0.45943564, 0.17031771, 0.17308104, 0,          0,          0,
        0.26415503, 0.10239156, 0.10364803, 0.01864095, 0,          0,
        0.21828783, 0.08735328, 0.08818767, 0.01770909, 0.0785667,  0,
        0.34078205, 0.12703359, 0.12903105, 0.01979299, 0.12896936, 0.00775672,
    };
    static const double inf_masked[36] = {
        1,          0,          0,          0,          0,          0,
        0.551678,   0.44832197, 0,          0,          0,          0,
        0.37996718, 0.3097135,  0.31031924, 0,          0,          0,
        0.27584285, 0.24602845, 0.24624714, 0.23188154, 0,          0,
        0.2175154,  0.19828095, 0.19839796, 0.18875296, 0.19705284, 0,
        0.19347237, 0.16633299, 0.16656809, 0.15418623, 0.16656083, 0.15287954,
    };
    ag_reset(ctx);
    ag_tensor *wa = mask_after_softmax(ctx, from_doubles(ctx, 2, (int[]){6, 6}, att_weight));
    ag_tensor *s = ag_scale(ctx, from_doubles(ctx, 2, (int[]){6, 6}, att_score), (ag_real)(1 / sqrt(2.0)));
    ag_tensor *wb = mask_before_softmax(ctx, s);
    CHECK(all_close(wa->data, sma, 36, PRINTED_8), "renormalizing the printed weights differs from the printed result");
    CHECK(all_close(wb->data, inf_masked, 36, PRINTED_8), "softmax of the printed masked scores differs from the printed weights");
}

/* ---- dropout on the attention weights ----------------------------------- */

static void test_attention_dropout(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *w = mask_before_softmax(ctx, journey_scores(ctx));
    ag_pcg32_seed(ag_dropout_rng(ctx), 123, 2);
    ag_tensor *d = ag_dropout(ctx, w, 0.5f, 1);
    int zeroed = 0, kept = 0, ok = 1;
    for (int i = 0; i < 36; i++) {
        if (w->data[i] == 0) {
            ok &= d->data[i] == 0;    /* masked stays masked */
        } else if (d->data[i] == 0) {
            zeroed++;
        } else {
            kept++;
            ok &= d->data[i] == 2 * w->data[i];   /* 1/(1-0.5) = 2, exactly */
        }
    }
    CHECK(ok, "dropout(0.5) on attention weights: survivors must be exactly doubled");
    CHECK(zeroed > 0 && kept > 0, "dropout(0.5) on 21 weights zeroed %d and kept %d", zeroed, kept);
}

/* ---- multi-head split and merge ----------------------------------------- */

static void test_multihead_split(ag_ctx *ctx)
{
    enum { B = 2, T = 6, H = 2, HD = 3, D = H * HD };
    ag_reset(ctx);
    ag_pcg32 g;
    ag_pcg32_seed(&g, 42, 3);
    ag_tensor *qkv[3];
    for (int m = 0; m < 3; m++) {
        qkv[m] = ag_new(ctx, 3, (int[]){B, T, D});
        for (size_t i = 0; i < qkv[m]->size; i++)
            qkv[m]->data[i] = (ag_real)(2 * ag_pcg32_uniform(&g) - 1);
    }
    ag_tensor *x = qkv[0];
    /* [b,T,d] -> [b,T,h,hd] -> [b,h,T,hd]: head h sees columns [h hd, (h+1) hd). */
    ag_tensor *heads = ag_transpose(ctx, ag_reshape(ctx, x, 4, (int[]){B, T, H, HD}), 1, 2);
    int ok = heads->shape[0] == B && heads->shape[1] == H && heads->shape[2] == T && heads->shape[3] == HD;
    for (int b = 0; ok && b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int k = 0; k < HD; k++)
                    ok &= heads->data[((b * H + h) * T + t) * HD + k] == x->data[(b * T + t) * D + h * HD + k];
    CHECK(ok, "multi-head split: [b,h,T,hd][b,h,t,k] must be x[b,t,h*hd+k]");
    ag_tensor *merged = ag_reshape(ctx, ag_transpose(ctx, heads, 1, 2), 3, (int[]){B, T, D});
    CHECK(merged->ndim == 3 && memcmp(merged->data, x->data, x->size * sizeof(ag_real)) == 0,
          "multi-head merge (transpose + reshape) must give back the original exactly");

    /* Causal attention on all heads at once equals each head on its own columns. */
    ag_tensor *q = heads;
    ag_tensor *k = ag_transpose(ctx, ag_reshape(ctx, qkv[1], 4, (int[]){B, T, H, HD}), 1, 2);
    ag_tensor *v = ag_transpose(ctx, ag_reshape(ctx, qkv[2], 4, (int[]){B, T, H, HD}), 1, 2);
    ag_tensor *scores = ag_scale(ctx, ag_matmul(ctx, q, ag_transpose(ctx, k, 2, 3)), (ag_real)(1 / sqrt((double)HD)));
    ag_tensor *w = ag_softmax(ctx, ag_masked_fill(ctx, scores, check_future_mask(ctx, T), -INFINITY), -1);
    ag_tensor *out = ag_reshape(ctx, ag_transpose(ctx, ag_matmul(ctx, w, v), 1, 2), 3, (int[]){B, T, D});
    ok = 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double qd[HD], kd[T * HD], vd[T * HD], rw[T], rc[HD];
                for (int j = 0; j < T; j++)
                    for (int c = 0; c < HD; c++) {
                        kd[j * HD + c] = qkv[1]->data[(b * T + j) * D + h * HD + c];
                        vd[j * HD + c] = qkv[2]->data[(b * T + j) * D + h * HD + c];
                    }
                for (int c = 0; c < HD; c++)
                    qd[c] = qkv[0]->data[(b * T + t) * D + h * HD + c];
                ref_attend(qd, kd, vd, t + 1, HD, HD, 1 / sqrt((double)HD), rw, rc);   /* keys 0..t only */
                ok &= all_close(out->data + (b * T + t) * D + h * HD, rc, HD, ENGINE_TOL);
            }
    CHECK(ok, "multi-head causal attention differs from each head computed alone");
}

int main(void)
{
    ag_ctx *ctx = ag_ctx_new();
    test_hello_shiny_sun(ctx);
    test_journey_plain(ctx);
    test_journey_trainable(ctx);
    test_bag_of_words(ctx);
    test_two_causal_masks(ctx);
    test_printed_causal_masks(ctx);
    test_attention_dropout(ctx);
    test_multihead_split(ctx);
    ag_ctx_free(ctx);
    return check_done();
}
