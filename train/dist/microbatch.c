/*
 * microbatch.c - gradients summed in a tree fixed by the batch alone, and
 * evaluation in fixed groups (see microbatch.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "microbatch.h"
#include "step.h"

/* ---- the tree ----------------------------------------------------------- */

/* [lo,hi) splits at lo + the largest power of two below hi - lo: a
 * complete binary tree when n is a power of two. */
static int tree_split(int lo, int hi)
{
    int half = 1;
    while (2 * half < hi - lo)
        half *= 2;
    return lo + half;
}

/* The maximal subtrees of [lo,hi) inside [a,b), left to right, appended to
 * nodes from index k; returns the new count. */
static int tree_cover(int lo, int hi, int a, int b, int (*nodes)[2], int k)
{
    if (hi <= a || b <= lo)
        return k;
    if (a <= lo && hi <= b) {
        nodes[k][0] = lo;
        nodes[k][1] = hi;
        return k + 1;
    }
    int mid = tree_split(lo, hi);
    k = tree_cover(lo, mid, a, b, nodes, k);
    return tree_cover(mid, hi, a, b, nodes, k);
}

static int rank_cover(const mb_plan *p, int q, int (*nodes)[2])
{
    return tree_cover(0, p->n, q * p->per_rank, (q + 1) * p->per_rank, nodes, 0);
}

