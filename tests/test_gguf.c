/* GGUF reader/writer: round trip of every value type, and a catalogue of
 * broken files, each of which must fail with a message naming the problem. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test_util.h"

static void test_roundtrip(void) {
    gguf_writer *w = gguf_writer_new(3, 64);
    gguf_w_u8(w, "t.u8", 200);
    gguf_w_i8(w, "t.i8", -100);
    gguf_w_u16(w, "t.u16", 60000);
    gguf_w_i16(w, "t.i16", -30000);
    gguf_w_u32(w, "t.u32", 4000000000u);
    gguf_w_i32(w, "t.i32", -2000000000);
    gguf_w_u64(w, "t.u64", 18000000000000000000ull);
    gguf_w_i64(w, "t.i64", -9000000000000000000ll);
    gguf_w_f32(w, "t.f32", 3.25f);
    gguf_w_f64(w, "t.f64", -1e300);
    gguf_w_bool(w, "t.bool", true);
    gguf_w_str(w, "t.str", "héllo");
    float fa[3] = {1.5f, -2.0f, 1e-30f};
    gguf_w_arr(w, "t.arr_f32", GGUF_VT_FLOAT32, fa, 3);
    int32_t ia[4] = {1, -2, 3, INT32_MIN};
    gguf_w_arr(w, "t.arr_i32", GGUF_VT_INT32, ia, 4);
    uint8_t ba[2] = {1, 0};
    gguf_w_arr(w, "t.arr_bool", GGUF_VT_BOOL, ba, 2);
    const char *sa[3] = {"a", "", "ccc"};
    gguf_w_arr_str(w, "t.arr_str", sa, 3);
    gguf_w_arr(w, "t.arr_empty", GGUF_VT_UINT64, NULL, 0);
    /* nested: array of 2 arrays of u16 {[7,8], [9]} */
    {
        uint8_t raw[256];
        size_t n = 0;
        const char *k = "t.nested";
        uint64_t kl = strlen(k);
        uint32_t t = GGUF_VT_ARRAY, et = GGUF_VT_UINT16;
        uint64_t cnt = 2, c1 = 2, c2 = 1;
        uint16_t v[3] = {7, 8, 9};
        memcpy(raw + n, &kl, 8); n += 8;
        memcpy(raw + n, k, kl); n += kl;
        memcpy(raw + n, &t, 4); n += 4;
        memcpy(raw + n, &t, 4); n += 4; /* outer elem type: array */
        memcpy(raw + n, &cnt, 8); n += 8;
        memcpy(raw + n, &et, 4); n += 4;
        memcpy(raw + n, &c1, 8); n += 8;
        memcpy(raw + n, v, 4); n += 4;
        memcpy(raw + n, &et, 4); n += 4;
        memcpy(raw + n, &c2, 8); n += 8;
        memcpy(raw + n, v + 2, 2); n += 2;
        gguf_w_raw_kv(w, raw, n);
    }
    float td[2 * 3];
    for (int i = 0; i < 6; i++) td[i] = (float)i * 0.5f;
    uint64_t ne[2] = {3, 2};
    gguf_w_tensor(w, "weight.a", TS_TYPE_F32, 2, ne, td, sizeof td);
    uint8_t q[2 * 18];
    memset(q, 0x11, sizeof q);
    uint64_t ne2[1] = {64};
    gguf_w_tensor(w, "weight.q", TS_TYPE_Q4_0, 1, ne2, q, sizeof q);

    char path[] = "/tmp/ts_gguf_rtXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(gguf_writer_write(w, path) == TS_OK);
    gguf_writer_free(w);

    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (!f) return;
    CHECK(f->version == 3);
    CHECK(f->alignment == 64);
    CHECK(f->n_tensors == 2);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    gguf_str s;
    CHECK(gguf_get_u32(f, "t.u8", &u32) == GGUF_GET_OK && u32 == 200);
    CHECK(gguf_get_i32(f, "t.i8", &i32) == GGUF_GET_OK && i32 == -100);
    CHECK(gguf_get_u32(f, "t.u16", &u32) == GGUF_GET_OK && u32 == 60000);
    CHECK(gguf_get_i32(f, "t.i16", &i32) == GGUF_GET_OK && i32 == -30000);
    CHECK(gguf_get_u32(f, "t.u32", &u32) == GGUF_GET_OK && u32 == 4000000000u);
    CHECK(gguf_get_i32(f, "t.i32", &i32) == GGUF_GET_OK && i32 == -2000000000);
    CHECK(gguf_get_u64(f, "t.u64", &u64) == GGUF_GET_OK && u64 == 18000000000000000000ull);
    const gguf_kv *kv = gguf_get_kv(f, "t.i64");
    CHECK(kv && kv->val.type == GGUF_VT_INT64 && kv->val.v.i64 == -9000000000000000000ll);
    CHECK(gguf_get_f32(f, "t.f32", &f32) == GGUF_GET_OK && f32 == 3.25f);
    kv = gguf_get_kv(f, "t.f64");
    CHECK(kv && kv->val.type == GGUF_VT_FLOAT64 && kv->val.v.f64 == -1e300);
    CHECK(gguf_get_bool(f, "t.bool", &b) == GGUF_GET_OK && b);
    CHECK(gguf_get_str(f, "t.str", &s) == GGUF_GET_OK && gguf_str_eq(s, "héllo"));
    const gguf_array *a;
    CHECK(gguf_get_arr(f, "t.arr_f32", GGUF_VT_FLOAT32, &a) == GGUF_GET_OK && a->n == 3 && gguf_arr_f32(a, 2) == 1e-30f);
    CHECK(gguf_get_arr(f, "t.arr_i32", GGUF_VT_INT32, &a) == GGUF_GET_OK && a->n == 4 && gguf_arr_i32(a, 3) == INT32_MIN);
    CHECK(gguf_get_arr(f, "t.arr_bool", GGUF_VT_BOOL, &a) == GGUF_GET_OK && gguf_arr_int(a, 0) == 1 && gguf_arr_int(a, 1) == 0);
    CHECK(gguf_get_arr(f, "t.arr_str", GGUF_VT_STRING, &a) == GGUF_GET_OK && a->n == 3 && gguf_str_eq(a->strs[2], "ccc") &&
          a->strs[1].len == 0);
    CHECK(gguf_get_arr(f, "t.arr_empty", GGUF_VT_UINT64, &a) == GGUF_GET_OK && a->n == 0);
    CHECK(gguf_get_arr(f, "t.nested", GGUF_VT_ARRAY, &a) == GGUF_GET_OK && a->n == 2 && a->vals[0].v.arr.n == 2 &&
          gguf_arr_int(&a->vals[0].v.arr, 1) == 8 && gguf_arr_int(&a->vals[1].v.arr, 0) == 9);
    /* missing vs wrong type */
    CHECK(gguf_get_u32(f, "nope", &u32) == GGUF_GET_MISSING);
    CHECK(gguf_get_u32(f, "t.str", &u32) == GGUF_GET_WRONG_TYPE && strstr(ts_last_error(), "t.str") &&
          strstr(ts_last_error(), "string"));
    CHECK(gguf_get_u32(f, "t.i8", &u32) == GGUF_GET_WRONG_TYPE); /* negative into unsigned */
    CHECK(gguf_get_i32(f, "t.u32", &i32) == GGUF_GET_WRONG_TYPE); /* 4e9 does not fit */
    CHECK(gguf_get_arr(f, "t.arr_f32", GGUF_VT_INT32, &a) == GGUF_GET_WRONG_TYPE);
    const gguf_tensor *t = gguf_find_tensor(f, "weight.a");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2 && t->nbytes == 24 && ((uintptr_t)t->data % 64 == 0 || 1));
    if (t) {
        float got[6];
        memcpy(got, t->data, sizeof got);
        CHECK(memcmp(got, td, sizeof td) == 0);
        CHECK((t->data - f->map.data - (int64_t)f->data_offset) % 64 == 0);
    }
    t = gguf_find_tensor(f, "weight.q");
    CHECK(t && t->type == TS_TYPE_Q4_0 && t->nbytes == 36 && t->data[0] == 0x11);
    /* every kv and tensor copied through gguf_w_copy_kv gives the same file,
     * byte for byte (every scalar width, signed and unsigned, strings,
     * arrays of each kind, the nested array) */
    gguf_writer *w2 = gguf_writer_new(3, f->alignment); /* writes general.alignment itself */
    for (uint64_t k = 0; k < f->n_kv; k++)
        if (!gguf_str_eq(f->kv[k].key, "general.alignment")) gguf_w_copy_kv(w2, &f->kv[k]);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *gt = &f->tensors[i];
        char *name = gguf_strdup(gt->name);
        gguf_w_tensor(w2, name, gt->type, gt->n_dims, gt->ne, gt->data, gt->nbytes);
        free(name);
    }
    uint8_t *copy = NULL;
    uint64_t copy_n = 0;
    CHECK(gguf_writer_to_buffer(w2, &copy, &copy_n) == TS_OK);
    CHECKF(copy && copy_n == f->map.size && memcmp(copy, f->map.data, copy_n) == 0, "a copy through gguf_w_copy_kv differs (%llu bytes, file %llu)",
           (unsigned long long)copy_n, (unsigned long long)f->map.size);
    free(copy);
    gguf_writer_free(w2);
    gguf_close(f);
    unlink(path);
}

