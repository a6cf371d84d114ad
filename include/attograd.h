/*
 * attograd.h - a minimal reverse-mode autograd engine, enough to train
 * multi-head causal self-attention: tensors, ops, backward, optimizers,
 * random numbers.  Files (checkpoints in safetensors, files replaced whole
 * or not at all) are in attograd_io.h beside it.
 *
 * Example: y = sum(relu(x * w)), then dy/dw.
 *
 *     ag_ctx *ctx = ag_ctx_new();                    // arena + tape + dropout RNG
 *     ag_params *ps = ag_params_new();               // long-lived tensors
 *     ag_tensor *w = ag_params_add(ps, "w", 1, (int[]){3});
 *     ag_params_alloc(ps);                           // one block for data, one for grads
 *     w->data[0] = 1; w->data[1] = -2; w->data[2] = 3;
 *
 *     ag_reset(ctx);                                 // start a step: empty arena and tape
 *     ag_tensor *x = ag_from(ctx, 1, (int[]){3}, (ag_real[]){2, 2, 2});
 *     ag_tensor *y = ag_sum_all(ctx, ag_relu(ctx, ag_mul(ctx, x, w)));
 *     ag_params_zero_grad(ps);
 *     ag_backward(ctx, y);                           // reverse loop over the tape
 *     // y->data[0] == 8, w->grad == {2, 0, 2}
 *
 *     ag_params_free(ps); ag_ctx_free(ctx);
 *
 * Conventions: every op takes the context first and returns a new tensor
 * allocated in the context's arena; the tensor lives until the next
 * ag_reset() (an op recorded on, or a backward from, a recorded tensor of
 * an earlier step is refused while its memory has not been reused; after
 * that nothing can tell).  Ops record themselves on the tape when
 * gradients are enabled and an input requires a gradient.  Tensors are
 * contiguous and row-major, with 1 to AG_MAX_DIMS dimensions.  Misuse (bad
 * shapes, bad dims, a NULL tensor, context or generator, a parameter not yet given
 * storage by ag_params_alloc, a tensor recorded in another context, a leaf
 * wanting a gradient made in another context, sizes past what int or
 * size_t holds) goes to the error handler, which by
 * default prints one line naming the function and exits with status 2.  A
 * handler that longjmps out of an allocation failure leaves nothing
 * allocated by the failed call.
 *
 * Threads of the program: contexts are independent, so several threads may
 * each run their own ag_ctx, with its tensors, ag_params and ag_optim, at
 * the same time (the results are those of running them one after another,
 * bit for bit).  One context, parameter set or optimizer is used by one
 * thread at a time; nothing checks that.  The kernels' threads serve one
 * calling thread at a time, and the calls of the others meanwhile run on
 * their own thread alone.  ag_set_threads and the error handler are the
 * process's: any thread may call ag_set_threads at any time, and the
 * handler is set before other threads call the engine.  It runs on the
 * thread whose call failed (an error inside the kernels' threads is raised
 * again on the calling thread, after they have left the failed loop), so
 * a handler that longjmps uses a jmp_buf of that thread (_Thread_local).
 */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The element type is chosen at compile time: float by default, double when
 * built with -DAG_DOUBLE (make PRECISION=double), used by the gradient checks. */
#ifdef AG_DOUBLE
typedef double ag_real;
#define AG_PRECISION_NAME "double"
#else
typedef float ag_real;
#define AG_PRECISION_NAME "float"
#endif

#define AG_MAX_DIMS 4

typedef struct ag_node ag_node;
typedef struct ag_ctx ag_ctx;

typedef struct ag_tensor {
    int ndim;
    int shape[AG_MAX_DIMS];
    size_t size;            /* number of elements */
    ag_real *data;
    ag_real *grad;          /* NULL until a gradient reaches it (a parameter's: its set's gradient block) */
    int requires_grad;      /* parameters, and anything computed from them */
    int is_param;
    int decay;              /* parameters: weight decay applies (set by whoever builds the model) */
    const char *name;       /* parameter name, or NULL */
    ag_node *node;          /* the tape entry that produced it, or NULL for leaves */
    const ag_node *first_use; /* ag_backward's own: the earliest entry reading this leaf */
} ag_tensor;

