/* ts_inspect: a GGUF file described as text or JSON, built as one string so
 * the caller prints it whole or not at all.
 *
 * Everything the file supplies (metadata keys and values, tensor names) is
 * untrusted. The text form goes to terminals: control characters there are
 * commands (ESC ] retitles the window, ESC c clears it), so they are shown
 * escaped. The JSON form goes to parsers: it must be valid UTF-8, so invalid
 * bytes become U+FFFD (cJSON escapes the control characters). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "gguf/gguf.h"

static const char *hp_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base", "rope.dimension_count",
    "rope.scaling.type", "rope.scaling.factor", "expert_count", "expert_used_count", "expert_feed_forward_length",
    "expert_shared_feed_forward_length", "vocab_size",
};
#define N_HP (sizeof hp_keys / sizeof hp_keys[0])

/* ---- text ---- */

/* Writes s[0..n) safe for a terminal and returns the bytes written (o may be
 * NULL to measure): printable UTF-8 as is; backslash as \\ (so the escapes
 * are unambiguous); C0 controls, DEL and bytes that are not UTF-8 as \xNN;
 * C1 controls (U+0080..U+009F: some terminals obey U+009B like ESC [) as
 * \u00NN. */
static size_t put_safe(FILE *o, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t w = 0;
    char esc[8];
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c == '\\') {
            if (o) fputs("\\\\", o);
            w += 2;
            i++;
            continue;
        }
        if (c >= 0x20 && c < 0x7F) {
            if (o) fputc((int)c, o);
            w++;
            i++;
            continue;
        }
        size_t L = c >= 0xC0 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF8 ? 4 : 0;
        if (L && L <= n - i && ts_utf8_valid(s + i, L)) {
            if (L == 2 && c == 0xC2 && p[i + 1] < 0xA0) {
                snprintf(esc, sizeof esc, "\\u%04x", p[i + 1]);
                if (o) fputs(esc, o);
                w += 6;
            } else {
                if (o) fwrite(p + i, 1, L, o);
                w += L;
            }
            i += L;
            continue;
        }
        snprintf(esc, sizeof esc, "\\x%02x", c);
        if (o) fputs(esc, o);
        w += 4;
        i++;
    }
    return w;
}

static void put_gstr(FILE *o, gguf_str s) { put_safe(o, s.ptr, (size_t)s.len); }

static void print_value(FILE *o, const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: fprintf(o, "%" PRIu64, v->v.u64); break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: fprintf(o, "%" PRId64, v->v.i64); break;
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: fprintf(o, "%g", v->v.f64); break;
    case GGUF_VT_BOOL: fputs(v->v.b ? "true" : "false", o); break;
    case GGUF_VT_STRING: put_safe(o, v->v.str.ptr, (size_t)(v->v.str.len > 200 ? 200 : v->v.str.len)); break;
    default: fprintf(o, "[%" PRIu64 " x %s]", v->v.arr.n, gguf_vtype_name(v->v.arr.type)); break;
    }
}

/* ---- JSON ---- */

/* A cJSON string of s[0..n) made valid UTF-8 (NULL on allocation failure). */
static cJSON *json_str(const char *s, size_t n) {
    char *t = ts_utf8_sanitize(s, n);
    if (!t) return NULL;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}

/* Adds item under key (key made valid UTF-8); false when anything is NULL
 * (allocation failed), and then the item is freed. */
static bool json_add(cJSON *obj, const char *key, size_t klen, cJSON *item) {
    char *k = item ? ts_utf8_sanitize(key, klen) : NULL;
    if (!obj || !k || !cJSON_AddItemToObject(obj, k, item)) {
        free(k);
        cJSON_Delete(item);
        return false;
    }
    free(k);
    return true;
}

static bool json_add_num(cJSON *obj, const char *key, double v) { return json_add(obj, key, strlen(key), cJSON_CreateNumber(v)); }

/* Scalars as themselves; arrays as {"array_of", "n"} (they can be huge). */
static cJSON *value_json(const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: return cJSON_CreateNumber((double)v->v.u64);
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: return cJSON_CreateNumber((double)v->v.i64);
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: return cJSON_CreateNumber(v->v.f64);
    case GGUF_VT_BOOL: return cJSON_CreateBool(v->v.b);
    case GGUF_VT_STRING: return json_str(v->v.str.ptr, (size_t)v->v.str.len);
    default: {
        cJSON *o = cJSON_CreateObject();
        bool ok = o && json_add(o, "array_of", 8, cJSON_CreateString(gguf_vtype_name(v->v.arr.type))) &&
                  json_add_num(o, "n", (double)v->v.arr.n);
        if (!ok) {
            cJSON_Delete(o);
            return NULL;
        }
        return o;
    }
    }
}

/* ---- the description ---- */

