/* ts_inspect on hostile GGUF files: the text form never carries a control
 * character or invalid UTF-8 from the file (a name holding ESC sequences
 * could retitle or clear the terminal), and the JSON form is always valid
 * JSON in valid UTF-8 (a raw 0xFF byte used to come through as is). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_hook.h"
#include "gguf/gguf.h"
#include "test_util.h"

/* A raw string kv (the writer's C-string calls cannot hold a NUL). */
static void raw_str_kv(gguf_writer *w, const char *key, const char *v, size_t vlen) {
    uint8_t buf[512];
    uint64_t kl = strlen(key), vl = vlen;
    uint32_t type = GGUF_VT_STRING; /* the raw on-disk u32 */
    size_t n = 0;
    memcpy(buf + n, &kl, 8), n += 8;
    memcpy(buf + n, key, kl), n += kl;
    memcpy(buf + n, &type, 4), n += 4;
    memcpy(buf + n, &vl, 8), n += 8;
    memcpy(buf + n, v, vlen), n += vlen;
    gguf_w_raw_kv(w, buf, n);
}

/* True when the text is safe for a terminal: valid UTF-8, no C0 control but
 * newline, no DEL, no C1 control (U+0080..U+009F). */
static bool terminal_safe(const char *s, size_t n) {
    if (!ts_utf8_valid(s, n)) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n') || c == 0x7F) return false;
        if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] < 0xA0) return false;
    }
    return true;
}

static const char *evil_name = "evil\x1b]0;pwned\x07\x1b[2J\xc2\x9bX\xff\x7f\\end \xc3\xa9";

static char *make_file(void) {
    static char path[] = "/tmp/ts_inspXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_str(w, "general.name", evil_name);
    gguf_w_u32(w, "llama.context_length", 4096);
    gguf_w_str(w, "llama.rope.scaling.type", "lin\x1b[31mear");
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2\x1b");
    gguf_w_str(w, "tokenizer.ggml.pre", "pre\x9b");
    gguf_w_str(w, "bad\x1b\xff.key", "v\xffv");
    raw_str_kv(w, "with.nul", "a\0b\x1b", 4);
    float data[4] = {1, 2, 3, 4};
    uint64_t ne[1] = {4};
    gguf_w_tensor(w, "tensor\x1b[H\xff", TS_TYPE_F32, 1, ne, data, sizeof data);
    gguf_w_tensor(w, "plain.weight", TS_TYPE_F32, 1, ne, data, sizeof data);
    CHECKF(gguf_writer_write(w, path) == TS_OK, "%s", ts_last_error());
    gguf_writer_free(w);
    return path;
}

static void test_text(const char *path) {
    for (int tensors = 0; tensors < 2; tensors++) {
        char *t = NULL;
        size_t n = 0;
        ts_inspect_opts o = {.tensors = tensors};
        CHECKF(ts_inspect(path, &o, &t, &n) == TS_OK, "%s", ts_last_error());
        if (!t) continue;
        CHECK(strlen(t) == n);
        CHECKF(terminal_safe(t, n), "tensors=%d: control bytes or invalid UTF-8 in:\n%s", tensors, t);
        /* escaped, not dropped: every byte can still be read off */
        CHECKF(strstr(t, "name:         evil\\x1b]0;pwned\\x07\\x1b[2J\\u009bX\\xff\\x7f\\\\end \xc3\xa9\n") != NULL, "%s", t);
        CHECK(strstr(t, "  rope.scaling.type                  lin\\x1b[31mear\n") != NULL);
        CHECKF(strstr(t, "tokenizer:    gpt2\\x1b / pre=pre\\x9b, 0 tokens\n") != NULL, "%s", t);
        if (tensors) {
            /* the name column stays 48 wide after escaping */
            char row[128];
            snprintf(row, sizeof row, "\n%-48s F32      4 ", "tensor\\x1b[H\\xff");
            CHECKF(strstr(t, row) != NULL, "%s", t);
            snprintf(row, sizeof row, "\n%-48s F32      4 ", "plain.weight");
            CHECK(strstr(t, row) != NULL);
        }
        ts_free(t);
    }
}

