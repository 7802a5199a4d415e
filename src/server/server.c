/* turbospark serve: the OpenAI and Anthropic HTTP APIs over a pool of
 * sessions (docs/SERVER.md).
 *
 * Threads: libmicrohttpd runs one thread per connection (bounded by
 * max_connections); N workers each run one generation at a time on one of
 * the N sessions. A connection thread parses and tokenizes its request,
 * queues a job (bounded: a full queue is 503 + Retry-After) and then either
 * waits for the job (non-streamed) or hands MHD a content reader that drains
 * the job's SSE bytes as the worker appends them (streamed). While it waits
 * it polls the socket for a hang-up, so a client that goes away cancels its
 * job and the worker stops at the next token. A worker takes the idle
 * session whose KV holds the longest prefix of the job's prompt. A
 * watchdog thread cuts off connections whose request takes longer than
 * request_timeout_s to arrive (slow clients, below). */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "base/base.h"
#include "server/request.h"
#include "turbospark.h"

extern const unsigned char srv_chat_html[];
extern const size_t srv_chat_html_len;

enum { ST_LOADING = 0, ST_READY, ST_FAILED, ST_STOPPING };

typedef struct slot {
    ts_session *s;
    bool busy;
} slot;

typedef struct job job;

enum { W_RECEIVING = 0, W_ANSWERING, W_CUT };

/* One per open connection (MHD_OPTION_NOTIFY_CONNECTION): the clock of the
 * request deadline. Guarded by the server's watch_mu. */
typedef struct conn_watch {
    int fd;         /* the connection's socket: MHD closes it only after NOTIFY_CLOSED removed this record */
    double t_ready; /* ts_now() when the connection became ready for its current request (accepted, or the last response sent) */
    int phase;      /* W_*: the deadline runs only while W_RECEIVING; W_CUT: the watchdog closed it */
    bool begun;     /* the current request's line has arrived: a cut answers 408 (before it, the connection only idled) */
    bool anthropic; /* the 408's error shape, once the request line is known */
    struct conn_watch *prev, *next;
} conn_watch;

typedef struct metrics {
    uint64_t requests[SRV_API_COUNT + 4]; /* per srv_api, then index/health/models/metrics */
    uint64_t errors_4xx, errors_5xx, rejected_queue_full, disconnects;
    uint64_t request_timeouts;    /* connections cut because their request did not arrive in time */
    uint64_t tokens_after_cancel; /* tokens sampled after a job's cancel flag was seen set (stop latency) */
    uint64_t prompt_tokens, cached_tokens, generated_tokens;
    double prefill_s, decode_s;
    uint64_t ttft_n;
    double ttft_sum_s;
} metrics;

struct ts_server {
    ts_server_opts o;
    char *host, *api_key, *model_id, *model_path, *tmpl_name; /* owned copies */
    struct MHD_Daemon *d;
    int32_t port;
    atomic_int state;
    char load_error[320];
    ts_model *model;
    const ts_vocab *vocab;
    ts_chat_template *tmpl; /* NULL: chat endpoints answer 400 with tmpl_error */
    char tmpl_error[320];
    int32_t n_ctx, n_vocab;
    slot *slots;
    int32_t n_slots;
    pthread_t *workers;
    int32_t n_workers;
    pthread_mutex_t mu; /* guards the queue, the slots' busy flags, busy and m */
    pthread_cond_t cv;  /* workers wait here for jobs */
    job *q_head, *q_tail;
    int32_t q_len, busy;
    metrics m;
    atomic_uint_fast64_t counter; /* request ids and unseeded requests' seeds */
    sem_t stop_sem;
    atomic_int stop_flag; /* set by ts_server_stop (lock-free: safe in a signal handler) */
    pthread_mutex_t watch_mu; /* guards the watch list, its records and watch_stop; never held while taking mu */
    pthread_cond_t watch_cv;  /* the watchdog sleeps here between checks; ts_server_free wakes it */
    conn_watch *watch_head;   /* the open connections, doubly linked */
    int32_t n_watch;          /* records in the list: connections open now */
    bool watch_stop;          /* the watchdog returns */
    bool watchdog_on;         /* the watchdog thread was started: join it */
    pthread_t watchdog;
};

/* ---------------------------------------------------------------- jobs */

struct job {
    ts_server *srv;
    srv_request req;
    int32_t *ids; /* (n_ids) the prompt */
    int32_t n_ids;
    int32_t max_new;
    char id[48];
    long created;
    int fd; /* the client's socket: polled for a hang-up */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    bool done;
    atomic_bool cancel;
    /* streamed bytes not yet handed to MHD */
    char *out;
    size_t out_len, out_off, out_cap;
    double last_out;
    /* the reply */
    char *text;
    size_t text_len, text_cap;
    ts_token_event *ev; /* (n_ev) logprob events; streamed: those not yet sent */
    size_t n_ev, ev_cap;
    size_t sent_text; /* streamed completions: text offset of the next chunk's first byte */
    int32_t expect_cached;
    int32_t n_after_cancel; /* tokens sampled after cancel was seen set (worker only; at most 1 when the loop honours the callbacks) */
    ts_status st;
    char err[320];
    ts_gen_result res;
    double t_submit, t_first;
    job *next;
};

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Waits on cv at most ms; callers loop on their condition (wake-ups may be
 * early or spurious). */
static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

static void job_unref(job *j) {
    pthread_mutex_lock(&j->mu);
    int r = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (r) return;
    srv_request_free(&j->req);
    free(j->ids);
    free(j->out);
    free(j->text);
    free(j->ev);
    ts_free(j->res.ids);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static bool buf_add(char **b, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *nb = realloc(*b, c);
        if (!nb) return false;
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
    return true;
}

/* Appends SSE bytes for the reader (under the job's lock) and wakes it. */
static void emit_raw(job *j, const char *s, size_t n) {
    pthread_mutex_lock(&j->mu);
    if (!buf_add(&j->out, &j->out_len, &j->out_cap, s, n)) atomic_store(&j->cancel, true);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* "event: E\ndata: JSON\n\n" (Anthropic) or "data: JSON\n\n" (OpenAI); frees obj. */
static void emit(job *j, const char *event, cJSON *obj) {
    char *js = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!js) {
        atomic_store(&j->cancel, true);
        return;
    }
    size_t n = strlen(js) + (event ? strlen(event) : 0) + 32;
    char *line = malloc(n);
    if (line) {
        int k = event ? snprintf(line, n, "event: %s\ndata: %s\n\n", event, js) : snprintf(line, n, "data: %s\n\n", js);
        emit_raw(j, line, (size_t)k);
    } else atomic_store(&j->cancel, true);
    free(line);
    free(js);
}

/* A JSON string from bytes that may not be UTF-8 (a byte-level token). */
static cJSON *json_text(const char *s, size_t n) {
    char *c = ts_utf8_sanitize(s, n);
    cJSON *v = cJSON_CreateString(c ? c : "");
    ts_free(c);
    return v;
}

/* ---------------------------------------------------------------- responses */

static const char *finish_openai(ts_stop_reason r) {
    switch (r) {
    case TS_STOP_LENGTH:
    case TS_STOP_CTX: return "length";
    default: return "stop";
    }
}

static const char *stop_anthropic(ts_stop_reason r) {
    switch (r) {
    case TS_STOP_STRING: return "stop_sequence";
    case TS_STOP_LENGTH:
    case TS_STOP_CTX: return "max_tokens";
    default: return "end_turn";
    }
}

/* Which stop sequence ended the run: the one that starts where the text
 * handed out ends, in the whole detokenized output. */
static const char *matched_stop(job *j) {
    if (j->res.reason != TS_STOP_STRING || !j->req.n_stops) return NULL;
    char *full = NULL;
    size_t n = 0;
    const char *hit = j->req.stops[0];
    if (ts_detokenize(j->srv->vocab, j->res.ids, (size_t)j->res.n_new, 0, &full, &n) == TS_OK) {
        for (size_t i = 0; i < j->req.n_stops; i++) {
            size_t k = strlen(j->req.stops[i]);
            if (j->text_len + k <= n && !memcmp(full + j->text_len, j->req.stops[i], k)) {
                hit = j->req.stops[i];
                break;
            }
        }
    }
    ts_free(full);
    return hit;
}

static cJSON *piece_json(job *j, int32_t id, bool bytes, cJSON **bytes_out) {
    char *t = NULL;
    size_t n = 0;
    if (ts_detokenize(j->srv->vocab, &id, 1, TS_DETOK_SPECIAL, &t, &n) != TS_OK) n = 0;
    cJSON *s = json_text(t ? t : "", n);
    if (bytes) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)t[i]));
        *bytes_out = a;
    }
    ts_free(t);
    return s;
}

