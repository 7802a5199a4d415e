/* JSON bodies of the OpenAI and Anthropic APIs -> srv_request (request.h).
 * Unknown fields are ignored, as both APIs' servers do, except the ones that
 * ask for something we do not do (tools, images, n > 1, penalties we do not
 * implement): those are refused naming the field, never silently dropped. */
#include "server/request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static bool fail(srv_error *e, int http, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static bool fail(srv_error *e, int http, const char *type, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}
#define BAD(param, ...) fail(err, 400, "invalid_request_error", param, __VA_ARGS__)

/* Before cJSON: nesting depth (cJSON's own limit is 1000 levels of C
 * recursion) and "\u0000" escapes, which cJSON would turn into a NUL that
 * silently cuts the string short. */
static bool prescan(const char *s, size_t n, int32_t max_depth, srv_error *err) {
    int32_t depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') {
                if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
                    return BAD("", "a string holds a NUL character (\\u0000), which is not accepted");
                i++;
            } else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '{' || c == '[') {
            if (++depth > max_depth) return BAD("", "JSON nested deeper than %d levels", (int)max_depth);
        } else if (c == '}' || c == ']') depth--;
    }
    return true;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static bool get_bool(const cJSON *o, const char *name, bool *out, srv_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) return BAD(name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return true;
}

/* A number field within [lo, hi]; *given tells whether it was there. */
static bool get_num(const cJSON *o, const char *name, double lo, double hi, double *out, bool *given, srv_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (given) *given = false;
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return BAD(name, "'%s' must be a number", name);
    if (v->valuedouble < lo || v->valuedouble > hi) return BAD(name, "'%s' is %g; it must be in [%g, %g]", name, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    if (given) *given = true;
    return true;
}

static bool get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *out, bool *given, srv_error *err) {
    double d = 0;
    bool g = false;
    if (!get_num(o, name, lo, hi, &d, &g, err)) return false;
    if (g && d != floor(d)) return BAD(name, "'%s' must be an integer", name);
    if (g) *out = (int64_t)d;
    if (given) *given = g;
    return true;
}

/* Present and not null/false/0/empty: the field asks for something. */
static bool asks(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return cJSON_GetArraySize(v) > 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != 0;
    return true;
}

static bool refuse_fields(const cJSON *root, const char *const *names, const char *why, srv_error *err) {
    for (size_t i = 0; names[i]; i++)
        if (asks(cJSON_GetObjectItemCaseSensitive(root, names[i])))
            return BAD(names[i], "'%s' is not supported by this server (%s)", names[i], why);
    return true;
}

static bool add_stop(srv_request *r, const cJSON *v, const char *name, srv_error *err) {
    if (!cJSON_IsString(v)) return BAD(name, "'%s' must be a string or a list of strings", name);
    size_t n = strlen(v->valuestring);
    if (!n) return BAD(name, "'%s' holds an empty string", name);
    if (n > SRV_MAX_STOP_BYTES) return BAD(name, "a '%s' string is %zu bytes; at most %d", name, n, SRV_MAX_STOP_BYTES);
    if (r->n_stops == SRV_MAX_STOPS) return BAD(name, "'%s' holds more than %d strings", name, SRV_MAX_STOPS);
    if (!(r->stops[r->n_stops] = dup_str(v->valuestring))) return fail(err, 500, "api_error", name, "out of memory");
    r->n_stops++;
    return true;
}

static bool get_stops(const cJSON *root, const char *name, bool list_only, srv_request *r, srv_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return true;
    if (cJSON_IsString(v) && !list_only) return add_stop(r, v, name, err);
    if (!cJSON_IsArray(v)) return BAD(name, list_only ? "'%s' must be a list of strings" : "'%s' must be a string or a list of strings", name);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) if (!add_stop(r, it, name, err)) return false;
    return true;
}

