/*
 * step.h - one training step: the loss and gradient of a batch (or of some
 * rows of one), then the clipped, checked update.  Every trainer calls
 * these: whole batches (train/cli/train_loop.c), the micro-batch tree and
 * the ranks (train/dist/microbatch.c sums what step_gradient leaves), the
 * browser playground (train/web/playground.c).  This is the only place in
 * train/ that runs backward for an update (the walkthrough's worked
 * examples aside, and the playground's pg_graph, which runs one on
 * step_loss to draw each tensor's gradient norm, then zeroes the
 * gradients).
 *
 * The interface, kept stable:
 *   step_loss      forward and cross-entropy of some rows (the graph a step
 *                  differentiates; `attograd graph` draws it)
 *   step_gradient  step_loss, zeroed gradients, backward of weight * loss
 *   step_update    the checks, the clipping and the optimizer's update of a
 *                  gradient already in the parameters
 *   step_take      step_gradient then step_update: a whole step
 */
#ifndef ATTOGRAD_STEP_H
#define ATTOGRAD_STEP_H

#include "attograd.h"
#include "model.h"

/* Some rows of a batch and how their loss counts. */
typedef struct step_rows {
    const int32_t *x, *y;       /* inputs and targets, [rows,S] each; a target < 0 is not scored */
    int rows, S;
    double weight;              /* the loss's share of the batch's: 1 for a whole batch; a micro-batch's
                                 * counted targets over the batch's, so the shares' gradients add up to
                                 * the gradient of the batch's mean loss */
    const ag_pcg32 *dropout;    /* NULL: dropout draws from ctx's generator, which moves on (whole
                                 * batches); else from a copy of this stream, and ctx's generator is
                                 * left as it was (micro-batches: each its own stream) */
} step_rows;

/* The rows' mean cross-entropy [1], in training mode (dropout on); ctx is
 * reset first: the last step's tensors are gone. */
ag_tensor *step_loss(ag_ctx *ctx, model *m, const step_rows *r);

/* The gradient of r->weight * the rows' loss into the parameters' grad
 * (zeroed first: nothing accumulates across calls); returns the loss
 * (unweighted). */
double step_gradient(ag_ctx *ctx, model *m, const step_rows *r);

typedef enum { STEP_OK, STEP_BAD_LOSS, STEP_BAD_GRAD, STEP_BAD_UPDATE } step_status;

typedef struct step_result {
    double loss;
    step_status status;
    const ag_tensor *bad;       /* the parameter that is not finite (BAD_GRAD, BAD_UPDATE) */
} step_result;

/* With the gradient of the batch's mean loss `loss` in ps's grads: refuse a
 * non-finite loss or gradient (no update), clip the global norm to clip
 * (0: no clipping), take the optimizer's step at lr, and check the new
 * weights. */
step_result step_update(ag_params *ps, ag_optim *optim, double loss, double clip, double lr);

/* A whole step on one batch: step_gradient, then step_update. */
step_result step_take(ag_ctx *ctx, model *m, ag_optim *optim, const step_rows *batch, double clip, double lr);

#endif
