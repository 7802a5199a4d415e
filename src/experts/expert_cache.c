#include "experts/expert_cache.h"

#include "compute/backend.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL and we touch pages instead */
#endif

#define EC_A ((uint64_t)EXPERT_IO_ALIGN)
#define EC_MIN_HEADROOM (256ull << 20)

typedef struct ec_layer {
    int32_t block;        /* blk.N */
    uint8_t *slots;       /* (n_slots, stride) bytes, EC_A-aligned; NULL unless streamed; backend memory with dev_slots */
    uint8_t *host_tier;   /* host tier: (n_expert, stride) pinned bytes, expert e laid out as in a slot; NULL otherwise */
    uint64_t stride;      /* bytes per slot, multiple of EC_A */
    cache_layer cl;       /* streamed: the policy state */
    uint16_t *busy;       /* (n_slots) fetches holding each slot (pinned until released) */
    uint8_t *prefetched;  /* (n_slots) 1: filled by a prefetch no pass has asked for yet */
    expert_cache_stats st;
    uint64_t dv_seen[TS_XP_COUNT]; /* the layer's backend counters (backend-planned passes) as last added to st */
} ec_layer;

struct expert_cache {
    pthread_mutex_t mu;     /* guards everything below that a pass changes: held for a whole fetch */
    pthread_cond_t freed;   /* signalled by every release (a fetch may be waiting for a victim) */
    ts_backend *be;         /* slot memory's owner, or NULL (heap) */
    const expert_map *map;
    const gguf_file *f;
    expert_residency mode;
    cache_policy policy;
    int32_t n_slots;        /* per layer; 0 unless streamed */
    uint64_t stride_max;    /* largest slot stride over the layers */
    uint64_t slot_bytes;    /* sum of the layers' slot buffers */
    ec_layer *layers;       /* (map->n_moe) */
    expert_io *io;          /* streamed only */
    int file_id;
    expert_nocache_mode nocache;
    bool disk_io;           /* sample /proc/self/io */
    uint64_t proc_base;     /* read_bytes at open / reset */
    bool proc_ok;
    bool mlocked;
    char mlock_note[160];   /* resident with mlock asked: what happened */
    /* resident and mapped: every expert addressable by id (expert_cache_tables) */
    const void **ptrs;      /* (n_moe, EXPERT_PROJ_COUNT, n_expert) backend address of each expert's slice */
    const void **tabs;      /* (n_moe, EXPERT_PROJ_COUNT) backend address of each ptrs row (the tables the ops read) */
    bool on_device;         /* the experts are device copies (a backend without host_memory) */
    bool dev_slots;         /* streamed: slots in backend memory, misses copied up through a stream (fetch_on) */
    expert_source source;   /* dev_slots: the tier misses come from (HOST or FILE) */
    uint64_t host_tier_bytes; /* all layers' host_tier buffers */
    uint8_t *staging;       /* file tier: (staging_k, stride_max) pinned bytes the misses are read into */
    int32_t staging_k;
    struct {
        const void *dev;
        size_t bytes;
    } *bound;               /* (n_bound) what weight_bind made: released at free */
    int n_bound;
    char choice[1024];
    void (*progress)(void *user, uint64_t bytes); /* expert_cache_opts.progress, during open */
    void *progress_user;

    /* streamed decode planned by the backend (expert_cache_device_*) */
    struct {
        uint8_t *state;       /* backend memory: (n_moe, layer_bytes) each layer's policy state, prefetch marks and
                                 counters (dv_off) */
        uint8_t *mirror;      /* backend host memory: the same bytes, what an upload sends and a download receives */
        uint64_t *layout;     /* backend memory: (n_moe, n_expert, TS_XP_LAYOUT_W) where an expert's slices sit in a slot */
        int32_t *plan;        /* backend memory: (n_moe, 3, CACHE_MAX_K) the passes' plans */
        uint64_t layer_bytes;
        uint64_t layout_bytes;
        bool stale;           /* a host pass changed the state since state was written */
        bool active;          /* between enter and leave: the lock is held, state is the truth */
    } dv;

    /* the pass between begin and end */
    bool pending;
    int32_t pend_block, pend_moe;
    int32_t pend_ids[CACHE_MAX_K];
    cache_plan pend_plan;
    int32_t pend_cold, pend_evict;
    uint64_t pend_bytes_req, pend_bytes_read;
    int n_req;
    expert_io_req req[CACHE_MAX_K * EXPERT_PROJ_COUNT];
    struct ts_stream *pend_st; /* dev_slots: the stream the copies go on */
    int n_copy;
    struct {
        void *dst;          /* the slot (backend memory) */
        const void *src;    /* host tier or staging */
        uint64_t bytes;     /* the expert's laid-out length */
    } copy[CACHE_MAX_K];
    uint64_t pend_bytes_up;
};

/* ------------------------------------------------------------ names, parsers */

/* Names indexed by the enum's value (each enum counts from 0). */
static const char *const residency_names[] = {"auto", "resident", "streamed", "mapped"};
static const char *const source_names[] = {"auto", "host", "file"};

static const char *enum_name(int v, const char *const *names, int n) { return v >= 0 && v < n ? names[v] : "?"; }

/* The value whose name is s, or -1. */
static int enum_parse(const char *s, const char *const *names, int n) {
    for (int v = 0; s && v < n; v++)
        if (!strcmp(s, names[v])) return v;
    return -1;
}

#define N_NAMES(a) ((int)(sizeof a / sizeof a[0]))

const char *expert_residency_name(expert_residency r) { return enum_name((int)r, residency_names, N_NAMES(residency_names)); }
const char *expert_source_name(expert_source s) { return enum_name((int)s, source_names, N_NAMES(source_names)); }

ts_status expert_cache_parse_residency(const char *s, expert_residency *out) {
    int v = enum_parse(s, residency_names, N_NAMES(residency_names));
    if (v < 0) return ts_fail(TS_ERR_ARG, "expert residency '%s': expected resident, streamed, mapped or auto", s ? s : "");
    *out = (expert_residency)v;
    return TS_OK;
}

ts_status expert_cache_parse_source(const char *s, expert_source *out) {
    int v = enum_parse(s, source_names, N_NAMES(source_names));
    if (v < 0) return ts_fail(TS_ERR_ARG, "expert source '%s': expected host, file or auto", s ? s : "");
    *out = (expert_source)v;
    return TS_OK;
}

ts_status expert_cache_parse_slots(const char *s, int32_t *out) {
    if (s && !strcmp(s, "auto")) {
        *out = 0;
        return TS_OK;
    }
    char *end = NULL;
    errno = 0;
    long v = s && isdigit((unsigned char)*s) ? strtol(s, &end, 10) : -1;
    if (!s || v < 1 || errno || *end || v > (1L << 20))
        return ts_fail(TS_ERR_ARG, "expert cache slots '%s': expected a positive slot count or auto", s ? s : "");
    *out = (int32_t)v;
    return TS_OK;
}

ts_status expert_cache_parse_policy(const char *s, cache_policy *out) {
    if (s && cache_policy_parse(s, out)) return TS_OK;
    return ts_fail(TS_ERR_ARG, "expert policy '%s': expected lfu or lru", s ? s : "");
}

void expert_cache_opts_default(expert_cache_opts *o) {
    memset(o, 0, sizeof *o);
    o->residency = EXPERT_RESIDENCY_AUTO;
    o->policy = CACHE_POLICY_LFU;
    expert_io_config_default(&o->io);
}

/* ------------------------------------------------------------ available memory */

static bool read_u64_file(const char *path, uint64_t *out) {
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    char line[64];
    bool ok = false;
    if (fgets(line, sizeof line, fp)) {
        if (!strncmp(line, "max", 3)) {
            *out = UINT64_MAX;
            ok = true;
        } else {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(line, &end, 10);
            if (!errno && end != line) {
                *out = v;
                ok = true;
            }
        }
    }
    fclose(fp);
    return ok;
}

/* "key value" line of a stat-like file (memory.stat, /proc/meminfo "Key: v kB"). */
static bool read_keyed(const char *path, const char *key, uint64_t *out) {
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    char line[256];
    size_t kl = strlen(key);
    bool ok = false;
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, key, kl) || (line[kl] != ' ' && line[kl] != ':' && line[kl] != '\t')) continue;
        char *p = line + kl + (line[kl] == ':');
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p) break;
        while (*end == ' ') end++;
        if (!strncmp(end, "kB", 2)) v *= 1024;
        *out = v;
        ok = true;
        break;
    }
    fclose(fp);
    return ok;
}

/* Walks from this process's group up to the hierarchy's root and keeps the
 * tightest limit - (usage - inactive page cache). The page cache counts as
 * usage, but its inactive part is what the kernel reclaims first. */
static void cgroup_walk(const char *mount, const char *rel, bool v2, uint64_t *best, bool *found) {
    char dir[1024], path[1100];
    if (snprintf(dir, sizeof dir, "%s%s", mount, rel) >= (int)sizeof dir) return;
    size_t ml = strlen(mount);
    for (;;) {
        uint64_t lim, use, inact = 0;
        snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
        bool have = read_u64_file(path, &lim);
        snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
        have = have && read_u64_file(path, &use);
        if (have && lim < (1ull << 60)) {
            snprintf(path, sizeof path, "%s/memory.stat", dir);
            if (!read_keyed(path, v2 ? "inactive_file" : "total_inactive_file", &inact)) inact = 0;
            uint64_t held = use > inact ? use - inact : 0;
            uint64_t av = lim > held ? lim - held : 0;
            if (!*found || av < *best) *best = av;
            *found = true;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < ml) break;
        *slash = 0;
    }
}

