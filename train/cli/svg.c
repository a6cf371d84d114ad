/*
 * svg.c - attention heatmaps and loss curves as standalone SVG, plus the
 * reader for attograd's CSV training logs. Output is plain XML written with
 * fprintf; write errors are caught once at the end through ferror.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attograd_io.h"
#include "svg.h"

/* Flush and report whether anything written to out failed. */
static int finish(FILE *out, const char *what, char *err, size_t errlen)
{
    if (fflush(out) != 0 || ferror(out)) {
        ag_set_err(err, errlen, "%s: write error: %s", what, strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Text: XML escaping and making every byte visible                         */
/* ------------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if the bytes
 * there are not one. Overlong forms, surrogates, code points above U+10FFFF
 * and the XML-forbidden U+FFFE/U+FFFF count as malformed. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF)) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        return 4;
    }
    return 0;
}

/*
 * Write s as XML character data (safe in attributes too) in which every byte
 * is visible: & < > " ' become entities, newline ⏎, tab ⇥, other control
 * bytes, DEL and malformed UTF-8 \xNN; with visible_space a space is ␣ (a
 * token label that is a space must not look empty). Stops before a unit that
 * would take the display width past limit. out may be NULL to only measure.
 * Returns the display width written, in characters.
 */
static int emit_text(FILE *out, const char *s, int visible_space, int limit)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    int cols = 0;
    while (*p) {
        const char *rep = NULL;
        char hex[8];
        int nbytes = 1, w = 1;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        case '\n': rep = "\xE2\x8F\x8E"; break; /* U+23CE return symbol */
        case '\t': rep = "\xE2\x87\xA5"; break; /* U+21E5 rightwards arrow to bar */
        case ' ': rep = visible_space ? "\xE2\x90\xA3" : " "; break; /* U+2423 open box */
        default:
            nbytes = utf8_len(p);
            if (*p < 0x20 || *p == 0x7F || nbytes == 0) {
                snprintf(hex, sizeof hex, "\\x%02x", *p);
                rep = hex;
                nbytes = 1;
                w = 4;
            }
        }
        if (cols + w > limit) break;
        if (out) {
            if (rep) fputs(rep, out);
            else fwrite(p, 1, (size_t)nbytes, out);
        }
        cols += w;
        p += nbytes;
    }
    return cols;
}

/* emit_text cut to at most max_cols characters, the last being "…" when cut. */
static void put_text(FILE *out, const char *s, int visible_space, int max_cols)
{
    int total = emit_text(NULL, s, visible_space, INT_MAX);
    if (max_cols <= 0 || total <= max_cols) {
        emit_text(out, s, visible_space, INT_MAX);
    } else {
        emit_text(out, s, visible_space, max_cols - 1);
        fputs("\xE2\x80\xA6", out);
    }
}

static int text_width(const char *s, int visible_space, int max_cols)
{
    int w = emit_text(NULL, s, visible_space, INT_MAX);
    return max_cols > 0 && w > max_cols ? max_cols : w;
}

/* ------------------------------------------------------------------------ */
/* Color                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct { unsigned char r, g, b; } rgb;

static double srgb_gamma(double c)
{
    c = c < 0 ? 0 : c > 1 ? 1 : c;
    return c <= 0.0031308 ? 12.92 * c : 1.055 * pow(c, 1 / 2.4) - 0.055;
}

/* CIELAB (D65 white) to 8-bit sRGB, clipping out-of-gamut channels. */
static rgb lab_to_rgb(double L, double a, double b)
{
    const double d = 6.0 / 29.0;
    double fy = (L + 16) / 116, fx = fy + a / 500, fz = fy - b / 200;
    double f[3] = {fx, fy, fz}, xyz[3];
    for (int k = 0; k < 3; k++)
        xyz[k] = f[k] > d ? f[k] * f[k] * f[k] : 3 * d * d * (f[k] - 4.0 / 29.0);
    double X = 0.95047 * xyz[0], Y = xyz[1], Z = 1.08883 * xyz[2];
    double R = 3.2406 * X - 1.5372 * Y - 0.4986 * Z;
    double G = -0.9689 * X + 1.8758 * Y + 0.0415 * Z;
    double B = 0.0557 * X - 0.2040 * Y + 1.0570 * Z;
    rgb c = {(unsigned char)lround(255 * srgb_gamma(R)), (unsigned char)lround(255 * srgb_gamma(G)),
             (unsigned char)lround(255 * srgb_gamma(B))};
    return c;
}

/*
 * The heatmap colormap, white (0) to dark blue (1). Lightness falls linearly
 * in CIELAB, L* = 97 - 75 t, so equal steps in weight look like equal steps
 * in darkness; chroma grows from 0 and the hue turns from cyan-blue
 * (h = 235°) to indigo (h = 285°) so the dark end stays clearly blue.
 */
static rgb colormap(double t)
{
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    const double pi = 3.14159265358979323846;
    double L = 97 - 75 * t;
    double C = 58 * pow(t, 0.75);
    double h = (235 + 50 * t) * pi / 180;
    return lab_to_rgb(L, C * cos(h), C * sin(h));
}

/* ------------------------------------------------------------------------ */
/* Attention heatmaps                                                       */
/* ------------------------------------------------------------------------ */

#define FONT_SANS "DejaVu Sans, Helvetica, Arial, sans-serif"
#define FONT_MONO "DejaVu Sans Mono, Menlo, Consolas, monospace"
#define MONO_ADVANCE 0.62 /* width of one monospace character, in ems */
#define LABEL_MAX_COLS 12 /* longer token labels are cut with "…" */
#define PANELS_PER_ROW 4

/* Everything about where a heatmap panel's parts go, in pixels. */
typedef struct {
    int cell;          /* side of one cell */
    double label_font; /* token label size */
    int row_label_w;   /* band left of the grid for row labels */
    int col_label_h;   /* band above the grid for column labels */
    int grid_x, grid_y; /* grid origin within the panel */
    int panel_w, panel_h;
} panel_layout;

static const char *label_or_index(const char *const *labels, int i, char *buf, size_t len)
{
    if (labels && labels[i]) return labels[i];
    snprintf(buf, len, "%d", i);
    return buf;
}

static int max_label_width(const char *const *labels, int n)
{
    char buf[16];
    int w = 0;
    for (int i = 0; i < n; i++) {
        int wi = text_width(label_or_index(labels, i, buf, sizeof buf), 1, LABEL_MAX_COLS);
        if (wi > w) w = wi;
    }
    return w;
}

static panel_layout layout_panel(int rows, int cols, const char *const *row_labels,
                                 const char *const *col_labels)
{
    panel_layout L;
    int n = rows > cols ? rows : cols;
    /* About 450 px of grid, with cells no smaller than 11 px (64 tokens
     * stay legible) and no larger than 32 px (8 tokens do not sprawl). */
    L.cell = 450 / n;
    if (L.cell < 11) L.cell = 11;
    if (L.cell > 32) L.cell = 32;
    L.label_font = L.cell * 0.72 < 14 ? L.cell * 0.72 : 14;
    double char_w = MONO_ADVANCE * L.label_font;
    L.row_label_w = (int)ceil(max_label_width(row_labels, rows) * char_w) + 6;
    /* Column labels that fit across a cell (single characters) stay level;
     * wider ones are stood on end, and the band is as tall as the tallest. */
    double col_w = max_label_width(col_labels, cols) * char_w;
    L.col_label_h = (int)ceil(L.label_font) + 5;
    if (col_w > L.cell && col_w + 6 > L.col_label_h) L.col_label_h = (int)ceil(col_w) + 6;
    const int axis_band = 18, title_band = 22, pad = 22;
    L.grid_x = axis_band + L.row_label_w;
    L.grid_y = title_band + axis_band + L.col_label_h;
    L.panel_w = L.grid_x + cols * L.cell + pad;
    L.panel_h = L.grid_y + rows * L.cell + pad;
    return L;
}

static void write_hatch_pattern(FILE *out)
{
    /* Masked cells: pale grey with thin diagonal lines, unlike any colormap
     * value (the colormap's 0 is plain white). */
    fputs("<defs>\n"
          "<pattern id=\"masked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\""
          " patternTransform=\"rotate(45)\">"
          "<rect width=\"6\" height=\"6\" fill=\"#ececec\"/>"
          "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b4b4b4\" stroke-width=\"1.5\"/>"
          "</pattern>\n",
          out);
    /* The color bar runs from 1 at the top to 0 at the bottom. */
    fputs("<linearGradient id=\"cmap\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n", out);
    for (int k = 0; k <= 16; k++) {
        rgb c = colormap(k / 16.0);
        fprintf(out, "<stop offset=\"%g\" stop-color=\"#%02x%02x%02x\"/>\n", k / 16.0, c.r, c.g, c.b);
    }
    fputs("</linearGradient>\n</defs>\n", out);
}

static void write_cell_rects(FILE *out, const float *w, int rows, int cols, const panel_layout *L,
                             const char *const *row_labels, const char *const *col_labels)
{
    char rb[16], cb[16];
    fprintf(out, "<g shape-rendering=\"crispEdges\" transform=\"translate(%d,%d)\">\n", L->grid_x,
            L->grid_y);
    for (int i = 0; i < rows; i++) {
        const char *rl = label_or_index(row_labels, i, rb, sizeof rb);
        for (int j = 0; j < cols; j++) {
            float v = w[(size_t)i * cols + j];
            int masked = v == 0.0f || isnan(v);
            fprintf(out, "<rect class=\"cell%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"",
                    masked ? " masked" : "", j * L->cell, i * L->cell, L->cell, L->cell);
            if (masked) {
                fputs(" fill=\"url(#masked)\"", out);
            } else {
                rgb c = colormap(v);
                fprintf(out, " fill=\"#%02x%02x%02x\"", c.r, c.g, c.b);
            }
            fprintf(out, "><title>query %d '", i);
            put_text(out, rl, 1, 0);
            fprintf(out, "' \xE2\x86\x92 key %d '", j);
            put_text(out, label_or_index(col_labels, j, cb, sizeof cb), 1, 0);
            fprintf(out, "': %.3f</title></rect>\n", (double)v);
        }
    }
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#777\"/>\n",
            cols * L->cell, rows * L->cell);
    fputs("</g>\n", out);
}

