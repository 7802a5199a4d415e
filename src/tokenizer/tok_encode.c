/* Text -> token ids.
 *
 * 1. Special tokens are cut out of the text first (llama.cpp's
 *    tokenizer_st_partition): longest special token first, each taking its
 *    leftmost non-overlapping occurrences in the text that is still raw.
 *    Control/unknown tokens only when parse_special; user-defined always.
 *    A one-pass trie scan finds which special tokens occur at all, so the
 *    per-token passes run only for those.
 * 2. Each raw fragment is tokenized on its own: SPM (spaces -> U+2581, a
 *    space in front after the start or a special token, best-score bigram
 *    merging, <0xNN> byte fallback) or byte-level BPE (pre-tokenizer regex
 *    passes, then rank-ordered merges per piece).
 *
 * Both merge loops keep the symbols in a linked list and the candidate pairs
 * in a binary heap, so a word of n characters costs O(n log n). */
#include <stdlib.h>
#include <string.h>

#include "base/heap.h"
#include "tokenizer/tok_internal.h"

#define TOK_MAX_TEXT ((size_t)512 << 20) /* symbol indices and offsets are 32-bit */

typedef struct frag {
    int32_t token; /* >= 0: a special token; -1: raw text */
    size_t off, len;
} frag;

typedef struct sym {
    int32_t prev, next;
    uint32_t start; /* byte offset of the symbol's text */
    uint32_t n;     /* bytes; 0 = merged away */
    uint32_t id;    /* BPE: string index (UINT32_MAX: a byte the table lacks) */
} sym;

typedef struct bpe_pair {
    uint32_t rank;
    int32_t left, right;
    uint32_t lid, rid;
} bpe_pair;