/* Sampling fields shared by every generating endpoint. */
static bool get_sampling(const cJSON *root, srv_request *r, bool anthropic, srv_error *err) {
    double d;
    bool g;
    int64_t n;
    if (!get_num(root, "temperature", 0, anthropic ? 1 : 2, &d, &g, err)) return false;
    if (g) r->sampler.temperature = (float)d;
    if (!get_num(root, "top_p", 0, 1, &d, &g, err)) return false;
    if (g) {
        if (d <= 0) return BAD("top_p", "'top_p' must be > 0");
        r->sampler.top_p = (float)d;
    }
    if (!get_int(root, "top_k", 0, 1 << 30, &n, &g, err)) return false;
    if (g) r->sampler.top_k = (int32_t)n;
    if (!get_num(root, "min_p", 0, 1, &d, &g, err)) return false;
    if (g) r->sampler.min_p = (float)d;
    if (!get_num(root, "repeat_penalty", 1e-3, 100, &d, &g, err)) return false;
    if (g) r->sampler.repeat_penalty = (float)d;
    /* any 64-bit integer: the seed is its two's complement */
    if (!get_num(root, "seed", -9.2e18, 1.8e19, &d, &g, err)) return false;
    if (g) {
        if (d != floor(d)) return BAD("seed", "'seed' must be an integer");
        r->sampler.seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
        r->has_seed = true;
    }
    return true;
}

static bool get_max_tokens(const cJSON *root, const char *name, srv_request *r, srv_error *err) {
    int64_t n;
    bool g;
    if (!get_int(root, name, 1, 1e9, &n, &g, err)) return false;
    if (g) {
        r->has_max_tokens = true;
        r->max_tokens = n;
    }
    return true;
}

static bool get_model(const cJSON *root, srv_request *r, srv_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsString(v)) return BAD("model", "'model' must be a string");
    if (!(r->model = dup_str(v->valuestring))) return fail(err, 500, "api_error", "model", "out of memory");
    return true;
}

static bool push_msg(srv_request *r, ts_chat_role role, char *content, int32_t max_messages, srv_error *err) {
    if ((int64_t)r->n_msgs >= max_messages) {
        free(content);
        return BAD("messages", "more than %d messages", (int)max_messages);
    }
    r->msgs[r->n_msgs].role = role;
    r->msgs[r->n_msgs].content = content;
    r->n_msgs++;
    return true;
}

/* Content that is a string or a list of text blocks ({"type":"text","text":..}),
 * joined; any other block type is refused naming it. */
static bool text_content(const cJSON *c, const char *where, char **out, srv_error *err) {
    char p[96];
    if (cJSON_IsString(c)) {
        if (!(*out = dup_str(c->valuestring))) return fail(err, 500, "api_error", where, "out of memory");
        return true;
    }
    if (!cJSON_IsArray(c)) return BAD(where, "'%s' must be a string or a list of content blocks", where);
    size_t total = 0;
    int k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c) {
        snprintf(p, sizeof p, "%s[%d]", where, k);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type");
        if (!cJSON_IsObject(b) || !cJSON_IsString(t)) return BAD(p, "'%s' must be an object with a string 'type'", p);
        if (strcmp(t->valuestring, "text")) {
            snprintf(p, sizeof p, "%s[%d].type", where, k);
            return BAD(p, "'%s' is \"%.40s\": only text content is supported (no images, audio, files or tool blocks)", p,
                       t->valuestring);
        }
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!cJSON_IsString(x)) {
            snprintf(p, sizeof p, "%s[%d].text", where, k);
            return BAD(p, "'%s' must be a string", p);
        }
        total += strlen(x->valuestring);
        k++;
    }
    char *s = malloc(total + 1);
    if (!s) return fail(err, 500, "api_error", where, "out of memory");
    size_t o = 0;
    cJSON_ArrayForEach(b, c) {
        const char *x = cJSON_GetObjectItemCaseSensitive(b, "text")->valuestring;
        size_t n = strlen(x);
        memcpy(s + o, x, n);
        o += n;
    }
    s[o] = 0;
    *out = s;
    return true;
}

