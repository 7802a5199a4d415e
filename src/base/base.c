#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char ts_errbuf[1024];

const char *ts_last_error(void) { return ts_errbuf; }

const char *ts_status_name(ts_status st) {
    switch (st) {
    case TS_OK: return "ok";
    case TS_ERR_IO: return "i/o error";
    case TS_ERR_FORMAT: return "format error";
    case TS_ERR_UNSUPPORTED: return "unsupported";
    case TS_ERR_ARG: return "invalid argument";
    case TS_ERR_NOMEM: return "out of memory";
    case TS_ERR_LIMIT: return "limit exceeded";
    case TS_ERR_INTERNAL: return "internal error";
    case TS_ERR_DEVICE: return "device error";
    case TS_ERR_ABORTED: return "aborted";
    }
    return "unknown status";
}

ts_status ts_fail(ts_status st, const char *fmt, ...) {
    /* format into a scratch buffer first: an argument may be ts_last_error()
     * itself (vsnprintf into its own source is undefined) */
    char tmp[sizeof ts_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(ts_errbuf, tmp, sizeof tmp);
    return st;
}

void ts_free(void *p) { free(p); }

void ts_error_prefix(const char *fmt, ...) {
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t pl = strlen(prefix), ol = strlen(ts_errbuf);
    if (pl + 2 + ol >= sizeof ts_errbuf) ol = sizeof ts_errbuf - pl - 3;
    memmove(ts_errbuf + pl + 2, ts_errbuf, ol);
    memcpy(ts_errbuf, prefix, pl);
    ts_errbuf[pl] = ':';
    ts_errbuf[pl + 1] = ' ';
    ts_errbuf[pl + 2 + ol] = 0;
}

void ts_clear_error(void) { ts_errbuf[0] = 0; }

void *ts_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) ts_fail(TS_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *ts_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) ts_fail(TS_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *ts_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) ts_fail(TS_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return q;
}

/* ---- live mappings, for naming the file in a SIGBUS handler ----
 * A slot goes free -> busy (being written) -> live and back; the handler only
 * reads live slots. Writers claim a slot with a compare-and-swap, so no lock
 * is held that a signal could interrupt. */
enum { MAP_FREE = 0, MAP_BUSY = 1, MAP_LIVE = 2 };
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "ts_map_name_at must be async-signal-safe: atomic int must be lock-free");
static struct {
    atomic_int state;                /* MAP_FREE / MAP_BUSY / MAP_LIVE */
    const uint8_t *data;             /* (size) mapped bytes */
    uint64_t size;
    char name[TS_MAP_NAME_MAX];      /* NUL-terminated path (its tail if long) */
} ts_maps[TS_MAP_REGISTRY];

static void map_register(const uint8_t *data, uint64_t size, const char *path) {
    for (int i = 0; i < TS_MAP_REGISTRY; i++) {
        int want = MAP_FREE;
        if (!atomic_compare_exchange_strong(&ts_maps[i].state, &want, MAP_BUSY)) continue;
        size_t n = strlen(path);
        const char *from = n < TS_MAP_NAME_MAX ? path : path + n - (TS_MAP_NAME_MAX - 1);
        snprintf(ts_maps[i].name, sizeof ts_maps[i].name, "%s", from);
        ts_maps[i].data = data;
        ts_maps[i].size = size;
        atomic_store(&ts_maps[i].state, MAP_LIVE);
        return;
    }
}

static void map_unregister(const uint8_t *data) {
    for (int i = 0; i < TS_MAP_REGISTRY; i++) {
        if (atomic_load(&ts_maps[i].state) != MAP_LIVE || ts_maps[i].data != data) continue;
        int want = MAP_LIVE;
        if (!atomic_compare_exchange_strong(&ts_maps[i].state, &want, MAP_BUSY)) continue;
        ts_maps[i].data = NULL;
        ts_maps[i].size = 0;
        atomic_store(&ts_maps[i].state, MAP_FREE);
        return;
    }
}

const char *ts_map_name_at(const void *addr) {
    uintptr_t a = (uintptr_t)addr;
    for (int i = 0; i < TS_MAP_REGISTRY; i++) {
        if (atomic_load(&ts_maps[i].state) != MAP_LIVE) continue;
        uintptr_t lo = (uintptr_t)ts_maps[i].data;
        if (a >= lo && a - lo < ts_maps[i].size) return ts_maps[i].name;
    }
    return NULL;
}

ts_status ts_map_check(const ts_mapped_file *m, const char *name) {
    if (m->fd < 0 || !m->data) return TS_OK;
    struct stat st;
    if (fstat(m->fd, &st) != 0) return ts_fail(TS_ERR_IO, "%s: cannot stat: %s", name, strerror(errno));
    if ((uint64_t)st.st_size < m->size)
        return ts_fail(TS_ERR_IO, "%s: changed size under the mapping: %llu bytes mapped, %llu now (truncated?)", name,
                       (unsigned long long)m->size, (unsigned long long)st.st_size);
    return TS_OK;
}

ts_status ts_map_file(const char *path, ts_mapped_file *out) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    /* stat before open: opening a FIFO for reading blocks until a writer
     * comes, and opening some devices has side effects */
    struct stat st;
    if (stat(path, &st) != 0) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return ts_fail(TS_ERR_IO, "%s: not a regular file", path);
    /* O_NONBLOCK: the path may have become a FIFO since the stat */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ts_fail(TS_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ts_fail(TS_ERR_IO, "%s: not a regular file", path);
    }
    /* the fd is kept for pread of streamed experts: plain blocking reads */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    out->size = (uint64_t)st.st_size;
    if (out->size > 0) {
        void *p = mmap(NULL, (size_t)out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return ts_fail(TS_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
        /* huge pages where the kernel backs the file with large folios:
         * decode streams every weight once a token, and a 4 KB mapping costs
         * one TLB walk per 4 KB (1.5B on a 2-core Xeon: 17.9 tok/s from
         * 4 KB pages, 24 from 2 MB ones). Advice only: an older kernel or
         * a file system without large folios ignores it. */
        (void)madvise(p, (size_t)out->size, MADV_HUGEPAGE);
        out->data = p;
        map_register(out->data, out->size, path);
    }
    out->fd = fd;
    return TS_OK;
}

void ts_unmap_file(ts_mapped_file *m) {
    if (m->data) {
        map_unregister(m->data);
        munmap((void *)m->data, (size_t)m->size);
    }
    if (m->fd >= 0) close(m->fd);
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
}

double ts_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
