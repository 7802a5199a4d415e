/* Building a tok_vocab from GGUF metadata: pieces, scores, types, merges,
 * special ids and flags, end-of-generation set, special-token trie, decoded
 * bytes per token. Mirrors llama.cpp's llama_vocab::impl::load for the SPM
 * ("llama") and byte-level BPE ("gpt2") models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ---- hashing and the strings table ---- */

uint64_t tok_hash(const char *s, size_t n) {
    /* FNV-1a over 8-byte words, then a final mix: keys are short. */
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9E3779B97F4A7C15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

int64_t tok_st_find(const tok_strtab *st, const char *s, size_t n) {
    if (!st->slot) return -1;
    size_t i = tok_hash(s, n) & st->mask;
    for (;;) {
        uint32_t e = st->slot[i];
        if (!e) return -1;
        size_t len;
        const char *p = tok_st_str(st, e - 1, &len);
        if (len == n && !memcmp(p, s, n)) return e - 1;
        i = (i + 1) & st->mask;
    }
}

static bool st_rehash(tok_strtab *st, size_t nslots) {
    uint32_t *slot = ts_calloc(nslots, sizeof *slot);
    if (!slot) return false;
    free(st->slot);
    st->slot = slot;
    st->mask = nslots - 1;
    for (uint32_t k = 0; k < st->n; k++) {
        size_t len;
        const char *p = tok_st_str(st, k, &len);
        if (len == 0) continue;
        size_t i = tok_hash(p, len) & st->mask;
        while (st->slot[i]) i = (i + 1) & st->mask; /* in id order: the first duplicate is found first */
        st->slot[i] = k + 1;
    }
    return true;
}

/* Appends a string (even if an equal one exists: vocab ids must stay dense)
 * and indexes it unless an equal string is indexed already (the first id
 * wins). Empty strings are never indexed: nothing should match them. */
static bool st_append(tok_strtab *st, const char *s, size_t n) {
    if (st->n + 1 >= st->cap) {
        uint32_t nc = st->cap ? st->cap * 2 : 1024;
        size_t *no = ts_realloc(st->off, ((size_t)nc + 1) * sizeof *no);
        if (!no) return false;
        st->off = no;
        st->cap = nc;
    }
    if (st->arena_len + n + 1 > st->arena_cap) {
        size_t nc = st->arena_cap ? st->arena_cap * 2 : 65536;
        while (nc < st->arena_len + n + 1) nc *= 2;
        char *na = ts_realloc(st->arena, nc);
        if (!na) return false;
        st->arena = na;
        st->arena_cap = nc;
    }
    if (st->n == 0) st->off[0] = 0;
    if (n) memcpy(st->arena + st->arena_len, s, n);
    st->arena[st->arena_len + n] = 0;
    st->arena_len += n + 1;
    st->off[st->n + 1] = st->arena_len;
    st->n++;
    if ((size_t)st->n * 2 > (st->slot ? st->mask + 1 : 0)) {
        size_t ns = 1024;
        while (ns < (size_t)st->n * 4) ns *= 2;
        return st_rehash(st, ns);
    }
    if (n > 0 && tok_st_find(st, s, n) < 0) {
        size_t i = tok_hash(s, n) & st->mask;
        while (st->slot[i]) i = (i + 1) & st->mask;
        st->slot[i] = st->n;
    }
    return true;
}

/* Index of s, adding it (as a non-token string) if absent; UINT32_MAX on OOM. */
static uint32_t st_intern(tok_strtab *st, const char *s, size_t n) {
    int64_t f = tok_st_find(st, s, n);
    if (f >= 0) return (uint32_t)f;
    if (!st_append(st, s, n)) return UINT32_MAX;
    return st->n - 1;
}

static void st_free(tok_strtab *st) {
    free(st->arena);
    free(st->off);
    free(st->slot);
}

/* ---- merges ---- */

static uint64_t mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

bool tok_merge_find(const tok_vocab *v, uint32_t l, uint32_t r, uint32_t *rank, uint32_t *res) {
    if (!v->merge) return false;
    uint64_t key = (uint64_t)l << 32 | r;
    size_t i = mix64(key) & v->mmask;
    for (;;) {
        const tok_merge *m = &v->merge[i];
        if (m->key == UINT64_MAX) return false;
        if (m->key == key) {
            *rank = m->rank;
            *res = m->res;
            return true;
        }
        i = (i + 1) & v->mmask;
    }
}

static ts_status load_merges(tok_vocab *v, const gguf_file *f, const gguf_array *m) {
    size_t nslots = 1024;
    while (nslots < m->n * 2 + 2) nslots *= 2;
    v->merge = ts_malloc(nslots * sizeof *v->merge);
    if (!v->merge) return TS_ERR_NOMEM;
    for (size_t i = 0; i < nslots; i++) v->merge[i].key = UINT64_MAX;
    v->mmask = nslots - 1;
    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint64_t r = 0; r < m->n; r++) {
        gguf_str s = m->strs[r];
        /* "left right": split at the first space after the first byte, as
         * llama.cpp does; entries without one can never apply. */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue;
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        uint32_t li = st_intern(&v->st, s.ptr, ll);
        uint32_t ri = st_intern(&v->st, sp + 1, rl);
        if (ll + rl + 1 > tmp_cap) {
            tmp_cap = (ll + rl + 1) * 2;
            char *nt = ts_realloc(tmp, tmp_cap);
            if (!nt) { free(tmp); return TS_ERR_NOMEM; }
            tmp = nt;
        }
        memcpy(tmp, s.ptr, ll);
        memcpy(tmp + ll, sp + 1, rl);
        uint32_t res = st_intern(&v->st, tmp, ll + rl);
        if (li == UINT32_MAX || ri == UINT32_MAX || res == UINT32_MAX) { free(tmp); return TS_ERR_NOMEM; }
        uint64_t key = (uint64_t)li << 32 | ri;
        size_t i = mix64(key) & v->mmask;
        while (v->merge[i].key != UINT64_MAX && v->merge[i].key != key) i = (i + 1) & v->mmask;
        if (v->merge[i].key == key) continue; /* a repeated pair keeps its first (best) rank */
        v->merge[i] = (tok_merge){key, (uint32_t)r, res};
        v->n_merges++;
    }
    free(tmp);
    (void)f;
    return TS_OK;
}

