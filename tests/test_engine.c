/*
 * test_engine.c - behaviour of the engine beyond single-op gradients: the
 * PCG32 reference sequence and its distributions, softmax with extreme and
 * masked (-inf) inputs, dropout, every misuse error, autograd semantics
 * (accumulation, no-grad mode, views, very deep graphs), arena reuse across
 * steps, and the forward VALUES of the ops against plain double loops.
 *
 * Tolerances: where the engine rounds to ag_real once or a few times, the
 * relative tolerance is a few units of ag_real's epsilon (REL_TIGHT); where a
 * value is a sum of up to ~100 products, REL_SUM (float 2e-5, double 1e-12).
 */
#include <float.h>
#ifdef __linux__
#include <malloc.h>
#endif
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "attograd.h"
#include "attograd_io.h"
#include "check.h"
#include "expect_error.h"
#include "internal.h"
#include "kernels.h"

#ifdef AG_DOUBLE
#define REAL_EPS DBL_EPSILON
#define REL_SUM 1e-12
#else
#define REAL_EPS FLT_EPSILON
#define REL_SUM 2e-5
#endif
#define REL_TIGHT (8 * REAL_EPS)

/* Under AddressSanitizer (gcc says so with __SANITIZE_ADDRESS__, clang with
 * __has_feature), LeakSanitizer can be asked mid-run whether anything
 * allocated is no longer reachable. */
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif
/* Under ThreadSanitizer the address-space caps below are skipped too: its
 * allocator ends the program when an allocation under the cap fails
 * (rather than return NULL: "allocator is out of memory"). */
#if defined(__SANITIZE_THREAD__)
#define HAVE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAVE_TSAN 1
#endif
#endif

static ag_pcg32 rng;

static int close_to(double got, double want, double tol)
{
    return fabs(got - want) <= tol * (1 + fabs(want));
}

static ag_tensor *random_tensor(ag_ctx *ctx, int ndim, const int *shape, double lo, double hi)
{
    ag_tensor *t = ag_new(ctx, ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (ag_real)(lo + (hi - lo) * ag_pcg32_uniform(&rng));
    return t;
}

static ag_tensor *leaf(ag_ctx *ctx, int ndim, const int *shape, double lo, double hi)
{
    ag_tensor *t = random_tensor(ctx, ndim, shape, lo, hi);
    ag_requires_grad(t);
    return t;
}

/* sum(out * R) for a random R: every output element gets its own upstream gradient. */
static ag_tensor *weighted_loss(ag_ctx *ctx, ag_tensor *out, ag_tensor **R_out)
{
    ag_tensor *R = random_tensor(ctx, out->ndim, out->shape, -1, 1);
    if (R_out)
        *R_out = R;
    return ag_sum_all(ctx, ag_mul(ctx, out, R));
}

/* ======================================================================= */
/* PCG32                                                                   */
/* ======================================================================= */

static void test_pcg32_reference(void)
{
    /* The sequence printed by the reference implementation's demo for
     * pcg32_srandom_r(&rng, 42u, 54u). */
    static const uint32_t want[6] = { 0xa15c02b7u, 0x7b47f409u, 0xba1d3330u,
                                      0x83d2f293u, 0xbfa4784bu, 0xcbed606eu };
    ag_pcg32 g;
    ag_pcg32_seed(&g, 42, 54);
    for (int i = 0; i < 6; i++) {
        uint32_t got = ag_pcg32_next(&g);
        CHECK(got == want[i], "pcg32(42, 54) output %d: got 0x%08x, want 0x%08x", i, got, want[i]);
    }
    /* A different stream with the same seed is a different sequence. */
    ag_pcg32 h;
    ag_pcg32_seed(&g, 42, 54);
    ag_pcg32_seed(&h, 42, 55);
    int same = 0;
    for (int i = 0; i < 8; i++)
        same += ag_pcg32_next(&g) == ag_pcg32_next(&h);
    CHECK(same < 8, "streams 54 and 55 gave the same 8 outputs");
    /* Jumping ahead n draws lands where n calls of next land, for n of
     * every size class (0, 1, odd, powers of two, a long jump), and two
     * jumps add up. */
    static const uint64_t jumps[] = { 0, 1, 2, 3, 63, 64, 1000, 65537, 1234567 };
    int ok = 1;
    for (size_t j = 0; j < sizeof jumps / sizeof jumps[0]; j++) {
        ag_pcg32 a, b;
        ag_pcg32_seed(&a, 7, 3);
        b = a;
        for (uint64_t i = 0; i < jumps[j]; i++)
            ag_pcg32_next(&a);
        ag_pcg32_advance(&b, jumps[j]);
        ok &= a.state == b.state && a.inc == b.inc && ag_pcg32_next(&a) == ag_pcg32_next(&b);
    }
    CHECK(ok, "ag_pcg32_advance(n) equals n draws");
    ag_pcg32 c, d;
    ag_pcg32_seed(&c, 9, 1);
    d = c;
    ag_pcg32_advance(&c, 300);
    ag_pcg32_advance(&c, 700);
    ag_pcg32_advance(&d, 1000);
    CHECK(c.state == d.state, "advancing 300 then 700 equals advancing 1000");
    /* Filling n draws at once gives the n draws of n calls of next, and
     * leaves the generator where they leave it: n of every size about the
     * fill's lanes (none, fewer than two rounds of lanes, whole rounds,
     * ragged ends), several streams and seeds. */
    static const size_t fills[] = { 0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 255, 256, 1000, 4099 };
    static uint32_t drawn[4099], filled[4099];
    int fill_ok = 1;
    for (uint64_t stream = 1; stream <= 3; stream++)
        for (size_t f = 0; f < sizeof fills / sizeof fills[0]; f++) {
            ag_pcg32 a, b;
            ag_pcg32_seed(&a, 1000 + stream * 17 + f, stream);
            b = a;
            for (size_t i = 0; i < fills[f]; i++)
                drawn[i] = ag_pcg32_next(&a);
            ag_pcg32_fill(&b, filled, fills[f]);
            const int equal = a.state == b.state && a.inc == b.inc &&
                              (fills[f] == 0 || memcmp(filled, drawn, fills[f] * sizeof *filled) == 0);
            if (!equal && fill_ok)
                CHECK(0, "ag_pcg32_fill of %zu draws (stream %llu) differs from as many calls of next", fills[f],
                      (unsigned long long)stream);
            fill_ok &= equal;
        }
    CHECK(fill_ok, "ag_pcg32_fill equals calls of next");
}

/* Sample mean and variance of n draws; each must lie within 4 sigma of the
 * true value, where sigma(mean) = sqrt(var / n) and
 * sigma(sample var) ~ sqrt((mu4 - var^2) / n), mu4 the fourth central moment. */
static void check_moments(const char *what, const double *x, int n, double mean, double var, double mu4)
{
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (x[i] - mean) * (x[i] - mean);
    v /= n;
    double sm = sqrt(var / n), sv = sqrt((mu4 - var * var) / n);
    CHECK(fabs(m - mean) <= 4 * sm, "%s: mean %.6f, want %.6f +- %.6f", what, m, mean, 4 * sm);
    CHECK(fabs(v - var) <= 4 * sv, "%s: variance %.6f, want %.6f +- %.6f", what, v, var, 4 * sv);
}

static void test_pcg32_distributions(void)
{
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x);
    ag_pcg32 g;
    ag_pcg32_seed(&g, 2024, 7);
    int in_range = 1;
    for (int i = 0; i < N; i++) {
        x[i] = ag_pcg32_uniform(&g);
        in_range &= x[i] >= 0 && x[i] < 1;
    }
    CHECK(in_range, "uniform left [0, 1)");
    /* U(0,1): var 1/12, fourth central moment 1/80 */
    check_moments("uniform", x, N, 0.5, 1.0 / 12, 1.0 / 80);

    int finite = 1;
    for (int i = 0; i < N; i++) {
        x[i] = ag_pcg32_normal(&g);
        finite &= isfinite(x[i]) != 0;
    }
    CHECK(finite, "normal produced a non-finite value");
    /* N(0,1): var 1, fourth moment 3 */
    check_moments("normal", x, N, 0, 1, 3);
    free(x);
}

static void test_pcg32_below(void)
{
    enum { N = 100000, BOUND = 7 };
    ag_pcg32 g;
    ag_pcg32_seed(&g, 99, 3);
    int count[BOUND] = { 0 }, in_range = 1;
    for (int i = 0; i < N; i++) {
        uint32_t r = ag_pcg32_below(&g, BOUND);
        if (r < BOUND)
            count[r]++;
        else
            in_range = 0;
    }
    CHECK(in_range, "below(%d) returned a value out of range", BOUND);
    double p = 1.0 / BOUND, sigma = sqrt(N * p * (1 - p));
    for (int k = 0; k < BOUND; k++)
        CHECK(fabs(count[k] - N * p) <= 4 * sigma, "below(%d): residue %d seen %d times, want %.0f +- %.0f",
              BOUND, k, count[k], N * p, 4 * sigma);

    /* an empty range: 0, as the header says, and no draw taken */
    ag_pcg32 before = g;
    CHECK(ag_pcg32_below(&g, 0) == 0 && g.state == before.state, "below(0): not 0, or a draw was taken");

    /* bound = 3 * 2^30: plain r % bound would map both r and r + bound onto
     * [0, 2^30), giving it probability 1/2 instead of 1/3.  Only rejection
     * sampling gets 1/3. */
    uint32_t big = 3u << 30;
    int low = 0;
    in_range = 1;
    for (int i = 0; i < N; i++) {
        uint32_t r = ag_pcg32_below(&g, big);
        low += r < (1u << 30);
        in_range &= r < big;
    }
    sigma = sqrt(N * (1.0 / 3) * (2.0 / 3));
    CHECK(in_range, "below(3*2^30) returned a value out of range");
    CHECK(fabs(low - N / 3.0) <= 4 * sigma, "below(3*2^30) is biased: %d of %d below 2^30, want %.0f +- %.0f",
          low, N, N / 3.0, 4 * sigma);
    CHECK(ag_pcg32_below(&g, 1) == 0, "below(1) must be 0");
}

/* ======================================================================= */
/* softmax and masking                                                     */
/* ======================================================================= */

static void test_softmax_extremes(ag_ctx *ctx)
{
    ag_reset(ctx);
    const ag_real v[4] = { 1e4, -1e4, 0, 1e4 - 1 };
    ag_tensor *x = ag_from(ctx, 1, (int[]){4}, v);
    ag_tensor *y = ag_softmax(ctx, x, 0), *ly = ag_log_softmax(ctx, x, 0);
    /* Closed form, subtracting the max 1e4: exp terms {1, e^-2e4, e^-1e4, e^-1}. */
    long double e1 = expl(-1.0L), z = 1 + e1, lz = log1pl(e1);
    long double want_y[4] = { 1 / z, 0, 0, e1 / z };
    long double want_ly[4] = { -lz, -2e4L - lz, -1e4L - lz, -1 - lz };
    for (int k = 0; k < 4; k++) {
        CHECK(isfinite(y->data[k]) && fabs((double)(y->data[k] - want_y[k])) <= REL_TIGHT * (double)want_y[k],
              "softmax([1e4,-1e4,0,1e4-1])[%d] = %.17g, want %.17Lg", k, (double)y->data[k], want_y[k]);
        CHECK(isfinite(ly->data[k]) &&
                  fabs((double)(ly->data[k] - want_ly[k])) <= REL_TIGHT * fabsl(want_ly[k]),
              "log_softmax([1e4,-1e4,0,1e4-1])[%d] = %.17g, want %.17Lg", k, (double)ly->data[k], want_ly[k]);
    }
    CHECK(y->data[1] == 0 && y->data[2] == 0, "exp(-1e4) must underflow to exactly 0");
}

/* softmax along dim 0 of a [5,3] tensor: rows are strided (stride 3). */
static void test_softmax_strided(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = random_tensor(ctx, 2, (int[]){5, 3}, -3, 3);
    ag_tensor *y = ag_softmax(ctx, x, 0), *ly = ag_log_softmax(ctx, x, -2);
    int ok = 1;
    for (int c = 0; c < 3; c++) {
        double s = 0;
        for (int r = 0; r < 5; r++)
            s += exp((double)x->data[r * 3 + c]);
        for (int r = 0; r < 5; r++) {
            double p = exp((double)x->data[r * 3 + c]) / s;
            ok &= close_to(y->data[r * 3 + c], p, REL_TIGHT) && close_to(ly->data[r * 3 + c], log(p), REL_TIGHT);
        }
    }
    CHECK(ok, "softmax/log_softmax along dim 0 differ from the direct formula");
}

/* A fully masked row: softmax zeros and zero gradient; a partly masked row:
 * zero weight where masked, the usual gradient elsewhere. */
static void test_softmax_masked_rows(ag_ctx *ctx)
{
    ag_reset(ctx);
    const ag_real v[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, -INFINITY, 2, 0.5 };
    ag_tensor *x = ag_from(ctx, 2, (int[]){2, 4}, v);
    ag_requires_grad(x);
    ag_tensor *R, *y = ag_softmax(ctx, x, -1);
    ag_backward(ctx, weighted_loss(ctx, y, &R));
    for (int k = 0; k < 4; k++) {
        CHECK(y->data[k] == 0, "softmax of an all -inf row: element %d is %g, want 0", k, (double)y->data[k]);
        CHECK(x->grad[k] == 0, "softmax of an all -inf row: gradient %d is %g, want 0", k, (double)x->grad[k]);
    }
    double e[4] = { exp(1.0), 0, exp(2.0), exp(0.5) }, s = e[0] + e[2] + e[3], dot = 0;
    for (int k = 0; k < 4; k++)
        dot += (double)R->data[4 + k] * e[k] / s;
    for (int k = 0; k < 4; k++) {
        double p = e[k] / s, g = p * (R->data[4 + k] - dot);
        CHECK(close_to(y->data[4 + k], p, REL_TIGHT), "masked row softmax[%d] = %g, want %g", k,
              (double)y->data[4 + k], p);
        CHECK(close_to(x->grad[4 + k], g, REL_SUM), "masked row gradient[%d] = %g, want %g", k,
              (double)x->grad[4 + k], g);
    }
    CHECK(y->data[5] == 0 && x->grad[5] == 0, "a -inf entry must get weight 0 and gradient 0");

    /* log_softmax: -inf where the input is -inf.  The upstream gradient is
     * nonzero everywhere (so the loss itself is not finite); the -inf entries
     * are constants and must pass back exactly 0, the rest
     * dx_k = dy_k - p_k sum over finite j of dy_j. */
    ag_reset(ctx);
    x = ag_from(ctx, 2, (int[]){2, 4}, v);
    ag_requires_grad(x);
    ag_tensor *ly = ag_log_softmax(ctx, x, -1);
    ag_backward(ctx, weighted_loss(ctx, ly, &R));
    for (int k = 0; k < 4; k++) {
        CHECK(ly->data[k] == -INFINITY, "log_softmax of an all -inf row: element %d is %g, want -inf", k,
              (double)ly->data[k]);
        CHECK(x->grad[k] == 0, "log_softmax of an all -inf row: gradient %d is %g, want 0", k,
              (double)x->grad[k]);
    }
    double rs = R->data[4] + R->data[6] + R->data[7];
    for (int k = 0; k < 4; k++) {
        if (k == 1) {
            CHECK(ly->data[5] == -INFINITY && x->grad[5] == 0, "log_softmax -inf entry: %g, grad %g",
                  (double)ly->data[5], (double)x->grad[5]);
            continue;
        }
        double p = e[k] / s, g = R->data[4 + k] - p * rs;
        CHECK(close_to(ly->data[4 + k], log(p), REL_TIGHT), "log_softmax masked row[%d] = %g, want %g", k,
              (double)ly->data[4 + k], log(p));
        CHECK(close_to(x->grad[4 + k], g, REL_SUM), "log_softmax masked row gradient[%d] = %g, want %g", k,
              (double)x->grad[4 + k], g);
    }
}

/* Causal attention in the [B,H,T,T] layout with one fully masked query row:
 * masked_fill(-inf) -> softmax -> @ V -> loss.  No NaN may reach any gradient,
 * masked scores get exactly zero weight and zero gradient, and the scores'
 * gradient matches the softmax adjoint computed here in double. */
static void test_masked_attention_gradients(ag_ctx *ctx)
{
    enum { B = 2, H = 2, T = 5, D = 3 };
    ag_reset(ctx);
    ag_tensor *scores = leaf(ctx, 4, (int[]){B, H, T, T}, -4, 4);
    ag_tensor *V = leaf(ctx, 4, (int[]){B, H, T, D}, -1, 1);
    ag_tensor *mask = ag_new(ctx, 4, (int[]){B, 1, T, T});
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                mask->data[(b * T + i) * T + j] = j > i || (b == 1 && i == 2);   /* batch 1, row 2: all masked */
    ag_tensor *w = ag_softmax(ctx, ag_masked_fill(ctx, scores, mask, -INFINITY), -1);
    ag_tensor *out = ag_matmul(ctx, w, V), *R;
    ag_backward(ctx, weighted_loss(ctx, out, &R));

    int finite = 1, zero_where_masked = 1, sums_ok = 1, grad_ok = 1;
    for (size_t i = 0; i < scores->size; i++)
        finite &= isfinite(scores->grad[i]) != 0;
    for (size_t i = 0; i < V->size; i++)
        finite &= isfinite(V->grad[i]) != 0;
    for (size_t i = 0; i < out->size; i++)
        finite &= isfinite(out->data[i]) != 0;
    CHECK(finite, "a NaN or inf reached an output or gradient of masked attention");

    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                size_t row = ((size_t)(b * H + h) * T + i) * T;
                int full = b == 1 && i == 2;
                /* dL/dw[i,j] = sum_d R[i,d] V[j,d]; dscore = w (dw - sum_j dw w) */
                double dw[T], dot = 0, wsum = 0, gsum = 0;
                for (int j = 0; j < T; j++) {
                    dw[j] = 0;
                    for (int d = 0; d < D; d++)
                        dw[j] += (double)R->data[((size_t)(b * H + h) * T + i) * D + d] *
                                 V->data[((size_t)(b * H + h) * T + j) * D + d];
                    dot += dw[j] * w->data[row + j];
                }
                for (int j = 0; j < T; j++) {
                    double wj = w->data[row + j], g = scores->grad[row + j];
                    wsum += wj;
                    gsum += g;
                    if (j > i || full)
                        zero_where_masked &= wj == 0 && g == 0;
                    grad_ok &= close_to(g, wj * (dw[j] - dot), REL_SUM);
                }
                sums_ok &= full ? wsum == 0 : fabs(wsum - 1) <= REL_SUM;
                sums_ok &= fabs(gsum) <= REL_SUM;   /* a softmax row's gradient sums to 0 */
                if (full)
                    for (int d = 0; d < D; d++)
                        zero_where_masked &= out->data[((size_t)(b * H + h) * T + i) * D + d] == 0;
            }
    CHECK(zero_where_masked, "masked scores must get weight 0 and gradient 0 (and a fully masked row output 0)");
    CHECK(sums_ok, "attention rows must sum to 1 (0 when fully masked) and their gradients to 0");
    CHECK(grad_ok, "masked attention: score gradients differ from the softmax adjoint");
}

/* ======================================================================= */
/* dropout                                                                 */
/* ======================================================================= */

/* The engine keeps an element when its draw is >= p 2^32 and multiplies it by
 * (ag_real)(1 / (1 - p)) computed in double: survivors must equal x * scale
 * exactly, and backward must reuse the forward's mask. */
