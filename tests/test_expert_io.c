/* Expert locator and the expert I/O pool.
 *
 * I/O: random unaligned ranges of a file with known content, read through
 * pools of several shapes, buffered and NOCACHE, must equal the file's bytes;
 * reads past the end fail with a message naming file and offset, and the pool
 * keeps working afterwards.
 * Locator: the same experts written once stacked (ffn_*_exps) and once per
 * expert (ffn_*.E) must give byte ranges whose contents agree with each other
 * and with the generator; broken files are refused naming the key/tensor. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "experts/expert_io.h"
#include "experts/expert_locator.h"
#include "gguf/gguf.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static const char *tmpdir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static bool contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* ---------------------------------------------------------------- I/O */

static uint8_t *g_data;
static uint64_t g_size;
static char g_path[512];

static void make_data_file(void) {
    g_size = (8u << 20) + 123;
    g_data = malloc(g_size);
    for (uint64_t i = 0; i < g_size; i += 8) {
        uint64_t v = rnd();
        memcpy(g_data + i, &v, g_size - i < 8 ? g_size - i : 8);
    }
    snprintf(g_path, sizeof g_path, "%s/ts_expert_io_XXXXXX", tmpdir());
    int fd = mkstemp(g_path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, g_data, g_size) == (ssize_t)g_size);
    CHECK(fsync(fd) == 0); /* clean pages, so POSIX_FADV_DONTNEED can drop them */
    close(fd);
}

/* Reads n_reqs random ranges (some aligned, some zero-length) in random
 * batches and compares them with the file's bytes. */
static void random_reads(expert_io *io, int file, int n_reqs, const char *what) {
    enum { MAXB = 12 };
    const uint64_t maxlen = 3u << 19; /* 1.5 MiB */
    uint8_t *pool[MAXB];
    for (int i = 0; i < MAXB; i++) {
        void *p = NULL;
        if (posix_memalign(&p, EXPERT_IO_ALIGN, maxlen + 2 * EXPERT_IO_ALIGN)) p = NULL;
        pool[i] = p;
    }
    expert_io_stats s0, s1;
    expert_io_get_stats(io, &s0);
    uint64_t want_bytes = 0;
    int bad = 0, done = 0;
    while (done < n_reqs) {
        int nb = 1 + (int)rnd_below(MAXB);
        if (nb > n_reqs - done) nb = n_reqs - done;
        expert_io_req req[MAXB];
        for (int i = 0; i < nb; i++) {
            uint64_t kind = rnd_below(10), off, len, shift;
            if (kind == 0) { /* fully aligned: the copy-free O_DIRECT path */
                off = rnd_below(g_size / EXPERT_IO_ALIGN) * EXPERT_IO_ALIGN;
                len = (1 + rnd_below(maxlen / EXPERT_IO_ALIGN)) * EXPERT_IO_ALIGN;
                shift = 0;
            } else if (kind == 1) { /* destination congruent to the offset */
                off = rnd_below(g_size);
                len = rnd_below(maxlen);
                shift = off % EXPERT_IO_ALIGN;
            } else if (kind == 2) {
                off = rnd_below(g_size);
                len = rnd_below(3); /* 0..2 bytes */
                shift = rnd_below(64);
            } else {
                off = rnd_below(g_size);
                len = 1 + rnd_below(maxlen);
                shift = rnd_below(EXPERT_IO_ALIGN);
            }
            if (off > g_size) off = g_size;
            if (len > g_size - off) len = g_size - off;
            memset(pool[i], 0xA5, maxlen + 2 * EXPERT_IO_ALIGN);
            req[i] = (expert_io_req){file, off, len, pool[i] + shift};
            want_bytes += len;
        }
        ts_status st = expert_io_read(io, req, nb);
        CHECKF(st == TS_OK, "%s: %s", what, ts_last_error());
        for (int i = 0; i < nb; i++) {
            const uint8_t *d = req[i].dst;
            if (memcmp(d, g_data + req[i].offset, req[i].len) != 0) bad++;
            /* nothing written past the destination */
            if (d[req[i].len] != 0xA5 && (uint8_t *)d + req[i].len < pool[i] + maxlen + 2 * EXPERT_IO_ALIGN) bad++;
        }
        done += nb;
    }
    CHECKF(bad == 0, "%s: %d mismatching ranges", what, bad);
    expert_io_get_stats(io, &s1);
    CHECKF(s1.requested_bytes - s0.requested_bytes == want_bytes, "%s: requested bytes", what);
    CHECKF(s1.issued_bytes - s0.issued_bytes >= want_bytes, "%s: issued bytes", what);
    for (int i = 0; i < MAXB; i++) free(pool[i]);
}