ts_status expert_cache_available_memory(uint64_t *out, char *src, size_t src_n) {
    uint64_t mem = 0, cg = 0;
    bool have_mem = read_keyed("/proc/meminfo", "MemAvailable", &mem), have_cg = false;
    FILE *fp = fopen("/proc/self/cgroup", "r");
    if (fp) {
        char line[1024];
        while (fgets(line, sizeof line, fp)) {
            line[strcspn(line, "\n")] = 0;
            char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2) continue;
            const char *rel = c2 + 1;
            if (!strcmp(rel, "/")) rel = "";
            *c2 = 0;
            const char *ctrls = c1 + 1;
            if (!strcmp(line, "0") && !*ctrls) {
                cgroup_walk("/sys/fs/cgroup", rel, true, &cg, &have_cg);
            } else {
                /* v1: the memory controller's line ("4:memory:/x"). */
                char buf[256];
                snprintf(buf, sizeof buf, ",%s,", ctrls);
                if (strstr(buf, ",memory,")) cgroup_walk("/sys/fs/cgroup/memory", rel, false, &cg, &have_cg);
            }
        }
        fclose(fp);
    }
    if (!have_mem && !have_cg) {
        *out = 0;
        return ts_fail(TS_ERR_UNSUPPORTED, "available memory unknown: no MemAvailable in /proc/meminfo and no cgroup memory limit");
    }
    bool use_cg = have_cg && (!have_mem || cg < mem);
    *out = use_cg ? cg : mem;
    if (src && src_n) snprintf(src, src_n, "%s", use_cg ? "cgroup memory limit" : "MemAvailable");
    return TS_OK;
}

/* ------------------------------------------------------------ layout */

/* Positions of expert e's three slices inside a slot: one after the other,
 * each congruent to its file offset mod EC_A. Returns the end. */
static uint64_t place_expert(const expert_map *m, int32_t l, int32_t e, uint64_t pos[EXPERT_PROJ_COUNT]) {
    uint64_t p = 0;
    for (int j = 0; j < EXPERT_PROJ_COUNT; j++) {
        const expert_slice *s = expert_map_slice(m, l, e, j);
        p += (s->offset - p) & (EC_A - 1);
        pos[j] = p;
        p += s->nbytes;
    }
    return p;
}

/* The reads that put expert e of MoE layer l at dst, laid out as in a slot
 * (place_expert), appended to req at *n; returns the slices' bytes. */
static uint64_t expert_reads(const expert_cache *c, int32_t l, int32_t e, uint8_t *dst, expert_io_req *req, int *n) {
    uint64_t pos[EXPERT_PROJ_COUNT], bytes = 0;
    place_expert(c->map, l, e, pos);
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
        const expert_slice *s = expert_map_slice(c->map, l, e, p);
        if (s->nbytes) req[(*n)++] = (expert_io_req){c->file_id, s->offset, s->nbytes, dst + pos[p]};
        bytes += s->nbytes;
    }
    return bytes;
}

/* Warm-up: the first MoE layer's first k experts read to base + e * stride
 * (not committed: the slots stay empty to the policy). It grows the pool's
 * chunk array to a pass's size and checks the file reads before a token. */
static ts_status warm_up(expert_cache *c, uint8_t *base, uint64_t stride, int32_t k) {
    int n = 0;
    for (int32_t e = 0; e < k; e++) expert_reads(c, 0, e, base + (uint64_t)e * stride, c->req, &n);
    ts_status st = expert_io_read(c->io, c->req, n);
    if (st) ts_error_prefix("expert cache: first read of blk.%d's experts", c->layers[0].block);
    return st;
}

static int32_t moe_of(const expert_cache *c, int32_t block) {
    if (block < 0 || block >= c->map->n_block) return -1;
    return c->map->moe_of_block[block];
}

/* ------------------------------------------------------------ resident */

typedef int (*range_fn)(const uint8_t *addr, uint64_t len, void *ctx);

/* Calls fn on the page-rounded ranges of all expert slices, consecutive
 * slices (a stacked tensor's experts) merged. Stops at the first non-zero. */
static int for_expert_ranges(const expert_cache *c, range_fn fn, void *ctx) {
    const expert_map *m = c->map;
    const uint8_t *base = c->f->map.data;
    uint64_t size = c->f->map.size, pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t cur = 0, end = 0;
    bool open = false;
    for (int32_t l = 0; l < m->n_moe; l++)
        for (int p = 0; p < EXPERT_PROJ_COUNT; p++)
            for (int32_t e = 0; e < m->n_expert; e++) {
                const expert_slice *s = expert_map_slice(m, l, e, p);
                if (!s->nbytes) continue;
                if (open && s->offset == end) {
                    end += s->nbytes;
                    continue;
                }
                if (open) {
                    uint64_t a = cur & ~(pg - 1), b = end > size ? size : end;
                    int r = fn(base + a, b - a, ctx);
                    if (r) return r;
                }
                cur = s->offset;
                end = s->offset + s->nbytes;
                open = true;
            }
    if (open) {
        uint64_t a = cur & ~(pg - 1), b = end > size ? size : end;
        return fn(base + a, b - a, ctx);
    }
    return 0;
}

static void loaded(const expert_cache *c, uint64_t bytes) {
    if (c->progress) c->progress(c->progress_user, bytes);
}

static int populate_range(const uint8_t *addr, uint64_t len, void *ctx) {
    const expert_cache *c = ctx;
    uintptr_t a = (uintptr_t)addr & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    if (madvise((void *)a, len + ((uintptr_t)addr - a), MADV_POPULATE_READ) != 0) {
        /* Older kernel, or memory madvise does not cover: touch one byte a page. */
        volatile uint8_t sink = 0;
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
        for (uint64_t i = 0; i < len; i += pg) sink ^= addr[i];
        if (len) sink ^= addr[len - 1];
        (void)sink;
    }
    loaded(c, len);
    return 0;
}

typedef struct lock_ctx {
    uint64_t done;
    int err;
} lock_ctx;

static int lock_range(const uint8_t *addr, uint64_t len, void *ctx) {
    lock_ctx *lc = ctx;
    if (mlock(addr, len) != 0) {
        lc->err = errno;
        return 1;
    }
    lc->done += len;
    return 0;
}

static int unlock_range(const uint8_t *addr, uint64_t len, void *ctx) {
    (void)ctx;
    munlock(addr, len);
    return 0;
}

/* ------------------------------------------------------------ open */

/* The experts' memory budget: --expert-budget, or what is available less the
 * rest of the run and a headroom (1/16 of it, at least 256 MiB) for the OS
 * and the unforeseen. */
static ts_status resolve_budget(const expert_cache_opts *o, uint64_t *budget, bool *explicit_budget, char *why, size_t n) {
    char b1[32];
    if (o->budget_bytes) {
        *budget = o->budget_bytes;
        *explicit_budget = true;
        ts_fmt_bytes(o->budget_bytes, 1, b1, sizeof b1);
        snprintf(why, n, "the %s expert budget", b1);
        return TS_OK;
    }
    *explicit_budget = false;
    uint64_t avail = o->avail_bytes;
    char src[64] = "given";
    if (!avail) {
        ts_status st = expert_cache_available_memory(&avail, src, sizeof src);
        if (st) return st;
    }
    uint64_t head = avail / 16 > EC_MIN_HEADROOM ? avail / 16 : EC_MIN_HEADROOM;
    uint64_t take = o->reserve_bytes + head;
    *budget = avail > take ? avail - take : 0;
    char b2[32], b3[32], b4[32];
    ts_fmt_bytes(*budget, 1, b1, sizeof b1);
    ts_fmt_bytes(avail, 1, b2, sizeof b2);
    ts_fmt_bytes(o->reserve_bytes, 1, b3, sizeof b3);
    ts_fmt_bytes(head, 1, b4, sizeof b4);
    snprintf(why, n, "the %s budget left of %s available (%s) after %s reserved and %s headroom", b1, b2, src, b3, b4);
    return TS_OK;
}

/* Backend slots: the backend memory the experts may take. --gpu-expert-budget,
 * or what the backend has free less a headroom (1/8 of it, at least 1 GiB)
 * for what comes after the load: KV caches and session scratch. */
static ts_status resolve_device_budget(const expert_cache *c, const expert_cache_opts *o, uint64_t *budget, bool *explicit_budget,
                                       char *why, size_t n) {
    char b1[32], b2[32], b3[32];
    const char *dev = c->be->ops->name;
    if (o->device_budget_bytes) {
        *budget = o->device_budget_bytes;
        *explicit_budget = true;
        snprintf(why, n, "the %s %s expert budget", ts_fmt_bytes(*budget, 1, b1, sizeof b1), dev);
        return TS_OK;
    }
    *explicit_budget = false;
    uint64_t avail = o->device_avail_bytes, total = 0;
    if (!avail) {
        if (!c->be->ops->mem_info)
            return ts_fail(TS_ERR_UNSUPPORTED, "expert cache: free %s memory unknown; give a GPU expert budget or a slot count", dev);
        ts_status st = c->be->ops->mem_info(c->be, &avail, &total);
        if (st) return st;
    }
    uint64_t head = avail / 8 > (1ull << 30) ? avail / 8 : (1ull << 30);
    *budget = avail > head ? avail - head : 0;
    snprintf(why, n, "the %s budget left of %s free %s memory after %s headroom for KV caches and scratch",
             ts_fmt_bytes(*budget, 1, b1, sizeof b1), ts_fmt_bytes(avail, 1, b2, sizeof b2), dev, ts_fmt_bytes(head, 1, b3, sizeof b3));
    return TS_OK;
}

/* Bytes n_moe layers of per_layer slots take, with every layer's own stride. */
static uint64_t slots_total(const expert_cache *c, uint64_t per_layer) {
    uint64_t t = 0;
    for (int32_t l = 0; l < c->map->n_moe; l++) {
        uint64_t b;
        if (!ts_mul_u64(per_layer, c->layers[l].stride, &b) || !ts_add_u64(t, b, &t)) return UINT64_MAX;
    }
    return t;
}

static ts_status refuse_budget(const expert_cache *c, uint64_t budget, const char *why) {
    const expert_map *m = c->map;
    uint64_t need = c->stride_max * (uint64_t)m->n_moe * (uint64_t)m->n_expert_used;
    char bn[32], bs[32];
    ts_fmt_bytes(need, 1, bn, sizeof bn);
    ts_fmt_bytes(c->stride_max, 1, bs, sizeof bs);
    return ts_fail(TS_ERR_LIMIT,
                   "expert cache: %s (%" PRIu64 " bytes) cannot hold top-k = %d experts in each of %d MoE layers: "
                   "that needs %d x %d slots of up to %" PRIu64 " bytes (%s) = %" PRIu64 " bytes (%s)",
                   why, budget, m->n_expert_used, m->n_moe, m->n_moe, m->n_expert_used, c->stride_max, bs, need, bn);
}

/* Backend slots: the tier the misses are copied from. The host tier reads
 * every expert now (the first read checks the file as the warm-up does);
 * the file tier reads top-k experts of the first layer into the staging. */