/* ---- GPT-2 byte <-> unicode ---- */

/* The printable bytes map to themselves; the rest to U+0100 + n in order. */
static uint32_t byte_to_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

static size_t cp_to_utf8(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- decoded bytes per token ---- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "<0xNN>" -> NN, else -1 */
static int byte_piece(const char *p, size_t n) {
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>') return -1;
    int h = hexval(p[3]), l = hexval(p[4]);
    return (h < 0 || l < 0) ? -1 : h * 16 + l;
}

static ts_status build_decoded(tok_vocab *v) {
    int cp_to_byte[512];
    for (int i = 0; i < 512; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) cp_to_byte[byte_to_cp(b)] = b;
    size_t total = 0;
    for (uint32_t i = 0; i < v->n_vocab; i++) total += v->st.off[i + 1] - v->st.off[i];
    v->dec = ts_malloc(total + 1);
    v->dec_off = ts_malloc(((size_t)v->n_vocab + 1) * sizeof *v->dec_off);
    if (!v->dec || !v->dec_off) return TS_ERR_NOMEM;
    size_t o = 0;
    for (uint32_t id = 0; id < v->n_vocab; id++) {
        v->dec_off[id] = o;
        size_t n;
        const char *p = tok_st_str(&v->st, id, &n);
        uint32_t a = v->attr[id];
        if (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN)) {
            /* rendered only with TOK_DECODE_SPECIAL, from the piece itself */
        } else if (a & TOK_ATTR_USER_DEFINED) {
            memcpy(v->dec + o, p, n);
            o += n;
        } else if (a & TOK_ATTR_BYTE) {
            int b = byte_piece(p, n);
            if (b >= 0) v->dec[o++] = (char)b;
        } else if (a & TOK_ATTR_NORMAL) {
            if (v->kind == TOK_KIND_SPM) {
                for (size_t i = 0; i < n;) {
                    if (i + 3 <= n && !memcmp(p + i, "\xE2\x96\x81", 3)) {
                        v->dec[o++] = ' ';
                        i += 3;
                    } else {
                        v->dec[o++] = p[i++];
                    }
                }
            } else {
                /* byte-level: each character is one byte; characters outside
                 * the table (hand-made vocabularies) are kept as UTF-8 */
                for (size_t i = 0; i < n;) {
                    size_t l = ts_utf8_len((const unsigned char *)p + i, n - i);
                    if (!l) { v->dec[o++] = p[i++]; continue; }
                    uint32_t cp = ts_utf8_cp((const unsigned char *)p + i, l);
                    if (cp < 512 && cp_to_byte[cp] >= 0) v->dec[o++] = (char)cp_to_byte[cp];
                    else { memcpy(v->dec + o, p + i, l); o += l; }
                    i += l;
                }
            }
        }
        size_t dl = o - v->dec_off[id];
        if (dl > v->max_dec) v->max_dec = dl;
        if (n > v->max_dec) v->max_dec = n; /* TOK_DECODE_SPECIAL renders the piece */
    }
    v->dec_off[v->n_vocab] = o;
    return TS_OK;
}