static bool in_memory_fs(const char *path) {
    struct statfs sf;
    return statfs(path, &sf) == 0 && (sf.f_type == 0x01021994 /* tmpfs */ || sf.f_type == 0x858458f6 /* ramfs */);
}

/* Fraction of the file's pages in the page cache. */
static double resident_fraction(const char *path, uint64_t size) {
    int fd = open(path, O_RDONLY);
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return -1;
    uint64_t pages = (size + 4095) / 4096, in = 0;
    unsigned char *vec = malloc(pages);
    if (mincore(p, size, vec) == 0)
        for (uint64_t i = 0; i < pages; i++) in += vec[i] & 1;
    free(vec);
    munmap(p, size);
    return (double)in / (double)pages;
}

static void test_io_config(int workers, uint64_t chunk, bool nocache, bool fadvise) {
    char what[128];
    snprintf(what, sizeof what, "workers=%d chunk=%llu nocache=%d", workers, (unsigned long long)chunk, nocache);
    expert_io_config cfg;
    expert_io_config_default(&cfg);
    cfg.n_workers = workers;
    cfg.chunk_bytes = chunk;
    cfg.nocache = nocache;
    cfg.nocache_fadvise = fadvise;
    expert_io *io = NULL;
    ts_status st = expert_io_new(&cfg, &io);
    CHECKF(st == TS_OK, "%s: %s", what, ts_last_error());
    if (!io) return;
    int fid = -1;
    st = expert_io_attach(io, g_path, &fid);
    CHECKF(st == TS_OK && fid == 0, "%s: %s", what, ts_last_error());
    expert_nocache_mode mode = expert_io_nocache_mode(io, fid);
    if (nocache && !in_memory_fs(g_path)) {
        /* Start from a file that is not cached (earlier tests read it). */
        int efd = open(g_path, O_RDONLY);
        CHECK(efd >= 0 && posix_fadvise(efd, 0, 0, POSIX_FADV_DONTNEED) == 0);
        close(efd);
        CHECKF(resident_fraction(g_path, g_size) < 0.05, "%s: could not evict the test file", what);
    }
    if (nocache) {
        CHECKF(fadvise ? mode == EXPERT_NOCACHE_FADVISE : (mode == EXPERT_NOCACHE_DIRECT || mode == EXPERT_NOCACHE_FADVISE),
               "%s", what);
        fprintf(stderr, "  %s: nocache mode on %s: %s\n", what, tmpdir(), expert_nocache_mode_name(mode));
    } else {
        CHECK(mode == EXPERT_NOCACHE_OFF);
    }
    random_reads(io, fid, 250, what);

    /* The same file through a caller-owned descriptor. */
    int fd = open(g_path, O_RDONLY);
    int fid2 = -1;
    st = expert_io_attach_fd(io, fd, "attached-fd", &fid2);
    CHECKF(st == TS_OK && fid2 == 1, "%s: %s", what, ts_last_error());
    CHECK(expert_io_nocache_mode(io, fid2) == mode);
    random_reads(io, fid2, 40, what);

    /* Whole file in one request: many chunks in parallel. */
    uint8_t *all = malloc(g_size);
    expert_io_req whole = {fid, 0, g_size, all};
    st = expert_io_read(io, &whole, 1);
    CHECKF(st == TS_OK && memcmp(all, g_data, g_size) == 0, "%s: whole file: %s", what, ts_last_error());
    free(all);
    if (mode != EXPERT_NOCACHE_OFF && !in_memory_fs(g_path)) {
        /* The reads must not have left the file in the page cache. */
        double r = resident_fraction(g_path, g_size);
        fprintf(stderr, "  %s: %.1f%% of the file resident after the reads\n", what, 100 * r);
        CHECKF(r >= 0 && r < 0.05, "%s: %.1f%% resident", what, 100 * r);
    }
    expert_io_free(io);
    CHECK(fcntl(fd, F_GETFD) >= 0); /* a caller's descriptor stays open */
    close(fd);
}

