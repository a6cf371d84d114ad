/*
 * internal.h - what the engine's source files share and users never see:
 * the context (arena + tape), the tape entry, the op list and the helpers
 * every op uses to allocate, record itself and reach its inputs' gradients.
 */
#ifndef ATTOGRAD_INTERNAL_H
#define ATTOGRAD_INTERNAL_H

#include "attograd.h"
#include "bigbuf.h"
#include "kernels.h"
#include "pool.h"

/* Every op, in one list: its enum id (AG_OP_<id>), its name in errors and
 * graphs, and the function that runs its backward (defined in its op file,
 * beside the op; ag_backward in tape.c calls it through backward_table).
 * The enum, the name table and the backward table are all generated from
 * it, so adding an op is one line here plus its forward/backward pair. */
#define AG_OPS(X)                                                \
    X(ADD, "add", ag_backward_add)                               \
    X(SUB, "sub", ag_backward_sub)                               \
    X(MUL, "mul", ag_backward_mul)                               \
    X(SCALE, "scale", ag_backward_scale)                         \
    X(ADD_SCALAR, "add_scalar", ag_backward_add_scalar)          \
    X(EXP, "exp", ag_backward_exp)                               \
    X(LOG, "log", ag_backward_log)                               \
    X(TANH, "tanh", ag_backward_tanh)                            \
    X(RELU, "relu", ag_backward_relu)                            \
    X(GELU, "gelu", ag_backward_gelu)                            \
    X(MATMUL, "matmul", ag_backward_matmul)                      \
    X(LINEAR, "linear", ag_backward_linear)                      \
    X(LINEAR_GELU, "linear_gelu", ag_backward_linear_gelu)       \
    X(RESHAPE, "reshape", ag_backward_reshape)                   \
    X(TRANSPOSE, "transpose", ag_backward_transpose)             \
    X(CONCAT, "concat", ag_backward_concat)                      \
    X(SLICE, "slice", ag_backward_slice)                         \
    X(SUM, "sum", ag_backward_sum)                               \
    X(SUM_ALL, "sum_all", ag_backward_sum_all)                   \
    X(SOFTMAX, "softmax", ag_backward_softmax)                   \
    X(LOG_SOFTMAX, "log_softmax", ag_backward_log_softmax)       \
    X(MASKED_FILL, "masked_fill", ag_backward_masked_fill)       \
    X(DROPOUT, "dropout", ag_backward_dropout)                   \
    X(EMBEDDING, "embedding", ag_backward_embedding)             \
    X(LAYER_NORM, "layer_norm", ag_backward_layer_norm)          \
    X(CROSS_ENTROPY, "cross_entropy", ag_backward_cross_entropy) \
    X(ATTENTION, "attention", ag_backward_attention)

enum {
#define AG_OP_ENUM(id, name, backward) AG_OP_##id,
    AG_OPS(AG_OP_ENUM)
#undef AG_OP_ENUM
    AG_OP_COUNT
};

#define AG_NODE_MAX_INPUTS 3

struct ag_node {
    int op;
    int id;                         /* position on the tape, from 0 */
    const ag_ctx *ctx;              /* the context whose tape holds it */
    uint64_t step;                  /* that context's step (its resets) when recorded */
    ag_tensor *out;
    ag_tensor *in[AG_NODE_MAX_INPUTS];
    int n_in;
    ag_tensor **in_list;            /* concat: any number of inputs */
    int iarg[2];                    /* op-specific integers: the dim an op works along
                                     * (transpose: its two; slice: and the start), or
                                     * linear's rows and precision */
    ag_real farg;                   /* op-specific scalar: scale's factor */
    void *saved;                    /* op-specific values kept for backward (a struct of the op's file) */
    ag_node *prev;                  /* the tape is walked backwards through this */
    int mark;                       /* scratch for graph traversals */
};

typedef struct ag_block {
    struct ag_block *next;
    size_t size, used;
    unsigned char *mem;             /* AG_ALIGN-aligned */
} ag_block;

struct ag_ctx {
    ag_block *first, *cur;          /* the arena's blocks, and the one allocating now */
    size_t used, peak, reserved;    /* bytes handed out this step, the most ever, held from malloc */
    ag_node *tail;                  /* last recorded op */
    int n_nodes;
    int grad_enabled;
    int precision;                  /* AG_FP32 or AG_BF16: the matrix multiplies' */
    int backward_done;              /* a backward pass ran since the last reset */
    uint64_t step;                  /* ag_reset calls so far: a node of another step is stale (64 bits:
                                     * never wraps, so a stale node never matches) */
    uint64_t backward_runs;         /* ag_backward calls so far: one the hook made is seen by the pass */
    uint64_t walks;                 /* ag_graph_walk calls so far: one its fn made is seen by the walk */
    ag_grad_ready_fn grad_ready;    /* ag_set_grad_ready_hook's */
    void *grad_ready_user;
    ag_pcg32 dropout_rng;
};


/* The matrix multiply of the given precision (AG_FP32 or AG_BF16). */
typedef void (*ag_gemm_fn)(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda,
                           const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc);
