/*
 * wasm_gelu.c - the browser build's GELU and its gradient (make web): the
 * engine's erf and exp two lanes at a time (src/mathfn.c's array forms),
 * every other operation the reference's own expression (src/reference.c),
 * so the bits are the reference's.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <math.h>

#include "wasm.h"

/* Elements per pass: the doubles below stay on the stack. */
enum { CHUNK = 256 };

/* One chunk's h = x + b (b: NULL for none) and erf's argument h / sqrt 2,
 * each as the reference computes it. */
static void chunk_inputs(const ag_real *x, const ag_real *b, size_t len, ag_real *h, double *u)
{
    for (size_t i = 0; i < len; i++) {
        h[i] = b ? x[i] + b[i] : x[i];
        u[i] = h[i] / sqrt(2.0);
    }
}

/* as ref_gelu:  h = x + b,  y = h Phi(h) = h/2 (1 + erf(h / sqrt 2));
 * the chunks run along each row, so a chunk's bias is b[c0..] */
void ag_wasm_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y)
{
    double u[CHUNK], e[CHUNK];
    ag_real h[CHUNK];
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t len = cols - c0 < CHUNK ? cols - c0 : CHUNK, at = r * cols + c0;
            chunk_inputs(x + at, b ? b + c0 : NULL, len, h, u);
            ag_math_erf_n(u, e, len);
            for (size_t i = 0; i < len; i++)
                y[at + i] = (ag_real)(0.5 * h[i] * (1 + e[i]));
        }
}

/* as ref_gelu_backward:  dh = dy (Phi(h) + h phi(h)),  phi(h) = exp(-h^2/2) / sqrt(2 pi),
 * dx (+)= dh,  db_c += dh row after row (the reference's order) */
void ag_wasm_gelu_backward(const ag_real *x, const ag_real *b, const ag_real *dy, size_t rows, size_t cols,
                           ag_real *dx, int assign, ag_real *db)
{
    double u[CHUNK], e[CHUNK], w[CHUNK], ex[CHUNK];
    ag_real h[CHUNK];
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t len = cols - c0 < CHUNK ? cols - c0 : CHUNK, at = r * cols + c0;
            chunk_inputs(x + at, b ? b + c0 : NULL, len, h, u);
            for (size_t i = 0; i < len; i++)
                w[i] = -0.5 * h[i] * h[i];
            ag_math_erf_n(u, e, len);
            ag_math_exp_n(w, ex, len);
            for (size_t i = 0; i < len; i++) {
                double cdf = 0.5 * (1 + e[i]), pdf = ex[i] / sqrt(2 * 3.14159265358979323846);
                ag_real dh = (ag_real)(dy[at + i] * (cdf + h[i] * pdf));
                dx[at + i] = assign ? dh : dx[at + i] + dh;
                if (db)
                    db[c0 + i] += dh;
            }
        }
}
#endif
