/*
 * number.c - how attograd reads a number (number.h).
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

/* A number is the whole text, decimal, with nothing before it. */
static int is_number(const char *text)
{
    return text && *text && !isspace((unsigned char)*text) && !strpbrk(text, "xX");
}

int run_read_integer(const char *text, long long *v)
{
    char *end;
    if (!is_number(text))
        return RUN_NOT_NUMBER;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (*end)
        return RUN_NOT_NUMBER;
    *v = n;
    return errno == ERANGE ? RUN_PAST_RANGE : RUN_NUMBER;
}

int run_read_real(const char *text, double *v)
{
    char *end;
    if (!is_number(text))
        return RUN_NOT_NUMBER;
    errno = 0;
    double d = strtod(text, &end);
    if (*end || (errno != ERANGE && !isfinite(d)))
        return RUN_NOT_NUMBER;
    *v = d == 0 ? 0.0 : d;
    if (errno == ERANGE)
        return isfinite(d) ? RUN_NEAR_0 : RUN_PAST_RANGE;
    return d != 0 && fabs(d) < DBL_MIN ? RUN_NEAR_0 : RUN_NUMBER;   /* a C library may not set ERANGE for it */
}
