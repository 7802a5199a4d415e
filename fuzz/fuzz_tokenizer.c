/* libFuzzer harness for the tokenizers: arbitrary bytes are tokenized with
 * and without special-token parsing, decoded whole and through the streaming
 * detokenizer. Nothing may crash, every id must be in range, and on the GPT-2
 * vocabulary (byte-level BPE that can spell every byte, no user-defined
 * tokens) decode(encode(x)) must give x back exactly.
 *
 * Vocabularies: TS_FUZZ_VOCAB (one path, or several separated by ':'), else
 * the GPT-2, Llama SPM and Phi-3 fixtures next to this source file. The first
 * input byte picks the vocabulary. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#define MAX_VOCABS 8

static tok_vocab *g_vocab[MAX_VOCABS];
static bool g_exact[MAX_VOCABS];
static int g_n = -1;

static void load_one(const char *path) {
    if (g_n >= MAX_VOCABS) return;
    gguf_file *f = NULL;
    tok_vocab *v = NULL;
    if (gguf_open(path, &f) != TS_OK || tok_load(f, &v) != TS_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path, ts_last_error());
        gguf_close(f);
        return;
    }
    gguf_close(f);
    g_exact[g_n] = strstr(path, "gpt-2") != NULL;
    g_vocab[g_n++] = v;
}

static void init(void) {
    g_n = 0;
    const char *env = getenv("TS_FUZZ_VOCAB");
    if (env && *env) {
        char *list = strdup(env);
        for (char *tok = strtok(list, ":"); tok; tok = strtok(NULL, ":")) load_one(tok);
        free(list);
    } else {
        /* this file lives in fuzz/; the fixtures in tests/fixtures/vocab */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", __FILE__);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, "fuzz");
        const char *names[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"};
        for (int i = 0; i < 3; i++) {
            char p[4400];
            snprintf(p, sizeof p, "%s/../tests/fixtures/vocab/%s", dir, names[i]);
            load_one(p);
        }
    }
    if (g_n == 0) {
        fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (set TS_FUZZ_VOCAB)\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (g_n < 0) init();
    int k = size ? data[0] % g_n : 0;
    const tok_vocab *v = g_vocab[k];
    const char *text = size ? (const char *)data + 1 : "";
    size_t len = size ? size - 1 : 0;
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(v, text, len, special, special, &ids, &n) != TS_OK) abort(); /* only OOM could fail */
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= tok_n_vocab(v)) abort();
        char *dec = NULL;
        size_t dl = 0;
        if (tok_decode(v, ids, n, TOK_DECODE_STRIP_SPACE, &dec, &dl) != TS_OK) abort();
        if (g_exact[k] && !special && (dl != len || memcmp(dec, text, len))) abort();
        /* streaming gives the same bytes */
        tok_stream s;
        if (tok_stream_init(&s, v, TOK_DECODE_STRIP_SPACE) != TS_OK) abort();
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            size_t l;
            const char *p = tok_stream_push(&s, ids[i], &l);
            if (at + l > dl || (l && memcmp(p, dec + at, l))) abort();
            at += l;
        }
        size_t l;
        const char *p = tok_stream_flush(&s, &l);
        if (at + l != dl || (l && memcmp(p, dec + at, l))) abort();
        tok_stream_free(&s);
        free(dec);
        free(ids);
    }
    return 0;
}
