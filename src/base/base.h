/* Shared plumbing: status codes, the per-thread error message, file mapping,
 * overflow-checked arithmetic. Everything in the library reports failure by
 * returning a ts_status and leaving a message for ts_last_error(); nothing here
 * exits or writes to stdout. */
#ifndef TS_BASE_H
#define TS_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "turbospark.h"

#if defined(__GNUC__)
#define TS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TS_LIKELY(x) __builtin_expect(!!(x), 1)
#define TS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TS_PRINTF(a, b)
#define TS_LIKELY(x) (x)
#define TS_UNLIKELY(x) (x)
#endif

/* Sets the thread's last error and returns st, so callers can write
 * `return ts_fail(TS_ERR_FORMAT, "%s: bad magic", path);`. */
ts_status ts_fail(ts_status st, const char *fmt, ...) TS_PRINTF(2, 3);
/* Prefixes the current message: "ctx: <old message>". */
void ts_error_prefix(const char *fmt, ...) TS_PRINTF(1, 2);
void ts_clear_error(void);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool ts_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool ts_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* A read-only mapping of a whole file. */
typedef struct ts_mapped_file {
    const uint8_t *data; /* (size) bytes, PROT_READ; NULL for an empty file */
    uint64_t size;       /* file size in bytes */
    int fd;              /* kept open for pread of streamed experts; -1 when closed */
} ts_mapped_file;

ts_status ts_map_file(const char *path, ts_mapped_file *out);
void ts_unmap_file(ts_mapped_file *m);

/* A file mapped with ts_map_file can shrink under the mapping (truncated or
 * rewritten in place by another program); touching a page past the new end
 * raises SIGBUS, which the library cannot turn into a status. Two pieces let
 * the caller deal with it:
 *
 * ts_map_check: TS_OK while the file still holds every mapped byte;
 * TS_ERR_IO naming the file ("NAME: changed size under the mapping: N bytes
 * mapped, M now (truncated?)") once it has shrunk. A memory buffer (fd < 0)
 * is always whole.
 *
 * ts_map_name_at (public: include/turbospark.h) reads a fixed table of
 * TS_MAP_REGISTRY live mappings with paths up to TS_MAP_NAME_MAX-1 bytes
 * (longer ones keep their tail); a mapping made while it is full is simply
 * not found. */
#define TS_MAP_REGISTRY 32
#define TS_MAP_NAME_MAX 1024
ts_status ts_map_check(const ts_mapped_file *m, const char *name);


/* An atomic file write: the bytes go to PATH.tmp.XXXXXX beside the target
 * (created O_EXCL, mode 0666 less the umask, as fopen would) and are renamed
 * over PATH only once flushed and fsynced, so PATH is either the old file,
 * absent, or the complete new one. ts_afile_commit reports a write error
 * (sticky in the stream, so callers write without checking each call) and
 * removes the temporary on any failure; ts_afile_abort removes it too, and is
 * a no-op on a zeroed or already finished ts_afile. Messages: "cannot create
 * PATH: ...", "writing PATH failed: ...", "cannot write PATH: ..." (rename). */
typedef struct ts_afile {
    FILE *f;    /* the temporary file, "wb"; NULL once committed or aborted */
    char *path; /* final path */
    char *tmp;  /* temporary path beside it */
} ts_afile;

ts_status ts_afile_open(ts_afile *a, const char *path);
ts_status ts_afile_commit(ts_afile *a);
void ts_afile_abort(ts_afile *a);

/* The one UTF-8 decoder (ts_utf8_valid, ts_utf8_sanitize, the tokenizer and
 * the chat templates all use it). Inline: the tokenizer calls it per
 * character. ts_utf8_len: length of the valid sequence at s[0..n) (n >= 1),
 * or 0 when s[0] does not start one (RFC 3629: no overlongs, no surrogates,
 * nothing past U+10FFFF, no truncated sequence). ts_utf8_cp: the code point
 * of a sequence of len bytes that ts_utf8_len accepted. */
static inline size_t ts_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}
static inline uint32_t ts_utf8_cp(const unsigned char *s, size_t len) {
    if (len == 1) return s[0];
    if (len == 2) return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    if (len == 3) return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

/* Sets TS_ERR_NOMEM on failure, so callers only propagate. */
void *ts_malloc(size_t n);
void *ts_calloc(size_t n, size_t size);
void *ts_realloc(void *p, size_t n);

#endif
