/* Tokenizer tests.
 * - Every tests/fixtures/vocab/X.gguf.inp with its X.gguf.out (reference ids
 *   from the Hugging Face tokenizers via llama.cpp's convert_hf_to_gguf_update,
 *   tokenized without BOS and without special parsing) must match exactly.
 * - Pre-tokenizer splits for families without a fixture vocabulary, checked
 *   against the splits their regexes define.
 * - Round trips, special tokens, BOS/EOS, end-of-generation, streaming
 *   detokenization, adversarial inputs and broken metadata. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

#define VOCAB_DIR TS_FIXTURES "/vocab"

static char *read_file(const char *path, size_t *len) {
    char *d = NULL;
    if (ts_read_file(path, 0, &d, len) != TS_OK) return NULL;
    return d;
}

static tok_vocab *load_vocab(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", VOCAB_DIR, name);
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != TS_OK) {
        fprintf(stderr, "open %s: %s\n", path, ts_last_error());
        return NULL;
    }
    tok_vocab *v = NULL;
    if (tok_load(f, &v) != TS_OK) fprintf(stderr, "tok_load %s: %s\n", path, ts_last_error());
    gguf_close(f);
    return v;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* ---- fixture pairs ---- */

static int run_fixture(const char *inp_name) {
    char base[512], path[1024];
    size_t bl = strlen(inp_name) - 4; /* strip ".inp" */
    memcpy(base, inp_name, bl);
    base[bl] = 0;
    tok_vocab *v = load_vocab(base);
    CHECKF(v != NULL, "%s loads", base);
    if (!v) return 0;
    size_t ilen, olen;
    snprintf(path, sizeof path, "%s/%s", VOCAB_DIR, inp_name);
    char *inp = read_file(path, &ilen);
    snprintf(path, sizeof path, "%s/%s.out", VOCAB_DIR, base);
    char *out = read_file(path, &olen);
    CHECKF(inp && out, "%s: .inp and .out readable", base);
    if (!inp || !out) {
        free(inp);
        free(out);
        tok_free(v);
        return 0;
    }
    /* As llama.cpp's test-tokenizer-0: texts are separated by
     * "\n__ggml_vocab_test__\n"; the file ends with one, so nothing follows
     * the last; .out has one line of ids per text. */
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof sep - 1;
    size_t pos = 0, opos = 0;
    int n_tests = 0, n_bad = 0;
    while (pos < ilen) {
        const char *nx = memmem(inp + pos, ilen - pos, sep, sl);
        size_t tl = nx ? (size_t)(nx - (inp + pos)) : ilen - pos;
        const char *text = inp + pos;
        pos = nx ? pos + tl + sl : ilen;
        /* expected line */
        CHECKF(opos < olen, "%s: .out has a line for test %d", base, n_tests);
        if (opos >= olen) break;
        const char *eol = memchr(out + opos, '\n', olen - opos);
        size_t ll = eol ? (size_t)(eol - (out + opos)) : olen - opos;
        int32_t want[4096];
        size_t nw = 0;
        char line[65536];
        if (ll >= sizeof line) ll = sizeof line - 1;
        memcpy(line, out + opos, ll);
        line[ll] = 0;
        opos += ll + 1;
        for (char *p = line; *p;) {
            while (*p == ' ') p++;
            if (!*p) break;
            char *end;
            long x = strtol(p, &end, 10);
            if (end == p || nw == 4096) break;
            want[nw++] = (int32_t)x;
            p = end;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        ts_status st = tok_encode(v, text, tl, false, false, &ids, &n);
        bool ok = st == TS_OK && n == nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
        n_tests++;
        if (!ok) {
            n_bad++;
            fprintf(stderr, "  %s test %d FAILED: text '%.*s'\n", base, n_tests - 1, (int)tl, text);
            print_ids("want", want, nw);
            print_ids("got ", ids, n);
        }
        CHECK(ok);
        /* byte-level BPE is lossless on any text */
        if (ok && tok_get_kind(v) == TOK_KIND_BPE) {
            char *dec;
            size_t dl;
            CHECK(tok_decode(v, ids, n, 0, &dec, &dl) == TS_OK);
            CHECKF(dl == tl && !memcmp(dec, text, tl), "%s: round trip of test %d", base, n_tests - 1);
            free(dec);
        }
        free(ids);
    }
    CHECKF(opos >= olen, "%s: .out has no extra lines", base);
    printf("  %-40s %d/%d fixture strings match\n", base, n_tests - n_bad, n_tests);
    free(inp);
    free(out);
    tok_free(v);
    return n_tests;
}

static void test_fixtures(void) {
    DIR *d = opendir(VOCAB_DIR);
    CHECKF(d != NULL, "fixture dir %s", VOCAB_DIR);
    if (!d) return;
    int files = 0;
    struct dirent *de;
    char names[64][256];
    int nn = 0;
    while ((de = readdir(d)) && nn < 64) {
        size_t l = strlen(de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".inp") && l < 256) snprintf(names[nn++], 256, "%s", de->d_name);
    }
    closedir(d);
    for (int i = 0; i < nn; i++) {
        run_fixture(names[i]);
        files++;
    }
    CHECKF(files >= 5, "at least the 5 base fixture pairs (found %d)", files);
}