/* OpenAI logprobs over events ev[0..n): chat shape ({"content": [...]}) or
 * the completions shape (parallel arrays). */
static cJSON *logprobs_json(job *j, const ts_token_event *ev, size_t n, size_t text_offset) {
    if (j->req.api == SRV_API_CHAT) {
        cJSON *lp = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(lp, "content");
        for (size_t i = 0; i < n; i++) {
            cJSON *e = cJSON_CreateObject(), *b = NULL;
            cJSON_AddItemToObject(e, "token", piece_json(j, ev[i].id, true, &b));
            cJSON_AddNumberToObject(e, "logprob", ev[i].logprob);
            cJSON_AddItemToObject(e, "bytes", b);
            cJSON *tops = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < ev[i].n_top; k++) {
                cJSON *t = cJSON_CreateObject(), *tb = NULL;
                cJSON_AddItemToObject(t, "token", piece_json(j, ev[i].top_id[k], true, &tb));
                cJSON_AddNumberToObject(t, "logprob", ev[i].top_logprob[k]);
                cJSON_AddItemToObject(t, "bytes", tb);
                cJSON_AddItemToArray(tops, t);
            }
            cJSON_AddItemToArray(content, e);
        }
        return lp;
    }
    cJSON *lp = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(lp, "tokens"), *tlp = cJSON_AddArrayToObject(lp, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(lp, "top_logprobs"), *off = cJSON_AddArrayToObject(lp, "text_offset");
    for (size_t i = 0; i < n; i++) {
        char *t = NULL;
        size_t len = 0;
        if (ts_detokenize(j->srv->vocab, &ev[i].id, 1, TS_DETOK_SPECIAL, &t, &len) != TS_OK) len = 0;
        cJSON_AddItemToArray(toks, json_text(t ? t : "", len));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)text_offset));
        text_offset += len;
        ts_free(t);
        cJSON_AddItemToArray(tlp, cJSON_CreateNumber(ev[i].logprob));
        cJSON *o = cJSON_CreateObject();
        for (int k = 0; k < ev[i].n_top; k++) {
            char *p = NULL;
            size_t pl = 0;
            if (ts_detokenize(j->srv->vocab, &ev[i].top_id[k], 1, TS_DETOK_SPECIAL, &p, &pl) != TS_OK) pl = 0;
            char *c = ts_utf8_sanitize(p ? p : "", pl);
            if (c && !cJSON_GetObjectItemCaseSensitive(o, c)) cJSON_AddNumberToObject(o, c, ev[i].top_logprob[k]);
            ts_free(c);
            ts_free(p);
        }
        cJSON_AddItemToArray(tops, o);
    }
    return lp;
}

static cJSON *usage_openai(const ts_gen_result *r) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_new);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_new);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", r->n_cached);
    return u;
}

static cJSON *usage_anthropic(int32_t n_prompt, int32_t n_cached, int32_t n_out) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", n_prompt - n_cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", n_out);
    return u;
}

static cJSON *openai_head(job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->srv->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "turbospark-" TS_VERSION);
    return o;
}

/* One streamed OpenAI chunk: text (may be NULL), the pending logprob events,
 * finish reason (NULL: null). */
static void emit_openai_chunk(job *j, const char *text, size_t n, bool role, const char *finish) {
    bool chat = j->req.api == SRV_API_CHAT;
    cJSON *o = openai_head(j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (text) cJSON_AddItemToObject(d, "content", json_text(text, n));
    } else cJSON_AddItemToObject(c, "text", json_text(text ? text : "", text ? n : 0));
    if (j->req.logprobs && j->n_ev) {
        cJSON_AddItemToObject(c, "logprobs", logprobs_json(j, j->ev, j->n_ev, j->sent_text));
        j->n_ev = 0;
    } else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(ch, c);
    j->sent_text += text ? n : 0;
    emit(j, NULL, o);
}

/* ---------------------------------------------------------------- worker */

static bool on_text(void *u, const char *t, size_t n) {
    job *j = u;
    if (!buf_add(&j->text, &j->text_len, &j->text_cap, t, n)) return false;
    if (j->req.stream && n) {
        if (j->req.api == SRV_API_MESSAGES) {
            cJSON *o = cJSON_CreateObject(), *d;
            cJSON_AddStringToObject(o, "type", "content_block_delta");
            cJSON_AddNumberToObject(o, "index", 0);
            d = cJSON_AddObjectToObject(o, "delta");
            cJSON_AddStringToObject(d, "type", "text_delta");
            cJSON_AddItemToObject(d, "text", json_text(t, n));
            emit(j, "content_block_delta", o);
        } else emit_openai_chunk(j, t, n, false, NULL);
    }
    return !atomic_load(&j->cancel) && atomic_load(&j->srv->stop_flag) == 0;
}

static bool on_token(void *u, const ts_token_event *ev) {
    job *j = u;
    /* This token's decode step finished after the hang-up was seen: count
     * it (the stop latency /metrics reports) and stop here. */
    if (atomic_load(&j->cancel)) {
        j->n_after_cancel++;
        return false;
    }
    if (j->t_first == 0) j->t_first = ts_now();
    if (j->req.logprobs) {
        if (j->n_ev == j->ev_cap) {
            size_t c = j->ev_cap ? j->ev_cap * 2 : 16;
            ts_token_event *e = realloc(j->ev, c * sizeof *e);
            if (!e) return false;
            j->ev = e;
            j->ev_cap = c;
        }
        j->ev[j->n_ev++] = *ev;
    }
    return !atomic_load(&j->cancel) && atomic_load(&j->srv->stop_flag) == 0;
}

static int32_t common_prefix(ts_session *s, const int32_t *ids, int32_t n) {
    int32_t np = 0;
    const int32_t *t = ts_session_tokens(s, &np);
    int32_t k = 0, lim = np < n - 1 ? np : n - 1;
    while (k < lim && t[k] == ids[k]) k++;
    return k;
}

