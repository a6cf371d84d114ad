/*
 * tensor.c - the context (arena allocator and modes), arena tensors,
 * long-lived parameters, and the error handler.
 *
 * Memory model: parameters and their gradients live in two contiguous blocks
 * owned by ag_params (a set that only runs forward has no gradient block);
 * everything a step creates (tensors, saved values, activation gradients,
 * tape entries) is bump-allocated from the arena and forgotten all at once
 * by ag_reset.  The arena keeps its blocks, so a loop
 * whose steps repeat the same shapes allocates from malloc only in step one.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "attograd_io.h"

/* ---- kernels ------------------------------------------------------------ */

#ifdef AG_REFERENCE
const ag_kernels *ag_kern = &ag_kernels_reference;
#else
const ag_kernels *ag_kern = &ag_kernels_fast;
#endif

const char *ag_kernels_name(void) { return ag_kern->name; }

/* A double build's kernel tables have no bf16 products; in a float build
 * the kernels that run say whether their CPU has them. */
int ag_bf16_status(const char **fact)
{
    const char *f = "this build computes in double; bf16 products need the float build";
    const int code = ag_kern->gemm_bf16 ? ag_kern->bf16_status(&f) : AG_BF16_NEEDS_FLOAT;
    if (fact)
        *fact = f;
    return code;
}

int ag_set_precision(ag_ctx *ctx, int precision)
{
    ag_need("ag_set_precision", "ctx", ctx);
    if (precision != AG_FP32 && precision != AG_BF16)
        ag_error("ag_set_precision: %d is not AG_FP32 or AG_BF16", precision);
    if (precision == AG_BF16 && ag_bf16_status(NULL) != AG_BF16_READY)
        return -1;
    ctx->precision = precision;
    return 0;
}

int ag_get_precision(const ag_ctx *ctx)
{
    ag_need("ag_get_precision", "ctx", ctx);
    return ctx->precision;
}

/* ---- errors ------------------------------------------------------------ */

static ag_error_fn error_fn;
static void *error_user;

void ag_set_error_handler(ag_error_fn fn, void *user)
{
    error_fn = fn;
    error_user = user;
}

void ag_error(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ag_one_line(msg, sizeof msg);   /* a parameter's name may hold any byte */
    ag_pool_catch(msg);
    if (error_fn) {
        error_fn(msg, error_user);
        /* a handler must not return: the caller cannot go on.  Said on
         * stderr first, or the abort would be all the program showed. */
        fprintf(stderr, "attograd: the error handler returned (it must exit or longjmp); aborting on: %s\n", msg);
        abort();
    }
    fprintf(stderr, "attograd: %s\n", msg);
    exit(2);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        ag_error("out of memory allocating %zu bytes", n);
    return p;
}

/* ---- context and arena ------------------------------------------------- */

ag_ctx *ag_ctx_new(void)
{
    ag_ctx *ctx = xmalloc(sizeof *ctx);
    memset(ctx, 0, sizeof *ctx);
    ctx->grad_enabled = 1;
    /* a fixed start (seed 0, stream 2, the stream the command seeds for
     * dropout) until a program seeds it through ag_dropout_rng */
    ag_pcg32_seed(&ctx->dropout_rng, 0, 2);
    return ctx;
}

void ag_ctx_free(ag_ctx *ctx)
{
    if (!ctx)
        return;
    for (ag_block *b = ctx->first, *next; b; b = next) {
        next = b->next;
        ag_big_free(b->mem);
        free(b);
    }
    free(ctx);
}

void ag_reset(ag_ctx *ctx)
{
    ag_need("ag_reset", "ctx", ctx);
    for (ag_block *b = ctx->first; b; b = b->next)
        b->used = 0;
    ctx->cur = ctx->first;
    ctx->used = 0;
    ctx->tail = NULL;
    ctx->n_nodes = 0;
    ctx->backward_done = 0;
    ctx->step++;
}

static ag_block *block_new(size_t size)
{
    ag_block *b = malloc(sizeof *b);
    unsigned char *mem = ag_big_alloc(size, 1);
    if (!b || !mem) {
        free(b);
        ag_big_free(mem);
        ag_error("out of memory: the arena needs another %zu bytes", size);
    }
    b->next = NULL;
    b->size = size;
    b->used = 0;
    b->mem = mem;
    return b;
}

