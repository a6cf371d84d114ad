/*
 * svg.h - pictures of what a model learned: attention heatmaps (one panel per
 * head) and training-loss curves, written as standalone SVG documents.
 * Pure C with no dependency on the autograd engine; also reads attograd's CSV
 * training logs so `attograd plot` can draw them.
 */
#ifndef ATTOGRAD_SVG_H
#define ATTOGRAD_SVG_H

#include <stddef.h>
#include <stdio.h>

/* How svg_attention draws the cells: one <rect> each, with its tooltip; one
 * PNG image a panel, a pixel a cell (4 bytes against about 140); or rects
 * up to SVG_RECT_CELLS_MAX cells in the picture and images past it. */
typedef enum { SVG_CELLS_AUTO, SVG_CELLS_RECTS, SVG_CELLS_IMAGE } svg_cells;
#define SVG_RECT_CELLS_MAX 32768

/*
 * Draw n_panels heatmaps (one per head) in a grid of up to 4 per row, each
 * rows x cols of weights in [0,1]:
 *   weights[p*rows*cols + i*cols + j] = attention of query i to key j in panel p.
 * As rects (cells), every cell is one <rect class="cell ..."> with a <title> tooltip
 * "query 3 'c' → key 1 'd': 0.123"; as an image, each panel's cells are one
 * <image class="cells"> over a <rect class="masked-area">. Exact zeros (the masked future in a causal
 * model) are hatched grey so the causal triangle stands out; NaN is hatched too.
 * row_labels/col_labels: one string per row/column, any bytes; they are shown
 * visibly (space as ␣, newline as ⏎, tab as ⇥, other control bytes and
 * invalid UTF-8 as \xNN) and XML-escaped. Either may be NULL (indices are used).
 * panel_titles may be NULL ("head p"), title may be NULL.
 * Returns 0, or -1 with err filled on bad arguments or a write error.
 */
int svg_attention(FILE *out, const char *title, int n_panels, const char *const *panel_titles,
                  const float *weights, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels, svg_cells cells,
                  char *err, size_t errlen);

/* One line of a chart: n points (x[k], y[k]); points with a non-finite x or y
 * are skipped and the line joins the neighbours around them. */
typedef struct svg_series {
    const char *label;
    int n;
    const double *x;
    const double *y;
} svg_series;

/*
 * Line chart with axes ticked at 1-2-5 steps, axis labels, a title and a
 * legend entry per series (class="legend-entry"); each series is one
 * <path class="series">. dashed (may be NULL) marks series drawn dashed, with
 * a dot per point when they are sparse (validation losses measured every few
 * steps). Colors: each solid series takes the next color of a colorblind-safe
 * palette; a dashed series that directly follows a solid one shares its color,
 * so a run's train (solid) and val (dashed) curves read as a pair.
 * Returns 0, or -1 with err filled on bad arguments or a write error.
 */
int svg_lines(FILE *out, const char *title, const char *xlabel, const char *ylabel,
              const svg_series *series, const int *dashed, int n_series,
              char *err, size_t errlen);

/* The exact header line of an attograd training log (`attograd train --log`). */
#define SVG_LOG_HEADER "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s"

/* A UTF-8 byte-order mark, which an editor may put before a log's header. */
#define SVG_LOG_BOM "\xEF\xBB\xBF"

/* What `plot` and a resumed run (`train --resume`, continuing its --log)
 * both take a log's lines to be, from the same two tests.  line is len
 * bytes as read, with its newline when it has one.
 * svg_log_is_header: 1 when line is the header, SVG_LOG_HEADER, after a
 * byte-order mark or not, ended by a newline, CR LF, or the end of the file.
 * svg_log_row_cut: 1 when line is a row cut short: it has no newline at its
 * end.  Every row is written with its newline, so only a last line can lack
 * one, when a run was killed or a disk filled part way through writing it
 * (its last number may be cut too, and look whole).  `plot` leaves it out
 * and says so; a resumed run drops it (the next row would continue it). */
