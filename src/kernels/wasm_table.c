/*
 * wasm_table.c - the browser build's kernel table (make web): the
 * reference's (src/reference.c, one thread) with the kernels of
 * src/kernels/wasm_*.c in place of those they make faster, same bits.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <stdlib.h>

#include "wasm.h"

void *ag_wasm_scratch(int which, size_t bytes)
{
    static void *buf[AG_WASM_BUFFERS];
    static size_t cap[AG_WASM_BUFFERS];
    if (bytes > cap[which]) {
        free(buf[which]);
        buf[which] = malloc(bytes);
        if (!buf[which])
            ag_error("out of memory for a kernel's buffer (%zu bytes)", bytes);
        cap[which] = bytes;
    }
    return buf[which];
}

static ag_kernels wasm_kernels;

/* Installed before main (and before the page's first call). */
__attribute__((constructor)) static void install(void)
{
    wasm_kernels = ag_kernels_reference;
    wasm_kernels.name = "reference, in WebAssembly SIMD128";
    wasm_kernels.gemm = ag_wasm_gemm;
    wasm_kernels.gemm_batched = ag_wasm_gemm_batched;
    wasm_kernels.gemm_scratch = ag_wasm_gemm_scratch;
    wasm_kernels.attention = ag_wasm_attention;
    wasm_kernels.attention_backward = ag_wasm_attention_backward;
    wasm_kernels.attention_scratch = ag_wasm_attention_scratch;
    wasm_kernels.gelu = ag_wasm_gelu;
    wasm_kernels.gelu_backward = ag_wasm_gelu_backward;
    wasm_kernels.gelu_keep = ag_wasm_gelu_keep;
    wasm_kernels.layer_norm = ag_wasm_layer_norm;
    wasm_kernels.layer_norm_backward = ag_wasm_layer_norm_backward;
    wasm_kernels.cross_entropy = ag_wasm_cross_entropy;
    wasm_kernels.cross_entropy_backward = ag_wasm_cross_entropy_backward;
    wasm_kernels.sgd = ag_wasm_sgd;
    ag_kern = &wasm_kernels;
}
#endif