static ts_status open_tier(expert_cache *c) {
    const expert_map *m = c->map;
    ts_status st = TS_OK;
    if (c->source == EXPERT_SOURCE_HOST) {
        expert_io_req *rq = ts_calloc((size_t)m->n_expert * EXPERT_PROJ_COUNT, sizeof *rq);
        if (!rq) return TS_ERR_NOMEM;
        for (int32_t l = 0; l < m->n_moe && st == TS_OK; l++) {
            ec_layer *L = &c->layers[l];
            size_t bytes = (size_t)((uint64_t)m->n_expert * L->stride);
            if (!(L->host_tier = c->be->ops->host_alloc(c->be, bytes))) {
                char b[32];
                st = ts_fail(TS_ERR_NOMEM, "expert cache: out of pinned host memory for blk.%d's experts (%s)", L->block,
                             ts_fmt_bytes(bytes, 1, b, sizeof b));
                break;
            }
            c->host_tier_bytes += bytes;
            int n = 0;
            uint64_t got = 0;
            for (int32_t e = 0; e < m->n_expert; e++) got += expert_reads(c, l, e, L->host_tier + (uint64_t)e * L->stride, rq, &n);
            if ((st = expert_io_read(c->io, rq, n))) ts_error_prefix("expert cache: reading blk.%d's experts into host memory", L->block);
            else loaded(c, got);
        }
        free(rq);
        return st;
    }
    c->staging_k = c->n_slots < CACHE_MAX_K ? c->n_slots : CACHE_MAX_K;
    size_t bytes = (size_t)((uint64_t)c->staging_k * c->stride_max);
    if (!(c->staging = c->be->ops->host_alloc(c->be, bytes))) {
        char b[32];
        return ts_fail(TS_ERR_NOMEM, "expert cache: out of pinned host memory for the staging (%s)", ts_fmt_bytes(bytes, 1, b, sizeof b));
    }
    return warm_up(c, c->staging, c->stride_max, m->n_expert_used < c->staging_k ? m->n_expert_used : c->staging_k);
}

static ts_status open_streamed(expert_cache *c, const expert_cache_opts *o) {
    const expert_map *m = c->map;
    ts_status st = expert_io_new(&o->io, &c->io);
    if (st) return st;
    st = expert_io_attach_fd(c->io, c->f->map.fd, c->f->path, &c->file_id);
    if (st) return st;
    c->nocache = expert_io_nocache_mode(c->io, c->file_id);
    uint64_t total = slots_total(c, (uint64_t)c->n_slots);
    if (total == UINT64_MAX || total > (uint64_t)SIZE_MAX / 2)
        return ts_fail(TS_ERR_LIMIT, "expert cache: %d slots per layer overflow the address space", c->n_slots);
    for (int32_t l = 0; l < m->n_moe; l++) {
        ec_layer *L = &c->layers[l];
        size_t bytes = (size_t)((uint64_t)c->n_slots * L->stride);
        void *p = NULL;
        if (bytes && c->dev_slots) p = c->be->ops->alloc(c->be, bytes); /* zero-filled */
        else if (bytes && c->be) p = c->be->ops->host_alloc(c->be, bytes);
        else if (bytes && posix_memalign(&p, EC_A, bytes) != 0) p = NULL;
        if (bytes && !p) {
            char b[32];
            ts_fmt_bytes(bytes, 1, b, sizeof b);
            return ts_fail(TS_ERR_NOMEM, "expert cache: out of %s memory for %d slots of blk.%d (%s)",
                           c->dev_slots ? c->be->ops->name : "host", c->n_slots, L->block, b);
        }
        /* Touch the slots now: their memory is taken at open, not on the
         * first tokens, and the contents are defined. */
        if (!c->dev_slots) memset(p, 0, bytes);
        L->slots = p;
        if ((st = cache_layer_init(&L->cl, c->n_slots, m->n_expert, c->policy))) return st;
        if (!(L->busy = ts_calloc((size_t)c->n_slots, sizeof *L->busy))) return TS_ERR_NOMEM;
        if (!(L->prefetched = ts_calloc((size_t)c->n_slots, 1))) return TS_ERR_NOMEM;
    }
    c->slot_bytes = total;
    if (c->dev_slots) return open_tier(c);

    return warm_up(c, c->layers[0].slots, c->layers[0].stride, m->n_expert_used < c->n_slots ? m->n_expert_used : c->n_slots);
}

static ts_status bind_range(expert_cache *c, const void *host, size_t bytes, const void **dev) {
    if (!c->be) {
        *dev = host;
        return TS_OK;
    }
    void *nb = ts_realloc(c->bound, sizeof *c->bound * (size_t)(c->n_bound + 1));
    if (!nb) return TS_ERR_NOMEM;
    c->bound = nb;
    ts_status st = c->be->ops->weight_bind(c->be, host, bytes, dev);
    if (st != TS_OK) return st;
    c->bound[c->n_bound].dev = *dev;
    c->bound[c->n_bound++].bytes = bytes;
    return TS_OK;
}

/* Resident and mapped: every expert's slices made addressable by id. On a
 * host-memory backend the table entries point into the mapping; on a device
 * each projection's experts are copied once (a stacked tensor in one piece)
 * and the entries point into the copy. The tables themselves are bound too,
 * so the ops read them where they run. */
static ts_status build_tables(expert_cache *c) {
    const expert_map *m = c->map;
    const size_t NE = (size_t)m->n_expert, nt = (size_t)m->n_moe * EXPERT_PROJ_COUNT;
    c->ptrs = ts_calloc(nt * NE, sizeof *c->ptrs);
    c->tabs = ts_calloc(nt, sizeof *c->tabs);
    if (!c->ptrs || !c->tabs) return TS_ERR_NOMEM;
    const uint8_t *base = c->f->map.data;
    ts_status st;
    for (int32_t l = 0; l < m->n_moe; l++)
        for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
            const void **row = c->ptrs + ((size_t)l * EXPERT_PROJ_COUNT + (size_t)p) * NE;
            for (int32_t e0 = 0; e0 < m->n_expert;) {
                /* the longest run of experts whose slices follow each other in the file */
                const expert_slice *s0 = expert_map_slice(m, l, e0, p);
                uint64_t end = s0->offset + s0->nbytes;
                int32_t e1 = e0 + 1;
                while (e1 < m->n_expert && expert_map_slice(m, l, e1, p)->offset == end) end += expert_map_slice(m, l, e1++, p)->nbytes;
                const void *dev = base + s0->offset;
                if (c->on_device) {
                    if ((st = bind_range(c, base + s0->offset, (size_t)(end - s0->offset), &dev)) != TS_OK) {
                        ts_error_prefix("expert cache: blk.%d %s experts to the device", c->layers[l].block, expert_proj_name(p));
                        return st;
                    }
                    loaded(c, end - s0->offset);
                }
                for (int32_t e = e0; e < e1; e++) row[e] = (const uint8_t *)dev + (expert_map_slice(m, l, e, p)->offset - s0->offset);
                e0 = e1;
            }
            if ((st = bind_range(c, row, sizeof *row * NE, &c->tabs[(size_t)l * EXPERT_PROJ_COUNT + (size_t)p])) != TS_OK) return st;
        }
    return TS_OK;
}

