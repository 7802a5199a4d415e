/* GGUF v2/v3 reader and writer.
 *
 * The reader maps the file read-only and never trusts it: every length, count,
 * offset and dimension is checked against the file size and for overflow
 * before use, and every failure names the file and the problem. Strings and
 * fixed-size arrays point into the mapping (NOT NUL-terminated, possibly
 * unaligned: read array elements through the gguf_arr_* accessors). */
#ifndef TS_GGUF_H
#define TS_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "tensor/types.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NESTING 8

typedef enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
} gguf_vtype;

/* Both take a raw u32 on purpose: they accept any id, unknown ones included
 * ("unknown", 0), so messages can name a type read from a bad file. */
const char *gguf_vtype_name(uint32_t t);
/* Size of one element of a fixed-size type; 0 for STRING/ARRAY/unknown. */
size_t gguf_vtype_size(uint32_t t);

typedef struct gguf_str {
    const char *ptr; /* (len) bytes, not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
typedef struct gguf_array {
    gguf_vtype type;    /* of the elements */
    uint64_t n;         /* element count */
    const uint8_t *raw; /* fixed-size types: (n * gguf_vtype_size(type)) LE bytes in the map */
    gguf_str *strs;     /* type STRING: (n) strings, owned */
    gguf_value *vals;   /* type ARRAY: (n) nested arrays, owned */
} gguf_array;

struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u64; /* UINT8..UINT64 widened */
        int64_t i64;  /* INT8..INT64 widened */
        double f64;   /* FLOAT32/FLOAT64 widened */
        bool b;
        gguf_str str;
        gguf_array arr;
    } v;
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value val;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;              /* 1..GGUF_MAX_DIMS */
    uint64_t ne[GGUF_MAX_DIMS];   /* elements per dim, ne[0] fastest; unused dims = 1 */
    ts_type type;                 /* a known id (checked with ts_type_get on reading) */
    uint64_t offset;              /* relative to the data section */
    uint64_t nbytes;              /* checked size of the data */
    const uint8_t *data;          /* (nbytes) bytes in the map */
} gguf_tensor;

typedef struct gguf_file {
    char *path;              /* owned copy, for messages */
    ts_mapped_file map;
    uint32_t version;        /* 2 or 3 */
    uint64_t n_kv;
    gguf_kv *kv;             /* (n_kv) */
    uint64_t n_tensors;
    gguf_tensor *tensors;    /* (n_tensors) */
    uint32_t alignment;      /* general.alignment or 32 */
    uint64_t data_offset;    /* start of the data section in the file */
    bool borrowed;           /* map points at caller memory: do not unmap */
} gguf_file;

/* Opens and fully validates a GGUF file. On failure *out is NULL and the
 * message names the file and the problem. */
ts_status gguf_open(const char *path, gguf_file **out);
/* Same, from a caller-owned buffer (fuzzing, tests); the buffer must outlive
 * the gguf_file. */
ts_status gguf_open_memory(const void *data, uint64_t size, const char *name, gguf_file **out);
void gguf_close(gguf_file *f);

/* Lookup: -1 / NULL when missing. */
int64_t gguf_find_key(const gguf_file *f, const char *key);
const gguf_kv *gguf_get_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters distinguish "missing" from "wrong type": GGUF_GET_MISSING sets
 * no error (defaults are the caller's business); GGUF_GET_WRONG_TYPE leaves a
 * message naming the file, the key, the type found and the type wanted. */
typedef enum gguf_get_result {
    GGUF_GET_OK = 0,
    GGUF_GET_MISSING = 1,
    GGUF_GET_WRONG_TYPE = 2,
} gguf_get_result;

/* Integer getters accept any integer type whose value fits the target. */
gguf_get_result gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
gguf_get_result gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
gguf_get_result gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
gguf_get_result gguf_get_f32(const gguf_file *f, const char *key, float *out); /* FLOAT32/FLOAT64 */
gguf_get_result gguf_get_bool(const gguf_file *f, const char *key, bool *out);
gguf_get_result gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Array of the given element type (GGUF_VT_COUNT = any). */
gguf_get_result gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem_type, const gguf_array **out);

/* Element accessors for fixed-size arrays (memcpy; safe on unaligned data). */
float gguf_arr_f32(const gguf_array *a, uint64_t i);
int32_t gguf_arr_i32(const gguf_array *a, uint64_t i);
uint32_t gguf_arr_u32(const gguf_array *a, uint64_t i);
/* Any integer element type, widened. */
int64_t gguf_arr_int(const gguf_array *a, uint64_t i);

/* Returns a malloc'd NUL-terminated copy (NULL on OOM). */
char *gguf_strdup(gguf_str s);
bool gguf_str_eq(gguf_str s, const char *c);

/* ---- writer (tests and tools) ----
 * Builds a GGUF in memory and writes it atomically (tmp file + rename), so a
 * failed write never leaves a half-written file at the destination. */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u8(gguf_writer *w, const char *key, uint8_t v);
void gguf_w_i8(gguf_writer *w, const char *key, int8_t v);
void gguf_w_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_w_i16(gguf_writer *w, const char *key, int16_t v);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_i64(gguf_writer *w, const char *key, int64_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_f64(gguf_writer *w, const char *key, double v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* Fixed-size element array: data holds n elements of gguf_vtype_size(type). */
void gguf_w_arr(gguf_writer *w, const char *key, gguf_vtype type, const void *data, uint64_t n);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* One kv of a file read by gguf_open, written as the file had it (every
 * type, nested arrays too): copying a file with a few keys changed. */
void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv);
/* Low-level escape hatch for nested arrays and hand-made broken files: appends
 * raw bytes to the metadata stream and counts one more kv. */
void gguf_w_raw_kv(gguf_writer *w, const void *bytes, size_t n);
/* Tensor: data of exactly ts_type_row_bytes*rows bytes is copied. */
void gguf_w_tensor(gguf_writer *w, const char *name, ts_type type, uint32_t n_dims, const uint64_t *ne, const void *data, uint64_t nbytes);
/* Serialises to a heap buffer / writes atomically. */
ts_status gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, uint64_t *size);
ts_status gguf_writer_write(gguf_writer *w, const char *path);

#endif
