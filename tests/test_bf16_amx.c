/*
 * test_bf16_amx.c - the AMX bf16 kernel with its tile instructions done in
 * C, so that everything around them (packing into tiles, the 2 x 2 block
 * loop, K blocks, ragged edges through the edge buffer, threads, the tile
 * configuration it loads) is tested on a CPU without AMX.
 *
 * src/kernels/gemm_bf16.c is compiled into this program with AG_AMX_EMULATE
 * (its public functions renamed so they do not clash with the library's),
 * which maps ldtilecfg, tileloadd, tilestored, tilezero, tdpbf16ps and
 * tilerelease to the functions below.  They follow Intel's description of
 * the instructions: palette 1, 8 tiles of at most 16 rows x 64 bytes, each
 * with its configured rows and bytes per row; a load fills the configured
 * part of the tile and zeroes the rest; tdpbf16ps C[m][n] += sum over k of
 * A[m].pair[k] . B[k].pair[n], in fp32 with subnormal inputs read as zero
 * and subnormal results flushed to zero.  Misuse (a tile instruction before
 * the configuration, shapes that do not fit, a bad configuration) fails
 * the test.  What this cannot show is that the real instructions behave as
 * described: the kernel is still untested on AMX hardware.
 *
 * Packing uses AVX512-BF16, so this runs where that kernel does; elsewhere
 * it reports itself skipped.
 */
#include "bf16_build.h"     /* the reference and double builds: a main() reporting the test skipped */
#if BF16_TESTABLE
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS, MAP_NORESERVE (tests/bf16_check.h) */
#define AG_AMX_EMULATE 1
#define ag_fast_gemm_bf16 emul_fast_gemm_bf16
#define ag_fast_gemm_bf16_on emul_fast_gemm_bf16_on
#define ag_fast_f32_to_bf16 emul_fast_f32_to_bf16
#define ag_fast_round_bf16 emul_fast_round_bf16
#define ag_fast_round_bf16_ftz emul_fast_round_bf16_ftz
#define ag_fast_gemm_bf16_scratch emul_fast_gemm_bf16_scratch
#include "kernels/gemm_bf16.c"

#include "bf16_check.h"

/* ---- the emulated tiles (one set per thread, as the hardware's) --------- */

static _Thread_local struct {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    uint8_t data[8][16][64];
} tiles;

static _Atomic int misuse;   /* count of wrong uses; checked once at the end */

static void bad(const char *what)
{
    misuse++;
    printf("AMX misuse: %s\n", what);
}

void amx_emul_loadconfig(const void *cfg)
{
    const uint8_t *b = cfg;
    uint16_t colsb[16];
    memcpy(colsb, b + 16, sizeof colsb);
    int ok = b[0] == 1 && b[1] == 0;
    for (int i = 2; i < 16; i++) ok &= b[i] == 0;
    for (int t = 0; t < 16; t++) {
        const int rows = b[48 + t];
        if (t >= 8) ok &= rows == 0 && colsb[t] == 0;   /* palette 1 has 8 tiles */
        else ok &= rows <= 16 && colsb[t] <= 64 && colsb[t] % 4 == 0 && (rows == 0) == (colsb[t] == 0);
    }
    if (!ok) {
        bad("invalid tile configuration");
        return;
    }
    for (int t = 0; t < 8; t++) {
        tiles.rows[t] = b[48 + t];
        tiles.colsb[t] = colsb[t];
    }
    memset(tiles.data, 0, sizeof tiles.data);
    tiles.configured = 1;
}

void amx_emul_release(void)
{
    if (!tiles.configured) bad("tilerelease without a configuration");
    tiles.configured = 0;
}

static int usable(int t)
{
    if (!tiles.configured || t < 0 || t > 7 || tiles.rows[t] == 0) {
        bad("tile used before ldtilecfg, or not configured");
        return 0;
    }
    return 1;
}

void amx_emul_load(int t, const void *base, long stride)
{
    if (!usable(t)) return;
    memset(tiles.data[t], 0, sizeof tiles.data[t]);
    for (int r = 0; r < tiles.rows[t]; r++)
        memcpy(tiles.data[t][r], (const uint8_t *)base + r * stride, tiles.colsb[t]);
}

void amx_emul_store(int t, void *base, long stride)
{
    if (!usable(t)) return;
    for (int r = 0; r < tiles.rows[t]; r++) memcpy((uint8_t *)base + r * stride, tiles.data[t][r], tiles.colsb[t]);
}

void amx_emul_zero(int t)
{
    if (usable(t)) memset(tiles.data[t], 0, sizeof tiles.data[t]);
}

/* A tile's bf16 words as floats, subnormals read as zero. */
static void tile_floats(int t, float x[16][32])
{
    for (int r = 0; r < 16; r++)
        for (int e = 0; e < 32; e++) {
            uint16_t h;
            memcpy(&h, &tiles.data[t][r][2 * e], sizeof h);
            const float v = ag_bf16_to_float(h);
            x[r][e] = fabsf(v) < 0x1p-126f ? 0.0f : v;
        }
}

void amx_emul_dpbf16ps(int c, int a, int b)
{
    if (!usable(c) || !usable(a) || !usable(b)) return;
    const int M = tiles.rows[c], N = tiles.colsb[c] / 4, K = tiles.colsb[a] / 4;
    if (tiles.rows[a] != M || tiles.rows[b] != K || tiles.colsb[b] != tiles.colsb[c] || c == a || c == b ||
        a == b) {
        bad("tdpbf16ps on tiles of mismatched shapes");
        return;
    }
    float x[16][32], y[16][32], acc[16][16];
    tile_floats(a, x);
    tile_floats(b, y);
    memcpy(acc, tiles.data[c], sizeof acc);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = acc[m][n];
            for (int k = 0; k < K; k++) {
                /* a bf16 product is exact in fp32; results below the
                 * normal range are flushed to zero */
                s += x[m][2 * k] * y[k][2 * n];
                if (fabsf(s) < 0x1p-126f) s = copysignf(0.0f, s);
                s += x[m][2 * k + 1] * y[k][2 * n + 1];
                if (fabsf(s) < 0x1p-126f) s = copysignf(0.0f, s);
            }
            acc[m][n] = s;
        }
    memcpy(tiles.data[c], acc, sizeof acc);
}

int main(void)
{
    if (ag_cpu_bf16_hw() < AG_BF16_AVX512) {
        CHECK_SKIP("emulated AMX kernel: its packing needs AVX512-BF16, which this CPU lacks");
        return check_done();
    }
    bf16_light = 1;
    test_kernel(AG_BF16_AMX);
    CHECK(misuse == 0, "%d wrong uses of the tile instructions", misuse);
    return check_done();
}

#endif