ts_status expert_cache_new(const expert_map *map, const gguf_file *f, const expert_cache_opts *opts, expert_cache **out) {
    *out = NULL;
    expert_cache_opts defaults;
    if (!opts) {
        expert_cache_opts_default(&defaults);
        opts = &defaults;
    }
    if (!map || !f) return ts_fail(TS_ERR_ARG, "expert cache: no expert map or file");
    if (map->n_moe < 1 || map->n_expert < 1)
        return ts_fail(TS_ERR_ARG, "expert cache: %s has no routed experts", f->path ? f->path : "the model");
    if (opts->policy != CACHE_POLICY_LFU && opts->policy != CACHE_POLICY_LRU)
        return ts_fail(TS_ERR_ARG, "expert cache: unknown policy %d (expected lfu or lru)", (int)opts->policy);
    if (opts->residency < EXPERT_RESIDENCY_AUTO || opts->residency > EXPERT_RESIDENCY_MAPPED)
        return ts_fail(TS_ERR_ARG, "expert cache: unknown residency %d", (int)opts->residency);
    if (opts->n_slots < 0) return ts_fail(TS_ERR_ARG, "expert cache: %d slots per layer", opts->n_slots);
    const int32_t k = map->n_expert_used;
    if (opts->n_slots > 0 && opts->n_slots < k)
        return ts_fail(TS_ERR_ARG,
                       "expert cache: %d slots per layer is below top-k = %d: every routed pass needs its %d experts in "
                       "slots at once",
                       opts->n_slots, k, k);

    expert_cache *c = ts_calloc(1, sizeof *c);
    if (!c) return TS_ERR_NOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->freed, NULL);
    c->be = opts->be;
    c->progress = opts->progress;
    c->progress_user = opts->progress_user;
    c->map = map;
    c->f = f;
    c->policy = opts->policy;
    c->file_id = -1;
    c->layers = ts_calloc((size_t)map->n_moe, sizeof *c->layers);
    if (!c->layers) {
        free(c);
        return TS_ERR_NOMEM;
    }
    for (int32_t l = 0; l < map->n_moe; l++) {
        uint64_t mx = 0, pos[EXPERT_PROJ_COUNT];
        for (int32_t e = 0; e < map->n_expert; e++) {
            uint64_t end = place_expert(map, l, e, pos);
            if (end > mx) mx = end;
        }
        c->layers[l].block = map->layers[l].block;
        c->layers[l].stride = (mx + EC_A - 1) & ~(EC_A - 1);
        if (c->layers[l].stride > c->stride_max) c->stride_max = c->layers[l].stride;
    }

    ts_status st = TS_OK;
    const bool have_fd = f->map.fd >= 0;
    expert_residency mode = opts->residency;
    char why[384] = "", bt[32];
    uint64_t budget = 0;
    bool explicit_budget = false, have_budget = false;
    ts_fmt_bytes(map->total_bytes, 1, bt, sizeof bt);
    c->on_device = c->be && !c->be->host_memory;
    if (opts->backend_slots && !c->be) {
        st = ts_fail(TS_ERR_ARG, "expert cache: backend slots need a backend");
        goto fail;
    }
    if (opts->source < EXPERT_SOURCE_AUTO || opts->source > EXPERT_SOURCE_FILE) {
        st = ts_fail(TS_ERR_ARG, "expert cache: unknown expert source %d", (int)opts->source);
        goto fail;
    }
    if (c->on_device) {
        /* a device backend reads experts from its own memory: all of them
         * (resident), or the routed ones copied into slots (streamed) */
        if (mode == EXPERT_RESIDENCY_MAPPED) {
            st = ts_fail(TS_ERR_UNSUPPORTED,
                         "expert cache: the %s backend cannot read experts from the file mapping; use --expert-residency "
                         "resident or streamed (or auto)",
                         c->be->ops->name);
            goto fail;
        }
        if (mode == EXPERT_RESIDENCY_AUTO && opts->n_slots > 0 && have_fd) {
            mode = EXPERT_RESIDENCY_STREAMED;
            snprintf(c->choice, sizeof c->choice, "expert residency: streamed into %s memory (auto: %d slots per layer given)",
                     c->be->ops->name, opts->n_slots);
        } else if (mode == EXPERT_RESIDENCY_AUTO) {
            if ((st = resolve_device_budget(c, opts, &budget, &explicit_budget, why, sizeof why)) != TS_OK) goto fail;
            have_budget = true;
            uint64_t need_min = c->stride_max * (uint64_t)map->n_moe * (uint64_t)k;
            if (map->total_bytes <= budget) {
                mode = EXPERT_RESIDENCY_RESIDENT;
                snprintf(c->choice, sizeof c->choice, "expert residency: resident in %s memory (auto: all %s of experts fit %s)",
                         c->be->ops->name, bt, why);
            } else if (budget >= need_min && have_fd) {
                mode = EXPERT_RESIDENCY_STREAMED;
                snprintf(c->choice, sizeof c->choice, "expert residency: streamed into %s memory (auto: %s of experts exceed %s)",
                         c->be->ops->name, bt, why);
            } else {
                st = have_fd ? refuse_budget(c, budget, why)
                             : ts_fail(TS_ERR_UNSUPPORTED, "expert cache: %s of experts exceed %s, and the file has no descriptor to stream from",
                                       bt, why);
                goto fail;
            }
        } else {
            snprintf(c->choice, sizeof c->choice, "expert residency: %s in %s memory (as asked)", expert_residency_name(mode),
                     c->be->ops->name);
        }
    } else if (mode == EXPERT_RESIDENCY_AUTO) {
        if (opts->n_slots > 0 && have_fd) {
            mode = EXPERT_RESIDENCY_STREAMED;
            snprintf(c->choice, sizeof c->choice, "expert residency: streamed (auto: %d slots per layer given)", opts->n_slots);
        } else if ((st = resolve_budget(opts, &budget, &explicit_budget, why, sizeof why)) != TS_OK) {
            mode = EXPERT_RESIDENCY_MAPPED;
            snprintf(c->choice, sizeof c->choice, "expert residency: mapped (auto: %s; the page cache serves experts)", ts_last_error());
            st = TS_OK;
        } else {
            have_budget = true;
            /* The slot arithmetic sizes every layer's slots by the largest stride. */
            uint64_t need_min = c->stride_max * (uint64_t)map->n_moe * (uint64_t)k;
            if (map->total_bytes <= budget) {
                mode = EXPERT_RESIDENCY_RESIDENT;
                snprintf(c->choice, sizeof c->choice, "expert residency: resident (auto: all %s of experts fit %s)", bt, why);
            } else if (budget >= need_min && have_fd) {
                mode = EXPERT_RESIDENCY_STREAMED;
                snprintf(c->choice, sizeof c->choice, "expert residency: streamed (auto: %s of experts exceed %s)", bt, why);
            } else if (explicit_budget && have_fd) {
                st = refuse_budget(c, budget, why);
                goto fail;
            } else {
                mode = EXPERT_RESIDENCY_MAPPED;
                char bn[32];
                ts_fmt_bytes(need_min, 1, bn, sizeof bn);
                if (!have_fd)
                    snprintf(c->choice, sizeof c->choice,
                             "expert residency: mapped (auto: %s of experts exceed %s, and the file has no descriptor to stream from)",
                             bt, why);
                else
                    snprintf(c->choice, sizeof c->choice,
                             "expert residency: mapped (auto: %s is below the %s that top-k slots need; the page cache serves "
                             "experts)",
                             why, bn);
            }
        }
    } else {
        snprintf(c->choice, sizeof c->choice, "expert residency: %s (as asked)", expert_residency_name(mode));
    }
    c->mode = mode;

    if (mode == EXPERT_RESIDENCY_STREAMED) {
        if (!have_fd) {
            st = ts_fail(TS_ERR_UNSUPPORTED, "expert cache: %s has no file descriptor to stream experts from (opened from memory)",
                         f->path ? f->path : "the model");
            goto fail;
        }
        c->dev_slots = c->on_device || opts->backend_slots;
        int32_t n = opts->n_slots;
        /* the slots' budget: backend memory for backend slots, host memory otherwise */
        const uint64_t slot_budget = c->dev_slots ? opts->device_budget_bytes : opts->budget_bytes;
        if (n > 0) {
            if (slot_budget) {
                uint64_t need = slots_total(c, (uint64_t)(n < map->n_expert ? n : map->n_expert));
                if (need > slot_budget) {
                    char b1[32], b2[32];
                    ts_fmt_bytes(need, 1, b1, sizeof b1);
                    ts_fmt_bytes(slot_budget, 1, b2, sizeof b2);
                    st = ts_fail(TS_ERR_LIMIT,
                                 "expert cache: %d slots per layer need %" PRIu64 " bytes (%s), over the %s expert budget %" PRIu64
                                 " bytes (%s)",
                                 n, need, b1, c->dev_slots ? c->be->ops->name : "host", slot_budget, b2);
                    goto fail;
                }
            }
        } else {
            if (!have_budget && c->dev_slots) {
                if ((st = resolve_device_budget(c, opts, &budget, &explicit_budget, why, sizeof why))) goto fail;
            } else if (!have_budget) {
                if ((st = resolve_budget(opts, &budget, &explicit_budget, why, sizeof why))) {
                    ts_error_prefix("expert cache: cannot size the slots (give a slot count or an expert budget)");
                    goto fail;
                }
            }
            uint64_t per = c->stride_max ? budget / c->stride_max / (uint64_t)map->n_moe : (uint64_t)map->n_expert;
            if (per < (uint64_t)k) {
                st = refuse_budget(c, budget, why);
                goto fail;
            }
            n = per > (uint64_t)map->n_expert ? map->n_expert : (int32_t)per;
        }
        /* More slots than experts never evict and place experts exactly as
         * n_expert slots do (empty slots fill lowest first): same hits. */
        c->n_slots = n < map->n_expert ? n : map->n_expert;
        if (c->dev_slots) {
            /* the tier: pinned host memory when every expert fits the host budget */
            c->source = opts->source;
            char hwhy[384] = "", tail[512];
            uint64_t hb = 0;
            bool hexp = false;
            if (c->source == EXPERT_SOURCE_AUTO) {
                ts_status hs = resolve_budget(opts, &hb, &hexp, hwhy, sizeof hwhy);
                c->source = hs == TS_OK && map->total_bytes <= hb ? EXPERT_SOURCE_HOST : EXPERT_SOURCE_FILE;
                if (hs != TS_OK) snprintf(hwhy, sizeof hwhy, "%s", ts_last_error());
                snprintf(tail, sizeof tail, "; misses copied from %s (auto: %s of experts %s %s)",
                         c->source == EXPERT_SOURCE_HOST ? "pinned host memory" : "the file", bt,
                         c->source == EXPERT_SOURCE_HOST ? "fit" : "do not fit", hwhy);
            } else {
                snprintf(tail, sizeof tail, "; misses copied from %s (as asked)",
                         c->source == EXPERT_SOURCE_HOST ? "pinned host memory" : "the file");
            }
            size_t cl = strlen(c->choice);
            snprintf(c->choice + cl, sizeof c->choice - cl, "%s", tail);
        }
        if ((st = open_streamed(c, opts))) goto fail;
    } else if (mode == EXPERT_RESIDENCY_RESIDENT) {
        const uint64_t rb = c->on_device ? opts->device_budget_bytes : opts->budget_bytes;
        if (rb && map->total_bytes > rb) {
            char b2[32];
            ts_fmt_bytes(rb, 1, b2, sizeof b2);
            st = ts_fail(TS_ERR_LIMIT,
                         "expert cache: resident experts take %" PRIu64 " bytes (%s), over the %s expert budget %" PRIu64 " bytes (%s)",
                         map->total_bytes, bt, c->on_device ? c->be->ops->name : "host", rb, b2);
            goto fail;
        }
        if (!c->on_device) for_expert_ranges(c, populate_range, c);
        if (opts->mlock && !c->on_device) {
            lock_ctx lc = {0, 0};
            if (for_expert_ranges(c, lock_range, &lc)) {
                for_expert_ranges(c, unlock_range, NULL);
                snprintf(c->mlock_note, sizeof c->mlock_note, "mlock failed: %s", strerror(lc.err));
            } else {
                c->mlocked = true;
                snprintf(c->mlock_note, sizeof c->mlock_note, "mlocked");
            }
        }
    }

    if (mode != EXPERT_RESIDENCY_STREAMED && (st = build_tables(c)) != TS_OK) goto fail;

    c->disk_io = opts->io.disk_io;
    if (c->disk_io) c->proc_ok = expert_io_proc_read_bytes(&c->proc_base) == TS_OK;
    *out = c;
    return TS_OK;
fail:
    expert_cache_free(c);
    return st;
}

static void dv_close(expert_cache *c); /* the backend-planned passes' buffers (below) */

