/* Chat template tests: detection and byte-exact rendering against
 * the JSON files in tests/fixtures/chat (jinja2's rendering of the real templates, made
 * by scripts/gen_chat_fixtures.py), forced names, refused templates, and the
 * messages JSON reader's error cases. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "test_util.h"

static int n_fixture_files, n_cases;

static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    fprintf(stderr, "  first difference at byte %zu:\n  want: %.80s\n  got:  %.80s\n", i, want + i, got + i);
}

static void run_fixture(const char *path) {
    char *text = NULL;
    size_t len = 0;
    if (ts_read_file(path, 0, &text, &len) != TS_OK) {
        CHECKF(0, "%s: %s", path, ts_last_error());
        return;
    }
    cJSON *doc = cJSON_ParseWithLength(text, len);
    CHECKF(doc != NULL, "%s: fixture is not JSON", path);
    if (!doc) {
        free(text);
        return;
    }
    n_fixture_files++;
    const char *tmpl = cJSON_GetObjectItem(doc, "template")->valuestring;
    const char *kind = cJSON_GetObjectItem(doc, "kind")->valuestring;
    const char *bos = cJSON_GetObjectItem(doc, "bos_token")->valuestring;
    const char *eos = cJSON_GetObjectItem(doc, "eos_token")->valuestring;

    chat_template t;
    ts_status st = chat_template_detect(tmpl, &t);
    CHECKF(st == TS_OK, "%s: detect: %s", path, ts_last_error());
    if (st != TS_OK) goto out;
    CHECKF(!strcmp(chat_template_kind_name(t.kind), kind), "%s: detected %s, expected %s", path,
           chat_template_kind_name(t.kind), kind);

    const cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        const cJSON *expected = cJSON_GetObjectItem(c, "expected");
        const cJSON *error = cJSON_GetObjectItem(c, "error");

        /* The messages go through the JSON reader, as --messages-file would. */
        char *mj = cJSON_PrintUnformatted(msgs);
        chat_messages m;
        st = chat_messages_parse_json(mj, strlen(mj), &m);
        free(mj);
        CHECKF(st == TS_OK, "%s/%s: parse messages: %s", path, name, ts_last_error());
        if (st != TS_OK) continue;
        n_cases++;

        char *out = NULL;
        size_t out_len = 0;
        st = chat_render(&t, m.msgs, m.n, gen, bos, eos, &out, &out_len);
        if (expected) {
            CHECKF(st == TS_OK, "%s/%s: render failed: %s", path, name, ts_last_error());
            if (st == TS_OK) {
                bool same = out_len == strlen(expected->valuestring) && !strcmp(out, expected->valuestring);
                CHECKF(same, "%s/%s: rendering differs from jinja2", path, name);
                if (!same) show_diff(expected->valuestring, out);
                /* emits_bos says whether the text starts with bos_text; a marker
                 * shows it, since a vocab's BOS text can equal a template token
                 * (SmolLM2's BOS is <|im_start|>). */
                char *mk = NULL;
                if (chat_render(&t, m.msgs, m.n, gen, "\001BOS", eos, &mk, NULL) == TS_OK && out_len > 0) {
                    if (chat_template_emits_bos(&t))
                        CHECKF(!strncmp(mk, "\001BOS", 4), "%s/%s: does not start with BOS", path, name);
                    else
                        CHECKF(!strstr(mk, "\001BOS"), "%s/%s: contains BOS", path, name);
                }
                free(mk);
            }
        } else {
            CHECKF(st == TS_ERR_ARG, "%s/%s: expected the template's error \"%s\", got status %d", path, name,
                   error ? error->valuestring : "?", (int)st);
            if (error && st != TS_OK)
                CHECKF(strstr(ts_last_error(), error->valuestring) != NULL, "%s/%s: message \"%s\" lacks \"%s\"",
                       path, name, ts_last_error(), error->valuestring);
        }
        free(out);
        chat_messages_free(&m);
    }
    chat_template_free(&t);
out:
    cJSON_Delete(doc);
    free(text);
}

static void test_fixtures(void) {
    const char *dir = TS_FIXTURES "/chat";
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open %s", dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        run_fixture(path);
    }
    closedir(d);
    CHECKF(n_fixture_files >= 8, "only %d fixture files", n_fixture_files);
    CHECKF(n_cases >= 8 * 22, "only %d cases", n_cases);
}

