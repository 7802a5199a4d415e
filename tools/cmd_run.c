/* turbospark run / chat: generate from a prompt, a messages file or an
 * interactive conversation, streaming tokens to stdout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define MAX_STOPS 16

typedef struct run_opts {
    cli_common c;
    const char *prompt, *prompt_ids, *messages_file, *chat_template;
    bool chat, show_ids;
    int64_t max_new, max_input;
    const char *stops[MAX_STOPS];
    size_t n_stops;
    ts_sampler_params sp;
} run_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark run -m MODEL (--prompt TEXT | --prompt-ids \"1 2 3\" | --messages-file FILE.json | --chat)\n"
            "         [--max-new N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
            "         [--seed S] [--stop STR]... [--threads N] [--ctx N] [--show-ids] [--chat-template NAME]\n"
            "  --prompt TEXT         raw text (special tokens like <|im_start|> are parsed; BOS added per the model)\n"
            "  --prompt-ids IDS      token ids, used as they are\n"
            "  --messages-file F     JSON array of {role, content}, rendered with the model's chat template\n"
            "  --max-input BYTES     largest --messages-file accepted (default 256M)\n"
            "  --chat                interactive conversation (type /exit or end input to leave)\n"
            "  --max-new N           tokens to generate at most (default 256)\n"
            "  --temperature T       0 = greedy (default 0.8); --top-k 40, --top-p 0.95, --min-p 0.05 by default\n"
            "  --repetition-penalty  1 = off (default)\n"
            "  --seed S              sampling seed (default 24301); same seed, model and prompt give the same output\n"
            "  --stop STR            stop when STR appears in the output (repeatable)\n"
            "  --threads N           default: the number of cores; --ctx N: context (default: the model's)\n"
            "  --show-ids            print generated token ids instead of text\n"
            "  --precise             F32 activations in every matmul (reference precision; slower)\n"
            "  --chat-template NAME  chatml, llama3, llama2, mistral, mistral-legacy, gemma\n" CLI_COMMON_USAGE);
}

static int parse_opts(const char *cmd, int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    cli_common_init(&o->c);
    o->max_new = 256;
    o->sp = ts_sampler_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        double d;
        int64_t n;
#define VAL() \
    if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1
        int cf = cli_common_flag(cmd, argc, argv, &i, &o->c);
        if (cf < 0) return 1;
        if (cf > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return -1; }
        else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "--prompt-ids")) { VAL(); o->prompt_ids = v; }
        else if (!strcmp(a, "--messages-file")) { VAL(); o->messages_file = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); o->chat_template = v; }
        else if (!strcmp(a, "--chat")) o->chat = true;
        else if (!strcmp(a, "--show-ids")) o->show_ids = true;
        else if (!strcmp(a, "--max-input")) {
            VAL();
            uint64_t b;
            if (ts_parse_bytes(v, &b) != TS_OK || !b) { cli_error(cmd, "--max-input %s", ts_last_error()); return 1; }
            o->max_input = (int64_t)b;
        }
        else if (!strcmp(a, "--max-new") || !strcmp(a, "-n")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 1 << 24, &o->max_new)) return 1; }
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
    if (!o->c.model) { cli_error(cmd, "no model given (-m MODEL)"); return 1; }
    int inputs = !!o->prompt + !!o->prompt_ids + !!o->messages_file + o->chat;
    if (inputs != 1) { cli_error(cmd, "give exactly one of --prompt, --prompt-ids, --messages-file, --chat"); return 1; }
    return 0;
}

typedef struct out_state {
    bool show_ids;
    int n_ids;
    int write_errno;
} out_state;

static bool out_text(void *u, const char *t, size_t len) {
    out_state *o = u;
    if (cli_interrupted) return false;
    if (o->show_ids) return true;
    if (fwrite(t, 1, len, stdout) != len || fflush(stdout) != 0) {
        o->write_errno = errno ? errno : EIO;
        return false;
    }
    return true;
}

static bool out_token(void *u, const ts_token_event *ev) {
    out_state *o = u;
    if (cli_interrupted) return false;
    if (!o->show_ids) return true;
    if (printf(o->n_ids++ ? " %d" : "%d", ev->id) < 0 || fflush(stdout) != 0) {
        o->write_errno = errno ? errno : EIO;
        return false;
    }
    return true;
}

static void footer(const ts_gen_result *r) {
    double tps = r->decode_s > 0 && r->n_new > 1 ? (r->n_new - 1) / r->decode_s : 0;
    fprintf(stderr, "[stop=%s prefill=%dtok/%.2fs new=%dtok decode=%.2fs tok/s=%.1f]\n", ts_stop_reason_name(r->reason),
            r->n_prompt - r->n_cached, r->prefill_s, r->n_new, r->decode_s, tps);
}

/* --chat-template NAME, else the model's own; the library's message gains the flag's name here. */
static bool get_template(const char *cmd, const run_opts *o, const cli_model *m, ts_chat_template **t) {
    if (o->chat_template) {
        if (ts_chat_template_from_name(o->chat_template, t) != TS_OK) return cli_error(cmd, "%s", ts_last_error()), false;
        return true;
    }
    if (ts_chat_template_from_model(m->model, t) != TS_OK) {
        const char *why = ts_last_error();
        if (strstr(why, "no chat template"))
            return cli_error(cmd, "the model has no chat template (tokenizer.chat_template); name one with --chat-template (%s)",
                             ts_chat_template_names()), false;
        return cli_error(cmd, "%s (--chat-template NAME chooses a template)", why), false;
    }
    return true;
}