static inline ag_gemm_fn ag_gemm_of(int precision)
{
    return precision == AG_BF16 ? ag_kern->gemm_bf16 : ag_kern->gemm;
}

/* Arena memory that lives until the next ag_reset. */
void *ag_alloc(ag_ctx *ctx, size_t bytes);
void *ag_alloc_zero(ag_ctx *ctx, size_t bytes);

/* Elements of a tensor of this shape; shapes with a dim below 1, more than
 * AG_MAX_DIMS dims or more bytes than size_t holds are an error naming op. */
size_t ag_shape_size(const char *op, int ndim, const int *shape);
/* A new arena tensor with the given shape, data uninitialized (shape
 * errors name ag_new: the ops build only shapes already checked). */
ag_tensor *ag_empty(ag_ctx *ctx, int ndim, const int *shape);
/* A new tensor sharing `data` (for views). */
ag_tensor *ag_view_of(ag_ctx *ctx, ag_tensor *base, int ndim, const int *shape);

/* Whether an op on these inputs is recorded: grad mode on and some input
 * requires a gradient.  Sets out->requires_grad accordingly. */
int ag_should_record(ag_ctx *ctx, ag_tensor *out, ag_tensor *a, ag_tensor *b, ag_tensor *c);
/* Append a tape entry producing `out`; returns it for the op to fill. */
ag_node *ag_record(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *a, ag_tensor *b, ag_tensor *c);
/* Refuses an input of op that was recorded on another context's tape, or
 * on this one before its last ag_reset, or is a leaf wanting a gradient
 * that this context did not make (ag_foreign_leaf) (ag_record asks it of
 * a, b and c; concat of each of its inputs). */
void ag_same_tape(const ag_ctx *ctx, int op, const ag_tensor *in);
/* Whether t is a leaf that wants a gradient (not a parameter, whose
 * gradient is its set's) and lies outside ctx's arena: a gradient ctx gave
 * it would be arena memory that ctx's next ag_reset hands to other tensors
 * while t, living on elsewhere, still points at it. */
int ag_foreign_leaf(const ag_ctx *ctx, const ag_tensor *t);
/* Why a tensor's entry is not on ctx's tape as it is now ("computed in
 * another context", "computed before the last ag_reset"), or NULL when it
 * is there or the tensor is a leaf. */
const char *ag_off_tape(const ag_ctx *ctx, const ag_tensor *t);
/* The gradient buffer of t, created zeroed in the arena on first use. */
ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t);
/* The same for a backward that writes every element of t's gradient: when
 * the buffer is new it is left uninitialized and *assign is set to 1, and
 * the caller stores (=) where it would otherwise add (+=).  The first
 * contribution to a gradient then costs no zeroing pass. */
ag_real *ag_grad_begin(ag_ctx *ctx, ag_tensor *t, int *assign);


/* Two shapes aligned from the right (PyTorch broadcasting), padded to 4 dims.
 * For each operand, a stride of 0 on a dim where it has size 1 repeats it. */
typedef struct {
    int n[4];                       /* output shape, padded */
    size_t sa[4], sb[4];            /* element strides of a and b per output dim */
    int out_ndim;
    int out_shape[AG_MAX_DIMS];
} ag_bcast;
ag_bcast ag_broadcast(const char *op, const ag_tensor *a, const ag_tensor *b);

/* A NULL where a function needs a tensor (or an array) is misuse, reported
 * like a bad shape ("ag_add: b is NULL") instead of crashing inside it. */
static inline void ag_need(const char *fn, const char *what, const void *p)
{
    if (!p)
        ag_error("%s: %s is NULL", fn, what);
}
/* ag_need for a tensor an op reads: a parameter registered but not yet
 * allocated has no data (and would be read through NULL). */
static inline void ag_need_data(const char *fn, const char *what, const ag_tensor *t)
{
    ag_need(fn, what, t);
    if (!t->data)
        ag_error("%s: %s has no storage (a parameter used before ag_params_alloc)", fn, what);
}

/* dy / n, a mean's backward over n counted rows (0 when n is 0): divided in
 * double, which holds every count exactly (a float holds whole numbers
 * only to 2^24, so past 16777216 rows a float count was another number),
 * and rounded once.  For a float dy and n below 2^24 these are the bits of
 * the float division (a double quotient rounded to float is the float
 * quotient: 53 bits are more than 2 * 24 + 2). */
ag_real ag_div_count(ag_real dy, size_t n);

/* Normalize a possibly negative dim for an op's error messages. */
int ag_norm_dim(const char *op, const ag_tensor *t, int dim);
/* Product of shape[from..to). */
size_t ag_span(const ag_tensor *t, int from, int to);

/* One backward function per op (named in AG_OPS): reads node->out->grad,
 * accumulates into the inputs' gradients.  The table lives in tape.c. */
typedef void (*ag_backward_fn)(ag_ctx *ctx, ag_node *node);
#define AG_OP_DECL(id, name, backward) void backward(ag_ctx *ctx, ag_node *node);
AG_OPS(AG_OP_DECL)
#undef AG_OP_DECL

#endif