/* ---- cells as one image -------------------------------------------------- */

/* A <rect> with its tooltip takes about 140 bytes a cell: a prompt of 256
 * tokens drawn for 4 heads is 262,144 cells, over 30 MB of SVG that a
 * browser takes seconds to open.  Past SVG_RECT_CELLS_MAX cells (or when
 * asked) each panel's cells are one PNG image instead, a pixel a cell (4
 * bytes), scaled up without smoothing; the masked cells are transparent
 * over a hatched rectangle, so they look as they do as rects.  The PNG is
 * the simplest valid one: RGBA, 8 bits a channel, no row filter, its zlib
 * stream made of stored (uncompressed) deflate blocks. */

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* CRC-32 of PNG's chunks (ISO 3309: reflected polynomial 0xEDB88320). */
static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

/* A chunk at p: length, type, data (already at p + 8), CRC of type and
 * data.  Returns the chunk's whole size. */
static size_t png_chunk(unsigned char *p, const char type[4], size_t len)
{
    put_be32(p, (uint32_t)len);
    memcpy(p + 4, type, 4);
    put_be32(p + 8 + len, crc32_of(p + 4, len + 4));
    return len + 12;
}

/* The PNG of one panel's cells into a new buffer (*n bytes), or NULL when
 * memory runs out. */
