/* Chat template recognition and rendering, and the messages JSON reader.
 * Each renderer transcribes one real template's behaviour (docs/SAMPLING.md
 * lists the sources); tests/fixtures/chat/ holds jinja2's output for them. */
#include "chat/chat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- names */

const char *chat_role_name(chat_role r) {
    switch (r) {
    case CHAT_ROLE_SYSTEM: return "system";
    case CHAT_ROLE_USER: return "user";
    case CHAT_ROLE_ASSISTANT: return "assistant";
    }
    return "?";
}

bool chat_role_parse(const char *s, chat_role *out) {
    if (!strcmp(s, "system")) *out = CHAT_ROLE_SYSTEM;
    else if (!strcmp(s, "user")) *out = CHAT_ROLE_USER;
    else if (!strcmp(s, "assistant")) *out = CHAT_ROLE_ASSISTANT;
    else return false;
    return true;
}

const char *chat_template_kind_name(chat_template_kind kind) {
    switch (kind) {
    case CHAT_TMPL_CHATML: return "chatml";
    case CHAT_TMPL_LLAMA3: return "llama3";
    case CHAT_TMPL_LLAMA2: return "llama2";
    case CHAT_TMPL_MISTRAL_V1: return "mistral-v1";
    case CHAT_TMPL_MISTRAL_LEGACY: return "mistral-legacy";
    case CHAT_TMPL_GEMMA: return "gemma";
    }
    return "?";
}

static const char *const NAMES = "chatml, llama3, llama2, mistral (= mistral-v1), mistral-legacy, gemma";

ts_status chat_template_from_name(const char *name, chat_template *out) {
    out->default_system = NULL;
    static const struct {
        const char *name;
        chat_template_kind kind;
    } tab[] = {
        {"chatml", CHAT_TMPL_CHATML},         {"llama3", CHAT_TMPL_LLAMA3},
        {"llama2", CHAT_TMPL_LLAMA2},         {"mistral", CHAT_TMPL_MISTRAL_V1},
        {"mistral-v1", CHAT_TMPL_MISTRAL_V1}, {"mistral-legacy", CHAT_TMPL_MISTRAL_LEGACY},
        {"gemma", CHAT_TMPL_GEMMA},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (!strcmp(name, tab[i].name)) {
            out->kind = tab[i].kind;
            return TS_OK;
        }
    }
    return ts_fail(TS_ERR_ARG, "unknown chat template name \"%.40s\" (known: %s)", name, NAMES);
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    free(t->default_system);
    t->default_system = NULL;
}

bool chat_template_emits_bos(const chat_template *t) {
    return t->kind != CHAT_TMPL_CHATML;
}

/* ---------------------------------------------------------------- UTF-8 */

/* One code point of valid UTF-8 at s[0..n): its length, or 0 (and *cp 0). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    size_t l = n ? ts_utf8_len(s, n) : 0;
    *cp = l ? ts_utf8_cp(s, l) : 0;
    return l;
}

/* Python's str.isspace(), which Jinja's trim filter and str.strip() use. */
static bool py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* Python's s.strip() on valid UTF-8: the [*b, *e) byte range that remains. */
static void py_strip(const char *s, size_t n, size_t *b, size_t *e) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_decode(p + i, n - i, &cp);
        if (!l || !py_isspace(cp)) break;
        i += l;
    }
    size_t j = n;
    while (j > i) {
        size_t k = j - 1; /* back up to the start of the last code point */
        while (k > i && (p[k] & 0xc0) == 0x80) k--;
        uint32_t cp;
        size_t l = utf8_decode(p + k, j - k, &cp);
        if (l != j - k || !py_isspace(cp)) break;
        j = k;
    }
    *b = i;
    *e = j;
}

/* ---------------------------------------------------------------- builder */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = ts_realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_put_stripped(sbuf *b, const char *s) {
    size_t i, j;
    py_strip(s, strlen(s), &i, &j);
    sb_put(b, s + i, j - i);
}

/* ---------------------------------------------------------------- detection */

/* Decodes a Jinja string literal body (the escapes the templates we accept
 * use); false on any other escape. */
static bool jinja_unescape(const char *s, size_t n, sbuf *out) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\r' && i + 1 < n && s[i + 1] == '\n') continue; /* jinja normalises newlines */
        if (c != '\\') {
            sb_put(out, &c, 1);
            continue;
        }
        if (++i >= n) return false;
        switch (s[i]) {
        case 'n': sb_puts(out, "\n"); break;
        case 't': sb_puts(out, "\t"); break;
        case '\\': sb_puts(out, "\\"); break;
        case '\'': sb_puts(out, "'"); break;
        case '"': sb_puts(out, "\""); break;
        default: return false;
        }
    }
    return !out->oom;
}

