/* GGUF writer for tests and tools: metadata is serialised as it is added; the
 * file is assembled in memory and written through a temporary file + rename so
 * the destination is either complete or untouched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"

typedef struct wbuf {
    uint8_t *p; /* (cap) */
    size_t n, cap;
} wbuf;

typedef struct wtensor {
    char *name;
    ts_type type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint8_t *data; /* (nbytes) */
    uint64_t nbytes;
} wtensor;

struct gguf_writer {
    uint32_t version, alignment;
    uint64_t n_kv;
    wbuf kv;              /* serialised kv pairs */
    wtensor *tensors;     /* (n_tensors) */
    uint64_t n_tensors, cap_tensors;
    bool oom;             /* sticky: any failed append fails the final write */
};

static void wb_put(gguf_writer *w, wbuf *b, const void *src, size_t n) {
    if (w->oom || n == 0) return;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) { w->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void wb_u32(gguf_writer *w, wbuf *b, uint32_t v) { wb_put(w, b, &v, 4); }
static void wb_u64(gguf_writer *w, wbuf *b, uint64_t v) { wb_put(w, b, &v, 8); }
static void wb_str(gguf_writer *w, wbuf *b, const char *s) {
    size_t n = strlen(s);
    wb_u64(w, b, n);
    wb_put(w, b, s, n);
}

gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->version = version;
    w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT) gguf_w_u32(w, "general.alignment", w->alignment);
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->tensors);
    free(w->kv.p);
    free(w);
}

static void kv_head(gguf_writer *w, const char *key, gguf_vtype type) {
    wb_str(w, &w->kv, key);
    wb_u32(w, &w->kv, type);
    w->n_kv++;
}

#define W_SCALAR(fn, ctype, vt)                                   \
    void fn(gguf_writer *w, const char *key, ctype v) {           \
        kv_head(w, key, vt);                                      \
        wb_put(w, &w->kv, &v, sizeof v);                          \
    }
W_SCALAR(gguf_w_u8, uint8_t, GGUF_VT_UINT8)
W_SCALAR(gguf_w_i8, int8_t, GGUF_VT_INT8)
W_SCALAR(gguf_w_u16, uint16_t, GGUF_VT_UINT16)
W_SCALAR(gguf_w_i16, int16_t, GGUF_VT_INT16)
W_SCALAR(gguf_w_u32, uint32_t, GGUF_VT_UINT32)
W_SCALAR(gguf_w_i32, int32_t, GGUF_VT_INT32)
W_SCALAR(gguf_w_u64, uint64_t, GGUF_VT_UINT64)
W_SCALAR(gguf_w_i64, int64_t, GGUF_VT_INT64)
W_SCALAR(gguf_w_f32, float, GGUF_VT_FLOAT32)
W_SCALAR(gguf_w_f64, double, GGUF_VT_FLOAT64)

void gguf_w_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    kv_head(w, key, GGUF_VT_BOOL);
    wb_put(w, &w->kv, &b, 1);
}

void gguf_w_str(gguf_writer *w, const char *key, const char *v) {
    kv_head(w, key, GGUF_VT_STRING);
    wb_str(w, &w->kv, v);
}

void gguf_w_arr(gguf_writer *w, const char *key, gguf_vtype type, const void *data, uint64_t n) {
    kv_head(w, key, GGUF_VT_ARRAY);
    wb_u32(w, &w->kv, type);
    wb_u64(w, &w->kv, n);
    wb_put(w, &w->kv, data, (size_t)(n * gguf_vtype_size(type)));
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    kv_head(w, key, GGUF_VT_ARRAY);
    wb_u32(w, &w->kv, GGUF_VT_STRING);
    wb_u64(w, &w->kv, n);
    for (uint64_t i = 0; i < n; i++) wb_str(w, &w->kv, strs[i]);
}

static void wb_gstr(gguf_writer *w, wbuf *b, gguf_str s) {
    wb_u64(w, b, s.len);
    wb_put(w, b, s.ptr, (size_t)s.len);
}

/* A value's bytes after its type id, as the file had them (the reader
 * widened scalars; they are narrowed back to the type's size). */
