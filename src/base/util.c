/* The small helpers the library, the command line and the server share:
 * one of each (byte formatting, UTF-8 checks, bounded file reads). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

const char *ts_fmt_bytes(uint64_t bytes, int decimals, char *buf, size_t n) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
        return buf;
    }
    double x = (double)bytes / 1024.0;
    int u = 0;
    while (x >= 1024.0 && u < 3) {
        x /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.*f %s", decimals < 0 ? 0 : decimals > 6 ? 6 : decimals, x, unit[u]);
    return buf;
}

ts_status ts_parse_bytes(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') goto bad;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !isfinite(v) || v < 0) goto bad;
    double mul = 1;
    char u = *end >= 'A' && *end <= 'Z' ? (char)(*end - 'A' + 'a') : *end;
    if (u == 'k') mul = 1024.0;
    else if (u == 'm') mul = 1024.0 * 1024;
    else if (u == 'g') mul = 1024.0 * 1024 * 1024;
    else if (u == 't') mul = 1024.0 * 1024 * 1024 * 1024;
    if (mul > 1) {
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
    } else if (u == 'b') {
        end++;
    }
    if (*end) goto bad;
    v *= mul;
    if (v >= 9.2e18) goto bad;
    *out = (uint64_t)v;
    return TS_OK;
bad:
    return ts_fail(TS_ERR_ARG, "'%s': expected bytes, e.g. 12G, 1.5GiB, 800M or 1073741824", s ? s : "");
}

bool ts_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t L = ts_utf8_len(p + i, n - i);
        if (!L) return false;
        i += L;
    }
    return true;
}

char *ts_utf8_sanitize(const char *s, size_t n) {
    if (n > (SIZE_MAX - 1) / 3) {
        ts_fail(TS_ERR_NOMEM, "text too long to sanitize");
        return NULL;
    }
    char *o = ts_malloc(n * 3 + 1), *q = o;
    if (!o) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t L = ts_utf8_len(p + i, n - i);
        if (L && p[i]) {
            memcpy(q, p + i, L);
            q += L;
            i += L;
        } else {
            memcpy(q, "\xEF\xBF\xBD", 3);
            q += 3;
            i++;
        }
    }
    *q = 0;
    return o;
}

ts_status ts_read_file(const char *path, uint64_t max_bytes, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    if (!max_bytes) max_bytes = TS_READ_DEFAULT_CAP;
    bool is_stdin = strcmp(path, "-") == 0;
    int fd = 0;
    if (!is_stdin) {
        /* stat before open: opening a FIFO for reading blocks until a writer comes */
        struct stat st;
        if (stat(path, &st) != 0) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode)) return ts_fail(TS_ERR_IO, "%s: is a directory", path);
        if (!S_ISREG(st.st_mode)) return ts_fail(TS_ERR_IO, "%s: not a regular file", path);
        if ((uint64_t)st.st_size > max_bytes) {
            char b1[32], b2[32];
            return ts_fail(TS_ERR_LIMIT, "%s: %s is over the %s input cap", path, ts_fmt_bytes((uint64_t)st.st_size, 1, b1, sizeof b1),
                           ts_fmt_bytes(max_bytes, 1, b2, sizeof b2));
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        /* the path may have been swapped for something else since the stat */
        struct stat st2;
        if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode)) {
            close(fd);
            return ts_fail(TS_ERR_IO, "%s: not a regular file", path);
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = ts_malloc(cap);
    ts_status rc = TS_OK;
    if (!buf) {
        rc = TS_ERR_NOMEM;
        goto out;
    }
    for (;;) {
        if (cap - n < 2) {
            if (cap > SIZE_MAX / 2) {
                rc = ts_fail(TS_ERR_NOMEM, "%s: too large", path);
                goto out;
            }
            char *nb = ts_realloc(buf, cap * 2);
            if (!nb) {
                rc = TS_ERR_NOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR) continue;
            rc = ts_fail(TS_ERR_IO, "%s: read error: %s", is_stdin ? "stdin" : path, strerror(errno));
            goto out;
        }
        if (r == 0) break;
        n += (size_t)r;
        if ((uint64_t)n > max_bytes) {
            char b2[32];
            rc = ts_fail(TS_ERR_LIMIT, "%s: input is over the %s cap", is_stdin ? "stdin" : path, ts_fmt_bytes(max_bytes, 1, b2, sizeof b2));
            goto out;
        }
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    buf = NULL;
out:
    free(buf);
    if (!is_stdin) close(fd);
    return rc;
}