/* ---- errors ------------------------------------------------------------ */

/* Called with one line (no newline) describing the misuse, made printable
 * as ag_set_err's messages are (attograd_io.h: a parameter's name with a
 * newline or a control byte in it shows it as a space or \xNN).  The handler
 * must not return (exit or longjmp); if it does, the engine prints one line
 * on stderr saying so, with msg, and aborts. */
typedef void (*ag_error_fn)(const char *msg, void *user);
void ag_set_error_handler(ag_error_fn fn, void *user);   /* NULL restores the default */
void ag_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* ---- random numbers: PCG32 (XSH-RR, 64-bit state) ---------------------- */

typedef struct ag_pcg32 {
    uint64_t state;
    uint64_t inc;           /* stream selector, always odd */
} ag_pcg32;

void ag_pcg32_seed(ag_pcg32 *g, uint64_t seed, uint64_t stream);
uint32_t ag_pcg32_next(ag_pcg32 *g);
double ag_pcg32_uniform(ag_pcg32 *g);                 /* [0, 1), 53 random bits */
double ag_pcg32_normal(ag_pcg32 *g);                  /* N(0, 1), Box-Muller, no cached spare */
uint32_t ag_pcg32_below(ag_pcg32 *g, uint32_t bound); /* uniform in [0, bound), unbiased; bound 0: 0, no draw */
/* Skip n draws in O(log n) steps: afterwards the generator gives what it
 * would have given after n calls of ag_pcg32_next. */
void ag_pcg32_advance(ag_pcg32 *g, uint64_t n);
/* The next n draws into out, as n calls of ag_pcg32_next give them (and
 * leave the generator), computed several at a time. */
void ag_pcg32_fill(ag_pcg32 *g, uint32_t *out, size_t n);

/* ---- the engine's own elementary functions ----------------------------- */

/* In double, from + - * / alone, so every build and C library gives the
 * same bits (src/mathfn.c; accuracy in tests/test_mathfn.c).  The engine
 * and the model library use these, never libm's (sqrt aside: IEEE rounds
 * it correctly everywhere). */
double ag_math_exp(double x);
double ag_math_expm1(double x);          /* e^x - 1, accurate near 0 */
double ag_math_log(double x);
double ag_math_tanh(double x);
double ag_math_erf(double x);
double ag_math_cos(double x);            /* accurate for |x| < 2^20; past it, x mod the double nearest 2 pi */
double ag_math_pow(double b, double y);  /* b^y for b >= 0 */

/* ---- context: arena, tape, modes --------------------------------------- */

ag_ctx *ag_ctx_new(void);
void ag_ctx_free(ag_ctx *ctx);
/* Forget every tensor and tape entry of the previous step.  Arena blocks are
 * kept, so a loop whose steps have the same shapes allocates only once. */
void ag_reset(ag_ctx *ctx);
size_t ag_arena_used(const ag_ctx *ctx);
size_t ag_arena_peak(const ag_ctx *ctx);      /* high-water mark since creation */
size_t ag_arena_reserved(const ag_ctx *ctx);  /* bytes held from malloc */
/* Gradient recording on (default) or off; returns the previous setting. */
int ag_set_grad_enabled(ag_ctx *ctx, int enabled);
int ag_grad_enabled(const ag_ctx *ctx);
/* For forward passes without gradients (evaluation, generation), which need
 * only the latest layer's output: remember the arena's position, then
 * forget everything allocated after it except `keep`, which is moved down
 * to that position and returned.  A layer-by-layer loop that rewinds to
 * one mark after each layer holds one layer's temporaries at a time.
 * Rewinding past ops that were recorded on the tape is an error, as is a
 * mark of another context, one taken before the last ag_reset, or one
 * past the arena's position (an earlier rewind went back before it). */
