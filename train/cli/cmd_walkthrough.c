/*
 * cmd_walkthrough.c - `attograd walkthrough`: the tutorials' worked examples
 * (train/model/walkthrough.c) on standard output.
 */
#include <stdio.h>

#include "args.h"
#include "attograd.h"
#include "cli.h"
#include "walkthrough.h"

int cmd_walkthrough(int argc, char **argv)
{
    const char *CMD = "walkthrough";
    int only = 0;
    opt opts[] = { { "--section", OPT_INT, &only, "N", "print only section N, 1..7 (default: all)", 1,
                     WALKTHROUGH_SECTIONS, 0, 0, 0 } };
    args_parse(CMD, "The worked examples of the attention tutorials, computed step by step by the engine:\n"
                    "dot-product scores, softmax, context vectors, trainable projections and their\n"
                    "gradients, the causal mask two ways, dropout, heads, the bag-of-words average, scaling.",
               argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    ag_set_threads(1);   /* matrices of a few numbers */
    walkthrough_write(stdout, only);
    return 0;
}
