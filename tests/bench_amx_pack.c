/*
 * bench_amx_pack.c - the AMX bf16 kernel's time beside its tile
 * instructions, on any CPU with AVX512-BF16: src/kernels/gemm_bf16.c is
 * compiled in with its tile instructions made to do nothing (AG_AMX_EMULATE,
 * as tests/test_bf16_amx.c does, with empty tiles), so what is timed is
 * what the kernel does around them: converting and packing op(A) and op(B)
 * into tiles (which runs for real: it is AVX-512 code), the block loop and
 * the threads.  Beside it, the time the tiles themselves would take at the
 * AMX ceiling (bench-gemm measures it where there is AMX: a register-only
 * tdpbf16ps loop, about 4.8 TFLOP/s on 2 threads of a Sapphire Rapids).
 * The sum bounds the kernel's speed from above, whatever the tiles do.
 *
 * Usage: bench_amx_pack [threads] [ceiling GFLOP/s] (defaults 2 and 4800).
 */
#if defined(AG_REFERENCE) || defined(AG_DOUBLE)
#error "bench_amx_pack: the bf16 kernels are in the float build with fast kernels only"
#endif
#define AG_AMX_EMULATE 1
#define ag_fast_gemm_bf16 bench_fast_gemm_bf16
#define ag_fast_gemm_bf16_on bench_fast_gemm_bf16_on
#define ag_fast_f32_to_bf16 bench_fast_f32_to_bf16
#define ag_fast_round_bf16 bench_fast_round_bf16
#define ag_fast_round_bf16_ftz bench_fast_round_bf16_ftz
#define ag_fast_gemm_bf16_scratch bench_fast_gemm_bf16_scratch
#include "kernels/gemm_bf16.c"

#include <stdio.h>
#include <time.h>

/* The tile instructions, empty (inlined away: what is left of the block
 * loop is its own work, as around the real instructions). */
void amx_emul_loadconfig(const void *cfg) { (void)cfg; }
void amx_emul_release(void) {}
void amx_emul_load(int t, const void *base, long stride) { (void)t; (void)base; (void)stride; }
void amx_emul_store(int t, void *base, long stride) { (void)t; (void)base; (void)stride; }
void amx_emul_zero(int t) { (void)t; }
void amx_emul_dpbf16ps(int c, int a, int b) { (void)c; (void)a; (void)b; }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const char *what;
    int ta, tb, M, N, K;
} shape;

enum { PACK_A, PACK_B, WHOLE_CALL };

/* Part `what` of g's product once: one operand's packing on this thread,
 * or the whole call on the threads. */
static void run_part(amx_job *g, int what)
{
    const int na = amx_a_tasks(g);
    if (what == PACK_A)
        for (int t = 0; t < na; t++) amx_pack(g, t);
    else if (what == PACK_B)
        for (int t = na; t < amx_pack_tasks(g); t++) amx_pack(g, t);
    else
        bench_fast_gemm_bf16_on(AG_BF16_AMX, g->ta, g->tb, g->M, g->N, g->K, g->A, g->lda, g->B, g->ldb, 0,
                                g->C, g->ldc);
}

/* The fastest of 20 timings of part `what`, in seconds. */
static double fastest(amx_job *g, int what)
{
    double best = 1e9;
    for (int r = 0; r < 20; r++) {
        const double t0 = now();
        run_part(g, what);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    if (!ag_bf16_available()) {
        printf("bench_amx_pack: skipped: the packing is AVX512-BF16 code, and this CPU has no bf16 kernel\n");
        return 0;
    }
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const double ceiling = argc > 2 ? atof(argv[2]) : 4800;
    if (threads < 1 || !(ceiling > 0)) {
        fprintf(stderr, "usage: bench_amx_pack [threads >= 1] [ceiling GFLOP/s > 0]\n");
        return 2;
    }
    ag_set_threads(threads);
    /* the tiles do nothing here, so the kernel's own measure of a
     * multiply-add would keep every product on one thread: take the
     * real tiles' (about 0.2 ps at the ceiling, 1 fs is far below it, so
     * every product here is shared as the real kernel would share it) */
    atomic_store(&madd_fs[AG_BF16_AMX], 1000);

    const shape shapes[] = {
        {"square", 0, 0, 1024, 1024, 1024},
        {"x W^T", 0, 1, 4096, 1536, 384},
        {"x W^T", 0, 1, 4096, 384, 1536},
        {"dx = dy W", 0, 0, 4096, 384, 1536},
        {"dW = dy^T x", 1, 0, 1536, 384, 4096},
        {"dW = dy^T x", 1, 0, 384, 1536, 4096},
    };
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    long most = 0;
    for (int i = 0; i < ns; i++) {
        const shape *s = &shapes[i];
        long m = (long)s->M * s->K > (long)s->K * s->N ? (long)s->M * s->K : (long)s->K * s->N;
        if ((long)s->M * s->N > m) m = (long)s->M * s->N;
        if (m > most) most = m;
    }
    float *A = malloc(sizeof(float) * most), *B = malloc(sizeof(float) * most), *C = malloc(sizeof(float) * most);
    if (!A || !B || !C) {
        fprintf(stderr, "bench_amx_pack: out of memory\n");
        return 1;
    }
    for (long i = 0; i < most; i++) {
        A[i] = (float)(i % 7) / 7;
        B[i] = (float)(i % 5) / 5;
    }
    printf("the AMX kernel without its tile instructions (packing, block loop, threads), %d thread%s, fastest of 20; "
           "tiles: their time at %.0f GFLOP/s\n", threads, threads == 1 ? "" : "s", ceiling);
    printf("%-12s %2s %5s %5s %5s %10s %10s %10s %10s %10s\n", "shape", "op", "M", "N", "K", "pack A ms", "pack B ms",
           "all ms", "tiles ms", "bound");
    for (int i = 0; i < ns; i++) {
        const shape *s = &shapes[i];
        const long lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
        amx_job g = {s->ta, s->tb, s->M, s->N, s->K, 1, A, B, lda, ldb, s->N, C, ceil_div(s->K, 32),
                     2 * ceil_div(s->M, 32), 2 * ceil_div(s->N, 32), NULL, NULL};
        g.a_t = aligned_alloc(64, sizeof(uint32_t) * (size_t)g.m_tiles * g.kc_tiles * 256);
        g.b_t = aligned_alloc(64, sizeof(uint32_t) * (size_t)g.n_tiles * g.kc_tiles * 256);
        if (!g.a_t || !g.b_t) {
            fprintf(stderr, "bench_amx_pack: out of memory\n");
            return 1;
        }
        const double pa = fastest(&g, PACK_A), pb = fastest(&g, PACK_B), all = fastest(&g, WHOLE_CALL);
        const double flops = 2.0 * s->M * s->N * s->K, tiles = flops / (ceiling * 1e9);
        printf("%-12s %c%c %5d %5d %5d %10.3f %10.3f %10.3f %10.3f %7.0f GF\n", s->what, s->ta ? 'T' : 'N',
               s->tb ? 'T' : 'N', s->M, s->N, s->K, pa * 1e3, pb * 1e3, all * 1e3, tiles * 1e3,
               flops / (all + tiles) * 1e-9);
        free(g.a_t);
        free(g.b_t);
    }
    printf("bound: GFLOP/s if the tiles ran at the ceiling and nothing overlapped them (one thread's packing "
           "columns; all: the call on %d thread%s)\n", threads, threads == 1 ? "" : "s");
    free(A);
    free(B);
    free(C);
    return 0;
}