typedef struct ag_mark {
    const ag_ctx *ctx;      /* the context it was taken in */
    void *block;
    size_t offset, used;
    int tape_length;
    uint64_t step;          /* the context's ag_reset count when it was taken */
} ag_mark;
ag_mark ag_arena_mark(const ag_ctx *ctx);
ag_tensor *ag_arena_rewind(ag_ctx *ctx, ag_mark mark, ag_tensor *keep);
/* The generator dropout draws its masks from. */
ag_pcg32 *ag_dropout_rng(ag_ctx *ctx);
/* Threads used by the kernels (the engine's own, src/pool.c); n <= 0
 * means every core the process may run on, and more than 1024 means 1024.
 * Without a call: OMP_NUM_THREADS if set, else every core.  Results do not
 * depend on the thread count.  Threads the system will not give (a cap on
 * memory or processes) leave the work on the calling thread, and
 * ag_get_threads() then says 1. */
void ag_set_threads(int n);
int ag_get_threads(void);
/* The precision of the matrix multiplies the ops record from now on
 * (linear, matmul and attention; their backward passes follow the
 * forward's): AG_FP32, the default, or AG_BF16, mixed precision as bf16
 * training recipes use it: each product's inputs are rounded to bfloat16
 * (to nearest even) and summed in fp32; parameters, gradients, optimizer
 * state, softmax, layer norm, GELU and the loss stay fp32.  Returns 0, or
 * -1 (changing nothing) when bf16 products cannot run here
 * (ag_bf16_status says why). */
enum { AG_FP32, AG_BF16 };
int ag_set_precision(ag_ctx *ctx, int precision);
int ag_get_precision(const ag_ctx *ctx);
/* Whether bf16 products can run here: AG_BF16_READY, or the reason they
 * cannot.  *fact (when fact is not NULL) gets one line, no newline: the
 * kernel that runs them ("amx", "avx512", "fp32", "reference") or what
 * stops them.  The environment variable AG_BF16_KERNEL=amx|avx512|fp32|none
 * names the kernel to use instead of the run-time choice (for tests and
 * comparisons; the best below it where the CPU lacks it); another value is
 * refused (AG_BF16_BAD_SETTING). */
enum {
    AG_BF16_READY,
    AG_BF16_NEEDS_FLOAT,        /* a double build (AG_DOUBLE) has no bf16 products */
    AG_BF16_NO_HARDWARE,        /* unused: the fp32 kernel runs bf16 on any CPU */
    AG_BF16_TURNED_OFF,         /* AG_BF16_KERNEL=none */
    AG_BF16_BAD_SETTING         /* AG_BF16_KERNEL is none of amx, avx512, fp32, none */
};
int ag_bf16_status(const char **fact);
/* Which implementation of the kernels runs: "fast", or "reference" in a
 * build made with `make REFERENCE=1` (plain loops, one thread). */
const char *ag_kernels_name(void);

/* Reverse-mode pass from a one-element tensor: d(loss)/d(loss) = 1, then every
 * tape entry in reverse order accumulates (+=) into its inputs' gradients.
 * Parameter gradients accumulate across calls until ag_params_zero_grad.
 * Another pass over the same step's tape (the same loss again, or another
 * loss of the step) starts the intermediates' gradients from zero; the
 * leaves' (parameters', and those of tensors marked by ag_requires_grad)
 * add up. */
void ag_backward(ag_ctx *ctx, ag_tensor *loss);
/* Called by ag_backward once for each leaf that wants a gradient (a
 * parameter, a joined view of parameters, a tensor marked with
 * ag_requires_grad) and is an input of a recorded op, as soon as the
 * earliest entry reading it has run: no entry left on the tape can add to
 * its gradient, so that gradient is final for this pass.  Lets a caller use
 * a gradient while backward goes on (send it to other processes).  A leaf
 * no entry reads is never named.  fn NULL: no hook (the default).  The hook
 * may set another hook or none (the rest of the pass calls that one); one
 * that resets the context or runs ag_backward on it is an error (the pass
 * ends there), and one that frees it is undefined. */
