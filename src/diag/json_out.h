/* Streaming JSON output for instrument captures: written to a temporary file
 * and renamed on success, so a capture is either complete or absent. Write
 * errors are sticky and reported once, at close. */
#ifndef TS_DIAG_JSON_OUT_H
#define TS_DIAG_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

typedef struct json_out {
    ts_afile af; /* the temporary file, renamed into place at close */
    FILE *f;     /* af.f, the stream the writers print to */
} json_out;

ts_status json_out_open(json_out *j, const char *path);
void json_out_printf(json_out *j, const char *fmt, ...) TS_PRINTF(2, 3);
/* "key":[[...],...] with rows x cols values; doubles with %.17g (exact round trip). */
void json_out_u64_matrix(json_out *j, const char *key, const uint64_t *m, int64_t rows, int64_t cols);
void json_out_f64_matrix(json_out *j, const char *key, const double *m, int64_t rows, int64_t cols);
ts_status json_out_close(json_out *j);

#endif