static unsigned char *cells_png(const float *w, int rows, int cols, size_t *n)
{
    const size_t row_bytes = 1 + 4 * (size_t)cols, raw = (size_t)rows * row_bytes;
    const size_t blocks = (raw + 65534) / 65535;            /* a stored block holds up to 65535 bytes */
    const size_t zlen = 2 + raw + 5 * blocks + 4;           /* header, blocks, Adler-32 */
    const size_t total = 8 + (12 + 13) + (12 + zlen) + 12;
    unsigned char *png = malloc(total), *pix = malloc(raw);
    if (!png || !pix) {
        free(png);
        free(pix);
        return NULL;
    }
    for (int i = 0; i < rows; i++) {
        unsigned char *r = pix + (size_t)i * row_bytes;
        r[0] = 0;                                           /* filter: none */
        for (int j = 0; j < cols; j++) {
            const float v = w[(size_t)i * cols + j];
            unsigned char *px = r + 1 + 4 * (size_t)j;
            if (v == 0.0f || isnan(v)) {
                memset(px, 0, 4);                           /* masked: the hatching shows through */
            } else {
                rgb c = colormap(v);
                px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
            }
        }
    }
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    unsigned char *p = png;
    memcpy(p, signature, 8);
    p += 8;
    unsigned char *ihdr = p + 8;
    put_be32(ihdr, (uint32_t)cols);
    put_be32(ihdr + 4, (uint32_t)rows);
    ihdr[8] = 8;                                            /* bits a channel */
    ihdr[9] = 6;                                            /* RGBA */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;                     /* deflate, adaptive filters, no interlace */
    p += png_chunk(p, "IHDR", 13);
    unsigned char *z = p + 8;
    *z++ = 0x78;                                            /* deflate, 32 KB window */
    *z++ = 0x01;                                            /* (0x7801 is a multiple of 31) */
    uint32_t a = 1, b = 0;                                  /* Adler-32 */
    for (size_t off = 0; off < raw;) {
        const size_t len = raw - off < 65535 ? raw - off : 65535;
        *z++ = off + len == raw ? 1 : 0;                    /* BFINAL on the last, BTYPE 00: stored */
        *z++ = (unsigned char)len;
        *z++ = (unsigned char)(len >> 8);
        *z++ = (unsigned char)~len;
        *z++ = (unsigned char)(~len >> 8);
        memcpy(z, pix + off, len);
        for (size_t k = 0; k < len; k++) {
            a = (a + pix[off + k]) % 65521;
            b = (b + a) % 65521;
        }
        z += len;
        off += len;
    }
    put_be32(z, (b << 16) | a);
    z += 4;
    p += png_chunk(p, "IDAT", (size_t)(z - (p + 8)));
    p += png_chunk(p, "IEND", 0);
    free(pix);
    *n = (size_t)(p - png);
    return png;
}

static void put_base64(FILE *out, const unsigned char *p, size_t n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                           (i + 2 < n ? p[i + 2] : 0);
        const char q[4] = {digits[v >> 18], digits[(v >> 12) & 63], i + 1 < n ? digits[(v >> 6) & 63] : '=',
                           i + 2 < n ? digits[v & 63] : '='};
        fwrite(q, 1, 4, out);
    }
}

/* Returns -1 when the image's memory could not be had. */
static int write_cell_image(FILE *out, const float *w, int rows, int cols, const panel_layout *L)
{
    size_t n = 0;
    unsigned char *png = cells_png(w, rows, cols, &n);
    if (!png) return -1;
    const int gw = cols * L->cell, gh = rows * L->cell;
    fprintf(out, "<g transform=\"translate(%d,%d)\">\n", L->grid_x, L->grid_y);
    fprintf(out, "<rect class=\"masked-area\" width=\"%d\" height=\"%d\" fill=\"url(#masked)\"/>\n", gw, gh);
    fprintf(out, "<image class=\"cells\" width=\"%d\" height=\"%d\" preserveAspectRatio=\"none\""
            " image-rendering=\"optimizeSpeed\" style=\"image-rendering:pixelated\" xlink:href=\"data:image/png;base64,",
            gw, gh);
    put_base64(out, png, n);
    fprintf(out, "\"><title>%d x %d weights, a pixel each (attn --csv writes their values)</title></image>\n",
            rows, cols);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#777\"/>\n", gw, gh);
    fputs("</g>\n", out);
    free(png);
    return 0;
}

static void write_axis_labels(FILE *out, int rows, int cols, const panel_layout *L,
                              const char *const *row_labels, const char *const *col_labels)
{
    char buf[16];
    int half = L->cell / 2;
    double base = 0.35 * L->label_font; /* shifts text down to centre it vertically */
    fprintf(out, "<g class=\"row-labels\" font-family=\"%s\" font-size=\"%.1f\" text-anchor=\"end\">\n",
            FONT_MONO, L->label_font);
    for (int i = 0; i < rows; i++) {
        fprintf(out, "<text x=\"%d\" y=\"%.1f\">", L->grid_x - 4, L->grid_y + i * L->cell + half + base);
        put_text(out, label_or_index(row_labels, i, buf, sizeof buf), 1, LABEL_MAX_COLS);
        fputs("</text>\n", out);
    }
    fputs("</g>\n", out);
    fprintf(out, "<g class=\"col-labels\" font-family=\"%s\" font-size=\"%.1f\" text-anchor=\"middle\">\n",
            FONT_MONO, L->label_font);
    for (int j = 0; j < cols; j++) {
        int x = L->grid_x + j * L->cell + half;
        const char *label = label_or_index(col_labels, j, buf, sizeof buf);
        if (text_width(label, 1, LABEL_MAX_COLS) * MONO_ADVANCE * L->label_font > L->cell)
            fprintf(out, "<text text-anchor=\"start\" transform=\"translate(%.1f,%d) rotate(-90)\">",
                    x + base, L->grid_y - 4);
        else
            fprintf(out, "<text x=\"%d\" y=\"%d\">", x, L->grid_y - 5);
        put_text(out, label, 1, LABEL_MAX_COLS);
        fputs("</text>\n", out);
    }
    fputs("</g>\n", out);
    /* Axis names: keys run along the top, queries down the side. */
    fprintf(out, "<text class=\"axis-label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\""
            " fill=\"#444\">key \xE2\x86\x92</text>\n",
            L->grid_x + cols * L->cell / 2, L->grid_y - L->col_label_h - 6);
    fprintf(out, "<text class=\"axis-label\" transform=\"translate(13,%d) rotate(-90)\""
            " text-anchor=\"middle\" font-size=\"12\" fill=\"#444\">query \xE2\x86\x92</text>\n",
            L->grid_y + rows * L->cell / 2);
}

static int write_panel(FILE *out, int x, int y, const char *title, int p, const float *w, int rows,
                       int cols, const panel_layout *L, const char *const *row_labels,
                       const char *const *col_labels, int as_image)
{
    fprintf(out, "<g class=\"panel\" transform=\"translate(%d,%d)\">\n", x, y);
    fprintf(out, "<text class=\"panel-title\" x=\"%d\" y=\"15\" text-anchor=\"middle\" font-size=\"14\""
            " font-weight=\"bold\">", L->grid_x + cols * L->cell / 2);
    if (title) put_text(out, title, 0, 0);
    else fprintf(out, "head %d", p);
    fputs("</text>\n", out);
    write_axis_labels(out, rows, cols, L, row_labels, col_labels);
    if (as_image) {
        if (write_cell_image(out, w, rows, cols, L)) return -1;
    } else {
        write_cell_rects(out, w, rows, cols, L, row_labels, col_labels);
    }
    fputs("</g>\n", out);
    return 0;
}