static void test_dropout_statistics(ag_ctx *ctx)
{
    enum { N = 100000 };
    /* and p close to 1: 0.999 (scale 1000), and the largest float below 1
     * (scale 2^24; p 2^32 is then 2^32 - 256, still a uint32_t); 0.147 and
     * 0.0374, whose scale in float arithmetic (1.0f / (1.0f - p)) is another
     * float than the double quotient's, so a scale computed in the wrong
     * precision fails in the float build too */
    const ag_real ps[] = { 0.1f, 0.5f, 0.9f, 0.999f, 1 - 0x1p-24f, 0.147f, 0.0374f };
    for (size_t t = 0; t < sizeof ps / sizeof ps[0]; t++) {
        ag_real p = ps[t];
        ag_real scale = (ag_real)(1.0 / (1.0 - (double)p));
        ag_reset(ctx);
        ag_tensor *x = leaf(ctx, 2, (int[]){100, N / 100}, 1, 2);   /* never 0: a zero output means dropped */
        ag_tensor *R, *y = ag_dropout(ctx, x, p, 1);
        ag_backward(ctx, weighted_loss(ctx, y, &R));
        int dropped = 0, exact = 1, grad_ok = 1;
        for (size_t i = 0; i < y->size; i++) {
            if (y->data[i] == 0) {
                dropped++;
                grad_ok &= x->grad[i] == 0;
            } else {
                exact &= y->data[i] == x->data[i] * scale;
                grad_ok &= x->grad[i] == R->data[i] * scale;
            }
        }
        double frac = (double)dropped / N, sigma = sqrt((double)p * (1 - (double)p) / N);
        CHECK(fabs(frac - (double)p) <= 4 * sigma, "dropout p=%g: dropped fraction %.5f, want %g +- %.5f",
              (double)p, frac, (double)p, 4 * sigma);
        CHECK(exact, "dropout p=%g: survivors are not exactly x * %.9g", (double)p, (double)scale);
        CHECK(grad_ok, "dropout p=%g: gradient is not 0 where dropped and R * scale where kept", (double)p);
    }
}

static void test_dropout_identity(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = leaf(ctx, 2, (int[]){4, 5}, -1, 1);
    ag_pcg32 before = *ag_dropout_rng(ctx);
    ag_tensor *a = ag_dropout(ctx, x, 0, 1), *b = ag_dropout(ctx, x, 0.5f, 0);
    CHECK(a == x && b == x, "dropout with p=0 or training=0 must return its input itself");
    CHECK(ag_tape_length(ctx) == 0, "identity dropout recorded %d tape entries", ag_tape_length(ctx));
    CHECK(memcmp(a->data, x->data, x->size * sizeof(ag_real)) == 0 &&
              memcmp(b->data, x->data, x->size * sizeof(ag_real)) == 0,
          "identity dropout changed values");
    ag_pcg32 after = *ag_dropout_rng(ctx);
    CHECK(before.state == after.state && before.inc == after.inc, "identity dropout drew from the generator");
}

static ag_tensor *dropout_with_seed(ag_ctx *ctx, ag_tensor *x, uint64_t seed)
{
    ag_pcg32_seed(ag_dropout_rng(ctx), seed, 2);
    return ag_dropout(ctx, x, 0.5f, 1);
}

static void test_dropout_seeding(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = ag_full(ctx, 1, (int[]){256}, 1);
    ag_tensor *a = dropout_with_seed(ctx, x, 11), *b = dropout_with_seed(ctx, x, 11);
    ag_tensor *c = dropout_with_seed(ctx, x, 12);
    CHECK(memcmp(a->data, b->data, x->size * sizeof(ag_real)) == 0, "the same dropout seed gave different masks");
    CHECK(memcmp(a->data, c->data, x->size * sizeof(ag_real)) != 0, "different dropout seeds gave the same mask");
    /* Without reseeding, the next call continues the stream: a new mask. */
    ag_tensor *d = ag_dropout(ctx, x, 0.5f, 1);
    CHECK(memcmp(c->data, d->data, x->size * sizeof(ag_real)) != 0, "two consecutive dropout calls gave the same mask");
    /* Element i's multiplier comes from draw i of the context's generator,
     * in order, across the runs of draws the op takes at a time, and the
     * generator is left past the last: sizes about those runs. */
    static const int sizes[] = { 1, 31, 255, 256, 257, 1000 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ag_tensor *ones = ag_full(ctx, 1, (int[]){sizes[k]}, 1);
        ag_pcg32 g = *ag_dropout_rng(ctx);
        ag_tensor *y = ag_dropout(ctx, ones, 0.3f, 1);
        const uint32_t threshold = ag_dropout_threshold(0.3f);
        const ag_real scale = ag_dropout_scale(0.3f);
        int in_order = 1;
        for (int i = 0; i < sizes[k]; i++)
            in_order &= y->data[i] == ag_dropout_multiplier(ag_pcg32_next(&g), threshold, scale);
        CHECK(in_order, "dropout of %d elements: not the generator's draws in order", sizes[k]);
        CHECK(g.state == ag_dropout_rng(ctx)->state, "dropout of %d elements left the generator elsewhere than %d draws on",
              sizes[k], sizes[k]);
    }
}

/* ======================================================================= */
/* errors                                                                  */
/* ======================================================================= */

/* EXPECT_ERROR and the handler it needs, record_error: expect_error.h */

/* Whether msg is one printable line: no byte below 0x20 but a tab, no DEL. */
static int printable_line(const char *msg)
{
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
        if ((*c < 0x20 && *c != '\t') || *c == 0x7F)
            return 0;
    return 1;
}

/* Every message is one printable line, whatever a name or a file's bytes
 * put in it: a newline or carriage return a space, a tab kept, another
 * control byte or DEL \xNN (as the command shows them, so it passes them on
 * as they are), bytes of UTF-8 left alone, an escape never cut in part. */
static void test_message_lines(void)
{
    char buf[64];
    ag_set_err(buf, sizeof buf, "value '%s'", "a\tb\nc\rd\x1b[2Je\x7f\x01\xc3\xa9");
    CHECK(strcmp(buf, "value 'a\tb c d\\x1b[2Je\\x7f\\x01\xc3\xa9'") == 0 && printable_line(buf),
          "ag_set_err: control bytes shown as \\xNN, got '%s'", buf);
    ag_set_err(buf, sizeof buf, "%s", "already \\x1b shown");
    CHECK(strcmp(buf, "already \\x1b shown") == 0, "ag_set_err: an \\xNN already there is not escaped twice: '%s'",
          buf);
    char small[8];
    ag_set_err(small, sizeof small, "ab\x01" "cdef");
    CHECK(strcmp(small, "ab\\x01c") == 0, "ag_set_err: cut to fit after an escape: '%s'", small);
    ag_set_err(small, 6, "ab\x01" "cdef");
    CHECK(strcmp(small, "ab") == 0, "ag_set_err: an escape that does not fit is left out whole: '%s'", small);
    ag_set_err(small, 1, "\x1b");
    CHECK(small[0] == 0, "ag_set_err: a 1-byte buffer holds the empty message");

    /* ag_error's: a parameter's name holds whatever its program gave */
    ag_params *ps = ag_params_new();
    const char *name = "w\n\x1b[31m\t\x7f";
    (void)ag_params_add(ps, name, 1, (int[]){2});
    EXPECT_ERROR((void)ag_params_add(ps, name, 1, (int[]){2}), "duplicate parameter name 'w \\x1b[31m\t\\x7f'");
    CHECK(printable_line(error_msg), "ag_error: one printable line, got '%s'", error_msg);
    ag_params_free(ps);
}

static ag_tensor *zeros(ag_ctx *ctx, int ndim, const int *shape) { return ag_new(ctx, ndim, shape); }
#define Z(...) zeros(ctx, (int)(sizeof((int[]){ __VA_ARGS__ }) / sizeof(int)), (int[]){ __VA_ARGS__ })

/* Dropout's expected value and its smallest keep probability.  The draws
 * drop with probability p' = floor(p 2^32) / 2^32 (p itself where p 2^32
 * is whole, as for every float p from 2^-9 up), and survivors are scaled
 * by 1 / (1 - p'): the expected multiplier (1 - p') scale must be 1 to the
 * scale's rounding for every p.  A scale of 1 / (1 - p) made it 4/3 at
 * 1 - p = 1.5 2^-32 and 1 + 2.7e-10 at p = 0.3 in double, and a keep
 * probability below 2^-32 kept 2^-32 of the elements, each scaled by
 * 1 / (1 - p): 2^8 times the input on average at 1 - p = 2^-40.  Such p
 * (only a double can be one) are refused by ag_dropout and ag_attention
 * in one line; 1 - 2^-32 itself is accepted. */
static void test_dropout_keep_probability(ag_ctx *ctx)
{
    const double u = sizeof(ag_real) == 4 ? 0x1p-24 : 0x1p-53;
#ifdef AG_DOUBLE
    const ag_real ps[] = { 0.1, 0.3, 1e-3, 1e-7, 0.97, 1 - 0x1p-24, 1 - 0x1.4p-31, 1 - 0x1.8p-32, 1 - 0x1p-32 };
#else
    const ag_real ps[] = { 0.1f, 0.3f, 1e-3f, 1e-7f, 0.97f, 1 - 0x1p-24f };
#endif
    for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
        const ag_real p = ps[t];
        const double kept = 4294967296.0 - floor((double)p * 4294967296.0);
        const ag_real scale = (ag_real)(4294967296.0 / kept);
        const double mean = kept / 4294967296.0 * (double)ag_dropout_scale(p);
        CHECK(fabs(mean - 1) <= u, "dropout p = %.17g: the expected multiplier is %.17g, not 1", (double)p, mean);
        ag_reset(ctx);
        ag_tensor *x = ag_new(ctx, 1, (int[]){4096});
        for (size_t i = 0; i < x->size; i++)
            x->data[i] = 1;
        ag_tensor *y = ag_dropout(ctx, x, p, 1);
        int ok = 1;
        for (size_t i = 0; i < y->size; i++)
            ok &= y->data[i] == 0 || y->data[i] == scale;
        CHECK(ok, "dropout p = %.17g: survivors are not 2^32 / %.0f = %.17g", (double)p, kept, (double)scale);
    }
    ag_reset(ctx);
#ifdef AG_DOUBLE
    EXPECT_ERROR((void)ag_dropout(ctx, Z(3), 1 - 0x1p-40, 1), "ag_dropout", "p = 0.99999999999909", "2^-32");
    EXPECT_ERROR((void)ag_dropout(ctx, Z(3), nextafter(1 - 0x1p-32, 1), 0), "ag_dropout", "2^-32");
    EXPECT_ERROR((void)ag_attention(ctx, Z(1, 2, 6), 1, 1, 1 - 0x1p-40, 1, NULL), "ag_attention",
                 "p = 0.99999999999909", "2^-32");
    CHECK(strchr(error_msg, '\n') == NULL, "the refusal is not one line: %s", error_msg);
    const ag_real smallest_keep = 1 - 0x1p-32;
#else
    const ag_real smallest_keep = 1 - 0x1p-24f;      /* the largest float below 1 */
#endif
    volatile int raised = 0;
    if (setjmp(error_jump) == 0) {
        (void)ag_dropout(ctx, Z(3), smallest_keep, 1);
        (void)ag_attention(ctx, Z(1, 2, 6), 1, 1, smallest_keep, 1, NULL);
    } else
        raised = 1;
    CHECK(!raised, "dropout p = %.17g refused: %s", (double)smallest_keep, error_msg);
}

static void test_shape_errors(ag_ctx *ctx)
{
    ag_reset(ctx);
    EXPECT_ERROR((void)ag_add(ctx, Z(2, 3), Z(4)), "ag_add", "[2,3]", "[4]");
    EXPECT_ERROR((void)ag_sub(ctx, Z(2, 3), Z(2, 2)), "ag_sub", "[2,3]", "[2,2]");
    EXPECT_ERROR((void)ag_mul(ctx, Z(3, 1, 5), Z(2, 4)), "ag_mul", "[3,1,5]", "[2,4]");
    EXPECT_ERROR((void)ag_mul(ctx, Z(2, 3, 4), Z(3, 3, 4)), "ag_mul", "[2,3,4]", "[3,3,4]");

    /* The message the header's example promises, word for word. */
    EXPECT_ERROR((void)ag_matmul(ctx, Z(2, 3), Z(4, 5)), "ag_matmul", "[2,3]", "[4,5]");
    CHECK(strcmp(error_msg, "ag_matmul: inner dimensions differ: [2,3] @ [4,5]") == 0,
          "matmul inner-dimension error reads \"%s\"", error_msg);
    EXPECT_ERROR((void)ag_matmul(ctx, Z(2, 3, 4), Z(3, 4, 5)), "ag_matmul", "[2,3,4]", "[3,4,5]");
    EXPECT_ERROR((void)ag_matmul(ctx, Z(3), Z(3, 2)), "ag_matmul", "[3]", "[3,2]");
    EXPECT_ERROR((void)ag_matmul(ctx, Z(2, 3), Z(3)), "ag_matmul", "[2,3]", "[3]");

    EXPECT_ERROR((void)ag_linear(ctx, Z(2, 3), Z(4, 5), NULL), "ag_linear", "[2,3]", "[4,5]");
    EXPECT_ERROR((void)ag_linear(ctx, Z(2, 3), Z(4, 3), Z(5)), "ag_linear", "[4,3]", "[5]");
    EXPECT_ERROR((void)ag_layer_norm(ctx, Z(2, 3), Z(4), NULL, 1e-5f), "ag_layer_norm", "[2,3]", "[4]");
    EXPECT_ERROR((void)ag_layer_norm(ctx, Z(2, 3), Z(3), Z(2), 1e-5f), "ag_layer_norm", "[2,3]", "[2]");
    EXPECT_ERROR((void)ag_layer_norm(ctx, Z(2, 3), NULL, NULL, -1e-5f), "ag_layer_norm", "eps = -1e-05");
    EXPECT_ERROR((void)ag_layer_norm(ctx, Z(2, 3), NULL, NULL, NAN), "ag_layer_norm", "eps = nan");
    ag_tensor *cache = Z(1, 4, 2);
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, cache, cache, 0), "ag_attention_cached",
                 "share their data");

    EXPECT_ERROR((void)ag_masked_fill(ctx, Z(2, 3), Z(3, 3), 0), "ag_masked_fill", "[2,3]", "[3,3]");
    EXPECT_ERROR((void)ag_masked_fill(ctx, Z(2, 3), Z(2, 2, 3), 0), "ag_masked_fill", "[2,3]", "[2,2,3]");

    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 2, (int[]){4, 2}), "ag_reshape", "[2,3]", "[4,2]");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 2, (int[]){-1, 4}), "ag_reshape", "[2,3]", "[-1,4]");
    /* a product that would wrap size_t (2^21 2^21 2^22 = 2^64) is more than a has, not 0 */
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 4, (int[]){1 << 21, 1 << 21, 1 << 22, 6}), "ag_reshape",
                 "[2097152,2097152,4194304,6]", "more elements");

    EXPECT_ERROR((void)ag_transpose(ctx, Z(2, 3), 0, 2), "ag_transpose", "dim 2", "[2,3]");
    EXPECT_ERROR((void)ag_softmax(ctx, Z(2, 3), -3), "ag_softmax", "dim -3", "[2,3]");
    EXPECT_ERROR((void)ag_log_softmax(ctx, Z(2, 3), 2), "ag_log_softmax", "dim 2", "[2,3]");
    EXPECT_ERROR((void)ag_sum(ctx, Z(2, 3), 5, 0), "ag_sum", "dim 5", "[2,3]");
    EXPECT_ERROR((void)ag_mean(ctx, Z(2, 3), -4, 1), "ag_mean", "dim -4", "[2,3]");

    EXPECT_ERROR((void)ag_slice(ctx, Z(4, 3), 0, 3, 2), "ag_slice", "[4,3]");
    EXPECT_ERROR((void)ag_slice(ctx, Z(4, 3), 1, -1, 2), "ag_slice", "[4,3]");
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ Z(2, 3), Z(2, 4) }, 2, 0), "ag_concat", "[2,3]", "[2,4]");
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ Z(2, 3), Z(2, 3, 1) }, 2, 1), "ag_concat", "[2,3]",
                 "[2,3,1]");

    EXPECT_ERROR((void)ag_embedding(ctx, Z(5, 3), (const int32_t[]){1, 5}, 1, (int[]){2}), "ag_embedding",
                 "id 5", "[0,5)");
    EXPECT_ERROR((void)ag_embedding(ctx, Z(5, 3), (const int32_t[]){-1}, 1, (int[]){1}), "ag_embedding", "id -1");
    EXPECT_ERROR((void)ag_cross_entropy(ctx, Z(2, 4), (const int32_t[]){0, 4}), "ag_cross_entropy", "target 4",
                 "[0,4)");
    EXPECT_ERROR((void)ag_dropout(ctx, Z(3), 1, 1), "ag_dropout", "p = 1");
    EXPECT_ERROR((void)ag_dropout(ctx, Z(3), -0.25f, 1), "ag_dropout", "p = -0.25");
    EXPECT_ERROR((void)ag_dropout(ctx, Z(3), NAN, 0), "ag_dropout");

    EXPECT_ERROR((void)ag_attention(ctx, Z(2, 3, 12), 3, 1, 0, 0, NULL), "ag_attention", "[2,3,12]", "3 heads");
    EXPECT_ERROR((void)ag_attention(ctx, Z(2, 12), 2, 1, 0, 0, NULL), "ag_attention", "[2,12]");
    EXPECT_ERROR((void)ag_attention(ctx, Z(2, 3, 12), 0, 1, 0, 0, NULL), "ag_attention", "0 heads");
    EXPECT_ERROR((void)ag_attention(ctx, Z(2, 3, 12), 1 << 30, 1, 0, 0, NULL), "ag_attention", "[2,3,12]");
    EXPECT_ERROR((void)ag_attention(ctx, Z(2, 3, 12), 2, 1, 1.5f, 1, NULL), "ag_attention", "p = 1.5");

    ag_real few[4] = { 0 };
    /* a bad shape is named as the function the caller called */
    EXPECT_ERROR((void)ag_embedding(ctx, Z(5, 3), (const int32_t[]){ 1 }, 2, (int[]){ 1, 0 }), "ag_embedding",
                 "dimension 1 has size 0");
    EXPECT_ERROR((void)ag_from(ctx, 1, (int[]){ -1 }, few), "ag_from", "size -1");
    EXPECT_ERROR((void)ag_full(ctx, 5, (int[]){ 1, 1, 1, 1, 1 }, 0), "ag_full", "5 dimensions");
    char one[1] = { 'x' };
    CHECK(ag_shape_str(Z(2, 3), one, 0) == one && one[0] == 'x', "ag_shape_str wrote into a buffer of length 0");

    /* sizes past INT_MAX: refused in words, not wrapped (the tensors are
     * only looked at, so their data can be a few bytes) */
    ag_tensor wide = { .ndim = 1, .shape = { 1 << 30 }, .size = (size_t)1 << 30, .data = few };
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ &wide, &wide, &wide }, 3, 0), "ag_concat",
                 "3221225472 entries");
    EXPECT_ERROR((void)ag_slice(ctx, Z(4), 0, 2, INT_MAX), "ag_slice", "[2, 2147483649)");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), Z(1, 4, 2), INT_MAX),
                 "ag_attention_cached", "2147483647..2147483648");
    /* the kernels count (item, query block) tasks in int: B x heads x T past
     * INT_MAX is refused before anything is allocated or run */
    ag_tensor tall = { .ndim = 3, .shape = { 1 << 29, 2, 12 }, .size = (size_t)12 << 30, .data = few };
    EXPECT_ERROR((void)ag_attention(ctx, &tall, 4, 1, 0, 1, NULL), "ag_attention", "4 heads", "too large");
    EXPECT_ERROR((void)ag_attention_cached(ctx, &tall, 4, &tall, &tall, 0), "ag_attention_cached", "too large");
    /* products past the matrix multiply's int sizes (rows, columns, inner
     * size each at most INT_MAX / 2, at most INT_MAX products) are refused
     * before the output is allocated: a linear layer's 2^32 rows were taken
     * as 0 rows, and its output left unwritten without a word */
    const int half = INT_MAX / 2;
    ag_tensor rows32 = { .ndim = 3, .shape = { 1 << 16, 1 << 16, 1 }, .size = (size_t)1 << 32, .data = few };
    ag_tensor rows30 = { .ndim = 2, .shape = { half + 1, 1 }, .size = (size_t)half + 1, .data = few };
    ag_tensor cols30 = { .ndim = 2, .shape = { 1, half + 1 }, .size = (size_t)half + 1, .data = few };
    ag_tensor items32 = { .ndim = 4, .shape = { 1 << 16, 1 << 16, 1, 1 }, .size = (size_t)1 << 32, .data = few };
    EXPECT_ERROR((void)ag_linear(ctx, &rows32, Z(1, 1), NULL), "ag_linear", "[65536,65536,1]", "[1,1]",
                 "4294967296 rows", "too large");
    EXPECT_ERROR((void)ag_linear_gelu(ctx, &rows32, Z(1, 1), NULL), "ag_linear_gelu", "4294967296 rows");
    EXPECT_ERROR((void)ag_linear(ctx, &rows30, Z(1, 1), NULL), "ag_linear", "1073741824 rows", "at most 1073741823");
    EXPECT_ERROR((void)ag_linear(ctx, Z(1, 1), &rows30, NULL), "ag_linear", "1073741824 outputs");
    EXPECT_ERROR((void)ag_matmul(ctx, &rows32, Z(1, 1)), "ag_matmul", "[65536,65536,1] @ [1,1]",
                 "1 product of 4294967296 rows");
    EXPECT_ERROR((void)ag_matmul(ctx, &items32, &items32), "ag_matmul", "4294967296 products of 1 rows x 1 columns");
    EXPECT_ERROR((void)ag_matmul(ctx, &rows30, Z(1, 1)), "ag_matmul", "1073741824 rows");
    EXPECT_ERROR((void)ag_matmul(ctx, Z(1, 1), &cols30), "ag_matmul", "[1,1] @ [1,1073741824]", "1073741824 columns");
    /* a shape whose bytes pass size_t's range, at creation */
    EXPECT_ERROR((void)ag_new(ctx, 4, (int[]){ 1 << 30, 1 << 30, 1 << 30, 1 << 30 }), "ag_new",
                 "[1073741824,1073741824,1073741824,1073741824]", "too large");
    EXPECT_ERROR((void)ag_full(ctx, 3, (int[]){ INT_MAX, INT_MAX, INT_MAX }, 1), "ag_full", "too large");
    /* and one whose bytes fit size_t but not once rounded up to the arena's
     * 64: 2^64 - 4 bytes of floats ([3,715827883,2147483647]) or 2^64 - 16
     * of doubles were rounded to 0, given 64 bytes, and ag_new cleared
     * 2^64 - 4 bytes from there */
    const int *edge = sizeof(ag_real) == 4 ? (const int[]){ 3, 715827883, INT_MAX }
                                           : (const int[]){ 859971, 1492810, 1796145 };
    EXPECT_ERROR((void)ag_new(ctx, 3, edge), "ag_new", sizeof(ag_real) == 4 ? "[3,715827883,2147483647]" : "[859971,",
                 "too large");
    /* the arena itself: a request whose rounding would wrap, or whose end
     * in the current block would (a block with something in it took 2^64
     * - 64 more bytes as fitting), is refused */
    (void)Z(64);
    EXPECT_ERROR((void)ag_alloc(ctx, SIZE_MAX - 10), "out of memory");
    EXPECT_ERROR((void)ag_alloc(ctx, SIZE_MAX - 100), "out of memory");
    /* an inferred dim past INT_MAX is named, not cut to its low bits (2^32
     * became 0, and the error spoke of a view of 0 elements) */
    ag_tensor sq32 = { .ndim = 2, .shape = { 1 << 16, 1 << 16 }, .size = (size_t)1 << 32, .data = few };
    EXPECT_ERROR((void)ag_reshape(ctx, &sq32, 1, (int[]){ -1 }), "ag_reshape", "[65536,65536]", "[-1]",
                 "4294967296 entries");
    EXPECT_ERROR((void)ag_reshape(ctx, &sq32, 2, (int[]){ 2, -1 }), "ag_reshape", "2147483648 entries");

    /* the cache's other misuses: a qkv that is not [B,T,3d], a cache of
     * another width or batch, caches of two lengths, a negative position */
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(2, 6), 1, Z(1, 4, 2), Z(1, 4, 2), 0), "ag_attention_cached",
                 "[2,6]", "[B,T,3d]");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 12), 3, Z(1, 4, 4), Z(1, 4, 4), 0), "ag_attention_cached",
                 "[1,2,12]", "3 heads");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 3), Z(1, 4, 2), 0), "ag_attention_cached",
                 "cache [1,4,3]", "[1,S,2]");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), Z(2, 4, 2), 0), "ag_attention_cached",
                 "cache [2,4,2]", "[1,S,2]");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), Z(1, 5, 2), 0), "ag_attention_cached",
                 "[1,4,2]", "[1,5,2]", "differ");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), Z(1, 4, 2), -1), "ag_attention_cached",
                 "-1..0", "cache of 4");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), Z(1, 4, 2), 3), "ag_attention_cached",
                 "3..4", "cache of 4");
    /* reshape's other misuses: no dims or too many, a size below 1 that is
     * not the one -1, two -1s */
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 0, (int[]){6}), "ag_reshape", "0 dimensions");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), AG_MAX_DIMS + 1, (int[]){1, 1, 1, 1, 6}), "ag_reshape",
                 "5 dimensions");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 2, (int[]){0, 6}), "ag_reshape", "bad size 0 at dim 0", "[2,3]");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 2, (int[]){6, -2}), "ag_reshape", "bad size -2 at dim 1");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 3, (int[]){-1, 3, -1}), "ag_reshape", "bad size -1 at dim 2");
    EXPECT_ERROR((void)ag_reshape(ctx, Z(2, 3), 2, (int[]){2, 2}), "ag_reshape", "[2,3]", "(6 elements)", "[2,2]",
                 "(4 elements)");
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ Z(2) }, 0, 0), "ag_concat", "no tensors");
    EXPECT_ERROR((void)ag_embedding(ctx, Z(15), (const int32_t[]){ 1 }, 1, (int[]){ 1 }), "ag_embedding", "[V,d]",
                 "[15]");
    EXPECT_ERROR((void)ag_embedding(ctx, Z(5, 3), (const int32_t[]){ 1 }, 0, (int[]){ 1 }), "ag_embedding");
    EXPECT_ERROR((void)ag_set_precision(ctx, 7), "ag_set_precision", "7 is not");
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ Z(2) }, 0), "ag_params_join", "0 parameters");
    EXPECT_ERROR((void)ag_graph_walk(ctx, Z(2), NULL, NULL), "ag_graph_walk", "fn is NULL");

    /* the memory questions take the sizes ag_attention takes (0 heads divided by zero) */
    EXPECT_ERROR((void)ag_attention_arena_bytes(2, 3, 4, 0, AG_FP32), "ag_attention_arena_bytes", "0 heads");
    EXPECT_ERROR((void)ag_attention_arena_bytes(-2, 3, 4, 2, AG_FP32), "ag_attention_arena_bytes", "B -2");
    EXPECT_ERROR((void)ag_attention_arena_bytes(2, 3, 4, 2, 7), "ag_attention_arena_bytes", "precision 7");
    EXPECT_ERROR((void)ag_attention_scratch_bytes(2, 3, 6, 4), "ag_attention_scratch_bytes", "d 6", "4 heads");
    EXPECT_ERROR((void)ag_attention_scratch_bytes(2, 0, 4, 0), "ag_attention_scratch_bytes", "T 0");
    EXPECT_ERROR((void)ag_attention_arena_bytes(1 << 30, 1 << 30, 1 << 30, 1, AG_FP32), "ag_attention_arena_bytes",
                 "too large");
    /* a product's sizes: each at least 1 and small enough for the kernels'
     * int arithmetic (INT_MAX overflowed inside them: UBSan stopped it, and
     * a plain build returned a wrapped number), and a known precision */
    EXPECT_ERROR((void)ag_matmul_scratch_bytes(INT_MAX, INT_MAX, INT_MAX, AG_FP32), "ag_matmul_scratch_bytes",
                 "M 2147483647");
    EXPECT_ERROR((void)ag_matmul_scratch_bytes(-5, 3, 3, AG_FP32), "ag_matmul_scratch_bytes", "M -5");
    EXPECT_ERROR((void)ag_matmul_scratch_bytes(3, 0, 3, AG_BF16), "ag_matmul_scratch_bytes", "N 0");
    EXPECT_ERROR((void)ag_matmul_scratch_bytes(3, 3, 3, 9), "ag_matmul_scratch_bytes", "precision 9");
    /* (the reference kernels keep no buffers) */
    CHECK((ag_matmul_scratch_bytes(3, 3, 3, AG_FP32) > 0) == (strcmp(ag_kernels_name(), "reference") != 0),
          "the scratch of a 3x3x3 product with the %s kernels is %zu bytes", ag_kernels_name(),
          ag_matmul_scratch_bytes(3, 3, 3, AG_FP32));
}

