/* Pre-tokenizers for byte-level BPE: the regex passes llama.cpp (and the
 * Hugging Face tokenizer.json files behind it) use for each
 * `tokenizer.ggml.pre` value, run with PCRE2 in UTF + UCP mode.
 *
 * Semantics, as llama.cpp's unicode_regex_split: the passes run in order; each
 * pass splits every piece left by the previous one into its matches AND the
 * unmatched gaps between them (nothing is dropped). A match never looks past
 * the piece it runs on (the piece is the whole PCRE2 subject), so "$" and
 * "(?!\S)" see the piece's end.
 *
 * `\s` / `\S` are rewritten to the Unicode White_Space set that llama.cpp and
 * Python/Rust regex use (PCRE2's UCP \s leaves out U+0085). Patterns with
 * literal non-ASCII characters are written with \x{...} escapes. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define WS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                 \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| " \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                           \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| " \
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* Cased letters of the DeepSeek LLM tokenizer.json (transcribed code points). */
#define RE_DS_LETTERS                                                                                             \
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}"     \
    "\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"        \
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"         \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}" \
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"         \
    "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"           \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}" \
    "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"   \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"  \
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}" \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}" \
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"            \
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
#define RE_CASED_WORDS                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+%s"       \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*%s"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"

static const tok_pre_def k_pre[] = {
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
    {"gpt-2|mpt|olmo|jais|trillion|granite-docling|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|"
     "jina-v1-en|jina-v2-code|roberta-bpe|exaone4|a.x-4.0|mellum|modern-bert|gpt-neox",
     {RE_GPT2}, false, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {RE_LLAMA3}, true, true, false},
    {"dbrx|smaug-bpe", {RE_LLAMA3}, false, false, false},
    {"chatglm-bpe|glm4", {RE_LLAMA3}, false, false, true},
    {"deepseek-llm",
     {"[\\r\\n]", "\\s?[" RE_DS_LETTERS "]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", RE_CJK,
      "\\p{N}+"},
     false, false, false},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false, false, false},
    {"deepseek-v3",
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false, false, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", {"\\p{N}", RE_GPT2}, false, false,
     false},
    {"qwen2|stablelm2|deepseek-r1-qwen|megrez|hunyuan|kormo|f2llmv2|solar-open", {RE_QWEN2}, false, false, false},
    {"qwen35", {RE_QWEN35}, false, false, false},
    {"poro-chat|bloom|gpt3-finnish", {RE_BLOOM}, false, false, false},
    {"viking", {RE_BLOOM, "\\p{N}"}, false, false, false},
    {"tekken", {"@CASED:@|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, true, true, false},
    {"gpt-4o|llama4|kanana2",
     {"@CASED:" RE_CONTRACTIONS "?@|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, false,
     false, false},
    {"seed-coder",
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     false, false, false},
    {"grok-2", {RE_QWEN2}, false, false, false},
};

const tok_pre_def *tok_find_pre(const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        const char *p = k_pre[i].names;
        while (*p) {
            const char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l == nl && !memcmp(p, name, l)) return &k_pre[i];
            p += l + (bar ? 1 : 0);
        }
    }
    return NULL;
}

/* Rewrites \s and \S to the White_Space class and expands the "@CASED:X@"
 * prefix (tekken / gpt-4o cased-word rule, each alternative followed by X).
 * Returns malloc'd, NULL on failure. */
static char *expand_regex(const char *src) {
    char cased[2048];
    const char *tail = src;
    if (!strncmp(src, "@CASED:", 7)) {
        const char *at = strchr(src + 7, '@');
        if (!at) return NULL;
        size_t sl = (size_t)(at - (src + 7));
        char suffix[256];
        if (sl >= sizeof suffix) return NULL;
        memcpy(suffix, src + 7, sl);
        suffix[sl] = 0;
        int w = snprintf(cased, sizeof cased, RE_CASED_WORDS, suffix, suffix);
        if (w < 0 || (size_t)w >= sizeof cased) return NULL;
        tail = at + 1;
    } else {
        cased[0] = 0;
    }
    size_t cap = (strlen(cased) + strlen(tail)) * 2 + 1024;
    for (const char *p = tail; *p; p++)
        if (*p == '\\') cap += sizeof WS + 4;
    for (const char *p = cased; *p; p++)
        if (*p == '\\') cap += sizeof WS + 4;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    const char *parts[2] = {cased, tail};
    bool in_class = false;
    for (int k = 0; k < 2; k++) {
        for (const char *p = parts[k]; *p; p++) {
            if (*p == '\\' && p[1]) {
                if (p[1] == 's' || p[1] == 'S') {
                    const char *pre = in_class ? "" : (p[1] == 's' ? "[" : "[^");
                    const char *post = in_class ? "" : "]";
                    if (in_class && p[1] == 'S') { free(out); return NULL; } /* not needed by any pattern */
                    o += (size_t)sprintf(out + o, "%s%s%s", pre, WS, post);
                } else {
                    out[o++] = p[0];
                    out[o++] = p[1];
                }
                p++;
                continue;
            }
            if (*p == '[' && !in_class) in_class = true;
            else if (*p == ']' && in_class) in_class = false;
            out[o++] = *p;
        }
    }
    out[o] = 0;
    return out;
}

