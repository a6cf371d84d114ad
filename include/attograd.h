/*
 * attograd.h - a minimal reverse-mode autograd engine, enough to train
 * multi-head causal self-attention.  This is the whole public API.
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
 * ag_reset().  Ops record themselves on the tape when gradients are enabled
 * and an input requires a gradient.  Tensors are contiguous and row-major,
 * with 1 to AG_MAX_DIMS dimensions.  Misuse (bad shapes, bad dims) goes to the
 * error handler, which by default prints one line and exits with status 2.
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
    ag_real *grad;          /* NULL until a gradient reaches it */
    int requires_grad;      /* parameters, and anything computed from them */
    int is_param;
    int decay;              /* parameters: weight decay applies (set by whoever builds the model) */
    const char *name;       /* parameter name, or NULL */
    ag_node *node;          /* the tape entry that produced it, or NULL for leaves */
} ag_tensor;

/* ---- errors ------------------------------------------------------------ */

/* Called with one line (no newline) describing the misuse.  The handler must
 * not return (exit or longjmp); if it does, the engine aborts. */
typedef void (*ag_error_fn)(const char *msg, void *user);
void ag_set_error_handler(ag_error_fn fn, void *user);   /* NULL restores the default */
void ag_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
/* A problem reported as text instead (a file that cannot be read, say):
 * printf into err[errlen], cut to fit, newlines made spaces so it stays one
 * line.  Nothing happens when err is NULL or errlen is 0. */
void ag_set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
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
uint32_t ag_pcg32_below(ag_pcg32 *g, uint32_t bound); /* uniform in [0, bound), unbiased */
/* Skip n draws in O(log n) steps: afterwards the generator gives what it
 * would have given after n calls of ag_pcg32_next. */
void ag_pcg32_advance(ag_pcg32 *g, uint64_t n);

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
 * Rewinding past ops that were recorded on the tape is an error. */
typedef struct ag_mark {
    void *block;
    size_t offset, used;
    int tape_length;
} ag_mark;
ag_mark ag_arena_mark(const ag_ctx *ctx);
ag_tensor *ag_arena_rewind(ag_ctx *ctx, ag_mark mark, ag_tensor *keep);
/* The generator dropout draws its masks from. */
ag_pcg32 *ag_dropout_rng(ag_ctx *ctx);
/* Threads used by the kernels (the engine's own, src/pool.c); n <= 0
 * means every core the process may run on.  Without a call: OMP_NUM_THREADS
 * if set, else every core.  Results do not depend on the thread count. */
void ag_set_threads(int n);
int ag_get_threads(void);
/* The precision of the matrix multiplies the ops record from now on
 * (linear, matmul and attention; their backward passes follow the
 * forward's): AG_FP32, the default, or AG_BF16, mixed precision as bf16
 * training recipes use it: each product's inputs are rounded to bfloat16
 * (to nearest even) and summed in fp32; parameters, gradients, optimizer
 * state, softmax, layer norm, GELU and the loss stay fp32.  Returns 0, or
 * -1 (changing nothing) when this build or CPU has no bf16 products:
 * ag_bf16_missing() says why in one line (NULL when it has them). */
enum { AG_FP32, AG_BF16 };
int ag_set_precision(ag_ctx *ctx, int precision);
int ag_get_precision(const ag_ctx *ctx);
const char *ag_bf16_missing(void);
/* Which implementation of the kernels runs: "fast", or "reference" in a
 * build made with `make REFERENCE=1` (plain loops, one thread). */
const char *ag_kernels_name(void);

/* Reverse-mode pass from a one-element tensor: d(loss)/d(loss) = 1, then every
 * tape entry in reverse order accumulates (+=) into its inputs' gradients.
 * Parameter gradients accumulate across calls until ag_params_zero_grad. */
void ag_backward(ag_ctx *ctx, ag_tensor *loss);
/* Write the recorded graph that produced `root` in Graphviz DOT. */
void ag_graph_dot(ag_ctx *ctx, ag_tensor *root, FILE *out);
/* Number of tape entries recorded since the last reset. */
int ag_tape_length(const ag_ctx *ctx);