static void test_io_errors(int workers, bool nocache) {
    expert_io_config cfg;
    expert_io_config_default(&cfg);
    cfg.n_workers = workers;
    cfg.chunk_bytes = 64 * 1024;
    cfg.nocache = nocache;
    expert_io *io = NULL;
    CHECK(expert_io_new(&cfg, &io) == TS_OK);
    if (!io) return;
    int fid;
    CHECK(expert_io_attach(io, g_path, &fid) == TS_OK);
    uint8_t *buf = malloc(4u << 20);

    /* Crossing the end of the file. */
    expert_io_req r = {fid, g_size - 100, 200, buf};
    ts_status st = expert_io_read(io, &r, 1);
    CHECK(st == TS_ERR_IO);
    CHECKF(contains(ts_last_error(), g_path) && contains(ts_last_error(), "past the end") &&
               contains(ts_last_error(), "offset"),
           "message: %s", ts_last_error());

    /* Entirely past the end, in the middle of a batch of good reads. */
    expert_io_req batch[8];
    for (int i = 0; i < 8; i++) batch[i] = (expert_io_req){fid, (uint64_t)i * 400000, 300000, buf + (size_t)i * 300000};
    batch[5].offset = g_size + 12345;
    st = expert_io_read(io, batch, 8);
    CHECK(st == TS_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "offset %llu", (unsigned long long)(g_size + 12345));
    CHECKF(contains(ts_last_error(), want), "message: %s", ts_last_error());

    /* The pool is still usable. */
    batch[5].offset = 1;
    st = expert_io_read(io, batch, 8);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    CHECK(memcmp(buf + 5 * 300000, g_data + 1, 300000) == 0);

    /* Caller errors. */
    expert_io_req badf = {7, 0, 10, buf};
    CHECK(expert_io_submit(io, &badf, 1) == TS_ERR_ARG && contains(ts_last_error(), "bad file id"));
    expert_io_req nulld = {fid, 0, 10, NULL};
    CHECK(expert_io_submit(io, &nulld, 1) == TS_ERR_ARG);
    expert_io_req ovf = {fid, UINT64_MAX - 5, 10, buf};
    CHECK(expert_io_submit(io, &ovf, 1) == TS_ERR_ARG);
    CHECK(expert_io_submit(io, batch, 2) == TS_OK);
    CHECK(expert_io_submit(io, batch, 2) == TS_ERR_ARG && contains(ts_last_error(), "in flight"));
    CHECK(expert_io_wait(io) == TS_OK);
    CHECK(expert_io_wait(io) == TS_OK); /* nothing in flight */
    CHECK(expert_io_read(io, batch, 0) == TS_OK);

    /* A read error from the kernel (a directory) names the file and errno. */
    int did;
    CHECK(expert_io_attach(io, tmpdir(), &did) == TS_OK);
    expert_io_req dr = {did, 0, 100, buf};
    st = expert_io_read(io, &dr, 1);
    CHECK(st == TS_ERR_IO);
    CHECKF(contains(ts_last_error(), tmpdir()), "message: %s", ts_last_error());

    CHECK(expert_io_attach(io, "/nonexistent/ts_expert", &did) == TS_ERR_IO &&
          contains(ts_last_error(), "/nonexistent/ts_expert"));
    CHECK(expert_io_attach_fd(io, -1, "x", &did) == TS_ERR_ARG);

    /* Freeing with a batch in flight waits for it. */
    CHECK(expert_io_submit(io, batch, 8) == TS_OK);
    expert_io_free(io);
    free(buf);
}

