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

/* as ref_gelu:  y = x Phi(x) = x/2 (1 + erf(x / sqrt 2)) */
void ag_wasm_gelu(const ag_real *x, ag_real *y, size_t n)
{
    double u[CHUNK], e[CHUNK];
    for (size_t b = 0; b < n; b += CHUNK) {
        size_t len = n - b < CHUNK ? n - b : CHUNK;
        const ag_real *xb = x + b;
        for (size_t i = 0; i < len; i++)
            u[i] = xb[i] / sqrt(2.0);
        ag_math_erf_n(u, e, len);
        for (size_t i = 0; i < len; i++)
            y[b + i] = (ag_real)(0.5 * xb[i] * (1 + e[i]));
    }
}

/* as ref_gelu_backward:  dx (+)= dy (Phi(x) + x phi(x)),  phi(x) = exp(-x^2/2) / sqrt(2 pi) */
void ag_wasm_gelu_backward(const ag_real *x, const ag_real *dy, ag_real *dx, size_t n, int assign)
{
    double u[CHUNK], e[CHUNK], w[CHUNK], ex[CHUNK];
    for (size_t b = 0; b < n; b += CHUNK) {
        size_t len = n - b < CHUNK ? n - b : CHUNK;
        const ag_real *xb = x + b;
        for (size_t i = 0; i < len; i++) {
            u[i] = xb[i] / sqrt(2.0);
            w[i] = -0.5 * xb[i] * xb[i];
        }
        ag_math_erf_n(u, e, len);
        ag_math_exp_n(w, ex, len);
        for (size_t i = 0; i < len; i++) {
            double cdf = 0.5 * (1 + e[i]), pdf = ex[i] / sqrt(2 * 3.14159265358979323846);
            ag_real g = (ag_real)(dy[b + i] * (cdf + xb[i] * pdf));
            dx[b + i] = assign ? g : dx[b + i] + g;
        }
    }
}
#endif