void expert_cache_free(expert_cache *c) {
    if (!c) return;
    if (c->io) expert_io_free(c->io); /* waits for a batch in flight */
    if (c->mlocked) for_expert_ranges(c, unlock_range, NULL);
    for (int i = 0; i < c->n_bound; i++) c->be->ops->weight_unbind(c->be, c->bound[i].dev, c->bound[i].bytes);
    free(c->bound);
    free(c->ptrs);
    free(c->tabs);
    if (c->layers)
        for (int32_t l = 0; l < c->map->n_moe; l++) {
            ec_layer *L = &c->layers[l];
            if (L->slots && c->dev_slots) c->be->ops->dealloc(c->be, L->slots, (size_t)((uint64_t)c->n_slots * L->stride));
            else if (L->slots && c->be) c->be->ops->host_free(c->be, L->slots, (size_t)((uint64_t)c->n_slots * L->stride));
            else free(L->slots);
            if (L->host_tier) c->be->ops->host_free(c->be, L->host_tier, (size_t)((uint64_t)c->map->n_expert * L->stride));
            free(L->busy);
            free(L->prefetched);
            if (L->cl.slot_expert) cache_layer_free(&L->cl);
        }
    free(c->layers);
    if (c->dv.state) dv_close(c);
    if (c->staging) c->be->ops->host_free(c->be, c->staging, (size_t)((uint64_t)c->staging_k * c->stride_max));
    pthread_cond_destroy(&c->freed);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ------------------------------------------------------------ the pass */

/* A failed read or copy: the victims' bytes are gone and the new ones
 * incomplete, so the plan's miss slots are emptied and nothing is served
 * from them. */
static void empty_missed_slots(ec_layer *L, const cache_plan *plan) {
    for (int32_t i = 0; i < plan->k; i++) {
        if (plan->hit[i]) continue;
        int32_t s = plan->slot[i], old = L->cl.slot_expert[s];
        if (old >= 0) L->cl.expert_slot[old] = -1;
        L->cl.slot_expert[s] = -1;
        L->cl.slot_tick[s] = 0;
        L->prefetched[s] = 0;
    }
}

/* A host pass changed the policy state: the backend's copy (expert_cache_device_enter) is old. */
static void host_changed(expert_cache *c) { c->dv.stale = true; }

/* A fetched pass's slots are never victims until it is released (under the lock). */
static void pin_pass(expert_cache *c, expert_cache_pass *pass) {
    ec_layer *L = &c->layers[pass->moe];
    for (int32_t i = 0; i < pass->plan.k; i++) L->busy[pass->plan.slot[i]]++;
    pass->pinned = true;
}
static void unpin_pass(expert_cache *c, expert_cache_pass *pass) {
    ec_layer *L = &c->layers[pass->moe];
    for (int32_t i = 0; i < pass->plan.k; i++) L->busy[pass->plan.slot[i]]--;
    pass->pinned = false;
}

static ts_status begin_locked(expert_cache *c, int32_t block, const int32_t *ids, int32_t k, const void **gate, const void **up,
                              const void **down, expert_cache_pass *pass, bool avoid_busy) {
    if (c->pending)
        return ts_fail(TS_ERR_ARG, "expert cache: begin on blk.%d while blk.%d's pass is pending (expert_cache_end first)", block,
                       c->pend_block);
    int32_t moe = moe_of(c, block);
    if (moe < 0) return ts_fail(TS_ERR_ARG, "expert cache: blk.%d is not an MoE layer", block);
    if (!ids || !gate || !up || !down || k < 1 || k > CACHE_MAX_K)
        return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: bad request (%d experts)", block, k);
    const expert_map *m = c->map;
    ec_layer *L = &c->layers[moe];
    cache_plan *plan = &c->pend_plan;
    if (c->mode == EXPERT_RESIDENCY_STREAMED) {
        ts_status st = cache_plan_make_avoiding(&L->cl, ids, k, avoid_busy ? L->busy : NULL, plan);
        if (st == TS_ERR_LIMIT) return st; /* every victim is pinned: the caller waits */
        if (st) {
            ts_error_prefix("blk.%d", block);
            return st;
        }
    } else {
        for (int32_t i = 0; i < k; i++) {
            if (ids[i] < 0 || ids[i] >= m->n_expert)
                return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: expert id %d out of range [0, %d)", block, ids[i], m->n_expert);
            for (int32_t j = 0; j < i; j++)
                if (ids[j] == ids[i])
                    return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: expert %d requested twice in one pass", block, ids[i]);
            plan->slot[i] = -1;
            plan->hit[i] = true;
            plan->evicted[i] = -1;
        }
        plan->k = k;
        plan->n_miss = 0;
    }

    const void **w[EXPERT_PROJ_COUNT] = {gate, up, down};
    int n = 0, nc = 0;
    int32_t cold = 0, evict = 0;
    uint64_t breq = 0, bread = 0, bup = 0;
    for (int32_t i = 0; i < k; i++) {
        int32_t e = ids[i];
        if (c->mode == EXPERT_RESIDENCY_STREAMED) {
            uint64_t pos[EXPERT_PROJ_COUNT];
            const uint64_t len = place_expert(m, moe, e, pos);
            uint8_t *base = L->slots + (uint64_t)plan->slot[i] * L->stride;
            /* backend slots read into the staging (file tier) or not at all (host tier) */
            uint8_t *dst = base;
            if (c->dev_slots && !plan->hit[i]) {
                dst = c->source == EXPERT_SOURCE_FILE ? c->staging + (uint64_t)i * c->stride_max : L->host_tier + (uint64_t)e * L->stride;
                c->copy[nc].dst = base;
                c->copy[nc].src = dst;
                c->copy[nc++].bytes = len;
                bup += len;
            }
            for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
                w[p][i] = base + pos[p];
                breq += expert_map_slice(m, moe, e, p)->nbytes;
            }
            if (!plan->hit[i] && (!c->dev_slots || c->source == EXPERT_SOURCE_FILE)) bread += expert_reads(c, moe, e, dst, c->req, &n);
            if (!plan->hit[i]) {
                if (plan->evicted[i] >= 0) evict++;
                else cold++;
            }
        } else {
            for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
                const expert_slice *s = expert_map_slice(m, moe, e, p);
                w[p][i] = c->ptrs[((size_t)moe * EXPERT_PROJ_COUNT + (size_t)p) * (size_t)m->n_expert + (size_t)e];
                breq += s->nbytes;
            }
        }
    }
    if (n) {
        ts_status st = expert_io_submit(c->io, c->req, n);
        if (st) {
            ts_error_prefix("expert cache: blk.%d", block);
            return st;
        }
    }
    c->pending = true;
    c->pend_block = block;
    c->pend_moe = moe;
    memcpy(c->pend_ids, ids, sizeof(int32_t) * (size_t)k);
    c->pend_cold = cold;
    c->pend_evict = evict;
    c->pend_bytes_req = breq;
    c->pend_bytes_read = bread;
    c->pend_bytes_up = bup;
    c->n_req = n;
    c->n_copy = nc;
    if (pass) {
        pass->moe = moe;
        pass->tracked = c->mode != EXPERT_RESIDENCY_MAPPED;
        pass->plan = *plan;
        pass->n_cold = cold;
        pass->n_evict = evict;
        pass->bytes_requested = breq;
        pass->bytes_read = bread;
        pass->bytes_uploaded = bup;
    }
    return TS_OK;
}

static ts_status end_locked(expert_cache *c, int32_t block, double *waited) {
    *waited = 0;
    if (!c->pending) return ts_fail(TS_ERR_ARG, "expert cache: end on blk.%d without a begin", block);
    if (block != c->pend_block)
        return ts_fail(TS_ERR_ARG, "expert cache: end on blk.%d while blk.%d's pass is pending", block, c->pend_block);
    ec_layer *L = &c->layers[c->pend_moe];
    const cache_plan *plan = &c->pend_plan;
    ts_status st = TS_OK;
    if (c->n_req) {
        double t0 = ts_now();
        st = expert_io_wait(c->io);
        *waited = ts_now() - t0;
        L->st.io_wait_s += *waited;
    }
    c->pending = false;
    if (st == TS_OK && c->n_copy) {
        /* up into the slots on the caller's stream; the staging is reused by
         * the next pass, so the file tier waits for its copies here */
        const ts_backend_ops *op = c->be->ops;
        for (int i = 0; i < c->n_copy; i++) op->to_device(c->pend_st, c->copy[i].dst, c->copy[i].src, (size_t)c->copy[i].bytes);
        if (c->source == EXPERT_SOURCE_FILE) {
            double t0 = ts_now();
            st = op->sync(c->pend_st);
            double w = ts_now() - t0;
            *waited += w;
            L->st.io_wait_s += w;
        }
    }
    if (st) {
        empty_missed_slots(L, plan);
        host_changed(c);
        ts_error_prefix("expert cache: blk.%d: %s %d experts", block, c->dev_slots ? "copying" : "reading", plan->n_miss);
        return st;
    }
    expert_cache_stats *s = &L->st;
    if (c->mode == EXPERT_RESIDENCY_STREAMED) {
        /* the layer's prefetches are judged by its next pass: asked for
         * (a miss saved), or not (a copy wasted, whether or not this pass
         * evicts it) */
        for (int32_t i = 0; i < plan->k; i++)
            if (plan->hit[i] && L->prefetched[plan->slot[i]]) s->prefetch_saved++, L->prefetched[plan->slot[i]] = 0;
        for (int32_t j = 0; j < c->n_slots; j++)
            if (L->prefetched[j]) s->prefetch_wasted++, L->prefetched[j] = 0;
        cache_commit(&L->cl, c->pend_ids, plan);
        host_changed(c);
    }
    s->passes++;
    s->requests += (uint64_t)plan->k;
    if (c->mode == EXPERT_RESIDENCY_STREAMED) {
        s->hits += (uint64_t)(plan->k - plan->n_miss);
        s->misses += (uint64_t)plan->n_miss;
        s->cold_misses += (uint64_t)c->pend_cold;
        s->evict_misses += (uint64_t)c->pend_evict;
    } else if (c->mode == EXPERT_RESIDENCY_RESIDENT) {
        s->hits += (uint64_t)plan->k;
    }
    s->bytes_requested += c->pend_bytes_req;
    s->bytes_read += c->pend_bytes_read;
    s->bytes_uploaded += c->pend_bytes_up;
    return TS_OK;
}

ts_status expert_cache_begin(expert_cache *c, int32_t block, const int32_t *ids, int32_t k, const void **gate,
                             const void **up, const void **down, expert_cache_pass *pass) {
    if (c->dev_slots) return ts_fail(TS_ERR_ARG, "expert cache: backend slots are filled through a stream (expert_cache_fetch_on)");
    pthread_mutex_lock(&c->mu);
    ts_status st = begin_locked(c, block, ids, k, gate, up, down, pass, false);
    if (st == TS_OK && pass) pass->pinned = false;
    pthread_mutex_unlock(&c->mu);
    return st;
}