void *ag_alloc(ag_ctx *ctx, size_t bytes)
{
    /* rounded up to AG_ALIGN, which must not wrap to a few bytes */
    if (bytes > SIZE_MAX - (AG_ALIGN - 1))
        ag_error("out of memory: %zu bytes asked of the arena", bytes);
    bytes = (bytes + AG_ALIGN - 1) & ~(size_t)(AG_ALIGN - 1);
    if (bytes == 0)
        bytes = AG_ALIGN;
    /* Walk forward through kept blocks; a block too small for this request is
     * skipped (its tail stays unused this step).  Only when no kept block
     * fits do we malloc, doubling so the number of blocks stays small. */
    ag_block *b = ctx->cur;
    while (b && bytes > b->size - b->used)
        b = b->next;
    if (!b) {
        size_t last = 0;
        ag_block **link = &ctx->first;
        while (*link) {
            last = (*link)->size;
            link = &(*link)->next;
        }
        size_t size = last ? 2 * last : (size_t)1 << 20;   /* the first block: 1 MiB */
        if (size < bytes)
            size = bytes;
        b = block_new(size);
        *link = b;
        ctx->reserved += size;
    }
    ctx->cur = b;
    void *p = b->mem + b->used;
    b->used += bytes;
    ctx->used += bytes;
    if (ctx->used > ctx->peak)
        ctx->peak = ctx->used;
    return p;
}

void *ag_alloc_zero(ag_ctx *ctx, size_t bytes)
{
    void *p = ag_alloc(ctx, bytes);
    memset(p, 0, bytes);
    return p;
}

size_t ag_arena_used(const ag_ctx *ctx)
{
    ag_need("ag_arena_used", "ctx", ctx);
    return ctx->used;
}
size_t ag_arena_peak(const ag_ctx *ctx)
{
    ag_need("ag_arena_peak", "ctx", ctx);
    return ctx->peak;
}
size_t ag_arena_reserved(const ag_ctx *ctx)
{
    ag_need("ag_arena_reserved", "ctx", ctx);
    return ctx->reserved;
}
ag_pcg32 *ag_dropout_rng(ag_ctx *ctx)
{
    ag_need("ag_dropout_rng", "ctx", ctx);
    return &ctx->dropout_rng;
}
int ag_tape_length(const ag_ctx *ctx)
{
    ag_need("ag_tape_length", "ctx", ctx);
    return ctx->n_nodes;
}

int ag_set_grad_enabled(ag_ctx *ctx, int enabled)
{
    ag_need("ag_set_grad_enabled", "ctx", ctx);
    int old = ctx->grad_enabled;
    ctx->grad_enabled = enabled != 0;
    return old;
}

int ag_grad_enabled(const ag_ctx *ctx)
{
    ag_need("ag_grad_enabled", "ctx", ctx);
    return ctx->grad_enabled;
}

ag_mark ag_arena_mark(const ag_ctx *ctx)
{
    ag_need("ag_arena_mark", "ctx", ctx);
    ag_mark m = { ctx, ctx->cur, ctx->cur ? ctx->cur->used : 0, ctx->used, ctx->n_nodes, ctx->step };
    return m;
}

static void tensor_init(ag_tensor *t, int ndim, const int *shape, size_t size);