static void test_default_system(void) {
    /* The SmolLM2 fixture's template carries its default system prompt. */
    char *text = NULL;
    size_t len;
    if (ts_read_file(TS_FIXTURES "/chat/smollm2.json", 0, &text, &len) != TS_OK) {
        CHECK(0);
        return;
    }
    cJSON *doc = cJSON_Parse(text);
    chat_template t;
    CHECK(chat_template_detect(cJSON_GetObjectItem(doc, "template")->valuestring, &t) == TS_OK);
    CHECK(t.default_system && !strcmp(t.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
    chat_template_free(&t);
    cJSON_Delete(doc);
    free(text);
}

static void test_names(void) {
    chat_template t;
    const char *names[] = {"chatml", "llama3", "llama2", "mistral", "mistral-v1", "mistral-legacy", "gemma"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        CHECKF(chat_template_from_name(names[i], &t) == TS_OK, "%s", names[i]);
        CHECK(t.default_system == NULL);
    }
    CHECK(chat_template_from_name("mistral", &t) == TS_OK && t.kind == CHAT_TMPL_MISTRAL_V1);
    CHECK(chat_template_from_name("vicuna", &t) == TS_ERR_ARG);
    CHECK(strstr(ts_last_error(), "vicuna") && strstr(ts_last_error(), "chatml"));

    /* A forced gemma renders the documented shape. */
    chat_template_from_name("gemma", &t);
    chat_message m[3] = {{CHAT_ROLE_SYSTEM, "S"}, {CHAT_ROLE_USER, " hi "}, {CHAT_ROLE_ASSISTANT, "yo"}};
    char *out = NULL;
    CHECK(chat_render(&t, m, 3, true, "<bos>", "<eos>", &out, NULL) == TS_OK);
    CHECK(out && !strcmp(out, "<bos><start_of_turn>user\nS\n\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n"
                              "<start_of_turn>model\n"));
    free(out);
    /* NULL bos/eos mean empty. */
    chat_template_from_name("llama3", &t);
    CHECK(chat_render(&t, m + 1, 1, false, NULL, NULL, &out, NULL) == TS_OK);
    CHECK(out && !strcmp(out, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"));
    free(out);
}

static void test_refused(void) {
    static const char *const refused[] = {
        /* Phi-3 mini, from the vocab fixtures' ggml-vocab-phi-3.gguf */
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + "
        "message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') "
        "%}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
        /* Llama 3.1 style */
        "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
        "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}",
        /* Mistral v7 */
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}[SYSTEM_PROMPT]{{ m['content'] }}"
        "[/SYSTEM_PROMPT]{% elif m['role'] == 'user' %}[INST]{{ m['content'] }}[/INST]{% endif %}{% endfor %}",
        /* Gemma 1/2 */
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}{% for message in messages %}{{ '<start_of_turn>' + message['role'] }}{% endfor %}",
        /* Qwen3-like chatml with thinking */
        "{%- for message in messages %}<|im_start|>{{ message.role }}\n{%- if '</think>' in message.content %}"
        "<think>{% endif %}{% endfor %}",
        /* Something else entirely */
        "{% for message in messages %}### {{ message['role'] }}: {{ message['content'] }}\n{% endfor %}",
        "",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        chat_template t;
        ts_clear_error();
        ts_status st = chat_template_detect(refused[i], &t);
        CHECKF(st == TS_ERR_UNSUPPORTED, "template %zu accepted as %s", i, chat_template_kind_name(t.kind));
        CHECKF(strstr(ts_last_error(), "choose one by name") != NULL, "template %zu: message: %s", i, ts_last_error());
    }
    /* A default system prompt found before the refusal is not kept (it leaked:
     * found by fuzz/fuzz_chat.c under LeakSanitizer). */
    {
        chat_template r;
        ts_status st = chat_template_detect("{{ '<|im_start|>system\\nA<|im_end|>\\n' }}{{ '<|im_start|>system\\n\\x41<|im_end|>\\n' }}", &r);
        CHECKF(st == TS_ERR_UNSUPPORTED, "status %d: %s", (int)st, ts_last_error());
        CHECK(r.default_system == NULL);
    }
    /* A template that is not UTF-8 is refused, here one whose default system
     * prompt would carry the bad bytes into every rendering (fuzz/fuzz_chat.c
     * found that it was accepted); the same text made valid is accepted. */
    {
        chat_template r;
        ts_clear_error();
        ts_status st = chat_template_detect("{{ '<|im_start|>system\nA\xff<|im_end|>\n' }}<|im_start|>", &r);
        CHECKF(st == TS_ERR_FORMAT, "status %d: %s", (int)st, ts_last_error());
        CHECK(strstr(ts_last_error(), "not valid UTF-8") != NULL && r.default_system == NULL);
        st = chat_template_detect("{{ '<|im_start|>system\nA\xc3\xa9<|im_end|>\n' }}<|im_start|>", &r);
        CHECKF(st == TS_OK && r.default_system && !strcmp(r.default_system, "A\xc3\xa9"), "status %d: %s", (int)st,
               ts_last_error());
        chat_template_free(&r);
    }
    /* The message quotes what it saw. */
    chat_template t;
    chat_template_detect("{% for message in messages %}### odd", &t);
    CHECK(strstr(ts_last_error(), "### odd") != NULL);
}

static void test_render_errors(void) {
    chat_template t;
    chat_template_from_name("chatml", &t);
    char *out = (char *)1;
    CHECK(chat_render(&t, NULL, 0, true, "", "", &out, NULL) == TS_ERR_ARG && out == NULL);
    chat_message bad[1] = {{CHAT_ROLE_USER, "\xff\xfe"}};
    CHECK(chat_render(&t, bad, 1, true, "", "", &out, NULL) == TS_ERR_ARG);
    CHECK(strstr(ts_last_error(), "UTF-8") != NULL);
    chat_message none[1] = {{CHAT_ROLE_USER, NULL}};
    CHECK(chat_render(&t, none, 1, true, "", "", &out, NULL) == TS_ERR_ARG);
    chat_message badrole[1] = {{(chat_role)7, "x"}};
    CHECK(chat_render(&t, badrole, 1, true, "", "", &out, NULL) == TS_ERR_ARG);
}

static void expect_json_error(const char *json, const char *needle) {
    chat_messages m = {(chat_message *)1, 99};
    ts_clear_error();
    ts_status st = chat_messages_parse_json(json, strlen(json), &m);
    CHECKF(st == TS_ERR_FORMAT, "accepted: %s", json);
    CHECKF(m.msgs == NULL && m.n == 0, "output not cleared for: %s", json);
    CHECKF(strstr(ts_last_error(), needle) != NULL, "for %s: message \"%s\" lacks \"%s\"", json, ts_last_error(), needle);
}

static void test_json(void) {
    chat_messages m;
    const char *ok = " [ {\"role\": \"system\", \"content\": \"s\"},\n {\"content\": \"h\\u00e9\\n\", \"role\": \"user\"} ]\n";
    CHECK(chat_messages_parse_json(ok, strlen(ok), &m) == TS_OK);
    CHECK(m.n == 2 && m.msgs[0].role == CHAT_ROLE_SYSTEM && m.msgs[1].role == CHAT_ROLE_USER);
    CHECK(m.n == 2 && !strcmp(m.msgs[1].content, "h\xc3\xa9\n"));
    chat_messages_free(&m);
    chat_messages_free(&m); /* twice is harmless */

    /* Length-bounded: bytes past len are not read. */
    const char *two = "[{\"role\":\"user\",\"content\":\"x\"}]GARBAGE";
    CHECK(chat_messages_parse_json(two, 31, &m) == TS_OK && m.n == 1);
    chat_messages_free(&m);

    expect_json_error("", "syntax error");
    expect_json_error("[", "syntax error");
    expect_json_error("[{\"role\": \"user\", \"content\": \"x\"}", "syntax error");
    expect_json_error("[\n{\"role\": \"user\",\n \"content\": 'x'}]", "line 3");
    expect_json_error("[{\"role\":\"user\",\"content\":\"x\"}] extra", "after the array");
    expect_json_error("{\"role\": \"user\", \"content\": \"x\"}", "expected an array");
    expect_json_error("[]", "empty");
    expect_json_error("[1]", "message 1 is not an object");
    expect_json_error("[{\"role\":\"user\",\"content\":\"x\"}, \"hi\"]", "message 2 is not an object");
    expect_json_error("[{\"content\": \"x\"}]", "\"role\" must be a string");
    expect_json_error("[{\"role\": 3, \"content\": \"x\"}]", "\"role\" must be a string");
    expect_json_error("[{\"role\": \"user\"}]", "\"content\" must be a string");
    expect_json_error("[{\"role\": \"user\", \"content\": null}]", "\"content\" must be a string");
    expect_json_error("[{\"role\": \"user\", \"content\": [{\"type\":\"text\"}]}]", "\"content\" must be a string");
    expect_json_error("[{\"role\": \"tool\", \"content\": \"x\"}]", "unknown role \"tool\"");
    expect_json_error("[{\"role\": \"User\", \"content\": \"x\"}]", "unknown role");
    expect_json_error("[{\"role\": \"user\", \"content\": \"x\", \"name\": \"bob\"}]", "unexpected key \"name\"");
    expect_json_error("[{\"role\": \"user\", \"role\": \"user\", \"content\": \"x\"}]", "unexpected key \"role\"");
    expect_json_error("[{\"role\": \"user\", \"content\": \"a\\u0000b\"}]", "NUL");
    expect_json_error("[{\"role\": \"user\", \"content\": \"\xff\"}]", "UTF-8");
    expect_json_error("[{\"role\": \"user\", \"content\": \"\\ud800\"}]", "syntax error");
    /* An escaped backslash before u0000 is text, not NUL. */
    const char *bs = "[{\"role\": \"user\", \"content\": \"a\\\\u0000b\"}]";
    CHECK(chat_messages_parse_json(bs, strlen(bs), &m) == TS_OK && !strcmp(m.msgs[0].content, "a\\u0000b"));
    chat_messages_free(&m);
    /* A NUL byte in the buffer. */
    const char nul[] = "[{\"role\":\"user\",\"content\":\"x\"}]\0";
    CHECK(chat_messages_parse_json(nul, sizeof nul - 1, &m) == TS_ERR_FORMAT);
    /* Deep nesting is refused, not a stack overflow. */
    static char deep[20000];
    memset(deep, '[', sizeof deep - 1);
    CHECK(chat_messages_parse_json(deep, strlen(deep), &m) == TS_ERR_FORMAT);
}

int main(void) {
    test_fixtures();
    test_default_system();
    test_names();
    test_refused();
    test_render_errors();
    test_json();
    return tu_finish();
}