/* ---- pre-tokenizer splits ---- */

static void check_split(const char *pre, const char *text, const char *const *want) {
    size_t *offs = NULL, n = 0;
    ts_status st = tok_pretokenize(pre, text, strlen(text), &offs, &n);
    CHECKF(st == TS_OK, "%s: %s", pre, ts_last_error());
    size_t nw = 0;
    while (want[nw]) nw++;
    bool ok = st == TS_OK && n == nw;
    for (size_t i = 0; ok && i < n; i++)
        ok = strlen(want[i]) == offs[i + 1] - offs[i] && !memcmp(want[i], text + offs[i], offs[i + 1] - offs[i]);
    if (!ok) {
        fprintf(stderr, "  split %s of '%s':", pre, text);
        for (size_t i = 0; st == TS_OK && i < n; i++)
            fprintf(stderr, " [%.*s]", (int)(offs[i + 1] - offs[i]), text + offs[i]);
        fprintf(stderr, "\n");
    }
    CHECKF(ok, "split %s '%s'", pre, text);
    free(offs);
}

static void test_pretokenizers(void) {
    /* llama3: digits in threes, case-insensitive contractions, a non-letter
     * prefix glued to words, newlines kept with preceding spaces */
    check_split("llama-bpe", "Hello world", (const char *const[]){"Hello", " world", NULL});
    check_split("llama-bpe", "3333333", (const char *const[]){"333", "333", "3", NULL});
    check_split("llama-bpe", "I'M here", (const char *const[]){"I", "'M", " here", NULL});
    check_split("llama-bpe", "  Hello\n\n  x", (const char *const[]){" ", " Hello", "\n\n", " ", " x", NULL});
    check_split("llama-bpe", "a  \n", (const char *const[]){"a", "  \n", NULL});
    check_split("llama-bpe", "\xC2\xA0x", (const char *const[]){"\xC2\xA0x", NULL});          /* NBSP prefix */
    check_split("llama-bpe", "a\xC2\x85\xC2\x85", (const char *const[]){"a", "\xC2\x85\xC2\x85", NULL}); /* NEL is \s */
    check_split("llama-bpe", "!!!\n\nx", (const char *const[]){"!!!\n\n", "x", NULL});
    /* qwen2: single digits */
    check_split("qwen2", "x 2024!", (const char *const[]){"x", " ", "2", "0", "2", "4", "!", NULL});
    check_split("qwen2", "'s 'S", (const char *const[]){"'s", " '", "S", NULL});
    /* gpt-2: case-sensitive contractions, runs of digits, trailing spaces */
    check_split("gpt-2", "I'M 123456  x", (const char *const[]){"I", "'", "M", " 123456", " ", " x", NULL});
    check_split("gpt-2", "a \t b", (const char *const[]){"a", " \t", " b", NULL});
    /* starcoder / smollm / refact: digits one by one first */
    check_split("smollm", "ab12 c", (const char *const[]){"ab", "1", "2", " c", NULL});
    check_split("starcoder", " 99", (const char *const[]){" ", "9", "9", NULL});
    /* falcon: punctuation runs split first, digits in threes at the end */
    check_split("falcon", "a, 12345", (const char *const[]){"a", ",", " ", "123", "45", NULL});
    check_split("falcon", "12345", (const char *const[]){"123", "45", NULL});
    /* deepseek-coder: newline, letters, punctuation, CJK, digits */
    check_split("deepseek-coder", "ab 12\n\xE4\xBD\xA0\xE5\xA5\xBD!",
                (const char *const[]){"ab", " ", "1", "2", "\n", "\xE4\xBD\xA0\xE5\xA5\xBD", "!", NULL});
    /* deepseek-llm: trailing whitespace of a piece */
    check_split("deepseek-llm", "hi  ", (const char *const[]){"hi", "  ", NULL});
    /* default (no tokenizer.ggml.pre) */
    check_split("default", "a...b 1234", (const char *const[]){"a", "...", "b", " ", "123", "4", NULL});
    size_t *o, n;
    CHECK(tok_pretokenize("no-such-pre", "x", 1, &o, &n) == TS_ERR_UNSUPPORTED);
    CHECK(strstr(ts_last_error(), "no-such-pre") != NULL);
    /* every family compiles */
    const char *all[] = {"default", "gpt-2", "llama-bpe", "dbrx", "chatglm-bpe", "deepseek-llm", "deepseek-coder",
                         "deepseek-v3", "falcon", "starcoder", "refact", "smollm", "qwen2", "qwen35", "bloom", "viking",
                         "tekken", "gpt-4o", "seed-coder", "mpt", "gpt-neox", "command-r", "grok-2", NULL};
    for (int i = 0; all[i]; i++) {
        const char *t = "Hello, World! It's 2024... \xE4\xBD\xA0\xE5\xA5\xBD  \n\tdone";
        ts_status st = tok_pretokenize(all[i], t, strlen(t), &o, &n);
        CHECKF(st == TS_OK, "%s compiles and splits: %s", all[i], ts_last_error());
        if (st == TS_OK) CHECKF(o[0] == 0 && o[n] == strlen(t), "%s covers the text", all[i]);
        free(o);
    }
}