static void test_io_config_checks(void) {
    expert_io_config cfg;
    expert_io_config_default(&cfg);
    cfg.chunk_bytes = 1000;
    expert_io *io = NULL;
    CHECK(expert_io_new(&cfg, &io) == TS_ERR_ARG && io == NULL);
    cfg.chunk_bytes = 0;
    cfg.n_workers = EXPERT_IO_MAX_WORKERS + 1;
    CHECK(expert_io_new(&cfg, &io) == TS_ERR_ARG && io == NULL);

}

/* read_bytes of /proc/self/io must count O_DIRECT reads of a fresh file. */
static void test_diskio(void) {
    uint64_t v;
    ts_status st = expert_io_proc_read_bytes(&v);
    if (st != TS_OK) {
        fprintf(stderr, "  /proc/self/io unavailable (%s): disk-io accounting test skipped\n", ts_last_error());
        return;
    }
    expert_io_config cfg;
    expert_io_config_default(&cfg);
    cfg.nocache = true;
    cfg.n_workers = 4;
    expert_io *io = NULL;
    CHECK(expert_io_new(&cfg, &io) == TS_OK);
    int fid;
    CHECK(expert_io_attach(io, g_path, &fid) == TS_OK);
    uint8_t *all = malloc(g_size);
    expert_diskio_sample a, b;
    CHECK(expert_diskio_sample_now(io, &a) == TS_OK);
    expert_io_req whole = {fid, 0, g_size, all};
    CHECK(expert_io_read(io, &whole, 1) == TS_OK);
    CHECK(expert_diskio_sample_now(io, &b) == TS_OK);
    uint64_t req = b.requested_bytes - a.requested_bytes, phys = b.proc_read_bytes - a.proc_read_bytes;
    CHECK(req == g_size);
    fprintf(stderr, "  disk-io (%s): requested %llu, /proc/self/io read_bytes +%llu\n",
            expert_nocache_mode_name(expert_io_nocache_mode(io, fid)), (unsigned long long)req, (unsigned long long)phys);
    bool memfs = in_memory_fs(g_path);
    if (memfs) fprintf(stderr, "  %s is in memory: no physical reads to count\n", g_path);
    if (expert_io_nocache_mode(io, fid) == EXPERT_NOCACHE_DIRECT && !memfs)
        CHECKF(phys >= g_size - EXPERT_IO_ALIGN, "O_DIRECT read of %llu bytes counted %llu physical",
               (unsigned long long)g_size, (unsigned long long)phys);
    free(all);
    expert_io_free(io);
}

/* ---------------------------------------------------------------- locator */

enum { L_EMBD = 256, L_FF = 64, L_NEXP = 4, L_NBLOCK = 3 };
static const ts_type l_types[3] = {TS_TYPE_Q4_K, TS_TYPE_Q8_0, TS_TYPE_F16};

/* Bytes of expert e's projection p in block b: a function of (b, p, e, i). */
static uint8_t expert_byte(int b, int p, int e, uint64_t i) {
    uint64_t x = ((uint64_t)b * 1000003u + (uint64_t)p * 7919u + (uint64_t)e * 104729u + i) * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(x >> 56);
}

static void proj_shape(int p, uint64_t ff, uint64_t *ne0, uint64_t *ne1) {
    if (p == 2) { *ne0 = ff; *ne1 = L_EMBD; }
    else { *ne0 = L_EMBD; *ne1 = ff; }
}

typedef struct moe_opts {
    const char *arch;
    bool per_expert;
    int64_t key_count;     /* -1 = omit */
    int64_t key_used;      /* -1 = omit */
    int64_t key_ffx;       /* expert_feed_forward_length; -1 = omit */
    int64_t key_ff;        /* feed_forward_length; -1 = omit */
    int tensor_count;      /* experts written (ne2 for stacked) */
    int bad_ne1_block;     /* block whose up tensor gets ne1-1; -1 = none */
    int missing_block;     /* block whose down tensor (or expert 3 of up) is left out; -1 = none */
    int mixed_type_block;  /* per-expert: expert 2's gate is Q8_0; -1 = none */
    int both_block;        /* block that also gets a per-expert gate.0; -1 = none */
    bool bad_router;       /* router of block 1 has n_expert+1 columns */
    bool no_experts;       /* write no expert tensors at all */
} moe_opts;

