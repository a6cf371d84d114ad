/*
 * args.h - the command line: a table of options per subcommand, parsed
 * strictly (whole-token numbers, ranges checked), with --help generated from
 * the same table.  Any problem is one line on stderr and exit status 2.
 */
#ifndef ATTOGRAD_ARGS_H
#define ATTOGRAD_ARGS_H

typedef enum { OPT_INT, OPT_LONG, OPT_INT64, OPT_DOUBLE, OPT_STRING, OPT_FLAG, OPT_STRINGS } opt_kind;

typedef struct opt {
    const char *name;       /* "--lr" */
    opt_kind kind;
    void *dst;              /* int*, long*, int64_t*, double*, const char**, int* (flag), or opt_list* */
    const char *metavar;    /* "X" in "--lr X" */
    const char *help;
    double min, max;        /* inclusive range for numbers */
    int min_open;           /* the range excludes min (e.g. lr > 0) */
    int required;           /* OPT_REQUIRED: the parser refuses a command line without it */
    int given;              /* set by the parser */
} opt;

#define OPT_REQUIRED 1

/* A repeatable string option (e.g. --log a.csv --log b.csv). */
typedef struct opt_list {
    const char *items[16];
    int n;
} opt_list;

/* Parse argv[0..argc) (the words after the subcommand) against opts.  Prints usage and exits 0 on --help
 * (1 when standard output cannot be written);
 * exits 2 with one line naming the problem on anything else wrong (also a
 * required option not given: "--model FILE is required"). */
void args_parse(const char *cmd, const char *summary, int argc, char **argv, opt *opts, int nopts);
/* status when standard output was written whole; otherwise one line
 * "attograd <cmd>: cannot write standard output: <reason>" on stderr and
 * status, or 1 when status is 0.  cmd may be NULL (the command itself). */
int args_stdout_written(const char *cmd, int status);
/* The one of names[0..n) that word was likely meant as: the one it begins
 * (at least min_prefix characters of it: --temp for --temperature) or, when
 * none does, the one it is an edit away from (a letter changed, added,
 * dropped, or two neighbours swapped; at least min_edit characters: trian
 * for train), when only one is; else NULL. */
const char *args_meant(const char *word, const char *const *names, int n, size_t min_prefix, size_t min_edit);
/* The option named `name` in opts (for `given`). */
opt *args_find(opt *opts, int nopts, const char *name);
/* Set o from text exactly as the command line would (type and range
 * checked); -1, with o unchanged, when text is not a valid value. */
int args_set(opt *o, const char *text);
/* o's value as text that args_set reads back to the same value. */
void args_format(const opt *o, char *buf, size_t len);
/* Where die() and --help end: exit(status) unless a program (the fuzzer)
 * installs a hook that does not return (it longjmps). */
extern void (*args_exit_hook)(int status);

/* "attograd <cmd>: <message>" (cmd NULL: "attograd: <message>") on stderr, in one line (a newline in
 * the message, from a path say, is written as a space); die then exits 2. */
void warn(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void die(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3), noreturn))
#endif
    ;

#endif