static const char CHATML_SYS_HEAD[] = "<|im_start|>system\n";
static const char CHATML_END[] = "<|im_end|>\n";

/* Looks, inside {{ }} and {% %} tags, for a string literal that is a whole
 * default system turn: '<|im_start|>system\n...<|im_end|>\n'. */
static ts_status chatml_default_system(const char *t, char **out) {
    *out = NULL;
    size_t n = strlen(t);
    bool in_tag = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_tag) {
            if (t[i] == '{' && i + 1 < n && t[i + 1] == '#') { /* comment */
                const char *e = strstr(t + i + 2, "#}");
                if (!e) break;
                i = (size_t)(e - t) + 1;
            } else if (t[i] == '{' && i + 1 < n && (t[i + 1] == '{' || t[i + 1] == '%')) {
                in_tag = true;
                i++;
            }
            continue;
        }
        if ((t[i] == '}' || t[i] == '%') && i + 1 < n && t[i + 1] == '}') {
            in_tag = false;
            i++;
            continue;
        }
        if (t[i] != '\'' && t[i] != '"') continue;
        char q = t[i];
        size_t j = i + 1;
        while (j < n && t[j] != q) j += t[j] == '\\' ? 2 : 1;
        if (j >= n) break;
        sbuf lit = {0};
        bool ok = jinja_unescape(t + i + 1, j - i - 1, &lit);
        const size_t hl = sizeof CHATML_SYS_HEAD - 1, el = sizeof CHATML_END - 1;
        bool head = (ok ? lit.len : j - i - 1) >= hl && !strncmp(ok ? lit.p : t + i + 1, "<|im_start|>system", 18);
        if (!ok && head) {
            free(lit.p);
            return ts_fail(TS_ERR_UNSUPPORTED,
                           "chat template: a chatml system-prompt literal uses escapes this reader does not decode");
        }
        if (ok && lit.len > hl + el && !strncmp(lit.p, CHATML_SYS_HEAD, hl) &&
            !strcmp(lit.p + lit.len - el, CHATML_END)) {
            lit.p[lit.len - el] = '\0';
            if (!strstr(lit.p + hl, "<|im_start|>") && !strstr(lit.p + hl, "<|im_end|>")) {
                if (*out && strcmp(*out, lit.p + hl)) {
                    free(lit.p);
                    free(*out);
                    *out = NULL;
                    return ts_fail(TS_ERR_UNSUPPORTED,
                                   "chat template: chatml with two different default system prompts");
                }
                if (!*out) {
                    *out = strdup(lit.p + hl);
                    if (!*out) {
                        free(lit.p);
                        return ts_fail(TS_ERR_NOMEM, "out of memory");
                    }
                }
            }
        }
        free(lit.p);
        i = j;
    }
    return TS_OK;
}

/* The template's start, escaped onto one line, for error messages. */
static void describe(const char *t, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; t[i] && o + 5 < cap && i < 60; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '\n') o += (size_t)snprintf(buf + o, cap - o, "\\n");
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = '\0';
}

static ts_status refuse(const char *t, const char *what) {
    char d[128];
    describe(t, d, sizeof d);
    return ts_fail(TS_ERR_UNSUPPORTED,
                   "chat template not supported: %s (template of %zu bytes starting \"%s\"); choose one by name "
                   "(%s)",
                   what, strlen(t), d, NAMES);
}

