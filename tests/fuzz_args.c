/*
 * fuzz_args.c - libFuzzer entry point for the command-line parser.  The
 * input is split at NUL bytes into argv.  The parser must either accept it,
 * with every given number inside its option's range and every string taken
 * from argv, or end through args_exit_hook: status 2 on an error (after one
 * line on stderr), status 0 only when an argument is -h or --help.
 *
 * The subcommands' option tables are local to each command, and calling a
 * command itself would start training or write files on a valid argv; so
 * this harness parses against its own table with one option of every kind
 * and the range shapes the commands use (closed, open at the bottom, up to
 * 1e15 and 9.2e18), which exercises the same parser code.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc -Itrain/cli tests/fuzz_args.c train/cli/args.c -o fuzz_args
 *   ./fuzz_args corpus tests/corpus/args -max_total_time=60
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MUST(cond) do { if (!(cond)) abort(); } while (0)

enum { MAX_ARGS = 64 };

static jmp_buf escape;
static void jump_out(int status) { longjmp(escape, status + 1); }   /* +1: 0 is setjmp's own */

/* Defaults no valid parse can produce, to tell "left alone" from "set". */
typedef struct values {
    int layers, quiet;
    long steps;
    int64_t seed;
    double lr, dropout, clip;
    const char *text;
    opt_list logs;
} values;

/* -1 when args_parse returns (accepted), else the status it left with. */
static int parse_status(int argc, char **argv, opt *opts, int nopts)
{
    int jumped = setjmp(escape);
    if (jumped)
        return jumped - 1;
    args_parse("fuzz", "parser fuzzing", argc, argv, opts, nopts);
    return -1;
}

static const values DEFAULTS = { -7, 0, -7, -7, -7, -7, -7, NULL, { { NULL }, 0 } };

static int from_argv(const char *p, char **argv, int argc)
{
    for (int i = 0; i < argc; i++)
        if (p >= argv[i] && p <= argv[i] + strlen(argv[i]))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* argv: each NUL-terminated piece in its own allocation, so reading past
     * one is an error the sanitizer sees */
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i < size && data[i] != 0)
            continue;
        size_t len = i - start;
        argv[argc] = malloc(len + 1);
        MUST(argv[argc]);
        memcpy(argv[argc], data + start, len);
        argv[argc][len] = 0;
        argc++;
        start = i + 1;
    }
    argv[argc] = NULL;
    int asks_help = 0;
    for (int i = 0; i < argc; i++)
        asks_help |= strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0;

    values v = DEFAULTS;
    opt opts[] = {
        { "--layers", OPT_INT, &v.layers, "N", "an int in [1, 256]", 1, 256, 0, 0, 0 },
        { "--steps", OPT_LONG, &v.steps, "N", "a long in [0, 1e15]", 0, 1e15, 0, 0, 0 },
        { "--seed", OPT_INT64, &v.seed, "S", "a 64-bit integer in [0, 9.2e18]", 0, 9.2e18, 0, 0, 0 },
        { "--lr", OPT_DOUBLE, &v.lr, "X", "a number in (0, 1e6]", 0, 1e6, 1, 0, 0 },
        { "--dropout", OPT_DOUBLE, &v.dropout, "P", "a number in [0, 0.999999]", 0, 0.999999, 0, 0, 0 },
        { "--clip", OPT_DOUBLE, &v.clip, "X", "a number in [0, 1e308]", 0, 1e308, 0, 0, 0 },
        { "--text", OPT_STRING, &v.text, "FILE", "a string", 0, 0, 0, 0, 0 },
        { "--quiet", OPT_FLAG, &v.quiet, NULL, "a flag", 0, 0, 0, 0, 0 },
        { "--log", OPT_STRINGS, &v.logs, "FILE", "a repeatable string", 0, 0, 0, 0, 0 },
    };
    int nopts = (int)(sizeof opts / sizeof opts[0]);

    void (*saved_hook)(int) = args_exit_hook;
    args_exit_hook = jump_out;
    int status = parse_status(argc, argv, opts, nopts);
    if (status < 0) {
        /* accepted ("--text --help" is a file named --help): each value is what its option allows */
        MUST(opts[0].given ? v.layers >= 1 && v.layers <= 256 : v.layers == DEFAULTS.layers);
        MUST(opts[1].given ? v.steps >= 0 && v.steps <= 1000000000000000L : v.steps == DEFAULTS.steps);
        MUST(opts[2].given ? v.seed >= 0 && (double)v.seed <= 9.2e18 : v.seed == DEFAULTS.seed);
        MUST(opts[3].given ? v.lr > 0 && v.lr <= 1e6 : v.lr == DEFAULTS.lr);
        MUST(opts[4].given ? v.dropout >= 0 && v.dropout <= 0.999999 : v.dropout == DEFAULTS.dropout);
        MUST(opts[5].given ? v.clip >= 0 && v.clip <= 1e308 : v.clip == DEFAULTS.clip);
        MUST(opts[6].given ? v.text && *v.text && from_argv(v.text, argv, argc) : v.text == NULL);
        MUST(v.quiet == opts[7].given);
        MUST(v.logs.n >= 0 && v.logs.n <= 16 && (v.logs.n > 0) == opts[8].given);
        for (int i = 0; i < v.logs.n; i++)
            MUST(v.logs.items[i] && *v.logs.items[i] && from_argv(v.logs.items[i], argv, argc));
        /* every word was consumed by an option: at most one value each */
        int words = 0;
        for (int i = 0; i < nopts; i++)
            words += opts[i].given ? (opts[i].kind == OPT_FLAG ? 1 : 2) : 0;
        MUST(words + (v.logs.n > 1 ? 2 * (v.logs.n - 1) : 0) >= argc);
    } else {
        MUST(status == 0 || status == 2);
        MUST(status == 2 || asks_help);
    }
    args_exit_hook = saved_hook;
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