static void wb_value(gguf_writer *w, const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
        wb_put(w, &w->kv, &v->v.u64, gguf_vtype_size(v->type)); /* little-endian: the low bytes first */
        break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        wb_put(w, &w->kv, &v->v.i64, gguf_vtype_size(v->type));
        break;
    case GGUF_VT_FLOAT32: {
        const float f = (float)v->v.f64;
        wb_put(w, &w->kv, &f, 4);
        break;
    }
    case GGUF_VT_FLOAT64: wb_put(w, &w->kv, &v->v.f64, 8); break;
    case GGUF_VT_BOOL: {
        const uint8_t b = v->v.b ? 1 : 0;
        wb_put(w, &w->kv, &b, 1);
        break;
    }
    case GGUF_VT_STRING: wb_gstr(w, &w->kv, v->v.str); break;
    case GGUF_VT_ARRAY: {
        const gguf_array *a = &v->v.arr;
        wb_u32(w, &w->kv, a->type);
        wb_u64(w, &w->kv, a->n);
        if (a->type == GGUF_VT_STRING)
            for (uint64_t i = 0; i < a->n; i++) wb_gstr(w, &w->kv, a->strs[i]);
        else if (a->type == GGUF_VT_ARRAY)
            for (uint64_t i = 0; i < a->n; i++) wb_value(w, &a->vals[i]);
        else
            wb_put(w, &w->kv, a->raw, (size_t)(a->n * gguf_vtype_size(a->type)));
        break;
    }
    case GGUF_VT_COUNT: w->oom = true; break; /* not a type: the reader refuses it, so this is a caller's bug */
    }
}

void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    wb_gstr(w, &w->kv, kv->key);
    wb_u32(w, &w->kv, kv->val.type);
    w->n_kv++;
    wb_value(w, &kv->val);
}

void gguf_w_raw_kv(gguf_writer *w, const void *bytes, size_t n) {
    wb_put(w, &w->kv, bytes, n);
    w->n_kv++;
}

void gguf_w_tensor(gguf_writer *w, const char *name, ts_type type, uint32_t n_dims, const uint64_t *ne, const void *data, uint64_t nbytes) {
    if (w->oom) return;
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        wtensor *t = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) { w->oom = true; return; }
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!t->name || !t->data) { free(t->name); free(t->data); w->oom = true; return; }
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
    if (nbytes) memcpy(t->data, data, (size_t)nbytes);
    t->nbytes = nbytes;
    w->n_tensors++;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

ts_status gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, uint64_t *size) {
    *out = NULL;
    *size = 0;
    wbuf b = {0};
    wb_put(w, &b, "GGUF", 4);
    wb_u32(w, &b, w->version);
    wb_u64(w, &b, w->n_tensors);
    wb_u64(w, &b, w->n_kv);
    wb_put(w, &b, w->kv.p, w->kv.n);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        wb_str(w, &b, t->name);
        wb_u32(w, &b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) wb_u64(w, &b, t->ne[d]);
        wb_u32(w, &b, t->type);
        wb_u64(w, &b, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    static const uint8_t zeros[64] = {0};
    if (w->n_tensors) {
        while (b.n % w->alignment) wb_put(w, &b, zeros, 1);
        for (uint64_t i = 0; i < w->n_tensors; i++) {
            wtensor *t = &w->tensors[i];
            wb_put(w, &b, t->data, (size_t)t->nbytes);
            while (b.n % w->alignment) wb_put(w, &b, zeros, 1);
        }
    }
    if (w->oom) {
        free(b.p);
        return ts_fail(TS_ERR_NOMEM, "gguf writer: out of memory");
    }
    *out = b.p;
    *size = b.n;
    return TS_OK;
}

ts_status gguf_writer_write(gguf_writer *w, const char *path) {
    uint8_t *buf;
    uint64_t n;
    ts_status st = gguf_writer_to_buffer(w, &buf, &n);
    if (st) return st;
    ts_afile af;
    if (!(st = ts_afile_open(&af, path))) {
        if (n && fwrite(buf, 1, (size_t)n, af.f) != n) {
            st = ts_fail(TS_ERR_IO, "writing %s failed: %s", path, strerror(errno));
            ts_afile_abort(&af);
        } else {
            st = ts_afile_commit(&af);
        }
    }
    free(buf);
    return st;
}