ts_status expert_cache_end(expert_cache *c, int32_t block) {
    double waited;
    pthread_mutex_lock(&c->mu);
    bool was_pending = c->pending;
    ts_status st = end_locked(c, block, &waited);
    if (was_pending && !c->pending) pthread_cond_broadcast(&c->freed); /* a fetch may wait for the pass to end */
    pthread_mutex_unlock(&c->mu);
    return st;
}

ts_status expert_cache_fetch(expert_cache *c, int32_t block, const int32_t *ids, int32_t k, const void **gate,
                             const void **up, const void **down, expert_cache_pass *pass) {
    return expert_cache_fetch_on(c, NULL, block, ids, k, gate, up, down, pass);
}

ts_status expert_cache_fetch_on(expert_cache *c, struct ts_stream *strm, int32_t block, const int32_t *ids, int32_t k,
                                const void **gate, const void **up, const void **down, expert_cache_pass *pass) {
    if (c->dev_slots && !strm)
        return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: backend slots are filled through a stream (expert_cache_fetch_on)", block);
    expert_cache_pass local;
    bool pin = pass != NULL; /* without a pass nothing can be released: single-threaded callers (tests) */
    if (!pass) pass = &local;
    pthread_mutex_lock(&c->mu);
    ts_status st;
    for (;;) {
        /* A begin/end pair (tests) in flight, or every candidate slot pinned
         * by another session's pass: wait for its end or release. */
        if (c->pending) {
            pthread_cond_wait(&c->freed, &c->mu);
            continue;
        }
        st = begin_locked(c, block, ids, k, gate, up, down, pass, true);
        if (st == TS_OK) c->pend_st = strm;
        if (st != TS_ERR_LIMIT) break;
        pthread_cond_wait(&c->freed, &c->mu);
    }
    if (st == TS_OK) st = end_locked(c, block, &pass->io_wait_s);
    pass->pinned = false;
    if (st == TS_OK && pin && c->mode == EXPERT_RESIDENCY_STREAMED) pin_pass(c, pass);
    pthread_mutex_unlock(&c->mu);
    return st;
}