static void run_job(ts_server *srv, ts_session *s, job *j) {
    /* A seeded request starts from an empty context: a kept prefix changes
     * how the last positions are computed (one-token decode instead of the
     * batched prefill), which moves the logits by rounding and, at a
     * temperature, the sampled text. The same seeded request must give the
     * same text whatever the session held before. */
    if (j->req.has_seed) ts_session_reset(s);
    j->expect_cached = common_prefix(s, j->ids, j->n_ids);
    bool anth = j->req.api == SRV_API_MESSAGES;
    if (j->req.stream) {
        if (anth) {
            cJSON *o = cJSON_CreateObject(), *m;
            cJSON_AddStringToObject(o, "type", "message_start");
            m = cJSON_AddObjectToObject(o, "message");
            cJSON_AddStringToObject(m, "id", j->id);
            cJSON_AddStringToObject(m, "type", "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddStringToObject(m, "model", srv->model_id);
            cJSON_AddArrayToObject(m, "content");
            cJSON_AddNullToObject(m, "stop_reason");
            cJSON_AddNullToObject(m, "stop_sequence");
            cJSON_AddItemToObject(m, "usage", usage_anthropic(j->n_ids, j->expect_cached, 0));
            emit(j, "message_start", o);
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "type", "content_block_start");
            cJSON_AddNumberToObject(o, "index", 0);
            cJSON *b = cJSON_AddObjectToObject(o, "content_block");
            cJSON_AddStringToObject(b, "type", "text");
            cJSON_AddStringToObject(b, "text", "");
            emit(j, "content_block_start", o);
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "type", "ping");
            emit(j, "ping", o);
        } else if (j->req.api == SRV_API_CHAT) emit_openai_chunk(j, "", 0, true, NULL);
    }
    ts_gen_params gp = ts_gen_params_default();
    gp.max_new = j->max_new;
    gp.stops = (const char *const *)j->req.stops;
    gp.n_stops = j->req.n_stops;
    gp.sampler = j->req.sampler;
    gp.reuse_prefix = true;
    gp.logprobs = j->req.logprobs;
    gp.top_logprobs = j->req.top_logprobs;
    ts_status st = ts_session_generate(s, j->ids, j->n_ids, &gp, on_text, on_token, j, &j->res);
    j->st = st;
    if (st) snprintf(j->err, sizeof j->err, "%s", ts_last_error());
    if (!j->req.stream) return;
    if (st) {
        cJSON *o = cJSON_CreateObject(), *e;
        if (anth) {
            cJSON_AddStringToObject(o, "type", "error");
            e = cJSON_AddObjectToObject(o, "error");
            cJSON_AddStringToObject(e, "type", "api_error");
            cJSON_AddStringToObject(e, "message", j->err);
            emit(j, "error", o);
        } else {
            e = cJSON_AddObjectToObject(o, "error");
            cJSON_AddStringToObject(e, "message", j->err);
            cJSON_AddStringToObject(e, "type", "server_error");
            emit(j, NULL, o);
            emit_raw(j, "data: [DONE]\n\n", 14);
        }
        return;
    }
    if (anth) {
        cJSON *o = cJSON_CreateObject(), *d;
        cJSON_AddStringToObject(o, "type", "content_block_stop");
        cJSON_AddNumberToObject(o, "index", 0);
        emit(j, "content_block_stop", o);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "message_delta");
        d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "stop_reason", stop_anthropic(j->res.reason));
        const char *ms = matched_stop(j);
        if (ms) cJSON_AddStringToObject(d, "stop_sequence", ms);
        else cJSON_AddNullToObject(d, "stop_sequence");
        cJSON_AddItemToObject(o, "usage", usage_anthropic(j->res.n_prompt, j->res.n_cached, j->res.n_new));
        emit(j, "message_delta", o);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "message_stop");
        emit(j, "message_stop", o);
        return;
    }
    emit_openai_chunk(j, j->req.api == SRV_API_CHAT ? NULL : "", 0, false, finish_openai(j->res.reason));
    if (j->req.include_usage) {
        cJSON *o = openai_head(j, j->req.api == SRV_API_CHAT ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(o, "choices");
        cJSON_AddItemToObject(o, "usage", usage_openai(&j->res));
        emit(j, NULL, o);
    }
    emit_raw(j, "data: [DONE]\n\n", 14);
}

static void job_done(job *j) {
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_unref(j);
}

static void *worker_main(void *arg) {
    ts_server *srv = arg;
    for (;;) {
        pthread_mutex_lock(&srv->mu);
        while (!srv->q_head && atomic_load(&srv->state) == ST_READY) pthread_cond_wait(&srv->cv, &srv->mu);
        if (atomic_load(&srv->state) != ST_READY) {
            pthread_mutex_unlock(&srv->mu);
            return NULL;
        }
        job *j = srv->q_head;
        srv->q_head = j->next;
        if (!srv->q_head) srv->q_tail = NULL;
        srv->q_len--;
        if (atomic_load(&j->cancel)) {
            srv->m.disconnects++;
            pthread_mutex_unlock(&srv->mu);
            job_done(j);
            continue;
        }
        /* the idle session holding the longest prefix of this prompt */
        int32_t best = -1, best_k = -1;
        for (int32_t i = 0; i < srv->n_slots; i++) {
            if (srv->slots[i].busy) continue;
            int32_t k = common_prefix(srv->slots[i].s, j->ids, j->n_ids);
            if (k > best_k) best = i, best_k = k;
        }
        srv->slots[best].busy = true; /* workers == slots: one is always idle here */
        srv->busy++;
        pthread_mutex_unlock(&srv->mu);

        run_job(srv, srv->slots[best].s, j);

        pthread_mutex_lock(&srv->mu);
        srv->slots[best].busy = false;
        srv->busy--;
        srv->m.prompt_tokens += (uint64_t)j->res.n_prompt;
        srv->m.cached_tokens += (uint64_t)j->res.n_cached;
        srv->m.generated_tokens += (uint64_t)j->res.n_new;
        srv->m.prefill_s += j->res.prefill_s;
        srv->m.decode_s += j->res.decode_s;
        if (j->t_first > 0) {
            srv->m.ttft_n++;
            srv->m.ttft_sum_s += j->t_first - j->t_submit;
        }
        /* a generation the hang-up stopped; one that ended on its own before
         * the hang-up was seen is not a disconnect */
        bool stopped = j->res.reason == TS_STOP_ABORT && atomic_load(&j->cancel);
        if (stopped) {
            srv->m.disconnects++;
            srv->m.tokens_after_cancel += (uint64_t)j->n_after_cancel;
        }
        pthread_mutex_unlock(&srv->mu);
        if (stopped && srv->o.log)
            fprintf(srv->o.log, "%s: the client left; stopped after %d tokens (%d sampled after the hang-up was seen)\n", j->id,
                    (int)j->res.n_new, (int)j->n_after_cancel);
        job_done(j);
    }
}

/* ---------------------------------------------------------------- HTTP */

typedef enum route {
    R_NONE = 0,
    R_INDEX,
    R_HEALTH,
    R_MODELS,
    R_METRICS,
    R_CHAT,
    R_COMPLETION,
    R_MESSAGES,
    R_COUNT_TOKENS,
    R_TOKENIZE,
    R_DETOKENIZE,
} route;

static const struct {
    const char *path;
    route r;
    const char *method;
} routes[] = {
    {"/", R_INDEX, "GET"},
    {"/index.html", R_INDEX, "GET"},
    {"/health", R_HEALTH, "GET"},
    {"/v1/health", R_HEALTH, "GET"},
    {"/v1/models", R_MODELS, "GET"},
    {"/models", R_MODELS, "GET"},
    {"/metrics", R_METRICS, "GET"},
    {"/v1/chat/completions", R_CHAT, "POST"},
    {"/chat/completions", R_CHAT, "POST"},
    {"/v1/completions", R_COMPLETION, "POST"},
    {"/completions", R_COMPLETION, "POST"},
    {"/v1/messages", R_MESSAGES, "POST"},
    {"/v1/messages/count_tokens", R_COUNT_TOKENS, "POST"},
    {"/tokenize", R_TOKENIZE, "POST"},
    {"/detokenize", R_DETOKENIZE, "POST"},
};

static srv_api api_of(route r) {
    switch (r) {
    case R_CHAT: return SRV_API_CHAT;
    case R_COMPLETION: return SRV_API_COMPLETION;
    case R_MESSAGES: return SRV_API_MESSAGES;
    case R_COUNT_TOKENS: return SRV_API_COUNT_TOKENS;
    case R_TOKENIZE: return SRV_API_TOKENIZE;
    default: return SRV_API_DETOKENIZE;
    }
}

typedef struct conn {
    ts_server *srv;
    route r;
    bool anthropic; /* error shape */
    bool responded;
    bool too_big;
    char *body;
    size_t len, cap;
    int status;
    double t0;
    char method[8];
    char path[64];
} conn;

/* The error in the shape of the API the path belongs to. */
static cJSON *error_json(bool anthropic, const char *type, const char *param, const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e;
    if (anthropic) {
        cJSON_AddStringToObject(o, "type", "error");
        e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "type", type);
        cJSON_AddStringToObject(e, "message", msg);
    } else {
        e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", msg);
        cJSON_AddStringToObject(e, "type", type);
        if (param && *param) cJSON_AddStringToObject(e, "param", param);
        else cJSON_AddNullToObject(e, "param");
        cJSON_AddNullToObject(e, "code");
    }
    return o;
}

