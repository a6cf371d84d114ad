/*
 * test_example.c - the usage example at the top of include/attograd.h,
 * line for line, with its stated results checked.
 */
#include "attograd.h"
#include "check.h"

int main(void)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_params *ps = ag_params_new();
    ag_tensor *w = ag_params_add(ps, "w", 1, (int[]){3});
    ag_params_alloc(ps);
    w->data[0] = 1; w->data[1] = -2; w->data[2] = 3;

    ag_reset(ctx);
    ag_tensor *x = ag_from(ctx, 1, (int[]){3}, (ag_real[]){2, 2, 2});
    ag_tensor *y = ag_sum_all(ctx, ag_relu(ctx, ag_mul(ctx, x, w)));
    ag_params_zero_grad(ps);
    ag_backward(ctx, y);

    CHECK(y->data[0] == 8, "y = %g, the header says 8", (double)y->data[0]);
    CHECK(w->grad[0] == 2 && w->grad[1] == 0 && w->grad[2] == 2, "w->grad = {%g, %g, %g}, the header says {2, 0, 2}",
          (double)w->grad[0], (double)w->grad[1], (double)w->grad[2]);
    ag_params_free(ps);
    ag_ctx_free(ctx);
    return check_done();
}