static ts_gen_params gen_params_of(const run_opts *o) {
    ts_gen_params gp = ts_gen_params_default();
    gp.max_new = (int32_t)o->max_new;
    gp.stops = o->stops;
    gp.n_stops = o->n_stops;
    gp.sampler = o->sp;
    return gp;
}

static int run_chat(const char *cmd, const run_opts *o, ts_session *s, const ts_chat_template *t) {
    ts_chat *c;
    if (ts_chat_new(s, t, &c) != TS_OK) return cli_error(cmd, "%s", ts_last_error());
    ts_gen_params gp = gen_params_of(o);
    int rc = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (!cli_interrupted) {
        fputs("> ", stdout);
        fflush(stdout);
        ssize_t r = getline(&line, &line_cap, stdin);
        if (r < 0) { fputs("\n", stdout); break; }
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!r) continue;
        char *clean = ts_utf8_sanitize(line, (size_t)r);
        ts_status st = clean ? ts_chat_add(c, TS_ROLE_USER, clean) : TS_ERR_NOMEM;
        ts_free(clean);
        if (st) { rc = cli_error(cmd, "%s", ts_last_error()); break; }
        out_state os = {false, 0, 0};
        ts_chat_turn turn;
        st = ts_chat_reply(c, &gp, out_text, NULL, &os, &turn);
        fputs("\n", stdout);
        fflush(stdout);
        if (st) { ts_chat_turn_free(&turn); rc = cli_error(cmd, "%s", ts_last_error()); break; }
        if (turn.dropped)
            fprintf(stderr, "[context full: the oldest %d message%s left the conversation]\n", turn.dropped, turn.dropped == 1 ? "" : "s");
        footer(&turn.gen);
        ts_chat_turn_free(&turn);
        if (os.write_errno) { rc = cli_error(cmd, "writing to stdout failed: %s", strerror(os.write_errno)); break; }
    }
    free(line);
    ts_chat_free(c);
    return rc;
}