static void count_op(const ag_graph_op *op, void *user);

/* A NULL where a tensor (or an array) is needed is named, never followed. */
static void test_null_arguments(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = Z(2, 3), *none = NULL;
    const int32_t ids[2] = { 0, 1 };
    EXPECT_ERROR((void)ag_add(ctx, x, none), "ag_add", "b is NULL");
    EXPECT_ERROR((void)ag_mul(ctx, none, x), "ag_mul", "a is NULL");
    EXPECT_ERROR((void)ag_scale(ctx, none, 2), "ag_scale", "a is NULL");
    EXPECT_ERROR((void)ag_add_scalar(ctx, none, 2), "ag_add_scalar", "a is NULL");
    EXPECT_ERROR((void)ag_exp(ctx, none), "ag_exp", "a is NULL");
    EXPECT_ERROR((void)ag_gelu(ctx, none), "ag_gelu", "a is NULL");
    EXPECT_ERROR((void)ag_matmul(ctx, none, x), "ag_matmul", "a is NULL");
    EXPECT_ERROR((void)ag_linear(ctx, x, none, NULL), "ag_linear", "W is NULL");
    EXPECT_ERROR((void)ag_linear_gelu(ctx, none, x, NULL), "ag_linear_gelu", "x is NULL");
    EXPECT_ERROR((void)ag_reshape(ctx, x, 1, NULL), "ag_reshape", "shape is NULL");
    EXPECT_ERROR((void)ag_transpose(ctx, none, 0, 1), "ag_transpose", "a is NULL");
    EXPECT_ERROR((void)ag_concat(ctx, NULL, 2, 0), "ag_concat", "ts is NULL");
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ x, NULL }, 2, 0), "ag_concat", "ts[1] is NULL");
    EXPECT_ERROR((void)ag_slice(ctx, none, 0, 0, 1), "ag_slice", "a is NULL");
    EXPECT_ERROR((void)ag_sum(ctx, none, 0, 0), "ag_sum", "a is NULL");
    EXPECT_ERROR((void)ag_mean_all(ctx, none), "ag_mean_all", "a is NULL");
    EXPECT_ERROR((void)ag_log_softmax(ctx, none, -1), "ag_log_softmax", "a is NULL");
    EXPECT_ERROR((void)ag_masked_fill(ctx, x, none, 0), "ag_masked_fill", "mask is NULL");
    EXPECT_ERROR((void)ag_dropout(ctx, none, 0.5f, 1), "ag_dropout", "a is NULL");
    EXPECT_ERROR((void)ag_embedding(ctx, x, NULL, 1, (int[]){2}), "ag_embedding", "ids is NULL");
    EXPECT_ERROR((void)ag_embedding(ctx, none, ids, 1, (int[]){2}), "ag_embedding", "W is NULL");
    EXPECT_ERROR((void)ag_layer_norm(ctx, none, NULL, NULL, 1e-5f), "ag_layer_norm", "x is NULL");
    EXPECT_ERROR((void)ag_cross_entropy(ctx, x, NULL), "ag_cross_entropy", "targets is NULL");
    EXPECT_ERROR((void)ag_attention(ctx, none, 1, 1, 0, 0, NULL), "ag_attention", "qkv is NULL");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, NULL, Z(1, 4, 2), 0), "ag_attention_cached",
                 "k_cache is NULL");
    EXPECT_ERROR((void)ag_matmul(ctx, x, none), "ag_matmul", "b is NULL");
    EXPECT_ERROR((void)ag_reshape(ctx, none, 1, (int[]){6}), "ag_reshape", "a is NULL");
    EXPECT_ERROR((void)ag_mean(ctx, none, 0, 0), "ag_mean", "a is NULL");
    EXPECT_ERROR((void)ag_sum_all(ctx, none), "ag_sum_all", "a is NULL");
    EXPECT_ERROR((void)ag_masked_fill(ctx, none, x, 0), "ag_masked_fill", "a is NULL");
    EXPECT_ERROR((void)ag_cross_entropy(ctx, none, ids), "ag_cross_entropy", "logits is NULL");
    EXPECT_ERROR((void)ag_embedding(ctx, x, ids, 1, NULL), "ag_embedding", "ids_shape is NULL");
    EXPECT_ERROR((void)ag_attention_cached(ctx, none, 1, Z(1, 4, 2), Z(1, 4, 2), 0), "ag_attention_cached",
                 "qkv is NULL");
    EXPECT_ERROR((void)ag_attention_cached(ctx, Z(1, 2, 6), 1, Z(1, 4, 2), NULL, 0), "ag_attention_cached",
                 "v_cache is NULL");
    /* inference only: a qkv that wants a gradient would silently get none */
    {
        ag_tensor *g = Z(1, 2, 6);
        ag_requires_grad(g);
        EXPECT_ERROR((void)ag_attention_cached(ctx, g, 1, Z(1, 4, 2), Z(1, 4, 2), 0), "ag_attention_cached",
                     "wants a gradient", "ag_set_grad_enabled");
        int was = ag_set_grad_enabled(ctx, 0);
        ag_tensor *y = ag_attention_cached(ctx, g, 1, Z(1, 4, 2), Z(1, 4, 2), 0);
        CHECK(y && !y->requires_grad && y->shape[2] == 2, "ag_attention_cached with gradients off");
        ag_set_grad_enabled(ctx, was);
    }
    EXPECT_ERROR(ag_backward(ctx, none), "ag_backward", "loss is NULL");
    EXPECT_ERROR((void)ag_graph_walk(ctx, none, NULL, NULL), "ag_graph_walk", "root is NULL");
    EXPECT_ERROR((void)ag_new(ctx, 2, NULL), "shape is NULL");
    EXPECT_ERROR((void)ag_from(ctx, 1, (int[]){3}, NULL), "ag_from", "values is NULL");
    EXPECT_ERROR(ag_requires_grad(none), "ag_requires_grad", "t is NULL");
    EXPECT_ERROR((void)ag_arena_rewind(ctx, ag_arena_mark(ctx), NULL), "ag_arena_rewind", "keep is NULL");
    ag_params *ps = ag_params_new();
    EXPECT_ERROR((void)ag_params_add(ps, NULL, 1, (int[]){2}), "ag_params_add", "name is NULL");
    EXPECT_ERROR((void)ag_params_find(ps, NULL), "ag_params_find", "name is NULL");
    EXPECT_ERROR(ag_params_alloc(NULL), "ag_params_alloc", "ps is NULL");
    EXPECT_ERROR(ag_params_zero_grad(NULL), "ag_params_zero_grad", "ps is NULL");
    EXPECT_ERROR((void)ag_clip_grad_norm(NULL, 1), "ag_clip_grad_norm", "ps is NULL");
    EXPECT_ERROR((void)ag_optim_adamw(NULL, 0.9, 0.999, 1e-8, 0), "ag_optim_adamw", "ps is NULL");
    EXPECT_ERROR(ag_optim_step(NULL, 0.1), "ag_optim_step", "opt is NULL");
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ NULL }, 1), "ag_params_join", "tensor 0");
    /* the generator: every function taking one */
    ag_pcg32 *no_g = NULL;
    uint32_t draws[4];
    EXPECT_ERROR(ag_pcg32_seed(no_g, 1, 2), "ag_pcg32_seed: g is NULL");
    EXPECT_ERROR((void)ag_pcg32_next(no_g), "ag_pcg32_next: g is NULL");
    EXPECT_ERROR((void)ag_pcg32_uniform(no_g), "ag_pcg32_uniform: g is NULL");
    EXPECT_ERROR((void)ag_pcg32_normal(no_g), "ag_pcg32_normal: g is NULL");
    EXPECT_ERROR((void)ag_pcg32_below(no_g, 7), "ag_pcg32_below: g is NULL");
    EXPECT_ERROR(ag_pcg32_advance(no_g, 3), "ag_pcg32_advance: g is NULL");
    EXPECT_ERROR(ag_pcg32_fill(no_g, draws, 4), "ag_pcg32_fill: g is NULL");
    {
        ag_pcg32 g0;
        ag_pcg32_seed(&g0, 1, 2);
        ag_pcg32 g1 = g0;
        EXPECT_ERROR(ag_pcg32_fill(&g1, NULL, 4), "ag_pcg32_fill: out is NULL");
        ag_pcg32_fill(&g1, NULL, 0);
        CHECK(g1.state == g0.state && g1.inc == g0.inc, "a refused ag_pcg32_fill moved the generator");
    }
    ag_params_free(ps);

    /* a NULL context (ag_ctx_new's result never checked, say): every
     * function taking one names itself and the context */
    ag_ctx *no = NULL;
    ag_tensor *q = Z(1, 2, 6), *c1 = Z(1, 4, 2), *c2 = Z(1, 4, 2);
    char buf[32];
    EXPECT_ERROR(ag_reset(no), "ag_reset: ctx is NULL");
    EXPECT_ERROR((void)ag_arena_used(no), "ag_arena_used: ctx is NULL");
    EXPECT_ERROR((void)ag_arena_peak(no), "ag_arena_peak: ctx is NULL");
    EXPECT_ERROR((void)ag_arena_reserved(no), "ag_arena_reserved: ctx is NULL");
    EXPECT_ERROR((void)ag_set_grad_enabled(no, 0), "ag_set_grad_enabled: ctx is NULL");
    EXPECT_ERROR((void)ag_grad_enabled(no), "ag_grad_enabled: ctx is NULL");
    EXPECT_ERROR((void)ag_arena_mark(no), "ag_arena_mark: ctx is NULL");
    EXPECT_ERROR((void)ag_arena_rewind(no, ag_arena_mark(ctx), x), "ag_arena_rewind: ctx is NULL");
    EXPECT_ERROR((void)ag_dropout_rng(no), "ag_dropout_rng: ctx is NULL");
    EXPECT_ERROR((void)ag_set_precision(no, AG_FP32), "ag_set_precision: ctx is NULL");
    EXPECT_ERROR((void)ag_get_precision(no), "ag_get_precision: ctx is NULL");
    EXPECT_ERROR(ag_backward(no, x), "ag_backward: ctx is NULL");
    EXPECT_ERROR(ag_set_grad_ready_hook(no, NULL, NULL), "ag_set_grad_ready_hook: ctx is NULL");
    EXPECT_ERROR((void)ag_graph_walk(no, x, count_op, NULL), "ag_graph_walk: ctx is NULL");
    EXPECT_ERROR(ag_graph_dot(no, x, stdout), "ag_graph_dot: ctx is NULL");
    EXPECT_ERROR((void)ag_tape_length(no), "ag_tape_length: ctx is NULL");
    EXPECT_ERROR((void)ag_new(no, 1, (int[]){ 2 }), "ag_new: ctx is NULL");
    EXPECT_ERROR((void)ag_from(no, 1, (int[]){ 2 }, (ag_real[]){ 1, 2 }), "ag_from: ctx is NULL");
    EXPECT_ERROR((void)ag_full(no, 1, (int[]){ 2 }, 1), "ag_full: ctx is NULL");
    EXPECT_ERROR((void)ag_params_join(no, (ag_tensor *[]){ x }, 1), "ag_params_join: ctx is NULL");
    EXPECT_ERROR((void)ag_add(no, x, x), "ag_add: ctx is NULL");
    EXPECT_ERROR((void)ag_sub(no, x, x), "ag_sub: ctx is NULL");
    EXPECT_ERROR((void)ag_mul(no, x, x), "ag_mul: ctx is NULL");
    EXPECT_ERROR((void)ag_scale(no, x, 2), "ag_scale: ctx is NULL");
    EXPECT_ERROR((void)ag_add_scalar(no, x, 2), "ag_add_scalar: ctx is NULL");
    EXPECT_ERROR((void)ag_exp(no, x), "ag_exp: ctx is NULL");
    EXPECT_ERROR((void)ag_log(no, x), "ag_log: ctx is NULL");
    EXPECT_ERROR((void)ag_tanh(no, x), "ag_tanh: ctx is NULL");
    EXPECT_ERROR((void)ag_relu(no, x), "ag_relu: ctx is NULL");
    EXPECT_ERROR((void)ag_gelu(no, x), "ag_gelu: ctx is NULL");
    EXPECT_ERROR((void)ag_matmul(no, x, Z(3, 2)), "ag_matmul: ctx is NULL");
    EXPECT_ERROR((void)ag_linear(no, x, Z(2, 3), NULL), "ag_linear: ctx is NULL");
    EXPECT_ERROR((void)ag_linear_gelu(no, x, Z(2, 3), NULL), "ag_linear_gelu: ctx is NULL");
    EXPECT_ERROR((void)ag_reshape(no, x, 1, (int[]){ 6 }), "ag_reshape: ctx is NULL");
    EXPECT_ERROR((void)ag_transpose(no, x, 0, 1), "ag_transpose: ctx is NULL");
    EXPECT_ERROR((void)ag_concat(no, (ag_tensor *[]){ x, x }, 2, 0), "ag_concat: ctx is NULL");
    EXPECT_ERROR((void)ag_slice(no, x, 0, 0, 1), "ag_slice: ctx is NULL");
    EXPECT_ERROR((void)ag_sum(no, x, 0, 0), "ag_sum: ctx is NULL");
    EXPECT_ERROR((void)ag_mean(no, x, 0, 0), "ag_mean: ctx is NULL");
    EXPECT_ERROR((void)ag_sum_all(no, x), "ag_sum_all: ctx is NULL");
    EXPECT_ERROR((void)ag_mean_all(no, x), "ag_mean_all: ctx is NULL");
    EXPECT_ERROR((void)ag_softmax(no, x, -1), "ag_softmax: ctx is NULL");
    EXPECT_ERROR((void)ag_log_softmax(no, x, -1), "ag_log_softmax: ctx is NULL");
    EXPECT_ERROR((void)ag_masked_fill(no, x, x, 0), "ag_masked_fill: ctx is NULL");
    EXPECT_ERROR((void)ag_dropout(no, x, 0.5f, 1), "ag_dropout: ctx is NULL");
    EXPECT_ERROR((void)ag_embedding(no, x, ids, 1, (int[]){ 2 }), "ag_embedding: ctx is NULL");
    EXPECT_ERROR((void)ag_layer_norm(no, x, NULL, NULL, 1e-5f), "ag_layer_norm: ctx is NULL");
    EXPECT_ERROR((void)ag_cross_entropy(no, x, ids), "ag_cross_entropy: ctx is NULL");
    EXPECT_ERROR((void)ag_attention(no, q, 1, 1, 0, 0, NULL), "ag_attention: ctx is NULL");
    EXPECT_ERROR((void)ag_attention_cached(no, q, 1, c1, c2, 0), "ag_attention_cached: ctx is NULL");
    EXPECT_ERROR((void)ag_shape_str(NULL, buf, sizeof buf), "ag_shape_str: t is NULL");
    EXPECT_ERROR((void)ag_shape_str(x, NULL, 8), "ag_shape_str: buf is NULL");
}

