/*
 * walkthrough.h - the attention tutorials' worked examples (the
 * "Hello shiny sun!" context vector, trainable projections and their
 * gradients, the causal mask two ways, dropout, two heads, the bag-of-words
 * average, scaling), computed by the engine and written as text.
 */
#ifndef ATTOGRAD_WALKTHROUGH_H
#define ATTOGRAD_WALKTHROUGH_H

#include <stdio.h>

#define WALKTHROUGH_SECTIONS 7

/* Every section (only == 0) or section `only` (1..WALKTHROUGH_SECTIONS) to
 * f, each step with the functions that compute it. */
void walkthrough_write(FILE *f, int only);

#endif
