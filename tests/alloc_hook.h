/* One-shot allocation failure for tests: after alloc_fail_in(k), the k-th
 * malloc/calloc/realloc from then on returns NULL and the rest succeed
 * (glibc routes its own allocations, stdio's and cJSON's included, through
 * these). Include it in one test program only (it defines malloc). Under
 * AddressSanitizer or ThreadSanitizer, which own malloc themselves (TSan's
 * start-up calls malloc through dlsym before it can run instrumented code:
 * an instrumented malloc here crashed every TSan run), ALLOC_HOOK is 0 and
 * none of this exists: tests must say they skipped the sweep. */
#ifndef TS_TEST_ALLOC_HOOK_H
#define TS_TEST_ALLOC_HOOK_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOC_HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ALLOC_HOOK 0
#endif
#endif
#ifndef ALLOC_HOOK
#define ALLOC_HOOK 1
#endif

#if ALLOC_HOOK
static long alloc_fail_left = -1; /* allocations before the failing one; -1: none fails */
static long alloc_count;          /* allocations seen */
static long alloc_live;           /* allocations not yet freed: equal before and after a call that leaks nothing */

/* Arms the failure; alloc_fail_hit() after the call says whether it fired. */
static inline void alloc_fail_in(long k) { alloc_fail_left = k; }
static inline bool alloc_fail_hit(void) {
    bool hit = alloc_fail_left < 0;
    alloc_fail_left = -1;
    return hit;
}

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
static inline bool alloc_fails(void) {
    alloc_count++;
    return alloc_fail_left >= 0 && alloc_fail_left-- == 0;
}
static inline void *alloc_counted(void *p) {
    alloc_live += p != NULL;
    return p;
}
void *malloc(size_t n) { return alloc_fails() ? NULL : alloc_counted(__libc_malloc(n)); }
void *calloc(size_t n, size_t m) { return alloc_fails() ? NULL : alloc_counted(__libc_calloc(n, m)); }
void *realloc(void *p, size_t n) {
    if (alloc_fails()) return NULL;
    void *q = __libc_realloc(p, n);
    alloc_live += (q != NULL) - (p != NULL && (q != NULL || n == 0));
    return q;
}
void free(void *p) {
    alloc_live -= p != NULL;
    __libc_free(p);
}
#endif

#endif