ts_status chat_template_detect(const char *t, chat_template *out) {
    out->default_system = NULL;
    /* GGUF strings are UTF-8 by the spec; a template that is not would hand its
     * bytes (the chatml default system prompt) to the renderer as they are */
    const size_t n = strlen(t);
    if (!ts_utf8_valid(t, n))
        return ts_fail(TS_ERR_FORMAT, "chat template is not valid UTF-8 (%zu bytes); choose one by name (%s)", n, NAMES);
#define HAS(s) (strstr(t, (s)) != NULL)
    if (HAS("<|im_start|>")) {
        if (HAS("<|im_sep|>")) return refuse(t, "Phi-4 style (<|im_sep|>)");
        if (HAS("<end_of_utterance>")) return refuse(t, "SmolVLM style (<end_of_utterance>)");
        if (HAS("<think>") || HAS("reasoning_content"))
            return refuse(t, "chatml with reasoning (<think>) handling");
        out->kind = CHAT_TMPL_CHATML;
        ts_status st = chatml_default_system(t, &out->default_system);
        if (st != TS_OK) { /* a refused template owns nothing (a first literal may have been kept) */
            free(out->default_system);
            out->default_system = NULL;
        }
        return st;
    }
    if (HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) return refuse(t, "Mistral v7 ([SYSTEM_PROMPT])");
        if (HAS("[AVAILABLE_TOOLS]")) return refuse(t, "Mistral v3 / v3-tekken ([AVAILABLE_TOOLS])");
        if (HAS("' [INST] ' + system_message")) {
            out->kind = CHAT_TMPL_MISTRAL_V1;
            return TS_OK;
        }
        if (HAS("<<SYS>>")) {
            if (HAS("bos_token + '[INST] ' + content.strip() + ' [/INST]'") && HAS("system_message != false")) {
                out->kind = CHAT_TMPL_LLAMA2;
                return TS_OK;
            }
            return refuse(t, "a Llama 2 variant (<<SYS>>) other than Llama-2-chat's own");
        }
        if (HAS("'[INST] ' + message['content'] + ' [/INST]'") && HAS("Only user and assistant roles are supported")) {
            out->kind = CHAT_TMPL_MISTRAL_LEGACY;
            return TS_OK;
        }
        return refuse(t, "an [INST] template variant");
    }
    if (HAS("<start_of_turn>")) {
        if (HAS("first_user_prefix")) {
            out->kind = CHAT_TMPL_GEMMA;
            return TS_OK;
        }
        return refuse(t, "Gemma 1/2 (refuses system messages)");
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
        if (HAS("Cutting Knowledge Date") || HAS("date_string") || HAS("tools"))
            return refuse(t, "Llama 3.1+ (date header, tools)");
        out->kind = CHAT_TMPL_LLAMA3;
        return TS_OK;
    }
#undef HAS
    return refuse(t, "not recognised");
}

/* ---------------------------------------------------------------- rendering */

static ts_status raise_exc(const chat_template *t, const char *msg) {
    return ts_fail(TS_ERR_ARG, "chat template %s: %s", chat_template_kind_name(t->kind), msg);
}

static const char ALTERNATE[] = "Conversation roles must alternate user/assistant/user/assistant/...";