/* ---------------------------------------------------------------- slow clients
 *
 * libmicrohttpd bounds how long a connection may sit idle, not how long a
 * request may take to arrive: its timeout (also the per-connection one,
 * MHD_CONNECTION_OPTION_TIMEOUT) restarts at every byte received, so a
 * client that sends one header byte every few seconds holds a connection
 * and its thread forever; and the access handler runs only once the headers
 * are complete, so it never sees such a client. So every connection gets a
 * record when MHD accepts it (NOTIFY_CONNECTION), stamped when the
 * connection becomes ready for a request (accepted, or its last response
 * sent: time a kept-alive connection waits for its next request counts), and
 * a watchdog thread looks at the records every 100 ms. One whose request
 * (line, headers, body) is still arriving after request_timeout_s is cut
 * off: a 408 in one non-blocking send, then shutdown(), so the connection's
 * thread, blocked reading, sees the end of the stream and MHD closes and
 * frees the connection by its usual path.
 *
 * The 408 goes out only once the request line has arrived (MHD's URI log
 * callback): a connection whose next request line has not come is closed
 * silently, as the idle timeout does, so a client's pooled keep-alive
 * connection never holds a stray 408 that it would read as the answer to
 * its next request.
 *
 * Safe against MHD's own use of the socket: while a request arrives MHD only
 * reads (a 100 Continue or its own 400/431 is a whole response written at
 * once, and after one of those the connection is closing anyway), and it
 * closes the socket only after NOTIFY_CLOSED removed the record under the
 * lock the watchdog holds, so the fd is never one the kernel has reused.
 * Once the request is complete (or answered early) the deadline stops until
 * the response is sent: generating takes as long as it takes. */

static conn_watch *watch_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Called at each step of a request: answering true when it is complete or
 * answered early (its deadline stops). False when the watchdog has cut the
 * connection: the caller returns MHD_NO. */
static bool watch_note(conn *x, struct MHD_Connection *c, bool answering) {
    conn_watch *w = watch_of(c);
    if (!w) return true;
    pthread_mutex_lock(&x->srv->watch_mu);
    bool live = w->phase != W_CUT;
    w->anthropic = x->anthropic;
    if (live && answering) w->phase = W_ANSWERING;
    pthread_mutex_unlock(&x->srv->watch_mu);
    return live;
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line has arrived. Returns the
 * request's initial context: none (on_request makes it). */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)uri;
    ts_server *srv = cls;
    conn_watch *w = watch_of(c);
    if (w) {
        pthread_mutex_lock(&srv->watch_mu);
        w->begun = true;
        pthread_mutex_unlock(&srv->watch_mu);
    }
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    ts_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_watch *w = ci ? calloc(1, sizeof *w) : NULL;
        *socket_context = w;
        if (!w) {
            /* a connection without a deadline is what this guards against: refuse it */
            if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
            return;
        }
        w->fd = ci->connect_fd;
        w->t_ready = ts_now();
        pthread_mutex_lock(&srv->watch_mu);
        w->next = srv->watch_head;
        if (w->next) w->next->prev = w;
        srv->watch_head = w;
        srv->n_watch++;
        pthread_mutex_unlock(&srv->watch_mu);
        return;
    }
    conn_watch *w = *socket_context;
    *socket_context = NULL;
    if (!w) return;
    pthread_mutex_lock(&srv->watch_mu);
    if (w->prev) w->prev->next = w->next;
    else srv->watch_head = w->next;
    if (w->next) w->next->prev = w->prev;
    srv->n_watch--;
    pthread_mutex_unlock(&srv->watch_mu);
    free(w);
}

