/*
 * bench_ceiling.h - the most GFLOP/s the multiply instructions of the
 * matrix-multiply kernels can give on this machine at this moment, for
 * bench_gemm.c, which prints each product's figure as a fraction of it.
 *
 * Every thread runs a loop of the instruction alone, on registers (no load
 * or store inside it), with more independent accumulators than the
 * instruction's latency times its throughput needs, all threads at once:
 * no kernel built from the instruction can go faster.  The loops:
 *
 *   fp32  vfmadd231ps zmm, 16 accumulators: 16 lanes x 2 flops
 *   bf16  vdpbf16ps zmm, 16 accumulators: 16 lanes x 2 pairs x 2 flops
 *         (the AVX512-BF16 kernel), or tdpbf16ps on 4 accumulator tiles,
 *         A and B in 4 more: 16 x 16 x 32 multiply-adds (the AMX kernel)
 *
 * A loop that the build or the CPU cannot run gives 0: not measured.
 */
#ifndef ATTOGRAD_BENCH_CEILING_H
#define ATTOGRAD_BENCH_CEILING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu.h"   /* AG_BF16_AVX512, AG_BF16_AMX */

#if defined(__x86_64__) && defined(__AVX512F__) && !defined(AG_DOUBLE)
#include <immintrin.h>
#define CEILING_X86 1
#else
#define CEILING_X86 0
#endif

/* One thread's loop: n rounds; returns a value of its accumulators, so
 * the compiler keeps the work. */
typedef float (*ceiling_loop)(long n);

#if CEILING_X86
/* 16 accumulators, written out so that they stay in registers */
#define CEIL_ACC16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

static float fp32_rounds(long n)
{
    const __m512 a = _mm512_set1_ps(1e-3f), b = _mm512_set1_ps(1e-3f);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_fmadd_ps(a, b, c##i);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CEIL_ACC16(DECL)
    for (long r = 0; r < n; r++) {
        CEIL_ACC16(STEP)
        __asm__ volatile("" : "+v"(c0), "+v"(c8));  /* the loop is not folded into fewer steps */
    }
    __m512 s = _mm512_setzero_ps();
    CEIL_ACC16(SUM)
    return _mm512_reduce_add_ps(s);
}
#undef DECL
#undef STEP

__attribute__((target("avx512f,avx512bf16"))) static float bf16_dot_rounds(long n)
{
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, a);
    CEIL_ACC16(DECL)
    for (long r = 0; r < n; r++) {
        CEIL_ACC16(STEP)
        __asm__ volatile("" : "+v"(c0), "+v"(c8));
    }
    __m512 s = _mm512_setzero_ps();
    CEIL_ACC16(SUM)
    return _mm512_reduce_add_ps(s);
}
#undef DECL
#undef STEP
#undef SUM

/* The tile configuration of the engine's AMX kernel (src/kernels/gemm_bf16.c):
 * palette 1, eight tiles of 16 rows x 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved0[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) ceiling_tilecfg;

static const ceiling_tilecfg ceiling_cfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* tmm0-3 accumulate (a 2 x 2 block of C tiles, as the kernel holds them),
 * tmm4-5 hold A, tmm6-7 B: four tdpbf16ps a round, each independent of
 * the three before it. */
__attribute__((target("amx-tile,amx-bf16"))) static float amx_rounds(long n)
{
    static _Thread_local uint16_t ab[16 * 32] __attribute__((aligned(64)));
    static _Thread_local float c[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) ab[i] = 0x3c00;   /* bf16 0.0078125 */
    _tile_loadconfig(&ceiling_cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    __asm__ volatile("" ::: "memory");  /* ab is written before the tile loads read it */
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    for (long r = 0; r < n; r++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    _tile_release();
    __asm__ volatile("" ::: "memory");
    return c[0];
}

typedef struct {
    ceiling_loop loop;
    long rounds;
    atomic_int *go;     /* 0 until every thread is started; then 1, or -1: stop */
    float sink;
} ceiling_arg;

static void *ceiling_thread(void *p)
{
    ceiling_arg *a = p;
    int go;
    while ((go = atomic_load(a->go)) == 0)
        ;
    if (go > 0)
        a->sink = a->loop(a->rounds);
    return NULL;
}

static double ceiling_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds for `threads` threads to run `rounds` rounds each, at once (this
 * thread is one of them); -1 when a thread could not be started. */
static double ceiling_run(ceiling_loop loop, long rounds, int threads)
{
    enum { MOST = 256 };
    if (threads > MOST) threads = MOST;
    pthread_t th[MOST];
    ceiling_arg arg[MOST];
    atomic_int go = 0;
    int started = 1;
    for (int t = 0; t < threads; t++) arg[t] = (ceiling_arg){ loop, rounds, &go, 0 };
    while (started < threads && pthread_create(&th[started], NULL, ceiling_thread, &arg[started]) == 0)
        started++;
    atomic_store(&go, started == threads ? 1 : -1);
    const double t0 = ceiling_now();
    if (started == threads)
        arg[0].sink = loop(rounds);
    for (int t = 1; t < started; t++) pthread_join(th[t], NULL);
    const double t1 = ceiling_now();
    return started == threads ? t1 - t0 : -1;
}

/* GFLOP/s of `loop` (flops a round) on `threads` threads: the rounds grown
 * until a run takes 20 ms, then the fastest of 5 runs. */
static double ceiling_rate(ceiling_loop loop, double flops_per_round, int threads)
{
    long rounds = 1000;
    double t = 0;
    while ((t = ceiling_run(loop, rounds, threads)) >= 0 && t < 0.02 && rounds < (1L << 40)) rounds *= 2;
    if (t < 0)
        return 0;
    double best = t;
    for (int i = 0; i < 5; i++) {
        t = ceiling_run(loop, rounds, threads);
        if (t > 0 && t < best) best = t;
    }
    return flops_per_round * (double)rounds * threads / best * 1e-9;
}

#endif /* CEILING_X86 */

/* The fp32 ceiling (0 where the build has no AVX-512 or is double) */
static double ceiling_fp32(int threads)
{
#if CEILING_X86
    return ceiling_rate(fp32_rounds, 16.0 * 16 * 2, threads);
#else
    (void)threads;
    return 0;
#endif
}

/* The ceiling of the bf16 kernel `kernel` runs (AG_BF16_AVX512 or
 * AG_BF16_AMX, kernels/cpu.h): 0 for none */
static double ceiling_bf16(int kernel, int threads)
{
#if CEILING_X86
    if (kernel == AG_BF16_AVX512)
        return ceiling_rate(bf16_dot_rounds, 16.0 * 16 * 4, threads);
    if (kernel == AG_BF16_AMX)
        return ceiling_rate(amx_rounds, 4.0 * 16 * 16 * 32 * 2, threads);
#endif
    (void)kernel;
    (void)threads;
    return 0;
}

/* What the loop of each is, for the printed line */
static const char *ceiling_bf16_loop(int kernel)
{
    return kernel == AG_BF16_AMX ? "tdpbf16ps, 4 accumulator tiles" : "vdpbf16ps zmm, 16 accumulators";
}

#endif
