/* Reads a whole capture file and parses it with cJSON: the shared first step
 * of every capture reader. */
#ifndef TS_ANALYZE_JSON_IN_H
#define TS_ANALYZE_JSON_IN_H

#include <cjson/cJSON.h>

#include "base/base.h"

/* *out is the parsed document (cJSON_Delete it); "PATH: not valid JSON" on failure. */
ts_status json_in_load(const char *path, cJSON **out);

#endif