static moe_opts default_opts(void) {
    return (moe_opts){"qwen3moe", false, L_NEXP, 2, L_FF, 6 * L_FF, L_NEXP, -1, -1, -1, -1, false, false};
}

static void w_proj(gguf_writer *w, const char *name, ts_type type, uint32_t nd, uint64_t ne0, uint64_t ne1, int n_exp,
                   int b, int p, int e_first) {
    uint64_t rb = ts_type_row_bytes(type, ne0);
    uint64_t per = rb * ne1;
    uint8_t *d = malloc(per * (uint64_t)n_exp);
    for (int e = 0; e < n_exp; e++)
        for (uint64_t i = 0; i < per; i++) d[(uint64_t)e * per + i] = expert_byte(b, p, e_first + e, i);
    uint64_t ne[3] = {ne0, ne1, (uint64_t)n_exp};
    gguf_w_tensor(w, name, type, nd, ne, d, per * (uint64_t)n_exp);
    free(d);
}

static void write_moe(const char *path, const moe_opts *o) {
    gguf_writer *w = gguf_writer_new(3, 32);
    char key[128];
    gguf_w_str(w, "general.architecture", o->arch);
    snprintf(key, sizeof key, "%s.block_count", o->arch);
    gguf_w_u32(w, key, L_NBLOCK);
    snprintf(key, sizeof key, "%s.embedding_length", o->arch);
    gguf_w_u32(w, key, L_EMBD);
    if (o->key_count >= 0) { snprintf(key, sizeof key, "%s.expert_count", o->arch); gguf_w_u32(w, key, (uint32_t)o->key_count); }
    if (o->key_used >= 0) { snprintf(key, sizeof key, "%s.expert_used_count", o->arch); gguf_w_u32(w, key, (uint32_t)o->key_used); }
    if (o->key_ffx >= 0) { snprintf(key, sizeof key, "%s.expert_feed_forward_length", o->arch); gguf_w_u32(w, key, (uint32_t)o->key_ffx); }
    if (o->key_ff >= 0) { snprintf(key, sizeof key, "%s.feed_forward_length", o->arch); gguf_w_u32(w, key, (uint32_t)o->key_ff); }
    /* A non-expert tensor first, so expert data does not start the data section. */
    float norm[L_EMBD];
    for (int i = 0; i < L_EMBD; i++) norm[i] = 1.0f;
    uint64_t ne1d[1] = {L_EMBD};
    gguf_w_tensor(w, "output_norm.weight", TS_TYPE_F32, 1, ne1d, norm, sizeof norm);
    for (int b = 1; b < L_NBLOCK && !o->no_experts; b++) { /* block 0 is dense */
        char name[96];
        int nexp_router = o->bad_router && b == 1 ? L_NEXP + 1 : L_NEXP;
        float *router = calloc((size_t)L_EMBD * (size_t)nexp_router, sizeof *router);
        uint64_t rne[2] = {L_EMBD, (uint64_t)nexp_router};
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", b);
        gguf_w_tensor(w, name, TS_TYPE_F32, 2, rne, router, (uint64_t)L_EMBD * (uint64_t)nexp_router * sizeof(float));
        free(router);
        for (int p = 0; p < 3; p++) {
            uint64_t ne0, ne1;
            proj_shape(p, L_FF, &ne0, &ne1);
            if (p == 1 && b == o->bad_ne1_block) ne1--;
            if (!o->per_expert) {
                if (p == 2 && b == o->missing_block) continue;
                snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", b, expert_proj_name(p));
                w_proj(w, name, l_types[p], 3, ne0, ne1, o->tensor_count, b, p, 0);
            } else {
                for (int e = 0; e < o->tensor_count; e++) {
                    if (p == 1 && e == 3 && b == o->missing_block) continue;
                    ts_type t = l_types[p];
                    if (p == 0 && e == 2 && b == o->mixed_type_block) t = TS_TYPE_Q8_0;
                    snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", b, expert_proj_name(p), e);
                    w_proj(w, name, t, 2, ne0, ne1, 1, b, p, e);
                }
            }
        }
        if (b == o->both_block) {
            snprintf(name, sizeof name, "blk.%d.ffn_gate.0.weight", b);
            w_proj(w, name, l_types[0], 2, L_EMBD, L_FF, 1, b, 0, 0);
        }
    }
    CHECK(gguf_writer_write(w, path) == TS_OK);
    gguf_writer_free(w);
}