/* The color bar with 0, 0.25, 0.5, 0.75, 1 ticks and a swatch for masked cells. */
static void write_colorbar(FILE *out, int x, int y, int height)
{
    const int bar_w = 16;
    fprintf(out, "<g class=\"colorbar\" transform=\"translate(%d,%d)\" font-size=\"11\">\n", x, y);
    fputs("<text x=\"0\" y=\"-10\" font-size=\"12\">weight</text>\n", out);
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#cmap)\" stroke=\"#777\"/>\n",
            bar_w, height);
    static const char *const tick_text[] = {"0", "0.25", "0.5", "0.75", "1"};
    for (int k = 0; k <= 4; k++) {
        double ty = height * (1 - k / 4.0);
        fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>", bar_w, ty,
                bar_w + 4, ty);
        fprintf(out, "<text class=\"tick\" x=\"%d\" y=\"%.1f\">%s</text>\n", bar_w + 7, ty + 4,
                tick_text[k]);
    }
    fprintf(out, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#masked)\" stroke=\"#777\"/>\n",
            height + 18, bar_w, bar_w);
    fprintf(out, "<text x=\"0\" y=\"%d\">masked</text>\n", height + 18 + bar_w + 14);
    fprintf(out, "<text x=\"0\" y=\"%d\" fill=\"#666\">(exactly 0)</text>\n", height + 18 + bar_w + 28);
    fputs("</g>\n", out);
}

int svg_attention(FILE *out, const char *title, int n_panels, const char *const *panel_titles,
                  const float *weights, int rows, int cols,
                  const char *const *row_labels, const char *const *col_labels, svg_cells cells,
                  char *err, size_t errlen)
{
    if (!out || !weights || n_panels < 1 || rows < 1 || cols < 1) {
        ag_set_err(err, errlen, "svg_attention: need an output, weights and positive panels/rows/cols "
                   "(got %d panels of %d x %d)", n_panels, rows, cols);
        return -1;
    }
    panel_layout L = layout_panel(rows, cols, row_labels, col_labels);
    int per_row = n_panels < PANELS_PER_ROW ? n_panels : PANELS_PER_ROW;
    int grid_rows = (n_panels + per_row - 1) / per_row;
    const int margin = 12, title_h = title ? 36 : 6, legend_w = 100;
    int bar_h = rows * L.cell < 220 ? rows * L.cell : 220;
    if (bar_h < 120) bar_h = 120;
    int width = 2 * margin + per_row * L.panel_w + legend_w;
    /* A long title over a small picture widens the picture rather than
     * running off its edges (bold 18 px: about 11 px a character). */
    int title_w = title ? text_width(title, 0, 0) * 11 + 2 * margin : 0;
    if (width < title_w) width = title_w;
    int height = title_h + grid_rows * L.panel_h + margin;
    int min_h = title_h + L.grid_y + bar_h + 90; /* room for the legend below the bar */
    if (height < min_h) height = min_h;

    const int as_image = cells == SVG_CELLS_IMAGE ||
                         (cells == SVG_CELLS_AUTO && (double)n_panels * rows * cols > SVG_RECT_CELLS_MAX);
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\"%s width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
            " font-family=\"%s\">\n", as_image ? " xmlns:xlink=\"http://www.w3.org/1999/xlink\"" : "",
            width, height, width, height, FONT_SANS);
    write_hatch_pattern(out);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    if (title) {
        fprintf(out, "<text class=\"title\" x=\"%d\" y=\"25\" text-anchor=\"middle\" font-size=\"18\""
                " font-weight=\"bold\">", width / 2);
        put_text(out, title, 0, 0);
        fputs("</text>\n", out);
    }
    size_t panel_size = (size_t)rows * (size_t)cols;
    for (int p = 0; p < n_panels; p++) {
        int x = margin + (p % per_row) * L.panel_w, y = title_h + (p / per_row) * L.panel_h;
        if (write_panel(out, x, y, panel_titles ? panel_titles[p] : NULL, p, weights + p * panel_size, rows,
                        cols, &L, row_labels, col_labels, as_image)) {
            ag_set_err(err, errlen, "svg_attention: out of memory for a %d x %d image", rows, cols);
            return -1;
        }
    }
    write_colorbar(out, margin + per_row * L.panel_w + 10, title_h + L.grid_y, bar_h);
    fputs("</svg>\n", out);
    return finish(out, "svg_attention", err, errlen);
}

/* ------------------------------------------------------------------------ */
/* Line charts                                                              */
/* ------------------------------------------------------------------------ */

int svg_nice_ticks(double lo, double hi, int max_ticks, double *ticks, int cap)
{
    double range = hi - lo;
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(range) || hi < lo || max_ticks < 2) return 0;
    static const double mant[3] = {1, 2, 5};
    int k = range > 0 ? (int)floor(log10(range / max_ticks)) - 1 : (int)floor(log10(fabs(lo) + 1e-300));
    /* Try 1, 2, 5 x 10^k for growing k: the first step that needs at most
     * max_ticks ticks to enclose [lo, hi]. The slack of a millionth of a step
     * in floor/ceil keeps an endpoint that is a multiple of the step up to
     * rounding (40.2 stored as 40.19999...) from adding a tick. */
    for (int tries = 0; tries < 64; tries++, k++) {
        for (int m = 0; m < 3; m++) {
            double step = k >= 0 ? mant[m] * pow(10, k) : mant[m] / pow(10, -k);
            /* a range of subnormals needs a step 10^k cannot be (0), and
             * one near DBL_MAX a last tick that overflows: none then */
            if (!(step > 0) || !isfinite(step)) return 0;
            double first = floor(lo / step + 1e-6), last = ceil(hi / step - 1e-6);
            if (last < first) last = first;
            if (last - first + 1 > max_ticks) continue;
            if (!isfinite(first * step) || !isfinite(last * step)) return 0;
            int n = 0;
            for (double i = first; i <= last && n < cap; i++) ticks[n++] = i * step;
            return n;
        }
    }
    return 0;
}

