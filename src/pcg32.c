/*
 * pcg32.c - the PCG32 generator (permuted congruential, XSH-RR output,
 * 64-bit state, selectable stream) and the few distributions attograd needs.
 * Everything random in attograd (initialization, dropout, data) draws from
 * one of these, so a run is reproducible from its seed.
 */
#include <math.h>

#include "attograd.h"

/* A NULL generator is misuse, named like a NULL tensor (internal.h's
 * ag_need; this file does without the rest of internal.h, so the text
 * reader's fuzzer links it alone). */
#define NEED_G(fn)                          \
    do {                                    \
        if (!g)                             \
            ag_error("%s: g is NULL", fn);  \
    } while (0)

#define PCG_MULT 6364136223846793005ULL

/* XSH-RR, the draw a state gives: xorshift the high bits down, then
 * rotate by the top 5 bits. */
static inline uint32_t output(uint64_t state)
{
    uint32_t xorshifted = (uint32_t)(((state >> 18u) ^ state) >> 27u);
    uint32_t rot = (uint32_t)(state >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

static inline uint32_t next(ag_pcg32 *g)
{
    uint64_t old = g->state;
    g->state = old * PCG_MULT + g->inc;
    return output(old);
}

uint32_t ag_pcg32_next(ag_pcg32 *g)
{
    NEED_G("ag_pcg32_next");
    return next(g);
}

/* The draws of n calls of ag_pcg32_next, for dropout's masks.  One call
 * after another is a chain: each state waits for the last multiply.  So
 * FILL_LANES states run side by side, lane l at draw l, and each steps by
 * FILL_LANES draws at once, with the affine map of that many steps (see
 * ag_pcg32_advance): the same states in another order, so the same draws,
 * in lanes a compiler puts in vector registers (the lane loop is kept
 * rolled for it: unrolled, gcc does not vectorize it).  The few left over
 * are drawn one by one.  Sixteen lanes are two AVX-512 vectors of 64-bit
 * states (four with AVX2), chains side by side to hide the multiply's
 * latency; the states before them are a serial chain of as many steps.  Zen 5, a million draws: 8 lanes 0.22 ns
 * a draw, 16 0.11, 32 0.09 (with twice the chain before), next 1.1. */
#define FILL_LANES 16

void ag_pcg32_fill(ag_pcg32 *g, uint32_t *out, size_t n)
{
    NEED_G("ag_pcg32_fill");
    if (!out && n)
        ag_error("ag_pcg32_fill: out is NULL");
    size_t i = 0;
    if (n >= 2 * FILL_LANES) {
        uint64_t s[FILL_LANES], mult = PCG_MULT, plus = g->inc;   /* mult, plus: FILL_LANES steps */
        s[0] = g->state;
        for (int l = 1; l < FILL_LANES; l++) {
            s[l] = s[l - 1] * PCG_MULT + g->inc;
            plus = plus * PCG_MULT + g->inc;
            mult *= PCG_MULT;
        }
        for (; i + FILL_LANES <= n; i += FILL_LANES) {
            uint32_t *restrict o = out + i;
#pragma GCC unroll 1
            for (int l = 0; l < FILL_LANES; l++) {
                o[l] = output(s[l]);
                s[l] = s[l] * mult + plus;
            }
        }
        g->state = s[0];            /* lane 0 is at draw i */
    }
    for (; i < n; i++)
        out[i] = next(g);
}

/* n steps of state = state * MULT + inc at once: the composition of n such
 * affine maps is again one, state * mult_n + plus_n, built by squaring (the
 * map for 2^b steps from the map for 2^(b-1): applying s -> s m + p twice
 * gives (s m + p) m + p = s m^2 + (m + 1) p) and combined over n's bits. */
void ag_pcg32_advance(ag_pcg32 *g, uint64_t n)
{
    NEED_G("ag_pcg32_advance");
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
    NEED_G("ag_pcg32_seed");
    g->state = 0;
    g->inc = (stream << 1u) | 1u;
    next(g);
    g->state += seed;
    next(g);
}

double ag_pcg32_uniform(ag_pcg32 *g)
{
    /* 27 + 26 bits make a 53-bit mantissa: every double in [0,1) on a 2^-53 grid. */
    NEED_G("ag_pcg32_uniform");
    uint32_t a = next(g) >> 5, b = next(g) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

double ag_pcg32_normal(ag_pcg32 *g)
{
    /* Box-Muller, cosine branch only: the generator state is all there is,
     * so saving it is enough to resume the sequence exactly. */
    NEED_G("ag_pcg32_normal");
    double u1 = 1.0 - ag_pcg32_uniform(g);   /* (0, 1]: log is finite */
    double u2 = ag_pcg32_uniform(g);
    return sqrt(-2.0 * ag_math_log(u1)) * ag_math_cos(6.283185307179586 * u2);   /* the engine's own log, cos: the same
                                                                             * initial weights in every build */
}

uint32_t ag_pcg32_below(ag_pcg32 *g, uint32_t bound)
{
    NEED_G("ag_pcg32_below");
    if (bound == 0)
        return 0;
    /* Reject the low 2^32 mod bound values so every residue is equally likely. */
    uint32_t threshold = (uint32_t)(-bound) % bound;
    for (;;) {
        uint32_t r = next(g);
        if (r >= threshold)
            return r % bound;
    }
}