/* ---- broken files ---- */
typedef struct bb {
    uint8_t p[4096];
    size_t n;
} bb;
static void put(bb *b, const void *x, size_t n) { memcpy(b->p + b->n, x, n); b->n += n; }
static void pu32(bb *b, uint32_t v) { put(b, &v, 4); }
static void pu64(bb *b, uint64_t v) { put(b, &v, 8); }
static void pstr(bb *b, const char *s) { pu64(b, strlen(s)); put(b, s, strlen(s)); }
static void header(bb *b, uint32_t ver, uint64_t nt, uint64_t nkv) {
    b->n = 0;
    put(b, "GGUF", 4);
    pu32(b, ver);
    pu64(b, nt);
    pu64(b, nkv);
}
/* type is the raw on-disk u32: the tests hand it ids no ts_type names */
static void tinfo(bb *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    pstr(b, name);
    pu32(b, nd);
    for (uint32_t i = 0; i < nd; i++) pu64(b, ne[i]);
    pu32(b, type);
    pu64(b, off);
}
static void pad_to(bb *b, size_t a) { while (b->n % a) b->p[b->n++] = 0; }

/* Writes the bytes to a real file and opens it through the file path, the way
 * users hit it; the message must name the file and contain `want`. */
static void expect_fail(const char *label, const bb *b, const char *want) {
    char path[] = "/tmp/ts_gguf_badXXXXXX";
    int fd = mkstemp(path);
    if (b->n) CHECK(write(fd, b->p, b->n) == (ssize_t)b->n);
    close(fd);
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    const char *msg = ts_last_error();
    CHECKF(st != TS_OK && f == NULL, "%s: opened a broken file", label);
    CHECKF(strstr(msg, path) != NULL, "%s: message does not name the file: %s", label, msg);
    CHECKF(strstr(msg, want) != NULL, "%s: message '%s' lacks '%s'", label, msg, want);
    CHECKF(strchr(msg, '\n') == NULL, "%s: message is not one line", label);
    if (f) gguf_close(f);
    unlink(path);
}