typedef struct summary {
    gguf_str arch, tokm, tokpre, name;
    bool has_arch;  /* general.architecture is a string (else "(none)") */
    char *arch_c;   /* arch as a C string for key lookups; NULL when absent or holding a NUL */
    uint64_t n_vocab;
    bool chat_template;
    uint64_t type_bytes[TS_TYPE_COUNT], type_count[TS_TYPE_COUNT];
    uint64_t n_params, total;
} summary;

/* The hyperparameter kv "<arch>.<key>", or NULL. */
static const gguf_kv *hp_kv(const gguf_file *f, const summary *s, size_t k) {
    if (!s->arch_c) return NULL;
    char key[256];
    int n = snprintf(key, sizeof key, "%s.%s", s->arch_c, hp_keys[k]);
    if (n < 0 || (size_t)n >= sizeof key) return NULL;
    return gguf_get_kv(f, key);
}

static ts_status build_json(const char *path, const gguf_file *f, const summary *s, bool tensors, char **text, size_t *len) {
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    ok = ok && json_add(o, "file", 4, json_str(path, strlen(path)));
    ok = ok && json_add_num(o, "version", f->version);
    ok = ok && json_add_num(o, "file_bytes", (double)f->map.size);
    ok = ok && json_add(o, "architecture", 12, json_str(s->arch.ptr, (size_t)s->arch.len));
    ok = ok && json_add(o, "name", 4, json_str(s->name.ptr, (size_t)s->name.len));
    cJSON *hp = ok ? cJSON_AddObjectToObject(o, "hparams") : NULL;
    ok = ok && hp;
    for (size_t k = 0; ok && k < N_HP; k++) {
        const gguf_kv *kv = hp_kv(f, s, k);
        if (kv) ok = json_add(hp, hp_keys[k], strlen(hp_keys[k]), value_json(&kv->val));
    }
    cJSON *tk = ok ? cJSON_AddObjectToObject(o, "tokenizer") : NULL;
    ok = ok && tk;
    ok = ok && json_add(tk, "model", 5, json_str(s->tokm.ptr, (size_t)s->tokm.len));
    ok = ok && json_add(tk, "pre", 3, json_str(s->tokpre.ptr, (size_t)s->tokpre.len));
    ok = ok && json_add_num(tk, "n_vocab", (double)s->n_vocab);
    ok = ok && json_add(tk, "chat_template", 13, cJSON_CreateBool(s->chat_template));
    ok = ok && json_add_num(o, "n_kv", (double)f->n_kv);
    ok = ok && json_add_num(o, "n_tensors", (double)f->n_tensors);
    ok = ok && json_add_num(o, "n_params", (double)s->n_params);
    ok = ok && json_add_num(o, "tensor_bytes", (double)s->total);
    cJSON *bt = ok ? cJSON_AddObjectToObject(o, "bytes_per_type") : NULL;
    ok = ok && bt;
    for (int t = 0; ok && t < TS_TYPE_COUNT; t++)
        if (s->type_count[t]) {
            cJSON *e = cJSON_AddObjectToObject(bt, ts_type_name(t));
            ok = e && json_add_num(e, "tensors", (double)s->type_count[t]) && json_add_num(e, "bytes", (double)s->type_bytes[t]);
        }
    cJSON *md = ok ? cJSON_AddObjectToObject(o, "metadata") : NULL;
    ok = ok && md;
    for (uint64_t i = 0; ok && i < f->n_kv; i++) ok = json_add(md, f->kv[i].key.ptr, (size_t)f->kv[i].key.len, value_json(&f->kv[i].val));
    if (ok && tensors) {
        cJSON *ta = cJSON_AddArrayToObject(o, "tensors");
        ok = ta != NULL;
        for (uint64_t i = 0; ok && i < f->n_tensors; i++) {
            const gguf_tensor *t = &f->tensors[i];
            cJSON *e = cJSON_CreateObject(), *sh = NULL;
            ok = e && cJSON_AddItemToArray(ta, e);
            if (!ok) cJSON_Delete(e);
            ok = ok && json_add(e, "name", 4, json_str(t->name.ptr, (size_t)t->name.len));
            ok = ok && json_add(e, "type", 4, cJSON_CreateString(ts_type_name(t->type)));
            ok = ok && (sh = cJSON_AddArrayToObject(e, "shape")) != NULL;
            for (uint32_t d = 0; ok && d < t->n_dims; d++) {
                cJSON *x = cJSON_CreateNumber((double)t->ne[d]);
                ok = x && cJSON_AddItemToArray(sh, x);
                if (!ok) cJSON_Delete(x);
            }
            ok = ok && json_add_num(e, "offset", (double)(f->data_offset + t->offset));
            ok = ok && json_add_num(e, "bytes", (double)t->nbytes);
        }
    }
    char *out = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!out) return ts_fail(TS_ERR_NOMEM, "%s: out of memory building JSON", path);
    size_t n = strlen(out);
    char *r = ts_realloc(out, n + 2);
    if (!r) {
        free(out);
        return TS_ERR_NOMEM;
    }
    r[n] = '\n';
    r[n + 1] = 0;
    *text = r;
    *len = n + 1;
    return TS_OK;
}