typedef void (*ag_grad_ready_fn)(ag_tensor *leaf, void *user);
void ag_set_grad_ready_hook(ag_ctx *ctx, ag_grad_ready_fn fn, void *user);
/* One op of a recorded graph, as ag_graph_walk hands it over. */
typedef struct ag_graph_op {
    int id;                         /* its position on the tape, from 0 */
    const char *name;               /* ag_op_name */
    const ag_tensor *out;           /* its value; its gradient too once backward has run */
    int n_in;
    ag_tensor *const *in;           /* its inputs (an entry may be NULL); ag_op_id(in[i]) < 0: a leaf */
} ag_graph_op;
/* Call fn for every op that `root` depends on, last recorded first (the
 * order backward visits them); returns how many there were.  fn may record
 * ops (they are not walked); one that resets the context or walks it again
 * (ag_graph_walk, ag_graph_dot) is an error, and the walk ends there. */
int ag_graph_walk(ag_ctx *ctx, ag_tensor *root, void (*fn)(const ag_graph_op *op, void *user), void *user);
/* The tape position of the op that produced t, or -1 for a leaf. */
int ag_op_id(const ag_tensor *t);
/* Write the recorded graph that produced `root` in Graphviz DOT: an op's
 * node is named by its tape position (n0, n1, ...), a leaf's by the order
 * the walk meets it (t0, t1, ...), so the same graph gives the same file in
 * every run.  Write errors stay on out, for the caller's ferror/fclose. */
void ag_graph_dot(ag_ctx *ctx, ag_tensor *root, FILE *out);
/* Number of tape entries recorded since the last reset. */
int ag_tape_length(const ag_ctx *ctx);
/* Name of an op as shown in errors and graphs. */
const char *ag_op_name(int op);

/* ---- tensors in the arena ---------------------------------------------- */

/* Each dim is 1 to INT_MAX, and a shape's bytes, rounded up to a multiple
 * of 64 (the arena's alignment), must fit in size_t; other shapes are
 * refused, naming the function and the shape.  The ops count elements and
 * rows in size_t; their own limits are the matrix multiplies' (ag_matmul,
 * ag_linear), attention's (ag_attention), and INT_MAX for any dim an op
 * makes (ag_concat, ag_reshape's -1, ag_params_join). */
ag_tensor *ag_new(ag_ctx *ctx, int ndim, const int *shape);    /* zero-filled */
ag_tensor *ag_from(ag_ctx *ctx, int ndim, const int *shape, const ag_real *values);
ag_tensor *ag_full(ag_ctx *ctx, int ndim, const int *shape, ag_real value);
/* Mark an arena tensor as a leaf whose gradient is wanted.  Its gradient
 * is allocated in its context's arena and lives until the next ag_reset,
 * as the tensor does, so while gradients are enabled the ops and
 * ag_backward of another context refuse it (a parameter is a leaf of any
 * context: its gradient is its set's).  A parameter without a gradient
 * block is refused. */
void ag_requires_grad(ag_tensor *t);
/* "[2,3,4]" into buf; returns buf. */
const char *ag_shape_str(const ag_tensor *t, char *buf, size_t len);

/* ---- parameters: live as long as the model ----------------------------- */

typedef struct ag_params {
    int count;
    ag_tensor **list;       /* in registration order */
    size_t total;           /* elements over all parameters */
    ag_real *data;          /* one block: every parameter's values */
    ag_real *grad;          /* one block: every parameter's gradient (NULL: ag_params_alloc_no_grad) */
    int capacity;
} ag_params;

