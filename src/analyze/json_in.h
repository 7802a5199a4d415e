/* Reads a whole capture file and parses it with cJSON: the shared first step
 * of every capture reader. */
#ifndef TS_ANALYZE_JSON_IN_H
#define TS_ANALYZE_JSON_IN_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "base/base.h"

/* *out is the parsed document (cJSON_Delete it); "PATH: not valid JSON" on
 * failure. The file is read through ts_read_file: regular files only (a FIFO
 * is refused before it is opened), at most max_bytes (0 = TS_READ_DEFAULT_CAP). */
ts_status json_in_load(const char *path, uint64_t max_bytes, cJSON **out);

#endif
