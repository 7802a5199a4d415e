#include "diag/json_out.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

ts_status json_out_open(json_out *j, const char *path) {
    memset(j, 0, sizeof *j);
    ts_status st = ts_afile_open(&j->af, path);
    j->f = j->af.f;
    return st;
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
    ts_status st = ts_afile_commit(&j->af);
    memset(j, 0, sizeof *j);
    return st;
}
