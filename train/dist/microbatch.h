/*
 * microbatch.h - a training step whose numbers do not depend on how many
 * ranks share it.
 *
 * The global batch of B rows is cut into n = B / M micro-batches of M rows.
 * Each micro-batch's gradient is computed alone (zero the gradients,
 * forward, backward) with its loss weighted by its share of the batch's
 * counted targets, so the micro-batches' gradients add up to the gradient
 * of the batch's mean loss, and with its own dropout stream, drawn from
 * (seed, step, micro-batch index).  The n gradients are then added in one
 * fixed binary tree over the micro-batch indices: [lo,hi) is the sum of
 * [lo,mid) and [mid,hi), mid = lo + the largest power of two below hi - lo.
 * Rank r owns the micro-batches [r n/N, (r+1) n/N) and adds up the largest
 * subtrees that lie inside them; the ranks exchange those partial sums by
 * parameter shards (rank q receives everyone's slices of shard q and adds
 * them up the rest of the tree), then gather the shards.  Every addition is
 * the same on any number of ranks N that divides n, so every rank ends the
 * step with the same bits as one process would.
 *
 * The exchange overlaps the backward pass of the rank's last micro-batch,
 * as PyTorch's DistributedDataParallel does: the parameters are cut into
 * buckets of consecutive parameters, and a bucket goes out (dist.h's
 * exchange) as soon as the engine says every gradient in it is final
 * (ag_set_grad_ready_hook), the output layers' first.  A bucket's slices
 * are cut from the same tree sums, each element added in the same order,
 * so the bits do not change: only when they travel.
 */
#ifndef ATTOGRAD_MICROBATCH_H
#define ATTOGRAD_MICROBATCH_H

#include "model.h"
#include "run.h"

/* Subtrees a rank can hold: at most two per level of the tree. */
#define MB_MAX_NODES 128
/* Values in a bucket of the exchange (at least; whole parameters): 4 MB
 * of fp32, a layer of a model of d_model 512 or so. */
#define MB_BUCKET_VALUES (1 << 20)

typedef struct mb_plan {
    int B, M, n, S;             /* batch rows, rows per micro-batch, micro-batches, tokens per row */
    int rank, size, per_rank;   /* micro-batches per rank: n / size */
    ag_params *ps;
    size_t P;                   /* parameters */
    int n_nodes;                /* this rank's subtrees (maximal ones inside its micro-batches) */
    int nodes[MB_MAX_NODES][2];
    ag_real **sums;             /* their sums, [n_nodes][P] */
    ag_real *tmp[32];           /* partial sums down the tree, [P] each, allocated when needed */
    ag_real *send, *recv;       /* the exchange: this rank's subtrees' slices, the others' of its shard */
    ag_real *shard_tmp[32];     /* partial sums of its slice of a bucket, allocated at the start */
    double *losses;             /* [n]: each micro-batch's weighted loss */
    int *loss_counts, *loss_displs;
    /* the exchange in buckets: bucket b is parameters' values [start[b], start[b+1]), rank q's slice of it
     * [off[b][q], off[b][q] + len[b][q]); the all-to-all's counts and displacements per bucket */
    int n_buckets, *start, *bucket_of;  /* bucket_of: [parameters] */
    int *scounts, *sdispls, *rcounts, *rdispls, *len, *off;    /* [n_buckets][size] each */
    struct dist_bucket *buckets;
    int *left, *named;          /* per step: values of bucket b not final yet; parameters named final */
    int overlap;                /* send buckets during backward (1, the default), or after it (0) */
    /* the additions left when the rank's last micro-batch has run: chain[0] = (or +=) its gradient,
     * then chain[j] += chain[j-1]; chain[chain_len-1] is its subtree's sum */
    ag_real *chain[34];
    int chain_len, chain_copy;
} mb_plan;

/* A plan for batches of B rows of S tokens in micro-batches of M rows over
 * dist_size() ranks; -1 with a message when M does not divide this rank's
 * B / N rows (or N does not divide B), or memory runs out. */
int mb_plan_init(mb_plan *p, ag_params *ps, int B, int M, int S, char *err, size_t errlen);
void mb_plan_free(mb_plan *p);

/* The gradient of the mean loss over the batch x, y ([B,S] each, the same
 * on every rank) into ps's gradients, on every rank; returns that loss.
 * ctx's dropout generator is left as it was.  NAN when this rank has given
 * up on the others (dist_lost()): the gradients are then half made. */
double mb_gradient(mb_plan *p, ag_ctx *ctx, model *m, const int32_t *x, const int32_t *y, uint64_t seed, long step);

/* evaluate() for training (the validation split; at most max_windows
 * windows when > 0, a task's held-out problems), its groups of `rows` items
 * split between the ranks and added up in order: the number evaluate()
 * gives in one process with the same rows, on any number of ranks.  With
 * progress->stop set, the ranks agree after each round of groups (one per
 * rank) on the largest stop value any has seen, and all end it there, cut
 * short, together. */
eval_result mb_evaluate(ag_ctx *ctx, model *m, dataset *d, long max_windows, int rows,
                        const eval_progress *progress);

/* The default micro-batch of the MPI build: the largest that lets every N
 * from 1 to 4 that divides B split the batch (B / 4 for B = 32, B / 12 for
 * a B that 12 divides). */
int mb_default(int B);

#endif
