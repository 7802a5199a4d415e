/* turbospark run / chat: generate from a prompt, a messages file or an
 * interactive conversation, streaming tokens to stdout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/chat.h"
#include "cli.h"
#include "forward/engine.h"
#include "gen/generate.h"
#include "sample/sample.h"
#include "tokenizer/tokenizer.h"

#define MAX_STOPS 16

typedef struct run_opts {
    const char *model, *prompt, *prompt_ids, *messages_file, *chat_template;
    bool chat, show_ids, precise;
    int64_t max_new, threads, ctx;
    const char *stops[MAX_STOPS];
    size_t n_stops;
    sampler_params sp;
    cli_expert_flags ef;
} run_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark run -m MODEL (--prompt TEXT | --prompt-ids \"1 2 3\" | --messages-file FILE.json | --chat)\n"
            "         [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
            "         [--seed S] [--stop STR]... [--threads N] [--ctx N] [--show-ids] [--chat-template NAME]\n"
            "  --prompt TEXT         raw text (special tokens like <|im_start|> are parsed; BOS added per the model)\n"
            "  --prompt-ids IDS      token ids, used as they are\n"
            "  --messages-file F     JSON array of {role, content}, rendered with the model's chat template\n"
            "  --chat                interactive conversation (type /exit or end input to leave)\n"
            "  --max-new N           tokens to generate at most (default 256)\n"
            "  --temperature T       0 = greedy (default 0.8); --top-k 40, --top-p 0.95, --min-p 0.05 by default\n"
            "  --repetition-penalty  1 = off (default)\n"
            "  --seed S              sampling seed (default 24301); same seed, model and prompt give the same output\n"
            "  --stop STR            stop when STR appears in the output (repeatable)\n"
            "  --threads N           default: the number of cores; --ctx N: context (default: the model's)\n"
            "  --show-ids            print generated token ids instead of text\n"
            "  --precise             F32 activations in every matmul (reference precision; slower)\n"
            "  --chat-template NAME  chatml, llama3, llama2, mistral, mistral-legacy, gemma\n" CLI_EXPERT_USAGE);
}

static int parse_opts(const char *cmd, int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_new = 256;
    sampler_params_default(&o->sp);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        int64_t n;
#define VAL() \
    if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1
        int ex = cli_parse_expert_flag(cmd, argc, argv, &i, &o->ef);
        if (ex < 0) return 1;
        if (ex > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return -1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "--prompt-ids")) { VAL(); o->prompt_ids = v; }
        else if (!strcmp(a, "--messages-file")) { VAL(); o->messages_file = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); o->chat_template = v; }
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--show-ids")) o->show_ids = true;
        else if (!strcmp(a, "--precise")) o->precise = true;
        else if (!strcmp(a, "--max-new") || !strcmp(a, "-n")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 1 << 24, &o->max_new)) return 1; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 256, &o->threads)) return 1; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 1 << 24, &o->ctx)) return 1; }
        else if (!strcmp(a, "--temperature") || !strcmp(a, "--temp")) { VAL(); if (!cli_parse_f64(cmd, a, v, 0, 100, &d)) return 1; o->sp.temperature = (float)d; }
        else if (!strcmp(a, "--top-k")) { VAL(); if (!cli_parse_i64(cmd, a, v, 0, 1 << 30, &n)) return 1; o->sp.top_k = (int32_t)n; }
        else if (!strcmp(a, "--top-p")) { VAL(); if (!cli_parse_f64(cmd, a, v, 1e-9, 1, &d)) return 1; o->sp.top_p = (float)d; }
        else if (!strcmp(a, "--min-p")) { VAL(); if (!cli_parse_f64(cmd, a, v, 0, 1, &d)) return 1; o->sp.min_p = (float)d; }
        else if (!strcmp(a, "--repetition-penalty") || !strcmp(a, "--repeat-penalty")) { VAL(); if (!cli_parse_f64(cmd, a, v, 1e-3, 100, &d)) return 1; o->sp.repeat_penalty = (float)d; }
        else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) { VAL(); if (!cli_parse_i64(cmd, a, v, 0, INT64_MAX, &n)) return 1; o->sp.seed = (uint64_t)n; }
        else if (!strcmp(a, "--stop")) {
            VAL();
            if (!*v) { cli_error(cmd, "--stop: empty string"); return 1; }
            if (o->n_stops == MAX_STOPS) { cli_error(cmd, "--stop: at most %d stop strings", MAX_STOPS); return 1; }
            o->stops[o->n_stops++] = v;
        } else { cli_error(cmd, "unknown option '%s'", a); return 1; }
#undef VAL
    }
    if (!o->model) { cli_error(cmd, "no model given (-m MODEL)"); return 1; }
    int inputs = !!o->prompt + !!o->prompt_ids + !!o->messages_file + o->chat;
    if (inputs != 1) { cli_error(cmd, "give exactly one of --prompt, --prompt-ids, --messages-file, --chat"); return 1; }
    return 0;
}

typedef struct out_state {
    const char *cmd;
    bool show_ids;
    int n_ids;
    int write_errno;
} out_state;

static bool out_text(void *u, const char *t, size_t len) {
    out_state *o = u;
    if (o->show_ids) return true;
    if (fwrite(t, 1, len, stdout) != len || fflush(stdout) != 0) {
        o->write_errno = errno ? errno : EIO;
        return false;
    }
    return true;
}

static bool out_token(void *u, int32_t id) {
    out_state *o = u;
    if (!o->show_ids) return true;
    if (printf(o->n_ids++ ? " %d" : "%d", id) < 0 || fflush(stdout) != 0) {
        o->write_errno = errno ? errno : EIO;
        return false;
    }
    return true;
}

static ts_status eval_glue(void *model, const int32_t *ids, int32_t n, float **logits) {
    return ts_session_eval(model, ids, n, logits);
}

static void footer(const gen_result *r) {
    double tps = r->decode_s > 0 && r->n_new > 1 ? (r->n_new - 1) / r->decode_s : 0;
    fprintf(stderr, "[stop=%s prefill=%dtok/%.2fs new=%dtok decode=%.2fs tok/s=%.1f]\n", gen_stop_reason_name(r->reason), r->n_prompt,
            r->prefill_s, r->n_new, r->decode_s, tps);
}

/* Chat template: --chat-template NAME, else recognised from the model's own. */
static bool get_template(const char *cmd, const run_opts *o, const cli_model *m, chat_template *t) {
    if (o->chat_template) {
        if (chat_template_from_name(o->chat_template, t) != TS_OK) { cli_error(cmd, "%s", ts_last_error()); return false; }
        return true;
    }
    gguf_str s;
    if (gguf_get_str(ts_model_gguf(m->model), "tokenizer.chat_template", &s) != GGUF_GET_OK) {
        cli_error(cmd, "the model has no chat template (tokenizer.chat_template); name one with --chat-template "
                       "(chatml, llama3, llama2, mistral, mistral-legacy, gemma)");
        return false;
    }
    char *j = gguf_strdup(s);
    ts_status st = j ? chat_template_detect(j, t) : TS_ERR_NOMEM;
    free(j);
    if (st) { cli_error(cmd, "%s", ts_last_error()); return false; }
    return true;
}

