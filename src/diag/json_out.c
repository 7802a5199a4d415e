#include "diag/json_out.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ts_status json_out_open(json_out *j, const char *path) {
    memset(j, 0, sizeof *j);
    size_t n = strlen(path) + 16;
    j->path = strdup(path);
    j->tmp = malloc(n);
    if (!j->path || !j->tmp) {
        free(j->path);
        free(j->tmp);
        return ts_fail(TS_ERR_NOMEM, "out of memory");
    }
    snprintf(j->tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(j->tmp);
    if (fd < 0 || !(j->f = fdopen(fd, "w"))) {
        ts_status st = ts_fail(TS_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) { close(fd); unlink(j->tmp); }
        free(j->path);
        free(j->tmp);
        return st;
    }
    return TS_OK;
}

void json_out_printf(json_out *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(j->f, fmt, ap);
    va_end(ap);
}

void json_out_u64_matrix(json_out *j, const char *key, const uint64_t *m, int64_t rows, int64_t cols) {
    fprintf(j->f, "\"%s\":[", key);
    for (int64_t r = 0; r < rows; r++) {
        fputs(r ? ",[" : "[", j->f);
        for (int64_t c = 0; c < cols; c++) fprintf(j->f, c ? ",%llu" : "%llu", (unsigned long long)m[r * cols + c]);
        fputc(']', j->f);
    }
    fputc(']', j->f);
}

void json_out_f64_matrix(json_out *j, const char *key, const double *m, int64_t rows, int64_t cols) {
    fprintf(j->f, "\"%s\":[", key);
    for (int64_t r = 0; r < rows; r++) {
        fputs(r ? ",[" : "[", j->f);
        for (int64_t c = 0; c < cols; c++) {
            double v = m[r * cols + c];
            if (c) fputc(',', j->f);
            if (isfinite(v)) fprintf(j->f, "%.17g", v);
            else fputs("null", j->f); /* JSON has no inf/nan */
        }
        fputc(']', j->f);
    }
    fputc(']', j->f);
}

ts_status json_out_close(json_out *j) {
    ts_status st = TS_OK;
    if (fflush(j->f) != 0 || ferror(j->f) || fsync(fileno(j->f)) != 0) st = ts_fail(TS_ERR_IO, "%s: %s", j->path, strerror(errno));
    if (fclose(j->f) != 0 && !st) st = ts_fail(TS_ERR_IO, "%s: %s", j->path, strerror(errno));
    if (!st && rename(j->tmp, j->path) != 0) st = ts_fail(TS_ERR_IO, "%s: %s", j->path, strerror(errno));
    if (st) unlink(j->tmp);
    free(j->tmp);
    free(j->path);
    memset(j, 0, sizeof *j);
    return st;
}