/* ---- tensors in the arena ---------------------------------------------- */

ag_tensor *ag_new(ag_ctx *ctx, int ndim, const int *shape);    /* zero-filled */
ag_tensor *ag_from(ag_ctx *ctx, int ndim, const int *shape, const ag_real *values);
ag_tensor *ag_full(ag_ctx *ctx, int ndim, const int *shape, ag_real value);
/* Mark an arena tensor as a leaf whose gradient is wanted. */
void ag_requires_grad(ag_tensor *t);
/* "[2,3,4]" into buf; returns buf. */
const char *ag_shape_str(const ag_tensor *t, char *buf, size_t len);

/* ---- parameters: live as long as the model ----------------------------- */

typedef struct ag_params {
    int count;
    ag_tensor **list;       /* in registration order */
    size_t total;           /* elements over all parameters */
    ag_real *data;          /* one block: every parameter's values */
    ag_real *grad;          /* one block: every parameter's gradient */
    int capacity;
} ag_params;

ag_params *ag_params_new(void);
/* Register a parameter; its storage is assigned by ag_params_alloc. */
ag_tensor *ag_params_add(ag_params *ps, const char *name, int ndim, const int *shape);
void ag_params_alloc(ag_params *ps);          /* data and grads zeroed */
void ag_params_zero_grad(ag_params *ps);
ag_tensor *ag_params_find(const ag_params *ps, const char *name);
void ag_params_free(ag_params *ps);
/* n allocated parameters of one shape [r, ...], registered one after another
 * (so stored back to back), seen as one [n*r, ...] arena tensor: its data
 * and gradient are theirs, so an op on it trains them all.  One linear layer
 * on the joined weights of the query, key and value projections computes all
 * three.  Parameters that are not adjacent in storage are an error. */
ag_tensor *ag_params_join(ag_ctx *ctx, ag_tensor *const *ts, int n);

/* ---- ops: forward here, backward recorded on the tape ------------------ */

/* Elementwise with PyTorch broadcasting (shapes aligned from the right). */
ag_tensor *ag_add(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_sub(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_mul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *a, ag_real s);       /* a * s */
ag_tensor *ag_add_scalar(ag_ctx *ctx, ag_tensor *a, ag_real s);  /* a + s */

ag_tensor *ag_exp(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_log(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_tanh(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_relu(ag_ctx *ctx, ag_tensor *a);
ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *a);   /* exact: x * Phi(x), as torch.nn.GELU() */

/* torch.matmul for 2-D to 4-D operands: the last two dims multiply, leading
 * (batch) dims broadcast.  1-D operands are not accepted: reshape first. */
ag_tensor *ag_matmul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
/* x[..., in] W[out, in]^T + b[out]; b may be NULL.  PyTorch's nn.Linear layout. */
ag_tensor *ag_linear(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b);

/* Shapes.  A reshape is a view: it shares data (and gradient) with its input.
 * One entry of shape may be -1 (inferred).  transpose copies. */
ag_tensor *ag_reshape(ag_ctx *ctx, ag_tensor *a, int ndim, const int *shape);
ag_tensor *ag_transpose(ag_ctx *ctx, ag_tensor *a, int dim0, int dim1);
/* Concatenate n tensors along dim, and the inverse: the slice [start, start+len) of dim. */
ag_tensor *ag_concat(ag_ctx *ctx, ag_tensor **ts, int n, int dim);
ag_tensor *ag_slice(ag_ctx *ctx, ag_tensor *a, int dim, int start, int len);

/* Reductions; negative dims count from the end as in PyTorch.  Tensors have
 * at least one dim, so reducing the only dim of a 1-D tensor without keepdim
 * gives shape [1] where PyTorch gives a 0-d scalar. */
ag_tensor *ag_sum(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim);
ag_tensor *ag_mean(ag_ctx *ctx, ag_tensor *a, int dim, int keepdim);
ag_tensor *ag_sum_all(ag_ctx *ctx, ag_tensor *a);    /* shape [1] */
ag_tensor *ag_mean_all(ag_ctx *ctx, ag_tensor *a);   /* shape [1] */

/* softmax and log_softmax subtract the maximum of each row.  A row whose
 * entries are all -inf (everything masked) gives all zeros from softmax (and
 * -inf from log_softmax), never NaN, and passes a zero gradient back. */
ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *a, int dim);
ag_tensor *ag_log_softmax(ag_ctx *ctx, ag_tensor *a, int dim);
/* out = mask != 0 ? value : a, mask broadcast to a's shape.  value may be
 * -INFINITY; masked positions pass no gradient back. */
ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *a, ag_tensor *mask, ag_real value);
/* Inverted dropout: zero with probability p, scale survivors by 1/(1-p).  The
 * mask comes from the context's dropout generator and is reused by backward.
 * p == 0 or training == 0 returns the input itself (exact identity). */
ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *a, ag_real p, int training);