/* The conversation history must be valid UTF-8 for the template renderer; a
 * reply cut mid-character or from a random model may not be. Invalid bytes
 * become U+FFFD. */
static char *utf8_sanitize(const char *s, size_t n) {
    char *o = malloc(n * 3 + 1), *q = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t L = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool good = L > 0 && i + L <= n;
        for (size_t k = 1; good && k < L; k++) good = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (good && L == 2) good = c >= 0xC2;
        if (good && L == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
            good = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        }
        if (good && L == 4) {
            unsigned cp = ((c & 0x07u) << 18) | (((unsigned char)s[i + 1] & 0x3Fu) << 12) | (((unsigned char)s[i + 2] & 0x3Fu) << 6) |
                          ((unsigned char)s[i + 3] & 0x3Fu);
            good = cp >= 0x10000 && cp <= 0x10FFFF;
        }
        if (good && c) {
            memcpy(q, s + i, L);
            q += L;
            i += L;
        } else {
            memcpy(q, "\xEF\xBF\xBD", 3);
            q += 3;
            i++;
        }
    }
    *q = 0;
    return o;
}

static const char *piece_text(const tok_vocab *v, int32_t id) {
    size_t len;
    return id >= 0 ? tok_piece(v, id, &len) : NULL;
}

/* Renders the conversation and tokenizes it (one BOS in total). */
static bool render_ids(const char *cmd, const chat_template *t, const tok_vocab *v, const chat_message *msgs, size_t n, int32_t **ids,
                       size_t *n_ids) {
    char *text;
    size_t len;
    if (chat_render(t, msgs, n, true, piece_text(v, tok_bos(v)), piece_text(v, tok_eos(v)), &text, &len) != TS_OK) {
        cli_error(cmd, "%s", ts_last_error());
        return false;
    }
    bool add_special = !chat_template_emits_bos(t);
    ts_status st = tok_encode(v, text, len, add_special, true, ids, n_ids);
    free(text);
    if (st) { cli_error(cmd, "%s", ts_last_error()); return false; }
    return true;
}