/* ---- special tokens ---- */

static const tok_vocab *cmp_vocab;
static int special_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx = cmp_vocab->st.off[x + 1] - cmp_vocab->st.off[x];
    size_t ly = cmp_vocab->st.off[y + 1] - cmp_vocab->st.off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool trie_add(tok_vocab *v, const char *s, size_t n, int32_t idx) {
    int32_t parent = -1, cur = -1;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        if (parent < 0) {
            cur = v->trie_root[b];
        } else {
            cur = v->trie[parent].child;
            while (cur >= 0 && v->trie[cur].byte != b) cur = v->trie[cur].sibling;
        }
        if (cur < 0) {
            if (v->n_trie == v->cap_trie) {
                uint32_t nc = v->cap_trie ? v->cap_trie * 2 : 256;
                tok_trie_node *nt = ts_realloc(v->trie, nc * sizeof *nt);
                if (!nt) return false;
                v->trie = nt;
                v->cap_trie = nc;
            }
            cur = (int32_t)v->n_trie++;
            v->trie[cur] = (tok_trie_node){.byte = b, .child = -1, .sibling = parent < 0 ? -1 : v->trie[parent].child, .token = -1};
            if (parent < 0) v->trie_root[b] = cur;
            else v->trie[parent].child = cur;
        }
        parent = cur;
    }
    if (cur >= 0 && v->trie[cur].token < 0) v->trie[cur].token = idx;
    return true;
}

static bool piece_is(const tok_vocab *v, uint32_t id, const char *s) {
    size_t n;
    const char *p = tok_st_str(&v->st, id, &n);
    return n == strlen(s) && !memcmp(p, s, n);
}

static bool piece_in(const tok_vocab *v, uint32_t id, const char *const *list) {
    for (; *list; list++)
        if (piece_is(v, id, *list)) return true;
    return false;
}

static const char *const k_eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                          "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                          "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          "<end_of_utterance>", NULL};
static const char *const k_eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                          "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                          "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                          "<turn|>", "<|tool_response>",
                                          "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                          NULL};
static const char *const k_fim_eog_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>",
                                              "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
                                              NULL};