/* ---- behaviours on the real vocabularies ---- */

static void encode_eq(const tok_vocab *v, const char *text, bool add, bool special, const int32_t *want, size_t nw,
                      const char *what) {
    int32_t *ids = NULL;
    size_t n = 0;
    ts_status st = tok_encode(v, text, strlen(text), add, special, &ids, &n);
    bool ok = st == TS_OK && n == nw && (!n || !memcmp(ids, want, n * sizeof *ids));
    if (!ok) {
        print_ids("want", want, nw);
        print_ids("got ", ids, n);
    }
    CHECKF(ok, "%s", what);
    free(ids);
}

static void roundtrip(const tok_vocab *v, const char *text, size_t len, const char *what) {
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tok_encode(v, text, len, false, false, &ids, &n) == TS_OK);
    char *dec = NULL;
    size_t dl = 0;
    CHECK(tok_decode(v, ids, n, TOK_DECODE_STRIP_SPACE, &dec, &dl) == TS_OK);
    CHECKF(dl == len && !memcmp(dec, text, len), "round trip %s (%s)", what, tok_kind_name(v));
    /* streaming gives the same bytes, never splitting a valid character */
    tok_stream s;
    CHECK(tok_stream_init(&s, v, TOK_DECODE_STRIP_SPACE) == TS_OK);
    char *acc = malloc(dl + 16);
    size_t al = 0;
    bool split_ok = true;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = tok_stream_push(&s, ids[i], &l);
        if (al + l > dl + 16) { split_ok = false; break; }
        memcpy(acc + al, p, l);
        al += l;
        /* a valid-UTF-8 text is cut only between characters */
        if (l && al < dl && ((unsigned char)dec[al] & 0xC0) == 0x80) split_ok = false;
    }
    size_t l;
    const char *p = tok_stream_flush(&s, &l);
    if (al + l <= dl + 16) {
        memcpy(acc + al, p, l);
        al += l;
    }
    CHECKF(split_ok && al == dl && !memcmp(acc, dec, dl), "stream %s (%s)", what, tok_kind_name(v));
    tok_stream_free(&s);
    free(acc);
    free(dec);
    free(ids);
}