static int run_chat(const char *cmd, const run_opts *o, cli_model *m, ts_session *s, sampler *smp) {
    chat_template t;
    if (!get_template(cmd, o, m, &t)) return 1;
    chat_message *msgs = NULL;
    size_t n_msgs = 0, cap = 0;
    int32_t *hist = NULL; /* ids in the KV cache, in order */
    size_t n_hist = 0, cap_hist = 0;
    int rc = 0;
    char *line = NULL;
    size_t line_cap = 0;
    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        ssize_t r = getline(&line, &line_cap, stdin);
        if (r < 0) { fputs("\n", stdout); break; }
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!r) continue;
        if (n_msgs + 2 > cap) {
            cap = cap ? cap * 2 : 16;
            chat_message *q = realloc(msgs, cap * sizeof *q);
            if (!q) { rc = cli_error(cmd, "out of memory"); break; }
            msgs = q;
        }
        msgs[n_msgs].role = CHAT_ROLE_USER;
        msgs[n_msgs].content = strdup(line);
        n_msgs++;
        int32_t *ids;
        size_t n_ids;
        if (!render_ids(cmd, &t, m->vocab, msgs, n_msgs, &ids, &n_ids)) { rc = 1; break; }
        /* Reuse the longest prefix already in the KV cache. */
        size_t common = 0;
        while (common < n_hist && common < n_ids && hist[common] == ids[common]) common++;
        if (common == n_ids) common--; /* at least one token must be evaluated for fresh logits */
        if (ts_session_truncate(s, (int32_t)common) != TS_OK) { free(ids); rc = cli_error(cmd, "%s", ts_last_error()); break; }
        n_hist = common;
        sampler_reset(smp);
        out_state os = {cmd, false, 0, 0};
        gen_params gp = {.max_new = (int32_t)o->max_new, .stops = o->stops, .n_stops = o->n_stops,
                         .n_ctx = ts_session_n_ctx(s), .n_past = (int32_t)common};
        gen_result res;
        ts_status st = gen_run(s, eval_glue, ts_session_n_vocab(s), m->vocab, smp, ids + common, (int32_t)(n_ids - common), &gp, out_text,
                               NULL, &os, &res);
        fputs("\n", stdout);
        fflush(stdout);
        if (st) { free(ids); free(res.ids); rc = cli_error(cmd, "%s", ts_last_error()); break; }
        footer(&res);
        ts_model_phase_add_sampling(m->model, res.sample_s);
        if (os.write_errno) { free(ids); free(res.ids); rc = cli_error(cmd, "writing to stdout failed: %s", strerror(os.write_errno)); break; }
        /* KV now holds ids + all generated tokens but the last one. */
        size_t need = n_ids + (size_t)res.n_new;
        if (need > cap_hist) {
            cap_hist = need * 2;
            int32_t *q = realloc(hist, cap_hist * sizeof *q);
            if (!q) { free(ids); free(res.ids); rc = cli_error(cmd, "out of memory"); break; }
            hist = q;
        }
        memcpy(hist, ids, n_ids * sizeof *ids);
        n_hist = n_ids;
        for (int32_t i = 0; i + 1 < res.n_new; i++) hist[n_hist++] = res.ids[i];
        char *reply;
        size_t rlen;
        int32_t n_keep = res.n_new;
        if (n_keep > 0 && tok_is_eog(m->vocab, res.ids[n_keep - 1])) n_keep--;
        char *clean = NULL;
        if (tok_decode(m->vocab, res.ids, (size_t)n_keep, 0, &reply, &rlen) == TS_OK) {
            /* the history holds what the user saw: nothing from a stop string on */
            for (size_t si = 0; si < o->n_stops; si++) {
                char *at = memmem(reply, rlen, o->stops[si], strlen(o->stops[si]));
                if (at) rlen = (size_t)(at - reply);
            }
            clean = utf8_sanitize(reply, rlen);
            free(reply);
        }
        msgs[n_msgs].role = CHAT_ROLE_ASSISTANT;
        msgs[n_msgs].content = clean ? clean : strdup("");
        n_msgs++;
        free(ids);
        free(res.ids);
        if (res.reason == GEN_STOP_CTX) { rc = cli_error(cmd, "the context is full (%d tokens); start a new chat or raise --ctx", ts_session_n_ctx(s)); break; }
    }
    for (size_t i = 0; i < n_msgs; i++) free((char *)msgs[i].content);
    free(msgs);
    free(hist);
    free(line);
    chat_template_free(&t);
    return rc;
}