typedef struct spm_pair {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_pair;

/* Per-call cache of word -> ids: natural text repeats its words, and a word
 * always tokenizes the same way. Best effort: it never fails a call. */
#define WC_MAX_WORD 64
#define WC_MAX_SLOTS ((size_t)1 << 17)
typedef struct wc_entry {
    uint64_t hash;
    uint32_t boff, ioff; /* word bytes in wc_bytes, ids in wc_ids */
    uint16_t blen, nids; /* blen 0 = empty slot */
} wc_entry;

typedef struct enc {
    const tok_vocab *v;
    int32_t *out;
    size_t n, cap;
    sym *syms;
    size_t syms_cap;
    ts_heap heap; /* of spm_pair or bpe_pair, by the vocabulary's kind: only one kind runs per vocabulary */
    char *buf; /* SPM: escaped fragment; BPE: clean (valid UTF-8) fragment */
    size_t buf_cap;
    char *wbuf; /* BPE: byte-level text of one word */
    size_t wbuf_cap;
    size_t *subst; /* BPE: clean offsets of U+FFFD stand-ins for invalid bytes */
    size_t n_subst, subst_cap;
    const char *orig; /* BPE: the fragment's original bytes */
    tok_splitter sp;  /* BPE: created at the first fragment */
    bool sp_ready;
    wc_entry *wc;     /* (wc_mask + 1) or NULL */
    size_t wc_mask, wc_n;
    char *wc_bytes;
    size_t wc_bytes_n, wc_bytes_cap;
    int32_t *wc_ids;
    size_t wc_ids_n, wc_ids_cap;
} enc;

static ts_status push_id(enc *e, int32_t id);

static bool wc_get(enc *e, const char *p, size_t n, uint64_t h, ts_status *st) {
    if (!e->wc) return false;
    for (size_t i = h & e->wc_mask;; i = (i + 1) & e->wc_mask) {
        const wc_entry *w = &e->wc[i];
        if (!w->blen) return false;
        if (w->hash == h && w->blen == n && !memcmp(e->wc_bytes + w->boff, p, n)) {
            *st = TS_OK;
            for (uint32_t k = 0; k < w->nids && !*st; k++) *st = push_id(e, e->wc_ids[w->ioff + k]);
            return true;
        }
    }
}

static void wc_insert_slot(wc_entry *t, size_t mask, wc_entry x) {
    size_t i = x.hash & mask;
    while (t[i].blen) i = (i + 1) & mask;
    t[i] = x;
}

static void wc_put(enc *e, const char *p, size_t n, uint64_t h, size_t first) {
    size_t nids = e->n - first;
    if (nids > 0xFFFF) return;
    if (!e->wc || (e->wc_n + 1) * 2 > e->wc_mask + 1) {
        size_t slots = e->wc ? (e->wc_mask + 1) * 2 : 1024;
        if (slots > WC_MAX_SLOTS) return; /* full: keep what we have */
        wc_entry *t = calloc(slots, sizeof *t);
        if (!t) return;
        for (size_t i = 0; e->wc && i <= e->wc_mask; i++)
            if (e->wc[i].blen) wc_insert_slot(t, slots - 1, e->wc[i]);
        free(e->wc);
        e->wc = t;
        e->wc_mask = slots - 1;
    }
    if (e->wc_bytes_n + n > e->wc_bytes_cap) {
        size_t nc = e->wc_bytes_cap ? e->wc_bytes_cap * 2 : 16384;
        while (nc < e->wc_bytes_n + n) nc *= 2;
        char *nb = realloc(e->wc_bytes, nc);
        if (!nb || nc > UINT32_MAX) { if (nb) e->wc_bytes = nb; return; }
        e->wc_bytes = nb;
        e->wc_bytes_cap = nc;
    }
    if (e->wc_ids_n + nids > e->wc_ids_cap) {
        size_t nc = e->wc_ids_cap ? e->wc_ids_cap * 2 : 4096;
        while (nc < e->wc_ids_n + nids) nc *= 2;
        int32_t *ni = realloc(e->wc_ids, nc * sizeof *ni);
        if (!ni || nc > UINT32_MAX) { if (ni) e->wc_ids = ni; return; }
        e->wc_ids = ni;
        e->wc_ids_cap = nc;
    }
    wc_entry x = {h, (uint32_t)e->wc_bytes_n, (uint32_t)e->wc_ids_n, (uint16_t)n, (uint16_t)nids};
    memcpy(e->wc_bytes + e->wc_bytes_n, p, n);
    e->wc_bytes_n += n;
    if (nids) memcpy(e->wc_ids + e->wc_ids_n, e->out + first, nids * sizeof *e->wc_ids);
    e->wc_ids_n += nids;
    wc_insert_slot(e->wc, e->wc_mask, x);
    e->wc_n++;
}

static void wc_free(enc *e) {
    if (e->sp_ready) tok_splitter_free(&e->sp);
    free(e->wc);
    free(e->wc_bytes);
    free(e->wc_ids);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elt) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = ts_realloc(*p, nc * elt);
    if (!np) return false;
    *p = np;
    *cap = nc;
    return true;
}

static ts_status push_id(enc *e, int32_t id) {
    if (e->n == e->cap && !grow((void **)&e->out, &e->cap, e->n + 1, sizeof *e->out)) return TS_ERR_NOMEM;
    e->out[e->n++] = id;
    return TS_OK;
}

/* ---- merge queues: the first pair out is the one to merge next ---- */

/* Lower rank first; among equal ranks the leftmost, as the reference does. */
static bool bpe_before(const void *pa, const void *pb) {
    const bpe_pair *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}