static void build_text(FILE *o, const char *path, const gguf_file *f, const summary *s, bool tensors) {
    char b1[32], b2[32];
    fputs("file:         ", o);
    put_safe(o, path, strlen(path));
    fprintf(o, " (%s, GGUF v%u)\n", ts_fmt_bytes(f->map.size, 2, b1, sizeof b1), f->version);
    fputs("architecture: ", o);
    if (s->has_arch) put_gstr(o, s->arch);
    else fputs("(none)", o);
    fputc('\n', o);
    if (s->name.len) {
        fputs("name:         ", o);
        put_gstr(o, s->name);
        fputc('\n', o);
    }
    for (size_t k = 0; k < N_HP; k++) {
        const gguf_kv *kv = hp_kv(f, s, k);
        if (!kv) continue;
        fprintf(o, "  %-34s ", hp_keys[k]);
        print_value(o, &kv->val);
        fputc('\n', o);
    }
    if (s->tokm.len) {
        fputs("tokenizer:    ", o);
        put_gstr(o, s->tokm);
        if (s->tokpre.len) {
            fputs(" / pre=", o);
            put_gstr(o, s->tokpre);
        }
        fprintf(o, ", %" PRIu64 " tokens%s\n", s->n_vocab, s->chat_template ? ", chat template" : "");
    } else {
        fputs("tokenizer:    (none)\n", o);
    }
    fprintf(o, "metadata:     %" PRIu64 " keys\n", f->n_kv);
    fprintf(o, "tensors:      %" PRIu64 " (%s), %.3f B parameters\n", f->n_tensors, ts_fmt_bytes(s->total, 2, b1, sizeof b1),
            (double)s->n_params / 1e9);
    for (int t = 0; t < TS_TYPE_COUNT; t++)
        if (s->type_count[t])
            fprintf(o, "  %-8s %6" PRIu64 " tensors  %12s\n", ts_type_name(t), s->type_count[t], ts_fmt_bytes(s->type_bytes[t], 2, b2, sizeof b2));
    if (!tensors) return;
    fprintf(o, "\n%-48s %-8s %-28s %14s %12s\n", "name", "type", "shape", "offset", "bytes");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char shape[64] = "";
        size_t sl = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            sl += (size_t)snprintf(shape + sl, sizeof shape - sl, d ? " x %" PRIu64 : "%" PRIu64, t->ne[d]);
        /* the name column: its first 48 bytes, escaped, padded to 48 */
        for (size_t w = put_safe(o, t->name.ptr, (size_t)(t->name.len > 48 ? 48 : t->name.len)); w < 48; w++) fputc(' ', o);
        fprintf(o, " %-8s %-28s %14" PRIu64 " %12" PRIu64 "\n", ts_type_name(t->type), shape, f->data_offset + t->offset, t->nbytes);
    }
}

ts_status ts_inspect(const char *path, const ts_inspect_opts *opts, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    ts_inspect_opts o = opts ? *opts : (ts_inspect_opts){0};
    if (!path) return ts_fail(TS_ERR_ARG, "no file given");
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    if (st != TS_OK) return st;

    summary s;
    memset(&s, 0, sizeof s);
    s.arch = s.tokm = s.tokpre = s.name = (gguf_str){"", 0};
    s.has_arch = gguf_get_str(f, "general.architecture", &s.arch) == GGUF_GET_OK;
    gguf_get_str(f, "tokenizer.ggml.model", &s.tokm);
    gguf_get_str(f, "tokenizer.ggml.pre", &s.tokpre);
    gguf_get_str(f, "general.name", &s.name);
    const gguf_array *toks = NULL;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks) == GGUF_GET_OK) s.n_vocab = toks->n;
    s.chat_template = gguf_find_key(f, "tokenizer.chat_template") >= 0;
    if (s.has_arch && !memchr(s.arch.ptr, 0, (size_t)s.arch.len) && !(s.arch_c = gguf_strdup(s.arch))) {
        gguf_close(f);
        return TS_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        s.type_bytes[t->type] += t->nbytes;
        s.type_count[t->type]++;
        s.n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        s.total += t->nbytes;
    }

    if (o.json) {
        st = build_json(path, f, &s, o.tensors, text, len);
    } else {
        char *buf = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&buf, &n);
        if (!m) {
            st = ts_fail(TS_ERR_NOMEM, "out of memory");
        } else {
            build_text(m, path, f, &s, o.tensors);
            bool bad = ferror(m) != 0;
            /* a failed final realloc in fclose leaves buf NULL and returns 0 */
            if (fclose(m) != 0 || bad || !buf) {
                free(buf);
                st = ts_fail(TS_ERR_NOMEM, "%s: out of memory building the description", path);
            } else {
                *text = buf;
                *len = n;
            }
        }
    }
    free(s.arch_c);
    gguf_close(f);
    return st;
}
