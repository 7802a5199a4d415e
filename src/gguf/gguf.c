/* GGUF reader. Layout (v2/v3, little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { str key | u32 type | value }
 *   n_tensors x { str name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   padding to alignment | data section
 * str = u64 len + bytes; array = u32 elem type + u64 n + elements.
 *
 * Every read goes through the cursor, which checks the bound first; every
 * count is checked against the bytes that remain before anything is sized
 * from it, so a hostile file cannot make us allocate more than a small
 * multiple of its own size. */
#include "gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gguf_cursor {
    const uint8_t *p; /* (size) bytes */
    uint64_t size;
    uint64_t pos;
    const char *name; /* file name for messages */
} gguf_cursor;

static const char *vtype_names[GGUF_VT_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
static const uint8_t vtype_sizes[GGUF_VT_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_vtype_name(uint32_t t) { return t < GGUF_VT_COUNT ? vtype_names[t] : "unknown"; }
size_t gguf_vtype_size(uint32_t t) { return t < GGUF_VT_COUNT ? vtype_sizes[t] : 0; }

static uint64_t cur_left(const gguf_cursor *c) { return c->size - c->pos; }

static ts_status cur_need(gguf_cursor *c, uint64_t n, const char *what) {
    if (n > cur_left(c))
        return ts_fail(TS_ERR_FORMAT, "%s: truncated file: %s needs %llu bytes at offset %llu, only %llu left", c->name, what,
                       (unsigned long long)n, (unsigned long long)c->pos, (unsigned long long)cur_left(c));
    return TS_OK;
}

static ts_status rd_bytes(gguf_cursor *c, void *dst, uint64_t n, const char *what) {
    ts_status st = cur_need(c, n, what);
    if (st) return st;
    memcpy(dst, c->p + c->pos, (size_t)n);
    c->pos += n;
    return TS_OK;
}

static ts_status rd_u32(gguf_cursor *c, uint32_t *v, const char *what) { return rd_bytes(c, v, 4, what); }
static ts_status rd_u64(gguf_cursor *c, uint64_t *v, const char *what) { return rd_bytes(c, v, 8, what); }

static ts_status rd_str(gguf_cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    uint64_t at = c->pos;
    ts_status st = rd_u64(c, &len, what);
    if (st) return st;
    if (len > cur_left(c))
        return ts_fail(TS_ERR_FORMAT, "%s: %s at offset %llu has length %llu, past the end of the file (%llu bytes left)", c->name,
                       what, (unsigned long long)at, (unsigned long long)len, (unsigned long long)cur_left(c));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return TS_OK;
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_VT_ARRAY) return;
    free(v->v.arr.strs);
    if (v->v.arr.vals) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.vals[i]);
        free(v->v.arr.vals);
    }
    v->v.arr.strs = NULL;
    v->v.arr.vals = NULL;
}

static ts_status rd_array(gguf_cursor *c, gguf_array *a, int depth, const char *key);

static ts_status rd_scalar(gguf_cursor *c, gguf_vtype type, gguf_value *v, const char *key) {
    uint8_t b[8] = {0};
    v->type = type;
    if (type == GGUF_VT_STRING) return rd_str(c, &v->v.str, "string value");
    size_t sz = gguf_vtype_size(type);
    ts_status st = rd_bytes(c, b, sz, "value");
    if (st) return st;
    switch (type) {
    case GGUF_VT_UINT8: v->v.u64 = b[0]; break;
    case GGUF_VT_INT8: v->v.i64 = (int8_t)b[0]; break;
    case GGUF_VT_UINT16: { uint16_t x; memcpy(&x, b, 2); v->v.u64 = x; break; }
    case GGUF_VT_INT16: { int16_t x; memcpy(&x, b, 2); v->v.i64 = x; break; }
    case GGUF_VT_UINT32: { uint32_t x; memcpy(&x, b, 4); v->v.u64 = x; break; }
    case GGUF_VT_INT32: { int32_t x; memcpy(&x, b, 4); v->v.i64 = x; break; }
    case GGUF_VT_FLOAT32: { float x; memcpy(&x, b, 4); v->v.f64 = x; break; }
    case GGUF_VT_BOOL:
        if (b[0] > 1) return ts_fail(TS_ERR_FORMAT, "%s: key '%s': bool value %u is neither 0 nor 1", c->name, key, b[0]);
        v->v.b = b[0] != 0;
        break;
    case GGUF_VT_UINT64: memcpy(&v->v.u64, b, 8); break;
    case GGUF_VT_INT64: memcpy(&v->v.i64, b, 8); break;
    case GGUF_VT_FLOAT64: memcpy(&v->v.f64, b, 8); break;
    default: return ts_fail(TS_ERR_INTERNAL, "%s: key '%s': scalar type %u", c->name, key, type);
    }
    return TS_OK;
}

