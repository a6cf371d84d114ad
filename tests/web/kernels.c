/*
 * kernels.c - the browser build's kernels (src/kernels/wasm_*.c) against
 * the reference's, bit for bit, compiled to WebAssembly and run under node
 * (tests/web_kernels.sh): the two-lane exp and erf against the scalar
 * functions over a sweep with the edges and special values, and every
 * kernel the build's table replaces against the reference kernel on
 * assorted shapes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "kernels/wasm.h"

static ag_pcg32 rng;

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The same bits, element by element, except that any NaN equals any NaN:
 * WebAssembly leaves a NaN's sign and payload to the engine (an operation
 * with two NaN operands may return either), so a scalar loop and a vector
 * one can differ there and nowhere else. */
static int same_floats(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0 && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

static int same_doubles(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!same_double(a[i], b[i]) && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

/* n doubles: the special values and edges first, then draws spread over
 * [-span, span] (uniform, and e^uniform for small magnitudes). */
static void sweep(double *x, size_t n, double span)
{
    static const double edge[] = { 0.0, -0.0, 0.5, -0.5, 0.49999999999999994, 6.0, -6.0, 5.999999999999999, 708.0,
                                   -708.0, 708.0000000000001, 709.78, 709.8, -745.1, -745.3, 1e-310, -1e-310,
                                   INFINITY, -INFINITY, NAN, 1.0, 0.75, 5.75, 2.5, 2.4999999999999996 };
    size_t i = 0;
    for (; i < n && i < sizeof edge / sizeof *edge; i++)
        x[i] = edge[i];
    for (; i < n; i++) {
        double u = 2 * ag_pcg32_uniform(&rng) - 1;
        x[i] = i % 3 == 0 ? u * span : i % 3 == 1 ? u * 8 : (u < 0 ? -1 : 1) * exp(-40 * ag_pcg32_uniform(&rng));
    }
}

static void check_math(void)
{
    enum { N = 200003 };        /* odd: the last element has no partner */
    double *x = malloc(3 * N * sizeof *x), *y = x + N, *z = y + N;
    sweep(x, N, 800);
    ag_math_exp_n(x, y, N);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < N; i++)
        if (!same_double(y[i], ag_math_exp(x[i])) && !bad++)
            first = i;
    CHECK(bad == 0, "exp: %zu of %d lanes differ from the scalar, first exp(%.17g) = %.17g, not %.17g", bad, N,
          x[first], y[first], ag_math_exp(x[first]));
    /* every length up to 200, from every offset: the pairing and chunk ends */
    bad = 0;
    for (size_t len = 0; len < 200; len++) {
        ag_math_erf_n(x + len, z, len);
        for (size_t i = 0; i < len; i++)
            bad += !same_double(z[i], ag_math_erf(x[len + i]));
    }
    CHECK(bad == 0, "erf over short arrays: %zu lanes differ from the scalar", bad);
    sweep(x, N, 7);
    ag_math_erf_n(x, y, N);
    bad = 0;
    for (size_t i = 0; i < N; i++)
        if (!same_double(y[i], ag_math_erf(x[i])) && !bad++)
            first = i;
    CHECK(bad == 0, "erf: %zu of %d lanes differ from the scalar, first erf(%.17g) = %.17g, not %.17g", bad, N,
          x[first], y[first], ag_math_erf(x[first]));
    /* mostly below 1/2, as GELU's inputs are: runs of four neighbours there */
    for (size_t i = 0; i < N; i++)
        x[i] = 0.3 * ag_pcg32_normal(&rng);
    ag_math_erf_n(x, y, N);
    bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += !same_double(y[i], ag_math_erf(x[i]));
    CHECK(bad == 0, "erf of N(0, 0.3): %zu of %d lanes differ from the scalar", bad, N);
    free(x);
}

/* n floats, N(0, scale), with a few zeros */
static float *floats(size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = i % 17 == 5 ? 0 : (float)(scale * ag_pcg32_normal(&rng));
    return x;
}

/* GELU and its gradient against the reference's, with and without a bias,
 * the backward both from the forward's kept erf values and computing them
 * again. */
static void check_gelu(void)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 1, 3 }, { 2, 255 }, { 3, 256 }, { 2, 257 }, { 4, 1000 },
                                        { 40, 1024 } };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
        float *x = floats(n, 3), *dy = floats(n, 1), *y0 = floats(n, 1), *y1 = malloc(n * sizeof *y1);
        float *b = floats(cols, 1), *db0 = floats(cols, 1), *db1 = malloc(cols * sizeof *db1);
        const size_t keep_bytes = ag_kern->gelu_keep(n);
        void *keep = malloc(keep_bytes);
        CHECK(keep_bytes == n * sizeof(double), "gelu keeps %zu bytes for %zu elements, not its erf values",
              keep_bytes, n);
        x[0] = -0.0f;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bias = with_bias ? b : NULL;
            memcpy(y1, y0, n * sizeof *y1);
            ag_kernels_reference.gelu(x, bias, rows, cols, y0, NULL);
            ag_kern->gelu(x, bias, rows, cols, y1, keep);
            CHECK(same_floats(y0, y1, n), "gelu, %zux%zu, bias %d: not the reference's bits", rows, cols, with_bias);
            for (int t = 0; t < 4; t++) {
                int assign = t & 1, kept = t >> 1;
                float *dx0 = floats(n, 2);
                memcpy(y1, dx0, n * sizeof *y1);
                memcpy(db1, db0, cols * sizeof *db1);
                float *db_ref = malloc(cols * sizeof *db_ref);
                memcpy(db_ref, db0, cols * sizeof *db_ref);
                ag_kernels_reference.gelu_backward(x, bias, NULL, dy, rows, cols, dx0, assign,
                                                   with_bias ? db_ref : NULL);
                ag_kern->gelu_backward(x, bias, kept ? keep : NULL, dy, rows, cols, y1, assign,
                                       with_bias ? db1 : NULL);
                CHECK(same_floats(dx0, y1, n) && same_floats(db_ref, db1, cols),
                      "gelu_backward, %zux%zu, bias %d, assign %d, erf kept %d: not the reference's bits", rows,
                      cols, with_bias, assign, kept);
                free(dx0), free(db_ref);
            }
        }
        free(x), free(dy), free(y0), free(y1), free(b), free(db0), free(db1), free(keep);
    }
}

