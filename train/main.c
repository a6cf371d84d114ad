/*
 * main.c - the attograd command: one binary, a subcommand per job.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "attograd.h"
#include "cli.h"
#include "files.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    { "train", cmd_train, "train a model on a toy task or a text file (default: the copy task)" },
    { "eval", cmd_eval, "mean next-token loss (and task accuracy) of a saved model" },
    { "sample", cmd_sample, "generate text (or a task's answer) from a saved model" },
    { "info", cmd_info, "a checkpoint's config, parameter count and tensors" },
    { "attn", cmd_attn, "attention heatmap (SVG) of a saved model on a prompt" },
    { "plot", cmd_plot, "loss curves (SVG) from training logs" },
    { "graph", cmd_graph, "autograd graph of one training step (Graphviz DOT)" },
    { "walkthrough", cmd_walkthrough, "the tutorials' worked examples, computed by the engine" },
};

/* An error the engine raises (an allocation that fails, a shape it
 * refuses) ends the command as the command's own errors do: one line naming
 * the subcommand, and the exit hook run.  The MPI build's ranks put a
 * handler of their own in its place (train/dist/dist.c). */
static const char *running;

static void engine_error(const char *msg, void *user)
{
    (void)user;
    die(running, "%s", msg);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: attograd <command> [options]\n"
                 "       attograd --version\n\n"
                 "A minimal reverse-mode autograd engine that trains multi-head causal\n"
                 "self-attention on toy next-token tasks or a text file.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'attograd <command> --help' (or 'attograd help <command>') describes a command's options;\n"
                 "'attograd --version' names the version, precision and kernels of this build.\n");
}

/* A command that is none of them, with the one it was likely meant as
 * (trian: train; --verison: --version), as an unknown option is named. */
static void unknown_command(const char *where, const char *word)
{
    const char *names[sizeof commands / sizeof commands[0] + 2];
    int n = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[n++] = commands[i].name;
    if (!*where) {
        names[n++] = "--help";
        names[n++] = "--version";
    }
    const char *guess = args_meant(word, names, n, 2, 3);
    if (guess)
        die(NULL, "%sunknown command '%s' (did you mean %s? see attograd --help)", where, word, guess);
    die(NULL, "%sunknown command '%s' (see attograd --help)", where, word);
}

int main(int argc, char **argv)
{
    hold_standard_fds();
    /* a file past the size limit (ulimit -f) fails its write with EFBIG,
     * which each output reports in one line, its temporary file removed:
     * SIGXFSZ would end the process there, leaving that file and the locks */
    signal(SIGXFSZ, SIG_IGN);
    /* SIGUSR1 asks train for a checkpoint (train_loop.c); the other
     * commands have none to make, and a scheduler's warning (sbatch
     * --signal=USR1@120) or a stray kill -USR1 must not end them */
    signal(SIGUSR1, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* `attograd help train` is `attograd train --help` */
    if (strcmp(argv[1], "help") == 0 && argc > 3)
        die(NULL, "help takes one command (got '%s' after '%s')", argv[3], argv[2]);
    if (strcmp(argv[1], "help") == 0 && argc > 2)
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(argv[2], commands[i].name) == 0) {
                char *help[] = { "--help", NULL };
                return args_stdout_written(argv[2], commands[i].fn(1, help));
            }
    if (strcmp(argv[1], "help") == 0 && argc > 2)
        unknown_command("help: ", argv[2]);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return args_stdout_written(NULL, 0);
    }
    if (strcmp(argv[1], "--version") == 0 && argc > 2)
        die(NULL, "--version takes no arguments (got '%s')", argv[2]);
    if (strcmp(argv[1], "--version") == 0) {
        printf("attograd 0.1 (%s, %s kernels)\n", AG_PRECISION_NAME, ag_kernels_name());
        return args_stdout_written(NULL, 0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            running = commands[i].name;
            ag_set_error_handler(engine_error, NULL);
            int status = commands[i].fn(argc - 2, argv + 2);
            /* train's work is the checkpoint: it says itself when its
             * progress lines stop (train_loop.c) */
            return strcmp(argv[1], "train") == 0 ? status : args_stdout_written(argv[1], status);
        }
    unknown_command("", argv[1]);
}
