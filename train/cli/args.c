/*
 * args.c - strict option parsing for the attograd subcommands.  A number
 * must be the whole token ("1e-3x" is refused), inside the option's range;
 * a value-taking option must have a value; unknown options are named.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "attograd_io.h"
#include "run.h"

void (*args_exit_hook)(int status);

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static void leave(int status)
{
    if (args_exit_hook)
        args_exit_hook(status);
    exit(status);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 0)))
#endif
static void vwarn(const char *cmd, const char *fmt, va_list ap)
{
    /* one line, whatever the values hold: a path or a flag's value may
     * carry a newline ("--lr $'1\n2'"), written as a space; another control
     * byte (a terminal's escape, from a file's bad line) as \xNN */
    static char msg[4 * 4 * 4096];             /* room for 4 * 4096 bytes, each escaped */
    vsnprintf(msg, sizeof msg / 4, fmt, ap);
    ag_one_line(msg, sizeof msg);            /* the library's rule (attograd_io.h) */
    fprintf(stderr, "attograd%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "", msg);
}

void warn(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(cmd, fmt, ap);
    va_end(ap);
}

void die(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(cmd, fmt, ap);
    va_end(ap);
    leave(2);
}

/* die(cmd, ...), or only -1 when there is no cmd to report for. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int refuse(const char *cmd, const char *fmt, ...)
{
    if (!cmd)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vwarn(cmd, fmt, ap);
    va_end(ap);
    leave(2);
}

/* A command whose output could not be written did not do its job, however
 * it ended: a script reading `attograd eval >result` must learn that the
 * disk was full (main.c asks for every command but train, which says itself
 * when its progress lines stop; --help asks below). */
int args_stdout_written(const char *cmd, int status)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    int e = errno;
    fprintf(stderr, "attograd%s%s: cannot write standard output%s%s\n", cmd ? " " : "", cmd ? cmd : "",
            e ? ": " : "", e ? strerror(e) : "");
    return status ? status : 1;
}

