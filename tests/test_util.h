/* Minimal test harness: CHECK records a failure and goes on; the program ends
 * with "N passed, N failed" (read by CI) and exits non-zero on any failure. */
#ifndef TS_TEST_UTIL_H
#define TS_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tu_passed, tu_failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) tu_passed++;                                                      \
        else {                                                                      \
            tu_failed++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                              \
    do {                                                               \
        if (cond) tu_passed++;                                         \
        else {                                                         \
            tu_failed++;                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                              \
            fprintf(stderr, "\n");                                     \
        }                                                              \
    } while (0)

static inline int tu_finish(void) {
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    return tu_failed ? 1 : 0;
}

#endif