static bool get_messages(const cJSON *root, srv_request *r, const srv_limits *lim, bool anthropic, srv_error *err) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!m) return BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(m)) return BAD("messages", "'messages' must be a list");
    int n = cJSON_GetArraySize(m);
    if (n == 0) return BAD("messages", "'messages' is empty");
    if (n > lim->max_messages) return BAD("messages", "%d messages; at most %d", n, (int)lim->max_messages);
    r->msgs = calloc((size_t)n + 1, sizeof *r->msgs);
    if (!r->msgs) return fail(err, 500, "api_error", "messages", "out of memory");
    int32_t cap = lim->max_messages + 1;
    if (anthropic) {
        const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
        if (sys && !cJSON_IsNull(sys)) {
            char *s;
            if (!text_content(sys, "system", &s, err)) return false;
            if (!push_msg(r, TS_ROLE_SYSTEM, s, cap, err)) return false;
        }
    }
    char p[96];
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        snprintf(p, sizeof p, "messages[%d]", i);
        if (!cJSON_IsObject(it)) return BAD(p, "'%s' must be an object", p);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        snprintf(p, sizeof p, "messages[%d].role", i);
        if (!cJSON_IsString(role)) return BAD(p, "'%s' must be a string", p);
        ts_chat_role rl;
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer") && !anthropic) rl = TS_ROLE_SYSTEM;
        else if (!ts_chat_role_parse(rs, &rl) || (anthropic && rl == TS_ROLE_SYSTEM))
            return BAD(p, "'%s' is \"%.40s\": expected %s", p, rs,
                       anthropic ? "user or assistant (the system prompt goes in 'system')"
                                 : "system, developer, user or assistant (tool messages are not supported)");
        static const char *const tool_keys[] = {"tool_calls", "function_call", "tool_call_id", NULL};
        for (size_t k = 0; tool_keys[k]; k++)
            if (asks(cJSON_GetObjectItemCaseSensitive(it, tool_keys[k]))) {
                snprintf(p, sizeof p, "messages[%d].%s", i, tool_keys[k]);
                return BAD(p, "'%s': tool calls are not supported by this server", p);
            }
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        snprintf(p, sizeof p, "messages[%d].content", i);
        if (!c) return BAD(p, "'%s' is required", p);
        char *s;
        if (!text_content(c, p, &s, err)) return false;
        if (!push_msg(r, rl, s, cap, err)) return false;
        i++;
    }
    return true;
}

static bool get_ids(const cJSON *v, const char *name, srv_request *r, srv_error *err) {
    int n = cJSON_GetArraySize(v);
    r->ids = malloc(sizeof *r->ids * (size_t)(n ? n : 1));
    if (!r->ids) return fail(err, 500, "api_error", name, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 || it->valuedouble > INT32_MAX)
            return BAD(name, "'%s' must be a list of token ids (non-negative integers)", name);
        r->ids[r->n_ids++] = (int32_t)it->valuedouble;
    }
    return true;
}

static const char *const openai_refused[] = {"tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
                                             "audio", "logit_bias", "presence_penalty", "frequency_penalty",
                                             "prediction", "web_search_options", NULL};
static const char *const anthropic_refused[] = {"tools", "tool_choice", "mcp_servers", "container", NULL};

static bool parse_openai(const cJSON *root, srv_request *r, const srv_limits *lim, srv_error *err) {
    bool chat = r->api == SRV_API_CHAT;
    if (!refuse_fields(root, openai_refused, "text generation only", err)) return false;
    int64_t n = 1;
    bool g;
    if (!get_int(root, "n", 1, 1, &n, &g, err)) return false;
    if (!get_int(root, "best_of", 1, 1, &n, &g, err)) return false;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text"))
            return BAD("response_format", "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(root, "modalities");
    if (mod && !cJSON_IsNull(mod)) {
        const cJSON *it;
        if (!cJSON_IsArray(mod)) return BAD("modalities", "'modalities' must be a list");
        cJSON_ArrayForEach(it, mod) if (!cJSON_IsString(it) || strcmp(it->valuestring, "text"))
            return BAD("modalities", "only the \"text\" modality is supported");
    }
    if (!get_model(root, r, err) || !get_sampling(root, r, false, err) || !get_stops(root, "stop", false, r, err)) return false;
    if (!get_max_tokens(root, "max_tokens", r, err)) return false;
    if (chat && !get_max_tokens(root, "max_completion_tokens", r, err)) return false;
    if (!get_bool(root, "stream", &r->stream, err)) return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) return BAD("stream_options", "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &r->include_usage, err)) {
            snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            return false;
        }
    }
    if (chat) {
        int64_t k = 0;
        if (!get_bool(root, "logprobs", &r->logprobs, err)) return false;
        if (!get_int(root, "top_logprobs", 0, TS_MAX_TOP_LOGPROBS, &k, &g, err)) return false;
        if (g && !r->logprobs) return BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int32_t)k;
        return get_messages(root, r, lim, false, err);
    }
    /* completions: logprobs is the number of alternatives (0..5 in OpenAI's API; we allow up to 20) */
    int64_t k = 0;
    if (!get_int(root, "logprobs", 0, TS_MAX_TOP_LOGPROBS, &k, &g, err)) return false;
    if (g) {
        r->logprobs = true;
        r->top_logprobs = (int32_t)k;
    }
    if (asks(cJSON_GetObjectItemCaseSensitive(root, "echo"))) return BAD("echo", "'echo' is not supported");
    if (asks(cJSON_GetObjectItemCaseSensitive(root, "suffix"))) return BAD("suffix", "'suffix' (insertion) is not supported");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!p) return BAD("prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0))) p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        if (!(r->prompt = dup_str(p->valuestring))) return fail(err, 500, "api_error", "prompt", "out of memory");
        return true;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(p, 0))) return get_ids(p, "prompt", r, err);
    return BAD("prompt", "'prompt' must be a string, a list of one string, or a list of token ids (one prompt per request)");
}

