/*
 * gen_examples.c - prints examples of a toy task, one per line in the text
 * form task_format gives them: training problems drawn from a seed, or the
 * held-out evaluation set.  It writes data/copy.txt ... data/add.txt:
 *
 *   gcc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Iinclude -Itrain/model data/gen_examples.c \
 *       train/model/tasks.c src/pcg32.c src/mathfn.c src/fileio.c -lm -o gen_examples
 *   for t in copy reverse sort add; do ./gen_examples $t 300 1 > data/$t.txt; done
 *   ./gen_examples sort heldout 1        (the held-out set instead)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: gen_examples TASK COUNT|heldout SEED\n");
        return 2;
    }
    char err[256], line[64];
    task t;
    if (task_open(&t, argv[1], err, sizeof err)) {
        fprintf(stderr, "gen_examples: %s\n", err);
        return 2;
    }
    uint64_t seed = strtoull(argv[3], NULL, 10);
    int32_t seq[64];
    if (strcmp(argv[2], "heldout") == 0) {
        int32_t *h;
        int n = task_heldout(&t, seed, &h);
        if (n < 0) {
            fprintf(stderr, "gen_examples: out of memory\n");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            task_format(&t, h + (size_t)i * (t.len + 1), t.len + 1, line, sizeof line);
            printf("%s\n", line);
        }
        free(h);
        return 0;
    }
    long count = strtol(argv[2], NULL, 10);
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, seed, 0);
    for (long i = 0; i < count; i++) {
        task_draw(&t, &rng, seq);
        task_format(&t, seq, t.len + 1, line, sizeof line);
        printf("%s\n", line);
    }
    return 0;
}
