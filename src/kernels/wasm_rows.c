/*
 * wasm_rows.c - the browser build's layer norm, cross-entropy and SGD
 * (make web), with the reference's bits (src/reference.c): each the
 * reference's float and double operations in its order, in SIMD128 lanes.
 *
 * A sum along a row (layer norm's mean and variance, a sum of exps) is a
 * chain in double that must not be split, so four rows run side by side,
 * one chain per lane; what is element by element (the outputs, the
 * gradients, a bias's sum down the rows) runs four columns at a time.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <math.h>

#include "wasm.h"

/* ---- layer norm --------------------------------------------------------- */

/* Four rows at a time; past the last row, the last row again (its lane
 * computes what another already does, and is not stored). */
static void four_rows(const ag_real *x, size_t r0, size_t rows, int D, const ag_real *row[4])
{
    for (int l = 0; l < 4; l++)
        row[l] = x + (r0 + l < rows ? r0 + l : rows - 1) * D;
}

/* Element k of the four rows, one per lane. */
static v128_t column(const ag_real *const row[4], int k)
{
    return wasm_f32x4_make(row[0][k], row[1][k], row[2][k], row[3][k]);
}

/* sum / D in double, rounded to float, for four rows' sums (two pairs) */
static v128_t row_means(v128_t sum01, v128_t sum23, int D)
{
    const v128_t d = wasm_f64x2_splat(D);
    return ag_wasm_narrow(wasm_f64x2_div(sum01, d), wasm_f64x2_div(sum23, d));
}

/* 1 / sqrt(sq / D + eps) in double for two rows' sums of squares
 * (f64x2.sqrt rounds correctly, as libm's sqrt) */
static v128_t inverse_root(v128_t sq, int D, ag_real eps)
{
    v128_t var = wasm_f64x2_add(wasm_f64x2_div(sq, wasm_f64x2_splat(D)), wasm_f64x2_splat(eps));
    return wasm_f64x2_div(wasm_f64x2_splat(1), wasm_f64x2_sqrt(var));
}

/* as ref_layer_norm:  mean = sum_k x_k / D,  var = sum_k (x_k - mean)^2 / D,
 * rstd = 1 / sqrt(var + eps),  y = (x - mean) rstd w + b; the sums in
 * double over k in order, one row per lane */
void ag_wasm_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                        ag_real *y, ag_real *mean, ag_real *rstd)
{
    const v128_t zero = wasm_f64x2_splat(0);
    for (size_t r0 = 0; r0 < rows; r0 += 4) {
        const ag_real *xr[4];
        four_rows(x, r0, rows, D, xr);
        v128_t sum01 = zero, sum23 = zero, sq01 = zero, sq23 = zero;
        for (int k = 0; k < D; k++) {
            v128_t xk = column(xr, k);
            sum01 = wasm_f64x2_add(sum01, ag_wasm_lo(xk));
            sum23 = wasm_f64x2_add(sum23, ag_wasm_hi(xk));
        }
        const v128_t m = row_means(sum01, sum23, D);
        for (int k = 0; k < D; k++) {
            v128_t c = wasm_f32x4_sub(column(xr, k), m), c01 = ag_wasm_lo(c), c23 = ag_wasm_hi(c);
            sq01 = wasm_f64x2_add(sq01, wasm_f64x2_mul(c01, c01));
            sq23 = wasm_f64x2_add(sq23, wasm_f64x2_mul(c23, c23));
        }
        const v128_t s = ag_wasm_narrow(inverse_root(sq01, D, eps), inverse_root(sq23, D, eps));
        ag_real ms[4], ss[4];
        wasm_v128_store(ms, m);
        wasm_v128_store(ss, s);
        for (size_t l = 0; l < 4 && r0 + l < rows; l++) {
            const ag_real *xl = xr[l];
            ag_real *yl = y + (r0 + l) * D;
            mean[r0 + l] = ms[l];
            rstd[r0 + l] = ss[l];
            const v128_t mv = wasm_f32x4_splat(ms[l]), sv = wasm_f32x4_splat(ss[l]);
            int k = 0;
            for (; k + 4 <= D; k += 4) {
                v128_t t = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(xl + k), mv), sv);
                t = wasm_f32x4_mul(t, w ? wasm_v128_load(w + k) : wasm_f32x4_splat(1));
                wasm_v128_store(yl + k, wasm_f32x4_add(t, b ? wasm_v128_load(b + k) : wasm_f32x4_splat(0)));
            }
            for (; k < D; k++)
                yl[k] = (xl[k] - ms[l]) * ss[l] * (w ? w[k] : 1) + (b ? b[k] : 0);
        }
    }
}