/* Decimals needed to tell apart ticks that are step apart. */
static int tick_decimals(double step)
{
    int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d;
}

static void format_tick(char *buf, size_t len, double v, double step)
{
    if (isfinite(step) && fabs(v) < step * 1e-6) v = 0; /* no "-0" */
    if (step < 1e-4 || fabs(v) >= 1e7 || !isfinite(step)) snprintf(buf, len, "%.3g", v);
    else snprintf(buf, len, "%.*f", tick_decimals(step), v);
}

/* Okabe-Ito colorblind-safe hues (yellow left out: too faint on white). */
static const char *const PALETTE[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000"};
#define PALETTE_N ((int)(sizeof PALETTE / sizeof PALETTE[0]))

typedef struct {
    double x0, x1, y0, y1;    /* data range mapped onto the plot area */
    double px, py, pw, ph;    /* plot area in pixels */
} chart_frame;

/* Where v lies in [lo, hi], from 0 to 1: in halves when the span is past
 * DBL_MAX (-1e308 to 1e308), where v - lo would overflow too. */
static double fraction(double v, double lo, double hi)
{
    return isfinite(hi - lo) ? (v - lo) / (hi - lo) : (v * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5);
}
static double map_x(const chart_frame *f, double x) { return f->px + fraction(x, f->x0, f->x1) * f->pw; }
static double map_y(const chart_frame *f, double y) { return f->py + f->ph - fraction(y, f->y0, f->y1) * f->ph; }

static int finite_point(const svg_series *s, int k)
{
    return s->x && s->y && isfinite(s->x[k]) && isfinite(s->y[k]);
}

/* A flat range still needs a scale: widened by 5% (or by 1 around 0, and
 * around a subnormal, whose 5% is 0), its ends kept finite. */
static void widen(double *lo, double *hi)
{
    if (*hi != *lo) return;
    double d = *lo ? fabs(*lo) * 0.05 : 1, a = *lo - d, b = *hi + d;
    if (!(b > a)) a = *lo - 1, b = *hi + 1;
    *lo = isfinite(a) ? a : -DBL_MAX;
    *hi = isfinite(b) ? b : DBL_MAX;
}

static void data_range(const svg_series *series, int n_series, double *xlo, double *xhi, double *ylo,
                       double *yhi)
{
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int s = 0; s < n_series; s++)
        for (int k = 0; k < series[s].n; k++) {
            if (!finite_point(&series[s], k)) continue;
            double x = series[s].x[k], y = series[s].y[k];
            if (x < *xlo) *xlo = x;
            if (x > *xhi) *xhi = x;
            if (y < *ylo) *ylo = y;
            if (y > *yhi) *yhi = y;
        }
    if (*xlo > *xhi) { *xlo = 0; *xhi = 1; }
    if (*ylo > *yhi) { *ylo = 0; *yhi = 1; }
    widen(xlo, xhi);
    widen(ylo, yhi);
}

/* Grid lines, tick marks and tick labels along both axes. */
static void write_axes(FILE *out, const chart_frame *f, const double *xt, int nx, const double *yt, int ny)
{
    char buf[48];
    double xstep = nx > 1 ? xt[1] - xt[0] : 1, ystep = ny > 1 ? yt[1] - yt[0] : 1;
    fputs("<g class=\"grid\" stroke=\"#e4e4e4\" shape-rendering=\"crispEdges\">\n", out);
    for (int k = 0; k < nx; k++) {
        double x = map_x(f, xt[k]);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, f->py, x, f->py + f->ph);
    }
    for (int k = 0; k < ny; k++) {
        double y = map_y(f, yt[k]);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", f->px, y, f->px + f->pw, y);
    }
    fputs("</g>\n", out);
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#555\""
            " shape-rendering=\"crispEdges\"/>\n", f->px, f->py, f->pw, f->ph);
    fputs("<g class=\"x-ticks\" font-size=\"12\" text-anchor=\"middle\" fill=\"#333\">\n", out);
    for (int k = 0; k < nx; k++) {
        format_tick(buf, sizeof buf, xt[k], xstep);
        double x = map_x(f, xt[k]);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>", x,
                f->py + f->ph, x, f->py + f->ph + 5);
        fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, f->py + f->ph + 19, buf);
    }
    fputs("</g>\n<g class=\"y-ticks\" font-size=\"12\" text-anchor=\"end\" fill=\"#333\">\n", out);
    for (int k = 0; k < ny; k++) {
        format_tick(buf, sizeof buf, yt[k], ystep);
        double y = map_y(f, yt[k]);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>", f->px - 5,
                y, f->px, y);
        fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", f->px - 8, y + 4, buf);
    }
    fputs("</g>\n", out);
}

/* Count of the series' drawable points. */
static int finite_count(const svg_series *s)
{
    int n = 0;
    for (int k = 0; k < s->n; k++) n += finite_point(s, k);
    return n;
}

static void write_series(FILE *out, const chart_frame *f, const svg_series *s, const char *color,
                         int dashed)
{
    fprintf(out, "<path class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\""
            " stroke-linejoin=\"round\"%s d=\"", color, dashed ? "1.8" : "1.6",
            dashed ? " stroke-dasharray=\"6,4\"" : "");
    int first = 1;
    for (int k = 0; k < s->n; k++) {
        if (!finite_point(s, k)) continue;
        fprintf(out, "%c%.1f,%.1f", first ? 'M' : 'L', map_x(f, s->x[k]), map_y(f, s->y[k]));
        first = 0;
    }
    fputs("\"/>\n", out);
    /* Sparse dashed series (validation measured every few hundred steps)
     * get a dot per measurement so single points are seen; so does a series
     * of one point (a log of one row), which a path alone would not show. */
    int points = finite_count(s);
    if ((dashed && points <= 60) || points == 1) {
        fprintf(out, "<g class=\"markers\" fill=\"%s\">", color);
        for (int k = 0; k < s->n; k++)
            if (finite_point(s, k))
                fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\"/>", map_x(f, s->x[k]), map_y(f, s->y[k]));
        fputs("</g>\n", out);
    }
}

#define LEGEND_LINE_H 18   /* one legend entry */

/* The legend box's height, in pixels. */
static double legend_height(int n_series)
{
    return n_series * LEGEND_LINE_H + 10;
}

