/*
 * meter.h - a progress line on a terminal for work that can take a while
 * (scoring every window of a large text): redrawn in place a few times a
 * second, erased when the work ends.  Where the stream is not a terminal
 * nothing is written, so logs and pipes see only the results.
 */
#ifndef ATTOGRAD_METER_H
#define ATTOGRAD_METER_H

#include <stdio.h>

typedef struct meter {
    FILE *out;            /* NULL: silent */
    const char *what;     /* "evaluating" */
    const char *unit;     /* "windows", "problems" */
    double t0, drawn;     /* start; last redraw (0: none yet) */
} meter;

/* A meter on out when out is a terminal and on is set, else a silent one. */
void meter_start(meter *mt, FILE *out, int on, const char *what, const char *unit);
/* done of total items (an eval_progress's fn: user is the meter). */
void meter_tick(void *mt, long done, long total);
/* Erases the line, if one was drawn. */
void meter_end(meter *mt);

#endif