ag_params *ag_params_new(void);
/* Register a parameter; its storage is assigned by ag_params_alloc. */
ag_tensor *ag_params_add(ag_params *ps, const char *name, int ndim, const int *shape);
void ag_params_alloc(ag_params *ps);          /* data and grads zeroed; on failure, still unallocated */
/* For a model that only runs forward (evaluation, generation): the data
 * block alone, zeroed (no gradient block: half the address space).  The
 * parameters are constants (requires_grad 0): ops on them record nothing,
 * a loss may still be differentiated with respect to arena tensors marked
 * by ag_requires_grad, and ag_params_zero_grad, ag_clip_grad_norm, the
 * optimizers, and ag_requires_grad or ag_backward asking a gradient of
 * them are refused (ag_error, naming the function). */
void ag_params_alloc_no_grad(ag_params *ps);
void ag_params_zero_grad(ag_params *ps);
ag_tensor *ag_params_find(const ag_params *ps, const char *name);
void ag_params_free(ag_params *ps);
/* n allocated parameters of one shape [r, ...], registered one after another
 * (so stored back to back), seen as one [n*r, ...] arena tensor: its data
 * and gradient are theirs, so an op on it trains them all.  One linear layer
 * on the joined weights of the query, key and value projections computes all
 * three.  Parameters that are not adjacent in storage are an error, as is
 * an n*r past INT_MAX. */
ag_tensor *ag_params_join(ag_ctx *ctx, ag_tensor *const *ts, int n);

/* ---- ops: forward here, backward recorded on the tape ------------------ */

/* Each op's comment ends with where its math is written as plain loops,
 * forward and backward side by side: "Math: forward, backward (file)".
 * Where that is a kernel's definition in src/reference.c (its fast twin is
 * in src/kernels/), the op file holds the bookkeeping: ag_<op> records
 * itself on the tape, and ag_backward_<op> beside it (the function the tape
 * calls, listed in src/internal.h's AG_OPS) hands the gradient to the
 * kernel's backward. */

/* Elementwise with PyTorch broadcasting (shapes aligned from the right).
 * Math: binary_forward; ag_backward_add, ag_backward_sub, ag_backward_mul
 * (src/ops_elementwise.c). */