static void write_legend(FILE *out, const chart_frame *f, const svg_series *series, const int *dashed,
                         const char *const *colors, int n_series)
{
    int text_w = 0;
    for (int s = 0; s < n_series; s++) {
        int w = text_width(series[s].label, 0, 40);
        if (w > text_w) text_w = w;
    }
    const int line_h = LEGEND_LINE_H, swatch = 26;
    double box_w = swatch + 14 + text_w * 7.0, box_h = legend_height(n_series);
    double x = f->px + f->pw - box_w - 10, y = f->py + 10;
    fprintf(out, "<g class=\"legend\" font-size=\"12\" transform=\"translate(%.1f,%.1f)\">\n", x, y);
    fprintf(out, "<rect width=\"%.1f\" height=\"%.1f\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#bbb\"/>\n",
            box_w, box_h);
    for (int s = 0; s < n_series; s++) {
        double ly = 5 + line_h * (s + 0.5);
        int d = dashed && dashed[s];
        fprintf(out, "<g class=\"legend-entry\"><line x1=\"6\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\""
                " stroke-width=\"2\"%s/>", ly, 6 + swatch, ly, colors[s], d ? " stroke-dasharray=\"6,4\"" : "");
        fprintf(out, "<text x=\"%d\" y=\"%.1f\">", swatch + 12, ly + 4);
        put_text(out, series[s].label ? series[s].label : "", 0, 40);
        fputs("</text></g>\n", out);
    }
    fputs("</g>\n", out);
}

int svg_lines(FILE *out, const char *title, const char *xlabel, const char *ylabel,
              const svg_series *series, const int *dashed, int n_series, char *err, size_t errlen)
{
    if (!out || n_series < 0 || (n_series > 0 && !series)) {
        ag_set_err(err, errlen, "svg_lines: need an output and %d series", n_series);
        return -1;
    }
    const char **colors = malloc(sizeof *colors * (size_t)(n_series > 0 ? n_series : 1));
    if (!colors) {
        ag_set_err(err, errlen, "svg_lines: out of memory");
        return -1;
    }
    for (int s = 0, hue = -1; s < n_series; s++) {
        int pairs_with_previous = s > 0 && dashed && dashed[s] && !dashed[s - 1];
        if (!pairs_with_previous) hue++;
        colors[s] = PALETTE[hue % PALETTE_N];
    }

    double xlo, xhi, ylo, yhi, xt[32], yt[32];
    data_range(series, n_series, &xlo, &xhi, &ylo, &yhi);
    int nx = svg_nice_ticks(xlo, xhi, 9, xt, 32), ny = svg_nice_ticks(ylo, yhi, 8, yt, 32);
    /* Ranges too wide for a tick step (near DBL_MAX) get just their ends. */
    if (nx < 2) { xt[0] = xlo; xt[1] = xhi; nx = 2; }
    if (ny < 2) { yt[0] = ylo; yt[1] = yhi; ny = 2; }
    const int width = 820;
    int height = 500;
    chart_frame f = {xt[0], xt[nx - 1], yt[0], yt[ny - 1], 78, title ? 48 : 20, 0, 0};
    f.pw = width - f.px - 24;
    f.ph = height - f.py - 62;
    /* The legend sits inside the plot area, 10 px from its top: a long one
     * (many logs) makes the chart taller rather than run off its bottom. */
    if (n_series > 0 && f.ph < legend_height(n_series) + 20) {
        f.ph = legend_height(n_series) + 20;
        height = (int)ceil(f.py + f.ph + 62);
    }

    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\""
            " font-family=\"%s\">\n", width, height, width, height, FONT_SANS);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    if (title) {
        fprintf(out, "<text class=\"title\" x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"17\""
                " font-weight=\"bold\">", f.px + f.pw / 2);
        put_text(out, title, 0, 68); /* what fits across the chart */
        fputs("</text>\n", out);
    }
    write_axes(out, &f, xt, nx, yt, ny);
    fprintf(out, "<text class=\"axis-label\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">",
            f.px + f.pw / 2, height - 16);
    put_text(out, xlabel ? xlabel : "", 0, 0);
    fprintf(out, "</text>\n<text class=\"axis-label\" transform=\"translate(20,%.1f) rotate(-90)\""
            " text-anchor=\"middle\" font-size=\"13\">", f.py + f.ph / 2);
    put_text(out, ylabel ? ylabel : "", 0, 0);
    fputs("</text>\n", out);
    /* Clip lines to the plot area so a stray point cannot draw over the axes. */
    fprintf(out, "<clipPath id=\"plot-area\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
            "</clipPath>\n<g clip-path=\"url(#plot-area)\">\n", f.px - 3, f.py - 3, f.pw + 6, f.ph + 6);
    for (int s = 0; s < n_series; s++) write_series(out, &f, &series[s], colors[s], dashed && dashed[s]);
    fputs("</g>\n", out);
    if (n_series > 0) write_legend(out, &f, series, dashed, colors, n_series);
    fputs("</svg>\n", out);
    free(colors);
    return finish(out, "svg_lines", err, errlen);
}

/* ------------------------------------------------------------------------ */
/* CSV training logs                                                        */
/* ------------------------------------------------------------------------ */

#define LOG_FIELDS 7
static const char *const LOG_FIELD_NAMES[LOG_FIELDS] = {"step", "train_loss", "val_loss", "val_acc",
                                                        "lr", "ms_per_step", "tokens_per_s"};

static double **log_column(svg_log *log, int k)
{
    double **cols[LOG_FIELDS] = {&log->step, &log->train_loss, &log->val_loss, &log->val_acc,
                                 &log->lr, &log->ms_per_step, &log->tokens_per_s};
    return cols[k];
}

void svg_log_free(svg_log *log)
{
    if (!log) return;
    for (int k = 0; k < LOG_FIELDS; k++) free(*log_column(log, k));
    memset(log, 0, sizeof *log);
}

/* Append one row, growing every column to cap (doubling) when full. */
static int log_push(svg_log *log, int *cap, const double row[LOG_FIELDS])
{
    if (log->n == *cap) {
        int new_cap = *cap ? *cap * 2 : 256;
        for (int k = 0; k < LOG_FIELDS; k++) {
            double **col = log_column(log, k);
            double *p = realloc(*col, sizeof **col * (size_t)new_cap);
            if (!p) return -1;
            *col = p;
        }
        *cap = new_cap;
    }
    for (int k = 0; k < LOG_FIELDS; k++) (*log_column(log, k))[log->n] = row[k];
    log->n++;
    return 0;
}