ts_status expert_cache_fetch_ahead(expert_cache *c, struct ts_stream *strm, int32_t block, const int32_t *ids, int32_t k,
                                   const void **gate, const void **up, const void **down, expert_cache_pass *pass) {
    memset(pass, 0, sizeof *pass);
    if (c->mode != EXPERT_RESIDENCY_STREAMED) return ts_fail(TS_ERR_ARG, "expert cache: fetch ahead on blk.%d: not streamed", block);
    if (c->dev_slots && !strm)
        return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: backend slots are filled through a stream (expert_cache_fetch_on)", block);
    pthread_mutex_lock(&c->mu);
    /* another session's pass in flight ends without waiting for anything of ours */
    while (c->pending) pthread_cond_wait(&c->freed, &c->mu);
    ts_status st = begin_locked(c, block, ids, k, gate, up, down, pass, true);
    if (st == TS_OK) {
        c->pend_st = strm;
        pin_pass(c, pass);
        if (c->dev_slots) {
            st = end_locked(c, block, &pass->io_wait_s);
            if (st != TS_OK) unpin_pass(c, pass);
            pthread_cond_broadcast(&c->freed);
        } else {
            pass->ahead = true;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

ts_status expert_cache_fetch_finish(expert_cache *c, int32_t block, expert_cache_pass *pass) {
    if (!pass->ahead) return TS_OK;
    pthread_mutex_lock(&c->mu);
    pass->ahead = false;
    ts_status st = end_locked(c, block, &pass->io_wait_s);
    if (st != TS_OK && pass->pinned) unpin_pass(c, pass);
    pthread_cond_broadcast(&c->freed);
    pthread_mutex_unlock(&c->mu);
    return st;
}

void expert_cache_release(expert_cache *c, int32_t block, expert_cache_pass *pass) {
    (void)block;
    if (!pass->pinned) return;
    pthread_mutex_lock(&c->mu);
    unpin_pass(c, pass);
    pthread_cond_broadcast(&c->freed);
    pthread_mutex_unlock(&c->mu);
}

ts_status expert_cache_prefetch_on(expert_cache *c, struct ts_stream *strm, struct ts_event *after, struct ts_event *done,
                                   int32_t block, const int32_t *ids, int32_t k, expert_cache_pass *pass) {
    memset(pass, 0, sizeof *pass);
    const int32_t moe = moe_of(c, block);
    if (moe < 0) return ts_fail(TS_ERR_ARG, "expert cache: prefetch on blk.%d, not an MoE layer", block);
    if (!c->dev_slots || !strm) return ts_fail(TS_ERR_ARG, "expert cache: prefetch needs backend slots and a stream");
    if (k < 1 || k > CACHE_MAX_K || k > c->n_slots || (c->source == EXPERT_SOURCE_FILE && k > c->staging_k))
        return ts_fail(TS_ERR_ARG, "expert cache: prefetch of %d experts into %d slots", k, c->n_slots);
    const expert_map *m = c->map;
    ec_layer *L = &c->layers[moe];
    const ts_backend_ops *op = c->be->ops;
    pthread_mutex_lock(&c->mu);
    cache_plan plan;
    ts_status st = c->pending ? TS_ERR_LIMIT : cache_plan_make_avoiding(&L->cl, ids, k, L->busy, &plan);
    if (st != TS_OK) {
        pthread_mutex_unlock(&c->mu);
        if (st == TS_ERR_LIMIT) return TS_OK; /* a guess never waits: every victim is someone's */
        ts_error_prefix("expert cache: prefetch on blk.%d", block);
        return st;
    }
    /* the file tier reads every miss into the staging first, as a fetch does */
    int n = 0, nc = 0;
    uint64_t bread = 0;
    if (c->source == EXPERT_SOURCE_FILE) {
        for (int32_t i = 0; i < k; i++)
            if (!plan.hit[i]) bread += expert_reads(c, moe, ids[i], c->staging + (uint64_t)i * c->stride_max, c->req, &n);
        if (n && (st = expert_io_submit(c->io, c->req, n)) == TS_OK) st = expert_io_wait(c->io);
    }
    uint64_t up = 0;
    if (after && plan.n_miss) op->event_wait(strm, after);
    for (int32_t i = 0; i < k && st == TS_OK; i++) {
        if (plan.hit[i]) continue;
        uint64_t pos[EXPERT_PROJ_COUNT];
        const uint64_t len = place_expert(m, moe, ids[i], pos);
        const uint8_t *src = c->source == EXPERT_SOURCE_FILE ? c->staging + (uint64_t)i * c->stride_max : L->host_tier + (uint64_t)ids[i] * L->stride;
        op->to_device(strm, L->slots + (uint64_t)plan.slot[i] * L->stride, src, (size_t)len);
        up += len;
        pass->plan.slot[nc] = plan.slot[i];
        pass->plan.hit[nc] = false;
        pass->plan.evicted[nc] = plan.evicted[i];
        nc++;
    }
    if (nc && done) op->event_record(strm, done);
    /* the staging is the next fetch's: its copies must be done */
    if (st == TS_OK && nc && c->source == EXPERT_SOURCE_FILE) st = op->sync(strm);
    if (st != TS_OK) {
        empty_missed_slots(L, &plan);
        host_changed(c);
        pthread_mutex_unlock(&c->mu);
        memset(pass, 0, sizeof *pass);
        ts_error_prefix("expert cache: prefetch on blk.%d", block);
        return st;
    }
    cache_prefetch_commit(&L->cl, ids, &plan);
    host_changed(c);
    for (int i = 0; i < nc; i++) {
        L->prefetched[pass->plan.slot[i]] = 1;
        L->busy[pass->plan.slot[i]]++;
    }
    L->st.prefetch_copies += (uint64_t)nc;
    L->st.bytes_prefetched += up;
    L->st.bytes_read += bread;
    pass->moe = moe;
    pass->tracked = true;
    pass->plan.k = nc;
    pass->plan.n_miss = nc;
    pass->bytes_uploaded = up;
    pass->pinned = nc > 0;
    pthread_mutex_unlock(&c->mu);
    return TS_OK;
}

/* ------------------------------------------------------------ planned by the backend */

/* Where a layer's arrays sit in its part of dv.state (and dv.mirror): the
 * 8-byte ones first, so every array is aligned. */
typedef struct dv_off {
    uint64_t slot_tick, expert_count, tick, stats, slot_expert, expert_slot, prefetched, bytes;
} dv_off;

static dv_off dv_layout(int32_t ns, int32_t ne) {
    dv_off o;
    uint64_t p = 0;
    o.slot_tick = p, p += 8 * (uint64_t)ns;
    o.expert_count = p, p += 8 * (uint64_t)ne;
    o.tick = p, p += 8;
    o.stats = p, p += 8 * (uint64_t)TS_XP_COUNT;
    o.slot_expert = p, p += (4 * (uint64_t)ns + 7) & ~7ull;
    o.expert_slot = p, p += (4 * (uint64_t)ne + 7) & ~7ull;
    o.prefetched = p, p += ((uint64_t)ns + 7) & ~7ull;
    o.bytes = (p + 255) & ~255ull;
    return o;
}

bool expert_cache_device_plan(const expert_cache *c) {
    return c && c->dev_slots && c->source == EXPERT_SOURCE_HOST && c->be->ops->expert_pass && c->n_slots <= 1024;
}

/* Layer moe's arrays inside base (dv.state, or dv.mirror for the host's view). */
static ts_expert_slots dv_slots(const expert_cache *c, int32_t moe, uint8_t *base) {
    const dv_off o = dv_layout(c->n_slots, c->map->n_expert);
    uint8_t *b = base + (uint64_t)moe * c->dv.layer_bytes;
    const ec_layer *L = &c->layers[moe];
    ts_expert_slots d = {.n_slots = c->n_slots, .n_experts = c->map->n_expert, .policy = (int32_t)c->policy,
                         .slot_expert = (int32_t *)(b + o.slot_expert), .slot_tick = (uint64_t *)(b + o.slot_tick),
                         .expert_slot = (int32_t *)(b + o.expert_slot), .expert_count = (uint64_t *)(b + o.expert_count),
                         .tick = (uint64_t *)(b + o.tick), .prefetched = b + o.prefetched, .stats = (uint64_t *)(b + o.stats),
                         .layout = c->dv.layout + (size_t)moe * (size_t)c->map->n_expert * TS_XP_LAYOUT_W,
                         .slots = L->slots, .stride = L->stride, .tier = L->host_tier,
                         .plan = c->dv.plan + (size_t)moe * 3 * CACHE_MAX_K};
    return d;
}

static void dv_close(expert_cache *c) {
    const ts_backend_ops *op = c->be->ops;
    const size_t total = (size_t)(c->dv.layer_bytes * (uint64_t)c->map->n_moe);
    if (c->dv.state) op->dealloc(c->be, c->dv.state, total);
    if (c->dv.mirror) op->host_free(c->be, c->dv.mirror, total);
    if (c->dv.layout) op->dealloc(c->be, c->dv.layout, (size_t)c->dv.layout_bytes);
    if (c->dv.plan) op->dealloc(c->be, c->dv.plan, sizeof(int32_t) * 3 * CACHE_MAX_K * (size_t)c->map->n_moe);
    c->dv.state = c->dv.mirror = NULL;
    c->dv.layout = NULL;
    c->dv.plan = NULL;
}

/* The backend's buffers, made at the first enter: the state (zero, made
 * stale so the first enter uploads the host's), and each expert's layout.
 * On a failure nothing is kept: the next enter tries again. */
static ts_status dv_open(expert_cache *c, struct ts_stream *st) {
    const expert_map *m = c->map;
    const ts_backend_ops *op = c->be->ops;
    c->dv.layer_bytes = dv_layout(c->n_slots, m->n_expert).bytes;
    const size_t total = (size_t)(c->dv.layer_bytes * (uint64_t)m->n_moe);
    c->dv.layout_bytes = sizeof(uint64_t) * TS_XP_LAYOUT_W * (uint64_t)m->n_expert * (uint64_t)m->n_moe;
    uint64_t *lay = NULL;
    if (!(c->dv.state = op->alloc(c->be, total)) || !(c->dv.mirror = op->host_alloc(c->be, total)) ||
        !(c->dv.layout = op->alloc(c->be, (size_t)c->dv.layout_bytes)) ||
        !(c->dv.plan = op->alloc(c->be, sizeof(int32_t) * 3 * CACHE_MAX_K * (size_t)m->n_moe)) ||
        !(lay = op->host_alloc(c->be, (size_t)c->dv.layout_bytes))) {
        dv_close(c);
        ts_error_prefix("expert cache: the backend's copy of the slot state");
        return TS_ERR_NOMEM;
    }
    memset(c->dv.mirror, 0, total);
    for (int32_t l = 0; l < m->n_moe; l++)
        for (int32_t e = 0; e < m->n_expert; e++) {
            uint64_t *w = lay + ((size_t)l * (size_t)m->n_expert + (size_t)e) * TS_XP_LAYOUT_W;
            w[3] = place_expert(m, l, e, w);
            w[4] = 0;
            for (int p = 0; p < EXPERT_PROJ_COUNT; p++) w[4] += expert_map_slice(m, l, e, p)->nbytes;
        }
    op->to_device(st, c->dv.layout, lay, (size_t)c->dv.layout_bytes);
    ts_status r = op->sync(st); /* lay is freed next */
    op->host_free(c->be, lay, (size_t)c->dv.layout_bytes);
    if (r != TS_OK) {
        dv_close(c);
        ts_error_prefix("expert cache: uploading the slot layout");
        return r;
    }
    for (int32_t l = 0; l < m->n_moe; l++) memset(c->layers[l].dv_seen, 0, sizeof c->layers[l].dv_seen);
    c->dv.stale = true;
    return TS_OK;
}

/* The host's state into the mirror, then the backend's copy; the counters
 * as the host last saw them (so their next download is a delta from there). */
static void dv_upload(expert_cache *c, struct ts_stream *st) {
    for (int32_t l = 0; l < c->map->n_moe; l++) {
        const ec_layer *L = &c->layers[l];
        ts_expert_slots h = dv_slots(c, l, c->dv.mirror);
        memcpy(h.slot_expert, L->cl.slot_expert, sizeof(int32_t) * (size_t)c->n_slots);
        memcpy(h.slot_tick, L->cl.slot_tick, sizeof(uint64_t) * (size_t)c->n_slots);
        memcpy(h.expert_slot, L->cl.expert_slot, sizeof(int32_t) * (size_t)c->map->n_expert);
        memcpy(h.expert_count, L->cl.expert_count, sizeof(uint64_t) * (size_t)c->map->n_expert);
        *h.tick = L->cl.tick;
        memcpy(h.prefetched, L->prefetched, (size_t)c->n_slots);
        memcpy(h.stats, L->dv_seen, sizeof L->dv_seen);
    }
    c->be->ops->to_device(st, c->dv.state, c->dv.mirror, (size_t)(c->dv.layer_bytes * (uint64_t)c->map->n_moe));
    c->dv.stale = false;
}

/* The downloaded mirror becomes the host's state; the counters' growth is
 * added to the layers' stats. */
static void dv_apply(expert_cache *c) {
    for (int32_t l = 0; l < c->map->n_moe; l++) {
        ec_layer *L = &c->layers[l];
        const ts_expert_slots h = dv_slots(c, l, c->dv.mirror);
        memcpy(L->cl.slot_expert, h.slot_expert, sizeof(int32_t) * (size_t)c->n_slots);
        memcpy(L->cl.slot_tick, h.slot_tick, sizeof(uint64_t) * (size_t)c->n_slots);
        memcpy(L->cl.expert_slot, h.expert_slot, sizeof(int32_t) * (size_t)c->map->n_expert);
        memcpy(L->cl.expert_count, h.expert_count, sizeof(uint64_t) * (size_t)c->map->n_expert);
        L->cl.tick = *h.tick;
        memcpy(L->prefetched, h.prefetched, (size_t)c->n_slots);
        uint64_t d[TS_XP_COUNT];
        for (int i = 0; i < TS_XP_COUNT; i++) d[i] = h.stats[i] - L->dv_seen[i], L->dv_seen[i] = h.stats[i];
        expert_cache_stats *s = &L->st;
        s->passes += d[TS_XP_PASSES];
        s->requests += d[TS_XP_REQUESTS];
        s->hits += d[TS_XP_HITS];
        s->misses += d[TS_XP_MISSES];
        s->cold_misses += d[TS_XP_COLD];
        s->evict_misses += d[TS_XP_EVICT];
        s->bytes_requested += d[TS_XP_BYTES_REQ];
        s->bytes_uploaded += d[TS_XP_BYTES_UP];
        s->prefetch_copies += d[TS_XP_PF_COPIES];
        s->prefetch_saved += d[TS_XP_PF_SAVED];
        s->prefetch_wasted += d[TS_XP_PF_WASTED];
        s->bytes_prefetched += d[TS_XP_BYTES_PF];
    }
}

/* After a failure the backend's state is unknown: every slot is given up
 * (a slot never serves bytes that may not be its expert's), the counts kept. */
static void dv_forget(expert_cache *c) {
    for (int32_t l = 0; l < c->map->n_moe; l++) {
        ec_layer *L = &c->layers[l];
        for (int32_t s = 0; s < c->n_slots; s++) L->cl.slot_expert[s] = -1, L->cl.slot_tick[s] = 0, L->prefetched[s] = 0;
        for (int32_t e = 0; e < c->map->n_expert; e++) L->cl.expert_slot[e] = -1;
    }
    c->dv.stale = true;
}

static bool any_busy(const expert_cache *c) {
    for (int32_t l = 0; l < c->map->n_moe; l++)
        for (int32_t s = 0; s < c->n_slots; s++)
            if (c->layers[l].busy[s]) return true;
    return false;
}

ts_status expert_cache_device_enter(expert_cache *c, struct ts_stream *st) {
    if (!expert_cache_device_plan(c))
        return ts_fail(TS_ERR_ARG, "expert cache: passes planned by the backend need backend slots fed from the host tier");
    pthread_mutex_lock(&c->mu);
    /* no other pass may be reading a slot the backend's passes could take */
    while (c->pending || any_busy(c)) pthread_cond_wait(&c->freed, &c->mu);
    ts_status r = c->dv.state ? TS_OK : dv_open(c, st);
    if (r != TS_OK) {
        pthread_mutex_unlock(&c->mu);
        return r;
    }
    if (c->dv.stale) dv_upload(c, st);
    c->dv.active = true;
    return TS_OK;
}

ts_status expert_cache_device_pass(expert_cache *c, struct ts_stream *st, int32_t block, const int32_t *ids, int32_t k, bool prefetch,
                                   const void **const *tab) {
    const int32_t moe = moe_of(c, block);
    if (!c->dv.active) return ts_fail(TS_ERR_ARG, "expert cache: a pass planned by the backend outside enter and leave");
    if (moe < 0) return ts_fail(TS_ERR_ARG, "expert cache: blk.%d is not an MoE layer", block);
    if (k < 1 || k > CACHE_MAX_K || k > c->n_slots)
        return ts_fail(TS_ERR_ARG, "expert cache: blk.%d: a pass of %d experts over %d slots", block, k, c->n_slots);
    const ts_expert_slots d = dv_slots(c, moe, c->dv.state);
    c->be->ops->expert_pass(st, &d, ids, k, prefetch, prefetch ? NULL : tab);
    return TS_OK;
}

ts_status expert_cache_device_leave(expert_cache *c, struct ts_stream *st, bool step_ok) {
    if (!c->dv.active) return TS_OK;
    const ts_backend_ops *op = c->be->ops;
    ts_status r = TS_OK;
    if (step_ok) {
        op->to_host(st, c->dv.mirror, c->dv.state, (size_t)(c->dv.layer_bytes * (uint64_t)c->map->n_moe));
        r = op->sync(st);
    }
    /* a failed step (even one whose error the caller's sync has already
     * reported) may have filled a slot from a pass that changed nothing */
    if (step_ok && r == TS_OK) dv_apply(c);
    else dv_forget(c);
    c->dv.active = false;
    pthread_mutex_unlock(&c->mu);
    return r;
}

bool expert_cache_disk_io_on(const expert_cache *c) { return c->disk_io; }
bool expert_cache_backend_slots(const expert_cache *c) { return c && c->dev_slots; }
expert_source expert_cache_source(const expert_cache *c) { return c->dev_slots ? c->source : EXPERT_SOURCE_AUTO; }
uint64_t expert_cache_host_tier_bytes(const expert_cache *c) { return c->host_tier_bytes; }

bool expert_cache_tables(const expert_cache *c, int32_t block, const void *const *tab[EXPERT_PROJ_COUNT],
                         const void *const *host_tab[EXPERT_PROJ_COUNT]) {
    const int32_t moe = moe_of(c, block);
    if (!c->tabs || moe < 0) return false;
    for (int p = 0; p < EXPERT_PROJ_COUNT; p++) {
        const size_t i = (size_t)moe * EXPERT_PROJ_COUNT + (size_t)p;
        tab[p] = (const void *const *)c->tabs[i];
        if (host_tab) host_tab[p] = c->ptrs + i * (size_t)c->map->n_expert;
    }
    return true;
}

bool expert_cache_addressable(const expert_cache *c) { return c && c->tabs; }

void expert_cache_count(expert_cache *c, int32_t block, int32_t k) {
    const int32_t moe = moe_of(c, block);
    if (moe < 0 || c->mode == EXPERT_RESIDENCY_STREAMED) return;
    pthread_mutex_lock(&c->mu);
    expert_cache_stats *s = &c->layers[moe].st;
    s->passes++;
    s->requests += (uint64_t)k;
    if (c->mode == EXPERT_RESIDENCY_RESIDENT) s->hits += (uint64_t)k;
    s->bytes_requested += (uint64_t)k * c->map->layers[moe].expert_bytes;
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ accessors, stats */

expert_residency expert_cache_residency(const expert_cache *c) { return c->mode; }
int32_t expert_cache_slots(const expert_cache *c) { return c->n_slots; }
uint64_t expert_cache_slot_bytes(const expert_cache *c) { return c->slot_bytes; }
uint64_t expert_cache_slot_stride(const expert_cache *c) { return c->stride_max; }
cache_policy expert_cache_policy(const expert_cache *c) { return c->policy; }
const char *expert_cache_choice(const expert_cache *c) { return c->choice; }

const cache_layer *expert_cache_layer_state(const expert_cache *c, int32_t moe) {
    if (c->mode != EXPERT_RESIDENCY_STREAMED || moe < 0 || moe >= c->map->n_moe) return NULL;
    return &c->layers[moe].cl;
}

void expert_cache_get_stats(const expert_cache *c, int32_t moe, expert_cache_stats *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_t *mu = (pthread_mutex_t *)&c->mu; /* counters change under it */
    pthread_mutex_lock(mu);
    if (moe >= 0) {
        if (moe < c->map->n_moe) *out = c->layers[moe].st;
        pthread_mutex_unlock(mu);
        return;
    }
    for (int32_t l = 0; l < c->map->n_moe; l++) {
        const expert_cache_stats *s = &c->layers[l].st;
        out->passes += s->passes;
        out->requests += s->requests;
        out->hits += s->hits;
        out->misses += s->misses;
        out->cold_misses += s->cold_misses;
        out->evict_misses += s->evict_misses;
        out->bytes_requested += s->bytes_requested;
        out->bytes_read += s->bytes_read;
        out->bytes_uploaded += s->bytes_uploaded;
        out->io_wait_s += s->io_wait_s;
        out->prefetch_copies += s->prefetch_copies;
        out->prefetch_saved += s->prefetch_saved;
        out->prefetch_wasted += s->prefetch_wasted;
        out->bytes_prefetched += s->bytes_prefetched;
    }
    pthread_mutex_unlock(mu);
}

ts_status expert_cache_physical_bytes(const expert_cache *c, uint64_t *out) {
    *out = 0;
    if (!c->disk_io) return ts_fail(TS_ERR_UNSUPPORTED, "expert cache: disk-io accounting is off (TURBOSPARK_EXPERT_DISK_IO=1)");
    if (!c->proc_ok) return ts_fail(TS_ERR_UNSUPPORTED, "expert cache: /proc/self/io is not readable");
    uint64_t now;
    ts_status st = expert_io_proc_read_bytes(&now);
    if (st) return st;
    *out = now >= c->proc_base ? now - c->proc_base : 0;
    return TS_OK;
}

void expert_cache_reset_stats(expert_cache *c) {
    pthread_mutex_lock(&c->mu);
    for (int32_t l = 0; l < c->map->n_moe; l++) memset(&c->layers[l].st, 0, sizeof c->layers[l].st);
    if (c->disk_io) c->proc_ok = expert_io_proc_read_bytes(&c->proc_base) == TS_OK;
    if (c->io) expert_io_reset_stats(c->io);
    pthread_mutex_unlock(&c->mu);
}

int expert_cache_format_start(const expert_cache *c, char *buf, size_t n) {
    char b1[32], b2[32];
    const expert_map *m = c->map;
    switch (c->mode) {
    case EXPERT_RESIDENCY_STREAMED:
        ts_fmt_bytes(c->slot_bytes, 1, b1, sizeof b1);
        ts_fmt_bytes(m->total_bytes, 1, b2, sizeof b2);
        if (c->dev_slots && c->source == EXPERT_SOURCE_HOST) {
            char b3[32];
            return snprintf(buf, n, "expert cache: streamed, %d slots/layer (%s), %s of %s slots for %d layers, misses copied from %s of pinned host memory (experts: %s in the file)",
                            c->n_slots, cache_policy_name(c->policy), b1, c->be->ops->name, m->n_moe,
                            ts_fmt_bytes(c->host_tier_bytes, 1, b3, sizeof b3), b2);
        }
        if (c->dev_slots)
            return snprintf(buf, n, "expert cache: streamed, %d slots/layer (%s), %s of %s slots for %d layers, misses read from the file (experts: %s) through pinned staging, %d I/O threads, nocache %s",
                            c->n_slots, cache_policy_name(c->policy), b1, c->be->ops->name, m->n_moe, b2, expert_io_workers(c->io),
                            expert_nocache_mode_name(c->nocache));
        return snprintf(buf, n, "expert cache: streamed, %d slots/layer (%s), %s of slots for %d layers (experts: %s in the file), %d I/O threads, nocache %s",
                        c->n_slots, cache_policy_name(c->policy), b1, m->n_moe, b2, expert_io_workers(c->io),
                        expert_nocache_mode_name(c->nocache));
    case EXPERT_RESIDENCY_RESIDENT:
        ts_fmt_bytes(m->total_bytes, 1, b1, sizeof b1);
        if (c->on_device)
            return snprintf(buf, n, "expert cache: resident, %s of experts for %d layers in %s device memory", b1, m->n_moe,
                            c->be->ops->name);
        return snprintf(buf, n, "expert cache: resident, %s of experts for %d layers mapped and prefaulted%s%s", b1, m->n_moe,
                        c->mlock_note[0] ? ", " : "", c->mlock_note);
    default:
        ts_fmt_bytes(m->total_bytes, 1, b1, sizeof b1);
        return snprintf(buf, n, "expert cache: mapped, %s of experts for %d layers served from the page cache", b1, m->n_moe);
    }
}

int expert_cache_format_end(const expert_cache *c, uint64_t n_tokens, char *buf, size_t n) {
    expert_cache_stats s;
    expert_cache_get_stats(c, -1, &s);
    const double mib = 1024.0 * 1024.0;
    int w = 0;
#define EC_ADD(...)                                                              \
    do {                                                                         \
        int r_ = snprintf(buf + (size_t)w, (size_t)w < n ? n - (size_t)w : 0, __VA_ARGS__); \
        if (r_ > 0) w += r_;                                                     \
    } while (0)
    if (n) buf[0] = 0;
    EC_ADD("expert cache: %" PRIu64 " requests", s.requests);
    double req = s.requests ? (double)s.requests : 1.0;
    if (c->mode == EXPERT_RESIDENCY_STREAMED)
        EC_ADD(", %" PRIu64 " hits (%.1f%%), %" PRIu64 " misses (%" PRIu64 " cold, %" PRIu64 " evict)", s.hits,
               100.0 * (double)s.hits / req, s.misses, s.cold_misses, s.evict_misses);
    else if (c->mode == EXPERT_RESIDENCY_RESIDENT)
        EC_ADD(", all resident");
    else
        EC_ADD(", served by the page cache");
    if (n_tokens) {
        double t = (double)n_tokens;
        EC_ADD(", %.2f MiB requested/token", (double)s.bytes_requested / mib / t);
        if (c->mode == EXPERT_RESIDENCY_STREAMED && (!c->dev_slots || c->source == EXPERT_SOURCE_FILE))
            EC_ADD(", %.2f MiB read/token", (double)s.bytes_read / mib / t);
        if (c->dev_slots && c->mode == EXPERT_RESIDENCY_STREAMED) EC_ADD(", %.2f MiB/token copied to %s", (double)s.bytes_uploaded / mib / t, c->be->ops->name);
    } else if (c->mode == EXPERT_RESIDENCY_STREAMED) {
        if (!c->dev_slots || c->source == EXPERT_SOURCE_FILE) EC_ADD(", %.1f MiB read", (double)s.bytes_read / mib);
        if (c->dev_slots) EC_ADD(", %.1f MiB copied to %s", (double)s.bytes_uploaded / mib, c->be->ops->name);
    }
    uint64_t phys;
    if (c->disk_io && c->proc_ok && expert_io_proc_read_bytes(&phys) == TS_OK) {
        phys = phys >= c->proc_base ? phys - c->proc_base : 0;
        if (n_tokens) EC_ADD(", %.2f MiB/token from disk", (double)phys / mib / (double)n_tokens);
        else EC_ADD(", %.1f MiB from disk", (double)phys / mib);
    }
    if (c->mode == EXPERT_RESIDENCY_STREAMED) EC_ADD(", %.2f s I/O wait", s.io_wait_s);
    if (s.prefetch_copies) {
        EC_ADD("; pilot prefetch: %" PRIu64 " copies, %" PRIu64 " saved, %" PRIu64 " wasted", s.prefetch_copies, s.prefetch_saved,
               s.prefetch_wasted);
        if (n_tokens) EC_ADD(", %.2f MiB/token", (double)s.bytes_prefetched / mib / (double)n_tokens);
        else EC_ADD(", %.1f MiB", (double)s.bytes_prefetched / mib);
    }
#undef EC_ADD
    return w;
}
