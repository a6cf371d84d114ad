/*
 * fuzz_log.c - libFuzzer entry point for the CSV training log, as
 * `attograd plot` and `attograd train --resume --log` read it (svg.c).
 * The input is the log file's bytes.
 *
 * plot: svg_read_log either refuses the file with one line naming it (and
 * leaves the log empty), or gives one row per whole non-blank line after
 * the header, every step finite, and a row cut short named only when it is
 * the last line and has no newline; svg_plot_logs then draws it.
 *
 * resume: the header test that reads no more than a header's bytes agrees
 * with svg_log_is_header on the first line; svg_log_resume_scan and
 * svg_log_resume_copy, at a few checkpoint steps, keep a subsequence of the
 * lines, each whole (with its newline), the header first when it is one (a
 * header that is the whole file with no newline given one, bytes and all);
 * a scan that drops nothing copies the file as it is, and a copy scanned
 * again has nothing left to drop (no whole row past the step either:
 * svg_log_rows_after, which counts those a resume refuses to drop unasked,
 * each a line the scan would drop); a log plot reads stays one it reads.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_POSIX_C_SOURCE=200809L \
 *       -Iinclude -Isrc -Itrain/cli tests/fuzz_log.c train/cli/svg.c src/fileio.c -lm -o fuzz_log
 *   ./fuzz_log corpus tests/corpus/log -max_total_time=60
 */
#define _GNU_SOURCE   /* memfd_create: the input as a file, in memory */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "svg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a bug in the reader: crash so the fuzzer records it. */
#define MUST(cond) do { if (!(cond)) abort(); } while (0)

/* The bytes as a file, a path to it, or NULL where there is no memfd. */
static const char *as_file(int *fd, const void *bytes, size_t n, const char *name)
{
    static char paths[2][64];
    int slot = name[0] == 'o';
    if (*fd == -2) *fd = memfd_create(name, 0);
    if (*fd < 0) return NULL;
    MUST(ftruncate(*fd, 0) == 0 && (n == 0 || pwrite(*fd, bytes, n, 0) == (ssize_t)n));
    snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", *fd);
    return paths[slot];
}

/* Lines: how many, and how many rows plot reads (whole lines after the
 * first that are not blank once their "\n" or "\r\n" is taken off). */
static void count_lines(const uint8_t *b, size_t n, long *lines, long *rows)
{
    *lines = *rows = 0;
    for (size_t at = 0; at < n;) {
        const uint8_t *nl = memchr(b + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - b) + 1 : n;
        size_t len = end - at;
        (*lines)++;
        if (nl && *lines > 1) {
            size_t body = len - 1 - (len >= 2 && b[end - 2] == '\r');
            *rows += body > 0;
        }
        at = end;
    }
}

/* plot's reading: returns 1 when the log is read. */
static int check_plot(const char *path, const uint8_t *data, size_t size)
{
    svg_log log;
    char err[512] = "";
    long lines, rows;
    count_lines(data, size, &lines, &rows);
    if (svg_read_log(path, &log, err, sizeof err) != 0) {
        MUST(err[0] && !strpbrk(err, "\n\r") && strstr(err, path));
        MUST(log.n == 0 && !log.step && !log.train_loss && !log.tokens_per_s && log.cut_line == 0);
        return 0;
    }
    int cut = size > 0 && data[size - 1] != '\n' && lines > 1;
    MUST(log.cut_line == (cut ? lines : 0));
    /* every whole line after the header is a row, but a blank one */
    MUST(log.n == rows);
    for (int i = 0; i < log.n; i++)
        MUST(isfinite(log.step[i]));
    /* drawn: whatever the numbers, the picture is written or refused in one line */
    char *svg = NULL;
    size_t svg_len = 0;
    FILE *out = open_memstream(&svg, &svg_len);
    MUST(out);
    const char *paths[1] = { path };
    err[0] = 0;
    int rc = svg_plot_logs(out, "fuzz", 1, paths, err, sizeof err);
    MUST(fclose(out) == 0);
    MUST(rc == 0 ? svg_len > 0 && strstr(svg, "</svg>") : err[0] && !strpbrk(err, "\n\r"));
    free(svg);
    svg_log_free(&log);
    MUST(log.n == 0 && !log.step);
    return 1;
}

/* The lines of out are lines of in, in order, each whole. */
static void check_subsequence(const uint8_t *in, size_t nin, const char *out, size_t nout)
{
    size_t at = 0;
    for (size_t o = 0; o < nout;) {
        const char *nl = memchr(out + o, '\n', nout - o);
        MUST(nl);                           /* whole lines only */
        size_t len = (size_t)(nl - out) + 1 - o;
        /* the next line of in that is this one */
        int found = 0;
        while (at < nin && !found) {
            const uint8_t *inl = memchr(in + at, '\n', nin - at);
            size_t ilen = inl ? (size_t)(inl - in) + 1 - at : nin - at;
            found = ilen == len && memcmp(in + at, out + o, len) == 0;
            at += ilen;
        }
        MUST(found);
        o += len;
    }
}