/* Parse field [s, s+len) as a number; empty means "not measured" (NaN). */
static int parse_field(const char *s, size_t len, double *v)
{
    char buf[64];
    if (len == 0) {
        *v = NAN;
        return 0;
    }
    if (len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    *v = strtod(buf, &end);
    if (end == buf) return -1;
    while (*end == ' ') end++;
    return end == buf + len ? 0 : -1;
}

/* Split a data row into LOG_FIELDS numbers; on error fill err and return -1. */
static int parse_row(const char *line, size_t len, double row[LOG_FIELDS], const char *path, long lineno,
                     char *err, size_t errlen)
{
    int nfields = 1;
    for (size_t i = 0; i < len; i++) nfields += line[i] == ',';
    if (nfields != LOG_FIELDS) {
        ag_set_err(err, errlen, "%s:%ld: expected %d comma-separated fields, got %d", path, lineno,
                   LOG_FIELDS, nfields);
        return -1;
    }
    size_t start = 0;
    for (int k = 0; k < LOG_FIELDS; k++) {
        size_t end = start;
        while (end < len && line[end] != ',') end++;
        if (parse_field(line + start, end - start, &row[k]) != 0) {
            int shown = end - start > 40 ? 40 : (int)(end - start);
            ag_set_err(err, errlen, "%s:%ld: %s is not a number: '%.*s'", path, lineno, LOG_FIELD_NAMES[k],
                       shown, line + start);
            return -1;
        }
        start = end + 1;
    }
    if (line[0] == ',') {
        ag_set_err(err, errlen, "%s:%ld: step is empty", path, lineno);
        return -1;
    }
    if (!isfinite(row[0])) {            /* "nan" and "inf" read as numbers, but place no point */
        size_t n = strcspn(line, ",");
        ag_set_err(err, errlen, "%s:%ld: step is not a finite number: '%.*s'", path, lineno, n > 40 ? 40 : (int)n,
                   line);
        return -1;
    }
    return 0;
}

/* Drop a trailing "\n" or "\r\n". */
static size_t chomp(char *line, size_t len)
{
    if (len && line[len - 1] == '\n') len--;
    if (len && line[len - 1] == '\r') len--;
    line[len] = '\0';
    return len;
}

int svg_log_is_header(const char *line, size_t len)
{
    const size_t b = strlen(SVG_LOG_BOM), h = strlen(SVG_LOG_HEADER);
    if (len >= b && memcmp(line, SVG_LOG_BOM, b) == 0) line += b, len -= b;
    if (len && line[len - 1] == '\n') len--;
    if (len && line[len - 1] == '\r') len--;
    return len == h && memcmp(line, SVG_LOG_HEADER, h) == 0;
}

int svg_log_row_cut(const char *line, size_t len)
{
    return len > 0 && line[len - 1] != '\n';
}

int svg_log_starts_with_header(FILE *in)
{
    /* room for a byte-order mark, the header and CR LF, and more */
    char line[sizeof SVG_LOG_BOM + sizeof SVG_LOG_HEADER + 2];
    size_t len = 0;
    int c;
    while (len < sizeof line && (c = getc(in)) != EOF)
        if ((line[len++] = (char)c) == '\n')
            break;
    return svg_log_is_header(line, len);
}

int svg_log_resume_drops(const char *line, size_t len, long step)
{
    if (svg_log_row_cut(line, len))
        return 1;
    /* the step as plot reads it (parse_field), so both agree on which rows
     * come after the checkpoint; a row whose step is not a number stays */
    const char *comma = memchr(line, ',', len);
    double row;
    return comma && parse_field(line, (size_t)(comma - line), &row) == 0 && row > (double)step;
}

/* The first line when it is the header with no newline after it (the log
 * holds nothing else): it stays, given its newline, so that the rows after
 * it start lines of their own and the header keeps its byte-order mark. */
static int header_unended(const char *line, size_t len, long lineno)
{
    return lineno == 1 && svg_log_row_cut(line, len) && svg_log_is_header(line, len);
}

int svg_log_resume_scan(FILE *in, long step, long *cut)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int rewrite = 0;
    *cut = 0;
    while ((got = getline(&line, &cap, in)) > 0) {
        lineno++;
        if (header_unended(line, (size_t)got, lineno)) {
            rewrite = 1;                /* it is given its newline */
            continue;
        }
        rewrite |= svg_log_resume_drops(line, (size_t)got, step);
        if (svg_log_row_cut(line, (size_t)got) && lineno > 1)  /* a first line cut short is no row */
            *cut = lineno;
    }
    free(line);
    return ferror(in) ? -1 : rewrite;
}

long svg_log_rows_after(FILE *in, long step, double *last)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long rows = 0;
    *last = (double)step;
    while ((got = getline(&line, &cap, in)) > 0) {
        const char *comma = memchr(line, ',', (size_t)got);
        double row;
        if (!svg_log_row_cut(line, (size_t)got) && svg_log_resume_drops(line, (size_t)got, step) && comma &&
            parse_field(line, (size_t)(comma - line), &row) == 0) {
            rows++;
            if (row > *last)
                *last = row;
        }
    }
    free(line);
    return ferror(in) ? -1 : rows;
}

int svg_log_resume_copy(FILE *in, FILE *out, long step)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    while ((got = getline(&line, &cap, in)) > 0) {
        lineno++;
        if (header_unended(line, (size_t)got, lineno)) {
            fwrite(line, 1, (size_t)got, out);
            putc('\n', out);
        } else if (!svg_log_resume_drops(line, (size_t)got, step)) {  /* the header and rows up to the checkpoint stay */
            fwrite(line, 1, (size_t)got, out);
        }
    }
    free(line);
    return ferror(in) ? -1 : 0;
}

/* A line with a NUL byte in it is no line of text (a binary file, or the
 * zeros a crash can leave in a file being written): said as such, rather
 * than as the field or header the NUL cuts short ("'4.1' is not a number"). */