/* Every pairing of transposes, beta 0 (over a NaN in C, which it must
 * ignore), 1/2 and 1, ragged sizes, and leading dimensions past the
 * matrices' widths, whose padding (and C's) must come out untouched. */
static void check_gemm(void)
{
    static const int shapes[][3] = { { 1, 1, 1 }, { 3, 5, 7 }, { 4, 16, 64 }, { 33, 65, 17 }, { 64, 256, 64 },
                                     { 640, 64, 64 }, { 64, 64, 640 }, { 7, 3, 0 }, { 6, 13, 9 } };
    static const float betas[] = { 0, 0.5f, 1 };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 12; t++)
            for (int pad = 0; pad < 2; pad++) {
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = t & 1, tb = t >> 1 & 1;
                float beta = betas[t >> 2];
                int lda = (ta ? M : K) + 3 * pad, ldb = (tb ? K : N) + 5 * pad, ldc = N + 2 * pad;
                size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
                float *A = floats(na, 1), *B = floats(nb, 1), *C0 = floats(nc, 1);
                float *C1 = malloc((nc + 1) * sizeof *C1);
                if (beta == 0 && nc)
                    C0[nc / 2] = NAN;
                memcpy(C1, C0, nc * sizeof *C1);
                ag_kernels_reference.gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C0, ldc);
                ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C1, ldc);
                CHECK(same_floats(C0, C1, nc), "gemm %dx%dx%d, trans %d %d, beta %g, padded %d: not the reference's bits",
                      M, N, K, ta, tb, beta, pad);
                free(A), free(B), free(C0), free(C1);
            }
}

/* NaN, +-inf and -0 in a few places of x (n elements), as a diverging run
 * or a masked class would put them */
static void specials(float *x, size_t n)
{
    static const float special[] = { NAN, INFINITY, -INFINITY, -0.0f };
    for (size_t i = 0; i < 4 && 7 * i + 3 < n; i++)
        x[7 * i + 3] = special[i];
}

/* Attention over q, k, v in one [B,T,3,H,hd] buffer (as the model lays
 * them out) for one geometry `a` (its strides set here) against the
 * reference, forward with and without the weights, backward assigning
 * and adding.  With `special`, NaN, +-inf and -0 among item 1's q, k and
 * v (a diverging run's), whose queries must spoil no other query's lanes,
 * and in item 0 an inf in the value of a key whose scores are finite,
 * which dropout's 0 must turn into NaN as the reference's 0 inf does (a
 * kernel that skipped the keys dropout zeroes would leave it out). */
