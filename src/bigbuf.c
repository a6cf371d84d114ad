/*
 * bigbuf.c - the program's large buffers (arena blocks, parameters, their
 * gradients, optimizer moments, checkpoints read whole): zeroed, aligned,
 * and on Linux their own mapping on 2 MB pages.
 */
#define _DEFAULT_SOURCE   /* madvise's MADV_HUGEPAGE */
#include "bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/*
 * The arena's blocks, the parameters, their gradients and the optimizer's
 * moments are the program's large memory: a medium model's arena is 1.5 GB.
 * The first step touches all of it once, and each 4 KB page costs a fault
 * and its zeroing: 430 thousand faults made a medium model's first step
 * 7-8x as long as the next ones (Zen 5 guest, 4.4-5.3 s against 0.6 s);
 * reading an 86 MB checkpoint through two malloc'd copies took 1.6 s, and
 * 0.08 s read in place into one of these (safetensors.c).  So on Linux a
 * buffer of at least BIG_BYTES is its own mapping, starts on a 2 MB
 * boundary and is offered to the kernel's transparent huge pages (madvise
 * MADV_HUGEPAGE, which counts where the system's setting is "madvise", as
 * on the machines here, or "always"): a 2 MB page is one fault and one TLB
 * entry.  Where huge pages are off, it is plain memory; elsewhere (and
 * below BIG_BYTES) it is calloc's.  Either way it starts zeroed.  The
 * start and length of what was obtained are kept just before the pointer.
 */
#define HUGE_PAGE ((size_t)2 << 20)
#define BIG_BYTES ((size_t)4 << 20)

typedef struct {
    void *raw;
    size_t mapped;      /* bytes mapped at raw, 0 when calloc'd */
} big_header;

#define BIG_HEAD ((sizeof(big_header) + AG_ALIGN - 1) / AG_ALIGN * AG_ALIGN)

void *ag_big_alloc(size_t count, size_t size)
{
    if (size != 0 && count > (SIZE_MAX / 2 - HUGE_PAGE) / size)
        return NULL;
    const size_t bytes = count * size;
    unsigned char *raw = NULL, *p = NULL;   /* NULL: without the mmap branch (make web) clang cannot tell p is set */
    size_t mapped = 0;
#if defined(__linux__) && defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
    if (bytes >= BIG_BYTES) {
        mapped = bytes + BIG_HEAD + HUGE_PAGE;
        void *m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        raw = m;
        p = (unsigned char *)(((uintptr_t)raw + BIG_HEAD + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
        (void)madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* advice: ignored when refused */
    }
#endif
    if (!raw) {
        raw = calloc(1, bytes + BIG_HEAD + AG_ALIGN);
        if (!raw)
            return NULL;
        p = (unsigned char *)(((uintptr_t)raw + BIG_HEAD + AG_ALIGN - 1) & ~(uintptr_t)(AG_ALIGN - 1));
    }
    big_header *h = (big_header *)(p - BIG_HEAD);
    h->raw = raw;
    h->mapped = mapped;
    return p;
}

void ag_big_free(void *p)
{
    if (!p)
        return;
    const big_header *h = (const big_header *)((unsigned char *)p - BIG_HEAD);
#if defined(__linux__) && defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
    if (h->mapped) {
        munmap(h->raw, h->mapped);
        return;
    }
#endif
    free(h->raw);
}