/* ag_params_join views parameters stored back to back as one tensor whose
 * gradient is theirs; anything else is refused. */
static void test_params_join(ag_ctx *ctx)
{
    ag_params *ps = ag_params_new();
    ag_tensor *a = ag_params_add(ps, "a", 2, (int[]){2, 3});
    ag_tensor *b = ag_params_add(ps, "b", 2, (int[]){2, 3});
    ag_tensor *c = ag_params_add(ps, "c", 2, (int[]){1, 3});
    ag_tensor *d = ag_params_add(ps, "d", 2, (int[]){2, 3});
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ a, b }, 2), "ag_params_join", "not an allocated");
    ag_params_alloc(ps);
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = (ag_real)i;
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ b, c }, 2), "ag_params_join", "c", "[1,3]", "[2,3]");
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ a, d }, 2), "ag_params_join", "d", "right after a");
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ b, a }, 2), "ag_params_join", "a", "right after b");
    ag_tensor *z = Z(3);
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ z }, 1), "ag_params_join", "not an allocated");
    /* a joined first dim past INT_MAX is refused: two [2^30] parameters
     * were joined as [-2^31] (only looked at: their data is a few bytes,
     * the second's address where the first's 2^30 elements would end) */
    ag_real few[4] = { 0 };
    ag_tensor h0 = { .ndim = 1, .shape = { 1 << 30 }, .size = (size_t)1 << 30, .data = few, .is_param = 1,
                     .name = "h0" };
    ag_tensor h1 = h0;
    h1.data = (ag_real *)((uintptr_t)few + h0.size * sizeof(ag_real));
    h1.name = "h1";
    EXPECT_ERROR((void)ag_params_join(ctx, (ag_tensor *[]){ &h0, &h1 }, 2), "ag_params_join", "2 parameters of [1073741824]",
                 "2147483648 entries");

    /* [a; b] is [4,3] over a's and b's storage; y = sum(x [a;b]^T) trains both */
    ag_reset(ctx);
    ag_params_zero_grad(ps);
    ag_tensor *ab = ag_params_join(ctx, (ag_tensor *[]){ a, b }, 2);
    CHECK(ab->ndim == 2 && ab->shape[0] == 4 && ab->shape[1] == 3 && ab->data == a->data && ab->data[6] == b->data[0],
          "joined parameters: shape [4,3] over a then b");
    ag_tensor *x = ag_from(ctx, 2, (int[]){1, 3}, (ag_real[]){ 1, 2, 3 });
    ag_backward(ctx, ag_sum_all(ctx, ag_linear(ctx, x, ab, NULL)));
    int ok = 1;
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            ok &= a->grad[r * 3 + k] == k + 1 && b->grad[r * 3 + k] == k + 1;
    for (size_t i = 0; i < c->size; i++)
        ok &= c->grad[i] == 0 && d->grad[i] == 0;
    CHECK(ok, "gradients through the joined view reach a and b, and nothing else");
    ag_params_free(ps);
}

static void count_op(const ag_graph_op *op, void *user)
{
    (void)op;
    if (user)
        ++*(int *)user;
}

static void test_usage_errors(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = leaf(ctx, 2, (int[]){2, 3}, -1, 1);
    EXPECT_ERROR(ag_backward(ctx, ag_scale(ctx, x, 2)), "ag_backward", "[2,3]");
    EXPECT_ERROR(ag_backward(ctx, ag_sum_all(ctx, Z(2, 3))), "ag_backward");
    int was = ag_set_grad_enabled(ctx, 0);
    EXPECT_ERROR(ag_backward(ctx, ag_sum_all(ctx, x)), "ag_backward");
    ag_set_grad_enabled(ctx, was);

    ag_params *ps = ag_params_new();
    ag_params_add(ps, "w", 1, (int[]){3});
    EXPECT_ERROR(ag_params_add(ps, "w", 1, (int[]){4}), "ag_params_add", "'w'");
    ag_params_alloc(ps);
    EXPECT_ERROR(ag_params_add(ps, "late", 1, (int[]){2}), "ag_params_add", "'late'");
    CHECK(ps->count == 1 && ps->total == 3, "failed ag_params_add calls changed the set: %d params, %zu elements",
          ps->count, ps->total);

    /* A tensor recorded in another context has its history on that tape:
     * an op or a backward here would stop at it and leave w without its
     * gradient, so both are refused. */
    ag_ctx *other = ag_ctx_new();
    ag_tensor *w = ps->list[0];
    ag_tensor *there = ag_scale(other, w, 2);
    EXPECT_ERROR((void)ag_sum_all(ctx, there), "ag_sum_all", "another context");
    EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ there, w }, 2, 0), "ag_concat", "another context");
    /* refused, the input is left as it was: a reshape gave there a gradient
     * buffer in this context's arena before refusing, which there's own
     * backward wrote into after this context was freed */
    EXPECT_ERROR((void)ag_reshape(ctx, there, 1, (int[]){ 3 }), "ag_reshape", "another context");
    CHECK(there->grad == NULL, "a refused ag_reshape gave its input a gradient buffer in another context's arena");
    /* and the dropout generator is left where it was (the mask was drawn
     * before the refusal) */
    {
        ag_pcg32 before = *ag_dropout_rng(ctx);
        ag_tensor *qkv = ag_reshape(other, there, 3, (int[]){ 1, 1, 3 });
        EXPECT_ERROR((void)ag_dropout(ctx, there, 0.5f, 1), "ag_dropout", "another context");
        CHECK(ag_dropout_rng(ctx)->state == before.state, "a refused ag_dropout moved the generator");
        before = *ag_dropout_rng(ctx);
        EXPECT_ERROR((void)ag_attention(ctx, qkv, 1, 1, 0.5f, 1, NULL), "ag_attention", "another context");
        CHECK(ag_dropout_rng(ctx)->state == before.state, "a refused ag_attention moved the generator");
    }
    EXPECT_ERROR(ag_backward(ctx, ag_sum_all(other, there)), "ag_backward", "another context");
    EXPECT_ERROR((void)ag_graph_walk(ctx, there, count_op, NULL), "ag_graph_walk", "another context");
    const int recorded = ag_tape_length(ctx);
    int was_on = ag_set_grad_enabled(ctx, 0);
    ag_tensor *value = ag_sum_all(ctx, there);   /* without gradients it is a plain value */
    ag_set_grad_enabled(ctx, was_on);
    CHECK(value->data[0] == 0 && ag_tape_length(ctx) == recorded, "a value from another context, gradients off");

    /* A leaf that wants a gradient, made in another context: the gradient
     * this one gave it was in this arena, and after the next ag_reset the
     * leaf's backward added into whatever took that place (a later step's
     * loss came out wrong).  Refused, and left without a gradient; with
     * gradients off it is a plain value. */
    {
        ag_tensor *far = ag_full(other, 1, (int[]){ 3 }, 1), *far1 = ag_full(other, 1, (int[]){ 1 }, 1);
        ag_requires_grad(far);
        ag_requires_grad(far1);
        EXPECT_ERROR((void)ag_mul(ctx, w, far), "ag_mul", "wants a gradient", "not made in this context");
        EXPECT_ERROR((void)ag_reshape(ctx, far, 2, (int[]){ 3, 1 }), "ag_reshape", "not made in this context");
        EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ w, far }, 2, 0), "ag_concat", "not made in this context");
        EXPECT_ERROR(ag_backward(ctx, far1), "ag_backward", "not made in this context");
        CHECK(far->grad == NULL && far1->grad == NULL, "a refused op gave a leaf of another context a gradient");
        CHECK(ag_tape_length(ctx) == recorded, "a refused op was recorded");
        was_on = ag_set_grad_enabled(ctx, 0);
        CHECK(ag_mul(ctx, w, far)->data[0] == 0, "a leaf of another context, gradients off");
        ag_set_grad_enabled(ctx, was_on);
        /* made here it is taken, and so is a parameter (its gradient is its set's) */
        ag_tensor *near = ag_full(ctx, 1, (int[]){ 3 }, 1);
        ag_requires_grad(near);
        ag_tensor *both = ag_mul(ctx, w, near);
        CHECK(both->requires_grad && ag_tape_length(ctx) == recorded + 1, "a leaf of this context is recorded");
    }

    /* A tensor kept past ag_reset: its entry is no longer on the tape, so
     * a backward from it gave w no gradient and said nothing, and an op
     * recorded on it would cut w off the same way. */
    ag_reset(ctx);
    ag_params_zero_grad(ps);
    ag_tensor *old_loss = ag_sum_all(ctx, ag_mul(ctx, w, w)), *old_sq = ag_mul(ctx, w, w);
    ag_reset(ctx);
    EXPECT_ERROR(ag_backward(ctx, old_loss), "ag_backward", "before the last ag_reset");
    EXPECT_ERROR((void)ag_sum_all(ctx, old_sq), "ag_sum_all", "before the last ag_reset");
    EXPECT_ERROR((void)ag_graph_walk(ctx, old_loss, count_op, NULL), "ag_graph_walk", "before the last ag_reset");
    /* the drawing is refused before a byte of it is written */
    FILE *dot = tmpfile();
    if (dot) {
        EXPECT_ERROR(ag_graph_dot(ctx, old_loss, dot), "ag_graph_dot", "before the last ag_reset");
        EXPECT_ERROR(ag_graph_dot(ctx, there, dot), "ag_graph_dot", "another context");
        CHECK(ftell(dot) == 0, "a refused ag_graph_dot wrote %ld bytes", ftell(dot));
        fclose(dot);
    }
    CHECK(w->grad[0] == 0 && w->grad[1] == 0 && w->grad[2] == 0, "a refused backward changed w's gradient");
    /* the same step's tensors are on the tape: backward works */
    ag_tensor *loss = ag_sum_all(ctx, ag_mul(ctx, w, w));
    ag_backward(ctx, loss);
    CHECK(ag_tape_length(ctx) == 2 && loss->data[0] == 0, "a step after the refusals records and runs backward");
    /* 2^32 resets later (all but the last counted at once) a tensor kept
     * from before is still stale: the count of resets does not wrap (held
     * in 32 bits it came back to the tensor's step and took it for live) */
    ag_tensor *kept = ag_sum_all(ctx, ag_mul(ctx, w, w));
    ctx->step += 0xFFFFFFFFu;
    ag_reset(ctx);
    EXPECT_ERROR(ag_backward(ctx, kept), "ag_backward", "before the last ag_reset");
    ag_ctx_free(other);
    ag_params_free(ps);
}

/* An error handler that returns: the engine cannot go on, so it aborts,
 * after one line on stderr that says why and gives the message (the abort
 * was all such a program showed).  In a child, its stderr read here. */
#if defined(__linux__) && !defined(HAVE_TSAN)
static void returning_handler(const char *msg, void *user)
{
    (void)msg;
    ++*(int *)user;
}
#endif

static void test_handler_returns(void)
{
#if defined(__linux__) && !defined(HAVE_TSAN)
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK_SKIP("a returning error handler: no pipe");
        return;
    }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        const struct rlimit none = { 0, 0 };
        setrlimit(RLIMIT_CORE, &none);          /* the abort leaves no core file */
        dup2(fds[1], 2);
        close(fds[0]);
        int calls = 0;
        ag_set_error_handler(returning_handler, &calls);
        ag_ctx *c = ag_ctx_new();
        (void)ag_matmul(c, ag_new(c, 2, (int[]){ 2, 3 }), ag_new(c, 2, (int[]){ 4, 5 }));
        _exit(calls == 1 ? 3 : 4);              /* went on past the error */
    }
    close(fds[1]);
    char err[1024] = { 0 };
    size_t got = 0;
    for (ssize_t r; got < sizeof err - 1 && (r = read(fds[0], err + got, sizeof err - 1 - got)) > 0;)
        got += (size_t)r;
    close(fds[0]);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or waitpid failed");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "a returning handler: the program aborts (status %d)",
          status);
    CHECK(strstr(err, "error handler returned") && strstr(err, "ag_matmul: inner dimensions differ: [2,3] @ [4,5]") &&
              strchr(err, '\n') == err + strlen(err) - 1,
          "a returning handler: one line on stderr says so and gives the message: \"%s\"", err);
#else
    CHECK_SKIP("a returning error handler: needs fork (and not ThreadSanitizer)");
#endif
}

/* The parameter set and the optimizers refuse what would make them read or
 * write outside their blocks, or compute NaN or the wrong sign silently. */
static void test_params_optim_misuse(void)
{
    /* 2^60 elements each: as many as fit in size_t's bytes are accepted,
     * the next would wrap the total */
    ag_params *big = ag_params_new();
    const int huge[4] = { 1 << 15, 1 << 15, 1 << 15, 1 << 15 };
    const size_t fit = (SIZE_MAX / sizeof(ag_real)) >> 60;
    for (size_t i = 0; i < fit; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%zu", i);
        ag_params_add(big, name, 4, huge);
    }
    EXPECT_ERROR((void)ag_params_add(big, "one_more", 4, huge), "ag_params_add", "'one_more'", "too large");
    CHECK(big->count == (int)fit && big->total == fit << 60, "a refused parameter changed the set: %d, %zu",
          big->count, big->total);
    ag_params_free(big);

    ag_params *ps = ag_params_new();
    ag_params_add(ps, "w", 1, (int[]){3});
    EXPECT_ERROR((void)ag_optim_sgd(ps, 0.9, 0), "ag_optim_sgd", "not allocated");
    EXPECT_ERROR(ag_params_zero_grad(ps), "ag_params_zero_grad", "not allocated");
    EXPECT_ERROR((void)ag_clip_grad_norm(ps, 1), "ag_clip_grad_norm", "not allocated");
    /* a parameter registered but not allocated has no data for an op to read */
    {
        ag_tensor *w = ag_params_find(ps, "w");
        ag_ctx *ctx = ag_ctx_new();
        ag_tensor *x = ag_full(ctx, 2, (int[]){2, 3}, 1), *ones = ag_full(ctx, 1, (int[]){3}, 1);
        EXPECT_ERROR((void)ag_scale(ctx, w, 2), "ag_scale", "a has no storage", "ag_params_alloc");
        EXPECT_ERROR((void)ag_mul(ctx, x, w), "ag_mul", "b has no storage");
        EXPECT_ERROR((void)ag_exp(ctx, w), "ag_exp", "a has no storage", "ag_params_alloc");
        EXPECT_ERROR((void)ag_gelu(ctx, w), "ag_gelu", "a has no storage");
        EXPECT_ERROR((void)ag_sum_all(ctx, w), "ag_sum_all", "no storage");
        EXPECT_ERROR((void)ag_reshape(ctx, w, 1, (int[]){-1}), "ag_reshape", "no storage");
        EXPECT_ERROR((void)ag_layer_norm(ctx, x, w, NULL, 1e-5), "ag_layer_norm", "weight has no storage");
        EXPECT_ERROR((void)ag_layer_norm(ctx, x, ones, w, 1e-5), "ag_layer_norm", "bias has no storage");
        EXPECT_ERROR((void)ag_concat(ctx, (ag_tensor *[]){ones, w}, 2, 0), "ag_concat", "ts[1] has no storage");
        EXPECT_ERROR((void)ag_linear(ctx, x, ag_full(ctx, 2, (int[]){3, 3}, 1), w), "ag_linear", "b has no storage");
        EXPECT_ERROR((void)ag_arena_rewind(ctx, ag_arena_mark(ctx), w), "ag_arena_rewind", "keep has no storage");
        ag_ctx_free(ctx);
    }
    ag_params_alloc(ps);
    EXPECT_ERROR((void)ag_optim_sgd(ps, -0.5, 0), "ag_optim_sgd", "momentum -0.5");
    EXPECT_ERROR((void)ag_optim_sgd(ps, 0.9, NAN), "ag_optim_sgd", "weight decay nan");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 1, 0.999, 1e-8, 0), "ag_optim_adamw", "betas (1, 0.999)");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 0.9, -0.1, 1e-8, 0), "ag_optim_adamw", "betas (0.9, -0.1)");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 0.9, 0.999, -1, 0), "ag_optim_adamw", "eps -1");
    EXPECT_ERROR((void)ag_optim_sgd(ps, INFINITY, 0), "ag_optim_sgd", "momentum inf", "finite");
    EXPECT_ERROR((void)ag_optim_sgd(ps, 0.9, INFINITY), "ag_optim_sgd", "weight decay inf", "finite");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 0.9, 0.999, INFINITY, 0), "ag_optim_adamw", "eps inf", "finite");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 0.9, 0.999, 1e-8, INFINITY), "ag_optim_adamw", "weight decay inf", "finite");
    ag_optim *o = ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0);
    EXPECT_ERROR(ag_optim_step(o, -0.1), "ag_optim_step", "lr = -0.1");
    EXPECT_ERROR(ag_optim_step(o, NAN), "ag_optim_step", "lr = nan");
    EXPECT_ERROR(ag_optim_step(o, INFINITY), "ag_optim_step", "lr = inf");
    CHECK(o->step == 0, "a refused step counted: %ld", o->step);
    /* settings changed between steps are checked as at creation: a beta
     * of 1 or a negative step count gave bias corrections of 0, and the
     * parameters became inf and NaN */
    ps->data[0] = 1;
    ps->grad[0] = 0.5f;
    o->beta1 = 1;
    EXPECT_ERROR(ag_optim_step(o, 0.1), "ag_optim_step", "betas (1, 0.999)");
    o->beta1 = 0.9;
    o->eps = -1;
    EXPECT_ERROR(ag_optim_step(o, 0.1), "ag_optim_step", "eps -1");
    o->eps = 1e-8;
    o->step = -1;
    EXPECT_ERROR(ag_optim_step(o, 0.1), "ag_optim_step", "step -1");
    o->step = LONG_MAX;
    EXPECT_ERROR(ag_optim_step(o, 0.1), "ag_optim_step", "out of range");
    o->step = 0;
    o->kind = 7;
    EXPECT_ERROR(ag_optim_step(o, 0.1), "ag_optim_step", "kind 7");
    o->kind = AG_ADAMW;
    CHECK(ps->data[0] == 1 && o->step == 0, "a refused step changed the parameters: %g", (double)ps->data[0]);
    const int finite = ag_optim_step(o, 0.1);
    CHECK(ps->data[0] < 1 && o->step == 1 && finite, "a step with the settings restored");
    /* the step reports a value it leaves infinite, wherever it is */
    const size_t ends[2] = { 0, ps->total - 1 };
    for (int e = 0; e < 2; e++) {
        const ag_real was = ps->data[ends[e]];
        ps->data[ends[e]] = INFINITY;
        CHECK(!ag_optim_step(o, 0.1), "an infinite parameter (element %zu of %zu) after the step went unreported",
              ends[e], ps->total);
        ps->data[ends[e]] = was;
    }
    {
        ag_optim *s = ag_optim_sgd(ps, 0.9, 0);
        s->momentum = -0.5;
        EXPECT_ERROR(ag_optim_step(s, 0.1), "ag_optim_step", "momentum -0.5");
        s->momentum = 0.9;
        s->kind = AG_ADAMW;         /* an SGD optimizer has no second moment */
        EXPECT_ERROR(ag_optim_step(s, 0.1), "ag_optim_step", "no moment buffers");
        ag_optim_free(s);
    }
    ps->grad[0] = 3;
    EXPECT_ERROR((void)ag_clip_grad_norm(ps, -1), "ag_clip_grad_norm", "max_norm = -1");
    EXPECT_ERROR((void)ag_clip_grad_norm(ps, NAN), "ag_clip_grad_norm", "max_norm = nan");
    EXPECT_ERROR(ag_clip_grads_with_norm(ps, -1, 1), "ag_clip_grads_with_norm", "max_norm = -1");
    EXPECT_ERROR(ag_clip_grads_with_norm(ps, NAN, 1), "ag_clip_grads_with_norm", "max_norm = nan");
    EXPECT_ERROR(ag_clip_grads_with_norm(ps, 1, -0.5), "ag_clip_grads_with_norm", "norm = -0.5");
    CHECK(ps->grad[0] == 3, "a refused clip changed the gradient to %g", (double)ps->grad[0]);
    ag_optim_free(o);
    ag_params_free(ps);
}

