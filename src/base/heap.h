/* The one binary min-heap: elements of any fixed size, ordered by a
 * caller's "comes first" function. Header-only and inline because its users
 * (the tokenizer's merge loops) sit on the prompt path; with the comparator a
 * constant at the call site the compiler inlines it. Pop order for equal
 * elements is whatever the comparator's tie-break makes it, so callers that
 * need a deterministic order (the tokenizer: byte-identical ids) break ties. */
#ifndef TS_BASE_HEAP_H
#define TS_BASE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* true when a must come out before b */
typedef bool (*ts_heap_less)(const void *a, const void *b);

typedef struct ts_heap {
    unsigned char *data; /* (cap, elt) bytes; element i at data + i*elt */
    size_t n, cap;       /* elements held, elements allocated */
    size_t elt;          /* element size in bytes */
} ts_heap;

static inline void ts_heap_init(ts_heap *h, size_t elt) { *h = (ts_heap){.elt = elt}; }
static inline void ts_heap_clear(ts_heap *h) { h->n = 0; }
static inline void ts_heap_free(ts_heap *h) {
    free(h->data);
    *h = (ts_heap){.elt = h->elt};
}

/* Copies *x in; false (TS_ERR_NOMEM left by ts_realloc) when it cannot grow. */
static inline bool ts_heap_push(ts_heap *h, const void *x, ts_heap_less less) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        void *np = ts_realloc(h->data, nc * h->elt);
        if (!np) return false;
        h->data = np;
        h->cap = nc;
    }
    size_t e = h->elt, i = h->n++;
    while (i > 0) {
        size_t par = (i - 1) / 2;
        if (!less(x, h->data + par * e)) break;
        memcpy(h->data + i * e, h->data + par * e, e);
        i = par;
    }
    memcpy(h->data + i * e, x, e);
    return true;
}

/* Moves the first element to *out; the heap must not be empty. */
static inline void ts_heap_pop(ts_heap *h, void *out, ts_heap_less less) {
    size_t e = h->elt, n = --h->n, i = 0;
    memcpy(out, h->data, e);
    /* the last element sifts down from the root; its old slot (index n) is
     * past the end now, so it stays readable in place while holes move */
    const unsigned char *last = h->data + n * e;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && less(h->data + (c + 1) * e, h->data + c * e)) c++;
        if (!less(h->data + c * e, last)) break;
        memcpy(h->data + i * e, h->data + c * e, e);
        i = c;
    }
    if (n) memcpy(h->data + i * e, last, e);
}

#endif