ts_status chat_render(const chat_template *t, const chat_message *msgs, size_t n, bool add_generation_prompt,
                      const char *bos, const char *eos, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!bos) bos = "";
    if (!eos) eos = "";
    if (n == 0) return ts_fail(TS_ERR_ARG, "chat: no messages to render");
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].content) return ts_fail(TS_ERR_ARG, "chat: message %zu has no content", i + 1);
        if ((unsigned)msgs[i].role > CHAT_ROLE_ASSISTANT) return ts_fail(TS_ERR_ARG, "chat: message %zu has a bad role", i + 1);
        if (!ts_utf8_valid(msgs[i].content, strlen(msgs[i].content)))
            return ts_fail(TS_ERR_ARG, "chat: message %zu is not valid UTF-8", i + 1);
    }

    /* Templates that set a leading system message aside loop over the rest. */
    const bool first_sys = msgs[0].role == CHAT_ROLE_SYSTEM;
    const chat_message *loop = msgs + (first_sys ? 1 : 0);
    const size_t nl = n - (first_sys ? 1 : 0);
    sbuf b = {0};

    switch (t->kind) {
    case CHAT_TMPL_CHATML:
        if (t->default_system && !first_sys) {
            sb_puts(&b, CHATML_SYS_HEAD);
            sb_puts(&b, t->default_system);
            sb_puts(&b, CHATML_END);
        }
        for (size_t i = 0; i < n; i++) {
            sb_puts(&b, "<|im_start|>");
            sb_puts(&b, chat_role_name(msgs[i].role));
            sb_puts(&b, "\n");
            sb_puts(&b, msgs[i].content);
            sb_puts(&b, CHATML_END);
        }
        if (add_generation_prompt) sb_puts(&b, "<|im_start|>assistant\n");
        break;

    case CHAT_TMPL_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            if (i == 0) sb_puts(&b, bos);
            sb_puts(&b, "<|start_header_id|>");
            sb_puts(&b, chat_role_name(msgs[i].role));
            sb_puts(&b, "<|end_header_id|>\n\n");
            sb_put_stripped(&b, msgs[i].content);
            sb_puts(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) sb_puts(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;

    case CHAT_TMPL_LLAMA2:
        for (size_t i = 0; i < nl; i++) {
            const chat_role r = loop[i].role;
            if ((r == CHAT_ROLE_USER) != (i % 2 == 0)) {
                free(b.p);
                return raise_exc(t, ALTERNATE);
            }
            /* strip() applies to the system block and the message together. */
            sbuf c = {0};
            if (i == 0 && first_sys) {
                sb_puts(&c, "<<SYS>>\n");
                sb_puts(&c, msgs[0].content);
                sb_puts(&c, "\n<</SYS>>\n\n");
            }
            sb_puts(&c, loop[i].content);
            if (c.oom) {
                free(b.p);
                return TS_ERR_NOMEM;
            }
            if (r == CHAT_ROLE_USER) {
                sb_puts(&b, bos);
                sb_puts(&b, "[INST] ");
                sb_put_stripped(&b, c.p);
                sb_puts(&b, " [/INST]");
            } else if (r == CHAT_ROLE_ASSISTANT) {
                sb_puts(&b, " ");
                sb_put_stripped(&b, c.p);
                sb_puts(&b, " ");
                sb_puts(&b, eos);
            } /* a system message in an assistant's place renders nothing */
            free(c.p);
        }
        break;

    case CHAT_TMPL_MISTRAL_V1:
        sb_puts(&b, bos);
        for (size_t i = 0; i < nl; i++) {
            const chat_role r = loop[i].role;
            if ((r == CHAT_ROLE_USER) != (i % 2 == 0)) {
                free(b.p);
                return raise_exc(t, "After the optional system message, conversation roles must alternate "
                                    "user/assistant/user/assistant/...");
            }
            if (r == CHAT_ROLE_USER) {
                sb_puts(&b, " [INST] ");
                if (i == 0 && first_sys) {
                    sb_puts(&b, msgs[0].content);
                    sb_puts(&b, "\n\n");
                }
                sb_puts(&b, loop[i].content);
                sb_puts(&b, " [/INST]");
            } else if (r == CHAT_ROLE_ASSISTANT) {
                sb_puts(&b, " ");
                sb_puts(&b, loop[i].content);
                sb_puts(&b, eos);
            } else {
                free(b.p);
                return raise_exc(t, "Only user and assistant roles are supported, with the exception of an "
                                    "initial optional system message!");
            }
        }
        break;

    case CHAT_TMPL_MISTRAL_LEGACY:
        sb_puts(&b, bos);
        for (size_t i = 0; i < n; i++) {
            const chat_role r = msgs[i].role;
            if ((r == CHAT_ROLE_USER) != (i % 2 == 0)) {
                free(b.p);
                return raise_exc(t, ALTERNATE);
            }
            if (r == CHAT_ROLE_USER) {
                sb_puts(&b, "[INST] ");
                sb_puts(&b, msgs[i].content);
                sb_puts(&b, " [/INST]");
            } else if (r == CHAT_ROLE_ASSISTANT) {
                sb_puts(&b, msgs[i].content);
                sb_puts(&b, eos);
            } else {
                free(b.p);
                return raise_exc(t, "Only user and assistant roles are supported!");
            }
        }
        break;

    case CHAT_TMPL_GEMMA:
        sb_puts(&b, bos);
        for (size_t i = 0; i < nl; i++) {
            const chat_role r = loop[i].role;
            if ((r == CHAT_ROLE_USER) != (i % 2 == 0)) {
                free(b.p);
                return raise_exc(t, ALTERNATE);
            }
            sb_puts(&b, "<start_of_turn>");
            sb_puts(&b, r == CHAT_ROLE_ASSISTANT ? "model" : chat_role_name(r));
            sb_puts(&b, "\n");
            if (i == 0 && first_sys) { /* the system text itself is not trimmed */
                sb_puts(&b, msgs[0].content);
                sb_puts(&b, "\n\n");
            }
            sb_put_stripped(&b, loop[i].content);
            sb_puts(&b, "<end_of_turn>\n");
        }
        if (add_generation_prompt) sb_puts(&b, "<start_of_turn>model\n");
        break;

    default:
        return ts_fail(TS_ERR_ARG, "chat: unknown template kind %d", (int)t->kind);
    }

    if (b.oom) {
        free(b.p);
        return TS_ERR_NOMEM;
    }
    if (!b.p) { /* e.g. llama2 with only a system message renders nothing */
        b.p = ts_malloc(1);
        if (!b.p) return TS_ERR_NOMEM;
        b.p[0] = '\0';
    }
    *out = b.p;
    if (out_len) *out_len = b.len;
    return TS_OK;
}

