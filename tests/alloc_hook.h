/* One-shot allocation failure for tests: after alloc_fail_in(k), the k-th
 * malloc/calloc/realloc from then on returns NULL and the rest succeed
 * (glibc routes its own allocations, stdio's and cJSON's included, through
 * these). Include it in one test program only (it defines malloc). Under
 * AddressSanitizer, which owns malloc itself, ALLOC_HOOK is 0 and the
 * calls do nothing: tests must say they skipped the sweep. */
#ifndef TS_TEST_ALLOC_HOOK_H
#define TS_TEST_ALLOC_HOOK_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOC_HOOK 0
#endif
#endif
#ifndef ALLOC_HOOK
#define ALLOC_HOOK 1
#endif

static long alloc_fail_left = -1; /* allocations before the failing one; -1: none fails */
static long alloc_count;          /* allocations seen */

/* Arms the failure; alloc_fail_hit() after the call says whether it fired. */
static inline void alloc_fail_in(long k) { alloc_fail_left = k; }
static inline bool alloc_fail_hit(void) {
    bool hit = alloc_fail_left < 0;
    alloc_fail_left = -1;
    return hit;
}

#if ALLOC_HOOK
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static inline bool alloc_fails(void) {
    alloc_count++;
    return alloc_fail_left >= 0 && alloc_fail_left-- == 0;
}
void *malloc(size_t n) { return alloc_fails() ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t m) { return alloc_fails() ? NULL : __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return alloc_fails() ? NULL : __libc_realloc(p, n); }
#endif

#endif