static ts_status rd_array(gguf_cursor *c, gguf_array *a, int depth, const char *key) {
    memset(a, 0, sizeof *a);
    if (depth > GGUF_MAX_NESTING)
        return ts_fail(TS_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d", c->name, key, GGUF_MAX_NESTING);
    uint64_t at = c->pos;
    uint32_t raw; /* the on-disk element type: a gguf_vtype once checked */
    ts_status st = rd_u32(c, &raw, "array type");
    if (st) return st;
    if ((st = rd_u64(c, &a->n, "array length"))) return st;
    if (raw >= GGUF_VT_COUNT)
        return ts_fail(TS_ERR_FORMAT, "%s: key '%s': array at offset %llu has unknown element type %u", c->name, key,
                       (unsigned long long)at, raw);
    a->type = (gguf_vtype)raw;
    /* Minimum encoded size per element bounds n before any allocation. */
    uint64_t min_elem = a->type == GGUF_VT_STRING ? 8 : a->type == GGUF_VT_ARRAY ? 12 : gguf_vtype_size(a->type);
    uint64_t need;
    if (!ts_mul_u64(a->n, min_elem, &need) || need > cur_left(c))
        return ts_fail(TS_ERR_FORMAT, "%s: key '%s': array of %llu %s elements at offset %llu runs past the end of the file",
                       c->name, key, (unsigned long long)a->n, gguf_vtype_name(a->type), (unsigned long long)at);
    if (a->type == GGUF_VT_STRING) {
        a->strs = ts_malloc((size_t)(a->n ? a->n : 1) * sizeof(gguf_str));
        if (!a->strs) return TS_ERR_NOMEM;
        for (uint64_t i = 0; i < a->n; i++)
            if ((st = rd_str(c, &a->strs[i], "array string"))) return st;
    } else if (a->type == GGUF_VT_ARRAY) {
        a->vals = ts_calloc((size_t)(a->n ? a->n : 1), sizeof(gguf_value));
        if (!a->vals) return TS_ERR_NOMEM;
        for (uint64_t i = 0; i < a->n; i++) {
            a->vals[i].type = GGUF_VT_ARRAY;
            if ((st = rd_array(c, &a->vals[i].v.arr, depth + 1, key))) return st;
        }
    } else {
        a->raw = c->p + c->pos;
        c->pos += need;
    }
    return TS_OK;
}

/* Open-addressing set of strings, to refuse duplicate keys / tensor names. */
typedef struct strset {
    const gguf_str **slots; /* (cap) */
    uint64_t cap;
} strset;

static uint64_t str_hash(gguf_str s) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 1099511628211ull;
    return h;
}

static bool strset_init(strset *s, uint64_t n) {
    s->cap = 16;
    while (s->cap < 2 * n) s->cap *= 2;
    s->slots = ts_calloc((size_t)s->cap, sizeof *s->slots);
    return s->slots != NULL;
}

/* false if already present */
static bool strset_add(strset *s, const gguf_str *str) {
    uint64_t i = str_hash(*str) & (s->cap - 1);
    while (s->slots[i]) {
        if (s->slots[i]->len == str->len && memcmp(s->slots[i]->ptr, str->ptr, (size_t)str->len) == 0) return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->slots[i] = str;
    return true;
}

static void fmt_name(char *buf, size_t cap, gguf_str s) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    buf[n] = 0;
}