ag_tensor *ag_add(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_sub(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_mul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
/* a * s and a + s.  Math: pointwise; ag_backward_scale,
 * ag_backward_add_scalar (src/ops_elementwise.c). */
ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *a, ag_real s);
ag_tensor *ag_add_scalar(ag_ctx *ctx, ag_tensor *a, ag_real s);

/* Math: pointwise; ag_backward_exp, ag_backward_log, ag_backward_tanh,
 * ag_backward_relu (src/ops_elementwise.c). */
ag_tensor *ag_exp(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_log(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_tanh(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_relu(ag_ctx *ctx, ag_tensor *a);
/* Exact: x * Phi(x), as torch.nn.GELU().  Math: ref_gelu, ref_gelu_backward
 * (src/reference.c). */
ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *a);

/* torch.matmul for 2-D to 4-D operands: the last two dims multiply, leading
 * (batch) dims broadcast.  1-D operands are not accepted: reshape first.
 * The matrix multiply takes its sizes in int: rows (all of a's, stacked,
 * when b is one matrix), columns and inner size each at most INT_MAX / 2,
 * and at most INT_MAX products; larger shapes are refused, as are those of
 * ag_linear and ag_linear_gelu whose rows, out or in pass INT_MAX / 2.
 * Math: ag_matmul, ag_backward_matmul (src/ops_matmul.c); each product is
 * ref_gemm (src/reference.c). */
ag_tensor *ag_matmul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
/* x[..., in] W[out, in]^T + b[out]; b may be NULL.  PyTorch's nn.Linear layout.
 * Math: ag_linear, ag_backward_linear (src/ops_matmul.c); the products are
 * ref_gemm, the bias's gradient ref_column_sums (src/reference.c). */
ag_tensor *ag_linear(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b);
/* gelu(x W^T + b) as one op, bit for bit ag_gelu(ag_linear(x, W, b)): the
 * bias and GELU are one pass over the product's output, and backward
 * applies GELU's derivative and sums the bias's gradient in one pass (the
 * fast kernels keep the derivative from the forward, over the product; the
 * reference computes it again).
 * Math: ag_linear_gelu, ag_backward_linear_gelu (src/ops_matmul.c); the
 * pass each way is ref_gelu, ref_gelu_backward (src/reference.c). */
ag_tensor *ag_linear_gelu(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b);

/* Shapes.  A reshape is a view: it shares data (and gradient) with its input.
 * One entry of shape may be -1 (inferred; past INT_MAX it is refused).
 * transpose copies.
 * Math: ag_reshape, ag_backward_reshape; ag_transpose, ag_backward_transpose;
 * ag_concat, ag_backward_concat; ag_slice, ag_backward_slice (src/ops_shape.c). */
ag_tensor *ag_reshape(ag_ctx *ctx, ag_tensor *a, int ndim, const int *shape);
ag_tensor *ag_transpose(ag_ctx *ctx, ag_tensor *a, int dim0, int dim1);
/* Concatenate n tensors along dim, and the inverse: the slice [start, start+len) of dim. */
ag_tensor *ag_concat(ag_ctx *ctx, ag_tensor **ts, int n, int dim);
ag_tensor *ag_slice(ag_ctx *ctx, ag_tensor *a, int dim, int start, int len);

/* Reductions; negative dims count from the end as in PyTorch.  Tensors have
 * at least one dim, so reducing the only dim of a 1-D tensor without keepdim
 * gives shape [1] where PyTorch gives a 0-d scalar.  The means are sums
 * scaled.  Math: ag_sum, ag_backward_sum; ag_sum_all, ag_backward_sum_all
 * (src/ops_shape.c). */
ag_tensor *ag_sum(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim);
ag_tensor *ag_mean(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim);
ag_tensor *ag_sum_all(ag_ctx *ctx, ag_tensor *a);    /* shape [1] */
ag_tensor *ag_mean_all(ag_ctx *ctx, ag_tensor *a);   /* shape [1] */

/* softmax and log_softmax subtract the maximum of each row.  A row whose
 * entries are all -inf (everything masked) gives all zeros from softmax (and
 * -inf from log_softmax), never NaN, and passes a zero gradient back.
 * Math: ref_softmax, ref_softmax_backward (src/reference.c). */
ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *a, int dim);
ag_tensor *ag_log_softmax(ag_ctx *ctx, ag_tensor *a, int dim);
/* out = mask != 0 ? value : a, mask broadcast to a's shape.  value may be
 * -INFINITY; masked positions pass no gradient back.
 * Math: ag_masked_fill, ag_backward_masked_fill (src/ops_softmax.c). */
ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *a, ag_tensor *mask, ag_real value);
/* Inverted dropout: zero with probability p, scale survivors by 1/(1-p).  The
 * mask comes from the context's dropout generator (one 32-bit draw per
 * element) and is reused by backward.  A p that is not a multiple of 2^-32
 * drops with probability p rounded down to one (less than 2^-32 below p),
 * and survivors are scaled by one over the keep probability that gives, so
 * the expected value is kept exactly; a keep probability 1 - p below 2^-32
 * (a double p) is refused.
 * p == 0 or training == 0 returns the input itself (exact identity).
 * Math: ag_dropout, ag_backward_dropout (src/ops_nn.c). */
ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *a, ag_real p, int training);

