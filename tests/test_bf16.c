/*
 * test_bf16.c - bf16 rounding and the bf16 matrix multiply.
 *
 *   - ag_bf16_bits / ag_bf16_round on the edge cases (ties to even, the
 *     largest finite values rounding to inf, NaN, inf, subnormals, -0), and
 *     against an independent rounding on many random bit patterns;
 *     ag_fast_f32_to_bf16 bit for bit against it, and the fp32 kernel's
 *     rounding with subnormals to zero (vector and plain).
 *   - the kernel choice (the run-time rule of cpu.h, and AG_BF16_KERNEL).
 *   - each bf16 kernel this CPU has (fp32 everywhere; AVX512-BF16, AMX),
 *     the others reported skipped: every element against a double-precision product of the same
 *     bf16-rounded inputs, within the bound derived below; exactly, on small
 *     integers; odd M, N, K (1, 15, 17, 33, 100, 1000), both transposes,
 *     padded leading dimensions, beta 0, 1 and 0.5, K == 0; NaN and inf
 *     propagation; bitwise the same on 1 and 2 threads; the plain
 *     ref_gemm_bf16 (src/reference.c) against each kernel within twice the
 *     bound.
 *
 * Built by `make test` with the library (src/kernels/ is part of it).
 * AG_BF16_KERNEL does not change what this test runs: every kernel the
 * hardware has; it checks that the choice follows the variable.
 */
#include "bf16_build.h"     /* the reference and double builds: a main() reporting the test skipped */
#if BF16_TESTABLE
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS, MAP_NORESERVE (tests/bf16_check.h) */
#include "bf16_check.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- rounding ----------------------------------------------------------- */

/* Round-to-nearest-even to bf16 by comparing distances, not by the bit
 * trick under test: the two bf16 neighbours of |x| are its truncation and
 * the next bf16 up; the nearer wins, a tie goes to the even one. */
static uint16_t bf16_by_distance(float x)
{
    const uint32_t u = bits_of(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    if (isinf(x)) return (uint16_t)(u >> 16);
    const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    const uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;   /* hi may be the inf pattern */
    /* Distances in double: bf16 neighbours and x are exact there; the
     * upper neighbour of the largest bf16 is 2^128 for this purpose. */
    const double dx = fabs((double)x), dlo = (double)float_of(lo);
    const double dhi = hi == 0x7f800000u ? ldexp(1.0, 128) : (double)float_of(hi);
    uint32_t r;
    if (dx - dlo < dhi - dx) r = lo;
    else if (dx - dlo > dhi - dx) r = hi;
    else r = (lo & 0x10000u) ? hi : lo;
    return (uint16_t)((sign | r) >> 16);
}

static void test_round_edges(void)
{
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {0x3f800000u, 0x3f80, "1"},
        {0x3f808000u, 0x3f80, "1 + 2^-8: tie, to the even 1"},
        {0x3f818000u, 0x3f82, "1 + 3*2^-8: tie, to the even 1 + 2^-6"},
        {0x3f808001u, 0x3f81, "just above a tie rounds up"},
        {0x3f817fffu, 0x3f81, "just below a tie rounds down"},
        {0xbf818000u, 0xbf82, "negative tie, away from the odd neighbour"},
        {0x7f7fffffu, 0x7f80, "largest float rounds to inf"},
        {0x7f7f8000u, 0x7f80, "midpoint above the largest bf16: tie to even is inf"},
        {0x7f7f7fffu, 0x7f7f, "just below that midpoint: largest bf16"},
        {0xff7fffffu, 0xff80, "-largest float rounds to -inf"},
        {0x7f800000u, 0x7f80, "inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0x7f800001u, 0x7fc0, "signalling NaN, payload in the low bits only: still NaN, quiet"},
        {0xffffffffu, 0xffff, "negative NaN keeps sign and payload"},
        {0x7fa00000u, 0x7fe0, "signalling NaN with a high payload: made quiet"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "smallest subnormal rounds to 0"},
        {0x80000001u, 0x8000, "-smallest subnormal rounds to -0"},
        {0x00008000u, 0x0000, "subnormal tie to even 0"},
        {0x00018000u, 0x0002, "subnormal tie to even 2"},
        {0x00008001u, 0x0001, "subnormal above a tie: smallest bf16 subnormal"},
        {0x007fffffu, 0x0080, "largest subnormal rounds up to the smallest normal"},
        {0x00400000u, 0x0040, "subnormal bf16 kept"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const float x = float_of(cases[i].in);
        const uint16_t got = ag_bf16_bits(x);
        CHECK(got == cases[i].out, "ag_bf16_bits(0x%08x) = 0x%04x, want 0x%04x (%s)", cases[i].in, got,
              cases[i].out, cases[i].what);
        const float r = ag_bf16_round(x);
        CHECK(bits_of(r) == (uint32_t)cases[i].out << 16, "ag_bf16_round(0x%08x) = 0x%08x (%s)",
              cases[i].in, bits_of(r), cases[i].what);
        CHECK(bf16_by_distance(x) == cases[i].out, "the test's own rounding of 0x%08x (%s)", cases[i].in,
              cases[i].what);
    }
    CHECK(isnan(ag_bf16_round(NAN)) && isinf(ag_bf16_round(-INFINITY)) && ag_bf16_round(-INFINITY) < 0,
          "NaN stays NaN, -inf stays -inf");
}

/* Random bit patterns (every class: NaN, inf, normal, subnormal), and every
 * low half for a few high halves, against the distance rounding. */
static void test_round_random(void)
{
    int bad = 0;
    uint32_t first = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = rand32();
        if (i % 4 == 1) u &= 0x807fffffu;   /* subnormals */
        if (i % 4 == 2) u |= 0x7f000000u;   /* near the top: inf and NaN */
        if (ag_bf16_bits(float_of(u)) != bf16_by_distance(float_of(u)) && bad++ == 0) first = u;
    }
    static const uint32_t highs[] = {0x3f80u, 0x3f81u, 0x7f7fu, 0x0000u, 0x0001u, 0x807fu, 0x7f80u, 0xff80u};
    for (size_t h = 0; h < sizeof highs / sizeof highs[0]; h++)
        for (uint32_t lo = 0; lo < 0x10000u; lo++) {
            const uint32_t u = highs[h] << 16 | lo;
            if (ag_bf16_bits(float_of(u)) != bf16_by_distance(float_of(u)) && bad++ == 0) first = u;
        }
    CHECK(bad == 0, "ag_bf16_bits disagrees with nearest-even on %d patterns, first 0x%08x", bad, first);
}

/* ag_fast_f32_to_bf16 against the plain rounding, bit for bit, every length
 * around the 32-element blocks, subnormals included. */
static void test_convert(void)
{
    enum { N = 300 };
    float src[N];
    uint16_t fast[N + 1], ref[N + 1];
    int bad = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < N; i++) {
            uint32_t u = rand32();
            if (rep % 3 == 0 && i % 7 == 0) u &= 0x807fffffu;   /* some subnormals */
            if (rep % 3 == 1) u = bits_of((float)uniform());
            src[i] = float_of(u);
        }
        const int n = rep % 3 == 2 ? N : 1 + rep % 70;
        fast[n] = ref[n] = 0xabcd;
        ag_fast_f32_to_bf16(fast, src, n);
        for (int i = 0; i < n; i++)
            ref[i] = ag_bf16_bits(src[i]);
        bad += memcmp(fast, ref, sizeof(uint16_t) * (n + 1)) != 0;
    }
    CHECK(bad == 0, "ag_fast_f32_to_bf16 differs from the plain rounding in %d of 200 runs", bad);
}