static ts_status parse(gguf_file *f) {
    gguf_cursor c = {f->map.data, f->map.size, 0, f->path};
    ts_status st;
    char magic[4];
    if (f->map.size < 4) return ts_fail(TS_ERR_FORMAT, "%s: not a GGUF file (%llu bytes, too short for the magic)", f->path, (unsigned long long)f->map.size);
    if ((st = rd_bytes(&c, magic, 4, "magic"))) return st;
    if (memcmp(magic, "GGUF", 4) != 0) return ts_fail(TS_ERR_FORMAT, "%s: not a GGUF file (bad magic)", f->path);
    if ((st = rd_u32(&c, &f->version, "version"))) return st;
    if (f->version != 2 && f->version != 3) {
        if (f->version == 1) return ts_fail(TS_ERR_UNSUPPORTED, "%s: GGUF version 1 is not supported (only 2 and 3)", f->path);
        return ts_fail(TS_ERR_UNSUPPORTED, "%s: unsupported GGUF version %u (only 2 and 3; a big-endian file?)", f->path, f->version);
    }
    if ((st = rd_u64(&c, &f->n_tensors, "tensor count"))) return st;
    if ((st = rd_u64(&c, &f->n_kv, "metadata count"))) return st;
    /* a kv is at least 8 (key len) + 4 (type) + 1 bytes; a tensor info at least 8+4+8+4+8 */
    if (f->n_kv > cur_left(&c) / 13)
        return ts_fail(TS_ERR_FORMAT, "%s: metadata count %llu is impossible for a file of %llu bytes", f->path, (unsigned long long)f->n_kv, (unsigned long long)f->map.size);
    if (f->n_tensors > cur_left(&c) / 32)
        return ts_fail(TS_ERR_FORMAT, "%s: tensor count %llu is impossible for a file of %llu bytes", f->path, (unsigned long long)f->n_tensors, (unsigned long long)f->map.size);

    f->kv = ts_calloc((size_t)(f->n_kv ? f->n_kv : 1), sizeof(gguf_kv));
    if (!f->kv) return TS_ERR_NOMEM;
    strset seen = {0};
    if (!strset_init(&seen, f->n_kv)) return TS_ERR_NOMEM;
    char name[160];
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        if ((st = rd_str(&c, &kv->key, "metadata key"))) goto out;
        fmt_name(name, sizeof name, kv->key);
        if (!strset_add(&seen, &kv->key)) { st = ts_fail(TS_ERR_FORMAT, "%s: duplicate metadata key '%s'", f->path, name); goto out; }
        uint32_t raw; /* the on-disk value type: a gguf_vtype once checked */
        if ((st = rd_u32(&c, &raw, "metadata value type"))) goto out;
        if (raw >= GGUF_VT_COUNT) { st = ts_fail(TS_ERR_FORMAT, "%s: key '%s' has unknown value type %u", f->path, name, raw); goto out; }
        gguf_vtype type = (gguf_vtype)raw;
        kv->val.type = type;
        if (type == GGUF_VT_ARRAY) st = rd_array(&c, &kv->val.v.arr, 1, name);
        else st = rd_scalar(&c, type, &kv->val, name);
        if (st) goto out;
        if (gguf_str_eq(kv->key, "general.alignment")) {
            if (type != GGUF_VT_UINT32) { st = ts_fail(TS_ERR_FORMAT, "%s: general.alignment has type %s, expected uint32", f->path, gguf_vtype_name(type)); goto out; }
            uint64_t a = kv->val.v.u64;
            if (a == 0 || (a & (a - 1))) { st = ts_fail(TS_ERR_FORMAT, "%s: general.alignment %llu is not a power of two", f->path, (unsigned long long)a); goto out; }
            f->alignment = (uint32_t)a;
        }
    }
    free(seen.slots);
    seen.slots = NULL;

    f->tensors = ts_calloc((size_t)(f->n_tensors ? f->n_tensors : 1), sizeof(gguf_tensor));
    if (!f->tensors) return TS_ERR_NOMEM;
    if (!strset_init(&seen, f->n_tensors)) return TS_ERR_NOMEM;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if ((st = rd_str(&c, &t->name, "tensor name"))) goto out;
        fmt_name(name, sizeof name, t->name);
        if (!strset_add(&seen, &t->name)) { st = ts_fail(TS_ERR_FORMAT, "%s: duplicate tensor name '%s'", f->path, name); goto out; }
        if ((st = rd_u32(&c, &t->n_dims, "tensor dims"))) goto out;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' has %u dims (1..%d allowed)", f->path, name, t->n_dims, GGUF_MAX_DIMS); goto out; }
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if ((st = rd_u64(&c, &t->ne[d], "tensor dim"))) goto out;
            if (t->ne[d] > (uint64_t)INT64_MAX) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' dim %u is %llu, out of range", f->path, name, d, (unsigned long long)t->ne[d]); goto out; }
        }
        uint32_t raw; /* the on-disk type id: a ts_type once ts_type_get knows it */
        if ((st = rd_u32(&c, &raw, "tensor type"))) goto out;
        if ((st = rd_u64(&c, &t->offset, "tensor offset"))) goto out;
        const ts_type_traits *tr = ts_type_get(raw);
        if (!tr) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s' has unknown type id %u", f->path, name, raw); goto out; }
        t->type = (ts_type)raw;
        uint64_t nel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            if (!ts_mul_u64(nel, t->ne[d], &nel) || nel > (uint64_t)INT64_MAX) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': element count overflows", f->path, name); goto out; }
        if (t->ne[0] % tr->block_elems) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': row of %llu elements is not a whole number of %s blocks (%u)", f->path, name, (unsigned long long)t->ne[0], tr->name, tr->block_elems); goto out; }
        uint64_t rows = nel / (t->ne[0] ? t->ne[0] : 1);
        if (t->ne[0] == 0) rows = 0;
        uint64_t rb = t->ne[0] ? ts_type_row_bytes(t->type, t->ne[0]) : 0;
        /* ts_type_row_bytes is 0 when the row's bytes overflow: without this a
         * 2^62-element F32 row would pass with nbytes 0 */
        if ((t->ne[0] && !rb) || !ts_mul_u64(rb, rows, &t->nbytes)) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': byte size overflows", f->path, name); goto out; }
        if (t->offset % f->alignment) { st = ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': offset %llu is not aligned to %u", f->path, name, (unsigned long long)t->offset, f->alignment); goto out; }
    }
    free(seen.slots);
    seen.slots = NULL;

    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    if (!ts_add_u64(c.pos, pad, &f->data_offset)) return ts_fail(TS_ERR_FORMAT, "%s: data offset overflows", f->path);
    uint64_t data_size = f->data_offset <= f->map.size ? f->map.size - f->data_offset : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t end;
        fmt_name(name, sizeof name, t->name);
        if (!ts_add_u64(t->offset, t->nbytes, &end) || end > data_size)
            return ts_fail(TS_ERR_FORMAT, "%s: tensor '%s': data [%llu, +%llu) lies outside the file's data section (%llu bytes)", f->path, name,
                           (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)data_size);
        t->data = f->map.data + f->data_offset + t->offset;
    }
    return TS_OK;