static void check_attention_case(ag_attn a, int special, int large, const char *what)
{
    int T = a.Tq > a.Tk ? a.Tq : a.Tk, D = a.H * a.hd;
    a.q_ld = a.k_ld = a.v_ld = 3 * D;
    a.o_ld = D;
    a.q_bs = a.k_bs = a.v_bs = (long)T * 3 * D;
    a.o_bs = (long)a.Tq * D;
    a.scale = 1 / sqrtf((float)a.hd);
    size_t nx = (size_t)a.B * T * 3 * D, no = (size_t)a.B * a.Tq * D, nl = (size_t)a.B * a.H * a.Tq;
    size_t nw = nl * a.Tk;
    float *x = floats(nx, 2), *dout = floats(no, 1), *o[2], *lse[2], *w[2], *dx[2];
    /* item 1: token 0's q, token 2's k and v (a key of score -inf and
     * value inf: the forward must skip it, not add 0 inf); item 0, whose
     * scores stay finite: an inf in token 4's value (head 0) */
    /* large: q and k times 35, scores in the thousands (to about 2e4),
     * where each weight is an exp far from 1 divided by the row's own sum
     * beside a large log-sum-exp */
    for (size_t e = 0; large && e < nx; e++)
        if (e % (3 * (size_t)D) < 2 * (size_t)D)
            x[e] *= 35;
    if (special) {
        for (int part = 0; part < 3; part++)
            specials(x + nx / 2 + (size_t)(part == 0 ? 0 : part == 1 ? 2 * 3 * D + D : 2 * 3 * D + 2 * D), 32);
        x[4 * 3 * D + 2 * D + 1] = INFINITY;
    }
    for (int r = 0; r < 2; r++)
        o[r] = floats(no, 1), lse[r] = floats(nl, 1), w[r] = floats(nw, 1), dx[r] = floats(nx, 1);
    memcpy(dx[1], dx[0], nx * sizeof(float));
    for (int with_w = 0; with_w < 2; with_w++)
        for (int r = 0; r < 2; r++) {
            const ag_kernels *kern = r ? ag_kern : &ag_kernels_reference;
            kern->attention(&a, x, x + D, x + 2 * D, o[r], lse[r], with_w ? w[r] : NULL, NULL);
        }
    CHECK(same_floats(o[0], o[1], no) && same_floats(lse[0], lse[1], nl) && same_floats(w[0], w[1], nw),
          "attention, %s: output, lse or weights not the reference's bits", what);
    for (int assign = 1; assign >= 0; assign--) {
        for (int r = 0; r < 2; r++) {
            const ag_kernels *kern = r ? ag_kern : &ag_kernels_reference;
            kern->attention_backward(&a, x, x + D, x + 2 * D, o[0], dout, lse[0], NULL, dx[r], dx[r] + D,
                                     dx[r] + 2 * D, assign);
        }
        CHECK(same_floats(dx[0], dx[1], nx), "attention backward, %s, assign %d: not the reference's bits", what,
              assign);
    }
    free(x), free(dout);
    for (int r = 0; r < 2; r++)
        free(o[r]), free(lse[r]), free(w[r]), free(dx[r]);
}

/* Every shape causal or not, with queries after a cache (q_pos0 > 0) and
 * before any key (q_pos0 < 0), key counts and head widths past multiples
 * of four and of sixteen; without dropout and with it at four rates, each
 * from a generator of its own (a row's draws for a key count not a
 * multiple of four, the jumps over the causal mask's hidden keys and over
 * queries that see none); the last shape with non-finite values. */