static void add_into(ag_real *dst, const ag_real *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* ---- the plan ----------------------------------------------------------- */

int mb_default(int B)
{
    int lcm = B % 4 == 0 ? 4 : B % 2 == 0 ? 2 : 1;     /* of the N in 1..4 that divide B */
    return B / (B % 3 == 0 ? 3 * lcm : lcm);
}

static void *alloc(size_t n, int *failed)
{
    void *v = n ? malloc(n) : NULL;
    if (n && !v)
        *failed = 1;
    return v;
}

static size_t param_offset(const ag_params *ps, int i) { return (size_t)(ps->list[i]->grad - ps->grad); }

/* The buckets of the exchange (consecutive parameters, closed once they
 * hold MB_BUCKET_VALUES, more for a model too large for 500 such), each
 * cut into one slice per rank, and the buffers: what this rank sends (its
 * subtrees' slices, bucket by bucket, rank by rank) and receives (the
 * subtrees of every rank, of its slice of each bucket). */
static void plan_buckets(mb_plan *p, int *failed)
{
    const ag_params *ps = p->ps;
    int N = p->size, r = p->rank, nodes[MB_MAX_NODES][2];
    size_t want = MB_BUCKET_VALUES, in = 0;
    while (p->P / want >= 500)
        want *= 2;
    p->start = alloc((size_t)(ps->count + 1) * sizeof *p->start, failed);
    p->bucket_of = alloc((size_t)ps->count * 2 * sizeof *p->bucket_of, failed);
    if (*failed)
        return;
    p->named = p->bucket_of + ps->count;
    p->start[0] = 0;
    for (int i = 0; i < ps->count; i++) {
        p->bucket_of[i] = p->n_buckets;
        in += ps->list[i]->size;
        if (in >= want || i == ps->count - 1) {
            p->start[++p->n_buckets] = (int)(param_offset(ps, i) + ps->list[i]->size);
            in = 0;
        }
    }
    int nb = p->n_buckets;
    p->scounts = alloc((size_t)6 * nb * N * sizeof *p->scounts, failed);
    p->buckets = alloc((size_t)nb * sizeof *p->buckets, failed);
    p->left = alloc((size_t)nb * sizeof *p->left, failed);
    if (*failed)
        return;
    p->sdispls = p->scounts + nb * N, p->rcounts = p->scounts + 2 * nb * N, p->rdispls = p->scounts + 3 * nb * N;
    p->len = p->scounts + 4 * nb * N, p->off = p->scounts + 5 * nb * N;
    int got = 0, longest = 0;
    for (int b = 0; b < nb; b++) {
        int a = p->start[b], L = p->start[b + 1] - a, *off = p->off + b * N, *len = p->len + b * N;
        for (int q = 0; q < N; q++) {
            off[q] = a + (int)((long)L * q / N);
            len[q] = a + (int)((long)L * (q + 1) / N) - off[q];
            p->scounts[b * N + q] = p->n_nodes * len[q];
            p->sdispls[b * N + q] = p->n_nodes * off[q];
        }
        for (int q = 0; q < N; q++) {
            p->rcounts[b * N + q] = rank_cover(p, q, nodes) * len[r];
            p->rdispls[b * N + q] = got;
            got += p->rcounts[b * N + q];
        }
        if (len[r] > longest)
            longest = len[r];
    }
    if (N > 1) {
        p->send = alloc((size_t)p->n_nodes * p->P * sizeof(ag_real), failed);
        p->recv = alloc((size_t)got * sizeof(ag_real), failed);
        /* the partial sums down the tree of the exchange's thread */
        for (int d = 0; (1 << d) < 2 * p->n && d < 32; d++)
            p->shard_tmp[d] = alloc((size_t)longest * sizeof(ag_real) + 1, failed);
    }
    for (int b = 0; b < nb && !*failed; b++)
        p->buckets[b] = (dist_bucket){ p->send, p->scounts + b * N, p->sdispls + b * N, p->recv,
                                       p->rcounts + b * N, p->rdispls + b * N, ps->grad, p->len + b * N,
                                       p->off + b * N };
}

int mb_plan_init(mb_plan *p, ag_params *ps, int B, int M, int S, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    int N = dist_size();
    if (B % N != 0 || M < 1 || (B / N) % M != 0) {
        ag_set_err(err, errlen, "--micro-batch %d does not divide the %d rows each of %d ranks gets", M,
                   B / N, N);
        return -1;
    }
    *p = (mb_plan){ .B = B, .M = M, .n = B / M, .S = S, .rank = dist_rank(), .size = N, .ps = ps,
                    .P = ps->total, .overlap = 1 };
    p->per_rank = p->n / N;
    p->n_nodes = rank_cover(p, p->rank, p->nodes);
    int failed = 0;
    p->sums = alloc((size_t)p->n_nodes * sizeof *p->sums, &failed);
    for (int k = 0; k < p->n_nodes && !failed; k++)
        p->sums[k] = alloc(p->P * sizeof(ag_real), &failed);
    p->losses = alloc((size_t)p->n * sizeof *p->losses, &failed);
    p->loss_counts = alloc((size_t)2 * N * sizeof *p->loss_counts, &failed);   /* and loss_displs */
    if (!failed) {
        p->loss_displs = p->loss_counts + N;
        for (int q = 0; q < N; q++) {
            p->loss_counts[q] = p->per_rank;
            p->loss_displs[q] = q * p->per_rank;
        }
    }
    if (!failed && (double)p->n_nodes * (double)p->P <= 2147483647.0)
        plan_buckets(p, &failed);
    if (failed || (double)p->n_nodes * (double)p->P > 2147483647.0) {
        ag_set_err(err, errlen, "%s for the micro-batches' %d partial gradient sums of %zu parameters",
                   failed ? "out of memory" : "too many values to exchange in one call", p->n_nodes, p->P);
        mb_plan_free(p);
        return -1;
    }
    return 0;
}

void mb_plan_free(mb_plan *p)
{
    for (int k = 0; p->sums && k < p->n_nodes; k++)
        free(p->sums[k]);
    free(p->sums);
    for (int d = 0; d < 32; d++) {
        free(p->tmp[d]);
        free(p->shard_tmp[d]);
    }
    free(p->send);
    free(p->recv);
    free(p->losses);
    free(p->loss_counts);
    free(p->start);
    free(p->bucket_of);
    free(p->scounts);
    free(p->buckets);
    free(p->left);
    memset(p, 0, sizeof *p);
}

/* A partial-sum buffer of n values at tree depth d, allocated the first
 * time that depth is reached. */
static ag_real *depth_buffer(ag_real **bufs, int d, size_t n)
{
    if (d >= 32)
        ag_error("micro-batch tree deeper than 32 levels");
    if (!bufs[d] && !(bufs[d] = malloc(n * sizeof(ag_real) + 1)))
        ag_error("out of memory for a partial gradient sum of %zu values", n);
    return bufs[d];
}

/* ---- one step ----------------------------------------------------------- */

typedef struct step_input {
    ag_ctx *ctx;
    model *m;
    const int32_t *x, *y;
    double targets;             /* counted targets of the whole batch */
    uint64_t seed;
    long step;
} step_input;

/* splitmix64's finalizer: well-mixed seeds from small integers. */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Micro-batch i alone (train/model/step.c): its gradient in ps->grad, its
 * weighted loss in losses[i].  Its loss is weighted by k_i / K (its counted
 * targets over the batch's), so the micro-batches' gradients add up to the
 * batch mean's; its dropout masks come from its own stream, stream 2
 * (dropout's) seeded by (seed, step, i). */
static void micro_step(mb_plan *p, const step_input *in, int i)
{
    size_t at = (size_t)i * p->M * p->S;
    long k = 0;
    for (size_t j = 0; j < (size_t)p->M * p->S; j++)
        k += in->y[at + j] >= 0;
    ag_pcg32 dropout;
    ag_pcg32_seed(&dropout, mix(mix(mix(in->seed) ^ (uint64_t)in->step) ^ (uint64_t)i), 2);
    step_rows rows = { in->x + at, in->y + at, p->M, p->S, in->targets > 0 ? (double)k / in->targets : 0,
                       &dropout };
    p->losses[i] = step_gradient(in->ctx, in->m, &rows) * rows.weight;
}

/* dst = the sum of micro-batches [lo,hi), added in tree order.  With
 * `last` ([lo,hi) ends with the rank's last micro-batch), all but that
 * one: the additions its gradient enters are left in p->chain, to be made
 * bucket by bucket as its backward pass finishes them (finish_bucket). */
static void node_sum(mb_plan *p, const step_input *in, int lo, int hi, ag_real *dst, int depth, int last)
{
    if (hi - lo == 1) {
        if (last) {
            p->chain[p->chain_len++] = dst;
            p->chain_copy = 1;
            return;
        }
        micro_step(p, in, lo);
        memcpy(dst, p->ps->grad, p->P * sizeof *dst);
        return;
    }
    int mid = tree_split(lo, hi);
    node_sum(p, in, lo, mid, dst, depth, 0);
    if (hi - mid == 1) {
        if (last) {
            p->chain[p->chain_len++] = dst;
            p->chain_copy = 0;
            return;
        }
        micro_step(p, in, mid);
        add_into(dst, p->ps->grad, p->P);
    } else {
        ag_real *right = depth_buffer(p->tmp, depth, p->P);
        node_sum(p, in, mid, hi, right, depth + 1, last);
        if (last)
            p->chain[p->chain_len++] = dst;
        else
            add_into(dst, right, p->P);
    }
}

/* Bucket b's gradients are final: the additions node_sum left, on the
 * bucket's values alone (the same additions in the same order as on the
 * whole), then its slices to send, and off it goes. */
static void finish_bucket(mb_plan *p, int b)
{
    size_t a = (size_t)p->start[b], len = (size_t)p->start[b + 1] - a;
    for (int j = 0; j < p->chain_len; j++) {
        const ag_real *from = j == 0 ? p->ps->grad : p->chain[j - 1];
        if (j == 0 && p->chain_copy)
            memcpy(p->chain[0] + a, from + a, len * sizeof(ag_real));
        else
            add_into(p->chain[j] + a, from + a, len);
    }
    if (p->size == 1)
        return;
    const int *off = p->off + b * p->size, *slice = p->len + b * p->size;
    for (int q = 0; q < p->size; q++)
        for (int k = 0; k < p->n_nodes; k++)
            memcpy(p->send + p->sdispls[b * p->size + q] + (size_t)k * slice[q], p->sums[k] + off[q],
                   (size_t)slice[q] * sizeof(ag_real));
    dist_exchange_post(b);
}

/* Parameter i's gradient is final; its bucket goes when it is the last. */
static void param_final(mb_plan *p, int i)
{
    if (p->named[i])
        return;
    p->named[i] = 1;
    int b = p->bucket_of[i];
    if ((p->left[b] -= (int)p->ps->list[i]->size) == 0)
        finish_bucket(p, b);
}

/* The engine's word that a leaf's gradient is final (ag_set_grad_ready_hook):
 * a parameter, or parameters joined (ag_params_join), found by offset. */
static void on_grad_ready(ag_tensor *leaf, void *user)
{
    mb_plan *p = user;
    const ag_params *ps = p->ps;
    if (!leaf->grad || leaf->grad < ps->grad || leaf->grad >= ps->grad + p->P)
        return;                                 /* not a parameter */
    size_t a = (size_t)(leaf->grad - ps->grad), e = a + leaf->size;
    int lo = 0, hi = ps->count;                 /* the first parameter at a or after */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (param_offset(ps, mid) < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int i = lo; i < ps->count && param_offset(ps, i) + ps->list[i]->size <= e; i++)
        param_final(p, i);
}

/* dst = this rank's slice of bucket b of the sum of [lo,hi): a subtree one
 * rank holds is read from what it sent; one that spans ranks is its halves
 * added.  Runs on the exchange's thread (dist_exchange_start). */
static void shard_sum(mb_plan *p, int b, int lo, int hi, ag_real *dst, int depth)
{
    int q = lo / p->per_rank;
    size_t len = (size_t)p->len[b * p->size + p->rank];
    if (hi <= (q + 1) * p->per_rank) {
        int nodes[MB_MAX_NODES][2], n = rank_cover(p, q, nodes), k = 0;
        while (k < n && nodes[k][0] != lo)
            k++;
        if (k == n || nodes[k][1] != hi)
            ag_error("micro-batch tree: [%d,%d) is not a subtree of rank %d", lo, hi, q);
        memcpy(dst, p->recv + p->rdispls[b * p->size + q] + (size_t)k * len, len * sizeof *dst);
        return;
    }
    int mid = tree_split(lo, hi);
    shard_sum(p, b, lo, mid, dst, depth);
    ag_real *right = p->shard_tmp[depth];
    shard_sum(p, b, mid, hi, right, depth + 1);
    add_into(dst, right, len);
}

static void reduce_bucket(int b, void *user)
{
    mb_plan *p = user;
    shard_sum(p, b, 0, p->n, p->ps->grad + p->off[b * p->size + p->rank], 0);
}

double mb_gradient(mb_plan *p, ag_ctx *ctx, model *m, const int32_t *x, const int32_t *y, uint64_t seed, long step)
{
    step_input in = { ctx, m, x, y, 0, seed, step };
    for (size_t j = 0; j < (size_t)p->B * p->S; j++)
        in.targets += y[j] >= 0;
    if (p->size == 1 && p->n == 1) {
        micro_step(p, &in, 0);                  /* the gradient is already in place */
    } else {
        p->chain_len = 0;
        for (int k = 0; k < p->n_nodes; k++)
            node_sum(p, &in, p->nodes[k][0], p->nodes[k][1], p->sums[k], 0, k == p->n_nodes - 1);
        /* the last micro-batch: its buckets go as its backward finishes them */
        for (int b = 0; b < p->n_buckets; b++)
            p->left[b] = p->start[b + 1] - p->start[b];
        memset(p->named, 0, (size_t)p->ps->count * sizeof *p->named);
        if (p->size > 1)
            dist_exchange_start(p->buckets, p->n_buckets, reduce_bucket, p);
        if (p->size > 1 && p->overlap)
            ag_set_grad_ready_hook(ctx, on_grad_ready, p);
        micro_step(p, &in, (p->rank + 1) * p->per_rank - 1);
        ag_set_grad_ready_hook(ctx, NULL, NULL);
        for (int i = 0; i < p->ps->count; i++)
            param_final(p, i);                  /* parameters no op read, and all of them without overlap */
        if (p->size == 1)
            memcpy(p->ps->grad, p->sums[0], p->P * sizeof(ag_real));
        else if (dist_exchange_wait())
            return NAN;                         /* the ranks are lost: the caller looks at dist_lost() */
    }
    if (dist_allgather(p->losses, p->loss_counts, p->loss_displs, DIST_DOUBLE))
        return NAN;
    double loss = 0;
    for (int i = 0; i < p->n; i++)
        loss += p->losses[i];
    return loss;
}

/* ---- evaluation --------------------------------------------------------- */

eval_result mb_evaluate(ag_ctx *ctx, model *m, dataset *d, long max_windows, int rows,
                        const eval_progress *progress)
{
    int old = ag_set_grad_enabled(ctx, 0);
    long items = eval_items(d, m, TEXT_VAL, max_windows);
    int groups = (int)((items + rows - 1) / rows), N = dist_size(), rank = dist_rank();
    double *v = calloc((size_t)3 * groups + 1, sizeof *v);
    int *counts = malloc((size_t)2 * N * sizeof *counts);
    if (!v || !counts)
        ag_error("out of memory evaluating %ld items", items);
    /* rank q scores groups [groups q / N, groups (q + 1) / N) */
    for (int q = 0; q < N; q++) {
        int first = (int)((long)groups * q / N), last = (int)((long)groups * (q + 1) / N);
        counts[q] = 3 * (last - first);
        counts[N + q] = 3 * first;
    }
    const int mine = counts[N + rank] / 3, n_mine = counts[rank] / 3;
    /* in rounds of one group per rank (the last round: some ranks have
     * none), after each of which, when asked to watch a stop flag, the
     * ranks agree whether to go on: the largest flag any rank has seen, so
     * every rank stops after the same round, and none is left waiting for
     * the others in a collective */
    const int rounds = (groups + N - 1) / N;
    long stopped = 0;
    for (int k = 0; k < rounds && !stopped; k++) {
        int c = mine + k;
        if (k < n_mine) {
            eval_group(ctx, m, d, TEXT_VAL, items, (long)c * rows, rows, v + 3 * c);
            if (progress && progress->fn)   /* this rank's share: the others' run alongside */
                progress->fn(progress->user, (long)(c - mine + 1) * rows, (long)n_mine * rows);
        }
        if (progress && progress->stop && k + 1 < rounds) {
            stopped = *progress->stop;
            dist_max(&stopped, 1);
            if (dist_lost())
                break;                      /* the caller looks at dist_lost() */
        }
    }
    if (!stopped && !dist_lost())
        dist_allgather(v, counts, counts + N, DIST_DOUBLE);
    double total[3] = { 0, 0, 0 };
    for (int c = 0; c < groups; c++)
        for (int i = 0; i < 3; i++)
            total[i] += v[3 * c + i];
    free(v);
    free(counts);
    ag_set_grad_enabled(ctx, old);
    eval_result r = eval_result_of(d, total);
    r.stopped = (int)stopped;
    return r;
}
