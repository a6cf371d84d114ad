/*
 * meter.c - a progress line on a terminal for long work (meter.h).
 */
#include "meter.h"

#include <unistd.h>

#include "run.h"

#define METER_WIDTH 72    /* the line, and what meter_end erases */
#define METER_EVERY 0.25  /* seconds between redraws: a few a second */

void meter_start(meter *mt, FILE *out, int on, const char *what, const char *unit)
{
    mt->out = on && out && isatty(fileno(out)) ? out : NULL;
    mt->what = what;
    mt->unit = unit;
    mt->t0 = now_seconds();
    mt->drawn = 0;
}

void meter_tick(void *user, long done, long total)
{
    meter *mt = user;
    if (!mt->out || total <= 0)
        return;
    double now = now_seconds(), elapsed = now - mt->t0;
    if (mt->drawn > 0 && now - mt->drawn < METER_EVERY && done < total)
        return;
    mt->drawn = now;
    /* the remaining items at the rate so far */
    double eta = done > 0 ? elapsed / (double)done * (double)(total - done) : 0;
    fprintf(mt->out, "\r%s %ld/%ld %s (%.0f%%)  ETA %.0fs   ", mt->what, done, total, mt->unit,
            100.0 * (double)done / (double)total, eta);
    fflush(mt->out);
}

void meter_end(meter *mt)
{
    if (!mt->out || mt->drawn == 0)
        return;
    fprintf(mt->out, "\r%*s\r", METER_WIDTH, "");
    fflush(mt->out);
}
