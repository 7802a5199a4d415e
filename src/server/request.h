/* The server's request parser: one HTTP body (JSON) -> one srv_request, or
 * an error naming the field, the HTTP status and the API's error type. It
 * trusts nothing: size, nesting depth, NUL escapes and UTF-8 are checked
 * before cJSON sees the text, and every field's type and range after. The
 * fuzz target (fuzz/fuzz_server_request.c) drives it directly. */
#ifndef TS_SERVER_REQUEST_H
#define TS_SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "turbospark.h"

typedef enum srv_api {
    SRV_API_CHAT = 0,     /* POST /v1/chat/completions */
    SRV_API_COMPLETION,   /* POST /v1/completions */
    SRV_API_MESSAGES,     /* POST /v1/messages (Anthropic) */
    SRV_API_COUNT_TOKENS, /* POST /v1/messages/count_tokens */
    SRV_API_TOKENIZE,     /* POST /tokenize */
    SRV_API_DETOKENIZE,   /* POST /detokenize */
    SRV_API_COUNT,
} srv_api;

#define SRV_MAX_STOPS 16
#define SRV_MAX_STOP_BYTES 256

typedef struct srv_limits {
    int32_t max_depth;    /* JSON nesting (objects + arrays) */
    int32_t max_messages; /* messages (plus a system prompt) per request */
} srv_limits;

typedef struct srv_request {
    srv_api api;
    char *model;               /* the "model" field, or NULL when absent */
    ts_chat_message *msgs;     /* (n_msgs) chat / messages: system first when given; contents owned */
    size_t n_msgs;
    char *prompt;              /* completion / tokenize text (owned), or NULL */
    int32_t *ids;              /* (n_ids) completion prompt as ids / detokenize input (ids not range-checked here) */
    size_t n_ids;
    bool has_max_tokens;
    int64_t max_tokens;        /* >= 1 when given */
    ts_sampler_params sampler; /* ts_sampler_params_default() plus the request's fields */
    bool has_seed;
    char *stops[SRV_MAX_STOPS];/* (n_stops) owned, non-empty */
    size_t n_stops;
    bool stream;
    bool include_usage;        /* stream_options.include_usage */
    bool logprobs;
    int32_t top_logprobs;      /* 0..TS_MAX_TOP_LOGPROBS */
    bool add_special;          /* tokenize: BOS as the vocabulary says (default true) */
    bool with_pieces;          /* tokenize: return {id, piece} pairs */
} srv_request;

typedef struct srv_error {
    int http;         /* 400, 404, 413 ... */
    const char *type; /* "invalid_request_error", "not_found_error" ... (same string in both APIs) */
    char param[96];   /* the offending field ("messages[2].content[0].type"), or "" */
    char msg[320];
} srv_error;

/* Parses body[0..len) for api. On failure fills err (http 400 unless the
 * problem is a limit) and leaves *out empty (nothing to free). */
bool srv_request_parse(srv_api api, const char *body, size_t len, const srv_limits *lim, srv_request *out, srv_error *err);
void srv_request_free(srv_request *r);

#endif
