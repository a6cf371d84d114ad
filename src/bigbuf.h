/*
 * bigbuf.h - zeroed, aligned memory for the program's large buffers, on 2 MB
 * pages where the system offers them (bigbuf.c).  Internal to the library;
 * the checkpoint reader uses it too, so it depends on nothing else.
 */
#ifndef AG_BIGBUF_H
#define AG_BIGBUF_H

#include <stddef.h>

#define AG_ALIGN 64

/* Zeroed memory for count elements of size bytes, as calloc, for the large
 * buffers (arena blocks, parameters, optimizer moments, a checkpoint read
 * whole): AG_ALIGN-aligned, and on 2 MB huge pages where the system offers
 * them.  NULL when out of memory or too large; freed by ag_big_free. */
void *ag_big_alloc(size_t count, size_t size);
void ag_big_free(void *p);

#endif
