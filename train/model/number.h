/*
 * number.h - how attograd reads a number, wherever it is written: a flag
 * of the command, a setting a checkpoint records, a field of the page.
 * Its own file, so the command line's reader (train/cli/args.c) and its
 * fuzzer need nothing else of the model library.
 */
#ifndef ATTOGRAD_NUMBER_H
#define ATTOGRAD_NUMBER_H

/* A number is the whole text, decimal (strtod would read C's hex floats
 * and strtol skips leading white space; both refused), -0 read as 0.  RUN_NUMBER with *v; RUN_NOT_NUMBER (also "inf" and "nan");
 * RUN_PAST_RANGE, *v the sign's extreme (LLONG_MIN or MAX, -inf or inf),
 * for an integer past a long long or a real past a double; RUN_NEAR_0 for a
 * real other than 0 below a double's smallest normal magnitude (1e-320,
 * or 1e-400, which strtod makes 0). */
enum { RUN_NUMBER, RUN_NOT_NUMBER, RUN_PAST_RANGE, RUN_NEAR_0 };
int run_read_integer(const char *text, long long *v);
int run_read_real(const char *text, double *v);

#endif
