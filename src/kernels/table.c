/*
 * table.c - the fast kernels, gathered into the interface the ops call
 * (kernels.h).
 */
#include "cpu.h"
#include "fast.h"
#include "gemm_bf16.h"

const ag_kernels ag_kernels_fast = {
    .name = "fast",
    .gemm = ag_fast_gemm,
    .gemm_batched = ag_fast_gemm_batched,
    .softmax = ag_fast_softmax,
    .softmax_backward = ag_fast_softmax_backward,
    .cross_entropy = ag_fast_cross_entropy,
    .cross_entropy_backward = ag_fast_cross_entropy_backward,
    .layer_norm = ag_fast_layer_norm,
    .layer_norm_backward = ag_fast_layer_norm_backward,
    .gelu = ag_fast_gelu,
    .gelu_backward = ag_fast_gelu_backward,
    .attention = ag_fast_attention,
    .attention_backward = ag_fast_attention_backward,
    .attention_keep = ag_fast_attention_keep,
    .sgd = ag_fast_sgd,
    .adamw = ag_fast_adamw,
#ifndef AG_DOUBLE
    .gemm_bf16 = ag_fast_gemm_bf16,
    .round_bf16 = ag_fast_round_bf16,
    .bf16_status = ag_fast_bf16_status,
#endif
    .sum_squares = ag_fast_sum_squares,
    .column_sums = ag_fast_column_sums,
};
