#include "analyze/json_in.h"

#include <stdlib.h>

ts_status json_in_load(const char *path, uint64_t max_bytes, cJSON **out) {
    *out = NULL;
    char *text;
    size_t len;
    ts_status st = ts_read_file(path, max_bytes, &text, &len);
    if (st) return st;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out) return ts_fail(TS_ERR_FORMAT, "%s: not valid JSON", path);
    return TS_OK;
}
