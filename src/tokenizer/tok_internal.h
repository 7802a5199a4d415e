/* Private to src/tokenizer: the vocabulary layout shared by loading, encoding
 * and decoding. */
#ifndef TS_TOK_INTERNAL_H
#define TS_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

#define TOK_MAX_REGEX 8

/* Strings table: every vocabulary piece (index = token id) followed by the
 * extra strings BPE merges mention that are not tokens themselves. */
typedef struct tok_strtab {
    char *arena;     /* (arena_len) bytes: each string NUL-terminated */
    size_t arena_len, arena_cap;
    size_t *off;     /* (n + 1) offsets into arena; string i = arena[off[i] .. off[i+1]-1) */
    uint32_t n, cap;
    uint32_t *slot;  /* (mask + 1) open-addressing table of string index + 1; 0 = empty */
    size_t mask;
} tok_strtab;

typedef struct tok_merge {
    uint64_t key;  /* left << 32 | right; UINT64_MAX = empty slot */
    uint32_t rank; /* index in tokenizer.ggml.merges: lower merges first */
    uint32_t res;  /* string index of left+right */
} tok_merge;

/* A node of the special-token trie: finds which special tokens occur in a
 * text in one pass. Children are a sibling list; the root has a byte table. */
typedef struct tok_trie_node {
    uint8_t byte;
    int32_t child;   /* first child node index, -1 none */
    int32_t sibling; /* next sibling, -1 none */
    int32_t token;   /* special-list index ending here, -1 none */
} tok_trie_node;

struct ts_vocab {
    tok_kind kind;
    char model[32];      /* tokenizer.ggml.model */
    char pre[64];        /* tokenizer.ggml.pre in use */
    uint32_t n_vocab;
    tok_strtab st;
    float *score;        /* (n_vocab) */
    uint32_t *attr;      /* (n_vocab) TOK_ATTR_* */

    /* decoded bytes per token: tok_decode_token is a copy */
    char *dec;           /* (dec_off[n_vocab]) bytes */
    size_t *dec_off;     /* (n_vocab + 1) */
    size_t max_dec;      /* longest decoded token */

    /* BPE merges: (left string, right string) -> rank, result string;
     * open addressing, one cache line per probe */
    tok_merge *merge;    /* (mmask + 1) */
    size_t mmask;
    uint32_t n_merges;

    /* BPE: string index of the byte-level character of each byte (UINT32_MAX
     * when the table lacks it). SPM: token of <0xNN> (or the raw byte), -1. */
    uint32_t byte_sym[256];
    int32_t byte_tok[256];

    /* special tokens (CONTROL | USER_DEFINED | UNKNOWN), longest first */
    int32_t *special;    /* (n_special) token ids */
    uint32_t n_special;
    tok_trie_node *trie; /* (n_trie) */
    uint32_t n_trie, cap_trie;
    int32_t trie_root[256];

    int32_t bos, eos, eot, eom, unk, pad, sep;
    bool add_bos, add_eos, add_space_prefix;
    bool ignore_merges;  /* BPE: a pre-token that is a whole token skips merging (llama3) */
    bool spm_split;      /* SPM: no piece has "x▁" with x != ▁, so words merge independently */

    pcre2_code *re[TOK_MAX_REGEX]; /* pre-tokenizer passes, applied in order */
    int n_re;
};

/* strtab */
uint64_t tok_hash(const char *s, size_t n);
int64_t tok_st_find(const tok_strtab *st, const char *s, size_t n); /* -1 if absent */
static inline const char *tok_st_str(const tok_strtab *st, uint32_t i, size_t *len) {
    *len = st->off[i + 1] - st->off[i] - 1;
    return st->arena + st->off[i];
}

/* merges lookup: true and rank/result when (l, r) merges */
bool tok_merge_find(const tok_vocab *v, uint32_t l, uint32_t r, uint32_t *rank, uint32_t *res);

/* pre-tokenizer table */
typedef struct tok_pre_def {
    const char *names;   /* '|'-separated GGUF names */
    const char *regex[TOK_MAX_REGEX];
    bool ignore_merges;
    bool add_bos;        /* default when the file has no add_bos_token */
    bool no_bos;         /* the family has no BOS (chatglm) */
} tok_pre_def;
const tok_pre_def *tok_find_pre(const char *name);
/* Compiles the pass list of def into re[]; returns count or -1 with error set. */
int tok_compile_pre(const tok_pre_def *def, pcre2_code **re);
/* Splits valid UTF-8 [0, len) with the compiled passes: offs gets n+1 offsets. */
ts_status tok_split(pcre2_code *const *re, int n_re, const char *text, size_t len, size_t **offs, size_t *n);

/* Per-call matching state (match data, JIT stack), reused across fragments. */
typedef struct tok_splitter {
    pcre2_code *const *re;
    int n_re;
    pcre2_match_data *md[TOK_MAX_REGEX];
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
} tok_splitter;
ts_status tok_splitter_init(tok_splitter *sp, pcre2_code *const *re, int n_re);
void tok_splitter_free(tok_splitter *sp);
/* Runs the passes over valid UTF-8 text, calling emit for each final piece in order. */
ts_status tok_splitter_run(tok_splitter *sp, const char *text, size_t len,
                           ts_status (*emit)(void *ud, size_t s, size_t e), void *ud);

#endif