/* Rows of W[V, d] picked by ids (shape ids_shape, values in [0, V)):
 * output shape ids_shape + [d].  Backward scatter-adds into repeated rows. */
ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int32_t *ids, int ndim, const int *ids_shape);
/* Normalize over the last dim, then * weight + bias (both [last dim]). */
ag_tensor *ag_layer_norm(ag_ctx *ctx, ag_tensor *x, ag_tensor *weight, ag_tensor *bias, ag_real eps);
/* Mean over rows of -log softmax(logits)[target]; logits [..., V], one target
 * per row, a negative target is ignored (not counted in the mean).  Fused:
 * backward is (softmax - onehot) / counted rows.  Shape [1]; 0 if no row counts. */
ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *logits, const int32_t *targets);
/* Multi-head scaled dot-product attention as one op.  qkv is [B,T,3d]: the
 * queries, keys and values of every position side by side, each d = n_head *
 * hd wide and split into heads of hd columns.  Per batch item and head,
 *     w = softmax(mask(q k^T) / sqrt(hd)),   out = dropout(w) v,
 * where mask sets a key after its query to -inf when causal.  The heads'
 * outputs are merged back into [B,T,d].  This computes the explicit
 * sequence reshape, transpose, matmul, masked_fill, scale, softmax, dropout,
 * matmul, transpose, reshape (the dropout mask is drawn in the same order, so
 * both drop the same weights; the sums run in another order, so the results
 * agree to rounding), without materializing the split heads or the [T,T]
 * weights, and with an analytic backward.  If weights is not NULL it receives w, [B,H,T,T]
 * before dropout (a tensor without gradient). */
ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *qkv, int n_head, int causal, ag_real dropout, int training,
                        ag_tensor **weights);
/* The same causal attention for generating a sequence a few positions at a
 * time with a key/value cache: qkv [B,T,3d] packs the queries, keys and
 * values of positions pos..pos+T-1 (as for ag_attention); their keys and
 * values are written into k_cache and v_cache ([B,S,d], pos + T <= S, owned
 * by the caller and kept between calls), and each new query attends to
 * cached positions 0 up to its own.  Equals the last T rows of ag_attention
 * over positions 0..pos+T-1, without recomputing the earlier ones.  Returns
 * [B,T,d]; inference only (no gradient, no dropout).  In bf16 precision the
 * cached keys and values are stored rounded to bf16. */
ag_tensor *ag_attention_cached(ag_ctx *ctx, ag_tensor *qkv, int n_head, ag_tensor *k_cache, ag_tensor *v_cache,
                               int pos);

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
 * honor the flag the same way. */
/* SGD: g += wd p (decayed parameters);  buf = momentum buf + g;  p -= lr buf. */
ag_optim *ag_optim_sgd(ag_params *ps, double momentum, double weight_decay);
/* AdamW: p -= lr wd p (decayed parameters), then the Adam step
 * with bias-corrected moments: p -= lr m^ / (sqrt(v^) + eps). */
