/*
 * pcg32.c - the PCG32 generator (permuted congruential, XSH-RR output,
 * 64-bit state, selectable stream) and the few distributions attograd needs.
 * Everything random in attograd (initialization, dropout, data) draws from
 * one of these, so a run is reproducible from its seed.
 */
#include <math.h>

#include "attograd.h"

#define PCG_MULT 6364136223846793005ULL

uint32_t ag_pcg32_next(ag_pcg32 *g)
{
    uint64_t old = g->state;
    g->state = old * PCG_MULT + g->inc;
    /* XSH-RR: xorshift the high bits down, then rotate by the top 5 bits. */
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

/* n steps of state = state * MULT + inc at once: the composition of n such
 * affine maps is again one, state * mult_n + plus_n, built by squaring (the
 * map for 2^b steps from the map for 2^(b-1)) and combined over n's bits. */
void ag_pcg32_advance(ag_pcg32 *g, uint64_t n)
{
    uint64_t mult = 1, plus = 0;                /* the map for the bits of n taken so far */
    uint64_t step_mult = PCG_MULT, step_plus = g->inc;  /* the map for 2^b steps */
    for (; n; n >>= 1) {
        if (n & 1) {
            mult *= step_mult;
            plus = plus * step_mult + step_plus;
        }
        step_plus = (step_mult + 1) * step_plus;
        step_mult *= step_mult;
    }
    g->state = g->state * mult + plus;
}

void ag_pcg32_seed(ag_pcg32 *g, uint64_t seed, uint64_t stream)
{
    g->state = 0;
    g->inc = (stream << 1u) | 1u;
    ag_pcg32_next(g);
    g->state += seed;
    ag_pcg32_next(g);
}

double ag_pcg32_uniform(ag_pcg32 *g)
{
    /* 27 + 26 bits make a 53-bit mantissa: every double in [0,1) on a 2^-53 grid. */
    uint32_t a = ag_pcg32_next(g) >> 5, b = ag_pcg32_next(g) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

double ag_pcg32_normal(ag_pcg32 *g)
{
    /* Box-Muller, cosine branch only: the generator state is all there is,
     * so saving it is enough to resume the sequence exactly. */
    double u1 = 1.0 - ag_pcg32_uniform(g);   /* (0, 1]: log is finite */
    double u2 = ag_pcg32_uniform(g);
    return sqrt(-2.0 * ag_math_log(u1)) * ag_math_cos(6.283185307179586 * u2);   /* the engine's own log, cos: the same
                                                                             * initial weights in every build */
}

uint32_t ag_pcg32_below(ag_pcg32 *g, uint32_t bound)
{
    if (bound == 0)
        return 0;
    /* Reject the low 2^32 mod bound values so every residue is equally likely. */
    uint32_t threshold = (uint32_t)(-bound) % bound;
    for (;;) {
        uint32_t r = ag_pcg32_next(g);
        if (r >= threshold)
            return r % bound;
    }
}