static const char *k_texts[] = {
    "Hello world",
    " leading space and trailing  ",
    "multi\nline\n\n\ttext\r\n",
    "Ünïcödé: 日本語のテキスト, Ελληνικά, русский, عربى, हिन्दी",
    "emoji 🦙🚀👨‍👩‍👧 and ZWJ",
    "code: for (int i = 0; i < n; i++) { x += a[i] * b[i]; }",
    "numbers 3.14159 1,000,000 2024-01-01",
    "   ",
    "x",
    "",
};

static void test_vocab_behaviour(void) {
    const char *files[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-gpt-2.gguf",
                           "ggml-vocab-mpt.gguf", "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-deepseek-coder.gguf",
                           "ggml-vocab-falcon.gguf", "ggml-vocab-refact.gguf", "ggml-vocab-starcoder.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        tok_vocab *v = load_vocab(files[f]);
        CHECKF(v != NULL, "load %s", files[f]);
        if (!v) continue;
        for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) roundtrip(v, k_texts[i], strlen(k_texts[i]), k_texts[i]);
        /* BOS per add_bos_token */
        int32_t *ids;
        size_t n;
        CHECK(tok_encode(v, "Hi", 2, true, false, &ids, &n) == TS_OK);
        if (tok_add_bos(v)) CHECKF(n >= 1 && ids[0] == tok_bos(v), "%s: BOS first", files[f]);
        else CHECKF(n >= 1 && ids[0] != tok_bos(v), "%s: no BOS", files[f]);
        free(ids);
        CHECK(tok_encode(v, "", 0, true, false, &ids, &n) == TS_OK);
        CHECKF(n == (tok_add_bos(v) ? 1u : 0u) + (tok_add_eos(v) ? 1u : 0u), "%s: empty text with specials", files[f]);
        free(ids);
        /* eos is end-of-generation */
        if (tok_eos(v) >= 0) CHECKF(tok_is_eog(v, tok_eos(v)), "%s: eos is eog", files[f]);
        CHECK(!tok_is_eog(v, -1) && !tok_is_eog(v, tok_n_vocab(v)));
        /* piece access and lookup agree */
        for (int32_t id = 0; id < tok_n_vocab(v); id += 997) {
            size_t pl;
            const char *p = tok_piece(v, id, &pl);
            int32_t back = tok_lookup(v, p, pl);
            CHECKF(pl == 0 || back == id || back < id, "%s: lookup(piece(%d))", files[f], id);
        }
        CHECK(tok_piece(v, -1, &(size_t){0}) == NULL && tok_piece(v, tok_n_vocab(v), &(size_t){0}) == NULL);
        char b[8];
        CHECK(tok_decode_token(v, tok_n_vocab(v) + 5, b, sizeof b) == 0);
        tok_free(v);
    }
}