ag_optim *ag_optim_adamw(ag_params *ps, double beta1, double beta2, double eps, double weight_decay);
void ag_optim_step(ag_optim *opt, double lr);
void ag_optim_free(ag_optim *opt);
/* Scale all gradients so their global L2 norm is at most max_norm (as
 * torch.nn.utils.clip_grad_norm_); returns the norm before clipping. */
double ag_clip_grad_norm(ag_params *ps, double max_norm);

/* ---- files replaced whole or not at all --------------------------------- */

/* ag_atomic_open creates "<target>.tmp.<pid>" in the target's directory,
 * where target is path with its symlinks followed (the link stays, the file
 * it points to is replaced; a dangling link's target is created).  When that
 * name is longer than the directory allows, the target's name is cut short
 * in it.  The new file gets the permissions of the file it replaces, else
 * 0666 less the umask.  Refused: a target that is a directory or whose name
 * is too long.  Write to f, then ag_atomic_commit: flush, fsync, close,
 * rename over the target, fsync the directory.  ag_atomic_abort removes the
 * temporary file.  On any failure the temporary file is removed, the target
 * is left as it was, err gets one line naming the file and the cause, and
 * -1 is returned; 0 on success.  Either call frees what open allocated. */
typedef struct ag_atomic_file {
    FILE *f;                /* open for writing between open and commit/abort */
    char *path;             /* the target */
    char *tmp;              /* the temporary file beside it */
    volatile int state;     /* for ag_atomic_discard */
} ag_atomic_file;

int ag_atomic_open(ag_atomic_file *a, const char *path, char *err, size_t errlen);
int ag_atomic_commit(ag_atomic_file *a, char *err, size_t errlen);
void ag_atomic_abort(ag_atomic_file *a);
/* For a signal handler that is about to end the process: removes the
 * temporary file of a write not yet committed.  Returns 1 when a write was
 * under way and its target is left as it was, 0 when the new file is
 * already in place, -1 when no write is under way.  Async-signal-safe. */
int ag_atomic_discard(const ag_atomic_file *a);

/* ---- checkpoint files: safetensors ----------------------------------------
 * Layout: u64 little-endian header length N, N bytes of UTF-8 JSON mapping
 * tensor names to {"dtype","shape","data_offsets":[begin,end)} plus an
 * optional "__metadata__" object of string -> string, then the data buffer.
 * The writer pads the JSON with spaces so that 8 + N is a multiple of 8. */

/* The dtypes attograd reads and writes; their names in the file are
 * "F32", "F64", "I32", "I64", "U64", "U8", "F16" (IEEE half) and "BF16"
 * (bfloat16: a float's upper 16 bits). */
enum { AG_ST_F32, AG_ST_F64, AG_ST_I32, AG_ST_I64, AG_ST_U64, AG_ST_U8, AG_ST_F16, AG_ST_BF16 };

#define AG_ST_MAX_DIMS 8
/* Largest JSON header accepted; real headers are far smaller, and a bound
 * keeps a corrupt length from asking for gigabytes. */
#define AG_ST_MAX_HEADER 100000000ull

typedef struct ag_st_tensor {
    const char *name;      /* UTF-8, NUL-terminated, never contains NUL itself */
    int dtype;             /* AG_ST_* */
    int ndim;              /* 0..8; 0 = scalar (one element) */
    int64_t shape[AG_ST_MAX_DIMS];
    const void *data;      /* little-endian bytes; see alignment note below */
    size_t nbytes;         /* product(shape) * element size */
} ag_st_tensor;

/* A loaded file: its tensors (data copied out of the file) and metadata. */
typedef struct ag_st_file ag_st_file;

/* Bytes per element of a dtype, 0 if dtype is not an AG_ST_* value. */
size_t ag_st_dtype_size(int dtype);
/* The dtype's name in the file ("F32", ...), or "?" if unknown. */
const char *ag_st_dtype_name(int dtype);