static int run_main(const char *cmd, int argc, char **argv) {
    run_opts o;
    int r = parse_opts(cmd, argc, argv, &o);
    if (r) return r < 0 ? 0 : 1;
    ts_instruments ins;
    if (!cli_env_instruments(cmd, &ins)) return 1;
    ts_chat_template *t = NULL;
    if (o.chat_template && ts_chat_template_from_name(o.chat_template, &t) != TS_OK) return cli_error(cmd, "%s", ts_last_error());
    char *json = NULL;
    size_t json_len = 0;
    ts_status rst = o.messages_file ? ts_read_file(o.messages_file, (uint64_t)o.max_input, &json, &json_len) : TS_OK;
    if (rst != TS_OK) {
        ts_chat_template_free(t);
        return cli_error(cmd, "%s%s", ts_last_error(), rst == TS_ERR_LIMIT ? " (raise it with --max-input)" : "");
    }
    cli_model m;
    if (!cli_model_load(cmd, &o.c, &m)) {
        ts_chat_template_free(t);
        ts_free(json);
        return 1;
    }
    ts_session_opts so = cli_session_opts(cmd, &o.c, &m, &ins);
    ts_session *s = NULL;
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    bool started = false;
    if (ts_session_new(m.model, &so, &s) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    cli_print_expert_plan(s);
    cli_catch_interrupts();
    started = true;
    if (o.chat) {
        if (!t && !get_template(cmd, &o, &m, &t)) { rc = 1; goto done; }
        rc = run_chat(cmd, &o, s, t);
        goto done;
    }
    if (o.prompt) {
        if (ts_tokenize(m.vocab, o.prompt, strlen(o.prompt), true, true, &ids, &n_ids) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    } else if (o.prompt_ids) {
        int32_t n;
        if (!cli_parse_ids(cmd, o.prompt_ids, ts_session_n_vocab(s), &ids, &n)) { rc = 1; goto done; }
        n_ids = (size_t)n;
    } else {
        ts_chat_message *msgs;
        size_t n_msgs;
        if (ts_chat_messages_parse_json(json, json_len, &msgs, &n_msgs) != TS_OK) { rc = cli_error(cmd, "%s: %s", o.messages_file, ts_last_error()); goto done; }
        bool ok = (t || get_template(cmd, &o, &m, &t));
        if (ok && ts_chat_tokenize(t, m.vocab, msgs, n_msgs, true, &ids, &n_ids) != TS_OK) ok = cli_error(cmd, "%s", ts_last_error()) == 0;
        ts_chat_messages_free(msgs, n_msgs);
        if (!ok) { rc = 1; goto done; }
    }
    if (n_ids == 0) { rc = cli_error(cmd, "the prompt is empty"); goto done; }
    if ((int64_t)n_ids > ts_session_n_ctx(s)) {
        rc = cli_error(cmd, "the prompt is %zu tokens, longer than the %d-token context (raise --ctx)", n_ids, ts_session_n_ctx(s));
        goto done;
    }
    out_state os = {o.show_ids, 0, 0};
    ts_gen_params gp = gen_params_of(&o);
    ts_gen_result res;
    ts_status st = ts_session_generate(s, ids, (int32_t)n_ids, &gp, out_text, out_token, &os, &res);
    if (!st && !os.write_errno) {
        if (o.show_ids || isatty(STDOUT_FILENO)) fputs("\n", stdout);
        if (fflush(stdout) != 0) os.write_errno = errno ? errno : EIO;
    }
    ts_free(res.ids);
    if (st) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    if (os.write_errno) { rc = cli_error(cmd, "writing to stdout failed: %s", strerror(os.write_errno)); goto done; }
    footer(&res);
    cli_model_report(&m, (uint64_t)res.n_prompt + (uint64_t)res.n_new);
done:
    /* what the captures hold, also after an error or an interrupt (marked partial then) */
    if (started && ts_session_instruments_finish(s, stderr, cli_interrupted != 0) != TS_OK && !rc) rc = 1;
    if (cli_interrupted && !rc) rc = 130;
    ts_free(ids);
    ts_free(json);
    ts_chat_template_free(t);
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