/* Under watch_mu. */
static void watch_cut(ts_server *srv, conn_watch *w) {
    char msg[160];
    snprintf(msg, sizeof msg, "the request was not received within %d s; the connection is closed", (int)srv->o.request_timeout_s);
    cJSON *o = w->begun ? error_json(w->anthropic, "invalid_request_error", NULL, msg) : NULL;
    char *body = o ? cJSON_PrintUnformatted(o) : NULL, *all = NULL;
    cJSON_Delete(o);
    size_t cap = body ? strlen(body) + 160 : 0;
    if (body && (all = malloc(cap))) {
        int k = snprintf(all, cap, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
        /* best effort: a client that does not read gets the close alone */
        if (k > 0 && (size_t)k < cap) (void)send(w->fd, all, (size_t)k, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    free(all);
    free(body);
    shutdown(w->fd, SHUT_RDWR);
    w->phase = W_CUT;
}

static void *watchdog_main(void *arg) {
    ts_server *srv = arg;
    pthread_mutex_lock(&srv->watch_mu);
    while (!srv->watch_stop) {
        double now = ts_now();
        uint64_t cut = 0;
        for (conn_watch *w = srv->watch_head; w; w = w->next)
            if (w->phase == W_RECEIVING && now - w->t_ready >= srv->o.request_timeout_s) {
                watch_cut(srv, w);
                cut++;
            }
        if (cut) {
            pthread_mutex_unlock(&srv->watch_mu);
            pthread_mutex_lock(&srv->mu);
            srv->m.request_timeouts += cut;
            pthread_mutex_unlock(&srv->mu);
            if (srv->o.log)
                fprintf(srv->o.log, "cut %llu connection%s: no complete request within %d s\n", (unsigned long long)cut,
                        cut == 1 ? "" : "s", (int)srv->o.request_timeout_s);
            pthread_mutex_lock(&srv->watch_mu);
        }
        if (!srv->watch_stop) cond_wait_ms(&srv->watch_cv, &srv->watch_mu, 100);
    }
    pthread_mutex_unlock(&srv->watch_mu);
    return NULL;
}

static enum MHD_Result send_buf(conn *x, struct MHD_Connection *c, int status, const char *type, const char *body, size_t n,
                                const char *retry_after, const char *allow) {
    if (!watch_note(x, c, true)) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    if (allow) MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result res = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    x->status = status;
    x->responded = true;
    return res;
}

static enum MHD_Result send_json(conn *x, struct MHD_Connection *c, int status, cJSON *o, const char *retry_after,
                                 const char *allow) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) return MHD_NO;
    enum MHD_Result r = send_buf(x, c, status, "application/json", s, strlen(s), retry_after, allow);
    free(s);
    return r;
}

static enum MHD_Result send_error(conn *x, struct MHD_Connection *c, int status, const char *type, const char *param,
                                  const char *msg, const char *retry_after, const char *allow) {
    return send_json(x, c, status, error_json(x->anthropic, type, param, msg), retry_after, allow);
}

static enum MHD_Result send_errorf(conn *x, struct MHD_Connection *c, int status, const char *type, const char *param,
                                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result send_errorf(conn *x, struct MHD_Connection *c, int status, const char *type, const char *param,
                                   const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_error(x, c, status, type, param, msg, status == 503 ? "1" : NULL, NULL);
}

/* Equal length and bytes, in time that depends only on the lengths. */
static bool key_equal(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = (unsigned char)(na != nb);
    for (size_t i = 0; i < nb; i++) d |= (unsigned char)(((i < na) ? (unsigned char)a[i] : 0) ^ (unsigned char)b[i]);
    return d == 0;
}

static bool authorized(ts_server *srv, struct MHD_Connection *c) {
    if (!srv->api_key) return true;
    const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (k && key_equal(k, srv->api_key)) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (a && !strncasecmp(a, "Bearer ", 7)) {
        a += 7;
        while (*a == ' ') a++;
        if (key_equal(a, srv->api_key)) return true;
    }
    return false;
}

static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (client_gone(j->fd)) {
            atomic_store(&j->cancel, true);
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (j->out_off < j->out_len) break;
        if (j->done) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        double now = ts_now();
        if (now - j->last_out > j->srv->o.ping_ms * 1e-3) {
            /* an SSE comment: keeps proxies and clients from timing out during a long prefill or a wait in the queue */
            static const char ping[] = ": ping\n\n";
            size_t n = sizeof ping - 1 < max ? sizeof ping - 1 : max;
            memcpy(buf, ping, n);
            j->last_out = now;
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        cond_wait_ms(&j->cv, &j->mu, 20);
    }
    size_t n = j->out_len - j->out_off;
    if (n > max) n = max;
    memcpy(buf, j->out + j->out_off, n);
    j->out_off += n;
    if (j->out_off == j->out_len) j->out_off = j->out_len = 0;
    j->last_out = ts_now();
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    job *j = cls;
    atomic_store(&j->cancel, true); /* a no-op when it is done */
    job_unref(j);
}

/* Queues j; false when the queue is full or the server is stopping. */
static bool submit(ts_server *srv, job *j) {
    pthread_mutex_lock(&srv->mu);
    if (atomic_load(&srv->state) != ST_READY || srv->q_len + srv->busy >= srv->n_slots + srv->o.n_queue) {
        srv->m.rejected_queue_full++;
        pthread_mutex_unlock(&srv->mu);
        return false;
    }
    j->next = NULL;
    if (srv->q_tail) srv->q_tail->next = j;
    else srv->q_head = j;
    srv->q_tail = j;
    srv->q_len++;
    pthread_cond_signal(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    return true;
}

static enum MHD_Result send_tokens(conn *x, struct MHD_Connection *c, const srv_request *rq) {
    ts_server *srv = x->srv;
    int32_t *ids = NULL;
    size_t n = 0;
    if (ts_tokenize(srv->vocab, rq->prompt, strlen(rq->prompt), rq->add_special, true, &ids, &n) != TS_OK)
        return send_errorf(x, c, 400, "invalid_request_error", "content", "%s", ts_last_error());
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; i < n; i++) {
        if (!rq->with_pieces) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
            continue;
        }
        cJSON *e = cJSON_CreateObject();
        size_t pl = 0;
        const char *p = ts_token_piece(srv->vocab, ids[i], &pl);
        cJSON_AddNumberToObject(e, "id", ids[i]);
        cJSON_AddItemToObject(e, "piece", json_text(p ? p : "", p ? pl : 0));
        cJSON_AddItemToArray(a, e);
    }
    ts_free(ids);
    return send_json(x, c, 200, o, NULL, NULL);
}

/* The prompt of a generating request as ids, with the context checks; on
 * failure an error was sent and NULL returned. */
static int32_t *prompt_ids(conn *x, struct MHD_Connection *c, const srv_request *rq, int32_t *n_out, enum MHD_Result *res) {
    ts_server *srv = x->srv;
    int32_t *ids = NULL;
    size_t n = 0;
    if (rq->msgs) {
        if (!srv->tmpl) {
            *res = send_errorf(x, c, 400, "invalid_request_error", "messages", "%s", srv->tmpl_error);
            return NULL;
        }
        if (ts_chat_tokenize(srv->tmpl, srv->vocab, rq->msgs, rq->n_msgs, true, &ids, &n) != TS_OK) {
            *res = send_errorf(x, c, 400, "invalid_request_error", "messages", "%s", ts_last_error());
            return NULL;
        }
    } else if (rq->prompt) {
        if (ts_tokenize(srv->vocab, rq->prompt, strlen(rq->prompt), true, true, &ids, &n) != TS_OK) {
            *res = send_errorf(x, c, 400, "invalid_request_error", "prompt", "%s", ts_last_error());
            return NULL;
        }
    } else {
        for (size_t i = 0; i < rq->n_ids; i++)
            if (rq->ids[i] >= srv->n_vocab) {
                *res = send_errorf(x, c, 400, "invalid_request_error", "prompt", "token id %d is outside the vocabulary (%d tokens)",
                                   rq->ids[i], srv->n_vocab);
                return NULL;
            }
        ids = malloc(sizeof *ids * (rq->n_ids ? rq->n_ids : 1));
        if (!ids) {
            *res = send_errorf(x, c, 500, "api_error", NULL, "out of memory");
            return NULL;
        }
        memcpy(ids, rq->ids, sizeof *ids * rq->n_ids);
        n = rq->n_ids;
    }
    if (n == 0) {
        ts_free(ids);
        *res = send_errorf(x, c, 400, "invalid_request_error", rq->msgs ? "messages" : "prompt", "the prompt is empty");
        return NULL;
    }
    *n_out = (int32_t)(n > INT32_MAX ? INT32_MAX : n);
    return ids;
}

static void fill_reply_json(job *j, cJSON *o) {
    const ts_gen_result *r = &j->res;
    if (j->req.api == SRV_API_MESSAGES) {
        cJSON_AddStringToObject(o, "id", j->id);
        cJSON_AddStringToObject(o, "type", "message");
        cJSON_AddStringToObject(o, "role", "assistant");
        cJSON_AddStringToObject(o, "model", j->srv->model_id);
        cJSON *content = cJSON_AddArrayToObject(o, "content"), *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddItemToObject(b, "text", json_text(j->text ? j->text : "", j->text_len));
        cJSON_AddItemToArray(content, b);
        cJSON_AddStringToObject(o, "stop_reason", stop_anthropic(r->reason));
        const char *ms = matched_stop(j);
        if (ms) cJSON_AddStringToObject(o, "stop_sequence", ms);
        else cJSON_AddNullToObject(o, "stop_sequence");
        cJSON_AddItemToObject(o, "usage", usage_anthropic(r->n_prompt, r->n_cached, r->n_new));
        return;
    }
    bool chat = j->req.api == SRV_API_CHAT;
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->srv->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "turbospark-" TS_VERSION);
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddItemToObject(m, "content", json_text(j->text ? j->text : "", j->text_len));
    } else cJSON_AddItemToObject(c, "text", json_text(j->text ? j->text : "", j->text_len));
    if (j->req.logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs_json(j, j->ev, j->n_ev, 0));
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish_openai(r->reason));
    cJSON_AddItemToArray(ch, c);
    cJSON_AddItemToObject(o, "usage", usage_openai(r));
}

static enum MHD_Result generate(conn *x, struct MHD_Connection *c, srv_request *rq) {
    ts_server *srv = x->srv;
    enum MHD_Result res = MHD_NO;
    int32_t n = 0;
    int32_t *ids = prompt_ids(x, c, rq, &n, &res);
    if (!ids) return res;
    if (n >= srv->n_ctx) {
        ts_free(ids);
        return send_errorf(x, c, 400, "invalid_request_error", rq->msgs ? "messages" : "prompt",
                           "the prompt is %d tokens; the context holds %d per session (one more is needed to generate)", n,
                           srv->n_ctx);
    }
    if (rq->has_max_tokens && (int64_t)n + rq->max_tokens > srv->n_ctx) {
        ts_free(ids);
        return send_errorf(x, c, 400, "invalid_request_error", "max_tokens",
                           "max_tokens (%lld) + the prompt (%d tokens) = %lld exceeds the context of %d tokens per session",
                           (long long)rq->max_tokens, n, (long long)rq->max_tokens + n, srv->n_ctx);
    }
    job *j = calloc(1, sizeof *j);
    if (!j) {
        ts_free(ids);
        return send_errorf(x, c, 500, "api_error", NULL, "out of memory");
    }
    j->srv = srv;
    j->req = *rq; /* takes ownership */
    memset(rq, 0, sizeof *rq);
    j->ids = ids;
    j->n_ids = n;
    j->max_new = j->req.has_max_tokens ? (int32_t)j->req.max_tokens : srv->n_ctx - n;
    uint64_t k = atomic_fetch_add(&srv->counter, 1);
    if (!j->req.has_seed) j->req.sampler.seed = mix64(k ^ (uint64_t)(ts_now() * 1e9));
    snprintf(j->id, sizeof j->id, "%s%016llx", j->req.api == SRV_API_MESSAGES ? "msg_" : j->req.api == SRV_API_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)mix64(k + 0x5eed));
    j->created = (long)time(NULL);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 2; /* the worker and this connection (or its stream) */
    j->t_submit = j->last_out = ts_now();
    if (!submit(srv, j)) {
        j->refs = 1;
        job_unref(j);
        x->status = 503;
        return send_errorf(x, c, 503, x->anthropic ? "overloaded_error" : "server_error", NULL,
                           "all %d sessions are busy and %d requests are already waiting; retry later", srv->n_slots, srv->o.n_queue);
    }
    if (j->req.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, j, stream_free);
        if (!r) {
            stream_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        res = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        x->status = 200;
        x->responded = true;
        return res;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        if (client_gone(j->fd)) {
            atomic_store(&j->cancel, true);
            pthread_mutex_unlock(&j->mu);
            job_unref(j);
            x->status = 499;
            return MHD_NO; /* closes the connection */
        }
        cond_wait_ms(&j->cv, &j->mu, 20);
    }
    pthread_mutex_unlock(&j->mu);
    if (j->st) {
        res = send_errorf(x, c, 500, "api_error", NULL, "%s", j->err);
    } else if (j->res.reason == TS_STOP_ABORT) {
        res = send_errorf(x, c, 503, x->anthropic ? "overloaded_error" : "server_error", NULL, "the server is shutting down");
    } else {
        cJSON *o = cJSON_CreateObject();
        fill_reply_json(j, o);
        res = send_json(x, c, 200, o, NULL, NULL);
    }
    job_unref(j);
    return res;
}