/* as ref_layer_norm_backward:  with xhat = (x - mean) rstd and g = dy w,
 *     dw_k += dy_k xhat_k,  db_k += dy_k  (row after row),
 *     dx = rstd (g - mean(g) - xhat mean(g xhat));
 * the two means' sums in double over k in order, one row per lane */
void ag_wasm_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                 const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                 ag_real *db)
{
    const v128_t zero = wasm_f64x2_splat(0);
    for (size_t r0 = 0; r0 < rows; r0 += 4) {
        const ag_real *xr[4], *dyr[4], *mr[4], *sr[4];
        four_rows(x, r0, rows, D, xr);
        four_rows(dy, r0, rows, D, dyr);
        four_rows(mean, r0, rows, 1, mr);
        four_rows(rstd, r0, rows, 1, sr);
        ag_real mean_g[4] = { 0 }, mean_gx[4] = { 0 };
        if (dx) {
            const v128_t m = column(mr, 0), s = column(sr, 0);
            v128_t g01 = zero, g23 = zero, gx01 = zero, gx23 = zero;
            for (int k = 0; k < D; k++) {
                v128_t xhat = wasm_f32x4_mul(wasm_f32x4_sub(column(xr, k), m), s);
                v128_t g = wasm_f32x4_mul(column(dyr, k), wasm_f32x4_splat(w ? w[k] : 1));
                g01 = wasm_f64x2_add(g01, ag_wasm_lo(g));
                g23 = wasm_f64x2_add(g23, ag_wasm_hi(g));
                gx01 = wasm_f64x2_add(gx01, wasm_f64x2_mul(ag_wasm_lo(g), ag_wasm_lo(xhat)));
                gx23 = wasm_f64x2_add(gx23, wasm_f64x2_mul(ag_wasm_hi(g), ag_wasm_hi(xhat)));
            }
            wasm_v128_store(mean_g, row_means(g01, g23, D));
            wasm_v128_store(mean_gx, row_means(gx01, gx23, D));
        }
        for (size_t l = 0; l < 4 && r0 + l < rows; l++) {
            const ag_real *xl = xr[l], *dyl = dyr[l], ml = *mr[l], sl = *sr[l];
            ag_real *dxl = dx ? dx + (r0 + l) * D : NULL;
            const v128_t m = wasm_f32x4_splat(ml), s = wasm_f32x4_splat(sl);
            const v128_t mg = wasm_f32x4_splat(mean_g[l]), mgx = wasm_f32x4_splat(mean_gx[l]);
            int k = 0;
            for (; k + 4 <= D; k += 4) {
                v128_t dyk = wasm_v128_load(dyl + k);
                v128_t xhat = wasm_f32x4_mul(wasm_f32x4_sub(wasm_v128_load(xl + k), m), s);
                if (dw)
                    wasm_v128_store(dw + k, wasm_f32x4_add(wasm_v128_load(dw + k), wasm_f32x4_mul(dyk, xhat)));
                if (db)
                    wasm_v128_store(db + k, wasm_f32x4_add(wasm_v128_load(db + k), dyk));
                if (!dxl)
                    continue;
                v128_t g = wasm_f32x4_mul(dyk, w ? wasm_v128_load(w + k) : wasm_f32x4_splat(1));
                v128_t d = wasm_f32x4_mul(s, wasm_f32x4_sub(wasm_f32x4_sub(g, mg), wasm_f32x4_mul(xhat, mgx)));
                wasm_v128_store(dxl + k, assign ? d : wasm_f32x4_add(wasm_v128_load(dxl + k), d));
            }
            for (; k < D; k++) {
                ag_real xhat = (xl[k] - ml) * sl, g = dyl[k] * (w ? w[k] : 1);
                if (dw)
                    dw[k] += dyl[k] * xhat;
                if (db)
                    db[k] += dyl[k];
                if (dxl) {
                    ag_real d = sl * (g - mean_g[l] - xhat * mean_gx[l]);
                    dxl[k] = assign ? d : dxl[k] + d;
                }
            }
        }
    }
}