static void check_attention(void)
{
    static const int shapes[][7] = {
        /* B, H, Tq, Tk, hd, causal, q_pos0 */
        { 2, 4, 16, 16, 16, 1, 0 }, { 1, 2, 5, 5, 3, 1, 0 }, { 2, 3, 7, 7, 8, 0, 0 }, { 1, 2, 3, 9, 4, 1, 6 },
        { 1, 1, 6, 6, 5, 1, -2 }, { 3, 2, 33, 33, 12, 1, 0 }, { 2, 2, 13, 13, 20, 0, 0 }, { 2, 2, 9, 9, 16, 1, 0 },
    };
    static const float rates[] = { 0, 0.1f, 0.25f, 0.5f, 0.9f };
    const size_t nshapes = sizeof shapes / sizeof *shapes;
    for (size_t s = 0; s < nshapes; s++)
        for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
            ag_attn a = { .B = shapes[s][0], .H = shapes[s][1], .Tq = shapes[s][2], .Tk = shapes[s][3],
                          .hd = shapes[s][4], .causal = shapes[s][5], .q_pos0 = shapes[s][6], .dropout = rates[r] };
            ag_pcg32_seed(&a.rng, 1000 * s + r, 5);
            char what[64];
            snprintf(what, sizeof what, "shape %zu, dropout %g", s, (double)rates[r]);
            check_attention_case(a, s == nshapes - 1, 0, what);
        }
    for (size_t s = 0; s < 3; s++) {
        ag_attn a = { .B = shapes[s][0], .H = shapes[s][1], .Tq = shapes[s][2], .Tk = shapes[s][3],
                      .hd = shapes[s][4], .causal = shapes[s][5], .q_pos0 = shapes[s][6], .dropout = s == 1 ? 0.1f : 0 };
        ag_pcg32_seed(&a.rng, 7000 + s, 5);
        char what[64];
        snprintf(what, sizeof what, "shape %zu, scores near 1e4", s);
        check_attention_case(a, 0, 1, what);
    }
}

/* Layer norm over rows of D: rows past any multiple of four, D not one
 * either, w and b each given or not; the last shape has a row with NaN,
 * inf and -0 (its lanes' neighbours must stay right). */
static void check_layer_norm(void)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 1, 5 }, { 2, 3 }, { 4, 64 }, { 5, 63 }, { 7, 130 },
                                        { 512, 64 }, { 6, 17 } };
    const size_t nshapes = sizeof shapes / sizeof *shapes;
    for (size_t s = 0; s < nshapes; s++) {
        size_t rows = shapes[s][0], D = shapes[s][1], n = rows * D;
        float *x = floats(n, 2), *dy = floats(n, 1), *w = floats(D, 1), *b = floats(D, 1), *out[2], *stat[2][2];
        float *dx[2], *dw[2], *db[2], *dw0 = floats(D, 1), *db0 = floats(D, 1), *dx0 = floats(n, 1);
        for (size_t i = 0; i < n; i++)
            x[i] += (float)(i / D);         /* rows of their own means, some far from 0 */
        if (s == nshapes - 1)
            specials(x, n), specials(dy + D, n - D);
        for (int r = 0; r < 2; r++)
            out[r] = malloc(n * sizeof(float)), stat[r][0] = malloc(rows * sizeof(float)),
            stat[r][1] = malloc(rows * sizeof(float)), dx[r] = malloc(n * sizeof(float)),
            dw[r] = malloc(D * sizeof(float)), db[r] = malloc(D * sizeof(float));
        for (int with = 0; with < 4; with++) {
            const float *wp = with & 1 ? w : NULL, *bp = with & 2 ? b : NULL;
            for (int r = 0; r < 2; r++)
                (r ? ag_kern : &ag_kernels_reference)->layer_norm(x, wp, bp, rows, (int)D, 1e-5f, out[r],
                                                                   stat[r][0], stat[r][1]);
            CHECK(same_floats(out[0], out[1], n) && same_floats(stat[0][0], stat[1][0], rows) &&
                      same_floats(stat[0][1], stat[1][1], rows),
                  "layer_norm %zux%zu, w %d, b %d: not the reference's bits", rows, D, with & 1, with >> 1);
            /* backward with every gradient wanted or not, adding or assigning */
            for (int want = 0; want < 8; want++)
                for (int assign = 0; assign < 2; assign++) {
                    for (int r = 0; r < 2; r++) {
                        memcpy(dx[r], dx0, n * sizeof(float));
                        memcpy(dw[r], dw0, D * sizeof(float));
                        memcpy(db[r], db0, D * sizeof(float));
                        (r ? ag_kern : &ag_kernels_reference)->layer_norm_backward(
                            x, wp, stat[0][0], stat[0][1], dy, rows, (int)D, want & 1 ? dx[r] : NULL, assign,
                            want & 2 ? dw[r] : NULL, want & 4 ? db[r] : NULL);
                    }
                    CHECK(same_floats(dx[0], dx[1], n) && same_floats(dw[0], dw[1], D) &&
                              same_floats(db[0], db[1], D),
                          "layer_norm_backward %zux%zu, w %d, dx %d dw %d db %d, assign %d: not the reference's bits",
                          rows, D, with & 1, want & 1, want >> 1 & 1, want >> 2, assign);
                }
        }
        free(x), free(dy), free(w), free(b), free(dw0), free(db0), free(dx0);
        for (int r = 0; r < 2; r++)
            free(out[r]), free(stat[r][0]), free(stat[r][1]), free(dx[r]), free(dw[r]), free(db[r]);
    }
}