#if defined(__linux__) && !defined(HAVE_LSAN) && !defined(HAVE_TSAN)

/* Run `stmt` with the address space capped `room` bytes above what is
 * mapped now (RLIMIT_AS, which mmap respects), so an allocation that fits
 * in room succeeds and the next one fails.  grew gets how much the
 * virtual size grew over stmt, or SIZE_MAX when it cannot be capped or
 * measured here (then stmt does not run). */
#define WITH_ROOM(room, stmt, grew)                                                  \
    do {                                                                             \
        struct rlimit old_, cap_;                                                    \
        const size_t before_ = check_vm_bytes();                                           \
        grew = SIZE_MAX;                                                             \
        if (before_ && getrlimit(RLIMIT_AS, &old_) == 0) {                           \
            cap_ = old_;                                                             \
            cap_.rlim_cur = (rlim_t)(before_ + (room));                              \
            if (setrlimit(RLIMIT_AS, &cap_) == 0) {                                  \
                stmt;                                                                \
                setrlimit(RLIMIT_AS, &old_);                                         \
                const size_t after_ = check_vm_bytes();                                    \
                grew = after_ > before_ ? after_ - before_ : 0;                      \
            }                                                                        \
        }                                                                            \
    } while (0)
#endif

/* Running out of memory under an error handler that longjmps out (a program
 * that survives it) must leave nothing allocated and the objects as they
 * were.  First sizes no allocation can satisfy (2^60 values: more than any
 * address space), then, outside the sanitizers (whose own mappings a cap on
 * the address space would break), a cap that lets the first of two blocks
 * through and stops the second: the first must be given back. */
static void test_alloc_failures(void)
{
    ag_params *ps = ag_params_new();
    ag_params_add(ps, "w", 1, (int[]){3});
    ag_params_alloc(ps);
    const size_t total = ps->total;
    ps->total = (size_t)1 << 60;   /* as if that many were registered */
    EXPECT_ERROR((void)ag_optim_sgd(ps, 0.9, 0), "ag_optim_sgd", "out of memory");
    EXPECT_ERROR((void)ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0), "ag_optim_adamw", "out of memory");
    ps->total = total;
    ag_params_free(ps);
    ps = ag_params_new();
    ag_params_add(ps, "huge", 2, (int[]){1 << 30, 1 << 29});
    EXPECT_ERROR(ag_params_alloc(ps), "ag_params_alloc", "out of memory", "weights");
    CHECK(ps->data == NULL && ps->grad == NULL, "a failed ag_params_alloc left blocks behind");
    ag_params_free(ps);

#if defined(__linux__) && !defined(HAVE_LSAN) && !defined(HAVE_TSAN)
    /* 64 MB blocks: each its own mapping (ag_big_alloc), so the address
     * space shows whether one was kept */
    const int n = (int)(((size_t)64 << 20) / sizeof(ag_real));
    const size_t room = ((size_t)64 + 34) << 20;   /* one block, its alignment, and slack */
    size_t grew;
    ps = ag_params_new();
    ag_params_add(ps, "big", 1, &n);
    WITH_ROOM(room, EXPECT_ERROR(ag_params_alloc(ps), "ag_params_alloc", "out of memory", "gradients"), grew);
    if (grew == SIZE_MAX) {
        CHECK_SKIP("the address space cannot be capped or measured here");
    } else {
        CHECK(ps->data == NULL && ps->grad == NULL && grew < ((size_t)8 << 20),
              "a failed ag_params_alloc kept its weights (%zu bytes mapped)", grew);
    }
    if (!ps->data)
        ag_params_alloc(ps);   /* it can be tried again */
    CHECK(ps->data && ps->grad, "ag_params_alloc after a failed one");
    ag_optim *volatile o = NULL;
    WITH_ROOM(room, EXPECT_ERROR(o = ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0), "ag_optim_adamw", "out of memory"),
              grew);
    if (grew != SIZE_MAX)
        CHECK(o == NULL && grew < ((size_t)8 << 20), "a failed ag_optim_adamw kept %zu bytes mapped", grew);
    ag_optim_free(o);   /* NULL unless the cap let it through */
    ag_params_free(ps);

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    /* a parameter whose 64 MB name cannot be copied under the cap: the
     * tensor allocated for it before must not be kept.  2000 tries, so that
     * glibc's count of the bytes in use shows the hundred bytes each would
     * keep (a few freed chunks it holds for reuse count as in use) */
    const size_t name_len = (size_t)64 << 20;
    char *volatile long_name = malloc(name_len + 1);
    ag_params *volatile named = ag_params_new();
    ag_params_add(named, "first", 1, (int[]){ 2 });   /* its list exists */
    if (long_name) {
        memset(long_name, 'n', name_len);
        long_name[name_len] = 0;
        WITH_ROOM((size_t)16 << 20,
                  EXPECT_ERROR((void)ag_params_add(named, long_name, 1, (int[]){ 2 }), "ag_params_add",
                               "out of memory", "'nnnn"),
                  grew);
        const struct mallinfo2 before = mallinfo2();
        volatile int refused = 0;
        WITH_ROOM((size_t)16 << 20,
                  for (volatile int i = 0; i < 2000; i++) {
                      if (setjmp(error_jump) != 0)
                          refused = refused + 1;
                      else
                          (void)ag_params_add(named, long_name, 1, (int[]){ 2 });
                  },
                  grew);
        const struct mallinfo2 after = mallinfo2();
        if (grew == SIZE_MAX)
            CHECK_SKIP("the address space cannot be capped or measured here");
        else
            CHECK(refused == 2000 && named->count == 1 && after.uordblks < before.uordblks + 4096,
                  "2000 failed ag_params_add calls (%d refused) kept %zu bytes (%d parameters)", refused,
                  after.uordblks - before.uordblks, named->count);
    }
    free(long_name);
    ag_params_free(named);
#endif
#else
#if defined(HAVE_LSAN) || defined(HAVE_TSAN)
    CHECK_SKIP("the address-space cap (the sanitizer's own mappings need the address space)");
#else
    CHECK_SKIP("the address-space cap (Linux only)");
#endif
#endif
#ifdef HAVE_LSAN
    CHECK(__lsan_do_recoverable_leak_check() == 0,
          "memory leaked by failed allocations (LeakSanitizer's report above)");
#endif
}

/* ======================================================================= */
/* autograd semantics                                                      */
/* ======================================================================= */

static void test_accumulation(ag_ctx *ctx)
{
    /* A tensor used by several ops receives every contribution:
     * d/da sum(a*a + 3a) = 2a + 3. */
    ag_reset(ctx);
    ag_tensor *a = leaf(ctx, 1, (int[]){5}, -2, 2);
    ag_backward(ctx, ag_sum_all(ctx, ag_add(ctx, ag_mul(ctx, a, a), ag_scale(ctx, a, 3))));
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= close_to(a->grad[i], 2.0 * a->data[i] + 3, REL_TIGHT);
    CHECK(ok, "a tensor used three times did not collect all three gradient contributions");

    /* Parameter gradients add up over steps until zeroed. */
    ag_params *ps = ag_params_new();
    ag_tensor *w = ag_params_add(ps, "w", 1, (int[]){3});
    ag_params_alloc(ps);
    const ag_real xv[3] = { 0.5f, -1.25f, 2 };
    for (int step = 1; step <= 3; step++) {
        if (step == 3)
            ag_params_zero_grad(ps);
        ag_reset(ctx);
        ag_tensor *x = ag_from(ctx, 1, (int[]){3}, xv);
        ag_backward(ctx, ag_sum_all(ctx, ag_mul(ctx, w, x)));   /* d/dw = x */
        double times = step == 2 ? 2 : 1;
        CHECK(w->grad[0] == times * xv[0] && w->grad[1] == times * xv[1] && w->grad[2] == times * xv[2],
              "step %d: w->grad = {%g, %g, %g}, want %g * x", step, (double)w->grad[0], (double)w->grad[1],
              (double)w->grad[2], times);
    }

    /* Two losses that share an intermediate, backward on each in the same
     * step: the parameter gradient must be the sum of the two gradients,
     * as each backward starts from d(loss)/d(loss) = 1 alone.
     * h = tanh(w x), L1 = sum h, L2 = sum h^2:
     * dL1/dw = x (1 - h^2), dL2/dw = 2 h x (1 - h^2). */
    ag_params_zero_grad(ps);
    ag_reset(ctx);
    ag_tensor *x = ag_from(ctx, 1, (int[]){3}, xv);
    for (int i = 0; i < 3; i++)
        w->data[i] = (ag_real)(0.3 * (i + 1));
    ag_tensor *h = ag_tanh(ctx, ag_mul(ctx, w, x));
    ag_tensor *l1 = ag_sum_all(ctx, h), *l2 = ag_sum_all(ctx, ag_mul(ctx, h, h));
    ag_backward(ctx, l1);
    ag_backward(ctx, l2);
    ok = 1;
    for (int i = 0; i < 3; i++) {
        double hi = tanh((double)w->data[i] * xv[i]), d = xv[i] * (1 - hi * hi);
        ok &= close_to(w->grad[i], d + 2 * hi * d, REL_SUM);
    }
    CHECK(ok, "backward(L1) then backward(L2) in one step: w->grad = {%g, %g, %g} is not dL1/dw + dL2/dw",
          (double)w->grad[0], (double)w->grad[1], (double)w->grad[2]);
    ag_params_free(ps);
}

static void test_no_grad(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = leaf(ctx, 2, (int[]){4, 6}, -1, 1), *W = leaf(ctx, 2, (int[]){3, 6}, -1, 1);
    ag_tensor *lnw = leaf(ctx, 1, (int[]){3}, 0.5, 1.5), *E = leaf(ctx, 2, (int[]){5, 6}, -1, 1);
    ag_tensor *with_grad = ag_linear(ctx, x, W, NULL);
    int tape = ag_tape_length(ctx);
    CHECK(tape == 1 && with_grad->requires_grad, "grad mode: linear must be recorded (tape %d)", tape);

    int prev = ag_set_grad_enabled(ctx, 0);
    CHECK(prev == 1, "gradients must be enabled by default");
    ag_tensor *outs[12];
    int n = 0;
    ag_tensor *y = outs[n++] = ag_linear(ctx, x, W, NULL);
    outs[n++] = ag_matmul(ctx, x, ag_transpose(ctx, W, 0, 1));
    outs[n++] = ag_add(ctx, y, y);
    outs[n++] = ag_softmax(ctx, y, -1);
    outs[n++] = ag_masked_fill(ctx, y, ag_full(ctx, 1, (int[]){3}, 0), 0);
    outs[n++] = ag_dropout(ctx, y, 0.5f, 1);
    outs[n++] = ag_layer_norm(ctx, y, lnw, NULL, 1e-5f);
    outs[n++] = ag_concat(ctx, (ag_tensor *[]){ y, y }, 2, 0);
    outs[n++] = ag_reshape(ctx, x, 1, (int[]){24});
    outs[n++] = ag_embedding(ctx, E, (const int32_t[]){1, 4}, 1, (int[]){2});
    outs[n++] = ag_cross_entropy(ctx, y, (const int32_t[]){0, 1, 2, 0});
    outs[n++] = ag_mean_all(ctx, ag_gelu(ctx, y));
    CHECK(ag_tape_length(ctx) == tape, "no-grad mode recorded %d tape entries", ag_tape_length(ctx) - tape);
    for (int i = 0; i < n; i++)
        CHECK(!outs[i]->requires_grad && !outs[i]->node, "no-grad output %d requires a gradient", i);
    CHECK(memcmp(y->data, with_grad->data, y->size * sizeof(ag_real)) == 0,
          "no-grad mode changed the forward values");
    CHECK(ag_set_grad_enabled(ctx, prev) == 0, "ag_set_grad_enabled must return the previous setting");
}

/* y = sum(layer_norm(x [q;k;v]^T, g)^2) and dy/dx, x requiring a gradient
 * (test_params_no_grad; kept apart from its setjmp) */
static void joined_loss(ag_ctx *ctx, ag_tensor *const *qkvg, ag_real *y, ag_real *dx)
{
    ag_reset(ctx);
    ag_tensor *x = ag_from(ctx, 2, (int[]){2, 4}, (ag_real[]){ 1, -2, 0.5, 3, -1, 0.25, 2, -0.5 });
    ag_requires_grad(x);
    ag_tensor *qkv = ag_params_join(ctx, qkvg, 3);
    ag_tensor *h = ag_layer_norm(ctx, ag_linear(ctx, x, qkv, NULL), qkvg[3], NULL, 1e-5f);
    ag_tensor *loss = ag_sum_all(ctx, ag_mul(ctx, h, h));
    ag_backward(ctx, loss);
    *y = loss->data[0];
    memcpy(dx, x->grad, x->size * sizeof(ag_real));
}

static ag_params *small_set(int with_grad, ag_tensor **qkvg)
{
    ag_params *ps = ag_params_new();
    qkvg[0] = ag_params_add(ps, "q", 2, (int[]){3, 4});
    qkvg[1] = ag_params_add(ps, "k", 2, (int[]){3, 4});
    qkvg[2] = ag_params_add(ps, "v", 2, (int[]){3, 4});
    qkvg[3] = ag_params_add(ps, "g", 1, (int[]){9});
    if (with_grad)
        ag_params_alloc(ps);
    else
        ag_params_alloc_no_grad(ps);
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = (ag_real)(0.25 * sin(1.0 + (double)i));
    return ps;
}

/* A parameter set allocated without gradients (ag_params_alloc_no_grad):
 * the same forward values as a set with them, nothing recorded, the
 * gradient with respect to a marked input still computed, and everything
 * that needs the parameters' gradients refused in one line. */
static void test_params_no_grad(ag_ctx *ctx)
{
    ag_tensor *p[4], *f[4];
    ag_params *trained = small_set(1, p), *frozen = small_set(0, f);
    int plain = frozen->grad == NULL;
    for (int i = 0; i < frozen->count; i++)
        plain &= frozen->list[i]->grad == NULL && !frozen->list[i]->requires_grad && frozen->list[i]->data;
    CHECK(plain, "ag_params_alloc_no_grad: weights without gradients, not requiring any");
    ag_real y[2], dx[2][8];
    joined_loss(ctx, p, &y[0], dx[0]);
    joined_loss(ctx, f, &y[1], dx[1]);
    CHECK(y[0] == y[1] && memcmp(dx[0], dx[1], sizeof dx[0]) == 0,
          "without gradient blocks: loss %g and d/dx differ from the trained set's (%g)", (double)y[1], (double)y[0]);
    CHECK(frozen->grad == NULL && f[0]->grad == NULL && f[3]->grad == NULL,
          "backward gave parameters without gradients a gradient");

    ag_reset(ctx);
    ag_tensor *qkv = ag_params_join(ctx, f, 3);
    ag_tensor *sq = ag_sum_all(ctx, ag_mul(ctx, qkv, qkv));
    CHECK(!qkv->requires_grad && qkv->grad == NULL && ag_tape_length(ctx) == 0 && !sq->requires_grad,
          "ops on parameters without gradients were recorded (%d entries)", ag_tape_length(ctx));
    EXPECT_ERROR(ag_backward(ctx, sq), "ag_backward", "ag_params_alloc_no_grad");
    EXPECT_ERROR(ag_params_zero_grad(frozen), "ag_params_zero_grad", "no gradients", "ag_params_alloc_no_grad");
    EXPECT_ERROR((void)ag_clip_grad_norm(frozen, 1), "ag_clip_grad_norm", "no gradients");
    EXPECT_ERROR((void)ag_optim_sgd(frozen, 0.9, 0), "ag_optim_sgd", "no gradients");
    EXPECT_ERROR((void)ag_optim_adamw(frozen, 0.9, 0.999, 1e-8, 0), "ag_optim_adamw", "no gradients");
    EXPECT_ERROR(ag_requires_grad(f[0]), "ag_requires_grad", "'q'", "ag_params_alloc_no_grad");
    CHECK(!f[0]->requires_grad, "a refused ag_requires_grad marked the parameter");
    EXPECT_ERROR(ag_params_alloc(frozen), "ag_params_alloc", "already allocated");
    EXPECT_ERROR(ag_params_alloc_no_grad(trained), "ag_params_alloc_no_grad", "already allocated");
    EXPECT_ERROR(ag_params_alloc_no_grad(NULL), "ag_params_alloc_no_grad", "ps is NULL");
    ag_params_free(trained);
    ag_params_free(frozen);

    /* the weights' block alone is mapped: 32 MB of parameters, where a set
     * with gradients maps 64 MB */
    ag_params *big = ag_params_new();
    ag_params_add(big, "w", 1, (int[]){ 8 << 20 });
    const size_t weights = ((size_t)8 << 20) * sizeof(ag_real), before = check_vm_bytes();
    ag_params_alloc_no_grad(big);
    const size_t after = check_vm_bytes();
    if (before && after)
        CHECK(after - before < weights + weights / 4, "a set without gradients mapped %zu bytes for %zu of weights",
              after - before, weights);
    else
        CHECK_SKIP("the mapped size cannot be read here (/proc/self/statm)");
    ag_params_free(big);
}

/* The grad-ready hook: each leaf that wants a gradient and is read named
 * once, with its gradient already final; a leaf nothing reads never. */
typedef struct ready_log {
    const ag_tensor *who[8];
    ag_real seen[8][3];         /* the gradient when named */
    int n;
} ready_log;

static void log_ready(ag_tensor *leaf, void *user)
{
    ready_log *log = user;
    if (log->n < 8) {
        log->who[log->n] = leaf;
        for (int i = 0; i < 3; i++)
            log->seen[log->n][i] = leaf->grad ? leaf->grad[i] : 0;    /* NULL: nothing reached it yet */
    }
    log->n++;
}

/* A grad-ready hook that stops listening after its first leaf. */
struct once_ctx {
    ag_ctx *ctx;
    int calls;
};

static void hear_once(ag_tensor *leaf, void *user)
{
    struct once_ctx *o = user;
    (void)leaf;
    o->calls++;
    ag_set_grad_ready_hook(o->ctx, NULL, NULL);
}

/* A grad-ready hook that resets its context (calls 0) or runs another
 * backward on it (calls 1), once. */
static void meddle(ag_tensor *leaf, void *user)
{
    struct once_ctx *o = user;
    ag_ctx *ctx = o->ctx;
    (void)leaf;
    ag_set_grad_ready_hook(ctx, NULL, NULL);
    if (o->calls == 0) {
        ag_reset(ctx);
        for (int i = 0; i < 40; i++)
            (void)ag_full(ctx, 1, (int[]){ 2 }, -1);     /* the tape's memory, handed out again */
    } else {
        ag_tensor *z = ag_full(ctx, 1, (int[]){ 1 }, 1);
        ag_requires_grad(z);
        ag_backward(ctx, ag_mul(ctx, z, z));
    }
}