ag_tensor *ag_arena_rewind(ag_ctx *ctx, ag_mark mark, ag_tensor *keep)
{
    ag_need("ag_arena_rewind", "ctx", ctx);
    ag_need_data("ag_arena_rewind", "keep", keep);
    /* A mark of another context would hand this arena that one's block to
     * allocate from.  One taken before an ag_reset is a position in the
     * step before: within this step's tensors it would hand theirs out
     * again, past them it would count memory nothing holds.  One past the
     * position (an earlier rewind went back before it) likewise. */
    if (mark.ctx != ctx)
        ag_error("ag_arena_rewind: the mark was taken in another context");
    if (mark.step != ctx->step)
        ag_error("ag_arena_rewind: the mark was taken before the last ag_reset (a mark is a position in one step)");
    if (mark.used > ctx->used)
        ag_error("ag_arena_rewind: the mark is past the arena's position (an earlier rewind went back before it)");
    if (ctx->n_nodes != mark.tape_length)
        ag_error("ag_arena_rewind: %d ops were recorded since the mark (rewinding is for forward passes "
                 "without gradients)", ctx->n_nodes - mark.tape_length);
    ag_tensor saved = *keep;
    /* Back to the mark: its block keeps what came before, later blocks are empty. */
    ag_block *b = mark.block ? mark.block : ctx->first;
    if (b) {
        b->used = mark.block ? mark.offset : 0;
        for (ag_block *later = b->next; later; later = later->next)
            later->used = 0;
    }
    ctx->cur = b;
    ctx->used = mark.used;
    /* keep's data is still in place (rewinding erases nothing): after the
     * mark, where the copy may overlap it, or before it, when keep predates
     * the mark; memmove copies either way.  The header is allocated after
     * the data, past anything still to be read. */
    size_t bytes = saved.size * sizeof(ag_real);
    ag_real *data = ag_alloc(ctx, bytes);
    memmove(data, saved.data, bytes);
    ag_tensor *t = ag_alloc(ctx, sizeof *t);
    tensor_init(t, saved.ndim, saved.shape, saved.size);   /* a plain value: no gradient, no name, no history */
    t->data = data;
    return t;
}

/* ---- tensors ----------------------------------------------------------- */

size_t ag_shape_size(const char *op, int ndim, const int *shape)
{
    ag_need(op, "shape", shape);
    if (ndim < 1 || ndim > AG_MAX_DIMS)
        ag_error("%s: %d dimensions (1 to %d supported)", op, ndim, AG_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 1)
            ag_error("%s: dimension %d has size %d (must be at least 1)", op, i, shape[i]);
    /* the element count and its bytes, rounded up to the arena's AG_ALIGN,
     * must fit in size_t: a wrapped count or rounding would allocate too
     * little ([3,715827883,2147483647] floats are 2^64 - 4 bytes, which
     * rounding up would wrap to 0) */
    const size_t max_bytes = SIZE_MAX & ~(size_t)(AG_ALIGN - 1);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (n > max_bytes / sizeof(ag_real) / (size_t)shape[i]) {
            ag_tensor t = { .ndim = ndim };
            memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
            char s[64];
            ag_error("%s: shape %s is too large (more than %zu bytes)", op, ag_shape_str(&t, s, sizeof s),
                     max_bytes);
        }
        n *= (size_t)shape[i];
    }
    return n;
}

static void tensor_init(ag_tensor *t, int ndim, const int *shape, size_t size)
{
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->size = size;
}

/* An uninitialized tensor whose shape errors name fn, the function the
 * caller called. */
static ag_tensor *empty_for(ag_ctx *ctx, const char *fn, int ndim, const int *shape)
{
    size_t n = ag_shape_size(fn, ndim, shape);
    ag_tensor *t = ag_alloc(ctx, sizeof *t);
    tensor_init(t, ndim, shape, n);
    t->data = ag_alloc(ctx, n * sizeof(ag_real));
    return t;
}

ag_tensor *ag_empty(ag_ctx *ctx, int ndim, const int *shape) { return empty_for(ctx, "ag_new", ndim, shape); }

ag_tensor *ag_view_of(ag_ctx *ctx, ag_tensor *base, int ndim, const int *shape)
{
    ag_tensor *t = ag_alloc(ctx, sizeof *t);
    tensor_init(t, ndim, shape, base->size);
    t->data = base->data;
    return t;
}

ag_tensor *ag_new(ag_ctx *ctx, int ndim, const int *shape)
{
    ag_need("ag_new", "ctx", ctx);
    ag_tensor *t = ag_empty(ctx, ndim, shape);
    memset(t->data, 0, t->size * sizeof(ag_real));
    return t;
}

ag_tensor *ag_from(ag_ctx *ctx, int ndim, const int *shape, const ag_real *values)
{
    ag_need("ag_from", "ctx", ctx);
    ag_need("ag_from", "values", values);
    ag_tensor *t = empty_for(ctx, "ag_from", ndim, shape);
    memcpy(t->data, values, t->size * sizeof(ag_real));
    return t;
}

ag_tensor *ag_full(ag_ctx *ctx, int ndim, const int *shape, ag_real value)
{
    ag_need("ag_full", "ctx", ctx);
    ag_tensor *t = empty_for(ctx, "ag_full", ndim, shape);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = value;
    return t;
}

