/*
 * tape.c - define-by-run recording and the reverse-mode driver.
 *
 * Each op, as it runs, appends one entry (an ag_node) to the tape.  Entries
 * are appended in creation order, which is already a topological order:
 * an op's inputs exist before it does.  So backward needs no graph search and
 * no recursion: walk the tape from the last entry to the first and let each
 * entry push its output's gradient into its inputs' gradients (+=, so a
 * tensor used twice receives both contributions; a backward that writes
 * every element stores instead when it is the first to arrive: see
 * ag_grad_begin in tensor.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const op_names[AG_OP_COUNT] = {
#define AG_OP_NAME(id, name, backward) name,
    AG_OPS(AG_OP_NAME)
#undef AG_OP_NAME
};

/* Each op's backward, as AG_OPS names it (ag_backward_softmax for
 * AG_OP_SOFTMAX, ...); ag_backward below is their only caller. */
static const ag_backward_fn backward_table[AG_OP_COUNT] = {
#define AG_OP_BACKWARD(id, name, backward) [AG_OP_##id] = backward,
    AG_OPS(AG_OP_BACKWARD)
#undef AG_OP_BACKWARD
};

const char *ag_op_name(int op)
{
    return op >= 0 && op < AG_OP_COUNT ? op_names[op] : "unknown op";
}

int ag_should_record(ag_ctx *ctx, ag_tensor *out, ag_tensor *a, ag_tensor *b, ag_tensor *c)
{
    int needs = (a && a->requires_grad) || (b && b->requires_grad) || (c && c->requires_grad);
    out->requires_grad = ctx->grad_enabled && needs;
    return out->requires_grad;
}

/* An input recorded on another context's tape has its history there:
 * backward over this tape would stop at it and silently leave everything
 * it was computed from without a gradient. */
const char *ag_off_tape(const ag_ctx *ctx, const ag_tensor *t)
{
    if (!t || !t->node)
        return NULL;
    if (t->node->ctx != ctx)
        return "computed in another context";
    /* The tensor and its entry live in the arena until the next ag_reset;
     * one kept past it (whose memory nothing has reused yet) would be read
     * as if its history were still on the tape, and backward would give
     * nothing a gradient. */
    if (t->node->step != ctx->step)
        return "computed before the last ag_reset (arena tensors live until the next reset)";
    return NULL;
}

/* Whether t's header lies in one of ctx's arena blocks (compared as
 * addresses: the blocks are separate objects). */
static int in_arena(const ag_ctx *ctx, const ag_tensor *t)
{
    const uintptr_t p = (uintptr_t)t;
    for (const ag_block *b = ctx->first; b; b = b->next)
        if (p >= (uintptr_t)b->mem && p - (uintptr_t)b->mem < b->size)
            return 1;
    return 0;
}

int ag_foreign_leaf(const ag_ctx *ctx, const ag_tensor *t)
{
    return t && !t->node && t->requires_grad && !t->is_param && !in_arena(ctx, t);
}

void ag_same_tape(const ag_ctx *ctx, int op, const ag_tensor *in)
{
    const char *why = ag_off_tape(ctx, in);
    if (why && in->node->ctx != ctx)
        ag_error("ag_%s: an input was %s (gradients cannot flow between tapes)", ag_op_name(op), why);
    if (why)
        ag_error("ag_%s: an input was %s", ag_op_name(op), why);
    if (ag_foreign_leaf(ctx, in))
        ag_error("ag_%s: an input wants a gradient but was not made in this context (its gradient would be "
                 "allocated in this arena, and outlive its next ag_reset): make it in this context, or a parameter",
                 ag_op_name(op));
}

ag_node *ag_record(ag_ctx *ctx, int op, ag_tensor *out, ag_tensor *a, ag_tensor *b, ag_tensor *c)
{
    ag_same_tape(ctx, op, a);
    ag_same_tape(ctx, op, b);
    ag_same_tape(ctx, op, c);
    ag_node *n = ag_alloc_zero(ctx, sizeof *n);
    n->op = op;
    n->ctx = ctx;
    n->step = ctx->step;
    n->id = ctx->n_nodes++;
    n->out = out;
    n->in[0] = a;
    n->in[1] = b;
    n->in[2] = c;
    n->n_in = c ? 3 : b ? 2 : a ? 1 : 0;
    n->prev = ctx->tail;
    ctx->tail = n;
    out->node = n;
    return n;
}

static int is_leaf(const ag_tensor *t) { return t && !t->node && t->requires_grad; }

/* An entry's inputs: concat keeps any number of them in in_list, every
 * other op at most three in in[]. */
static ag_tensor **inputs_of(ag_node *n) { return n->in_list ? n->in_list : n->in; }