opt *args_find(opt *opts, int nopts, const char *name)
{
    for (int i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

static void usage(const char *cmd, const char *summary, const opt *opts, int nopts)
{
    /* a summary "attograd CMD FILE [...]: text" gives its own usage line
     * (a command with an argument that is not an option: info FILE) */
    char own[64];
    size_t n = (size_t)snprintf(own, sizeof own, "attograd %s ", cmd);
    const char *colon = strstr(summary, ": ");
    if (n < sizeof own && strncmp(summary, own, n) == 0 && colon && !memchr(summary, '\n', (size_t)(colon - summary)))
        printf("usage: %.*s\n\n%s\n\noptions:\n", (int)(colon - summary), summary, colon + 2);
    else
        printf("usage: attograd %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (int i = 0; i < nopts; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", opts[i].name, opts[i].metavar ? " " : "",
                 opts[i].metavar ? opts[i].metavar : "");
        printf("  %-22s %s%s\n", left, opts[i].help, opts[i].required ? " (required)" : "");
    }
    printf("  %-22s %s\n", "-h, --help", "show this help");
}

/* -1 (after die() when cmd is given) when out is set: text is outside o's range */
static int range_check(const char *cmd, const opt *o, int out, const char *text)
{
    if (out) {
        char lo[32], hi[32];
        /* an integer's bounds in full (9200000000000000000, not 9.2e+18) */
        if (o->kind == OPT_DOUBLE) {
            snprintf(lo, sizeof lo, "%.10g", o->min);
            snprintf(hi, sizeof hi, "%.10g", o->max);
        } else {
            snprintf(lo, sizeof lo, "%.0f", o->min);
            snprintf(hi, sizeof hi, "%.0f", o->max);
        }
        /* both bounds, clip's 1e308 too: --clip 1e309 is past it, not
         * below a ">= 0" said alone */
        return refuse(cmd, "%s %s is out of range: it must be %s %s and <= %s", o->name, text, o->min_open ? ">" : ">=",
                      lo, hi);
    }
    return 0;
}

/* Store text in o's destination when it is a valid value; else -1, after
 * die() when cmd is given. */
static int parse_value(const char *cmd, opt *o, const char *text)
{
    switch (o->kind) {
    case OPT_INT:
    case OPT_LONG:
    case OPT_INT64: {
        long long v;
        int r = run_read_integer(text, &v);     /* decimal, the whole token */
        if (r == RUN_NOT_NUMBER)
            return refuse(cmd, "%s expects an integer, got '%s'", o->name, text);
        /* a whole integer past long long's range is past the option's too:
         * said as such, not as something other than an integer */
        if (range_check(cmd, o, r == RUN_PAST_RANGE || !run_int_in_range(v, o->min, o->min_open, o->max), text))
            return -1;
        if (o->kind == OPT_INT)
            *(int *)o->dst = (int)v;
        else if (o->kind == OPT_LONG)
            *(long *)o->dst = (long)v;
        else
            *(int64_t *)o->dst = (int64_t)v;
        break;
    }
    case OPT_DOUBLE: {
        /* decimal only, as the integers ("0x10" is not 16); -0 read as 0,
         * since a value is recorded and compared as text ("%.17g" writes
         * -0) and --momentum 0 must match a run given -0 */
        double v;
        int r = run_read_real(text, &v);
        if (r == RUN_NOT_NUMBER)
            return refuse(cmd, "%s expects a number, got '%s'", o->name, text);
        /* one too close to 0 (1e-400) is said to be, not read as 0 or
         * refused as out of a range it is inside; one too large for a
         * double is out of range */
        if (r == RUN_NEAR_0)
            return refuse(cmd, "%s %s is too close to 0: below a double's smallest normal magnitude "
                          "(about 2.2e-308)", o->name, text);
        if (range_check(cmd, o, r == RUN_PAST_RANGE || !(o->min_open ? v > o->min : v >= o->min) || !(v <= o->max),
                        text))
            return -1;
        *(double *)o->dst = v;
        break;
    }
    case OPT_STRING:
        if (!*text)
            return refuse(cmd, "%s expects a value, got an empty string", o->name);
        *(const char **)o->dst = text;
        break;
    case OPT_STRINGS: {
        opt_list *l = o->dst;
        if (!*text)
            return refuse(cmd, "%s expects a value, got an empty string", o->name);
        if (l->n == (int)(sizeof l->items / sizeof l->items[0]))
            return refuse(cmd, "%s given too many times (at most %d)", o->name, l->n);
        l->items[l->n++] = text;
        break;
    }
    case OPT_FLAG:
        break;
    }
    return 0;
}

int args_set(opt *o, const char *text)
{
    return parse_value(NULL, o, text);
}

void args_format(const opt *o, char *buf, size_t len)
{
    switch (o->kind) {
    case OPT_INT:
    case OPT_FLAG:
        snprintf(buf, len, "%d", *(const int *)o->dst);
        break;
    case OPT_LONG:
        snprintf(buf, len, "%ld", *(const long *)o->dst);
        break;
    case OPT_INT64:
        snprintf(buf, len, "%" PRId64, *(const int64_t *)o->dst);
        break;
    case OPT_DOUBLE:
        snprintf(buf, len, "%.17g", *(const double *)o->dst);
        break;
    case OPT_STRING:
        snprintf(buf, len, "%s", *(const char *const *)o->dst ? *(const char *const *)o->dst : "");
        break;
    case OPT_STRINGS:
        snprintf(buf, len, "%d", ((const opt_list *)o->dst)->n);
        break;
    }
}

/* Whether a and b differ by at most one letter changed, added, dropped or
 * two neighbours swapped (--seeds, --setps: --seed, --steps). */
static int one_edit(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i = 0;
    if (la > lb + 1 || lb > la + 1) return 0;
    while (i < la && i < lb && a[i] == b[i]) i++;
    if (la == lb)
        return strcmp(a + i + (i < la), b + i + (i < lb)) == 0 ||
               (i + 1 < la && a[i] == b[i + 1] && a[i + 1] == b[i] && strcmp(a + i + 2, b + i + 2) == 0);
    return la < lb ? strcmp(a + i, b + i + 1) == 0 : strcmp(a + i + 1, b + i) == 0;
}

const char *args_meant(const char *word, const char *const *names, int n, size_t min_prefix, size_t min_edit)
{
    const char *found = NULL;
    size_t len = strlen(word);
    for (int pass = 0; pass < 2 && !found; pass++)
        for (int i = 0; i < n; i++) {
            int close = pass == 0 ? len >= min_prefix && strncmp(names[i], word, len) == 0
                                  : len >= min_edit && one_edit(word, names[i]);
            if (close && found) return NULL;
            if (close) found = names[i];
        }
    return found;
}

/* The option an unknown name was likely meant as: the one it begins (--temp:
 * --temperature) or is one edit away from, when only one is; else NULL. */
static const char *meant(const char *name, const opt *opts, int nopts)
{
    const char *names[128];
    int n = 0;
    for (int i = 0; i < nopts && n < (int)(sizeof names / sizeof names[0]); i++)
        names[n++] = opts[i].name;
    return args_meant(name, names, n, 4, 5);
}

void args_parse(const char *cmd, const char *summary, int argc, char **argv, opt *opts, int nopts)
{
    /* -h or --help anywhere shows the help, even where a value was due
     * ("--text --help"); a file of that name can be given as ./--help */
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(cmd, summary, opts, nopts);
            leave(args_stdout_written(cmd, 0));
        }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        /* --name=value is accepted as well as --name value */
        char name[64];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name)
            len = sizeof name - 1;
        memcpy(name, a, len);
        name[len] = 0;
        opt *o = strncmp(a, "--", 2) == 0 ? args_find(opts, nopts, name) : NULL;
        if (!o) {
            const char *guess = strncmp(a, "--", 2) == 0 ? meant(name, opts, nopts) : NULL;
            if (guess)
                die(cmd, "unknown option '%s' (did you mean %s? see attograd %s --help)", a, guess, cmd);
            if (a[0] == '-')
                die(cmd, "unknown option '%s' (see attograd %s --help)", a, cmd);
            die(cmd, "unexpected argument '%s' (options start with --; see attograd %s --help)", a, cmd);
        }
        if (o->given && o->kind != OPT_STRINGS)
            die(cmd, "%s given twice", o->name);
        o->given = 1;
        if (o->kind == OPT_FLAG) {
            if (eq)
                die(cmd, "%s takes no value", o->name);
            *(int *)o->dst = 1;
            continue;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                die(cmd, "%s needs a value (%s)", o->name, o->metavar ? o->metavar : "value");
            value = argv[++i];
        }
        parse_value(cmd, o, value);
    }
    for (int i = 0; i < nopts; i++)
        if (opts[i].required && !opts[i].given)
            die(cmd, "%s%s%s is required", opts[i].name, opts[i].metavar ? " " : "",
                opts[i].metavar ? opts[i].metavar : "");
}