/* Higher score first; among equal scores the leftmost. */
static bool spm_before(const void *pa, const void *pb) {
    const spm_pair *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int32_t lookup_token(const tok_vocab *v, const char *s, size_t n) {
    int64_t k = tok_st_find(&v->st, s, n);
    return (k >= 0 && k < v->n_vocab) ? (int32_t)k : TOK_NULL;
}

/* ---- SPM ---- */

static ts_status spm_try_pair(enc *e, const char *t, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return TS_OK;
    const sym *s = e->syms;
    uint32_t size = s[l].n + s[r].n;
    int32_t id = lookup_token(e->v, t + s[l].start, size);
    if (id < 0) return TS_OK;
    spm_pair p = {e->v->score[id], l, r, size};
    if (!ts_heap_push(&e->heap, &p, spm_before)) return TS_ERR_NOMEM;
    return TS_OK;
}

/* Merges the characters of t[0..len) and emits the pieces. */
static ts_status spm_segment(enc *e, const char *t, size_t len) {
    if (!len) return TS_OK;
    if (!grow((void **)&e->syms, &e->syms_cap, len, sizeof(sym))) return TS_ERR_NOMEM;
    sym *s = e->syms;
    int32_t ns = 0;
    for (size_t i = 0; i < len;) {
        size_t l = ts_utf8_len((const unsigned char *)t + i, len - i);
        if (!l) l = 1; /* an invalid byte is a symbol of its own: it falls back to <0xNN> */
        s[ns] = (sym){.prev = ns - 1, .next = i + l == len ? -1 : ns + 1, .start = (uint32_t)i, .n = (uint32_t)l};
        ns++;
        i += l;
    }
    ts_status st;
    ts_heap_clear(&e->heap);
    for (int32_t i = 1; i < ns; i++)
        if ((st = spm_try_pair(e, t, i - 1, i))) return st;
    while (e->heap.n) {
        spm_pair p;
        ts_heap_pop(&e->heap, &p, spm_before);
        sym *L = &s[p.left], *R = &s[p.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != p.size) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = p.left;
        if ((st = spm_try_pair(e, t, L->prev, p.left)) || (st = spm_try_pair(e, t, p.left, L->next))) return st;
    }
    const tok_vocab *v = e->v;
    for (int32_t i = 0; i != -1; i = s[i].next) {
        int32_t id = lookup_token(v, t + s[i].start, s[i].n);
        if (id >= 0) {
            if ((st = push_id(e, id))) return st;
            continue;
        }
        /* no piece: one token per byte (<0xNN>), else <unk>, else nothing */
        for (uint32_t j = 0; j < s[i].n; j++) {
            int32_t b = v->byte_tok[(unsigned char)t[s[i].start + j]];
            if (b < 0) b = v->unk;
            if (b >= 0 && (st = push_id(e, b))) return st;
        }
    }
    return TS_OK;
}

static ts_status spm_fragment(enc *e, const char *text, size_t len, bool prefix_space) {
    size_t need = (len + 1) * 3;
    if (!grow((void **)&e->buf, &e->buf_cap, need, 1)) return TS_ERR_NOMEM;
    char *t = e->buf;
    size_t o = 0;
    if (prefix_space) { memcpy(t, "\xE2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { memcpy(t + o, "\xE2\x96\x81", 3); o += 3; }
        else t[o++] = text[i];
    }
    if (!e->v->spm_split) return spm_segment(e, t, o);
#define SEGMENT(PTR_, LEN_)                                                    \
    do {                                                                     \
        const char *sp_ = (PTR_);                                             \
        size_t sn_ = (LEN_);                                                 \
        if (sn_ && sn_ <= WC_MAX_WORD) {                                     \
            uint64_t h_ = tok_hash(sp_, sn_);                                \
            if (wc_get(e, sp_, sn_, h_, &st)) {                              \
                if (st) return st;                                           \
                break;                                                       \
            }                                                                \
            size_t first_ = e->n;                                            \
            if ((st = spm_segment(e, sp_, sn_))) return st;                  \
            wc_put(e, sp_, sn_, h_, first_);                                 \
        } else if ((st = spm_segment(e, sp_, sn_))) {                        \
            return st;                                                       \
        }                                                                    \
    } while (0)
    /* Split before each U+2581 that follows another character: no piece
     * spans such a point (checked at load), so the result is the same. */
    size_t seg = 0;
    ts_status st;
    for (size_t i = 3; i + 3 <= o; i++) {
        if (!memcmp(t + i, "\xE2\x96\x81", 3) && memcmp(t + i - 3, "\xE2\x96\x81", 3)) {
            SEGMENT(t + seg, i - seg);
            seg = i;
            i += 2;
        }
    }
    SEGMENT(t + seg, o - seg);
#undef SEGMENT
    return TS_OK;
}

/* ---- BPE ---- */

static ts_status bpe_try_pair(enc *e, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return TS_OK;
    const sym *s = e->syms;
    if (s[l].id == UINT32_MAX || s[r].id == UINT32_MAX) return TS_OK;
    uint32_t rank, res;
    if (!tok_merge_find(e->v, s[l].id, s[r].id, &rank, &res)) return TS_OK;
    bpe_pair p = {rank, l, r, s[l].id, s[r].id};
    if (!ts_heap_push(&e->heap, &p, bpe_before)) return TS_ERR_NOMEM;
    return TS_OK;
}

/* Byte-level text (GPT-2 byte -> character map) of original bytes into wbuf. */
static size_t byte_level(enc *e, const char *p, size_t n) {
    size_t o = 0;
    const tok_vocab *v = e->v;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = v->byte_sym[(unsigned char)p[i]];
        if (k == UINT32_MAX) continue; /* the table lacks it: no token can match anyway */
        size_t l;
        const char *c = tok_st_str(&v->st, k, &l);
        memcpy(e->wbuf + o, c, l);
        o += l;
    }
    return o;
}

static ts_status bpe_word(enc *e, const char *p, size_t n) {
    const tok_vocab *v = e->v;
    ts_status st;
    if (!n) return TS_OK;
    if (v->ignore_merges) {
        if (!grow((void **)&e->wbuf, &e->wbuf_cap, n * 4, 1)) return TS_ERR_NOMEM;
        size_t l = byte_level(e, p, n);
        int32_t id = lookup_token(v, e->wbuf, l);
        if (id >= 0) return push_id(e, id);
    }
    if (!grow((void **)&e->syms, &e->syms_cap, n, sizeof(sym))) return TS_ERR_NOMEM;
    sym *s = e->syms;
    for (size_t i = 0; i < n; i++)
        s[i] = (sym){.prev = (int32_t)i - 1, .next = i + 1 == n ? -1 : (int32_t)i + 1, .start = (uint32_t)i, .n = 1,
                     .id = v->byte_sym[(unsigned char)p[i]]};
    ts_heap_clear(&e->heap);
    for (size_t i = 1; i < n; i++)
        if ((st = bpe_try_pair(e, (int32_t)i - 1, (int32_t)i))) return st;
    while (e->heap.n) {
        bpe_pair q;
        ts_heap_pop(&e->heap, &q, bpe_before);
        sym *L = &s[q.left], *R = &s[q.right];
        if (L->n == 0 || R->n == 0 || L->id != q.lid || R->id != q.rid) continue; /* stale */
        uint32_t rank, res;
        tok_merge_find(v, L->id, R->id, &rank, &res);
        L->id = res;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = q.left;
        if ((st = bpe_try_pair(e, L->prev, q.left)) || (st = bpe_try_pair(e, q.left, L->next))) return st;
    }
    for (int32_t i = 0; i != -1; i = s[i].next) {
        if (s[i].id != UINT32_MAX && s[i].id < v->n_vocab) {
            if ((st = push_id(e, (int32_t)s[i].id))) return st;
            continue;
        }
        /* Not a token (a merge result missing from the vocabulary, or a byte
         * the table lacks): llama.cpp looks up each byte of the byte-level
         * text on its own and drops what it cannot find. */
        if (!grow((void **)&e->wbuf, &e->wbuf_cap, (size_t)s[i].n * 4, 1)) return TS_ERR_NOMEM;
        size_t l = byte_level(e, p + s[i].start, s[i].n);
        for (size_t j = 0; j < l; j++) {
            int32_t id = lookup_token(v, e->wbuf + j, 1);
            if (id >= 0 && (st = push_id(e, id))) return st;
        }
    }
    return TS_OK;
}

/* clean offset -> original offset: each U+FFFD stand-in (3 bytes) was 1 byte */
static size_t orig_off(const enc *e, size_t c) {
    size_t lo = 0, hi = e->n_subst;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->subst[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return c - 2 * lo;
}

static ts_status bpe_piece(void *ud, size_t s, size_t end) {
    enc *e = ud;
    size_t os = e->n_subst ? orig_off(e, s) : s, oe = e->n_subst ? orig_off(e, end) : end;
    const char *p = e->orig + os;
    size_t n = oe - os;
    if (n > WC_MAX_WORD) return bpe_word(e, p, n);
    uint64_t h = tok_hash(p, n);
    ts_status st;
    if (wc_get(e, p, n, h, &st)) return st;
    size_t first = e->n;
    if ((st = bpe_word(e, p, n))) return st;
    wc_put(e, p, n, h, first);
    return TS_OK;
}

static ts_status bpe_fragment(enc *e, const char *text, size_t len) {
    /* PCRE2 runs with PCRE2_NO_UTF_CHECK, so it only ever sees valid UTF-8:
     * each invalid byte stands in as U+FFFD for splitting and is encoded as
     * its own byte afterwards (nothing is lost). */
    e->n_subst = 0;
    size_t clean_len = 0;
    for (size_t i = 0; i < len;) {
        size_t l = ts_utf8_len((const unsigned char *)text + i, len - i);
        if (!l) {
            if (!grow((void **)&e->subst, &e->subst_cap, e->n_subst + 1, sizeof(size_t))) return TS_ERR_NOMEM;
            e->subst[e->n_subst++] = clean_len;
            clean_len += 3;
            i++;
        } else {
            clean_len += l;
            i += l;
        }
    }
    const char *clean = text;
    if (e->n_subst) {
        if (!grow((void **)&e->buf, &e->buf_cap, clean_len, 1)) return TS_ERR_NOMEM;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            size_t l = ts_utf8_len((const unsigned char *)text + i, len - i);
            if (!l) { memcpy(e->buf + o, "\xEF\xBF\xBD", 3); o += 3; i++; }
            else { memcpy(e->buf + o, text + i, l); o += l; i += l; }
        }
        clean = e->buf;
    }
    e->orig = text;
    if (!e->sp_ready) {
        ts_status st = tok_splitter_init(&e->sp, e->v->re, e->v->n_re);
        if (st) return st;
        e->sp_ready = true;
    }
    return tok_splitter_run(&e->sp, clean, clean_len, bpe_piece, e);
}

/* ---- special-token partition ---- */

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static bool frags_push(frags *f, frag x) {
    if (!grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) return false;
    f->v[f->n++] = x;
    return true;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static ts_status partition(const tok_vocab *v, const char *text, size_t len, bool parse_special, frags *out) {
    out->n = 0;
    if (!len) return TS_OK;
    if (!frags_push(out, (frag){-1, 0, len})) return TS_ERR_NOMEM;
    if (!v->n_special) return TS_OK;
    /* which special tokens occur anywhere in the text */
    uint8_t *present = ts_calloc(v->n_special, 1);
    if (!present) return TS_ERR_NOMEM;
    size_t n_present = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t node = v->trie_root[(unsigned char)text[i]];
        size_t j = i;
        while (node >= 0) {
            const tok_trie_node *nd = &v->trie[node];
            if (nd->token >= 0 && !present[nd->token]) {
                present[nd->token] = 1;
                n_present++;
            }
            if (++j >= len) break;
            int32_t c = nd->child;
            while (c >= 0 && v->trie[c].byte != (uint8_t)text[j]) c = v->trie[c].sibling;
            node = c;
        }
    }
    ts_status st = TS_OK;
    frags next = {0};
    for (uint32_t k = 0; k < v->n_special && n_present; k++) {
        if (!present[k]) continue;
        n_present--;
        int32_t id = v->special[k];
        uint32_t a = v->attr[id];
        if (!parse_special && (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        size_t tl;
        const char *tt = tok_st_str(&v->st, (uint32_t)id, &tl);
        next.n = 0;
        for (size_t f = 0; f < out->n; f++) {
            frag fr = out->v[f];
            if (fr.token >= 0) {
                if (!frags_push(&next, fr)) { st = TS_ERR_NOMEM; goto done; }
                continue;
            }
            size_t off = fr.off, l = fr.len;
            for (;;) {
                const char *m = l >= tl ? memmem(text + off, l, tt, tl) : NULL;
                if (!m) {
                    if (l > 0 && !frags_push(&next, (frag){-1, off, l})) { st = TS_ERR_NOMEM; goto done; }
                    break;
                }
                size_t mo = (size_t)(m - text);
                size_t left = mo - off;
                if (a & TOK_ATTR_LSTRIP)
                    while (left > 0 && is_space(text[off + left - 1])) left--;
                if (left > 0 && !frags_push(&next, (frag){-1, off, left})) { st = TS_ERR_NOMEM; goto done; }
                if (!frags_push(&next, (frag){id, 0, 0})) { st = TS_ERR_NOMEM; goto done; }
                size_t r_off = mo + tl, r_len = off + l - r_off;
                if (a & TOK_ATTR_RSTRIP)
                    while (r_len > 0 && is_space(text[r_off])) { r_off++; r_len--; }
                off = r_off;
                l = r_len;
                if (!l) break;
            }
        }
        frags tmp = *out;
        *out = next;
        next = tmp;
    }
done:
    free(next.v);
    free(present);
    return st;
}

/* ---- entry ---- */

ts_status tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (!v) return ts_fail(TS_ERR_ARG, "tok_encode: no vocabulary");
    if (len && !text) return ts_fail(TS_ERR_ARG, "tok_encode: NULL text");
    if (len > TOK_MAX_TEXT) return ts_fail(TS_ERR_LIMIT, "tok_encode: text of %zu bytes is over the %zu-byte limit", len, TOK_MAX_TEXT);
    enc e = {.v = v};
    ts_heap_init(&e.heap, v->kind == TOK_KIND_SPM ? sizeof(spm_pair) : sizeof(bpe_pair));
    frags fr = {0};
    ts_status st = partition(v, text, len, parse_special, &fr);
    if (st) goto fail;
    if (add_special && v->add_bos && v->bos >= 0 && (st = push_id(&e, v->bos))) goto fail;
    bool prev_special = true; /* SPM: a space goes in front of the first text, and after each special token */
    for (size_t i = 0; i < fr.n; i++) {
        if (fr.v[i].token >= 0) {
            if ((st = push_id(&e, fr.v[i].token))) goto fail;
            prev_special = true;
            continue;
        }
        if (v->kind == TOK_KIND_SPM)
            st = spm_fragment(&e, text + fr.v[i].off, fr.v[i].len, v->add_space_prefix && prev_special);
        else
            st = bpe_fragment(&e, text + fr.v[i].off, fr.v[i].len);
        if (st) goto fail;
        prev_special = false;
    }
    if (add_special && v->add_eos && v->eos >= 0 && (st = push_id(&e, v->eos))) goto fail;
    free(fr.v);
    free(e.syms);
    ts_heap_free(&e.heap);
    free(e.buf);
    free(e.wbuf);
    free(e.subst);
    wc_free(&e);
    if (e.n == 0) {
        free(e.out);
        return TS_OK;
    }
    *ids = e.out;
    *n = e.n;
    return TS_OK;
fail:
    if (st == TS_ERR_NOMEM) ts_fail(TS_ERR_NOMEM, "tok_encode: out of memory");
    free(fr.v);
    free(e.syms);
    ts_heap_free(&e.heap);
    free(e.buf);
    free(e.wbuf);
    free(e.subst);
    wc_free(&e);
    free(e.out);
    return st;
}