static void test_grad_ready_hook(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *w = ag_from(ctx, 1, (int[]){ 3 }, (ag_real[]){ 1, -2, 3 });
    ag_tensor *v = ag_from(ctx, 1, (int[]){ 3 }, (ag_real[]){ 0.5f, 0.25f, 2 });
    ag_tensor *c = ag_from(ctx, 1, (int[]){ 3 }, (ag_real[]){ 4, 5, 6 });
    ag_tensor *unused = ag_full(ctx, 1, (int[]){ 3 }, 1);
    ag_requires_grad(w);
    ag_requires_grad(v);
    ag_requires_grad(unused);
    /* y = sum(w*w) + sum(reshape(w) * c) + sum(v * w): w is read first by
     * w*w (named once though read twice there), last by v*w; v only by v*w */
    ag_tensor *y = ag_add(ctx, ag_sum_all(ctx, ag_mul(ctx, w, w)),
                          ag_sum_all(ctx, ag_mul(ctx, ag_reshape(ctx, w, 1, (int[]){ 3 }), c)));
    y = ag_add(ctx, y, ag_sum_all(ctx, ag_mul(ctx, v, w)));
    ready_log log = { .n = 0 };
    ag_set_grad_ready_hook(ctx, log_ready, &log);
    ag_backward(ctx, y);
    ag_set_grad_ready_hook(ctx, NULL, NULL);
    CHECK(log.n == 2, "grad-ready hook: named %d leaves, want 2 (w and v, not the unread one)", log.n);
    CHECK(log.n >= 2 && log.who[0] == v && log.who[1] == w, "grad-ready hook: v (last read first) before w");
    for (int k = 0; k < log.n && k < 2; k++) {
        const ag_tensor *t = log.who[k];
        CHECK(memcmp(log.seen[k], t->grad, 3 * sizeof(ag_real)) == 0,
              "grad-ready hook: %s's gradient changed after it was named final", t == w ? "w" : "v");
    }
    /* dy/dw = 2w + c + v */
    CHECK(w->grad[0] == 2 * 1 + 4 + 0.5f && w->grad[2] == 2 * 3 + 6 + 2, "grad-ready hook: dy/dw = 2w + c + v");
    /* no hook: nothing named */
    ag_backward(ctx, y);
    CHECK(log.n == 2, "grad-ready hook: named again after it was removed");
    /* a hook that removes itself when called, at an entry that is the
     * first reader of two leaves: the second was handed to a NULL hook */
    ag_reset(ctx);
    ag_tensor *p = ag_full(ctx, 1, (int[]){ 2 }, 3), *q = ag_full(ctx, 1, (int[]){ 2 }, 5);
    ag_requires_grad(p);
    ag_requires_grad(q);
    ag_tensor *pq = ag_sum_all(ctx, ag_mul(ctx, p, q));
    struct once_ctx once = { ctx, 0 };
    ag_set_grad_ready_hook(ctx, hear_once, &once);
    ag_backward(ctx, pq);
    CHECK(once.calls == 1 && p->grad[0] == 5 && q->grad[1] == 3,
          "a hook that removed itself: called %d times (want 1), the pass went on", once.calls);
    /* a hook that resets the context, or runs a backward on it: the pass
     * walked on through the tape the reset gave away, or added into the
     * gradients the inner pass had cleared and recomputed; it ends there */
    ag_set_error_handler(record_error, NULL);
    for (int k = 0; k < 2; k++) {
        ag_reset(ctx);
        ag_tensor *a = ag_full(ctx, 1, (int[]){ 2 }, 3), *b = ag_full(ctx, 1, (int[]){ 2 }, 5);
        ag_requires_grad(a);
        ag_requires_grad(b);
        ag_tensor *h = ag_mul(ctx, a, a);
        for (int i = 0; i < 8; i++)
            h = ag_tanh(ctx, ag_mul(ctx, h, b));
        ag_tensor *loss = ag_sum_all(ctx, h);
        struct once_ctx meddler = { ctx, k };
        ag_set_grad_ready_hook(ctx, meddle, &meddler);
        EXPECT_ERROR(ag_backward(ctx, loss), "ag_backward", "grad-ready hook", k ? "ran ag_backward" : "ag_reset");
        ag_set_grad_ready_hook(ctx, NULL, NULL);
    }
    ag_set_error_handler(NULL, NULL);
    ag_reset(ctx);
}

static void test_reshape_view(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = leaf(ctx, 2, (int[]){2, 6}, -1, 1);
    ag_tensor *r = ag_reshape(ctx, x, 3, (int[]){3, -1, 2});
    CHECK(r->data == x->data, "reshape must share its input's data");
    CHECK(r->ndim == 3 && r->shape[0] == 3 && r->shape[1] == 2 && r->shape[2] == 2 && r->size == 12,
          "reshape to [3,-1,2] gave the wrong shape");
    /* The gradient reaches the base through the view, and adds to the base's own uses. */
    ag_tensor *R, *S;
    ag_tensor *loss = ag_add(ctx, weighted_loss(ctx, r, &R), weighted_loss(ctx, x, &S));
    ag_backward(ctx, loss);
    int ok = 1;
    for (size_t i = 0; i < x->size; i++)
        ok &= close_to(x->grad[i], (double)R->data[i] + S->data[i], REL_TIGHT);
    CHECK(ok, "gradient through a reshape did not reach its base");
}

/* x_{k+1} = c x_k + 0.5, 100000 times: 200000 tape entries.  Backward must
 * walk them without recursion, and dx_N/dx_0 = c^N.  Each backward step
 * rounds once, so float may drift by up to N ulps: 1e5 * 6e-8 = 6e-3. */
static void test_deep_graph(void)
{
    enum { STEPS = 100000 };
    ag_ctx *ctx = ag_ctx_new();
    ag_real c = (ag_real)1.00001;
    ag_tensor *x0 = ag_full(ctx, 1, (int[]){1}, 0.25f);
    ag_requires_grad(x0);
    ag_tensor *x = x0;
    for (int k = 0; k < STEPS; k++)
        x = ag_add_scalar(ctx, ag_scale(ctx, x, c), 0.5f);
    CHECK(ag_tape_length(ctx) == 2 * STEPS, "deep graph: tape holds %d entries, want %d", ag_tape_length(ctx),
          2 * STEPS);
    ag_backward(ctx, x);
    double cn = pow((double)c, STEPS), want_x = 0.25 * cn + 0.5 * (cn - 1) / ((double)c - 1);
#ifdef AG_DOUBLE
    double tol = 1e-9;
#else
    double tol = 1e-2;
#endif
    CHECK(close_to(x0->grad[0], cn, tol), "deep graph: gradient %.10g, want c^N = %.10g", (double)x0->grad[0], cn);
    CHECK(close_to(x->data[0], want_x, tol), "deep graph: value %.10g, want %.10g", (double)x->data[0], want_x);
    ag_ctx_free(ctx);
}

/* ======================================================================= */
/* memory                                                                  */
/* ======================================================================= */

/* One training step of a small model; the same shapes every time. */
static void model_step(ag_ctx *ctx, ag_params *ps, uint64_t seed)
{
    ag_pcg32 g;
    ag_pcg32_seed(&g, seed, 1);
    ag_real xv[4 * 8];
    int32_t targets[4];
    for (int i = 0; i < 32; i++)
        xv[i] = (ag_real)(2 * ag_pcg32_uniform(&g) - 1);
    for (int i = 0; i < 4; i++)
        targets[i] = (int32_t)ag_pcg32_below(&g, 5);
    ag_tensor *x = ag_from(ctx, 2, (int[]){4, 8}, xv);
    ag_tensor *h = ag_gelu(ctx, ag_linear(ctx, x, ag_params_find(ps, "W1"), ag_params_find(ps, "b1")));
    h = ag_layer_norm(ctx, ag_dropout(ctx, h, 0.1f, 1), ag_params_find(ps, "g"), NULL, 1e-5f);
    ag_tensor *logits = ag_linear(ctx, h, ag_params_find(ps, "W2"), NULL);
    ag_params_zero_grad(ps);
    ag_backward(ctx, ag_cross_entropy(ctx, logits, targets));
}

static void test_arena_steady(void)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_params *ps = ag_params_new();
    ag_params_add(ps, "W1", 2, (int[]){16, 8});
    ag_params_add(ps, "b1", 1, (int[]){16});
    ag_params_add(ps, "g", 1, (int[]){16});
    ag_params_add(ps, "W2", 2, (int[]){5, 16});
    ag_params_alloc(ps);
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = (ag_real)(ag_pcg32_uniform(&rng) - 0.5);
    size_t reserved = 0, peak = 0;
    int used_zero = 1, reserved_same = 1, peak_same = 1;
    for (int step = 0; step < 100; step++) {
        ag_reset(ctx);
        used_zero &= ag_arena_used(ctx) == 0;
        model_step(ctx, ps, (uint64_t)step);
        if (step == 0) {
            reserved = ag_arena_reserved(ctx);
            peak = ag_arena_peak(ctx);
        }
        reserved_same &= ag_arena_reserved(ctx) == reserved;
        peak_same &= ag_arena_peak(ctx) == peak;
    }
    CHECK(used_zero, "ag_arena_used must be 0 right after ag_reset");
    CHECK(peak > 0 && reserved >= peak, "arena peak %zu, reserved %zu", peak, reserved);
    CHECK(reserved_same, "identical steps kept allocating: reserved %zu after step 1, %zu after 100", reserved,
          ag_arena_reserved(ctx));
    CHECK(peak_same, "identical steps changed the peak: %zu after step 1, %zu after 100", peak, ag_arena_peak(ctx));
    ag_params_free(ps);
    ag_ctx_free(ctx);
}

/* Whether the mapping that holds p carries `flag` in /proc/self/smaps's
 * VmFlags ("hg": advised MADV_HUGEPAGE); -1 where that cannot be read. */
static int vm_flag(const void *p, const char *flag)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int inside = 0, found = -1;
    const uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = 0;
            for (char *t = strtok(line + 8, " \n"); t; t = strtok(NULL, " \n"))
                found |= strcmp(t, flag) == 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Whether this kernel offers transparent huge pages to a process that asks
 * (its setting is "always" or "madvise"). */
static int huge_pages_offered(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char s[128] = "";
    if (f) {
        if (!fgets(s, sizeof s, f))
            s[0] = 0;
        fclose(f);
    }
    return strstr(s, "[always]") || strstr(s, "[madvise]");
}

/* The large buffers (arena blocks, parameters, optimizer moments; see
 * ag_big_alloc in src/tensor.c): zeroed, aligned, writable to their last
 * byte; from 4 MB up, where the kernel offers huge pages, on a 2 MB
 * boundary of a mapping advised MADV_HUGEPAGE, so that a large model's
 * first step does not take a page fault every 4 KB. */
static void check_big(const char *what, const void *p, size_t bytes)
{
    CHECK(p && (uintptr_t)p % 64 == 0, "%s (%zu bytes): %p is not 64-byte aligned", what, bytes, p);
    if (!p || bytes < ((size_t)4 << 20))
        return;
    if (!huge_pages_offered()) {
        CHECK_SKIP("%s: this kernel offers no transparent huge pages", what);
        return;
    }
    CHECK((uintptr_t)p % ((size_t)2 << 20) == 0, "%s (%zu bytes): %p is not on a 2 MB boundary", what, bytes, p);
    const int hg = vm_flag(p, "hg");
    if (hg < 0)
        CHECK_SKIP("%s: /proc/self/smaps has no VmFlags here", what);
    else
        CHECK(hg == 1, "%s (%zu bytes): its mapping is not advised MADV_HUGEPAGE (no \"hg\" in VmFlags)", what, bytes);
}

static void test_big_buffers(void)
{
    const size_t sizes[] = { 1, 4096, ((size_t)4 << 20) - 64, (size_t)4 << 20, ((size_t)9 << 20) + 123 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const size_t n = sizes[s];
        unsigned char *p = ag_big_alloc(n, 1);
        int zero = p != NULL;
        for (size_t i = 0; p && i < n; i++)
            zero &= p[i] == 0;
        CHECK(zero, "ag_big_alloc(%zu) is not zeroed", n);
        if (p) {
            p[0] = 1;
            p[n - 1] = 1;
        }
        char what[64];
        snprintf(what, sizeof what, "ag_big_alloc(%zu)", n);
        check_big(what, p, n);
        ag_big_free(p);
    }
    ag_big_free(NULL);
    /* count * size past size_t wraps to 4 bytes: refused, not 4 bytes */
    void *wrapped = ag_big_alloc(SIZE_MAX / 4 + 2, 4);
    CHECK(wrapped == NULL && ag_big_alloc(SIZE_MAX / 2, 1) == NULL,
          "ag_big_alloc of more bytes than size_t holds (or than can be mapped) did not fail");
    ag_big_free(wrapped);

    ag_ctx *ctx = ag_ctx_new();
    const size_t block = (size_t)16 << 20;   /* past the first 1 MB block: a block of its own */
    check_big("an arena block", ag_alloc(ctx, block), block);
    ag_ctx_free(ctx);

    ag_params *ps = ag_params_new();
    ag_params_add(ps, "W", 2, (int[]){1024, 2048});
    ag_params_alloc(ps);
    check_big("the parameters", ps->data, ps->total * sizeof(ag_real));
    check_big("their gradients", ps->grad, ps->total * sizeof(ag_real));
    ag_optim *o = ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0.0);
    check_big("the first moments", o->m, ps->total * sizeof(ag_real));
    check_big("the second moments", o->v, ps->total * sizeof(ag_real));
    ag_optim_free(o);
    ag_params_free(ps);
}

/* ======================================================================= */
/* forward values                                                          */
/* ======================================================================= */

/* torch.matmul by its definition: pad both to 4-D; a batch dim of size 1
 * is read at index 0 for every output batch index. */
/* ag_graph_walk visits only what the root depends on; ag_graph_dot draws
 * an input (not a parameter) as one, and an op's absent input (linear
 * without a bias) as nothing. */
/* A graph-walk callback that resets its context (calls 0) and hands the
 * tape's memory out again, or walks the graph again (calls 1), once. */
static void meddle_walk(const ag_graph_op *op, void *user)
{
    struct once_ctx *o = user;
    (void)op;
    if (o->calls == 0) {
        ag_reset(o->ctx);
        for (int i = 0; i < 40; i++)
            (void)ag_full(o->ctx, 1, (int[]){ 2 }, -1);
    } else if (o->calls == 1) {
        (void)ag_graph_walk(o->ctx, op->in[0], count_op, NULL);
    }
    o->calls = 2;
}

/* ag_graph_dot's file for root, as a string to free (NULL: no memory stream). */
static char *graph_dot_text(ag_ctx *ctx, ag_tensor *root)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL, "open_memstream");
    if (!f)
        return NULL;
    ag_graph_dot(ctx, root, f);
    fclose(f);
    return text;
}

static void test_graph_walk(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_params *ps = ag_params_new();
    ag_tensor *W = ag_params_add(ps, "W", 2, (int[]){4, 3});
    ag_params_alloc(ps);
    ag_tensor *x = leaf(ctx, 2, (int[]){2, 3}, -1, 1);       /* an input that wants its gradient */
    ag_tensor *y = ag_linear(ctx, x, W, NULL);              /* op 0, inputs x, W, NULL */
    (void)ag_exp(ctx, x);                                   /* op 1: not on the way to the root */
    ag_tensor *loss = ag_sum_all(ctx, y);                   /* op 2 */
    int seen = 0;
    CHECK(ag_tape_length(ctx) == 3 && ag_graph_walk(ctx, loss, count_op, &seen) == 2 && seen == 2,
          "graph walk: the 2 ops the root depends on of 3 recorded (saw %d)", seen);
    char *dot = graph_dot_text(ctx, loss);
    if (!dot)
        return;
    CHECK(strstr(dot, "label=\"input\\n[2,3]\"") && strstr(dot, "shape=ellipse") &&
              strstr(dot, "label=\"W\\n[4,3]\"") && strstr(dot, "label=\"linear\\n[2,4]\"") &&
              strstr(dot, "n0 -> n2;") && !strstr(dot, "exp") && !strstr(dot, "n1 "),
          "graph dot: the input, W, linear and sum_all, not exp:\n%s", dot);
    int edges = 0;
    for (const char *p = dot; (p = strstr(p, "->")); p += 2)
        edges++;
    CHECK(edges == 3, "graph dot: 3 edges (x and W into linear, linear into sum_all), not %d", edges);
    /* the same graph drawn from other memory (another context and other
     * parameters) is the same file: leaves are numbered in the order met
     * (they were named by their addresses, so no two runs agreed), and a
     * leaf used twice is one node */
    {
        ag_ctx *other = ag_ctx_new();
        ag_params *ps2 = ag_params_new();
        ag_tensor *W2 = ag_params_add(ps2, "W", 2, (int[]){4, 3});
        ag_params_alloc(ps2);
        ag_tensor *x2 = leaf(other, 2, (int[]){2, 3}, -1, 1);
        ag_tensor *y2 = ag_linear(other, x2, W2, NULL);
        (void)ag_exp(other, x2);
        ag_tensor *loss2 = ag_sum_all(other, y2);
        /* the ops are numbered alike: op 1 (exp) is recorded but not drawn */
        char *again = graph_dot_text(other, loss2);
        if (again) {
            CHECK(strcmp(again, dot) == 0, "graph dot: the same graph in other memory gives the same file:\n%s\n%s",
                  dot, again);
            CHECK(strstr(dot, "t0 -> n0;") && strstr(dot, "t1 -> n0;") && !strstr(dot, "t2"),
                  "graph dot: leaves named t0, t1 in the order met:\n%s", dot);
            free(again);
        }
        ag_tensor *twice = ag_mul(other, x2, x2);
        char *sq = graph_dot_text(other, ag_sum_all(other, twice));
        if (sq) {
            int nodes = 0;
            for (const char *p = sq; (p = strstr(p, "shape=ellipse")); p++)
                nodes++;
            CHECK(nodes == 1 && strstr(sq, "t0 -> n3;") && !strstr(sq, "t1"),
                  "graph dot: x * x draws x once, with two edges into the mul:\n%s", sq);
            free(sq);
        }
        ag_params_free(ps2);
        ag_ctx_free(other);
    }
    free(dot);
    /* a parameter's name is text in a DOT string: a quote ended the
     * string (the file no longer parsed), a backslash began an escape */
    {
        ag_params *odd = ag_params_new();
        ag_tensor *q = ag_params_add(odd, "q\"uote\\back\nline", 1, (int[]){ 3 });
        ag_params_alloc(odd);
        char *text = graph_dot_text(ctx, ag_sum_all(ctx, q));
        if (text) {
            CHECK(strstr(text, "label=\"q\\\"uote\\\\back line\\n[3]\"") != NULL,
                  "graph dot: a name's quote and backslash escaped, its newline a space:\n%s", text);
            free(text);
        }
        ag_params_free(odd);
    }
    /* a callback that resets the context, or walks it again: the walk went
     * on through tape memory handed out again (a crash), or with its marks
     * cleared (ops left out); it ends there */
    ag_tensor *deep = x;
    for (int i = 0; i < 12; i++)
        deep = ag_tanh(ctx, deep);
    struct once_ctx meddler = { ctx, 0 };
    EXPECT_ERROR((void)ag_graph_walk(ctx, deep, meddle_walk, &meddler), "ag_graph_walk", "fn reset the context");
    x = leaf(ctx, 2, (int[]){2, 3}, -1, 1);
    deep = x;
    for (int i = 0; i < 12; i++)
        deep = ag_tanh(ctx, deep);
    meddler.calls = 1;
    EXPECT_ERROR((void)ag_graph_walk(ctx, deep, meddle_walk, &meddler), "ag_graph_walk", "walked", "again");
    ag_params_free(ps);
}

static int matmul_matches(ag_ctx *ctx, int na, const int *sa, int nb, const int *sb)
{
    ag_tensor *a = random_tensor(ctx, na, sa, -1, 1), *b = random_tensor(ctx, nb, sb, -1, 1);
    ag_tensor *c = ag_matmul(ctx, a, b);
    int A[4], B[4];
    for (int i = 0; i < 4; i++) {
        A[i] = i < 4 - na ? 1 : sa[i - (4 - na)];
        B[i] = i < 4 - nb ? 1 : sb[i - (4 - nb)];
    }
    int M = A[2], K = A[3], N = B[3], n0 = A[0] > B[0] ? A[0] : B[0], n1 = A[1] > B[1] ? A[1] : B[1];
    int nout = na > nb ? na : nb, ok = c->ndim == nout && c->shape[nout - 1] == N && c->shape[nout - 2] == M;
    if (!ok)
        return 0;
    size_t o = 0;
    for (int i0 = 0; i0 < n0; i0++)
        for (int i1 = 0; i1 < n1; i1++) {
            const ag_real *pa = a->data + ((size_t)(A[0] == 1 ? 0 : i0) * A[1] + (A[1] == 1 ? 0 : i1)) * M * K;
            const ag_real *pb = b->data + ((size_t)(B[0] == 1 ? 0 : i0) * B[1] + (B[1] == 1 ? 0 : i1)) * K * N;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++, o++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)pa[m * K + k] * pb[k * N + n];
                    ok &= fabs(c->data[o] - s) <= REL_SUM * (1 + sqrt((double)K));
                }
        }
    return ok && o == c->size;
}