out:
    free(seen.slots);
    return st;
}

static ts_status open_common(gguf_file *f, gguf_file **out) {
    ts_status st = parse(f);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return TS_OK;
}

ts_status gguf_open(const char *path, gguf_file **out) {
    *out = NULL;
    gguf_file *f = ts_calloc(1, sizeof *f);
    if (!f) return TS_ERR_NOMEM;
    f->map.fd = -1;
    f->path = strdup(path);
    if (!f->path) { free(f); return ts_fail(TS_ERR_NOMEM, "out of memory"); }
    ts_status st = ts_map_file(path, &f->map);
    if (st) {
        gguf_close(f);
        return st;
    }
    return open_common(f, out);
}

ts_status gguf_open_memory(const void *data, uint64_t size, const char *name, gguf_file **out) {
    *out = NULL;
    gguf_file *f = ts_calloc(1, sizeof *f);
    if (!f) return TS_ERR_NOMEM;
    f->map.fd = -1;
    f->map.data = data;
    f->map.size = size;
    f->path = strdup(name ? name : "<memory>");
    f->borrowed = true;
    if (!f->path) { free(f); return ts_fail(TS_ERR_NOMEM, "out of memory"); }
    return open_common(f, out);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) value_free(&f->kv[i].val);
    free(f->kv);
    free(f->tensors);
    if (!f->borrowed) ts_unmap_file(&f->map);
    free(f->path);
    free(f);
}

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

char *gguf_strdup(gguf_str s) {
    char *p = ts_malloc((size_t)s.len + 1);
    if (!p) return NULL;
    memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return (int64_t)i;
    return -1;
}

const gguf_kv *gguf_get_kv(const gguf_file *f, const char *key) {
    int64_t i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static bool is_unsigned(gguf_vtype t) { return t == GGUF_VT_UINT8 || t == GGUF_VT_UINT16 || t == GGUF_VT_UINT32 || t == GGUF_VT_UINT64; }
static bool is_signed(gguf_vtype t) { return t == GGUF_VT_INT8 || t == GGUF_VT_INT16 || t == GGUF_VT_INT32 || t == GGUF_VT_INT64; }

static gguf_get_result wrong_type(const gguf_file *f, const char *key, gguf_vtype have, const char *want) {
    ts_fail(TS_ERR_FORMAT, "%s: key '%s' has type %s, expected %s", f->path, key, gguf_vtype_name(have), want);
    return GGUF_GET_WRONG_TYPE;
}

/* Integer value as (negative?, magnitude); false if not an integer type. */
static bool int_value(const gguf_value *v, bool *neg, uint64_t *mag) {
    if (is_unsigned(v->type)) { *neg = false; *mag = v->v.u64; return true; }
    if (is_signed(v->type)) {
        *neg = v->v.i64 < 0;
        *mag = *neg ? (uint64_t)(-(v->v.i64 + 1)) + 1 : (uint64_t)v->v.i64;
        return true;
    }
    return false;
}

static gguf_get_result get_uint(const gguf_file *f, const char *key, uint64_t max, uint64_t *out, const char *want) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    bool neg;
    uint64_t mag;
    if (!int_value(&kv->val, &neg, &mag)) return wrong_type(f, key, kv->val.type, want);
    if (neg || mag > max) {
        ts_fail(TS_ERR_FORMAT, "%s: key '%s' value is out of range for %s", f->path, key, want);
        return GGUF_GET_WRONG_TYPE;
    }
    *out = mag;
    return GGUF_GET_OK;
}

