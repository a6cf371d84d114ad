/*
 * cli.h - the attograd subcommands.  Each takes the arguments after its
 * name and returns the process exit status.
 */
#ifndef ATTOGRAD_CLI_H
#define ATTOGRAD_CLI_H

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);

#endif
