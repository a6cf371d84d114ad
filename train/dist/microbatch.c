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
                    .P = ps->total };
    p->per_rank = p->n / N;
    p->n_nodes = rank_cover(p, p->rank, p->nodes);
    int failed = 0;
    p->sums = alloc((size_t)p->n_nodes * sizeof *p->sums, &failed);
    for (int k = 0; k < p->n_nodes && !failed; k++)
        p->sums[k] = alloc(p->P * sizeof(ag_real), &failed);
    p->losses = alloc((size_t)p->n * sizeof *p->losses, &failed);
    int *ints = alloc((size_t)8 * N * sizeof *ints, &failed);
    if (!failed) {
        p->scounts = ints, p->sdispls = ints + N, p->rcounts = ints + 2 * N, p->rdispls = ints + 3 * N;
        p->shard_len = ints + 4 * N, p->shard_off = ints + 5 * N;
        p->loss_counts = ints + 6 * N, p->loss_displs = ints + 7 * N;
        /* shard q: parameters [q P / N, (q+1) P / N) */
        for (int q = 0; q < N; q++) {
            p->shard_off[q] = (int)(p->P * (size_t)q / (size_t)N);
            p->shard_len[q] = (int)(p->P * (size_t)(q + 1) / (size_t)N) - p->shard_off[q];
            p->loss_counts[q] = p->per_rank;
            p->loss_displs[q] = q * p->per_rank;
        }
        int sent = 0, got = 0, nodes[MB_MAX_NODES][2];
        for (int q = 0; q < N; q++) {
            p->scounts[q] = p->n_nodes * p->shard_len[q];
            p->sdispls[q] = sent;
            sent += p->scounts[q];
            p->rcounts[q] = rank_cover(p, q, nodes) * p->shard_len[p->rank];
            p->rdispls[q] = got;
            got += p->rcounts[q];
        }
        if (N > 1) {
            p->send = alloc((size_t)sent * sizeof(ag_real), &failed);
            p->recv = alloc((size_t)got * sizeof(ag_real), &failed);
        }
    }
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
    free(p->scounts);
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

/* dst = the sum of micro-batches [lo,hi), added in tree order. */
static void node_sum(mb_plan *p, const step_input *in, int lo, int hi, ag_real *dst, int depth)
{
    if (hi - lo == 1) {
        micro_step(p, in, lo);
        memcpy(dst, p->ps->grad, p->P * sizeof *dst);
        return;
    }
    int mid = tree_split(lo, hi);
    node_sum(p, in, lo, mid, dst, depth);
    if (hi - mid == 1) {
        micro_step(p, in, mid);
        add_into(dst, p->ps->grad, p->P);
    } else {
        ag_real *right = depth_buffer(p->tmp, depth, p->P);
        node_sum(p, in, mid, hi, right, depth + 1);
        add_into(dst, right, p->P);
    }
}

/* dst = this rank's shard of the sum of [lo,hi): a subtree one rank holds
 * is read from what it sent; one that spans ranks is its halves added. */
static void shard_sum(mb_plan *p, int lo, int hi, ag_real *dst, int depth)
{
    int q = lo / p->per_rank;
    size_t len = (size_t)p->shard_len[p->rank];
    if (hi <= (q + 1) * p->per_rank) {
        int nodes[MB_MAX_NODES][2], n = rank_cover(p, q, nodes), k = 0;
        while (k < n && nodes[k][0] != lo)
            k++;
        if (k == n || nodes[k][1] != hi)
            ag_error("micro-batch tree: [%d,%d) is not a subtree of rank %d", lo, hi, q);
        memcpy(dst, p->recv + p->rdispls[q] + (size_t)k * len, len * sizeof *dst);
        return;
    }
    int mid = tree_split(lo, hi);
    shard_sum(p, lo, mid, dst, depth);
    ag_real *right = depth_buffer(p->shard_tmp, depth, len);
    shard_sum(p, mid, hi, right, depth + 1);
    add_into(dst, right, len);
}

double mb_gradient(mb_plan *p, ag_ctx *ctx, model *m, const int32_t *x, const int32_t *y, uint64_t seed, long step)
{
    step_input in = { ctx, m, x, y, 0, seed, step };
    for (size_t j = 0; j < (size_t)p->B * p->S; j++)
        in.targets += y[j] >= 0;
    if (p->size == 1 && p->n == 1) {
        micro_step(p, &in, 0);                  /* the gradient is already in place */
    } else {
        for (int k = 0; k < p->n_nodes; k++)
            node_sum(p, &in, p->nodes[k][0], p->nodes[k][1], p->sums[k], 0);
        if (p->size == 1) {
            memcpy(p->ps->grad, p->sums[0], p->P * sizeof(ag_real));
        } else {
            /* to rank q: the slices of shard q of this rank's subtrees */
            for (int q = 0; q < p->size; q++)
                for (int k = 0; k < p->n_nodes; k++)
                    memcpy(p->send + p->sdispls[q] + (size_t)k * p->shard_len[q], p->sums[k] + p->shard_off[q],
                           (size_t)p->shard_len[q] * sizeof(ag_real));
            if (dist_alltoall(p->send, p->scounts, p->sdispls, p->recv, p->rcounts, p->rdispls, DIST_REAL) == 0) {
                shard_sum(p, 0, p->n, p->ps->grad + p->shard_off[p->rank], 0);
                dist_allgather(p->ps->grad, p->shard_len, p->shard_off, DIST_REAL);
            }
        }
    }
    if (dist_allgather(p->losses, p->loss_counts, p->loss_displs, DIST_DOUBLE))
        return NAN;                             /* the ranks are lost: the caller looks at dist_lost() */
    double loss = 0;
    for (int i = 0; i < p->n; i++)
        loss += p->losses[i];
    return loss;
}

/* ---- evaluation --------------------------------------------------------- */

eval_result mb_evaluate(ag_ctx *ctx, model *m, dataset *d, long max_windows, int rows)
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
    for (int c = counts[N + rank] / 3; c < (counts[N + rank] + counts[rank]) / 3; c++)
        eval_group(ctx, m, d, TEXT_VAL, items, (long)c * rows, rows, v + 3 * c);
    dist_allgather(v, counts, counts + N, DIST_DOUBLE);
    double total[3] = { 0, 0, 0 };
    for (int c = 0; c < groups; c++)
        for (int i = 0; i < 3; i++)
            total[i] += v[3 * c + i];
    free(v);
    free(counts);
    ag_set_grad_enabled(ctx, old);
    return eval_result_of(d, total);
}