static void test_spm_details(void) {
    tok_vocab *v = load_vocab("ggml-vocab-llama-spm.gguf");
    CHECK(v != NULL);
    if (!v) return;
    CHECK(tok_get_kind(v) == TOK_KIND_SPM && !strcmp(tok_kind_name(v), "llama"));
    CHECK(tok_bos(v) == 1 && tok_eos(v) == 2 && tok_unk(v) == 0 && tok_add_bos(v) && tok_add_space_prefix(v));
    /* "Hello world" = ▁Hello ▁world with BOS */
    encode_eq(v, "Hello world", true, false, (const int32_t[]){1, 15043, 3186}, 3, "spm Hello world + BOS");
    /* control tokens: literal text unless parse_special */
    {
        size_t pl;
        const char *p = tok_piece(v, 921, &pl);
        CHECK(pl == 4 && !memcmp(p, "\xE2\x96\x81x", 4));
    }
    encode_eq(v, "<s>x", false, true, (const int32_t[]){1, 921}, 2, "spm <s> parsed: space prefix after special");
    {
        int32_t *ids;
        size_t n;
        CHECK(tok_encode(v, "<s>x", 4, false, false, &ids, &n) == TS_OK);
        bool has1 = false;
        for (size_t i = 0; i < n; i++) has1 |= ids[i] == 1;
        CHECKF(!has1, "spm <s> not parsed without parse_special");
        free(ids);
    }
    /* byte fallback: a character with no piece becomes its UTF-8 bytes */
    {
        int32_t *ids;
        size_t n;
        const char *t = "\xF0\x9F\xA6\x99"; /* 🦙 */
        CHECK(tok_encode(v, t, 4, false, false, &ids, &n) == TS_OK);
        /* ▁ then <0xF0><0x9F><0xA6><0x99> = ids 3 + byte */
        CHECKF(n == 5 && ids[1] == 3 + 0xF0 && ids[4] == 3 + 0x99, "spm byte fallback (n=%zu)", n);
        char buf[8];
        CHECK(tok_decode_token(v, ids[1], buf, sizeof buf) == 1 && (unsigned char)buf[0] == 0xF0);
        free(ids);
    }
    /* decode: ▁ -> space, control tokens empty unless asked */
    {
        char *d;
        size_t dl;
        const int32_t seq[] = {1, 15043, 3186, 2};
        CHECK(tok_decode(v, seq, 4, 0, &d, &dl) == TS_OK);
        CHECK(dl == 12 && !memcmp(d, " Hello world", 12));
        free(d);
        CHECK(tok_decode(v, seq, 4, TOK_DECODE_STRIP_SPACE, &d, &dl) == TS_OK);
        CHECK(dl == 11 && !memcmp(d, "Hello world", 11));
        free(d);
        CHECK(tok_decode(v, seq, 4, TOK_DECODE_SPECIAL, &d, &dl) == TS_OK);
        CHECK(dl == 19 && !memcmp(d, "<s> Hello world</s>", 19));
        free(d);
    }
    tok_free(v);

    /* phi-3: control tokens parse when asked, and eat following whitespace */
    v = load_vocab("ggml-vocab-phi-3.gguf");
    CHECK(v != NULL);
    if (!v) return;
    int32_t end = tok_lookup(v, "<|end|>", 7), user = tok_lookup(v, "<|user|>", 8);
    CHECK(end == 32007 && user == 32010);
    CHECK(tok_is_eog(v, end) && tok_is_eog(v, tok_eos(v)) && tok_eot(v) >= 0);
    {
        int32_t *ids;
        size_t n;
        const char *t = "<|user|>\nHi<|end|>\n<|assistant|>";
        CHECK(tok_encode(v, t, strlen(t), true, true, &ids, &n) == TS_OK);
        /* BOS <|user|> ▁Hi <|end|> <|assistant|> (rstrip ate the newlines) */
        CHECKF(n == 5 && ids[0] == 1 && ids[1] == user && ids[3] == end && ids[4] == 32001, "phi-3 chat (n=%zu)", n);
        free(ids);
        CHECK(tok_encode(v, t, strlen(t), false, false, &ids, &n) == TS_OK);
        bool none = true;
        for (size_t i = 0; i < n; i++) none &= ids[i] < 32000;
        CHECKF(none, "phi-3 control tokens are text without parse_special");
        free(ids);
    }
    tok_free(v);
}