static void test_json(const char *path) {
    char *t = NULL;
    size_t n = 0;
    ts_inspect_opts o = {.json = true, .tensors = true};
    CHECKF(ts_inspect(path, &o, &t, &n) == TS_OK, "%s", ts_last_error());
    if (!t) return;
    CHECK(strlen(t) == n && n && t[n - 1] == '\n');
    CHECK(ts_utf8_valid(t, n));
    cJSON *j = cJSON_Parse(t);
    CHECKF(j != NULL, "not JSON:\n%s", t);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    CHECKF(cJSON_IsString(name) && !strcmp(name->valuestring, "evil\x1b]0;pwned\x07\x1b[2J\xc2\x9bX\xef\xbf\xbd\x7f\\end \xc3\xa9"),
           "name: %s", cJSON_IsString(name) ? name->valuestring : "(missing)");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(md, "bad\x1b\xef\xbf\xbd.key");
    CHECK(cJSON_IsString(k) && !strcmp(k->valuestring, "v\xef\xbf\xbdv"));
    /* a NUL inside a string is neither a terminator nor raw */
    const cJSON *nul = cJSON_GetObjectItemCaseSensitive(md, "with.nul");
    CHECK(cJSON_IsString(nul) && !strcmp(nul->valuestring, "a\xef\xbf\xbd" "b\x1b"));
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "tokenizer");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(tk, "pre")) &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(tk, "pre")->valuestring, "pre\xef\xbf\xbd"));
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    CHECK(cJSON_GetArraySize(ts) == 2 && !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ts, 0), "name")->valuestring,
                                                   "tensor\x1b[H\xef\xbf\xbd"));
    cJSON_Delete(j);
    ts_free(t);
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* A plain file describes itself as it always did. */
static void test_plain(void) {
    char path[] = "/tmp/ts_inspXXXXXX";
    close(mkstemp(path));
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_str(w, "general.architecture", "qwen2");
    gguf_w_str(w, "general.name", "Plain Model 0.5B");
    gguf_w_f32(w, "qwen2.rope.freq_base", 1000000.0f);
    CHECK(gguf_writer_write(w, path) == TS_OK);
    gguf_writer_free(w);
    char *t = NULL;
    size_t n = 0;
    CHECKF(ts_inspect(path, NULL, &t, &n) == TS_OK, "%s", ts_last_error());
    char want[1024], sz[32];
    snprintf(want, sizeof want,
             "file:         %s (%s, GGUF v3)\n"
             "architecture: qwen2\n"
             "name:         Plain Model 0.5B\n"
             "  rope.freq_base                     1e+06\n"
             "tokenizer:    (none)\n"
             "metadata:     3 keys\n"
             "tensors:      0 (0 B), 0.000 B parameters\n",
             path, ts_fmt_bytes(file_size(path), 2, sz, sizeof sz));
    CHECKF(t && !strcmp(t, want), "got:\n%s\nwant:\n%s", t ? t : "(null)", want);
    ts_free(t);
    unlink(path);
    /* a missing file: an error naming it, nothing handed out */
    t = (char *)1;
    CHECK(ts_inspect(path, NULL, &t, &n) == TS_ERR_IO && !t && strstr(ts_last_error(), path));
}

/* Every allocation of a call fails in turn: each run fails with a message
 * and hands out nothing, or succeeds with the very same description. */
static void alloc_sweep(const char *path, bool json) {
#if !ALLOC_HOOK
    (void)path;
    printf("inspect%s: allocation-failure sweep not run under AddressSanitizer\n", json ? " --json" : "");
#else
    ts_inspect_opts o = {.json = json, .tensors = true};
    char *want = NULL, *got;
    size_t wn = 0, gn;
    alloc_count = 0;
    CHECK(ts_inspect(path, &o, &want, &wn) == TS_OK);
    long total = alloc_count;
    int bad = 0, failed = 0, leaks = 0;
    for (long k = 0; k < total + 4 && want; k++) {
        got = NULL;
        long live = alloc_live;
        alloc_fail_in(k);
        ts_status st = ts_inspect(path, &o, &got, &gn);
        alloc_fail_hit();
        leaks += alloc_live != live + (got != NULL);
        if (st != TS_OK) {
            failed++;
            if (got || !ts_last_error()[0]) bad++;
        } else if (!got || gn != wn || memcmp(got, want, wn)) {
            bad++;
        }
        free(got);
    }
    CHECKF(bad == 0 && failed > 0, "json=%d: %d of %ld allocations failing went wrong, %d failed", json, bad, total, failed);
    CHECKF(leaks == 0, "json=%d: %d runs leaked", json, leaks);
    free(want);
#endif
}

int main(void) {
    char *path = make_file();
    test_text(path);
    test_json(path);
    alloc_sweep(path, false);
    alloc_sweep(path, true);
    unlink(path);
    test_plain();
    return tu_finish();
}