/* ag_fast_round_bf16_ftz, vector and plain, bit for bit against
 * ag_bf16_round of the input with a subnormal made a zero of its sign, on
 * every class of bit pattern and lengths around the 16-float vectors. */
static void test_round_ftz(void)
{
    enum { N = 300 };
    float src[N], got[2][N + 1];
    int bad[2] = {0, 0};
    for (int rep = 0; rep < 300; rep++) {
        for (int i = 0; i < N; i++) {
            uint32_t u = rand32();
            if (i % 5 == 1) u &= 0x807fffffu;   /* subnormals */
            if (i % 5 == 2) u |= 0x7f000000u;   /* near the top: inf and NaN */
            if (rep % 3 == 1) u = bits_of((float)uniform());
            src[i] = float_of(u);
        }
        const int n = rep % 3 == 2 ? N : 1 + rep % 70;
        for (int plain = 0; plain < 2; plain++) {
            got[plain][n] = 1234.5f;
            ag_fast_round_bf16_ftz(src, got[plain], (size_t)n, plain);
            for (int i = 0; i < n; i++) {
                const uint32_t u = bits_of(src[i]);
                const float x = (u & 0x7f800000u) == 0 ? float_of(u & 0x80000000u) : src[i];
                bad[plain] += bits_of(got[plain][i]) != bits_of(ag_bf16_round(x));
            }
            bad[plain] += got[plain][n] != 1234.5f;   /* nothing written past n */
        }
    }
    CHECK(bad[0] == 0 && bad[1] == 0, "ag_fast_round_bf16_ftz: %d wrong (vector), %d wrong (plain)", bad[0], bad[1]);
}

/* ---- the kernel choice ---------------------------------------------------- */

/* The kernel picked is one this CPU has, and the one cpu.h's rule gives:
 * unset, AMX where there is AMX, else AVX512-BF16 only when vdpbf16ps was
 * measured to do more multiply-adds than the FMA, else fp32; a value of
 * AG_BF16_KERNEL, that kernel or the best below it the CPU has.  (The
 * choice is made once per process: tests/cli_bf16.sh runs the program
 * under each value.) */