static void test_matmul_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    CHECK(matmul_matches(ctx, 2, (int[]){3, 4}, 2, (int[]){4, 5}), "matmul [3,4] @ [4,5]");
    CHECK(matmul_matches(ctx, 3, (int[]){2, 3, 4}, 2, (int[]){4, 5}), "matmul [2,3,4] @ [4,5]");
    CHECK(matmul_matches(ctx, 2, (int[]){3, 4}, 3, (int[]){2, 4, 5}), "matmul [3,4] @ [2,4,5]");
    CHECK(matmul_matches(ctx, 4, (int[]){2, 3, 3, 4}, 4, (int[]){2, 3, 4, 5}), "matmul [2,3,3,4] @ [2,3,4,5]");
    CHECK(matmul_matches(ctx, 4, (int[]){2, 1, 3, 4}, 3, (int[]){3, 4, 5}), "matmul [2,1,3,4] @ [3,4,5]");
    CHECK(matmul_matches(ctx, 4, (int[]){2, 2, 3, 4}, 4, (int[]){2, 1, 4, 5}), "matmul [2,2,3,4] @ [2,1,4,5]");
    CHECK(matmul_matches(ctx, 4, (int[]){1, 2, 3, 4}, 4, (int[]){3, 1, 4, 5}), "matmul [1,2,3,4] @ [3,1,4,5]");
    CHECK(matmul_matches(ctx, 3, (int[]){3, 33, 65}, 2, (int[]){65, 17}), "matmul [3,33,65] @ [65,17]");
    CHECK(matmul_matches(ctx, 4, (int[]){2, 3, 19, 70}, 4, (int[]){2, 3, 70, 23}), "matmul [2,3,19,70] @ [2,3,70,23]");
}

static void test_transpose_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = random_tensor(ctx, 4, (int[]){2, 3, 4, 5}, -1, 1);
    ag_tensor *y = ag_transpose(ctx, x, 1, 3);   /* [2,5,4,3]: y[i,j,k,l] = x[i,l,k,j] */
    int ok = y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 4 && y->shape[3] == 3;
    for (int i = 0; ok && i < 2; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 3; l++)
                    ok &= y->data[((i * 5 + j) * 4 + k) * 3 + l] == x->data[((i * 3 + l) * 4 + k) * 5 + j];
    CHECK(ok, "transpose(1,3) of [2,3,4,5] misplaces elements");

    ag_tensor *m = random_tensor(ctx, 2, (int[]){3, 7}, -1, 1), *mt = ag_transpose(ctx, m, -1, -2);
    ok = mt->shape[0] == 7 && mt->shape[1] == 3;
    for (int i = 0; ok && i < 3; i++)
        for (int j = 0; j < 7; j++)
            ok &= mt->data[j * 3 + i] == m->data[i * 7 + j];
    CHECK(ok, "transpose(-1,-2) of [3,7] misplaces elements");

    ag_tensor *z = random_tensor(ctx, 3, (int[]){2, 3, 4}, -1, 1), *zt = ag_transpose(ctx, z, 0, 2);
    ok = zt->shape[0] == 4 && zt->shape[1] == 3 && zt->shape[2] == 2;
    for (int i = 0; ok && i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                ok &= zt->data[(k * 3 + j) * 2 + i] == z->data[(i * 3 + j) * 4 + k];
    CHECK(ok, "transpose(0,2) of [2,3,4] misplaces elements");
}

static void test_concat_slice_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *a = random_tensor(ctx, 3, (int[]){2, 2, 3}, -1, 1), *b = random_tensor(ctx, 3, (int[]){2, 1, 3}, -1, 1);
    ag_tensor *c = ag_concat(ctx, (ag_tensor *[]){ a, b }, 2, 1);
    int ok = c->ndim == 3 && c->shape[0] == 2 && c->shape[1] == 3 && c->shape[2] == 3;
    for (int i = 0; ok && i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                ok &= c->data[(i * 3 + j) * 3 + k] == (j < 2 ? a->data[(i * 2 + j) * 3 + k] : b->data[i * 3 + k]);
    CHECK(ok, "concat along dim 1 misplaces elements");
    ag_tensor *sa = ag_slice(ctx, c, 1, 0, 2), *sb = ag_slice(ctx, c, -2, 2, 1);
    CHECK(sa->shape[1] == 2 && memcmp(sa->data, a->data, a->size * sizeof(ag_real)) == 0,
          "slice [0,2) of dim 1 does not give back the first part");
    CHECK(sb->shape[1] == 1 && memcmp(sb->data, b->data, b->size * sizeof(ag_real)) == 0,
          "slice [2,3) of dim 1 does not give back the second part");

    ag_tensor *p = random_tensor(ctx, 2, (int[]){3, 2}, -1, 1), *q = random_tensor(ctx, 2, (int[]){3, 4}, -1, 1);
    ag_tensor *pq = ag_concat(ctx, (ag_tensor *[]){ p, q, p }, 3, -1);
    ok = pq->shape[0] == 3 && pq->shape[1] == 8;
    for (int i = 0; ok && i < 3; i++)
        for (int j = 0; j < 8; j++)
            ok &= pq->data[i * 8 + j] == (j < 2 ? p->data[i * 2 + j] : j < 6 ? q->data[i * 4 + j - 2]
                                                                             : p->data[i * 2 + j - 6]);
    CHECK(ok, "concat of three along the last dim misplaces elements");
}

static void test_reduction_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *x = random_tensor(ctx, 3, (int[]){2, 3, 4}, -1, 1);
    ag_tensor *s1 = ag_sum(ctx, x, 1, 0), *s1k = ag_sum(ctx, x, 1, 1), *m2 = ag_mean(ctx, x, -1, 0);
    CHECK(s1->ndim == 2 && s1->shape[0] == 2 && s1->shape[1] == 4, "sum(dim 1) of [2,3,4] must be [2,4]");
    CHECK(s1k->ndim == 3 && s1k->shape[1] == 1, "sum(dim 1, keepdim) of [2,3,4] must be [2,1,4]");
    CHECK(m2->ndim == 2 && m2->shape[0] == 2 && m2->shape[1] == 3, "mean(dim -1) of [2,3,4] must be [2,3]");
    int ok = 1;
    double total = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            double s = 0;
            for (int j = 0; j < 3; j++)
                s += x->data[(i * 3 + j) * 4 + k];
            ok &= close_to(s1->data[i * 4 + k], s, REL_TIGHT) && s1k->data[i * 4 + k] == s1->data[i * 4 + k];
        }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++)
                s += x->data[(i * 3 + j) * 4 + k];
            total += s;
            ok &= close_to(m2->data[i * 3 + j], s / 4, REL_TIGHT);
        }
    CHECK(ok, "sum/mean over a dim differ from plain loops");
    ag_tensor *sa = ag_sum_all(ctx, x), *ma = ag_mean_all(ctx, x), *s0 = ag_sum(ctx, ag_reshape(ctx, x, 1, (int[]){24}), 0, 0);
    CHECK(sa->ndim == 1 && sa->shape[0] == 1 && close_to(sa->data[0], total, REL_TIGHT), "sum_all = %g, want %g",
          (double)sa->data[0], total);
    CHECK(close_to(ma->data[0], total / 24, REL_TIGHT), "mean_all = %g, want %g", (double)ma->data[0], total / 24);
    CHECK(s0->ndim == 1 && s0->shape[0] == 1 && close_to(s0->data[0], total, REL_SUM),
          "sum of a 1-D tensor must be shape [1] holding the total");
}

static void test_layer_norm_values(ag_ctx *ctx)
{
    enum { R = 3, D = 16 };
    ag_reset(ctx);
    ag_tensor *x = random_tensor(ctx, 2, (int[]){R, D}, -3, 3);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < D; k++)
            x->data[r * D + k] += (ag_real)(10 * r);   /* row offsets 0, 10, 20 must not matter */
    ag_tensor *w = random_tensor(ctx, 1, (int[]){D}, 0.5, 2), *b = random_tensor(ctx, 1, (int[]){D}, -1, 1);
    ag_tensor *y = ag_layer_norm(ctx, x, NULL, NULL, 1e-5f), *yw = ag_layer_norm(ctx, x, w, b, 1e-5f);
    int ok = 1, affine = 1;
    for (int r = 0; r < R; r++) {
        double mean = 0, var = 0, xm = 0, xv = 0;
        for (int k = 0; k < D; k++) {
            mean += y->data[r * D + k];
            xm += x->data[r * D + k];
        }
        mean /= D;
        xm /= D;
        for (int k = 0; k < D; k++) {
            var += (y->data[r * D + k] - mean) * (y->data[r * D + k] - mean);
            xv += (x->data[r * D + k] - xm) * (x->data[r * D + k] - xm);
        }
        var /= D;
        xv /= D;
        /* Biased variance v: the output variance is v / (v + eps), just under 1. */
        ok &= fabs(mean) <= 1e-5 && close_to(var, xv / (xv + 1e-5), 1e-5);
        for (int k = 0; k < D; k++) {
            double xhat = (x->data[r * D + k] - xm) / sqrt(xv + 1e-5);
            affine &= close_to(y->data[r * D + k], xhat, REL_SUM) &&
                      close_to(yw->data[r * D + k], xhat * w->data[k] + b->data[k], REL_SUM);
        }
    }
    CHECK(ok, "layer_norm rows must have mean 0 and variance v/(v+eps)");
    CHECK(affine, "layer_norm differs from (x - mean)/sqrt(var + eps) * w + b");
}

static void test_gelu_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    const ag_real x[5] = { 1, -1, 0, 3, -6 };
    ag_tensor *y = ag_gelu(ctx, ag_from(ctx, 1, (int[]){5}, x));
    /* x Phi(x): Phi(1) = 0.8413447460685429, Phi(3) = 0.9986501019683699,
     * Phi(-6) = 9.865876450377012e-10.  Phi(x) = (1 + erf(x/sqrt 2))/2 loses
     * the low bits of 1 + erf for negative x, an absolute error of a few
     * double ulps times |x|: allowed on top of the relative tolerance. */
    const double want[5] = { 0.8413447460685429, -0.15865525393145707, 0, 3 * 0.9986501019683699,
                             -6 * 9.865876450377012e-10 };
#ifdef AG_DOUBLE
    const double erf_abs = 4 * DBL_EPSILON;   /* libm erf */
#else
    const double erf_abs = 4e-7;              /* the float build's vectorized erf (src/fastmath.h) */
#endif
    for (int i = 0; i < 5; i++)
        CHECK(fabs(y->data[i] - want[i]) <= REL_TIGHT * fabs(want[i]) + erf_abs * fabs((double)x[i]),
              "gelu(%g) = %.17g, want %.17g", (double)x[i], (double)y->data[i], want[i]);
}

/* ag_linear_gelu is ag_gelu(ag_linear(...)) fused: the same bits, forward
 * and every gradient, with and without a bias, in fp32 and (float builds,
 * where it runs) bf16.  The loss weights the outputs by random numbers, so
 * every gradient element is different. */
static void test_linear_gelu_fused(void)
{
    enum { R = 70, IN = 23, OUT = 37 };
    ag_ctx *ctx = ag_ctx_new();
    ag_params *ps = ag_params_new();
    ag_tensor *W = ag_params_add(ps, "W", 2, (int[]){OUT, IN});
    ag_tensor *b = ag_params_add(ps, "b", 1, (int[]){OUT});
    ag_tensor *x = ag_params_add(ps, "x", 2, (int[]){R, IN});
    ag_params_alloc(ps);
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = (ag_real)(ag_pcg32_uniform(&rng) * 4 - 2);
    ag_real weights[R * OUT];
    for (int i = 0; i < R * OUT; i++)
        weights[i] = (ag_real)(ag_pcg32_uniform(&rng) - 0.5);
    const size_t n_out = (size_t)R * OUT;
    ag_real *out[2], *grad[2];
    for (int precision = AG_FP32; precision <= AG_BF16; precision++) {
        if (ag_set_precision(ctx, precision) != 0)
            continue;                 /* bf16 cannot run here (or a double build) */
        for (int bias = 0; bias < 2; bias++) {
            for (int fused = 0; fused < 2; fused++) {
                ag_reset(ctx);
                ag_params_zero_grad(ps);
                ag_tensor *bb = bias ? b : NULL;
                ag_tensor *y = fused ? ag_linear_gelu(ctx, x, W, bb) : ag_gelu(ctx, ag_linear(ctx, x, W, bb));
                ag_backward(ctx, ag_sum_all(ctx, ag_mul(ctx, y, ag_from(ctx, 2, (int[]){R, OUT}, weights))));
                out[fused] = malloc(n_out * sizeof(ag_real));
                grad[fused] = malloc(ps->total * sizeof(ag_real));
                memcpy(out[fused], y->data, n_out * sizeof(ag_real));
                memcpy(grad[fused], ps->grad, ps->total * sizeof(ag_real));
            }
            CHECK(memcmp(out[0], out[1], n_out * sizeof(ag_real)) == 0,
                  "linear_gelu (%s, %s): other bits than gelu(linear)", precision == AG_BF16 ? "bf16" : "fp32",
                  bias ? "bias" : "no bias");
            CHECK(memcmp(grad[0], grad[1], ps->total * sizeof(ag_real)) == 0,
                  "linear_gelu (%s, %s): gradients of x, W, b not the bits of gelu(linear)'s",
                  precision == AG_BF16 ? "bf16" : "fp32", bias ? "bias" : "no bias");
            double norm = 0;
            for (int i = 0; i < OUT && bias; i++)
                norm += fabs(b->grad[i]);
            CHECK(!bias || norm > 0, "linear_gelu: the bias got no gradient");
            for (int f = 0; f < 2; f++) {
                free(out[f]);
                free(grad[f]);
            }
        }
    }
    ag_params_free(ps);
    ag_ctx_free(ctx);
}

static void test_cross_entropy_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    const ag_real v[12] = { 1, 2, 3, 4, 0, 0, 0, 0, 5, -5, 0, 1 };
    ag_tensor *logits = ag_from(ctx, 2, (int[]){3, 4}, v);
    ag_requires_grad(logits);
    /* Row 0, target 3: log(e + e^2 + e^3 + e^4) - 4 = log(1 + e^-1 + e^-2 + e^-3).
     * Row 1, uniform logits: log 4.  Row 2 is ignored (target -1). */
    double l0 = log(1 + exp(-1.0) + exp(-2.0) + exp(-3.0)), l1 = log(4.0), want = (l0 + l1) / 2;
    ag_tensor *loss = ag_cross_entropy(ctx, logits, (const int32_t[]){3, 2, -1});
    CHECK(close_to(loss->data[0], want, REL_TIGHT), "cross_entropy = %.10g, want %.10g", (double)loss->data[0], want);
    ag_backward(ctx, loss);
    /* d/dlogits = (softmax - onehot) / 2 on counted rows, 0 on the ignored row. */
    double z0 = exp(1.0) + exp(2.0) + exp(3.0) + exp(4.0);
    int ok = 1;
    for (int k = 0; k < 4; k++) {
        ok &= close_to(logits->grad[k], (exp(k + 1.0) / z0 - (k == 3)) / 2, REL_SUM);
        ok &= close_to(logits->grad[4 + k], (0.25 - (k == 2)) / 2, REL_SUM);
        ok &= logits->grad[8 + k] == 0;
    }
    CHECK(ok, "cross_entropy gradient is not (softmax - onehot) / counted rows");

    ag_tensor *big = ag_from(ctx, 2, (int[]){1, 2}, (const ag_real[]){1e4, 0});
    ag_tensor *lb = ag_cross_entropy(ctx, big, (const int32_t[]){1});
    CHECK(close_to(lb->data[0], 1e4, REL_TIGHT), "cross_entropy([1e4, 0], 1) = %g, want 1e4", (double)lb->data[0]);

    /* Large logits close together: the loss is O(1) and must be as exact as
     * for small logits.  [1e4, 1e4-1] with targets 0 and 1:
     * log(1 + e^-1) and 1 + log(1 + e^-1); softmax = [1, e^-1] / (1 + e^-1). */
    ag_tensor *near = ag_from(ctx, 2, (int[]){2, 2}, (const ag_real[]){1e4, 1e4 - 1, 1e4, 1e4 - 1});
    ag_requires_grad(near);
    ag_tensor *ln = ag_cross_entropy(ctx, near, (const int32_t[]){0, 1});
    double lz = log1p(exp(-1.0)), p0 = 1 / (1 + exp(-1.0));
    CHECK(close_to(ln->data[0], (lz + 1 + lz) / 2, REL_TIGHT), "cross_entropy([1e4, 1e4-1]) = %.10g, want %.10g",
          (double)ln->data[0], (lz + 1 + lz) / 2);
    ag_backward(ctx, ln);
    CHECK(close_to(near->grad[0], (p0 - 1) / 2, REL_TIGHT) && close_to(near->grad[1], (1 - p0) / 2, REL_TIGHT) &&
              close_to(near->grad[2], p0 / 2, REL_TIGHT) && close_to(near->grad[3], (1 - p0 - 1) / 2, REL_TIGHT),
          "cross_entropy([1e4, 1e4-1]) gradient {%.9g, %.9g, %.9g, %.9g}, want (softmax - onehot) / 2",
          (double)near->grad[0], (double)near->grad[1], (double)near->grad[2], (double)near->grad[3]);
    ag_tensor *none = ag_cross_entropy(ctx, logits, (const int32_t[]){-1, -1, -1});
    CHECK(none->data[0] == 0, "cross_entropy with every target ignored = %g, want 0", (double)none->data[0]);
    /* ... and its gradient is 0 everywhere, not 0/0 */
    ag_tensor *unused = ag_from(ctx, 2, (int[]){3, 4}, v);
    ag_requires_grad(unused);
    ag_backward(ctx, ag_cross_entropy(ctx, unused, (const int32_t[]){-1, -1, -1}));
    ok = 1;
    for (size_t i = 0; i < unused->size; i++)
        ok &= unused->grad[i] == 0;
    CHECK(ok, "cross_entropy with every target ignored: the gradient is not 0 everywhere");
    /* the mean's backward divides by the count of counted rows exactly:
     * past 2^24 rows a float count was another number (16777217 became
     * 16777216, and dy / count was 2^-24, not the float below it); below
     * that, the float division's bits */
    ag_real exact = (ag_real)(1.0 / 16777217.0), got = ag_div_count(1, 16777217);
    CHECK(got == exact, "cross_entropy's 1 / 16777217 rows = %a, want %a", (double)got, (double)exact);
    got = ag_div_count(3, ((size_t)1 << 40) + 3);
    exact = (ag_real)(3.0 / 1099511627779.0);
    CHECK(got == exact, "cross_entropy's 3 / (2^40 + 3) rows = %a, want %a", (double)got, (double)exact);
    CHECK(ag_div_count(5, 0) == 0, "cross_entropy's gradient with no row counted is not 0");
    ok = 1;
    for (int i = 0; i < 10000; i++) {
        ag_real dy = (ag_real)(ag_pcg32_uniform(&rng) * 8 - 4);
        size_t n = 1 + ag_pcg32_below(&rng, (1u << 24) - 1);
        ok &= ag_div_count(dy, n) == dy / (ag_real)n;
    }
    CHECK(ok, "cross_entropy's dy / rows below 2^24 differs from the division in ag_real");
}

static void test_embedding_values(ag_ctx *ctx)
{
    ag_reset(ctx);
    ag_tensor *W = leaf(ctx, 2, (int[]){5, 3}, -1, 1);
    const int32_t ids[4] = { 4, 0, 2, 4 };
    ag_tensor *y = ag_embedding(ctx, W, ids, 2, (int[]){2, 2});
    CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 2 && y->shape[2] == 3, "embedding shape");
    int ok = 1;
    for (int i = 0; i < 4; i++)
        ok &= memcmp(y->data + i * 3, W->data + ids[i] * 3, 3 * sizeof(ag_real)) == 0;
    CHECK(ok, "embedding rows differ from the weight's rows");
    ag_backward(ctx, ag_sum_all(ctx, y));
    const double uses[5] = { 1, 0, 1, 0, 2 };
    ok = 1;
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 3; k++)
            ok &= W->grad[r * 3 + k] == uses[r];
    CHECK(ok, "embedding backward must add one per use of each row (row 4 used twice)");
}