/* Rows of W[V, d] picked by ids (shape ids_shape, values in [0, V)):
 * output shape ids_shape + [d].  Backward scatter-adds into repeated rows.
 * Math: ag_embedding, ag_backward_embedding (src/ops_nn.c). */
ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int32_t *ids, int ndim, const int *ids_shape);
/* Normalize over the last dim, (x - mean) / sqrt(var + eps) with the biased
 * variance (as torch.nn.LayerNorm), then * weight + bias (both [last dim];
 * either may be NULL: no scale, no shift).
 * Math: ref_layer_norm, ref_layer_norm_backward (src/reference.c). */
ag_tensor *ag_layer_norm(ag_ctx *ctx, ag_tensor *x, ag_tensor *weight, ag_tensor *bias, ag_real eps);
/* Mean over rows of -log softmax(logits)[target]; logits [..., V], one target
 * per row, a negative target is ignored (not counted in the mean).  Fused:
 * backward is (softmax - onehot) / counted rows.  Shape [1]; 0 if no row counts.
 * Math: ref_cross_entropy, ref_cross_entropy_backward (src/reference.c). */
ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *logits, const int32_t *targets);
/* Multi-head scaled dot-product attention as one op.  qkv is [B,T,3d]: the
 * queries, keys and values of every position side by side, each d = n_head *
 * hd wide and split into heads of hd columns (hd, the head size: the
 * tutorials' head_dim, d_k).  Per batch item and head,
 *     w = softmax(mask(q k^T) / sqrt(hd)),   out = dropout(w) v,
 * where mask sets a key after its query to -inf when causal.  The heads'
 * outputs are merged back into [B,T,d].  This computes the explicit
 * sequence reshape, transpose, matmul, masked_fill, scale, softmax, dropout,
 * matmul, transpose, reshape (the dropout mask is drawn in the same order, so
 * both drop the same weights; the sums run in another order, so the results
 * agree to rounding), without materializing the split heads or the [T,T]
 * weights, and with an analytic backward.  If weights is not NULL it
 * receives w, [B,H,T,T] before dropout (a tensor without gradient).
 * B x n_head x T past INT_MAX is refused (the kernels count it in int);
 * dropout's p is ag_dropout's (its keep probability at least 2^-32).
 * Math: ref_attention, ref_attention_backward (src/reference.c). */
ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *qkv, int n_head, int causal, ag_real dropout, int training,
                        ag_tensor **weights);
/* The same causal attention for generating a sequence a few positions at a
 * time with a key/value cache: qkv [B,T,3d] packs the queries, keys and
 * values of positions pos..pos+T-1 (as for ag_attention); their keys and
 * values are written into k_cache and v_cache ([B,S,d], pos + T <= S, owned
 * by the caller and kept between calls), and each new query attends to
 * cached positions 0 up to its own.  Equals the last T rows of ag_attention
 * over positions 0..pos+T-1, without recomputing the earlier ones.  Returns
 * [B,T,d]; inference only (no gradient, no dropout: a qkv that wants a
 * gradient is refused while gradients are enabled).  In bf16 precision the
 * cached keys and values are stored rounded to bf16.  Math: ref_attention
 * (src/reference.c), its queries starting at position pos. */
ag_tensor *ag_attention_cached(ag_ctx *ctx, ag_tensor *qkv, int n_head, ag_tensor *k_cache, ag_tensor *v_cache,
                               int pos);

/* ---- memory a step will take, asked before it runs ---------------------- */

/* Bytes ag_attention on qkv [B,T,3d] with n_head heads allocates in the
 * arena besides its [B,T,d] output when it records itself for backward,
 * with what its backward adds besides qkv's gradient: each query's
 * log-sum-exp, the weights where the kernels keep them (short sequences),
 * and at AG_BF16 precision the bf16 copies of qkv and of the output's
 * gradient. */
size_t ag_attention_arena_bytes(int B, int T, int d, int n_head, int precision);
/* Bytes the kernels hold outside the arena once they have run, at the
 * thread count now set: buffers each kernel keeps per thread, grown to its
 * largest call and never shrunk (so later calls do not allocate).  For one
 * matrix product [M,K] x [K,N] at a precision (any transposes; the
 * products of one precision share their buffers, so a step holds the
 * largest of its products'; M, N and K at least 1, a precision AG_FP32 or
 * AG_BF16: others are refused), and for ag_attention with its backward. */