/* Entries only add into their own inputs' gradients, and backward runs them
 * from the last to the first, so a leaf's gradient is final once the
 * earliest entry that reads it has run.  Walking the tape from its end,
 * the last entry seen reading a leaf is that earliest one.  (A view of a
 * leaf, a reshape, is an entry reading it, recorded before anything reads
 * the view.) */
static void mark_first_uses(ag_ctx *ctx)
{
    for (ag_node *n = ctx->tail; n; n = n->prev) {
        ag_tensor **ins = inputs_of(n);
        for (int i = 0; i < n->n_in; i++)
            if (is_leaf(ins[i]))
                ins[i]->first_use = n;
    }
}

/* After entry n: the hook for each leaf n was the earliest reader of, once
 * (a leaf read twice by n, as in w * w, is named once).  The hook is read
 * again for each: it may have replaced or removed itself.  A hook that
 * reset the context (the tape's memory is the next allocations') or ran
 * another backward on it (which cleared and recomputed the gradients this
 * pass is adding to) ends the pass, before anything of the tape is read
 * again; step and run are the pass's. */
static void name_final_leaves(ag_ctx *ctx, ag_node *n, uint64_t step, uint64_t run)
{
    ag_tensor **ins = inputs_of(n);
    for (int i = 0; i < n->n_in; i++)
        if (is_leaf(ins[i]) && ins[i]->first_use == n) {
            ins[i]->first_use = NULL;
            if (ctx->grad_ready)
                ctx->grad_ready(ins[i], ctx->grad_ready_user);
            if (ctx->step != step)
                ag_error("ag_backward: the grad-ready hook reset the context (ag_reset) during the pass");
            if (ctx->backward_runs != run)
                ag_error("ag_backward: the grad-ready hook ran ag_backward on the context during the pass");
        }
}

void ag_backward(ag_ctx *ctx, ag_tensor *loss)
{
    ag_need("ag_backward", "ctx", ctx);
    ag_need_data("ag_backward", "loss", loss);
    if (loss->size != 1) {
        char s[64];
        ag_error("ag_backward: loss must have one element, got shape %s", ag_shape_str(loss, s, sizeof s));
    }
    if (loss->node && loss->node->ctx != ctx)
        ag_error("ag_backward: the loss was computed in another context (pass the context that recorded it)");
    if (ag_off_tape(ctx, loss))
        ag_error("ag_backward: the loss was %s", ag_off_tape(ctx, loss));
    if (ag_foreign_leaf(ctx, loss))
        ag_error("ag_backward: the loss wants a gradient but was not made in this context (its gradient would be "
                 "allocated in this arena, and outlive its next ag_reset)");
    if (!loss->requires_grad)
        ag_error("ag_backward: the loss does not depend on any tensor that wants a gradient (were gradients "
                 "disabled, the parameters allocated by ag_params_alloc_no_grad, or no tensor marked as "
                 "requiring one?)");
    /* A second backward over the same tape (another loss of the same step)
     * must not resend the gradients the first one left on intermediates.
     * A reshape's gradient is its input's buffer: that one is cleared by the
     * input's own entry, or belongs to a leaf and keeps accumulating. */
    if (ctx->backward_done)
        for (ag_node *n = ctx->tail; n; n = n->prev)
            if (n->op != AG_OP_RESHAPE && n->out->grad)
                memset(n->out->grad, 0, n->out->size * sizeof(ag_real));
    ctx->backward_done = 1;
    const uint64_t step = ctx->step, run = ++ctx->backward_runs;
    if (ctx->grad_ready)
        mark_first_uses(ctx);
    ag_grad(ctx, loss)[0] += 1;         /* the seed: d(loss)/d(loss) = 1 */
    for (ag_node *n = ctx->tail; n; n = n->prev) {
        if (n->out->grad) {        /* else no gradient reached this entry */
            if (n->op < 0 || n->op >= AG_OP_COUNT || !backward_table[n->op])
                ag_error("ag_backward: op %s has no backward function", ag_op_name(n->op));
            backward_table[n->op](ctx, n);
        }
        if (ctx->grad_ready)
            name_final_leaves(ctx, n, step, run);
    }
}

void ag_set_grad_ready_hook(ag_ctx *ctx, ag_grad_ready_fn fn, void *user)
{
    ag_need("ag_set_grad_ready_hook", "ctx", ctx);
    ctx->grad_ready = fn;
    ctx->grad_ready_user = user;
}

/* ---- the graph as recorded ------------------------------------------- */

int ag_op_id(const ag_tensor *t)
{
    return t && t->node ? t->node->id : -1;
}