static void test_bpe_details(void) {
    tok_vocab *v = load_vocab("ggml-vocab-gpt-2.gguf");
    CHECK(v != NULL);
    if (!v) return;
    CHECK(tok_get_kind(v) == TOK_KIND_BPE && !strcmp(tok_kind_name(v), "gpt2") && !strcmp(tok_pre_name(v), "gpt-2"));
    CHECK(tok_n_vocab(v) == 50257 && tok_eos(v) == 50256 && tok_is_eog(v, 50256));
    encode_eq(v, "Hello world", false, false, (const int32_t[]){15496, 995}, 2, "gpt2 Hello world");
    encode_eq(v, "a<|endoftext|>b", false, true, (const int32_t[]){64, 50256, 65}, 3, "gpt2 special parsed");
    {
        int32_t *ids;
        size_t n;
        CHECK(tok_encode(v, "a<|endoftext|>b", 15, false, false, &ids, &n) == TS_OK);
        bool has = false;
        for (size_t i = 0; i < n; i++) has |= ids[i] == 50256;
        CHECK(!has && n > 3);
        free(ids);
    }
    /* pieces are raw byte-level strings; decoding un-maps them */
    {
        size_t pl;
        const char *p = tok_piece(v, 995, &pl);
        CHECK(pl == 7 && !memcmp(p, "\xC4\xA0world", 7));
        char b[16];
        CHECK(tok_decode_token(v, 995, b, sizeof b) == 6 && !memcmp(b, " world", 6));
        CHECK(tok_decode_token(v, 995, b, 3) == 6 && !memcmp(b, " wo", 3)); /* truncates, reports full size */
        CHECK(tok_decode_token(v, 50256, b, sizeof b) == 0);                /* control: nothing */
    }
    /* streaming: the 4 bytes of 🦙 arrive across tokens, released whole */
    {
        int32_t *ids;
        size_t n;
        const char *t = " this is \xF0\x9F\xA6\x99.cpp";
        CHECK(tok_encode(v, t, strlen(t), false, false, &ids, &n) == TS_OK);
        tok_stream s;
        CHECK(tok_stream_init(&s, v, 0) == TS_OK);
        int pieces_with_llama = 0;
        char acc[64];
        size_t al = 0;
        for (size_t i = 0; i < n; i++) {
            size_t l;
            const char *p = tok_stream_push(&s, ids[i], &l);
            if (l >= 4 && memmem(p, l, "\xF0\x9F\xA6\x99", 4)) pieces_with_llama++;
            for (size_t k = 0; k < l; k++)
                if ((unsigned char)p[k] >= 0x80) CHECK(memmem(p, l, "\xF0\x9F\xA6\x99", 4) != NULL);
            memcpy(acc + al, p, l);
            al += l;
        }
        size_t l;
        tok_stream_flush(&s, &l);
        CHECK(l == 0);
        CHECKF(pieces_with_llama == 1 && al == strlen(t) && !memcmp(acc, t, al), "gpt2 stream holds split emoji");
        tok_stream_free(&s);
        free(ids);
    }
    tok_free(v);
}

static void test_stream_raw(void) {
    /* A truncated character at the end comes out at flush; a byte that can
     * never be valid is passed through at once. */
    tok_vocab *v = load_vocab("ggml-vocab-llama-spm.gguf");
    if (!v) return;
    tok_stream s;
    CHECK(tok_stream_init(&s, v, 0) == TS_OK);
    size_t l;
    const char *p = tok_stream_push(&s, 3 + 0xE6, &l); /* <0xE6>: lead of a 3-byte char */
    CHECK(l == 0);
    p = tok_stream_push(&s, 3 + 0x97, &l);
    CHECK(l == 0);
    p = tok_stream_push(&s, 3 + 0xA5, &l); /* 日 complete */
    CHECK(l == 3 && !memcmp(p, "\xE6\x97\xA5", 3));
    p = tok_stream_push(&s, 3 + 0xFF, &l); /* never valid: passed through */
    CHECK(l == 1 && (unsigned char)p[0] == 0xFF);
    p = tok_stream_push(&s, 3 + 0xE6, &l);
    CHECK(l == 0);
    p = tok_stream_push(&s, 3 + 0x41, &l); /* 'A' breaks the sequence: both out */
    CHECK(l == 2 && (unsigned char)p[0] == 0xE6 && p[1] == 'A');
    p = tok_stream_push(&s, 3 + 0xF0, &l);
    p = tok_stream_push(&s, 3 + 0x9F, &l);
    CHECK(l == 0);
    p = tok_stream_flush(&s, &l);
    CHECK(l == 2 && (unsigned char)p[0] == 0xF0 && (unsigned char)p[1] == 0x9F);
    p = tok_stream_push(&s, -7, &l);
    CHECK(l == 0);
    tok_stream_free(&s);
    tok_free(v);
}

/* ---- adversarial ---- */

/* Can the vocabulary spell byte b on its own (and decode it back)? SPM: a
 * <0xNN> token; byte-level BPE: a normal token for the byte's character.
 * Bytes a vocabulary cannot spell are dropped, as llama.cpp and HF do. */
static bool byte_spellable(const tok_vocab *v, int b) {
    if (tok_get_kind(v) == TOK_KIND_SPM) {
        char hx[8];
        snprintf(hx, sizeof hx, "<0x%02X>", b);
        return tok_lookup(v, hx, 6) >= 0;
    }
    int cp = b, n = 0;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (!printable) {
        for (int c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
        cp = 256 + n;
    }
    char u[3];
    size_t ul = cp < 0x80 ? 1 : 2;
    if (ul == 1) u[0] = (char)cp;
    else { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); }
    int32_t id = tok_lookup(v, u, ul);
    return id >= 0 && (tok_attr(v, id) & TOK_ATTR_NORMAL);
}