int tok_compile_pre(const tok_pre_def *def, pcre2_code **re) {
    int n = 0;
    for (; n < TOK_MAX_REGEX && def->regex[n]; n++) {
        char *pat = expand_regex(def->regex[n]);
        if (!pat) {
            for (int j = 0; j < n; j++) pcre2_code_free(re[j]);
            ts_fail(TS_ERR_INTERNAL, "pre-tokenizer '%s': bad pattern %d", def->names, n);
            return -1;
        }
        int err = 0;
        PCRE2_SIZE eoff = 0;
        re[n] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                              &err, &eoff, NULL);
        free(pat);
        if (!re[n]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            for (int j = 0; j < n; j++) pcre2_code_free(re[j]);
            ts_fail(TS_ERR_INTERNAL, "pre-tokenizer '%s': regex %d does not compile at %zu: %s", def->names, n,
                    (size_t)eoff, (const char *)msg);
            return -1;
        }
        /* JIT is an optimisation only: the interpreter gives the same result. */
        (void)pcre2_jit_compile(re[n], PCRE2_JIT_COMPLETE);
    }
    return n;
}

/* ---- splitting ---- */

typedef struct split_ctx {
    tok_splitter *sp;
    const char *text;
    ts_status (*emit)(void *ud, size_t s, size_t e);
    void *ud;
} split_ctx;

static ts_status split_rec(split_ctx *c, int level, size_t s, size_t e) {
    tok_splitter *sp = c->sp;
    if (level == sp->n_re) return c->emit(c->ud, s, e);
    const PCRE2_SPTR subj = (PCRE2_SPTR)(c->text + s);
    const size_t n = e - s;
    size_t pos = 0, prev = 0;
    ts_status st;
    while (pos < n) {
        int rc = pcre2_match(sp->re[level], subj, n, pos, PCRE2_NO_UTF_CHECK, sp->md[level], sp->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ts_fail(TS_ERR_LIMIT, "pre-tokenizer regex failed: %s", (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sp->md[level]);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: step one character, as a regex iterator would */
            pos = ms + 1;
            while (pos < n && (subj[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (ms > prev && (st = split_rec(c, level + 1, s + prev, s + ms))) return st;
        if ((st = split_rec(c, level + 1, s + ms, s + me))) return st;
        prev = pos = me;
    }
    if (prev < n && (st = split_rec(c, level + 1, s + prev, e))) return st;
    return TS_OK;
}

ts_status tok_splitter_init(tok_splitter *sp, pcre2_code *const *re, int n_re) {
    memset(sp, 0, sizeof *sp);
    sp->re = re;
    sp->n_re = n_re;
    for (int i = 0; i < n_re; i++) {
        sp->md[i] = pcre2_match_data_create_from_pattern(re[i], NULL);
        if (!sp->md[i]) goto oom;
    }
    /* Long runs of one class can need more JIT stack than the 32 KiB default. */
    sp->mctx = pcre2_match_context_create(NULL);
    sp->jstack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
    if (!sp->mctx || !sp->jstack) goto oom;
    pcre2_jit_stack_assign(sp->mctx, NULL, sp->jstack);
    return TS_OK;
oom:
    tok_splitter_free(sp);
    return ts_fail(TS_ERR_NOMEM, "out of memory (regex match data)");
}

void tok_splitter_free(tok_splitter *sp) {
    for (int i = 0; i < sp->n_re; i++) pcre2_match_data_free(sp->md[i]);
    pcre2_jit_stack_free(sp->jstack);
    pcre2_match_context_free(sp->mctx);
    memset(sp, 0, sizeof *sp);
}

ts_status tok_splitter_run(tok_splitter *sp, const char *text, size_t len,
                           ts_status (*emit)(void *ud, size_t s, size_t e), void *ud) {
    if (len == 0) return TS_OK;
    split_ctx c = {.sp = sp, .text = text, .emit = emit, .ud = ud};
    return split_rec(&c, 0, 0, len);
}

typedef struct offs_acc {
    size_t *v;
    size_t n, cap;
} offs_acc;

static ts_status offs_push(void *ud, size_t s, size_t e) {
    offs_acc *a = ud;
    (void)s;
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        size_t *nv = ts_realloc(a->v, nc * sizeof *nv);
        if (!nv) return TS_ERR_NOMEM;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = e;
    return TS_OK;
}

ts_status tok_split(pcre2_code *const *re, int n_re, const char *text, size_t len, size_t **offs, size_t *n) {
    offs_acc a = {0};
    *offs = NULL;
    *n = 0;
    tok_splitter sp;
    ts_status st = offs_push(&a, 0, 0);
    if (!st) st = tok_splitter_init(&sp, re, n_re);
    if (!st) {
        st = tok_splitter_run(&sp, text, len, offs_push, &a);
        tok_splitter_free(&sp);
    }
    if (st) { free(a.v); return st; }
    *offs = a.v;
    *n = a.n - 1;
    return TS_OK;
}

ts_status tok_pretokenize(const char *pre_name, const char *text, size_t len, size_t **offs, size_t *n) {
    *offs = NULL;
    *n = 0;
    const tok_pre_def *d = tok_find_pre(pre_name);
    if (!d) return ts_fail(TS_ERR_UNSUPPORTED, "unknown pre-tokenizer '%s'", pre_name);
    for (size_t i = 0; i < len;) {
        size_t l = ts_utf8_len((const unsigned char *)text + i, len - i);
        if (!l) return ts_fail(TS_ERR_ARG, "tok_pretokenize: invalid UTF-8 at byte %zu", i);
        i += l;
    }
    pcre2_code *re[TOK_MAX_REGEX];
    int nre = tok_compile_pre(d, re);
    if (nre < 0) return TS_ERR_INTERNAL;
    ts_status st = tok_split(re, nre, text, len, offs, n);
    for (int i = 0; i < nre; i++) pcre2_code_free(re[i]);
    return st;
}