/* ag_arena_rewind: the kept tensor moves down intact, the arena shrinks to
 * the mark plus it, it works across arena blocks and for a tensor from
 * before the mark, and it refuses to rewind past recorded ops. */
static void test_arena_rewind(void)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_set_grad_enabled(ctx, 0);
    ag_tensor *before = ag_full(ctx, 1, (int[]){10}, 7);
    ag_mark mark = ag_arena_mark(ctx);
    size_t at_mark = ag_arena_used(ctx);
    /* temporaries spanning several blocks (the first block is 1 MB) */
    ag_tensor *big = NULL;
    for (int i = 0; i < 6; i++)
        big = ag_full(ctx, 1, (int[]){300000}, (ag_real)i);
    ag_tensor *keep = ag_scale(ctx, big, 2);
    keep->data[123] = 42;
    ag_tensor *kept = ag_arena_rewind(ctx, mark, keep);
    int intact = kept->size == 300000 && kept->data[123] == 42 && kept->data[0] == 10 && kept->data[299999] == 10;
    CHECK(intact, "rewind keeps the tensor's values");
    CHECK(ag_arena_used(ctx) < at_mark + 300000 * sizeof(ag_real) + 1024,
          "after rewinding, the arena holds the mark plus the kept tensor (%zu bytes over the mark)",
          ag_arena_used(ctx) - at_mark);
    CHECK(before->data[9] == 7, "what came before the mark is untouched");
    ag_tensor *again = ag_arena_rewind(ctx, ag_arena_mark(ctx), before);
    CHECK(again->data[0] == 7 && again->size == 10, "a tensor from before the mark can be kept too");
    ag_set_grad_enabled(ctx, 1);
    ag_set_error_handler(record_error, NULL);
    ag_tensor *x = ag_full(ctx, 1, (int[]){3}, 1);
    ag_requires_grad(x);
    mark = ag_arena_mark(ctx);
    ag_tensor *y = ag_scale(ctx, x, 3);
    EXPECT_ERROR(ag_arena_rewind(ctx, mark, y), "ag_arena_rewind", "recorded");
    /* a mark of another context, or from before a reset, is no position here */
    ag_ctx *other = ag_ctx_new();
    ag_tensor *elsewhere = ag_full(other, 1, (int[]){3}, 1);
    const size_t used = ag_arena_used(ctx);
    EXPECT_ERROR(ag_arena_rewind(ctx, ag_arena_mark(other), x), "ag_arena_rewind", "another context");
    EXPECT_ERROR(ag_arena_rewind(other, ag_arena_mark(ctx), elsewhere), "ag_arena_rewind", "another context");
    /* one of a context that has allocated nothing yet (no block: it was
     * taken for position 0 of any context whose step count matched) */
    {
        ag_ctx *fresh = ag_ctx_new(), *c = ag_ctx_new();
        ag_set_grad_enabled(c, 0);
        ag_tensor *t = ag_full(c, 1, (int[]){ 4 }, 3);
        const size_t c_used = ag_arena_used(c);
        EXPECT_ERROR(ag_arena_rewind(c, ag_arena_mark(fresh), t), "ag_arena_rewind", "another context");
        CHECK(ag_arena_used(c) == c_used, "a refused rewind moved the arena");
        ag_ctx_free(fresh);
        ag_ctx_free(c);
    }
    CHECK(ag_arena_used(ctx) == used, "a refused rewind moved the arena");
    /* a mark past the position: an earlier rewind went back before it */
    ag_set_grad_enabled(ctx, 0);
    ag_mark early = ag_arena_mark(ctx);
    (void)ag_full(ctx, 1, (int[]){100}, 1);
    ag_mark late = ag_arena_mark(ctx);
    ag_tensor *one = ag_arena_rewind(ctx, early, x);
    EXPECT_ERROR(ag_arena_rewind(ctx, late, one), "ag_arena_rewind", "past the arena's position");
    ag_set_grad_enabled(ctx, 1);
    ag_reset(ctx);
    ag_tensor *small = ag_full(ctx, 1, (int[]){3}, 1);
    EXPECT_ERROR(ag_arena_rewind(ctx, mark, small), "ag_arena_rewind", "before the last ag_reset");
    /* a mark from before the reset that lies within this step's tensors
     * was taken: rewinding to it handed the memory of a tensor made since
     * the reset (held, across the mark's position) to the next ones */
    {
        ag_ctx *c = ag_ctx_new();
        ag_set_grad_enabled(c, 0);
        (void)ag_full(c, 1, (int[]){1000}, 0);
        const ag_mark stale = ag_arena_mark(c);
        ag_reset(c);
        ag_tensor *held = ag_full(c, 1, (int[]){2000}, 5), *tiny = ag_full(c, 1, (int[]){1}, 7);
        const size_t at = ag_arena_used(c);
        EXPECT_ERROR(ag_arena_rewind(c, stale, tiny), "ag_arena_rewind", "before the last ag_reset");
        CHECK(ag_arena_used(c) == at, "a refused rewind moved the arena");
        int whole = 1;
        for (int i = 0; i < 2000; i++)
            whole &= held->data[i] == 5;
        CHECK(whole, "a tensor made after the reset was handed out again by a rewind to a mark from before it");
        ag_ctx_free(c);
    }
    ag_ctx_free(other);
    ag_set_error_handler(NULL, NULL);
    ag_ctx_free(ctx);
}

#ifndef AG_DOUBLE
/* The worst |got - X Y| / sum |x y| over got's R x C elements, X Y the
 * product of X and Y rounded to bf16, summed in double over Kn: element
 * (r, c) of X Y is sum over k of X[r xr + k xk] Y[k yk + c yc]. */
static double bf16_product_error(const ag_real *got, int R, int C, int Kn, const ag_real *X, int xr, int xk,
                                 const ag_real *Y, int yk, int yc)
{
    double worst = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double want = 0, mag = 0;
            for (int k = 0; k < Kn; k++) {
                const double p = (double)ag_bf16_round(X[r * xr + k * xk]) * ag_bf16_round(Y[k * yk + c * yc]);
                want += p;
                mag += fabs(p);
            }
            worst = fmax(worst, fabs(got[r * C + c] - want) / mag);
        }
    return worst;
}
#endif

/* ag_set_precision(AG_BF16): linear's forward and backward products take
 * bf16-rounded inputs (so they equal the product of the rounded values,
 * computed in double, to fp32 summation error, and differ from the fp32
 * result); where the build or CPU cannot, it refuses and says why. */
static void test_bf16_precision(void)
{
    ag_ctx *ctx = ag_ctx_new();
    if (ag_set_precision(ctx, AG_BF16) != 0) {
        const char *why = NULL;
        CHECK(ag_bf16_status(&why) != AG_BF16_READY, "bf16 refused: ag_bf16_status agrees");
        CHECK(why && *why && ag_get_precision(ctx) == AG_FP32, "bf16 refused: says why (%s), stays fp32",
              why ? why : "(null)");
        ag_ctx_free(ctx);
        return;
    }
#ifndef AG_DOUBLE
    enum { R = 9, IN = 37, OUT = 11 };
    ag_params *ps = ag_params_new();
    ag_tensor *W = ag_params_add(ps, "W", 2, (int[]){OUT, IN});
    ag_params_alloc(ps);
    for (size_t i = 0; i < W->size; i++)
        W->data[i] = (ag_real)(ag_pcg32_uniform(&rng) * 2 - 1);
    ag_tensor *x = ag_new(ctx, 2, (int[]){R, IN});
    for (size_t i = 0; i < x->size; i++)
        x->data[i] = (ag_real)(ag_pcg32_uniform(&rng) * 2 - 1);
    ag_tensor *y = ag_linear(ctx, x, W, NULL);
    double worst = 0, differs = 0;
    for (int r = 0; r < R; r++)
        for (int o = 0; o < OUT; o++) {
            double want = 0, fp32 = 0, mag = 0;
            for (int k = 0; k < IN; k++) {
                want += (double)ag_bf16_round(x->data[r * IN + k]) * ag_bf16_round(W->data[o * IN + k]);
                fp32 += (double)x->data[r * IN + k] * W->data[o * IN + k];
                mag += fabs((double)x->data[r * IN + k] * W->data[o * IN + k]);
            }
            worst = fmax(worst, fabs(y->data[r * OUT + o] - want) / mag);
            differs = fmax(differs, fabs(y->data[r * OUT + o] - fp32) / mag);
        }
    CHECK(worst <= 2 * IN * 5.96e-8, "bf16 linear: the product of the rounded inputs (worst %.3g)", worst);
    CHECK(differs > 1e-4, "bf16 linear differs from fp32 (%.3g): the inputs were rounded", differs);

    /* A batched product in bf16 ([2,5,37] @ [2,37,6]: one bf16 product per
     * item) and its backward: each the product of the rounded inputs. */
    enum { NB = 2, M = 5, K = 37, N = 6 };
    ag_tensor *a = ag_new(ctx, 3, (int[]){NB, M, K}), *bm = ag_new(ctx, 3, (int[]){NB, K, N});
    ag_tensor *Rt = ag_new(ctx, 3, (int[]){NB, M, N});
    ag_tensor *rand3[3] = { a, bm, Rt };
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < rand3[t]->size; i++)
            rand3[t]->data[i] = (ag_real)(ag_pcg32_uniform(&rng) * 2 - 1);
    ag_requires_grad(a);
    ag_requires_grad(bm);
    ag_tensor *c = ag_matmul(ctx, a, bm);
    ag_backward(ctx, ag_sum_all(ctx, ag_mul(ctx, c, Rt)));
    double wc = 0, wa = 0, wb = 0;
    for (int i = 0; i < NB; i++) {
        const ag_real *A = a->data + i * M * K, *Bm = bm->data + i * K * N, *Ri = Rt->data + i * M * N;
        /* c = a b; da = R b^T; db = a^T R (strides of X's rows and its inner
         * index, then Y's inner index and its columns) */
        wc = fmax(wc, bf16_product_error(c->data + i * M * N, M, N, K, A, K, 1, Bm, N, 1));
        wa = fmax(wa, bf16_product_error(a->grad + i * M * K, M, K, N, Ri, N, 1, Bm, 1, N));
        wb = fmax(wb, bf16_product_error(bm->grad + i * K * N, K, N, M, A, 1, K, Ri, N, 1));
    }
    CHECK(wc <= 2 * K * 5.96e-8 && wa <= 2 * N * 5.96e-8 && wb <= 2 * M * 5.96e-8,
          "bf16 batched matmul: forward and both gradients the products of the rounded inputs (worst %.3g, %.3g, %.3g)",
          wc, wa, wb);
    CHECK(ag_get_precision(ctx) == AG_BF16 && ag_set_precision(ctx, AG_FP32) == 0 &&
              ag_get_precision(ctx) == AG_FP32, "precision switches back to fp32");
    ag_params_free(ps);
#endif
    ag_ctx_free(ctx);
}

/* ======================================================================= */
/* optimizer values                                                        */
/* ======================================================================= */

/* The optimizers and clipping against torch's update rules computed here in
 * double, element by element, three steps from set gradients: a matrix W of
 * 19 elements (the fast update's 16-wide lanes and 3 more) that decays and
 * a bias b of 3 that does not.  torch.optim.AdamW, step t from 1:
 *   p -= lr wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * torch.optim.SGD:  g += wd p;  buf = g at the first step, else
 * momentum buf + g;  p -= lr buf.  eps 0.1, betas 0.8 and 0.9 and decay 0.5
 * make where eps sits, each bias correction's step and the decay's reach
 * show far above the float rounding: each parameter within 1e-5 (float)
 * or 1e-12 (double) relative (of max(1, |p|)) of the double value. */
#define OPT_NW 19
#define OPT_NB 3
static double opt_grad(int i, int t) { return (i % 5 - 2) * 0.3 + 0.1 * t + (i % 2 ? 0.05 : -0.07); }

static void check_optimizer(int adamw)
{
    const double lr = 0.1, wd = 0.5, b1 = 0.8, b2 = 0.9, eps = 0.1, mom = 0.7;
    const double tol = sizeof(ag_real) == sizeof(float) ? 1e-5 : 1e-12;
    ag_params *ps = ag_params_new();
    ag_tensor *W = ag_params_add(ps, "W", 1, (int[]){ OPT_NW });
    ag_tensor *b = ag_params_add(ps, "b", 1, (int[]){ OPT_NB });
    W->decay = 1;
    ag_params_alloc(ps);
    ag_optim *o = adamw ? ag_optim_adamw(ps, b1, b2, eps, wd) : ag_optim_sgd(ps, mom, wd);
    enum { N = OPT_NW + OPT_NB };
    double p[N], m[N] = { 0 }, v[N] = { 0 };
    for (int i = 0; i < N; i++) {
        ag_tensor *t = i < OPT_NW ? W : b;
        const int k = i < OPT_NW ? i : i - OPT_NW;
        t->data[k] = (ag_real)(0.25 * (i % 7) - 0.6);
        p[i] = t->data[k];
    }
    double worst = 0;
    int worst_i = 0;
    for (int step = 1; step <= 3; step++) {
        for (int i = 0; i < N; i++) {
            ag_tensor *t = i < OPT_NW ? W : b;
            const int k = i < OPT_NW ? i : i - OPT_NW;
            const double g = (ag_real)opt_grad(i, step), decay = i < OPT_NW ? wd : 0;
            t->grad[k] = (ag_real)g;
            if (adamw) {
                p[i] -= lr * decay * p[i];
                m[i] = b1 * m[i] + (1 - b1) * g;
                v[i] = b2 * v[i] + (1 - b2) * g * g;
                p[i] -= lr * (m[i] / (1 - pow(b1, step))) / (sqrt(v[i] / (1 - pow(b2, step))) + eps);
            } else {
                const double gd = g + decay * p[i];
                m[i] = step == 1 ? gd : mom * m[i] + gd;
                p[i] -= lr * m[i];
            }
        }
        ag_optim_step(o, lr);
        for (int i = 0; i < N; i++) {
            const double got = i < OPT_NW ? W->data[i] : b->data[i - OPT_NW];
            const double err = fabs(got - p[i]) / fmax(1, fabs(p[i]));
            if (!(err <= worst)) {
                worst = err;
                worst_i = i;
            }
        }
    }
    CHECK(worst <= tol, "%s (decay on W only, eps %g): after 3 steps %s[%d] is %.9g off torch's rule, relative "
          "(tolerance %g)", adamw ? "AdamW" : "SGD with momentum", eps, worst_i < OPT_NW ? "W" : "b",
          worst_i < OPT_NW ? worst_i : worst_i - OPT_NW, worst, tol);
    ag_optim_free(o);
    ag_params_free(ps);
}

/* torch.nn.utils.clip_grad_norm_: the norm returned is sqrt of the sum of
 * every gradient's squares, across parameters; above max_norm each gradient
 * is scaled by max_norm / (norm + 1e-6), at or below it left alone. */
static void test_clip_values(void)
{
    ag_params *ps = ag_params_new();
    ag_tensor *W = ag_params_add(ps, "W", 1, (int[]){ OPT_NW });
    ag_tensor *b = ag_params_add(ps, "b", 1, (int[]){ OPT_NB });
    ag_params_alloc(ps);
    double sq = 0;
    for (int i = 0; i < OPT_NW + OPT_NB; i++) {
        ag_real g = (ag_real)opt_grad(i, 4);
        *(i < OPT_NW ? &W->grad[i] : &b->grad[i - OPT_NW]) = g;
        sq += (double)g * g;
    }
    const double norm = sqrt(sq), max_norm = norm / 2, c = max_norm / (norm + 1e-6);
    const double tol = sizeof(ag_real) == sizeof(float) ? 1e-6 : 1e-14;
    const double got = ag_clip_grad_norm(ps, max_norm);
    CHECK(fabs(got - norm) <= tol * norm, "ag_clip_grad_norm returned %.9g, the gradients' norm is %.9g", got, norm);
    double worst = 0;
    for (int i = 0; i < OPT_NW + OPT_NB; i++) {
        const double want = (ag_real)opt_grad(i, 4) * c, have = i < OPT_NW ? W->grad[i] : b->grad[i - OPT_NW];
        worst = fmax(worst, fabs(have - want));
    }
    CHECK(worst <= tol, "clipping to half the norm: a gradient %.3g off g max_norm / (norm + 1e-6)", worst);
    /* a bound above the norm leaves every gradient as it is, bit for bit */
    ag_real kept[OPT_NW + OPT_NB];
    memcpy(kept, ps->grad, sizeof kept);
    const double now = ag_clip_grad_norm(ps, 2 * max_norm);
    CHECK(memcmp(kept, ps->grad, sizeof kept) == 0 && fabs(now - norm * c) <= tol * norm,
          "clipping to twice a norm of %.9g (reported %.9g) changed a gradient", norm * c, now);
    /* its halves: the norm alone changes nothing and is the norm clipping
     * reports; clipping with a given norm scales by that norm; a NaN or an
     * infinity in a gradient makes the norm NaN or infinite, and a NaN
     * norm scales nothing */
    const double alone = ag_grad_norm(ps);
    CHECK(memcmp(kept, ps->grad, sizeof kept) == 0 && alone == now, "ag_grad_norm %.17g, ag_clip_grad_norm %.17g",
          alone, now);
    ag_clip_grads_with_norm(ps, alone / 4, alone);
    worst = 0;
    for (int i = 0; i < OPT_NW + OPT_NB; i++)
        worst = fmax(worst, fabs(ps->grad[i] - kept[i] * (ag_real)(alone / 4 / (alone + 1e-6))));
    CHECK(worst == 0, "ag_clip_grads_with_norm to a quarter: a gradient %.3g off", worst);
    memcpy(kept, ps->grad, sizeof kept);
    ag_clip_grads_with_norm(ps, 1, NAN);
    CHECK(memcmp(kept, ps->grad, sizeof kept) == 0, "a NaN norm scaled the gradients");
    const ag_real bad[3] = { NAN, INFINITY, -INFINITY };
    for (int k = 0; k < 3; k++) {
        b->grad[OPT_NB - 1] = bad[k];
        const double n_bad = ag_grad_norm(ps);
        CHECK(!isfinite(n_bad), "a gradient of %g: norm %g", (double)bad[k], n_bad);
    }
    ag_params_free(ps);
}
#undef OPT_NW
#undef OPT_NB

static void test_optimizer_values(void)
{
    check_optimizer(1);
    check_optimizer(0);
    test_clip_values();
}

int main(void)
{
    ag_pcg32_seed(&rng, 12345, 1);
    ag_ctx *ctx = ag_ctx_new();

    test_pcg32_reference();
    test_pcg32_distributions();
    test_pcg32_below();

    test_softmax_extremes(ctx);
    test_softmax_strided(ctx);
    test_softmax_masked_rows(ctx);
    test_masked_attention_gradients(ctx);

    test_dropout_statistics(ctx);
    test_dropout_identity(ctx);
    test_dropout_seeding(ctx);

    ag_set_error_handler(record_error, NULL);
    test_dropout_keep_probability(ctx);
    test_shape_errors(ctx);
    test_message_lines();
    test_null_arguments(ctx);
    test_usage_errors(ctx);
    test_handler_returns();
    test_graph_walk(ctx);
    test_params_join(ctx);
    test_params_no_grad(ctx);
    test_params_optim_misuse();
    test_alloc_failures();
    ag_set_error_handler(NULL, NULL);
    CHECK(error_count > 0, "the error handler was never called");

    test_accumulation(ctx);
    test_no_grad(ctx);
    test_reshape_view(ctx);
    test_grad_ready_hook(ctx);
    test_deep_graph();
    test_arena_steady();
    test_arena_rewind();
    test_big_buffers();
    test_bf16_precision();

    test_matmul_values(ctx);
    test_transpose_values(ctx);
    test_concat_slice_values(ctx);
    test_reduction_values(ctx);
    test_layer_norm_values(ctx);
    test_gelu_values(ctx);
    test_linear_gelu_fused();
    test_cross_entropy_values(ctx);
    test_embedding_values(ctx);
    test_optimizer_values();

    ag_ctx_free(ctx);
    return check_done();
}