/* ---------------------------------------------------------------- JSON */

void chat_messages_free(chat_messages *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free((char *)m->msgs[i].content);
    free(m->msgs);
    m->msgs = NULL;
    m->n = 0;
}

static void line_col(const char *s, size_t off, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

/* cJSON ends strings at a decoded NUL, which would cut a message short
 * silently; find a \u0000 escape inside a JSON string instead. */
static bool has_nul_escape(const char *s, size_t n) {
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            if (s[i] == '"') in_str = true;
            continue;
        }
        if (s[i] == '"') in_str = false;
        else if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !strncmp(s + i + 2, "0000", 4)) return true;
            i++;
        }
    }
    return false;
}

ts_status chat_messages_parse_json(const char *json, size_t len, chat_messages *out) {
    out->msgs = NULL;
    out->n = 0;
    if (memchr(json, '\0', len)) return ts_fail(TS_ERR_FORMAT, "messages JSON: contains a NUL byte");
    if (!ts_utf8_valid(json, len)) return ts_fail(TS_ERR_FORMAT, "messages JSON: not valid UTF-8");
    if (has_nul_escape(json, len)) return ts_fail(TS_ERR_FORMAT, "messages JSON: \\u0000 (NUL) in a string is not supported");

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t off = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
        size_t line, col;
        line_col(json, off, &line, &col);
        return ts_fail(TS_ERR_FORMAT, "messages JSON: syntax error at line %zu, column %zu", line, col);
    }
    for (size_t off = end ? (size_t)(end - json) : len; off < len; off++) {
        if (json[off] != ' ' && json[off] != '\t' && json[off] != '\n' && json[off] != '\r') {
            size_t line, col;
            line_col(json, off, &line, &col);
            cJSON_Delete(root);
            return ts_fail(TS_ERR_FORMAT, "messages JSON: unexpected text after the array at line %zu, column %zu",
                           line, col);
        }
    }
    ts_status st = TS_OK;
    if (!cJSON_IsArray(root)) {
        st = ts_fail(TS_ERR_FORMAT, "messages JSON: expected an array of {\"role\", \"content\"} objects");
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    if (count <= 0) {
        st = ts_fail(TS_ERR_FORMAT, "messages JSON: the array is empty");
        goto done;
    }
    out->msgs = ts_calloc((size_t)count, sizeof *out->msgs);
    if (!out->msgs) {
        st = TS_ERR_NOMEM;
        goto done;
    }
    size_t i = 0;
    for (cJSON *it = root->child; it; it = it->next, i++) {
        if (!cJSON_IsObject(it)) {
            st = ts_fail(TS_ERR_FORMAT, "messages JSON: message %zu is not an object", i + 1);
            goto done;
        }
        const cJSON *role = NULL, *content = NULL;
        for (const cJSON *f = it->child; f; f = f->next) {
            if (!strcmp(f->string, "role") && !role) role = f;
            else if (!strcmp(f->string, "content") && !content) content = f;
            else {
                st = ts_fail(TS_ERR_FORMAT, "messages JSON: message %zu: unexpected key \"%.40s\" (only role and content)",
                             i + 1, f->string);
                goto done;
            }
        }
        if (!role || !cJSON_IsString(role)) {
            st = ts_fail(TS_ERR_FORMAT, "messages JSON: message %zu: \"role\" must be a string", i + 1);
            goto done;
        }
        if (!content || !cJSON_IsString(content)) {
            st = ts_fail(TS_ERR_FORMAT, "messages JSON: message %zu: \"content\" must be a string", i + 1);
            goto done;
        }
        chat_role r;
        if (!chat_role_parse(role->valuestring, &r)) {
            st = ts_fail(TS_ERR_FORMAT, "messages JSON: message %zu: unknown role \"%.40s\" (system, user, assistant)",
                         i + 1, role->valuestring);
            goto done;
        }
        char *c = strdup(content->valuestring);
        if (!c) {
            st = ts_fail(TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        out->msgs[i].role = r;
        out->msgs[i].content = c;
        out->n = i + 1;
    }
done:
    cJSON_Delete(root);
    if (st != TS_OK) chat_messages_free(out);
    return st;
}