static void test_broken(void) {
    bb b;
    uint64_t ne[5] = {0}; /* 5: the "too many dims" case writes one past the limit */

    b.n = 0;
    expect_fail("empty", &b, "too short");

    header(&b, 3, 0, 0);
    memcpy(b.p, "GGML", 4);
    expect_fail("bad magic", &b, "bad magic");

    header(&b, 7, 0, 0);
    expect_fail("version", &b, "unsupported GGUF version 7");

    header(&b, 1, 0, 0);
    expect_fail("version 1", &b, "version 1");

    header(&b, 3, 0, 0);
    b.n = 12;
    expect_fail("truncated header", &b, "truncated");

    header(&b, 3, 0, 1);
    pu64(&b, 1000000); /* key length past EOF */
    put(&b, "abcdefghijklmnopqrstuvwxyz", 26);
    expect_fail("key length", &b, "past the end");

    header(&b, 3, 0, 1);
    pstr(&b, "k");
    pu32(&b, GGUF_VT_STRING);
    pu64(&b, 1ull << 62);
    expect_fail("string length", &b, "past the end");

    header(&b, 3, 0, 1);
    pstr(&b, "k");
    pu32(&b, GGUF_VT_ARRAY);
    pu32(&b, GGUF_VT_UINT64);
    pu64(&b, 1ull << 61); /* n * 8 overflows */
    expect_fail("array overflow", &b, "runs past the end");

    header(&b, 3, 0, 1);
    pstr(&b, "k");
    pu32(&b, GGUF_VT_ARRAY);
    pu32(&b, GGUF_VT_STRING);
    pu64(&b, 100000000); /* 100M strings in a tiny file: no giant allocation */
    expect_fail("string array count", &b, "runs past the end");

    header(&b, 3, 0, 1);
    pstr(&b, "k");
    pu32(&b, 99);
    expect_fail("unknown value type", &b, "unknown value type 99");

    header(&b, 3, 0, 2);
    pstr(&b, "dup");
    pu32(&b, GGUF_VT_UINT32);
    pu32(&b, 1);
    pstr(&b, "dup");
    pu32(&b, GGUF_VT_UINT32);
    pu32(&b, 2);
    expect_fail("duplicate key", &b, "duplicate metadata key 'dup'");

    header(&b, 3, 1ull << 40, 0);
    expect_fail("tensor count", &b, "tensor count");

    header(&b, 3, 0, 1ull << 50);
    expect_fail("kv count", &b, "metadata count");

    header(&b, 3, 1, 0);
    ne[0] = 1ull << 40; ne[1] = 1ull << 40; ne[2] = 1ull << 40;
    tinfo(&b, "t", 3, ne, TS_TYPE_F32, 0);
    expect_fail("dims overflow", &b, "overflows");

    header(&b, 3, 1, 0);
    ne[0] = 1ull << 62; /* 2^62 elements fit int64, their 2^64 F32 bytes do not */
    tinfo(&b, "t", 1, ne, TS_TYPE_F32, 0);
    pad_to(&b, 32);
    expect_fail("row bytes overflow", &b, "byte size overflows");

    header(&b, 3, 1, 0);
    ne[0] = 32;
    tinfo(&b, "t", 1, ne, 77, 0);
    expect_fail("unknown tensor type", &b, "unknown type id 77");

    header(&b, 3, 1, 0);
    ne[0] = 32;
    tinfo(&b, "t", 5, ne, TS_TYPE_F32, 0);
    expect_fail("too many dims", &b, "5 dims");

    header(&b, 3, 1, 0);
    ne[0] = 16;
    tinfo(&b, "t", 1, ne, TS_TYPE_F32, 4); /* offset not aligned to 32 */
    pad_to(&b, 32);
    memset(b.p + b.n, 0, 128); b.n += 128;
    expect_fail("misaligned", &b, "not aligned");

    header(&b, 3, 1, 0);
    ne[0] = 1024;
    tinfo(&b, "t", 1, ne, TS_TYPE_F32, 0); /* 4 KiB of data, file has none */
    pad_to(&b, 32);
    expect_fail("data outside file", &b, "outside the file");

    header(&b, 3, 2, 0);
    ne[0] = 8;
    tinfo(&b, "t", 1, ne, TS_TYPE_F32, 0);
    tinfo(&b, "t", 1, ne, TS_TYPE_F32, 32);
    pad_to(&b, 32);
    memset(b.p + b.n, 0, 64); b.n += 64;
    expect_fail("duplicate tensor", &b, "duplicate tensor name 't'");

    header(&b, 3, 1, 0);
    ne[0] = 33; /* not a multiple of the Q4_0 block */
    tinfo(&b, "t", 1, ne, TS_TYPE_Q4_0, 0);
    pad_to(&b, 32);
    memset(b.p + b.n, 0, 64); b.n += 64;
    expect_fail("partial block", &b, "whole number");

    header(&b, 3, 0, 1);
    pstr(&b, "general.alignment");
    pu32(&b, GGUF_VT_UINT32);
    pu32(&b, 48);
    expect_fail("alignment", &b, "power of two");

    header(&b, 3, 0, 1);
    pstr(&b, "general.alignment");
    pu32(&b, GGUF_VT_STRING);
    pstr(&b, "32");
    expect_fail("alignment type", &b, "expected uint32");

    header(&b, 3, 0, 1);
    pstr(&b, "k");
    pu32(&b, GGUF_VT_BOOL);
    b.p[b.n++] = 7;
    expect_fail("bool", &b, "neither 0 nor 1");

    /* arrays nested past the limit */
    header(&b, 3, 0, 1);
    pstr(&b, "deep");
    pu32(&b, GGUF_VT_ARRAY);
    for (int i = 0; i < 20; i++) { pu32(&b, GGUF_VT_ARRAY); pu64(&b, 1); }
    memset(b.p + b.n, 0, 64); b.n += 64;
    expect_fail("nesting", &b, "nested deeper");

    /* a missing file */
    gguf_file *f = NULL;
    CHECK(gguf_open("/nonexistent/x.gguf", &f) == TS_ERR_IO && strstr(ts_last_error(), "/nonexistent/x.gguf"));
}

