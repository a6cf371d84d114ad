/*
 * cli.h - the attograd subcommands.  Each takes the arguments after its
 * name and returns the process exit status.
 */
#ifndef ATTOGRAD_CLI_H
#define ATTOGRAD_CLI_H

/* cmd_train.c */
int cmd_train(int argc, char **argv);
/* cmd_eval.c: what reads a saved model */
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_info(int argc, char **argv);
/* cmd_viz.c: pictures */
int cmd_attn(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_graph(int argc, char **argv);
/* cmd_walkthrough.c: the tutorials' worked examples */
int cmd_walkthrough(int argc, char **argv);

#endif