static enum MHD_Result send_metrics(conn *x, struct MHD_Connection *c) {
    ts_server *srv = x->srv;
    pthread_mutex_lock(&srv->mu);
    metrics m = srv->m;
    int32_t q = srv->q_len, busy = srv->busy;
    pthread_mutex_unlock(&srv->mu);
    pthread_mutex_lock(&srv->watch_mu);
    int32_t n_conn = srv->n_watch;
    pthread_mutex_unlock(&srv->watch_mu);
    char *b = NULL;
    size_t len = 0, cap = 0;
    char line[256];
#define PUT(...)                                                                                                        \
    do {                                                                                                                \
        int k_ = snprintf(line, sizeof line, __VA_ARGS__);                                                              \
        if (!buf_add(&b, &len, &cap, line, (size_t)k_)) goto oom;                                                       \
    } while (0)
#define METRIC(name, type, help) PUT("# HELP " name " " help "\n# TYPE " name " " type "\n")
    static const char *const names[] = {"chat_completions", "completions", "messages", "count_tokens", "tokenize", "detokenize",
                                        "index", "health", "models", "metrics"};
    METRIC("turbospark_requests_total", "counter", "HTTP requests answered, by endpoint.");
    for (int i = 0; i < SRV_API_COUNT + 4; i++) PUT("turbospark_requests_total{endpoint=\"%s\"} %llu\n", names[i], (unsigned long long)m.requests[i]);
    METRIC("turbospark_errors_total", "counter", "Responses with a 4xx or 5xx status.");
    PUT("turbospark_errors_total{class=\"4xx\"} %llu\n", (unsigned long long)m.errors_4xx);
    PUT("turbospark_errors_total{class=\"5xx\"} %llu\n", (unsigned long long)m.errors_5xx);
    METRIC("turbospark_rejected_total", "counter", "Requests refused with 503 because the queue was full.");
    PUT("turbospark_rejected_total %llu\n", (unsigned long long)m.rejected_queue_full);
    METRIC("turbospark_disconnects_total", "counter", "Generations stopped because the client went away.");
    PUT("turbospark_disconnects_total %llu\n", (unsigned long long)m.disconnects);
    METRIC("turbospark_tokens_after_cancel_total", "counter",
           "Tokens sampled after the server saw the hang-up, over the generations it stopped (the step in flight: at most 1 each).");
    PUT("turbospark_tokens_after_cancel_total %llu\n", (unsigned long long)m.tokens_after_cancel);
    METRIC("turbospark_request_timeouts_total", "counter",
           "Connections closed because a request did not arrive within the request timeout (with a 408 once its request line had).");
    PUT("turbospark_request_timeouts_total %llu\n", (unsigned long long)m.request_timeouts);
    METRIC("turbospark_prompt_tokens_total", "counter", "Prompt tokens of generating requests, cached ones included.");
    PUT("turbospark_prompt_tokens_total %llu\n", (unsigned long long)m.prompt_tokens);
    METRIC("turbospark_prompt_cached_tokens_total", "counter", "Prompt tokens taken from a session's KV cache.");
    PUT("turbospark_prompt_cached_tokens_total %llu\n", (unsigned long long)m.cached_tokens);
    METRIC("turbospark_generated_tokens_total", "counter", "Tokens generated.");
    PUT("turbospark_generated_tokens_total %llu\n", (unsigned long long)m.generated_tokens);
    METRIC("turbospark_prefill_seconds_total", "counter", "Time spent in prefill.");
    PUT("turbospark_prefill_seconds_total %.6f\n", m.prefill_s);
    METRIC("turbospark_decode_seconds_total", "counter", "Time spent decoding.");
    PUT("turbospark_decode_seconds_total %.6f\n", m.decode_s);
    uint64_t evaluated = m.prompt_tokens - m.cached_tokens;
    METRIC("turbospark_prefill_tokens_per_second", "gauge", "Prompt tokens evaluated per second of prefill, over the server's life.");
    PUT("turbospark_prefill_tokens_per_second %.3f\n", m.prefill_s > 0 ? (double)evaluated / m.prefill_s : 0.0);
    METRIC("turbospark_decode_tokens_per_second", "gauge", "Tokens generated per second of decode, over the server's life.");
    PUT("turbospark_decode_tokens_per_second %.3f\n", m.decode_s > 0 ? (double)m.generated_tokens / m.decode_s : 0.0);
    METRIC("turbospark_time_to_first_token_seconds_avg", "gauge", "Mean time from queueing to the first token.");
    PUT("turbospark_time_to_first_token_seconds_avg %.6f\n", m.ttft_n ? m.ttft_sum_s / (double)m.ttft_n : 0.0);
    METRIC("turbospark_queue_depth", "gauge", "Requests waiting for a session.");
    PUT("turbospark_queue_depth %d\n", q);
    METRIC("turbospark_sessions_busy", "gauge", "Sessions generating now.");
    PUT("turbospark_sessions_busy %d\n", busy);
    METRIC("turbospark_connections", "gauge", "HTTP connections open now (this one included).");
    PUT("turbospark_connections %d\n", n_conn);
    METRIC("turbospark_sessions", "gauge", "Sessions (--parallel).");
    PUT("turbospark_sessions %d\n", srv->n_slots);
    if (srv->model && ts_model_has_experts(srv->model)) {
        ts_expert_stats es;
        ts_model_expert_stats(srv->model, &es);
        METRIC("turbospark_expert_requests_total", "counter", "Experts requested by the routers.");
        PUT("turbospark_expert_requests_total %llu\n", (unsigned long long)es.requests);
        METRIC("turbospark_expert_hits_total", "counter", "Expert requests served from the cache.");
        PUT("turbospark_expert_hits_total %llu\n", (unsigned long long)es.hits);
        METRIC("turbospark_expert_cache_hit_rate", "gauge", "Expert cache hits per request.");
        PUT("turbospark_expert_cache_hit_rate %.6f\n", es.requests ? (double)es.hits / (double)es.requests : 0.0);
        METRIC("turbospark_expert_bytes_read_total", "counter", "Expert bytes read from the model file.");
        PUT("turbospark_expert_bytes_read_total %llu\n", (unsigned long long)es.bytes_read);
    }
#undef METRIC
#undef PUT
    enum MHD_Result r = send_buf(x, c, 200, "text/plain; version=0.0.4; charset=utf-8", b, len, NULL, NULL);
    free(b);
    return r;
oom:
    free(b);
    return send_errorf(x, c, 500, "api_error", NULL, "out of memory");
}

static enum MHD_Result send_models(conn *x, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", x->srv->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "turbospark");
    /* Anthropic's models list shape, for clients that read it */
    cJSON_AddStringToObject(m, "type", "model");
    cJSON_AddStringToObject(m, "display_name", x->srv->model_id);
    cJSON_AddNumberToObject(m, "context_length", x->srv->n_ctx);
    cJSON_AddItemToArray(d, m);
    return send_json(x, c, 200, o, NULL, NULL);
}