/* Every truncation of a valid file must fail cleanly (or succeed only at full length). */
static void test_truncations(void) {
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_str(w, "general.architecture", "llama");
    const char *sa[2] = {"x", "yy"};
    gguf_w_arr_str(w, "tokens", sa, 2);
    float td[64] = {0};
    uint64_t ne[2] = {8, 8};
    gguf_w_tensor(w, "w", TS_TYPE_F32, 2, ne, td, sizeof td);
    uint8_t *buf;
    uint64_t n;
    CHECK(gguf_writer_to_buffer(w, &buf, &n) == TS_OK);
    gguf_writer_free(w);
    int bad = 0;
    for (uint64_t cut = 0; cut < n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        gguf_file *f = NULL;
        if (gguf_open_memory(copy, cut, "cut", &f) == TS_OK) { bad++; gguf_close(f); }
        free(copy);
    }
    CHECKF(bad == 0, "%d truncated files opened", bad);
    gguf_file *f = NULL;
    CHECK(gguf_open_memory(buf, n, "full", &f) == TS_OK);
    gguf_close(f);
    free(buf);
}

/* The shipped vocab fixtures open and carry a tokenizer. */
static void test_real_vocab(void) {
    const char *names[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/vocab/%s", TS_FIXTURES, names[i]);
        if (access(path, R_OK) != 0) continue;
        gguf_file *f = NULL;
        CHECKF(gguf_open(path, &f) == TS_OK, "%s", ts_last_error());
        if (!f) continue;
        const gguf_array *a;
        CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &a) == GGUF_GET_OK && a->n > 1000);
        gguf_close(f);
    }
}

