/* libFuzzer harness for the server's request parser (src/server/request.c):
 * JSON body -> srv_request for every endpoint. Input: one byte choosing the
 * endpoint, then the body. Whatever parses must hold the invariants the
 * server relies on (valid UTF-8 contents without NUL, non-empty stops within
 * their caps, ranges); whatever fails must carry an HTTP status and a
 * message. Seeds: fuzz/corpus/server/ (one body per endpoint). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"

static void check(int ok) {
    if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_api api = (srv_api)(data[0] % SRV_API_COUNT);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    srv_limits lim = {16, 32};
    srv_request r;
    srv_error e;
    if (!srv_request_parse(api, body, len, &lim, &r, &e)) {
        check(e.http >= 400 && e.http < 600 && e.msg[0] && e.type);
        check(r.msgs == NULL && r.prompt == NULL && r.ids == NULL && r.n_stops == 0);
        return 0;
    }
    check(r.api == api);
    if (api == SRV_API_CHAT || api == SRV_API_MESSAGES || api == SRV_API_COUNT_TOKENS) {
        check(r.n_msgs >= 1 && r.n_msgs <= (size_t)lim.max_messages + 1);
        for (size_t i = 0; i < r.n_msgs; i++) {
            check(r.msgs[i].content != NULL && (unsigned)r.msgs[i].role <= TS_ROLE_ASSISTANT);
            check(ts_utf8_valid(r.msgs[i].content, strlen(r.msgs[i].content)));
        }
    }
    if (api == SRV_API_COMPLETION) check((r.prompt != NULL) != (r.ids != NULL));
    if (api == SRV_API_TOKENIZE) check(r.prompt && ts_utf8_valid(r.prompt, strlen(r.prompt)));
    check(r.n_stops <= SRV_MAX_STOPS);
    for (size_t i = 0; i < r.n_stops; i++) check(r.stops[i][0] && strlen(r.stops[i]) <= SRV_MAX_STOP_BYTES);
    check(r.top_logprobs >= 0 && r.top_logprobs <= TS_MAX_TOP_LOGPROBS);
    check(!r.has_max_tokens || r.max_tokens >= 1);
    check(r.sampler.temperature >= 0 && r.sampler.top_p > 0 && r.sampler.top_p <= 1 && r.sampler.min_p >= 0 && r.sampler.min_p <= 1);
    if (api == SRV_API_MESSAGES) check(r.has_max_tokens);
    srv_request_free(&r);
    return 0;
}