/* Cross-entropy: vocabularies below, at and past four, targets ignored
 * (-1) now and then; the last shape has a row of all -inf (every class
 * masked), a row with NaN and rows with +-inf. */
static void check_cross_entropy(void)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 2 }, { 5, 7 }, { 8, 16 }, { 3, 257 }, { 64, 13 }, { 6, 9 } };
    const size_t nshapes = sizeof shapes / sizeof *shapes;
    for (size_t s = 0; s < nshapes; s++) {
        size_t rows = shapes[s][0], V = shapes[s][1], n = rows * V;
        float *x = floats(n, 4), *prob[2], *d[2], *d0 = floats(n, 1);
        double loss[2][64];
        int32_t t[64];
        for (size_t r = 0; r < rows; r++)
            t[r] = r % 5 == 2 ? -1 : (int32_t)(ag_pcg32_next(&rng) % V);
        if (s == nshapes - 1) {
            for (size_t k = 0; k < V; k++)
                x[k] = -INFINITY;
            specials(x + V, n - V);
        }
        for (int r = 0; r < 2; r++) {
            prob[r] = malloc(n * sizeof(float)), d[r] = malloc(n * sizeof(float));
            (r ? ag_kern : &ag_kernels_reference)->cross_entropy(x, t, rows, (int)V, prob[r], loss[r]);
        }
        CHECK(same_floats(prob[0], prob[1], n) && same_doubles(loss[0], loss[1], rows),
              "cross_entropy %zux%zu: not the reference's bits", rows, V);
        for (int assign = 0; assign < 2; assign++) {
            for (int r = 0; r < 2; r++) {
                memcpy(d[r], d0, n * sizeof(float));
                (r ? ag_kern : &ag_kernels_reference)->cross_entropy_backward(prob[0], t, rows, (int)V, 0.37f, d[r],
                                                                              assign);
            }
            CHECK(same_floats(d[0], d[1], n), "cross_entropy_backward %zux%zu, assign %d: not the reference's bits",
                  rows, V, assign);
        }
        free(x), free(d0);
        for (int r = 0; r < 2; r++)
            free(prob[r]), free(d[r]);
    }
}

/* SGD with and without momentum and decay, at the first step and after,
 * on lengths past any multiple of four. */
static void check_sgd(void)
{
    static const size_t lengths[] = { 1, 3, 4, 5, 1001 };
    for (size_t s = 0; s < sizeof lengths / sizeof *lengths; s++)
        for (int mode = 0; mode < 8; mode++) {
            size_t n = lengths[s];
            float momentum = mode & 1 ? 0.9f : 0, decay = mode & 2 ? 0.01f : 0, *p[2], *buf[2];
            float *p0 = floats(n, 1), *g = floats(n, 1), *buf0 = floats(n, 1);
            for (int r = 0; r < 2; r++) {
                p[r] = malloc(n * sizeof(float)), buf[r] = malloc(n * sizeof(float));
                memcpy(p[r], p0, n * sizeof(float));
                memcpy(buf[r], buf0, n * sizeof(float));
                (r ? ag_kern : &ag_kernels_reference)->sgd(p[r], g, momentum != 0 ? buf[r] : NULL, n, 0.05f, momentum,
                                                           decay, mode >> 2);
            }
            CHECK(same_floats(p[0], p[1], n) && same_floats(buf[0], buf[1], n),
                  "sgd, %zu parameters, momentum %g, decay %g, first %d: not the reference's bits", n, momentum,
                  decay, mode >> 2);
            free(p0), free(g), free(buf0);
            for (int r = 0; r < 2; r++)
                free(p[r]), free(buf[r]);
        }
}

int main(void)
{
    ag_pcg32_seed(&rng, 42, 7);
    CHECK(ag_kern != &ag_kernels_reference, "the build's table is installed (%s)", ag_kern->name);
    check_math();
    check_gelu();
    check_gemm();
    check_attention();
    check_layer_norm();
    check_cross_entropy();
    check_sgd();
    return check_done();
}