static void test_adversarial(void) {
    const char *files[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                           "ggml-vocab-phi-3.gguf", "ggml-vocab-mpt.gguf", "ggml-vocab-falcon.gguf"};
    size_t big = 300000;
    char *buf = malloc(big + 64);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        tok_vocab *v = load_vocab(files[f]);
        if (!v) continue;
        int32_t *ids;
        size_t n;
        /* invalid UTF-8 of every kind, NULs: defined, deterministic, and for
         * byte-level BPE lossless */
        const char bad[] = "a\x80\xBF b\xC0\xAF c\xE0\x80\x80 d\xED\xA0\x80 e\xF4\x90\x80\x80 f\xF8\xFF g\xE2\x82 h\xF0\x9F\xA6"
                           "\x00\x00 i\xC3";
        size_t bl = sizeof bad - 1;
        CHECK(tok_encode(v, bad, bl, true, true, &ids, &n) == TS_OK);
        int32_t *ids2;
        size_t n2;
        CHECK(tok_encode(v, bad, bl, true, true, &ids2, &n2) == TS_OK);
        CHECKF(n == n2 && !memcmp(ids, ids2, n * sizeof *ids), "%s: invalid UTF-8 deterministic", files[f]);
        char *d;
        size_t dl;
        bool all = true;
        for (size_t i = 0; i < bl; i++) all &= byte_spellable(v, (unsigned char)bad[i]);
        CHECK(tok_decode(v, ids, n, TOK_DECODE_STRIP_SPACE, &d, &dl) == TS_OK);
        if (all) CHECKF(dl == bl && !memcmp(d, bad, bl), "%s: invalid UTF-8 survives a round trip", files[f]);
        free(d);
        free(ids);
        free(ids2);
        /* every byte value alone */
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            CHECK(tok_encode(v, &c, 1, false, true, &ids, &n) == TS_OK);
            CHECK(tok_decode(v, ids, n, TOK_DECODE_STRIP_SPACE, &d, &dl) == TS_OK);
            if (byte_spellable(v, b)) CHECKF(dl == 1 && d[0] == c, "%s: byte %02x round trip", files[f], b);
            else CHECKF(dl == 0 || b >= 0x80, "%s: unspellable byte %02x dropped", files[f], b);
            free(d);
            free(ids);
        }
        /* huge runs of one character, one very long word, many newlines */
        const char fills[] = {'a', ' ', '\n', '9', '!', '\t'};
        for (size_t k = 0; k < sizeof fills; k++) {
            memset(buf, fills[k], big);
            /* A merge loop that goes quadratic on one long run is a hang for
             * the user. Judged by growth, not by a wall-clock limit (which a
             * sanitizer build or a loaded machine trips): a quarter of the run
             * first, then the whole; quadratic work grows ~16x, ours ~4x. */
            double t0 = ts_now();
            ts_status st = tok_encode(v, buf, big / 4, false, false, &ids, &n);
            double dq = ts_now() - t0;
            if (st == TS_OK) free(ids);
            t0 = ts_now();
            st = tok_encode(v, buf, big, false, false, &ids, &n);
            double dt = ts_now() - t0;
            CHECKF(st == TS_OK && n > 0, "%s: run of 0x%02x: %s", files[f], fills[k], ts_last_error());
            CHECKF(dt < 10.0 * dq + 0.5, "%s: run of 0x%02x: %.3fs for all, %.3fs for a quarter (quadratic?)", files[f], fills[k], dt, dq);
            if (st == TS_OK) {
                CHECK(tok_decode(v, ids, n, TOK_DECODE_STRIP_SPACE, &d, &dl) == TS_OK);
                CHECKF(dl == big && !memcmp(d, buf, big), "%s: run of 0x%02x round trip", files[f], fills[k]);
                free(d);
            }
            free(ids);
        }
        /* a long multi-byte run (3-byte chars), and an emoji run */
        for (size_t i = 0; i + 3 <= big; i += 3) memcpy(buf + i, "\xE6\x97\xA5", 3);
        CHECK(tok_encode(v, buf, big / 3 * 3, false, false, &ids, &n) == TS_OK);
        free(ids);
        /* all special tokens back to back, parsed and not */
        size_t cap = 1 << 20, o = 0;
        char *sp = malloc(cap);
        size_t n_ctrl = 0;
        for (int32_t id = 0; id < tok_n_vocab(v); id++) {
            if (!(tok_attr(v, id) & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))) continue;
            size_t pl;
            const char *p = tok_piece(v, id, &pl);
            if (o + pl > cap) break;
            memcpy(sp + o, p, pl);
            o += pl;
            n_ctrl++;
        }
        CHECK(tok_encode(v, sp, o, true, true, &ids, &n) == TS_OK);
        CHECKF(n >= 1, "%s: %zu specials back to back", files[f], n_ctrl);
        free(ids);
        CHECK(tok_encode(v, sp, o, true, false, &ids, &n) == TS_OK);
        free(ids);
        free(sp);
        tok_free(v);
    }
    free(buf);
}

