/* libFuzzer harness for chat templates: template detection on arbitrary text,
 * the messages JSON parser, and rendering. Input: TEMPLATE NUL MESSAGES_JSON
 * (no NUL: the whole input is tried as both). Whatever parses must render
 * under every named template and under the detected one without a crash,
 * and the rendering of valid UTF-8 (template and messages) must be valid
 * UTF-8 of the stated length. A template detect accepts is valid UTF-8 (it
 * once accepted any bytes and handed a chatml default system prompt to the
 * renderer as they were: found by this harness, docs/RELIABILITY.md).
 * A second pass builds a conversation straight from the bytes (roles from
 * one byte each, contents sanitized to UTF-8), so the renderers see role
 * orders and contents the JSON seeds never spell.
 *
 * Seeds: TS_FUZZ_WRITE_SEEDS=DIR writes one per tests/fixtures/chat file
 * (the real template, NUL, its first conversation). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "chat/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *names[] = {"chatml", "llama3", "llama2", "mistral", "mistral-legacy", "gemma"};
#define N_NAMES ((int)(sizeof names / sizeof names[0]))

/* every template this sees, named or detected, is valid UTF-8, so each rendering must be */
static void render_all(const chat_template *t, const chat_message *m, size_t n) {
    static const char *bos[] = {NULL, "<s>", "<|begin_of_text|>", "<bos>"};
    for (int g = 0; g < 2; g++) {
        char *out = NULL;
        size_t len = 0;
        if (chat_render(t, m, n, g, bos[(n + (size_t)g) % 4], g ? "</s>" : NULL, &out, &len) != TS_OK) continue;
        if (strlen(out) != len || !ts_utf8_valid(out, len)) abort();
        free(out);
    }
    (void)chat_template_emits_bos(t);
    (void)chat_template_kind_name(t->kind);
}

static void render_named(const chat_message *m, size_t n, const chat_template *detected) {
    for (int i = 0; i < N_NAMES; i++) {
        chat_template t;
        if (chat_template_from_name(names[i], &t) != TS_OK) abort(); /* every listed name exists */
        render_all(&t, m, n);
        chat_template_free(&t);
    }
    if (detected) render_all(detected, m, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    const char *json = nul ? (const char *)nul + 1 : (const char *)data;
    size_t jl = nul ? size - tl - 1 : size;

    char *tmpl = malloc(tl + 1);
    if (!tmpl) return 0;
    memcpy(tmpl, data, tl);
    tmpl[tl] = 0;
    chat_template det;
    bool have_det = chat_template_detect(tmpl, &det) == TS_OK;
    if (have_det && !ts_utf8_valid(tmpl, tl)) abort(); /* documented: detect refuses what is not UTF-8 */
    free(tmpl);
    chat_template by_name;
    char nm[32];
    size_t nl = tl < sizeof nm - 1 ? tl : sizeof nm - 1;
    memcpy(nm, data, nl);
    nm[nl] = 0;
    if (chat_template_from_name(nm, &by_name) == TS_OK) chat_template_free(&by_name);

    chat_messages msgs;
    if (chat_messages_parse_json(json, jl, &msgs) == TS_OK) {
        if (msgs.n == 0) abort(); /* documented: an empty array is refused */
        for (size_t i = 0; i < msgs.n; i++)
            if (!ts_utf8_valid(msgs.msgs[i].content, strlen(msgs.msgs[i].content))) abort();
        render_named(msgs.msgs, msgs.n, have_det ? &det : NULL);
        chat_messages_free(&msgs);
    }

    /* conversation from the raw bytes: [role byte][len byte][content]... */
    chat_message m[16];
    char *owned[16];
    size_t n = 0, at = 0;
    while (n < 16 && at + 2 <= size) {
        chat_role role = (chat_role)(data[at] % 3);
        size_t l = data[at + 1];
        at += 2;
        if (l > size - at) l = size - at;
        owned[n] = ts_utf8_sanitize((const char *)data + at, l);
        if (!owned[n]) break;
        m[n].role = role;
        m[n].content = owned[n];
        n++;
        at += l;
    }
    if (n) render_named(m, n, have_det ? &det : NULL);
    for (size_t i = 0; i < n; i++) ts_free(owned[i]);
    if (have_det) chat_template_free(&det);
    return 0;
}

/* ---- seeds ---- */

static void write_seeds(const char *dir) {
    char src[4096];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    if (slash) *slash = 0;
    else snprintf(src, sizeof src, "fuzz");
    const char *fix[] = {"gemma3", "llama2", "llama3", "mistral-legacy", "mistral-v1", "openhermes", "qwen2.5", "smollm2"};
    for (size_t i = 0; i < sizeof fix / sizeof fix[0]; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/../tests/fixtures/chat/%s.json", src, fix[i]);
        char *text = NULL;
        size_t len = 0;
        if (ts_read_file(path, 0, &text, &len) != TS_OK) {
            fprintf(stderr, "fuzz_chat: %s\n", ts_last_error());
            continue;
        }
        cJSON *j = cJSON_ParseWithLength(text, len);
        ts_free(text);
        const cJSON *t = cJSON_GetObjectItem(j, "template");
        const cJSON *cases = cJSON_GetObjectItem(j, "cases");
        const cJSON *c0 = cJSON_IsArray(cases) ? cJSON_GetArrayItem(cases, 0) : NULL;
        const cJSON *msgs = c0 ? cJSON_GetObjectItem(c0, "messages") : NULL;
        char *mj = msgs ? cJSON_PrintUnformatted(msgs) : NULL;
        if (cJSON_IsString(t)) {
            char out[4400];
            snprintf(out, sizeof out, "%s/%s.bin", dir, fix[i]);
            FILE *fp = fopen(out, "wb");
            if (fp) {
                fwrite(t->valuestring, 1, strlen(t->valuestring), fp);
                fputc(0, fp);
                if (mj) fwrite(mj, 1, strlen(mj), fp);
                fclose(fp);
            }
        }
        free(mj);
        cJSON_Delete(j);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TS_FUZZ_WRITE_SEEDS");
    if (dir && *dir) {
        write_seeds(dir);
        exit(0);
    }
    return 0;
}