static void set_eog(tok_vocab *v, const int32_t fim_ids[3]) {
    /* EOT / EOM found by text when the file does not name them */
    for (uint32_t id = 0; id < v->n_vocab && v->eot < 0; id++)
        if (piece_in(v, id, k_eot_texts)) v->eot = (int32_t)id;
    for (uint32_t id = 0; id < v->n_vocab && v->eom < 0; id++)
        if (piece_is(v, id, "<|eom_id|>")) v->eom = (int32_t)id;
    bool fim_seen[3]; /* pad, repo, sep: the file's id, else the first match by text */
    for (int k = 0; k < 3; k++) {
        fim_seen[k] = fim_ids[k] >= 0;
        if (fim_ids[k] >= 0) v->attr[fim_ids[k]] |= TOK_ATTR_EOG;
    }
    for (uint32_t id = 0; id < v->n_vocab; id++) {
        int kind = -1;
        for (int k = 0; k_fim_eog_texts[k]; k++)
            if (piece_is(v, id, k_fim_eog_texts[k])) kind = k < 5 ? 0 : k < 10 ? 1 : 2;
        if (kind >= 0 && !fim_seen[kind]) {
            fim_seen[kind] = true;
            v->attr[id] |= TOK_ATTR_EOG | TOK_ATTR_CONTROL;
        }
        if (piece_in(v, id, k_eog_texts)) v->attr[id] |= TOK_ATTR_EOG | TOK_ATTR_CONTROL;
    }
    if (v->eot >= 0) v->attr[v->eot] |= TOK_ATTR_CONTROL;
    /* gpt-oss always renders these */
    static const char *const k_user[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (uint32_t id = 0; id < v->n_vocab; id++)
        if (piece_in(v, id, k_user)) v->attr[id] = (v->attr[id] & TOK_ATTR_EOG) | TOK_ATTR_USER_DEFINED;
    if (v->eos >= 0) v->attr[v->eos] |= TOK_ATTR_EOG;
    if (v->eot >= 0) v->attr[v->eot] |= TOK_ATTR_EOG;
    if (v->eom >= 0) v->attr[v->eom] |= TOK_ATTR_EOG;
    /* o200k_harmony / solar-open: "<|end|>" is not the end there */
    int32_t has_return = -1, has_call = -1, has_flush = -1, end_id = -1, tool_resp = -1, s_id = -1;
    for (uint32_t id = 0; id < v->n_vocab; id++) {
        if (!(v->attr[id] & TOK_ATTR_EOG)) continue;
        if (piece_is(v, id, "<|return|>")) has_return = 1;
        else if (piece_is(v, id, "<|call|>") || piece_is(v, id, "<|calls|>")) has_call = 1;
        else if (piece_is(v, id, "<|flush|>")) has_flush = 1;
        else if (piece_is(v, id, "<|end|>")) end_id = (int32_t)id;
        else if (piece_is(v, id, "<|tool_response>")) tool_resp = 1;
        else if (piece_is(v, id, "</s>")) s_id = (int32_t)id;
    }
    if (end_id >= 0 && has_call > 0 && (has_return > 0 || has_flush > 0)) v->attr[end_id] = TOK_ATTR_USER_DEFINED;
    if (tool_resp > 0 && s_id >= 0) v->attr[s_id] = TOK_ATTR_NORMAL;
}

static ts_status build_specials(tok_vocab *v, const gguf_file *f) {
    uint32_t n = 0;
    for (uint32_t id = 0; id < v->n_vocab; id++)
        if ((v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) &&
            v->st.off[id + 1] - v->st.off[id] > 1) /* an empty piece can never be matched */
            n++;
    v->special = ts_malloc((n ? n : 1) * sizeof *v->special);
    if (!v->special) return TS_ERR_NOMEM;
    n = 0;
    for (uint32_t id = 0; id < v->n_vocab; id++)
        if ((v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) &&
            v->st.off[id + 1] - v->st.off[id] > 1)
            v->special[n++] = (int32_t)id;
    v->n_special = n;
    cmp_vocab = v; /* qsort has no context argument; loading is not hot */
    qsort(v->special, n, sizeof *v->special, special_cmp);
    for (int b = 0; b < 256; b++) v->trie_root[b] = -1;
    for (uint32_t i = 0; i < n; i++) {
        size_t len;
        const char *p = tok_st_str(&v->st, (uint32_t)v->special[i], &len);
        if (!trie_add(v, p, len, (int32_t)i)) return TS_ERR_NOMEM;
    }
    /* Phi-3 (by general.name, as llama.cpp): special tokens eat the
     * whitespace after them, except <unk>, <s>, <|endoftext|>. */
    gguf_str name;
    if (gguf_get_str(f, "general.name", &name) == GGUF_GET_OK) {
        char low[128];
        size_t l = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
        for (size_t i = 0; i < l; i++) low[i] = (char)((name.ptr[i] >= 'A' && name.ptr[i] <= 'Z') ? name.ptr[i] + 32 : name.ptr[i]);
        low[l] = 0;
        if (strstr(low, "phi-3") || strstr(low, "phi3")) {
            for (uint32_t i = 0; i < n; i++) v->attr[v->special[i]] |= TOK_ATTR_RSTRIP;
            for (uint32_t id = 0; id < v->n_vocab; id++) {
                if (piece_is(v, id, "</s>")) v->attr[id] |= TOK_ATTR_RSTRIP;
                if (piece_is(v, id, "<unk>") || piece_is(v, id, "<s>") || piece_is(v, id, "<|endoftext|>"))
                    v->attr[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
            }
        }
    }
    return TS_OK;
}

/* ---- load ---- */

static ts_status fmt_err(const gguf_file *f, ts_status st, const char *msg, const char *key) {
    return ts_fail(st, "%s: %s%s%s", f->path ? f->path : "gguf", msg, key ? " " : "", key ? key : "");
}

/* An optional token id: missing keeps *id; out of range ignored as llama.cpp. */
static ts_status get_id(const gguf_file *f, const char *key, uint32_t n_vocab, int32_t *id) {
    uint32_t v;
    gguf_get_result r = gguf_get_u32(f, key, &v);
    if (r == GGUF_GET_MISSING) return TS_OK;
    if (r == GGUF_GET_WRONG_TYPE) {
        int32_t s;
        ts_clear_error();
        if (gguf_get_i32(f, key, &s) == GGUF_GET_OK && s < 0) { *id = TOK_NULL; return TS_OK; }
        return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", key);
    }
    if (v < n_vocab) *id = (int32_t)v;
    return TS_OK;
}

static ts_status get_flag(const gguf_file *f, const char *key, bool *out) {
    gguf_get_result r = gguf_get_bool(f, key, out);
    if (r == GGUF_GET_WRONG_TYPE) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", key);
    return TS_OK;
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    st_free(&v->st);
    free(v->score);
    free(v->attr);
    free(v->dec);
    free(v->dec_off);
    free(v->merge);
    free(v->special);
    free(v->trie);
    for (int i = 0; i < v->n_re; i++) pcre2_code_free(v->re[i]);
    free(v);
}

static ts_status load(tok_vocab *v, const gguf_file *f) {
    ts_status st;
    gguf_str model;
    gguf_get_result r = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (r == GGUF_GET_MISSING) return fmt_err(f, TS_ERR_FORMAT, "no tokenizer: missing key", "tokenizer.ggml.model");
    if (r != GGUF_GET_OK) return fmt_err(f, TS_ERR_FORMAT, "bad type for", "tokenizer.ggml.model");
    if (gguf_str_eq(model, "llama")) v->kind = TOK_KIND_SPM;
    else if (gguf_str_eq(model, "gpt2")) v->kind = TOK_KIND_BPE;
    else {
        char m[64];
        size_t l = model.len < sizeof m - 1 ? model.len : sizeof m - 1;
        memcpy(m, model.ptr, l);
        m[l] = 0;
        for (size_t i = 0; i < l; i++)
            if ((unsigned char)m[i] < 0x20 || (unsigned char)m[i] >= 0x7F) m[i] = '?';
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: unsupported tokenizer model '%s' (supported: llama, gpt2)",
                       f->path ? f->path : "gguf", m);
    }
    snprintf(v->model, sizeof v->model, "%s", v->kind == TOK_KIND_SPM ? "llama" : "gpt2");

    const gguf_array *toks;
    r = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks);
    if (r == GGUF_GET_MISSING) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: missing key", "tokenizer.ggml.tokens");
    if (r != GGUF_GET_OK) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", "tokenizer.ggml.tokens");
    if (toks->n == 0) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: empty", "tokenizer.ggml.tokens");
    if (toks->n >= (1u << 30)) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: too many tokens in", "tokenizer.ggml.tokens");
    v->n_vocab = (uint32_t)toks->n;

    const gguf_array *scores = NULL, *types = NULL, *merges = NULL;
    r = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_COUNT, &scores);
    if (r == GGUF_GET_WRONG_TYPE) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", "tokenizer.ggml.scores");
    if (r == GGUF_GET_OK && ((scores->type != GGUF_VT_FLOAT32 && scores->type != GGUF_VT_INT32) || scores->n < toks->n))
        return fmt_err(f, TS_ERR_FORMAT, "tokenizer: wrong type or count for", "tokenizer.ggml.scores");
    if (r != GGUF_GET_OK) scores = NULL;
    r = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_COUNT, &types);
    if (r == GGUF_GET_WRONG_TYPE) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", "tokenizer.ggml.token_type");
    if (r == GGUF_GET_OK && ((types->type != GGUF_VT_INT32 && types->type != GGUF_VT_UINT32) || types->n < toks->n))
        return fmt_err(f, TS_ERR_FORMAT, "tokenizer: wrong type or count for", "tokenizer.ggml.token_type");
    if (r != GGUF_GET_OK) types = NULL;

    v->score = ts_malloc((size_t)v->n_vocab * sizeof *v->score);
    v->attr = ts_malloc((size_t)v->n_vocab * sizeof *v->attr);
    if (!v->score || !v->attr) return TS_ERR_NOMEM;
    for (uint32_t i = 0; i < v->n_vocab; i++) {
        gguf_str s = toks->strs[i];
        if (!st_append(&v->st, s.ptr, s.len)) return TS_ERR_NOMEM;
        v->score[i] = !scores ? 0.0f : scores->type == GGUF_VT_FLOAT32 ? gguf_arr_f32(scores, i)
                                                                      : (float)gguf_arr_i32(scores, i);
        uint32_t a = TOK_ATTR_NORMAL;
        if (types) {
            switch (gguf_arr_i32(types, i)) {
            case TOK_TYPE_UNKNOWN: a = TOK_ATTR_UNKNOWN; break;
            case TOK_TYPE_UNUSED: a = TOK_ATTR_UNUSED; break;
            case TOK_TYPE_NORMAL: a = TOK_ATTR_NORMAL; break;
            case TOK_TYPE_CONTROL: a = TOK_ATTR_CONTROL; break;
            case TOK_TYPE_USER_DEFINED: a = TOK_ATTR_USER_DEFINED; break;
            case TOK_TYPE_BYTE: a = TOK_ATTR_BYTE; break;
            default: a = 0; break;
            }
        }
        v->attr[i] = a;
    }

    /* per-model defaults, then the file's keys (llama.cpp order) */
    v->eot = v->eom = v->pad = v->sep = TOK_NULL;
    const tok_pre_def *pre = NULL;
    if (v->kind == TOK_KIND_SPM) {
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
        snprintf(v->pre, sizeof v->pre, "default");
    } else {
        v->bos = 11;
        v->eos = 11;
        v->unk = TOK_NULL;
        gguf_str p;
        r = gguf_get_str(f, "tokenizer.ggml.pre", &p);
        if (r == GGUF_GET_WRONG_TYPE) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", "tokenizer.ggml.pre");
        char name[64] = "default"; /* missing: llama.cpp's default, with its warning */
        if (r == GGUF_GET_OK) {
            size_t l = p.len < sizeof name - 1 ? p.len : sizeof name - 1;
            memcpy(name, p.ptr, l);
            name[l] = 0;
            if (l != p.len || memchr(name, 0, l)) name[0] = '?';
        }
        pre = tok_find_pre(name);
        if (!pre) {
            for (char *c = name; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7F) *c = '?';
            return ts_fail(TS_ERR_UNSUPPORTED, "%s: unknown pre-tokenizer '%s' (tokenizer.ggml.pre)",
                           f->path ? f->path : "gguf", name);
        }
        snprintf(v->pre, sizeof v->pre, "%s", name);
        v->ignore_merges = pre->ignore_merges;
        v->add_bos = pre->add_bos;
        if (pre->no_bos) v->bos = TOK_NULL;
        r = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, &merges);
        if (r == GGUF_GET_MISSING) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: missing key", "tokenizer.ggml.merges");
        if (r != GGUF_GET_OK) return fmt_err(f, TS_ERR_FORMAT, "tokenizer: bad type for", "tokenizer.ggml.merges");
    }
    if ((st = get_flag(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix))) return st;
    if (v->bos >= (int32_t)v->n_vocab) v->bos = TOK_NULL;
    if (v->eos >= (int32_t)v->n_vocab) v->eos = TOK_NULL;
    if (v->unk >= (int32_t)v->n_vocab) v->unk = TOK_NULL;
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", v->n_vocab, &v->bos)) ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", v->n_vocab, &v->eos)) ||
        (st = get_id(f, "tokenizer.ggml.eot_token_id", v->n_vocab, &v->eot)) ||
        (st = get_id(f, "tokenizer.ggml.eom_token_id", v->n_vocab, &v->eom)) ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", v->n_vocab, &v->unk)) ||
        (st = get_id(f, "tokenizer.ggml.seperator_token_id", v->n_vocab, &v->sep)) ||
        (st = get_id(f, "tokenizer.ggml.padding_token_id", v->n_vocab, &v->pad)))
        return st;
    if ((st = get_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos)) ||
        (st = get_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos)))
        return st;
    if (v->add_bos && v->bos < 0)
        return fmt_err(f, TS_ERR_FORMAT, "tokenizer: add_bos_token is true but there is no valid", "tokenizer.ggml.bos_token_id");
    if (v->add_eos && v->eos < 0)
        return fmt_err(f, TS_ERR_FORMAT, "tokenizer: add_eos_token is true but there is no valid", "tokenizer.ggml.eos_token_id");

    if (merges && (st = load_merges(v, f, merges))) return st;

    /* byte tables */
    for (int b = 0; b < 256; b++) {
        v->byte_sym[b] = UINT32_MAX;
        v->byte_tok[b] = TOK_NULL;
        if (v->kind == TOK_KIND_BPE) {
            char u[4];
            size_t l = cp_to_utf8(byte_to_cp(b), u);
            int64_t k = tok_st_find(&v->st, u, l);
            if (k >= 0) v->byte_sym[b] = (uint32_t)k;
        } else {
            char hx[7];
            snprintf(hx, sizeof hx, "<0x%02X>", b);
            int64_t k = tok_st_find(&v->st, hx, 6);
            if (k < 0) {
                char c = (char)b;
                k = tok_st_find(&v->st, &c, 1);
            }
            if (k >= 0 && k < v->n_vocab) v->byte_tok[b] = (int32_t)k;
        }
    }
    if (v->kind == TOK_KIND_SPM) {
        /* If no piece contains U+2581 after another character, no merge can
         * cross the start of a word, so words can be merged one at a time. */
        v->spm_split = true;
        for (uint32_t id = 0; id < v->n_vocab && v->spm_split; id++) {
            size_t n;
            const char *p = tok_st_str(&v->st, id, &n);
            for (size_t i = 1; i + 3 <= n; i++)
                if (!memcmp(p + i, "\xE2\x96\x81", 3) && (i < 3 || memcmp(p + i - 3, "\xE2\x96\x81", 3))) {
                    v->spm_split = false;
                    break;
                }
        }
    }
    if (pre) {
        v->n_re = tok_compile_pre(pre, v->re);
        if (v->n_re < 0) { v->n_re = 0; return TS_ERR_INTERNAL; }
    }
    int32_t fim[3] = {TOK_NULL, TOK_NULL, TOK_NULL};
    if ((st = get_id(f, "tokenizer.ggml.fim_pad_token_id", v->n_vocab, &fim[0])) ||
        (st = get_id(f, "tokenizer.ggml.fim_rep_token_id", v->n_vocab, &fim[1])) ||
        (st = get_id(f, "tokenizer.ggml.fim_sep_token_id", v->n_vocab, &fim[2])))
        return st;
    set_eog(v, fim);
    if ((st = build_specials(v, f))) return st;
    if ((st = build_decoded(v))) return st;
    return TS_OK;
}

ts_status tok_load(const gguf_file *f, tok_vocab **out) {
    *out = NULL;
    tok_vocab *v = ts_calloc(1, sizeof *v);
    if (!v) return TS_ERR_NOMEM;
    ts_status st = load(v, f);
    if (st) {
        if (st == TS_ERR_NOMEM) ts_fail(TS_ERR_NOMEM, "%s: out of memory loading the tokenizer", f->path ? f->path : "gguf");
        tok_free(v);
        return st;
    }
    *out = v;
    return TS_OK;
}