static enum MHD_Result dispatch(conn *x, struct MHD_Connection *c) {
    ts_server *srv = x->srv;
    int st = atomic_load(&srv->state);
    switch (x->r) {
    case R_INDEX: return send_buf(x, c, 200, "text/html; charset=utf-8", (const char *)srv_chat_html, srv_chat_html_len, NULL, NULL);
    case R_HEALTH: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", st == ST_READY ? "ok" : st == ST_LOADING ? "loading" : st == ST_FAILED ? "error" : "stopping");
        if (st == ST_FAILED) cJSON_AddStringToObject(o, "error", srv->load_error);
        return send_json(x, c, st == ST_READY ? 200 : 503, o, st == ST_READY ? NULL : "1", NULL);
    }
    case R_METRICS: return send_metrics(x, c);
    default: break;
    }
    if (st != ST_READY)
        return send_errorf(x, c, 503, x->anthropic ? "overloaded_error" : "server_error", NULL, "%s",
                           st == ST_LOADING ? "the model is loading" : st == ST_FAILED ? srv->load_error : "the server is stopping");
    if (x->r == R_MODELS) return send_models(x, c);
    srv_limits lim = {srv->o.max_depth, srv->o.max_messages};
    srv_request rq;
    srv_error e;
    if (!srv_request_parse(api_of(x->r), x->body, x->len, &lim, &rq, &e)) return send_error(x, c, e.http, e.type, e.param, e.msg, NULL, NULL);
    enum MHD_Result res;
    if (rq.model && strcmp(rq.model, srv->model_id)) {
        res = send_errorf(x, c, 404, x->anthropic ? "not_found_error" : "invalid_request_error", "model",
                          "model '%.100s' is not served here; this server serves '%s'", rq.model, srv->model_id);
    } else if (x->r == R_TOKENIZE) {
        res = send_tokens(x, c, &rq);
    } else if (x->r == R_DETOKENIZE) {
        for (size_t i = 0; i < rq.n_ids; i++)
            if (rq.ids[i] >= srv->n_vocab) {
                res = send_errorf(x, c, 400, "invalid_request_error", "tokens", "token id %d is outside the vocabulary (%d tokens)",
                                  rq.ids[i], srv->n_vocab);
                srv_request_free(&rq);
                return res;
            }
        char *t = NULL;
        size_t n = 0;
        if (ts_detokenize(srv->vocab, rq.ids, rq.n_ids, 0, &t, &n) != TS_OK) {
            res = send_errorf(x, c, 400, "invalid_request_error", "tokens", "%s", ts_last_error());
        } else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "content", json_text(t, n));
            res = send_json(x, c, 200, o, NULL, NULL);
        }
        ts_free(t);
    } else if (x->r == R_COUNT_TOKENS) {
        int32_t n = 0;
        int32_t *ids = prompt_ids(x, c, &rq, &n, &res);
        if (ids) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "input_tokens", n);
            res = send_json(x, c, 200, o, NULL, NULL);
            ts_free(ids);
        }
    } else {
        res = generate(x, c, &rq);
    }
    srv_request_free(&rq);
    return res;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    ts_server *srv = cls;
    conn *x = *con_cls;
    if (!x) {
        if (!(x = calloc(1, sizeof *x))) return MHD_NO;
        *con_cls = x;
        x->srv = srv;
        x->t0 = ts_now();
        snprintf(x->method, sizeof x->method, "%s", method);
        snprintf(x->path, sizeof x->path, "%s", url);
        x->anthropic = !strncmp(url, "/v1/messages", 12);
        if (!watch_note(x, c, false)) return MHD_NO;
        const char *allow = NULL;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (!strcmp(url, routes[i].path)) {
                allow = routes[i].method;
                if (!strcmp(method, routes[i].method) || (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET"))) x->r = routes[i].r;
            }
        if (!x->r && allow) {
            char m[160];
            snprintf(m, sizeof m, "method %.16s is not allowed on %.64s (allowed: %s)", method, url, allow);
            return send_error(x, c, 405, "invalid_request_error", NULL, m, NULL, allow);
        }
        if (!x->r) {
            char m[160];
            snprintf(m, sizeof m, "no endpoint at %.100s", url);
            return send_error(x, c, 404, x->anthropic ? "not_found_error" : "invalid_request_error", NULL, m, NULL, NULL);
        }
        if (x->r != R_INDEX && x->r != R_HEALTH && !authorized(srv, c))
            return send_error(x, c, 401, x->anthropic ? "authentication_error" : "invalid_request_error", NULL,
                              "a valid API key is required (Authorization: Bearer KEY or x-api-key: KEY)", NULL, NULL);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || end == cl || v > srv->o.max_body) x->too_big = true;
        }
        if (x->too_big)
            return send_errorf(x, c, 413, x->anthropic ? "request_too_large" : "invalid_request_error", NULL,
                               "the request body is larger than %llu bytes", (unsigned long long)srv->o.max_body);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!watch_note(x, c, false)) return MHD_NO;
        if (!x->responded && !x->too_big) {
            if (x->len + *upload_size > srv->o.max_body) {
                x->too_big = true;
                free(x->body);
                x->body = NULL;
                x->len = x->cap = 0;
            } else if (!buf_add(&x->body, &x->len, &x->cap, upload, *upload_size)) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (x->responded) return MHD_YES;
    if (x->too_big)
        return send_errorf(x, c, 413, x->anthropic ? "request_too_large" : "invalid_request_error", NULL,
                           "the request body is larger than %llu bytes", (unsigned long long)srv->o.max_body);
    if (!watch_note(x, c, true)) return MHD_NO;
    return dispatch(x, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    ts_server *srv = cls;
    /* the connection is ready for its next request: the deadline restarts */
    conn_watch *w = watch_of(c);
    bool cut = false;
    if (w) {
        pthread_mutex_lock(&srv->watch_mu);
        cut = w->phase == W_CUT;
        if (!cut) {
            w->phase = W_RECEIVING;
            w->t_ready = ts_now();
            w->begun = false;
        }
        pthread_mutex_unlock(&srv->watch_mu);
    }
    conn *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    int status = x->status ? x->status : cut ? 408 : 500;
    pthread_mutex_lock(&srv->mu);
    int idx = -1;
    switch (x->r) {
    case R_INDEX: idx = SRV_API_COUNT; break;
    case R_HEALTH: idx = SRV_API_COUNT + 1; break;
    case R_MODELS: idx = SRV_API_COUNT + 2; break;
    case R_METRICS: idx = SRV_API_COUNT + 3; break;
    case R_NONE: break;
    default: idx = (int)api_of(x->r);
    }
    if (idx >= 0) srv->m.requests[idx]++;
    if (status >= 400 && status < 500) srv->m.errors_4xx++;
    if (status >= 500) srv->m.errors_5xx++;
    pthread_mutex_unlock(&srv->mu);
    if (srv->o.log)
        fprintf(srv->o.log, "%s %s %d %.1fms%s\n", x->method, x->path, status, (ts_now() - x->t0) * 1e3,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    free(x->body);
    free(x);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    ts_server *srv = cls;
    if (!srv->o.log) return;
    fputs("http: ", srv->o.log);
    vfprintf(srv->o.log, fmt, ap);
}

/* ---------------------------------------------------------------- lifecycle */

ts_server_opts ts_server_opts_default(void) {
    ts_server_opts o;
    memset(&o, 0, sizeof o);
    o.model_opts = ts_model_opts_default();
    o.host = "127.0.0.1";
    o.port = 8080;
    o.n_parallel = 1;
    o.n_queue = 16;
    o.max_body = 1u << 20;
    o.max_depth = 32;
    o.max_messages = 256;
    o.header_bytes = 16 * 1024;
    o.timeout_s = 30;
    o.request_timeout_s = 30;
    o.max_connections = 64;
    o.ping_ms = 2000;
    return o;
}

static char *sdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ts_status ts_server_new(const ts_server_opts *o, ts_server **out) {
    *out = NULL;
    if (!o || !o->model_path) return ts_fail(TS_ERR_ARG, "server: no model path");
    if (o->n_parallel < 1 || o->n_parallel > 256) return ts_fail(TS_ERR_ARG, "server: --parallel %d is outside [1, 256]", (int)o->n_parallel);
    if (o->n_queue < 0 || o->n_queue > 1 << 16) return ts_fail(TS_ERR_ARG, "server: --queue %d is outside [0, 65536]", (int)o->n_queue);
    if (o->port < 0 || o->port > 65535) return ts_fail(TS_ERR_ARG, "server: --port %d is outside [0, 65535]", (int)o->port);
    if (o->n_ctx < 0) return ts_fail(TS_ERR_ARG, "server: negative context");
    if (o->max_body < 64 || o->max_depth < 2 || o->max_messages < 1 || o->header_bytes < 1024 || o->timeout_s < 1 ||
        o->request_timeout_s < 1 || o->max_connections < 1 || o->ping_ms < 10)
        return ts_fail(TS_ERR_ARG, "server: a limit is too small (body >= 64 B, depth >= 2, messages >= 1, headers >= 1 KiB, "
                                   "timeouts >= 1 s, connections >= 1, ping >= 10 ms)");
    ts_server *s = calloc(1, sizeof *s);
    if (!s) return ts_fail(TS_ERR_NOMEM, "server: out of memory");
    s->o = *o;
    s->host = sdup(o->host ? o->host : "127.0.0.1");
    s->api_key = o->api_key && *o->api_key ? sdup(o->api_key) : NULL;
    s->model_path = sdup(o->model_path);
    s->tmpl_name = sdup(o->chat_template);
    if (o->model_id && *o->model_id) s->model_id = sdup(o->model_id);
    else {
        const char *b = strrchr(o->model_path, '/');
        b = b ? b + 1 : o->model_path;
        s->model_id = sdup(b);
        if (s->model_id) {
            size_t n = strlen(s->model_id);
            if (n > 5 && !strcmp(s->model_id + n - 5, ".gguf")) s->model_id[n - 5] = 0;
        }
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->watch_mu, NULL);
    pthread_cond_init(&s->watch_cv, NULL);
    sem_init(&s->stop_sem, 0, 0);
    atomic_store(&s->state, ST_LOADING);
    s->o.host = s->host;
    s->o.api_key = s->api_key;
    s->o.model_path = s->model_path;
    s->o.chat_template = s->tmpl_name;
    s->o.model_id = s->model_id;
    if (!s->host || !s->model_path || !s->model_id || (o->api_key && *o->api_key && !s->api_key) || (o->chat_template && !s->tmpl_name)) {
        ts_server_free(s);
        return ts_fail(TS_ERR_NOMEM, "server: out of memory");
    }

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", (int)o->port);
    int gai = getaddrinfo(s->host, port, &hints, &ai);
    if (gai || !ai) {
        ts_status st = ts_fail(TS_ERR_ARG, "server: cannot resolve --host '%s': %s", s->host, gai_strerror(gai));
        ts_server_free(s);
        return st;
    }
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s)) {
        freeaddrinfo(ai);
        ts_server_free(s);
        return ts_fail(TS_ERR_INTERNAL, "server: cannot start the watchdog thread");
    }
    s->watchdog_on = true;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)o->header_bytes, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        ts_status st = ts_fail(TS_ERR_IO, "server: cannot listen on %s:%d (in use, or not an address of this machine?)", s->host, (int)o->port);
        ts_server_free(s);
        return st;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return TS_OK;
}

