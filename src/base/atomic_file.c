/* The one atomic file writer: every file the library writes (GGUF, instrument
 * captures, saved logits, HTML reports) goes through here, so a reader never
 * sees a half-written file and an error leaves nothing behind. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

/* Fills the six X's of "PATH.tmp.XXXXXX". Not mkstemp: it creates the file
 * 0600, and the finished file should get the mode a plain fopen would give
 * (0666 less the umask), which open(O_CREAT, 0666) applies without reading
 * the process-wide umask (umask() to read it races with other threads). */
static void fill_suffix(char *x, uint64_t seed) {
    static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < 6; i++) {
        x[i] = set[seed % 62];
        seed /= 62;
    }
}

ts_status ts_afile_open(ts_afile *a, const char *path) {
    static _Atomic uint64_t counter;
    memset(a, 0, sizeof *a);
    size_t n = strlen(path) + 16;
    a->path = strdup(path);
    a->tmp = malloc(n);
    if (!a->path || !a->tmp) {
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32 ^ atomic_fetch_add(&counter, 1) * 0xBF58476D1CE4E5B9ull;
        seed ^= seed >> 31;
        snprintf(a->tmp, n, "%s.tmp.XXXXXX", path);
        fill_suffix(a->tmp + strlen(a->tmp) - 6, seed);
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0 || !(a->f = fdopen(fd, "wb"))) {
        ts_status st = ts_fail(TS_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(a->tmp);
        }
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return st;
    }
    return TS_OK;
}

/* Makes the rename itself durable. Best effort: some file systems refuse
 * fsync on a directory, and the data is already safe in the file. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

ts_status ts_afile_commit(ts_afile *a) {
    ts_status st = TS_OK;
    errno = 0;
    if (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0)
        /* a sticky stream error from an earlier call may have left no errno */
        st = ts_fail(TS_ERR_IO, "writing %s failed: %s", a->path, errno ? strerror(errno) : "write error");
    if (fclose(a->f) != 0 && !st) st = ts_fail(TS_ERR_IO, "writing %s failed: %s", a->path, strerror(errno));
    a->f = NULL;
    if (!st && rename(a->tmp, a->path) != 0) st = ts_fail(TS_ERR_IO, "cannot write %s: %s", a->path, strerror(errno));
    if (st) unlink(a->tmp);
    else sync_dir(a->path);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
    return st;
}

void ts_afile_abort(ts_afile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    free(a->path);
    memset(a, 0, sizeof *a);
}