/* What a resumed run keeps of the log at checkpoint step `step`. */
static void check_resume(const char *path, const uint8_t *data, size_t size, long step, int plot_reads)
{
    static int fd_out = -2;
    long lines, rows, cut;
    count_lines(data, size, &lines, &rows);
    FILE *in = fopen(path, "r");
    MUST(in);
    int drop = svg_log_resume_scan(in, step, &cut);
    MUST(drop == 0 || drop == 1);
    MUST(cut == (size > 0 && data[size - 1] != '\n' && lines > 1 ? lines : 0));
    MUST(!cut || drop);
    /* the whole rows past the step, which a resume drops only when told
     * (--truncate-log): among the lines, each a reason to rewrite, the
     * largest step past the checkpoint's */
    MUST(fseek(in, 0, SEEK_SET) == 0);
    double last;
    long after = svg_log_rows_after(in, step, &last);
    MUST(after >= 0 && after <= lines && (!after || (drop && last > (double)step)));
    MUST(fseek(in, 0, SEEK_SET) == 0);
    char *kept = NULL;
    size_t nkept = 0;
    FILE *out = open_memstream(&kept, &nkept);
    MUST(out);
    MUST(svg_log_resume_copy(in, out, step) == 0);
    MUST(fclose(out) == 0);
    fclose(in);
    /* a header with no newline, the whole file: kept, given its newline */
    int unended = size > 0 && !memchr(data, '\n', size) && svg_log_is_header((const char *)data, size);
    if (unended)
        MUST(drop == 1 && nkept == size + 1 && memcmp(kept, data, size) == 0 && kept[size] == '\n');
    else
        check_subsequence(data, size, kept, nkept);
    /* nothing to drop: the copy is the file */
    if (!drop)
        MUST(nkept == size && memcmp(kept, data, size) == 0);
    else if (!unended)
        MUST(nkept < size);
    /* the header, when the first line is one with its newline, stays first */
    const uint8_t *nl = size ? memchr(data, '\n', size) : NULL;
    if (nl && svg_log_is_header((const char *)data, (size_t)(nl - data) + 1))
        MUST(nkept >= (size_t)(nl - data) + 1 && memcmp(kept, data, (size_t)(nl - data) + 1) == 0);
    /* the copy, scanned again, has nothing to drop; read by plot, it is
     * read as the file was (or is empty: a first line cut short that is no
     * header goes too) */
    const char *again = as_file(&fd_out, kept, nkept, "out");
    if (again) {
        FILE *f = fopen(again, "r");
        MUST(f);
        long cut2;
        MUST(svg_log_resume_scan(f, step, &cut2) == 0 && cut2 == 0);
        MUST(fseek(f, 0, SEEK_SET) == 0 && svg_log_rows_after(f, step, &last) == 0);
        fclose(f);
        if (plot_reads && nkept > 0) {
            svg_log log;
            char err[512] = "";
            MUST(svg_read_log(again, &log, err, sizeof err) == 0 && log.cut_line == 0);
            svg_log_free(&log);
        }
    }
    free(kept);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -2;
    const char *path = as_file(&fd, data, size, "log");
    if (!path)
        return 0;                       /* no memfd here: nothing to read */
    int reads = check_plot(path, data, size);

    /* the first line, as a resume tests it */
    FILE *in = fopen(path, "r");
    MUST(in);
    const uint8_t *nl = size ? memchr(data, '\n', size) : NULL;
    size_t first = nl ? (size_t)(nl - data) + 1 : size;
    MUST(svg_log_starts_with_header(in) == svg_log_is_header((const char *)data, first));
    fclose(in);
    MUST(!reads || svg_log_is_header((const char *)data, first));

    /* resumed at step 0, at a step within the log (the second line's, as
     * strtol reads it), and past every step */
    long mid = 5;
    if (nl && (size_t)(nl - data) + 1 < size) {
        char buf[24];
        size_t at = (size_t)(nl - data) + 1, n = size - at < sizeof buf - 1 ? size - at : sizeof buf - 1;
        memcpy(buf, data + at, n);
        buf[n] = 0;
        mid = strtol(buf, NULL, 10);
    }
    const long steps[] = { 0, mid, LONG_MAX / 2 + 1 };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        check_resume(path, data, size, steps[i], reads);
    return 0;
}
