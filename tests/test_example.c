/*
 * test_example.c - the usage example at the top of include/attograd.h,
 * compiled from the header's own text (the Makefile extracts it into
 * header_example.inc), with the results the header states checked before
 * the example frees its tensors.
 */
#include "attograd.h"
#include "check.h"

/* The example ends by freeing the parameters: check its results first.
 * (The parenthesized name below calls the function, not this macro.) */
#define ag_params_free(ps) (check_results(y, w), (ag_params_free)(ps))

static void check_results(const ag_tensor *y, const ag_tensor *w)
{
    CHECK(y->data[0] == 8, "y = %g, the header says 8", (double)y->data[0]);
    CHECK(w->grad[0] == 2 && w->grad[1] == 0 && w->grad[2] == 2, "w->grad = {%g, %g, %g}, the header says {2, 0, 2}",
          (double)w->grad[0], (double)w->grad[1], (double)w->grad[2]);
}

int main(void)
{
#include "header_example.inc"
    CHECK(check_passed == 2, "the example ran to its end and its results were checked");
    return check_done();
}