gguf_get_result gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    uint64_t v;
    gguf_get_result r = get_uint(f, key, UINT32_MAX, &v, "uint32");
    if (r == GGUF_GET_OK) *out = (uint32_t)v;
    return r;
}

gguf_get_result gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) {
    return get_uint(f, key, UINT64_MAX, out, "uint64");
}

gguf_get_result gguf_get_i32(const gguf_file *f, const char *key, int32_t *out) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    bool neg;
    uint64_t mag;
    if (!int_value(&kv->val, &neg, &mag)) return wrong_type(f, key, kv->val.type, "int32");
    if ((!neg && mag > (uint64_t)INT32_MAX) || (neg && mag > (uint64_t)INT32_MAX + 1)) {
        ts_fail(TS_ERR_FORMAT, "%s: key '%s' value is out of range for int32", f->path, key);
        return GGUF_GET_WRONG_TYPE;
    }
    *out = neg ? (int32_t)(-(int64_t)mag) : (int32_t)mag;
    return GGUF_GET_OK;
}

gguf_get_result gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    if (kv->val.type != GGUF_VT_FLOAT32 && kv->val.type != GGUF_VT_FLOAT64) return wrong_type(f, key, kv->val.type, "float32");
    *out = (float)kv->val.v.f64;
    return GGUF_GET_OK;
}

gguf_get_result gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    if (kv->val.type != GGUF_VT_BOOL) return wrong_type(f, key, kv->val.type, "bool");
    *out = kv->val.v.b;
    return GGUF_GET_OK;
}

gguf_get_result gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    if (kv->val.type != GGUF_VT_STRING) return wrong_type(f, key, kv->val.type, "string");
    *out = kv->val.v.str;
    return GGUF_GET_OK;
}

gguf_get_result gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem_type, const gguf_array **out) {
    const gguf_kv *kv = gguf_get_kv(f, key);
    if (!kv) return GGUF_GET_MISSING;
    if (kv->val.type != GGUF_VT_ARRAY) return wrong_type(f, key, kv->val.type, "array");
    if (elem_type != GGUF_VT_COUNT && kv->val.v.arr.type != elem_type) {
        ts_fail(TS_ERR_FORMAT, "%s: key '%s' is an array of %s, expected %s", f->path, key, gguf_vtype_name(kv->val.v.arr.type),
                gguf_vtype_name(elem_type));
        return GGUF_GET_WRONG_TYPE;
    }
    *out = &kv->val.v.arr;
    return GGUF_GET_OK;
}

float gguf_arr_f32(const gguf_array *a, uint64_t i) {
    if (a->type == GGUF_VT_FLOAT64) { double d; memcpy(&d, a->raw + i * 8, 8); return (float)d; }
    float x;
    memcpy(&x, a->raw + i * 4, 4);
    return x;
}

int32_t gguf_arr_i32(const gguf_array *a, uint64_t i) { return (int32_t)gguf_arr_int(a, i); }
uint32_t gguf_arr_u32(const gguf_array *a, uint64_t i) { return (uint32_t)gguf_arr_int(a, i); }

int64_t gguf_arr_int(const gguf_array *a, uint64_t i) {
    const uint8_t *p = a->raw + i * gguf_vtype_size(a->type);
    switch (a->type) {
    case GGUF_VT_UINT8: return p[0];
    case GGUF_VT_INT8: return (int8_t)p[0];
    case GGUF_VT_BOOL: return p[0];
    case GGUF_VT_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_VT_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_VT_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_VT_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_VT_UINT64: { uint64_t x; memcpy(&x, p, 8); return (int64_t)x; }
    case GGUF_VT_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
    default: return 0;
    }
}