static int g_tmpn;
static void tmp_gguf(char *buf, size_t n) {
    snprintf(buf, n, "%s/ts_expert_loc_%d_%d.gguf", tmpdir(), (int)getpid(), g_tmpn++);
}

/* Builds a file from opts and returns expert_map_build's status. */
static ts_status build_from(const moe_opts *o, expert_map *m, char *path, size_t pn) {
    tmp_gguf(path, pn);
    write_moe(path, o);
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (st) return st;
    st = expert_map_build(f, NULL, m);
    gguf_close(f);
    return st;
}

static void expect_refused(const moe_opts *o, ts_status want, const char *what, const char *msg1, const char *msg2) {
    expert_map m;
    char path[512];
    ts_status st = build_from(o, &m, path, sizeof path);
    CHECKF(st == want, "%s: status %d", what, st);
    if (st == TS_OK) expert_map_free(&m);
    CHECKF(contains(ts_last_error(), msg1) && (!msg2 || contains(ts_last_error(), msg2)) && contains(ts_last_error(), path),
           "%s: message: %s", what, ts_last_error());
    unlink(path);
}

static void check_layout(const expert_map *m, expert_layout lay) {
    CHECK(m->n_block == L_NBLOCK && m->n_moe == 2 && m->n_expert == L_NEXP && m->n_expert_used == 2);
    CHECK(m->n_embd == L_EMBD && m->n_ff_exp == L_FF);
    CHECK(m->moe_of_block[0] == -1 && m->moe_of_block[1] == 0 && m->moe_of_block[2] == 1);
    uint64_t pb[3];
    for (int p = 0; p < 3; p++) {
        uint64_t ne0, ne1;
        proj_shape(p, L_FF, &ne0, &ne1);
        pb[p] = ts_type_row_bytes(l_types[p], ne0) * ne1;
    }
    CHECK(pb[0] == 144 * 64 && pb[1] == 272 * 64 && pb[2] == 128 * 256);
    for (int l = 0; l < 2; l++) {
        const expert_layer_info *li = &m->layers[l];
        CHECK(li->block == l + 1 && li->layout == lay);
        for (int p = 0; p < 3; p++) CHECK(li->type[p] == l_types[p] && li->proj_bytes[p] == pb[p]);
        CHECK(li->expert_bytes == pb[0] + pb[1] + pb[2]);
        CHECK(li->layer_bytes == li->expert_bytes * L_NEXP);
        for (int e = 0; e < L_NEXP; e++) {
            CHECK(expert_map_expert_bytes(m, l, e) == li->expert_bytes);
            for (int p = 0; p < 3; p++) {
                const expert_slice *s = expert_map_slice(m, l, e, p);
                CHECK(s->nbytes == pb[p] && s->type == l_types[p]);
            }
        }
    }
    CHECK(m->max_expert_bytes == pb[0] + pb[1] + pb[2]);
    CHECK(m->total_bytes == 2 * L_NEXP * m->max_expert_bytes);
}