/* ---- metadata errors, on hand-made vocabularies ---- */

static tok_vocab *make_vocab(const char *model, const char *pre, bool with_merges, ts_status *st) {
    gguf_writer *w = gguf_writer_new(3, 32);
    const char *toks[] = {"a", "b", "ab", "<s>", "</s>", "\xC4\xA0", "c"};
    int32_t types[] = {1, 1, 1, 3, 3, 1, 1};
    float scores[] = {-1, -2, -0.5f, 0, 0, -3, -4};
    const char *merges[] = {"a b"};
    if (model) gguf_w_str(w, "tokenizer.ggml.model", model);
    if (pre) gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, types, 7);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, scores, 7);
    if (with_merges) gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 3);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 4);
    uint8_t *data;
    uint64_t size;
    CHECK(gguf_writer_to_buffer(w, &data, &size) == TS_OK);
    gguf_writer_free(w);
    gguf_file *f = NULL;
    CHECK(gguf_open_memory(data, size, "mem.gguf", &f) == TS_OK);
    tok_vocab *v = NULL;
    *st = f ? tok_load(f, &v) : TS_ERR_INTERNAL;
    gguf_close(f);
    free(data);
    return v;
}

static void test_metadata_errors(void) {
    ts_status st;
    tok_vocab *v = make_vocab("gpt2", "llama-bpe", true, &st);
    CHECKF(st == TS_OK && v, "hand-made gpt2 vocab: %s", ts_last_error());
    if (v) {
        CHECK(tok_add_bos(v)); /* llama-bpe family default */
        encode_eq(v, "ab", false, false, (const int32_t[]){2}, 1, "merge a b");
        encode_eq(v, "ba", false, false, (const int32_t[]){1, 0}, 2, "no merge b a");
        tok_free(v);
    }
    v = make_vocab("gpt2", "no-such-pre-tokenizer", true, &st);
    CHECK(st == TS_ERR_UNSUPPORTED && !v && strstr(ts_last_error(), "no-such-pre-tokenizer"));
    v = make_vocab("gpt2", "gpt-2", false, &st);
    CHECK(st == TS_ERR_FORMAT && !v && strstr(ts_last_error(), "merges"));
    v = make_vocab("bert", NULL, false, &st);
    CHECK(st == TS_ERR_UNSUPPORTED && !v && strstr(ts_last_error(), "bert"));
    v = make_vocab(NULL, NULL, false, &st);
    CHECK(st == TS_ERR_FORMAT && !v && strstr(ts_last_error(), "tokenizer.ggml.model"));
    v = make_vocab("llama", NULL, false, &st);
    CHECKF(st == TS_OK && v, "hand-made spm vocab: %s", ts_last_error());
    if (v) {
        /* the prefix ▁ has no piece and there are no <0xNN> tokens: each of
         * its 3 bytes becomes <unk>, which defaults to id 0 for SPM */
        encode_eq(v, "ab", false, false, (const int32_t[]){0, 0, 0, 2}, 4, "spm merges a+b");
        tok_free(v);
    }
}

int main(void) {
    test_fixtures();
    test_pretokenizers();
    test_vocab_behaviour();
    test_spm_details();
    test_bpe_details();
    test_stream_raw();
    test_adversarial();
    test_metadata_errors();
    return tu_finish();
}