int svg_log_is_header(const char *line, size_t len);
int svg_log_row_cut(const char *line, size_t len);

/* A resumed run given the run's --log again continues it from the
 * checkpoint's step (train_setup.c): these read the log from in, as a
 * stream, so that what reads it is the same code wherever the log is.
 * svg_log_starts_with_header: whether in's first line is the header
 * (svg_log_is_header), reading no more of it than a header line can be (a
 * longer first line is no header, and is not read whole).
 * svg_log_resume_drops: whether line (len bytes as getline reads it, NUL
 * after them) is to go: a row cut short (svg_log_row_cut), or a row whose
 * step, read as plot reads it, is after `step` (the header is no row).
 * svg_log_resume_scan: reads in to its end: 1 when the log is to be
 * rewritten (a line is to go, or a header with no newline after it is to be
 * given one), 0 when it stays as it is, -1 on a read error; *cut: the line
 * number of a last row cut short (not the first line, which is no row),
 * else 0.
 * svg_log_resume_copy: the lines of in that stay, written to out, a first
 * line that is the header with no newline (svg_log_is_header: byte-order
 * mark and all) given its newline: 0, or -1 on a read error of in (out's
 * errors are out's). */
int svg_log_starts_with_header(FILE *in);
int svg_log_resume_drops(const char *line, size_t len, long step);
int svg_log_resume_scan(FILE *in, long step, long *cut);
int svg_log_resume_copy(FILE *in, FILE *out, long step);
/* svg_log_rows_after: the whole rows of in (not one cut short) whose step,
 * read as svg_log_resume_drops reads it, is after `step`, and in *last the
 * largest of those steps: rows a resume would drop that a run wrote whole
 * after the checkpoint was saved; -1 on a read error. */
long svg_log_rows_after(FILE *in, long step, double *last);

/* An attograd training log, one entry per row; NaN where a field was empty
 * (val_loss and val_acc are only measured at eval steps).  cut_line: the
 * line number of a last row cut short (svg_log_row_cut), which is not among
 * the rows; 0 when there is none. */
typedef struct svg_log {
    int n;
    double *step, *train_loss, *val_loss, *val_acc, *lr, *ms_per_step, *tokens_per_s;
    long cut_line;
} svg_log;

/*
 * Read the CSV log at path into log (which svg_log_free releases). Rejects,
 * with a one-line message naming the file (and line, where there is one): a
 * missing or unreadable file, a directory, an empty file, a first line that
 * is not the header (svg_log_is_header), a row with the wrong number of fields, a field that is not a
 * number, an empty step or one that is not finite (nan, inf). Blank lines and a final CR per line are tolerated,
 * and a last row cut short is left out (log->cut_line says where it was).
 * Returns 0, or -1 with err filled and log left empty.
 */
int svg_read_log(const char *path, svg_log *log, char *err, size_t errlen);
void svg_log_free(svg_log *log);

/*
 * What `attograd plot` draws: for each log file, its train loss as a solid
 * line and its val loss as a dashed line of the same color, labeled
 * "<basename> train" / "<basename> val", against the step.
 * Returns 0, or -1 with err filled (the first log that fails to read, or a
 * write error).
 */
int svg_plot_logs(FILE *out, const char *title, int n_logs, const char *const *paths,
                  char *err, size_t errlen);

/*
 * Tick values for an axis covering [lo, hi]: a step of 1, 2 or 5 times a power
 * of ten chosen so there are at most max_ticks ticks, and the ticks are the
 * multiples of that step from floor(lo/step) to ceil(hi/step), so they
 * enclose [lo, hi]. Writes up to cap values to ticks and returns their count
 * (0 if lo or hi is not finite, hi < lo, or max_ticks < 2).
 */
int svg_nice_ticks(double lo, double hi, int max_ticks, double *ticks, int cap);

#endif