void ag_requires_grad(ag_tensor *t)
{
    ag_need("ag_requires_grad", "t", t);
    /* its gradient would land in the arena, not in a block the set owns */
    if (t->is_param && !t->grad)
        ag_error("ag_requires_grad: parameter '%s' has no gradient (its set was allocated by "
                 "ag_params_alloc_no_grad)", t->name);
    t->requires_grad = 1;
}

ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t)
{
    if (!t->grad)
        t->grad = ag_alloc_zero(ctx, t->size * sizeof(ag_real));
    return t->grad;
}

ag_real *ag_grad_begin(ag_ctx *ctx, ag_tensor *t, int *assign)
{
    *assign = t->grad == NULL;
    if (!t->grad)
        t->grad = ag_alloc(ctx, t->size * sizeof(ag_real));
    return t->grad;
}

const char *ag_shape_str(const ag_tensor *t, char *buf, size_t len)
{
    if (len == 0)
        return buf;                 /* not even room for the terminating NUL */
    ag_need("ag_shape_str", "buf", buf);
    ag_need("ag_shape_str", "t", t);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? "," : "[", t->shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

int ag_norm_dim(const char *op, const ag_tensor *t, int dim)
{
    int d = dim < 0 ? dim + t->ndim : dim;
    if (d < 0 || d >= t->ndim) {
        char s[64];
        ag_error("%s: dim %d out of range for shape %s", op, dim, ag_shape_str(t, s, sizeof s));
    }
    return d;
}

size_t ag_span(const ag_tensor *t, int from, int to)
{
    size_t n = 1;
    for (int i = from; i < to; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* ---- parameters -------------------------------------------------------- */

ag_params *ag_params_new(void)
{
    ag_params *ps = xmalloc(sizeof *ps);
    memset(ps, 0, sizeof *ps);
    return ps;
}

ag_tensor *ag_params_add(ag_params *ps, const char *name, int ndim, const int *shape)
{
    ag_need("ag_params_add", "ps", ps);
    ag_need("ag_params_add", "name", name);
    if (ps->data)
        ag_error("ag_params_add: '%s' added after ag_params_alloc", name);
    if (ag_params_find(ps, name))
        ag_error("ag_params_add: duplicate parameter name '%s'", name);
    size_t n = ag_shape_size("ag_params_add", ndim, shape);
    /* Each parameter alone fits size_t's bytes; their sum must too, or the
     * blocks ag_params_alloc sizes from it would be short by a wrapped amount. */
    if (n > SIZE_MAX / sizeof(ag_real) - ps->total)
        ag_error("ag_params_add: '%s' makes the parameters too large (%zu elements before it)", name, ps->total);
    if (ps->count == ps->capacity) {
        int cap = ps->capacity ? 2 * ps->capacity : 16;
        ag_tensor **list = realloc(ps->list, (size_t)cap * sizeof *list);
        if (!list)
            ag_error("ag_params_add: out of memory registering parameter '%.64s%s'", name,
                     strlen(name) > 64 ? "..." : "");
        ps->list = list;
        ps->capacity = cap;
    }
    /* both or neither: a handler that longjmps out of the second
     * allocation's failure must not be left holding the first */
    const size_t len = strlen(name) + 1;
    ag_tensor *t = malloc(sizeof *t);
    char *copy = malloc(len);
    if (!t || !copy) {
        free(t);
        free(copy);
        ag_error("ag_params_add: out of memory registering parameter '%.64s%s'", name, len > 65 ? "..." : "");
    }
    tensor_init(t, ndim, shape, n);
    memcpy(copy, name, len);
    t->name = copy;
    t->is_param = 1;
    t->requires_grad = 1;
    ps->list[ps->count++] = t;
    ps->total += n;
    return t;
}

/* with_grad: a second block, parallel to the weights, for their
 * gradients.  Without it the parameters are constants (requires_grad 0):
 * ops on them record nothing, and everything that would read or write the
 * gradient block (ag_backward reaching them, the optimizers, zeroing,
 * clipping) is refused. */
static void params_alloc(const char *fn, ag_params *ps, int with_grad)
{
    ag_need(fn, "ps", ps);
    if (ps->data)
        ag_error("%s: the parameters are already allocated", fn);
    /* The gradients are asked for only once the weights are granted, and a
     * failure gives back what was granted: under a handler that longjmps
     * out, the set stays unallocated, as it was, and can be tried again. */
    const size_t n = ps->total ? ps->total : 1;
    ag_real *data = ag_big_alloc(n, sizeof(ag_real));
    if (!data)
        ag_error("%s: out of memory: the weights of %zu parameters need %zu bytes", fn, ps->total,
                 n * sizeof(ag_real));
    ag_real *grad = with_grad ? ag_big_alloc(n, sizeof(ag_real)) : NULL;
    if (with_grad && !grad) {
        ag_big_free(data);
        ag_error("%s: out of memory: the gradients of %zu parameters need %zu bytes", fn, ps->total,
                 n * sizeof(ag_real));
    }
    ps->data = data;
    ps->grad = grad;
    size_t off = 0;
    for (int i = 0; i < ps->count; i++) {
        ps->list[i]->data = ps->data + off;
        ps->list[i]->grad = grad ? grad + off : NULL;
        ps->list[i]->requires_grad = with_grad;
        off += ps->list[i]->size;
    }
}

void ag_params_alloc(ag_params *ps) { params_alloc("ag_params_alloc", ps, 1); }

void ag_params_alloc_no_grad(ag_params *ps) { params_alloc("ag_params_alloc_no_grad", ps, 0); }

ag_tensor *ag_params_find(const ag_params *ps, const char *name)
{
    ag_need("ag_params_find", "ps", ps);
    ag_need("ag_params_find", "name", name);
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->list[i]->name, name) == 0)
            return ps->list[i];
    return NULL;
}

ag_tensor *ag_params_join(ag_ctx *ctx, ag_tensor *const *ts, int n)
{
    ag_need("ag_params_join", "ctx", ctx);
    char s0[64], si[64];
    if (n < 1)
        ag_error("ag_params_join: %d parameters (need at least one)", n);
    ag_need("ag_params_join", "ts", ts);
    for (int i = 0; i < n; i++) {
        if (!ts[i] || !ts[i]->is_param || !ts[i]->data)
            ag_error("ag_params_join: tensor %d is not an allocated parameter", i);
        if (ts[i]->ndim != ts[0]->ndim || memcmp(ts[i]->shape, ts[0]->shape, (size_t)ts[0]->ndim * sizeof(int)))
            ag_error("ag_params_join: %s is %s but %s is %s", ts[i]->name, ag_shape_str(ts[i], si, sizeof si),
                     ts[0]->name, ag_shape_str(ts[0], s0, sizeof s0));
        /* the grad blocks are parallel to the data: adjacent data, adjacent
         * gradients (or none, in a set allocated without them) */
        if (i > 0 && ts[i]->data != ts[i - 1]->data + ts[i - 1]->size)
            ag_error("ag_params_join: %s is not stored right after %s", ts[i]->name, ts[i - 1]->name);
    }
    /* the joined first dim is an int like every dim: past INT_MAX it would
     * wrap (two [2^30] parameters joined as [-2^31]) */
    if (ts[0]->shape[0] > INT_MAX / n)
        ag_error("ag_params_join: %d parameters of %s would have %lld entries in dim 0 (at most %d)", n,
                 ag_shape_str(ts[0], s0, sizeof s0), (long long)ts[0]->shape[0] * n, INT_MAX);
    int shape[AG_MAX_DIMS];
    memcpy(shape, ts[0]->shape, sizeof shape);
    shape[0] *= n;
    ag_tensor *t = ag_alloc(ctx, sizeof *t);
    tensor_init(t, ts[0]->ndim, shape, ts[0]->size * (size_t)n);
    t->data = ts[0]->data;
    t->grad = ts[0]->grad;
    t->requires_grad = ts[0]->requires_grad;
    /* named "a+b+c" so a drawn graph shows which parameters it joins */
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(ts[i]->name) + 1;
    char *name = ag_alloc(ctx, len), *end = name;
    for (int i = 0; i < n; i++)
        end += sprintf(end, "%s%s", i ? "+" : "", ts[i]->name);
    t->name = name;
    t->is_param = 1;
    return t;
}

void ag_params_free(ag_params *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < ps->count; i++) {
        free((char *)ps->list[i]->name);
        free(ps->list[i]);
    }
    free(ps->list);
    ag_big_free(ps->data);
    ag_big_free(ps->grad);
    free(ps);
}