int32_t ts_server_port(const ts_server *srv) { return srv ? srv->port : 0; }

static ts_status load_fail(ts_server *srv, ts_status st) {
    snprintf(srv->load_error, sizeof srv->load_error, "%s", ts_last_error());
    atomic_store(&srv->state, ST_FAILED);
    return st;
}

ts_status ts_server_run(ts_server *srv) {
    if (!srv || atomic_load(&srv->state) != ST_LOADING || srv->model) return ts_fail(TS_ERR_ARG, "server: run called twice");
    ts_status st = ts_model_load(srv->model_path, &srv->o.model_opts, &srv->model);
    if (st) return load_fail(srv, st);
    srv->vocab = ts_model_vocab(srv->model);
    if (!srv->vocab) return load_fail(srv, ts_fail(TS_ERR_UNSUPPORTED, "%s: the model has no vocabulary", srv->model_path));
    ts_model_info mi;
    ts_model_get_info(srv->model, &mi);
    srv->n_vocab = ts_vocab_n_tokens(srv->vocab);
    if (srv->tmpl_name) st = ts_chat_template_from_name(srv->tmpl_name, &srv->tmpl);
    else st = ts_chat_template_from_model(srv->model, &srv->tmpl);
    if (st && srv->tmpl_name) return load_fail(srv, st);
    if (st) {
        srv->tmpl = NULL;
        snprintf(srv->tmpl_error, sizeof srv->tmpl_error, "chat requests need a chat template: %s (start the server with --chat-template NAME)",
                 ts_last_error());
    }
    srv->slots = calloc((size_t)srv->o.n_parallel, sizeof *srv->slots);
    srv->workers = calloc((size_t)srv->o.n_parallel, sizeof *srv->workers);
    if (!srv->slots || !srv->workers) return load_fail(srv, ts_fail(TS_ERR_NOMEM, "server: out of memory"));
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = srv->o.n_ctx ? srv->o.n_ctx : (mi.n_ctx_train > 0 && mi.n_ctx_train < 4096 ? mi.n_ctx_train : 4096);
    so.n_threads = srv->o.n_threads;
    for (int32_t i = 0; i < srv->o.n_parallel; i++) {
        st = ts_session_new(srv->model, &so, &srv->slots[i].s);
        if (st) return load_fail(srv, st);
        srv->n_slots++;
    }
    srv->n_ctx = ts_session_n_ctx(srv->slots[0].s);
    atomic_store(&srv->state, ST_READY);
    for (int32_t i = 0; i < srv->n_slots; i++) {
        if (pthread_create(&srv->workers[i], NULL, worker_main, srv)) {
            atomic_store(&srv->state, ST_STOPPING);
            break;
        }
        srv->n_workers++;
    }
    if (srv->n_workers == srv->n_slots) {
        if (srv->o.log)
            fprintf(srv->o.log, "serving %s (%d session%s x %d positions, template %s) on http://%s:%d\n", srv->model_id,
                    srv->n_slots, srv->n_slots == 1 ? "" : "s", srv->n_ctx, srv->tmpl ? ts_chat_template_name(srv->tmpl) : "none",
                    srv->host, srv->port);
        while (!atomic_load(&srv->stop_flag))
            if (sem_wait(&srv->stop_sem) && errno != EINTR) break;
    } else st = ts_fail(TS_ERR_INTERNAL, "server: cannot start worker threads");
    pthread_mutex_lock(&srv->mu);
    atomic_store(&srv->state, ST_STOPPING);
    pthread_cond_broadcast(&srv->cv);
    pthread_mutex_unlock(&srv->mu);
    for (int32_t i = 0; i < srv->n_workers; i++) pthread_join(srv->workers[i], NULL);
    srv->n_workers = 0;
    /* jobs still queued: their connections get "shutting down" */
    pthread_mutex_lock(&srv->mu);
    job *j = srv->q_head;
    srv->q_head = srv->q_tail = NULL;
    srv->q_len = 0;
    pthread_mutex_unlock(&srv->mu);
    while (j) {
        job *n = j->next;
        j->res.reason = TS_STOP_ABORT;
        if (j->req.stream) {
            static const char bye[] = "data: {\"error\":{\"message\":\"the server is shutting down\",\"type\":\"server_error\"}}\n\n";
            emit_raw(j, bye, sizeof bye - 1);
        }
        job_done(j);
        j = n;
    }
    return st;
}

void ts_server_stop(ts_server *srv) {
    if (!srv) return;
    atomic_store(&srv->stop_flag, 1);
    sem_post(&srv->stop_sem);
}

void ts_server_free(ts_server *srv) {
    if (!srv) return;
    if (srv->d) MHD_stop_daemon(srv->d);
    if (srv->watchdog_on) {
        pthread_mutex_lock(&srv->watch_mu);
        srv->watch_stop = true;
        pthread_cond_broadcast(&srv->watch_cv);
        pthread_mutex_unlock(&srv->watch_mu);
        pthread_join(srv->watchdog, NULL);
    }
    for (int32_t i = 0; i < srv->n_slots; i++) ts_session_free(srv->slots[i].s);
    free(srv->slots);
    free(srv->workers);
    ts_chat_template_free(srv->tmpl);
    ts_model_free(srv->model);
    pthread_mutex_destroy(&srv->mu);
    pthread_cond_destroy(&srv->cv);
    pthread_mutex_destroy(&srv->watch_mu);
    pthread_cond_destroy(&srv->watch_cv);
    sem_destroy(&srv->stop_sem);
    free(srv->host);
    free(srv->api_key);
    free(srv->model_path);
    free(srv->tmpl_name);
    free(srv->model_id);
    free(srv);
}