/* Reads every slice of both maps through the pool and compares. */
static void compare_layouts(const char *pa, const expert_map *ma, const char *pb, const expert_map *mb, bool nocache) {
    expert_io_config cfg;
    expert_io_config_default(&cfg);
    cfg.n_workers = 3;
    cfg.chunk_bytes = 8192; /* several chunks per slice */
    cfg.nocache = nocache;
    expert_io *io = NULL;
    CHECK(expert_io_new(&cfg, &io) == TS_OK);
    if (!io) return;
    int fa, fb;
    CHECK(expert_io_attach(io, pa, &fa) == TS_OK);
    CHECK(expert_io_attach(io, pb, &fb) == TS_OK);
    uint64_t eb = ma->max_expert_bytes;
    uint8_t *ba = malloc(eb), *bb = malloc(eb), *want = malloc(eb);
    int bad = 0;
    for (int l = 0; l < ma->n_moe; l++)
        for (int e = 0; e < ma->n_expert; e++) {
            expert_io_req req[6];
            uint64_t o = 0;
            for (int p = 0; p < 3; p++) {
                const expert_slice *sa = expert_map_slice(ma, l, e, p), *sb = expert_map_slice(mb, l, e, p);
                req[p] = (expert_io_req){fa, sa->offset, sa->nbytes, ba + o};
                req[3 + p] = (expert_io_req){fb, sb->offset, sb->nbytes, bb + o};
                for (uint64_t i = 0; i < sa->nbytes; i++) want[o + i] = expert_byte(ma->layers[l].block, p, e, i);
                o += sa->nbytes;
            }
            ts_status st = expert_io_read(io, req, 6);
            CHECKF(st == TS_OK, "%s", ts_last_error());
            if (memcmp(ba, bb, eb) || memcmp(ba, want, eb)) bad++;
        }
    CHECKF(bad == 0, "%d experts differ between layouts (nocache=%d)", bad, nocache);
    free(ba);
    free(bb);
    free(want);
    expert_io_free(io);
}