/* ---- cross-entropy ------------------------------------------------------ */

/* as ref_cross_entropy:  per row, m = max_k x_k,  sum = sum_k exp(x_k - m)
 * (in double, in order),  prob_k = exp(x_k - m) / sum,
 * loss = (m - x_t) + log sum;  the reference finds m and sum three times
 * (softmax, then loss), each the same bits: here once, and the exps in lanes */
void ag_wasm_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                           double *loss)
{
    double *arg = ag_wasm_scratch(AG_WASM_ROWS, 2 * (size_t)V * sizeof(double)), *ex = arg + V;
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = logits + r * V;
        ag_real *pr = prob + r * V, m = -INFINITY;
        for (int k = 0; k < V; k++)
            if (xr[k] > m)
                m = xr[k];
        /* a row of all -inf (every class masked) has no weights: zeros */
        double sum = m == -INFINITY ? 0 : ag_wasm_sum_exp(xr, V, m, arg, ex);
        for (int k = 0; k < V; k++)
            pr[k] = m == -INFINITY ? 0 : (ag_real)(ex[k] / sum);
        loss[r] = target[r] >= 0 ? (double)(m - xr[target[r]]) + ag_math_log(sum) : 0;
    }
}

/* as ref_cross_entropy_backward:  dlogits[r][k] (+)= scale (prob[r][k] - [k = t_r]),  0 where t_r < 0 */
void ag_wasm_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V, ag_real scale,
                                    ag_real *dlogits, int assign)
{
    const v128_t sv = wasm_f32x4_splat(scale), one = wasm_f32x4_splat(1);
    for (size_t r = 0; r < rows; r++) {
        const ag_real *pr = prob + r * V;
        ag_real *d = dlogits + r * V;
        const int t = target[r];
        int k = 0;
        for (; k + 4 <= V; k += 4) {
            /* [k = t] as 1.0f or 0.0f in each lane */
            v128_t lanes = wasm_i32x4_make(k, k + 1, k + 2, k + 3);
            v128_t hot = wasm_v128_and(wasm_i32x4_eq(lanes, wasm_i32x4_splat(t)), one);
            v128_t g = t < 0 ? wasm_f32x4_splat(0) : wasm_f32x4_mul(sv, wasm_f32x4_sub(wasm_v128_load(pr + k), hot));
            wasm_v128_store(d + k, assign ? g : wasm_f32x4_add(wasm_v128_load(d + k), g));
        }
        for (; k < V; k++) {
            ag_real g = t < 0 ? 0 : scale * (pr[k] - (k == t));
            d[k] = assign ? g : d[k] + g;
        }
    }
}

/* ---- SGD ---------------------------------------------------------------- */

/* as ref_sgd:  g' = g + decay p;  buf = momentum buf + g' (g' at the first step);  p -= lr buf
 * (p -= lr g' without momentum) */
void ag_wasm_sgd(ag_real *p, const ag_real *g, ag_real *buf, size_t n, ag_real lr, ag_real momentum, ag_real decay,
                 int first)
{
    const v128_t lv = wasm_f32x4_splat(lr), mv = wasm_f32x4_splat(momentum), dv = wasm_f32x4_splat(decay);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t pi = wasm_v128_load(p + i), gi = wasm_f32x4_add(wasm_v128_load(g + i), wasm_f32x4_mul(dv, pi));
        if (momentum != 0) {
            gi = first ? gi : wasm_f32x4_add(wasm_f32x4_mul(mv, wasm_v128_load(buf + i)), gi);
            wasm_v128_store(buf + i, gi);
        }
        wasm_v128_store(p + i, wasm_f32x4_sub(pi, wasm_f32x4_mul(lv, gi)));
    }
    ag_kernels_reference.sgd(p + i, g + i, buf ? buf + i : NULL, n - i, lr, momentum, decay, first);
}
#endif
