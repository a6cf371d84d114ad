/*
 * gemm_bf16.h - matrix multiply with bf16 inputs and fp32 accumulation, and
 * the fp32 -> bf16 rounding it is defined by.
 *
 * bf16 is the top half of an IEEE fp32: sign, the same 8-bit exponent, 7
 * fraction bits.  bf16(x) rounds fp32 x to it to nearest, ties to even; a
 * NaN stays a NaN (made quiet: sign and top payload bits kept, the quiet
 * bit set), +-inf stays +-inf, and a finite x at or past the midpoint
 * between the largest bf16 (0x1.fep127) and 2^128 becomes +-inf.
 *
 * The fast kernels live in gemm_bf16.c (AMX, AVX512-BF16, or the fp32
 * kernel on bf16-rounded operands, chosen at run time, see cpu.h); the plain definitions (ref_gemm_bf16 and the rounding)
 * in src/reference.c.
 */
#ifndef ATTOGRAD_KERNELS_GEMM_BF16_H
#define ATTOGRAD_KERNELS_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* ---- fast kernels (gemm_bf16.c) ---------------------------------------- */

/* The same product with the same conventions, on the kernel ag_cpu_bf16()
 * picks, threads as ag_max_threads() allows; beta other than 0 or 1 scales
 * C first.  Differences from ref_gemm_bf16: each C element is accumulated
 * in an order fixed by K alone (so the result is bitwise the same for any
 * thread count, but not the same bits as the reference, nor the same from
 * one kernel to another); an input that is subnormal counts as zero (so
 * inf times a subnormal gives NaN, not inf), and with the AMX and
 * AVX512-BF16 kernels a partial sum that would be subnormal becomes zero
 * (their instructions flush both; the fp32 kernel rounds its inputs as
 * they do and keeps subnormal sums).  The error bound in tests/test_bf16.c
 * covers all of it.  With AG_BF16_KERNEL=none (ag_bf16_available() == 0)
 * the caller should not use bf16 at all; if it does, this falls back to
 * ref_gemm_bf16, which is correct and slow. */
void ag_fast_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);

/* The same on a given kernel (AG_BF16_AMX, AG_BF16_AVX512 or AG_BF16_FP32 from cpu.h),
 * for tests and benchmarks.  The kernel must be at most ag_cpu_bf16_hw():
 * asking for more is an error (ag_error), never an illegal instruction. */
void ag_fast_gemm_bf16_on(int kernel, int trans_a, int trans_b, int M, int N, int K, const float *A,
                          long lda, const float *B, long ldb, float beta, float *C, long ldc);

/* Bytes of packing space ag_fast_gemm_bf16 keeps after a product of these
 * sizes (at most). */
size_t ag_fast_gemm_bf16_scratch(int M, int N, int K);

/* dst[i] = ag_bf16_bits(src[i]) for i < n, bit for bit (subnormals
 * included), 32 at a time with vcvtne2ps2bf16 where the CPU has it. */
void ag_fast_f32_to_bf16(uint16_t *dst, const float *src, long n);
/* y[i] = ag_bf16_round(x[i]), a subnormal x[i] taken as zero first: how
 * the fp32 kernel (AG_BF16_FP32) rounds its operands, as the other
 * kernels' packing does; with vcvtneps2bf16 where the CPU has it, unless
 * plain (tests compare the two).  x and y do not overlap. */
void ag_fast_round_bf16_ftz(const float *x, float *y, size_t n, int plain);
/* y[i] = ag_bf16_round(x[i]), bit for bit, as vector code; x may be y */
void ag_fast_round_bf16(const float *x, float *y, size_t n);

#endif