static void test_locator(void) {
    char pa[512], pb[512];
    expert_map ma, mb;
    moe_opts o = default_opts();
    ts_status st = build_from(&o, &ma, pa, sizeof pa);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (st) return;
    check_layout(&ma, EXPERT_LAYOUT_STACKED);

    /* Stacked slices are consecutive nb2 strides of the tensor. */
    gguf_file *f = NULL;
    CHECK(gguf_open(pa, &f) == TS_OK);
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "blk.2.ffn_down_exps.weight");
        for (int e = 0; e < L_NEXP; e++)
            CHECK(expert_map_slice(&ma, 1, e, EXPERT_PROJ_DOWN)->offset == f->data_offset + t->offset + (uint64_t)e * 128 * 256);
        expert_map mx;
        CHECK(expert_map_build(f, "qwen3moe", &mx) == TS_OK); /* explicit prefix */
        CHECK(mx.n_moe == 2);
        expert_map_free(&mx);
        CHECK(expert_map_build(f, "llama", &mx) == TS_ERR_FORMAT && contains(ts_last_error(), "llama.block_count"));
        gguf_close(f);
    }

    /* Mixtral-style per-expert tensors, width from feed_forward_length. */
    moe_opts ob = default_opts();
    ob.arch = "llama";
    ob.per_expert = true;
    ob.key_ffx = -1;
    ob.key_ff = L_FF;
    st = build_from(&ob, &mb, pb, sizeof pb);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (st) {
        expert_map_free(&ma);
        return;
    }
    check_layout(&mb, EXPERT_LAYOUT_PER_EXPERT);
    compare_layouts(pa, &ma, pb, &mb, false);
    compare_layouts(pa, &ma, pb, &mb, true);
    expert_map_free(&ma);
    expert_map_free(&mb);
    unlink(pa);
    unlink(pb);

    /* A dense file: no experts, no error. */
    o = default_opts();
    o.no_experts = true;
    o.key_count = -1;
    st = build_from(&o, &ma, pa, sizeof pa);
    CHECKF(st == TS_OK && ma.n_moe == 0 && ma.moe_of_block[2] == -1, "%s", ts_last_error());
    if (!st) expert_map_free(&ma);
    unlink(pa);

    /* Refusals. */
    o = default_opts();
    o.key_used = L_NEXP + 1;
    expect_refused(&o, TS_ERR_FORMAT, "top-k > experts", "qwen3moe.expert_used_count=5", "expert_count=4");
    o = default_opts();
    o.key_used = 0;
    expect_refused(&o, TS_ERR_FORMAT, "top-k 0", "expert_used_count=0", NULL);
    o = default_opts();
    o.key_used = -1;
    expect_refused(&o, TS_ERR_FORMAT, "no top-k", "missing key qwen3moe.expert_used_count", NULL);
    o = default_opts();
    o.key_count = -1;
    expect_refused(&o, TS_ERR_FORMAT, "no expert_count", "qwen3moe.expert_count is missing", NULL);
    o = default_opts();
    o.bad_ne1_block = 2;
    expect_refused(&o, TS_ERR_FORMAT, "bad shape", "blk.2.ffn_up_exps.weight", "[256, 63, 4]");
    o = default_opts();
    o.tensor_count = L_NEXP - 1;
    expect_refused(&o, TS_ERR_FORMAT, "expert count", "blk.1.ffn_gate_exps.weight", "expert_count=4");
    o = default_opts();
    o.key_ffx = L_FF * 2;
    expect_refused(&o, TS_ERR_FORMAT, "ffn width", "blk.1.ffn_gate_exps.weight", "[256, 128, 4]");
    o = default_opts();
    o.missing_block = 2;
    expect_refused(&o, TS_ERR_FORMAT, "missing stacked", "blk.2.ffn_down_exps.weight", "lacks");
    o = default_opts();
    o.per_expert = true;
    o.missing_block = 1;
    expect_refused(&o, TS_ERR_FORMAT, "missing per-expert", "blk.1.ffn_up.3.weight", "lacks");
    o = default_opts();
    o.per_expert = true;
    o.tensor_count = L_NEXP + 1;
    expect_refused(&o, TS_ERR_FORMAT, "extra per-expert", "blk.1.ffn_gate.4.weight", "expert_count=4");
    o = default_opts();
    o.per_expert = true;
    o.mixed_type_block = 2;
    expect_refused(&o, TS_ERR_UNSUPPORTED, "mixed types", "blk.2.ffn_gate.2.weight is Q8_0", "Q4_K");
    o = default_opts();
    o.per_expert = true;
    o.bad_ne1_block = 1;
    expect_refused(&o, TS_ERR_FORMAT, "per-expert shape", "blk.1.ffn_up.0.weight", "[256, 63]");
    o = default_opts();
    o.both_block = 1;
    expect_refused(&o, TS_ERR_FORMAT, "both layouts", "layer 1 has both", NULL);
    o = default_opts();
    o.bad_router = true;
    expect_refused(&o, TS_ERR_FORMAT, "router", "blk.1.ffn_gate_inp.weight", "[256, 5]");
    o = default_opts();
    o.no_experts = true;
    expect_refused(&o, TS_ERR_FORMAT, "count without tensors", "expert_count=4 but no expert tensors", NULL);
    o = default_opts();
    o.key_ffx = -1;
    o.key_ff = -1;
    expect_refused(&o, TS_ERR_FORMAT, "no ffn width", "expert_feed_forward_length", "feed_forward_length");
    o = default_opts();
    o.key_used = 65;
    o.key_count = 100; /* tensors have 4: but top-k is checked first */
    expect_refused(&o, TS_ERR_UNSUPPORTED, "top-k > CACHE_MAX_K", "expert_used_count=65", NULL);
}

int main(void) {
    make_data_file();
    test_io_config_checks();
    test_io_config(0, 64 * 1024, false, false);
    test_io_config(3, 64 * 1024, false, false);
    test_io_config(8, EXPERT_IO_DEFAULT_CHUNK, false, false);
    test_io_config(0, 64 * 1024, true, false);
    test_io_config(3, 64 * 1024, true, false);
    test_io_config(8, EXPERT_IO_DEFAULT_CHUNK, true, false);
    test_io_config(3, 64 * 1024, true, true);
    test_io_errors(0, false);
    test_io_errors(4, false);
    test_io_errors(4, true);
    test_diskio();
    test_locator();
    unlink(g_path);
    free(g_data);
    return tu_finish();
}