static bool parse_anthropic(const cJSON *root, srv_request *r, const srv_limits *lim, srv_error *err) {
    if (!refuse_fields(root, anthropic_refused, "text generation only", err)) return false;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    if (th && !cJSON_IsNull(th)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(th, "type");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "disabled"))
            return BAD("thinking", "'thinking' is not supported by this server");
    }
    if (!get_model(root, r, err)) return false;
    if (r->api == SRV_API_COUNT_TOKENS) return get_messages(root, r, lim, true, err);
    if (!get_sampling(root, r, true, err) || !get_stops(root, "stop_sequences", true, r, err)) return false;
    if (!get_max_tokens(root, "max_tokens", r, err)) return false;
    if (!r->has_max_tokens) return BAD("max_tokens", "'max_tokens' is required");
    if (!get_bool(root, "stream", &r->stream, err)) return false;
    r->include_usage = true;
    return get_messages(root, r, lim, true, err);
}

bool srv_request_parse(srv_api api, const char *body, size_t len, const srv_limits *lim, srv_request *out, srv_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->api = api;
    out->sampler = ts_sampler_params_default();
    out->add_special = true;
    if (api < 0 || api >= SRV_API_COUNT) return fail(err, 500, "api_error", "", "unknown endpoint");
    if (!len) return BAD("", "the request body is empty (expected a JSON object)");
    if (!ts_utf8_valid(body, len)) return BAD("", "the request body is not valid UTF-8");
    if (memchr(body, 0, len)) return BAD("", "the request body holds a NUL byte");
    if (!prescan(body, len, lim->max_depth, err)) return false;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return BAD("", "malformed JSON near byte %zu", at);
    }
    bool ok;
    if (!cJSON_IsObject(root)) ok = BAD("", "the request body must be a JSON object");
    else switch (api) {
        case SRV_API_CHAT:
        case SRV_API_COMPLETION: ok = parse_openai(root, out, lim, err); break;
        case SRV_API_MESSAGES:
        case SRV_API_COUNT_TOKENS: ok = parse_anthropic(root, out, lim, err); break;
        case SRV_API_TOKENIZE: {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "content");
            ok = get_bool(root, "add_special", &out->add_special, err) && get_bool(root, "with_pieces", &out->with_pieces, err);
            if (ok && !cJSON_IsString(c)) ok = BAD("content", "'content' must be a string");
            if (ok && !(out->prompt = dup_str(c->valuestring))) ok = fail(err, 500, "api_error", "content", "out of memory");
            break;
        }
        case SRV_API_DETOKENIZE: {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
            if (!cJSON_IsArray(t)) ok = BAD("tokens", "'tokens' must be a list of token ids");
            else ok = get_ids(t, "tokens", out, err);
            break;
        }
        default: ok = fail(err, 500, "api_error", "", "unknown endpoint");
    }
    cJSON_Delete(root);
    if (!ok) srv_request_free(out);
    if (!ok) out->api = api;
    return ok;
}

void srv_request_free(srv_request *r) {
    if (!r) return;
    free(r->model);
    for (size_t i = 0; i < r->n_msgs; i++) free((void *)r->msgs[i].content);
    free(r->msgs);
    free(r->prompt);
    free(r->ids);
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    memset(r, 0, sizeof *r);
}