static int run_main(const char *cmd, int argc, char **argv) {
    run_opts o;
    int r = parse_opts(cmd, argc, argv, &o);
    if (r) return r < 0 ? 0 : 1;
    cli_model m;
    if (!cli_model_load(cmd, o.model, &o.ef, &m)) return 1;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = (int32_t)o.ctx;
    so.n_threads = (int32_t)o.threads;
    so.precise = o.precise;
    ts_session *s = NULL;
    sampler *smp = NULL;
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (ts_session_new(m.model, &so, &s) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    if (sampler_new(&o.sp, ts_session_n_vocab(s), &smp) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    if (o.chat) {
        rc = run_chat(cmd, &o, &m, s, smp);
        if (ts_model_instruments_finish(m.model, stderr) != TS_OK && !rc) rc = 1;
        goto done;
    }
    if (o.prompt) {
        if (tok_encode(m.vocab, o.prompt, strlen(o.prompt), true, true, &ids, &n_ids) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    } else if (o.prompt_ids) {
        int32_t n;
        if (!cli_parse_ids(cmd, o.prompt_ids, ts_session_n_vocab(s), &ids, &n)) { rc = 1; goto done; }
        n_ids = (size_t)n;
    } else {
        char *json;
        size_t len;
        if (ts_read_file(o.messages_file, 0, &json, &len) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
        chat_messages msgs;
        ts_status st = chat_messages_parse_json(json, len, &msgs);
        free(json);
        if (st) { rc = cli_error(cmd, "%s: %s", o.messages_file, ts_last_error()); goto done; }
        chat_template t;
        bool ok = get_template(cmd, &o, &m, &t) && render_ids(cmd, &t, m.vocab, msgs.msgs, msgs.n, &ids, &n_ids);
        if (ok) chat_template_free(&t);
        chat_messages_free(&msgs);
        if (!ok) { rc = 1; goto done; }
    }
    if (n_ids == 0) { rc = cli_error(cmd, "the prompt is empty"); goto done; }
    if ((int64_t)n_ids > ts_session_n_ctx(s)) {
        rc = cli_error(cmd, "the prompt is %zu tokens, longer than the %d-token context (raise --ctx)", n_ids, ts_session_n_ctx(s));
        goto done;
    }
    out_state os = {cmd, o.show_ids, 0, 0};
    gen_params gp = {.max_new = (int32_t)o.max_new, .stops = o.stops, .n_stops = o.n_stops, .n_ctx = ts_session_n_ctx(s), .n_past = 0};
    gen_result res;
    ts_status st = gen_run(s, eval_glue, ts_session_n_vocab(s), m.vocab, smp, ids, (int32_t)n_ids, &gp, out_text, out_token, &os, &res);
    if (!st && !os.write_errno) {
        if (o.show_ids || isatty(STDOUT_FILENO)) fputs("\n", stdout);
        if (fflush(stdout) != 0) os.write_errno = errno ? errno : EIO;
    }
    free(res.ids);
    if (st) {
        rc = cli_error(cmd, "%s", ts_last_error());
        ts_model_instruments_finish(m.model, stderr); /* what was captured before the error */
        goto done;
    }
    if (os.write_errno) { rc = cli_error(cmd, "writing to stdout failed: %s", strerror(os.write_errno)); goto done; }
    footer(&res);
    cli_model_report(&m, (uint64_t)res.n_prompt + (uint64_t)res.n_new);
    ts_model_phase_add_sampling(m.model, res.sample_s);
    if (ts_model_instruments_finish(m.model, stderr) != TS_OK) rc = 1;
done:
    free(ids);
    sampler_free(smp);
    ts_session_free(s);
    cli_model_free(&m);
    return rc;
}

int cmd_run(int argc, char **argv) { return run_main("run", argc, argv); }
int cmd_chat(int argc, char **argv) {
    /* chat = run --chat */
    char **av = malloc(sizeof *av * (size_t)(argc + 2));
    if (!av) return cli_error("chat", "out of memory");
    memcpy(av, argv, sizeof *av * (size_t)argc);
    av[argc] = "--chat";
    av[argc + 1] = NULL;
    int rc = run_main("chat", argc + 1, av);
    free(av);
    return rc;
}