int ag_graph_walk(ag_ctx *ctx, ag_tensor *root, void (*fn)(const ag_graph_op *op, void *user), void *user)
{
    ag_need("ag_graph_walk", "ctx", ctx);
    ag_need("ag_graph_walk", "root", root);
    if (!fn)
        ag_error("ag_graph_walk: fn is NULL");
    if (ag_off_tape(ctx, root))
        ag_error("ag_graph_walk: root was %s", ag_off_tape(ctx, root));
    /* Mark what `root` depends on: one reverse sweep, the same order backward uses. */
    const uint64_t step = ctx->step, walk = ++ctx->walks;
    for (ag_node *n = ctx->tail; n; n = n->prev)
        n->mark = 0;
    if (root->node)
        root->node->mark = 1;
    int count = 0;
    for (ag_node *n = ctx->tail; n; n = n->prev) {
        if (!n->mark)
            continue;
        ag_tensor **ins = inputs_of(n);
        for (int i = 0; i < n->n_in; i++)
            if (ins[i] && ins[i]->node)
                ins[i]->node->mark = 1;
        ag_graph_op op = { n->id, ag_op_name(n->op), n->out, n->n_in, ins };
        fn(&op, user);
        /* fn may record ops (after the tail this walk started from); one
         * that reset the context gave the tape's memory to its next
         * allocations, one that walked again cleared this walk's marks:
         * the walk ends before it reads the tape again */
        if (ctx->step != step)
            ag_error("ag_graph_walk: fn reset the context (ag_reset) during the walk");
        if (ctx->walks != walk)
            ag_error("ag_graph_walk: fn walked the context's graph again (ag_graph_walk or ag_graph_dot) during the "
                     "walk");
        count++;
    }
    return count;
}

/* ---- Graphviz ---------------------------------------------------------- */

/* A name inside a DOT string: " and \ escaped (one ended the string, the
 * other began an escape of the label's), a control byte or DEL a space. */
static void dot_text(FILE *out, const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c == '"' || *c == '\\')
            fputc('\\', out);
        fputc(*c < 0x20 || *c == 0x7f ? ' ' : *c, out);
    }
}

/* ag_graph_dot's state: the file, and the leaves drawn so far, in the order
 * first met; a leaf's node is named by its place there (t0, t1, ...), so
 * the same graph gives the same file in every run (an address would not). */
typedef struct dot_state {
    FILE *out;
    const void **leaf;      /* each leaf's data, which tells leaves apart */
    int n_leaf, cap;
} dot_state;

/* A leaf's number, drawing its node the first time it is met. */
static int dot_leaf(dot_state *d, const ag_tensor *t)
{
    for (int k = 0; k < d->n_leaf; k++)
        if (d->leaf[k] == (const void *)t->data)
            return k;
    if (d->n_leaf == d->cap) {
        const int cap = d->cap ? 2 * d->cap : 64;
        const void **grown = realloc(d->leaf, sizeof *grown * (size_t)cap);
        if (!grown)
            ag_error("ag_graph_dot: out of memory for %d leaves", cap);
        d->leaf = grown;
        d->cap = cap;
    }
    const int k = d->n_leaf++;
    d->leaf[k] = (const void *)t->data;
    char s[64];
    ag_shape_str(t, s, sizeof s);
    if (t->is_param) {
        fprintf(d->out, "  t%d [shape=box, style=filled, fillcolor=\"#ffe9b0\", label=\"", k);
        dot_text(d->out, t->name);
        fprintf(d->out, "\\n%s\"];\n", s);
    } else
        fprintf(d->out, "  t%d [shape=ellipse, style=filled, fillcolor=\"#e8e8e8\", label=\"input\\n%s\"];\n", k,
                s);
    return k;
}

/* One op of ag_graph_dot's graph (its ag_graph_walk callback): the node
 * and the edges from its inputs. */
static void dot_op(const ag_graph_op *op, void *user)
{
    dot_state *d = user;
    char s[64];
    fprintf(d->out, "  n%d [shape=box, style=rounded, label=\"%s\\n%s\"];\n", op->id, op->name,
            ag_shape_str(op->out, s, sizeof s));
    for (int i = 0; i < op->n_in; i++) {
        const ag_tensor *t = op->in[i];
        if (!t)
            continue;
        if (ag_op_id(t) >= 0)
            fprintf(d->out, "  n%d -> n%d;\n", ag_op_id(t), op->id);
        else    /* a leaf used by several ops is one node */
            fprintf(d->out, "  t%d -> n%d;\n", dot_leaf(d, t), op->id);
    }
}

void ag_graph_dot(ag_ctx *ctx, ag_tensor *root, FILE *out)
{
    ag_need("ag_graph_dot", "ctx", ctx);
    ag_need("ag_graph_dot", "root", root);
    ag_need("ag_graph_dot", "out", out);
    if (ag_off_tape(ctx, root))     /* refused before anything is written */
        ag_error("ag_graph_dot: root was %s", ag_off_tape(ctx, root));
    fprintf(out, "digraph attograd {\n  rankdir=BT;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    dot_state d = { out, NULL, 0, 0 };
    ag_graph_walk(ctx, root, dot_op, &d);
    free(d.leaf);
    fprintf(out, "}\n");
}
