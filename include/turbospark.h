/* turbospark: public API.
 * The library never exits and never prints to stdout: every call that can fail
 * returns a ts_status and leaves a one-line message for ts_last_error(). */
#ifndef TURBOSPARK_H
#define TURBOSPARK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_IO,          /* open/read/map failed */
    TS_ERR_FORMAT,      /* the file or input is malformed */
    TS_ERR_UNSUPPORTED, /* well-formed, but not something we run */
    TS_ERR_ARG,         /* a caller-supplied value is out of range */
    TS_ERR_NOMEM,       /* allocation failed */
    TS_ERR_LIMIT,       /* a size limit (context, budget) would be exceeded */
    TS_ERR_INTERNAL,
} ts_status;

/* The message of the last failure on this thread ("" if none). */
const char *ts_last_error(void);
const char *ts_status_name(ts_status st);

#define TS_VERSION "0.1.0"

#ifdef __cplusplus
}
#endif
#endif