size_t ag_matmul_scratch_bytes(int M, int N, int K, int precision);
size_t ag_attention_scratch_bytes(int B, int T, int d, int n_head);

/* ---- optimizers -------------------------------------------------------- */

/* Moments live in blocks parallel to ag_params' data, so an update is one
 * flat loop.  The update rules follow torch.optim.SGD and torch.optim.AdamW. */
enum { AG_SGD, AG_ADAMW };

typedef struct ag_optim {
    int kind;
    ag_params *ps;
    double momentum, weight_decay;      /* SGD and AdamW */
    double beta1, beta2, eps;           /* AdamW */
    long step;                          /* updates taken so far */
    ag_real *m;                         /* SGD momentum buffer / AdamW first moment */
    ag_real *v;                         /* AdamW second moment (NULL for SGD) */
} ag_optim;

/* Weight decay applies to the parameters whose `decay` flag is set (the model
 * decides: typically matrices, not biases or norm gains); both optimizers
 * honor the flag the same way.  Both need ps allocated with gradients
 * (ag_params_alloc) and take torch.optim's ranges, finite: momentum, weight
 * decay and eps finite and >= 0, betas in [0, 1); ag_optim_step a finite
 * lr >= 0.  Other values are refused (ag_error, naming the function).  A
 * program may change momentum, weight_decay, beta1, beta2, eps and step
 * (a resumed run's count) between steps: ag_optim_step checks them the
 * same way, and step from 0 to LONG_MAX - 1; kind, ps, m and v are the
 * optimizer's own (a step after ag_params_free(ps) is undefined). */
/* SGD: g += wd p (decayed parameters);  buf = momentum buf + g (buf = g at
 * the first step);  p -= lr buf  (momentum 0: p -= lr g, no buffer read).
 * Math: ref_sgd (src/reference.c). */
ag_optim *ag_optim_sgd(ag_params *ps, double momentum, double weight_decay);
/* AdamW: p -= lr wd p (decayed parameters), then the Adam step with
 * bias-corrected moments: m = beta1 m + (1 - beta1) g, v = beta2 v +
 * (1 - beta2) g^2, and at step t (counted from 1) p -= lr m^ / (sqrt(v^) +
 * eps), m^ = m / (1 - beta1^t), v^ = v / (1 - beta2^t).
 * Math: ref_adamw (src/reference.c). */
ag_optim *ag_optim_adamw(ag_params *ps, double beta1, double beta2, double eps, double weight_decay);
/* One update of every parameter; returns 1 if every parameter's value is
 * finite after it, 0 if any is NaN or infinite (the values are checked as
 * they are written). */
int ag_optim_step(ag_optim *opt, double lr);
void ag_optim_free(ag_optim *opt);
/* Scale all gradients so their global L2 norm is at most max_norm (as
 * torch.nn.utils.clip_grad_norm_; max_norm >= 0); returns the norm before clipping.
 * Math: ag_clip_grad_norm (src/optim.c), the squares summed by
 * ref_sum_squares (src/reference.c). */
double ag_clip_grad_norm(ag_params *ps, double max_norm);
/* The two halves of ag_clip_grad_norm, as torch.nn.utils.get_total_norm and
 * clip_grads_with_norm_: the gradients' global L2 norm (NaN or infinite when
 * any gradient is: the squares are summed in double), and the scaling of
 * every gradient by max_norm / (norm + 1e-6) when that is below 1 (norm
 * >= 0, as ag_grad_norm gives it: a negative one is an error; a NaN one
 * changes nothing). */
double ag_grad_norm(ag_params *ps);
void ag_clip_grads_with_norm(ag_params *ps, double max_norm, double norm);

#ifdef __cplusplus
}
#endif
#endif