/* Non-regular paths are refused before they can block: opening a FIFO for
 * reading waits for a writer, so the old open-then-fstat order hung here.
 * alarm() turns a hang into a failing test instead of a stuck suite. */
static void test_not_regular(void) {
    char dir[] = "/tmp/ts_fifoXXXXXX";
    if (!mkdtemp(dir)) { CHECK(!"mkdtemp"); return; }
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/model.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(10);
    gguf_file *f = NULL;
    ts_status st = gguf_open(fifo, &f);
    CHECKF(st == TS_ERR_IO && !f && strstr(ts_last_error(), "not a regular file"), "FIFO: %d '%s'", st, ts_last_error());
    st = gguf_open(dir, &f);
    CHECKF(st == TS_ERR_IO && !f && strstr(ts_last_error(), "not a regular file"), "directory: %d '%s'", st, ts_last_error());
    ts_mapped_file m;
    st = ts_map_file(fifo, &m);
    CHECKF(st == TS_ERR_IO && m.fd == -1 && !m.data, "ts_map_file FIFO: %d '%s'", st, ts_last_error());
    alarm(0);
    unlink(fifo);
    rmdir(dir);
}

int main(void) {
    test_not_regular();
    test_roundtrip();
    test_broken();
    test_truncations();
    test_real_vocab();
    return tu_finish();
}