static int nul_in_line(const char *line, size_t len, const char *path, long lineno, char *err, size_t errlen)
{
    const char *z = memchr(line, '\0', len);
    if (z)
        ag_set_err(err, errlen, "%s:%ld: a NUL byte at column %ld: not a line of text (a binary file, or the zeros "
                   "a crash can leave in a file being written)", path, lineno, (long)(z - line) + 1);
    return z != NULL;
}

int svg_read_log(const char *path, svg_log *log, char *err, size_t errlen)
{
    memset(log, 0, sizeof *log);
    struct stat st;
    if (stat(path, &st) != 0) {
        ag_set_err(err, errlen, "%s: cannot open log: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        ag_set_err(err, errlen, "%s: is a directory, not a CSV log", path);
        return -1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        ag_set_err(err, errlen, "%s: cannot open log: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t line_cap = 0;
    long lineno = 0;
    int cap = 0, rc = -1;
    ssize_t got = getline(&line, &line_cap, f);
    if (got < 0) {
        if (ferror(f)) ag_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
        else ag_set_err(err, errlen, "%s: empty file, expected the header line '%s'", path, SVG_LOG_HEADER);
        goto done;
    }
    lineno = 1;
    if (nul_in_line(line, (size_t)got, path, lineno, err, errlen))
        goto done;
    if (!svg_log_is_header(line, (size_t)got)) {
        size_t len = chomp(line, (size_t)got);
        const char *header = line;
        if (len >= strlen(SVG_LOG_BOM) && memcmp(header, SVG_LOG_BOM, strlen(SVG_LOG_BOM)) == 0)
            header += strlen(SVG_LOG_BOM), len -= strlen(SVG_LOG_BOM);
        /* lines that end in CR alone read as one line, whose start may be
         * the header itself: shown as it is, it would look right */
        size_t h = strlen(SVG_LOG_HEADER);
        if (len > h && memcmp(header, SVG_LOG_HEADER, h) == 0 && header[h] == '\r')
            ag_set_err(err, errlen, "%s:1: bad header: its lines end in a carriage return alone, not a newline "
                       "(expected '%s' and a newline)", path, SVG_LOG_HEADER);
        else
            ag_set_err(err, errlen, "%s:1: bad header '%.60s', expected '%s'", path, header, SVG_LOG_HEADER);
        goto done;
    }
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        if (svg_log_row_cut(line, (size_t)got)) {   /* the last line: getline stops only at a newline or the end */
            log->cut_line = lineno;
            break;
        }
        if (nul_in_line(line, (size_t)got, path, lineno, err, errlen)) goto done;
        size_t len = chomp(line, (size_t)got);
        if (len == 0) continue;
        double row[LOG_FIELDS];
        if (parse_row(line, len, row, path, lineno, err, errlen) != 0) goto done;
        if (log_push(log, &cap, row) != 0) {
            ag_set_err(err, errlen, "%s:%ld: out of memory", path, lineno);
            goto done;
        }
    }
    if (ferror(f)) {
        ag_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(line);
    fclose(f);
    if (rc != 0) svg_log_free(log);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* `attograd plot`                                                          */
/* ------------------------------------------------------------------------ */

/* The last parts components of path: "runs/tiny.csv" is "tiny.csv" at 1,
 * "runs/tiny.csv" at 2 or more. */
static const char *path_tail(const char *path, int parts)
{
    const char *p = path + strlen(path);
    while (p > path && (p[-1] != '/' || --parts > 0))
        p--;
    return p;
}

/* A log's name in the legend: the last parts components of its path
 * without ".csv" ("runs/tiny.csv" -> "tiny" at 1). */
static void log_name(const char *path, int parts, char *buf, size_t len)
{
    const char *base = path_tail(path, parts);
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".csv") == 0) n -= 4;
    snprintf(buf, len, "%.*s", (int)n, base);
}

/* How many of log i's path components its legend shows: its file name, or
 * as many more of its directories as tell it apart from the other logs
 * (a/run.csv, b/run.csv: "a/run", "b/run"). */
static int name_parts(int n_logs, const char *const *paths, int i)
{
    for (int parts = 1;; parts++) {
        char mine[256], other[256];
        int shared = 0;
        log_name(paths[i], parts, mine, sizeof mine);
        for (int k = 0; k < n_logs && !shared; k++) {
            log_name(paths[k], parts, other, sizeof other);
            shared = k != i && strcmp(mine, other) == 0;
        }
        if (!shared || path_tail(paths[i], parts) == paths[i])
            return parts;
    }
}

int svg_plot_logs(FILE *out, const char *title, int n_logs, const char *const *paths,
                  char *err, size_t errlen)
{
    if (!out || n_logs < 1 || !paths) {
        ag_set_err(err, errlen, "svg_plot_logs: need an output and at least one log");
        return -1;
    }
    svg_log *logs = calloc((size_t)n_logs, sizeof *logs);
    svg_series *series = calloc(2 * (size_t)n_logs, sizeof *series);
    int *dashed = calloc(2 * (size_t)n_logs, sizeof *dashed);
    char (*labels)[96] = calloc(2 * (size_t)n_logs, sizeof *labels);
    int rc = -1, ns = 0;
    if (!logs || !series || !dashed || !labels) {
        ag_set_err(err, errlen, "svg_plot_logs: out of memory");
        goto done;
    }
    for (int i = 0; i < n_logs; i++) {
        if (svg_read_log(paths[i], &logs[i], err, errlen) != 0) goto done;
        char name[80];
        log_name(paths[i], name_parts(n_logs, paths, i), name, sizeof name);
        snprintf(labels[ns], sizeof labels[ns], "%s train", name);
        series[ns] = (svg_series){labels[ns], logs[i].n, logs[i].step, logs[i].train_loss};
        dashed[ns++] = 0;
        svg_series val = {NULL, logs[i].n, logs[i].step, logs[i].val_loss};
        if (finite_count(&val) == 0) continue; /* no evals: no empty legend entry */
        snprintf(labels[ns], sizeof labels[ns], "%s val", name);
        val.label = labels[ns];
        series[ns] = val;
        dashed[ns++] = 1;
    }
    rc = svg_lines(out, title ? title : "training loss", "step", "loss", series, dashed, ns, err, errlen);
done:
    if (logs)
        for (int i = 0; i < n_logs; i++) svg_log_free(&logs[i]);
    free(logs);
    free(series);
    free(dashed);
    free(labels);
    return rc;
}
