/*
 * wasm_gelu.c - the browser build's GELU and its gradient (make web): the
 * engine's erf and exp two lanes at a time (src/mathfn.c's array forms),
 * every other operation the reference's own expression (src/reference.c)
 * in f32x4 and f64x2 lanes, its double arithmetic in double, so the bits
 * are the reference's.  The forward keeps its erf values (in double, as
 * computed) for the backward, which would compute the same ones again:
 * erf is a polynomial of up to 19 terms in double, the costliest part.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <math.h>

#include "wasm.h"

/* Elements per pass: the doubles below stay on the stack. */
enum { CHUNK = 256 };

/* One chunk's h = x + b (b: NULL for none) and erf's argument h / sqrt 2
 * (u: NULL when not wanted), each as the reference computes it (the
 * division in double). */
static void chunk_inputs(const ag_real *x, const ag_real *b, size_t len, ag_real *h, double *u)
{
    const v128_t root2 = wasm_f64x2_splat(sqrt(2.0));
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        v128_t hv = b ? wasm_f32x4_add(wasm_v128_load(x + i), wasm_v128_load(b + i)) : wasm_v128_load(x + i);
        wasm_v128_store(h + i, hv);
        if (u) {
            wasm_v128_store(u + i, wasm_f64x2_div(ag_wasm_lo(hv), root2));
            wasm_v128_store(u + i + 2, wasm_f64x2_div(ag_wasm_hi(hv), root2));
        }
    }
    for (; i < len; i++) {
        h[i] = b ? x[i] + b[i] : x[i];
        if (u)
            u[i] = h[i] / sqrt(2.0);
    }
}

/* 0.5 h (1 + erf) for two lanes, in double */
static v128_t gelu2(v128_t h, v128_t e)
{
    return wasm_f64x2_mul(wasm_f64x2_mul(wasm_f64x2_splat(0.5), h), wasm_f64x2_add(wasm_f64x2_splat(1), e));
}

/* The erf values of n elements, one double each. */
size_t ag_wasm_gelu_keep(size_t n) { return n * sizeof(double); }

/* as ref_gelu:  h = x + b,  y = h Phi(h) = h/2 (1 + erf(h / sqrt 2));
 * the chunks run along each row, so a chunk's bias is b[c0..]; erf's
 * values go to keep (NULL: a buffer of the chunk's) */
void ag_wasm_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep)
{
    double u[CHUNK], chunk_e[CHUNK];
    ag_real h[CHUNK];
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t len = cols - c0 < CHUNK ? cols - c0 : CHUNK, at = r * cols + c0, i = 0;
            double *e = keep ? (double *)keep + at : chunk_e;
            chunk_inputs(x + at, b ? b + c0 : NULL, len, h, u);
            ag_math_erf_n(u, e, len);
            for (; i + 4 <= len; i += 4) {
                v128_t hv = wasm_v128_load(h + i);
                wasm_v128_store(y + at + i, ag_wasm_narrow(gelu2(ag_wasm_lo(hv), wasm_v128_load(e + i)),
                                                           gelu2(ag_wasm_hi(hv), wasm_v128_load(e + i + 2))));
            }
            for (; i < len; i++)
                y[at + i] = (ag_real)(0.5 * h[i] * (1 + e[i]));
        }
}

/* dy (Phi(h) + h phi(h)) for two lanes, in double:  Phi(h) = (1 + erf) / 2,
 * phi(h) = exp(-h^2/2) / sqrt(2 pi) */
static v128_t dgelu2(v128_t dy, v128_t h, v128_t e, v128_t ex)
{
    v128_t cdf = wasm_f64x2_mul(wasm_f64x2_splat(0.5), wasm_f64x2_add(wasm_f64x2_splat(1), e));
    v128_t pdf = wasm_f64x2_div(ex, wasm_f64x2_splat(sqrt(2 * 3.14159265358979323846)));
    return wasm_f64x2_mul(dy, wasm_f64x2_add(cdf, wasm_f64x2_mul(h, pdf)));
}

/* as ref_gelu_backward:  dh = dy (Phi(h) + h phi(h)),  phi(h) = exp(-h^2/2) / sqrt(2 pi),
 * dx (+)= dh,  db_c += dh row after row (the reference's order); erf's
 * values from the forward's keep, or computed again when it is NULL */
void ag_wasm_gelu_backward(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                           size_t cols, ag_real *dx, int assign, ag_real *db)
{
    double u[CHUNK], chunk_e[CHUNK], w[CHUNK], ex[CHUNK];
    ag_real h[CHUNK];
    const v128_t minus_half = wasm_f64x2_splat(-0.5);
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t len = cols - c0 < CHUNK ? cols - c0 : CHUNK, at = r * cols + c0, i = 0;
            const double *e = keep ? (const double *)keep + at : chunk_e;
            chunk_inputs(x + at, b ? b + c0 : NULL, len, h, keep ? NULL : u);
            for (; i + 4 <= len; i += 4) {      /* -h^2 / 2 as the reference's -0.5 h h */
                v128_t hv = wasm_v128_load(h + i), h01 = ag_wasm_lo(hv), h23 = ag_wasm_hi(hv);
                wasm_v128_store(w + i, wasm_f64x2_mul(wasm_f64x2_mul(minus_half, h01), h01));
                wasm_v128_store(w + i + 2, wasm_f64x2_mul(wasm_f64x2_mul(minus_half, h23), h23));
            }
            for (; i < len; i++)
                w[i] = -0.5 * h[i] * h[i];
            if (!keep)
                ag_math_erf_n(u, chunk_e, len);
            ag_math_exp_n(w, ex, len);
            for (i = 0; i + 4 <= len; i += 4) {
                v128_t hv = wasm_v128_load(h + i), dyv = wasm_v128_load(dy + at + i);
                v128_t dh = ag_wasm_narrow(
                    dgelu2(ag_wasm_lo(dyv), ag_wasm_lo(hv), wasm_v128_load(e + i), wasm_v128_load(ex + i)),
                    dgelu2(ag_wasm_hi(dyv), ag_wasm_hi(hv), wasm_v128_load(e + i + 2), wasm_v128_load(ex + i + 2)));
                wasm_v128_store(dx + at + i, assign ? dh : wasm_f32x4_add(wasm_v128_load(dx + at + i), dh));
                if (db)
                    wasm_v128_store(db + c0 + i, wasm_f32x4_add(wasm_v128_load(db + c0 + i), dh));
            }
            for (; i < len; i++) {
                double cdf = 0.5 * (1 + e[i]), pdf = ex[i] / sqrt(2 * 3.14159265358979323846);
                ag_real dh = (ag_real)(dy[at + i] * (cdf + h[i] * pdf));
                dx[at + i] = assign ? dh : dx[at + i] + dh;
                if (db)
                    db[c0 + i] += dh;
            }
        }
}
#endif