static void test_choice(int hw, double ratio)
{
    const int got = ag_cpu_bf16();
    CHECK(got <= hw, "the kernel picked (%s) is one the CPU has (up to %s)", ag_bf16_kernel_name(got),
          ag_bf16_kernel_name(hw));
    CHECK(hw >= AG_BF16_AVX512 ? ratio > 0.05 && ratio < 20 : ratio == 0,
          "vdpbf16ps against the FMA measured where the CPU has it, plausibly: %.3f", ratio);
    const char *env = getenv("AG_BF16_KERNEL");
    int want;
    if (!env) want = hw == AG_BF16_AMX ? AG_BF16_AMX : hw == AG_BF16_AVX512 && ratio > 1 ? AG_BF16_AVX512 : AG_BF16_FP32;
    else if (strcmp(env, "none") == 0) want = AG_BF16_NONE;
    else if (strcmp(env, "fp32") == 0) want = AG_BF16_FP32;
    else if (strcmp(env, "avx512") == 0) want = hw < AG_BF16_AVX512 ? hw : AG_BF16_AVX512;
    else if (strcmp(env, "amx") == 0) want = hw;
    else want = AG_BF16_NONE;   /* a value naming no kernel */
    CHECK(got == want, "AG_BF16_KERNEL %s on a CPU with up to %s (vdpbf16ps/FMA %.2f): %s runs, want %s",
          env ? env : "unset", ag_bf16_kernel_name(hw), ratio, ag_bf16_kernel_name(got), ag_bf16_kernel_name(want));
}

/* The fp32 kernel rounds as the bf16 packing does: a subnormal input
 * counts as zero (so inf times a subnormal is NaN, as with vdpbf16ps), a
 * value just under a rounding tie rounds down (a kernel fed the unrounded
 * value would not give these exact results). */
static void test_fp32_flushes(void)
{
    const float a[2] = {INFINITY, 1 + 0x1p-8f - 0x1p-20f}, b[2] = {0x1p-130f, 1 + 0x1p-8f};
    float c[1] = {5};
    ag_fast_gemm_bf16_on(AG_BF16_FP32, 0, 0, 1, 1, 1, a, 1, b, 1, 0, c, 1);
    CHECK(isnan(c[0]), "fp32 kernel: inf times a subnormal is NaN (the subnormal flushed): %g", (double)c[0]);
    ag_fast_gemm_bf16_on(AG_BF16_FP32, 0, 0, 1, 1, 1, a + 1, 1, b + 1, 1, 0, c, 1);
    CHECK(c[0] == 1.0f, "fp32 kernel: (1 + 2^-8 - 2^-20) (1 + 2^-8) on bf16 inputs is 1 x 1: %.9g", (double)c[0]);
}

int main(void)
{
    test_round_edges();
    test_round_random();
    test_convert();
    test_round_ftz();

    const int hw = ag_cpu_bf16_hw();
    const double ratio = ag_cpu_bf16_dot_over_fma();
    printf("bf16 kernels here: up to %s; vdpbf16ps/FMA multiply-adds %.2f; %s runs (AG_BF16_KERNEL %s)\n",
           ag_bf16_kernel_name(hw), ratio, ag_bf16_kernel_name(ag_cpu_bf16()),
           getenv("AG_BF16_KERNEL") ? getenv("AG_BF16_KERNEL") : "unset");
    test_choice(hw, ratio);
    const char *fact = NULL;
    const int status = ag_fast_bf16_status(&fact);
    CHECK((status == AG_BF16_READY) == ag_bf16_available() && fact && *fact && !strchr(fact, '\n'),
          "the status matches the kernel choice and states one fact: %s", fact ? fact : "(null)");
    if (status == AG_BF16_READY)
        CHECK(strcmp(fact, ag_bf16_kernel_name(ag_cpu_bf16())) == 0, "ready: the fact names the kernel (%s)", fact);
    CHECK(hw >= AG_BF16_FP32, "every CPU has the fp32 kernel (up to %s)", ag_bf16_kernel_name(hw));
    test_kernel(AG_BF16_FP32);
    test_fp32_flushes();
    if (hw >= AG_BF16_AVX512) test_kernel(AG_BF16_AVX512);
    else CHECK_SKIP("AVX512-BF16 kernel: this CPU (or OS) does not have AVX512-BF16");
    if (hw >= AG_BF16_AMX) test_kernel(AG_BF16_AMX);
    else CHECK_SKIP("AMX kernel: no AMX-BF16 here, or no tile permission from the OS");

    /* Reference alone, always: against the bound, exact on integers. */
    problem p = make_problem(1, 0, 33, 17, 100, 2, 1, 1);
    float *C = run(&p, -1);
    verify("reference exact", &p, C, 1);
    free(C);
    free_problem(&p);
    p = make_problem(0, 1, 15, 33, 1000, 0, 0, 0);
    C = run(&p, -1);
    verify("reference", &p, C, 0);
    free(C);
    free_problem(&p);
    return check_done();
}

#endif