/*
 * Write tensors (offsets consecutive, in the given order, no holes) and
 * metadata pairs (meta[2*i] = key, meta[2*i+1] = value, i < nmeta)
 * atomically, through ag_atomic_open and ag_atomic_commit (the bytes go to
 * "<path>.tmp.<pid>" beside path's target, which is flushed, fsync'ed and
 * renamed over it, then the directory is fsync'ed).  Tensors with a zero in their shape (nbytes 0, data may be NULL)
 * are allowed.  Rejected before anything is written: duplicate or empty
 * names, the reserved name "__metadata__", names/keys/values that are not
 * valid UTF-8, an unknown dtype, ndim outside 0..8, negative dims, nbytes
 * not matching the shape, NaN or Inf in floating-point data (the reader refuses
 * those, so such a file could never be loaded back).  On any failure the
 * temp file is removed, an existing file at path is left as it was, err gets
 * one line naming the file and the cause, and -1 is returned; 0 on success.
 */
int ag_st_save(const char *path, const ag_st_tensor *tensors, int n,
               const char *const *meta, int nmeta, char *err, size_t errlen);
/* The same checks and bytes to an open stream (e.g. an ag_atomic_file's);
 * label names it in messages.  Nothing is written when a check fails. */
int ag_st_write(FILE *f, const char *label, const ag_st_tensor *tensors, int n,
                const char *const *meta, int nmeta, char *err, size_t errlen);

/*
 * Read the whole file into memory and validate it completely (see
 * ag_st_parse).  NULL with err filled ("<path>: <problem>", one line) on any
 * problem, including a file that changes size while it is being read.
 */
ag_st_file *ag_st_load(const char *path, char *err, size_t errlen);

/*
 * The same validation on bytes already in memory; `label` stands in for the
 * path in messages.  The result does not refer to buf afterwards.  Checks:
 * length field vs. file size and AG_ST_MAX_HEADER, UTF-8, JSON syntax (with
 * the byte offset of the error), top-level object, duplicate tensor names or
 * metadata keys, exactly the fields dtype/shape/data_offsets of the right
 * types, known dtype, 0..8 non-negative integer dims, shape * element size
 * == end - begin without overflow, begin <= end, offsets tiling the data
 * buffer exactly (contiguous from 0, no gap, no overlap, no trailing bytes),
 * string metadata values, and no NaN/Inf in F32/F64/F16/BF16 data.  A
 * PyTorch pickle (torch.save's zip archive or legacy stream), whose first
 * bytes make no sense as a length, is named as such.
 *
 * Alignment: every tensor's data is copied to its own 64-byte aligned spot,
 * so data may be cast to float *, double *, int64_t * ... directly.
 */
ag_st_file *ag_st_parse(const void *buf, size_t len, const char *label,
                        char *err, size_t errlen);

int ag_st_count(const ag_st_file *f);
/* Tensors in file order (sorted by data offset); NULL if i is out of range. */
const ag_st_tensor *ag_st_at(const ag_st_file *f, int i);
/* NULL if there is no tensor called name. */
const ag_st_tensor *ag_st_get(const ag_st_file *f, const char *name);
/* The values of a floating-point tensor (F32, F64, F16, BF16) as float:
 * nbytes / element size of them into out.  F16 and BF16 widen exactly; F64
 * rounds to the nearest float.  -1 with err (one line naming the tensor)
 * for another dtype or an F64 value beyond float's range; 0 on success. */
int ag_st_to_f32(const ag_st_tensor *t, float *out, char *err, size_t errlen);
/* Metadata value for key, NULL if absent. */
const char *ag_st_meta(const ag_st_file *f, const char *key);
int ag_st_meta_count(const ag_st_file *f);
/* Metadata keys in the order they appear in the file; NULL if out of range. */
const char *ag_st_meta_key(const ag_st_file *f, int i);
void ag_st_free(ag_st_file *f);

/* Name of an op as shown in errors and graphs. */
const char *ag_op_name(int op);

#ifdef __cplusplus
}
#endif
#endif
