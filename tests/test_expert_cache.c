/* The runtime expert cache.
 *
 * A synthetic MoE GGUF (block 0 dense, blocks 1..3 MoE with 8 experts, top-k
 * 2; Q4_K / Q8_0 / F16 projections, rotating per layer; slices at offsets
 * that are not page multiples), written once with stacked ffn_*_exps tensors
 * and once per expert. Every byte of expert (b, e, p) is a hash of (b, p, e,
 * i), so the expected weights come from the generator, not from the code
 * under test. One random routing trace (skewed, so there are hits and
 * evictions) runs through every mode: resident, streamed at k slots and more
 * (LFU and LRU, buffered, O_DIRECT / fadvise nocache, no I/O threads), mapped,
 * and auto at several budgets. For every pass every returned slice must equal
 * the generator's bytes (hits already at begin, misses after end), earlier
 * passes' pointers on other layers must still hold their experts, and the
 * hit/miss/slot/eviction decisions and the counters must equal a replay of
 * the same trace through policy.h directly. Then the refusals (N < k, budgets
 * too small, unknown policy, bad values), API misuse, and a read error (file
 * truncated under the cache) that must fail with a clear message, empty the
 * slots it was filling, and leave the cache working. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute/backend.h"
#include "experts/expert_cache.h"
#include "gguf/gguf.h"
#include "test_util.h"

enum { NB = 4, NE = 8, TOPK = 2, EMBD = 256, FF = 96, NMOE = 3, NTOK = 240 };

static uint64_t rng_state;
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

static uint8_t expert_byte(int b, int p, int e, uint64_t i) {
    uint64_t x = ((uint64_t)b * 1000003u + (uint64_t)p * 7919u + (uint64_t)e * 104729u + i + 17) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return (uint8_t)(x >> 40);
}

static ts_type proj_type(int b, int p) {
    static const ts_type gu[3] = {TS_TYPE_Q4_K, TS_TYPE_Q8_0, TS_TYPE_F16};
    if (p == 0) return gu[b % 3];
    if (p == 1) return gu[(b + 1) % 3];
    return b % 2 ? TS_TYPE_F16 : TS_TYPE_Q8_0; /* down: ne0 = FF = 96, not a Q4_K row */
}
static void proj_shape(int p, uint64_t *ne0, uint64_t *ne1) {
    if (p == 2) { *ne0 = FF; *ne1 = EMBD; }
    else { *ne0 = EMBD; *ne1 = FF; }
}
static uint64_t proj_bytes(int b, int p) {
    uint64_t ne0, ne1;
    proj_shape(p, &ne0, &ne1);
    return ts_type_row_bytes(proj_type(b, p), ne0) * ne1;
}

/* expected[b][e][p]: the generator's bytes. */
static uint8_t *expected[NB][NE][3];

static void make_expected(void) {
    for (int b = 1; b < NB; b++)
        for (int e = 0; e < NE; e++)
            for (int p = 0; p < 3; p++) {
                uint64_t n = proj_bytes(b, p);
                expected[b][e][p] = malloc(n);
                for (uint64_t i = 0; i < n; i++) expected[b][e][p][i] = expert_byte(b, p, e, i);
            }
}

static void write_model(const char *path, bool per_expert) {
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_str(w, "general.architecture", "qwen3moe");
    gguf_w_u32(w, "qwen3moe.block_count", NB);
    gguf_w_u32(w, "qwen3moe.embedding_length", EMBD);
    gguf_w_u32(w, "qwen3moe.expert_count", NE);
    gguf_w_u32(w, "qwen3moe.expert_used_count", TOPK);
    gguf_w_u32(w, "qwen3moe.expert_feed_forward_length", FF);
    gguf_w_u32(w, "qwen3moe.feed_forward_length", 4 * FF);
    float norm[EMBD + 3];
    for (int i = 0; i < EMBD + 3; i++) norm[i] = 1.0f;
    uint64_t ne1d[1] = {EMBD + 3}; /* odd length: expert data starts off any page boundary */
    gguf_w_tensor(w, "output_norm.weight", TS_TYPE_F32, 1, ne1d, norm, sizeof norm);
    for (int b = 1; b < NB; b++) {
        char name[96];
        float *router = calloc((size_t)EMBD * NE, sizeof *router);
        uint64_t rne[2] = {EMBD, NE};
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", b);
        gguf_w_tensor(w, name, TS_TYPE_F32, 2, rne, router, (uint64_t)EMBD * NE * sizeof(float));
        free(router);
        for (int p = 0; p < 3; p++) {
            uint64_t ne0, ne1, per = proj_bytes(b, p);
            proj_shape(p, &ne0, &ne1);
            if (!per_expert) {
                uint8_t *d = malloc(per * NE);
                for (int e = 0; e < NE; e++) memcpy(d + (uint64_t)e * per, expected[b][e][p], per);
                uint64_t ne[3] = {ne0, ne1, NE};
                snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", b, expert_proj_name(p));
                gguf_w_tensor(w, name, proj_type(b, p), 3, ne, d, per * NE);
                free(d);
            } else {
                for (int e = 0; e < NE; e++) {
                    uint64_t ne[2] = {ne0, ne1};
                    snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", b, expert_proj_name(p), e);
                    gguf_w_tensor(w, name, proj_type(b, p), 2, ne, expected[b][e][p], per);
                }
            }
        }
    }
    CHECK(gguf_writer_write(w, path) == TS_OK);
    gguf_writer_free(w);
}

/* ---------------------------------------------------------------- the trace */

static int32_t trace[NTOK][NMOE][TOPK];

/* Skewed routing: a few hot experts per layer, drifting over time. */
static void make_trace(void) {
    rng_state = 0x1234567887654321ull;
    for (int t = 0; t < NTOK; t++)
        for (int l = 0; l < NMOE; l++)
            for (int i = 0; i < TOPK; i++) {
                int32_t e;
                bool dup;
                do {
                    uint64_t r = rnd_below(100);
                    if (r < 60) e = (int32_t)((l + t / 60 + rnd_below(3)) % NE);
                    else e = (int32_t)rnd_below(NE);
                    dup = false;
                    for (int j = 0; j < i; j++) dup |= trace[t][l][j] == e;
                } while (dup);
                trace[t][l][i] = e;
            }
}

static bool slice_ok(const void *ptr, int b, int e, int p) {
    return ptr && memcmp(ptr, expected[b][e][p], proj_bytes(b, p)) == 0;
}

typedef struct run_cfg {
    const char *name;
    expert_residency residency; /* asked */
    expert_residency want;      /* chosen */
    int32_t slots;              /* asked */
    int32_t want_slots;         /* streamed: the slots the replay uses */
    cache_policy policy;
    bool nocache, fadvise, mlock, disk_io;
    int workers;
    uint64_t budget, avail;
    const char *choice_has;     /* substring of the choice line */
    int ntok;                   /* tokens of the trace to run; 0 = all */
} run_cfg;

/* Runs the trace through a cache built from cfg and checks bytes, plans and
 * counters against a policy.h replay. */
static void run_trace(const gguf_file *f, const expert_map *m, const run_cfg *cfg, const char *layout) {
    char what[160];
    snprintf(what, sizeof what, "%s/%s", layout, cfg->name);
    const int ntok = cfg->ntok ? cfg->ntok : NTOK;
    expert_cache_opts o;
    expert_cache_opts_default(&o);
    o.residency = cfg->residency;
    o.n_slots = cfg->slots;
    o.policy = cfg->policy;
    o.mlock = cfg->mlock;
    o.budget_bytes = cfg->budget;
    o.avail_bytes = cfg->avail;
    o.io.nocache = cfg->nocache;
    o.io.nocache_fadvise = cfg->fadvise;
    o.io.disk_io = cfg->disk_io;
    o.io.n_workers = cfg->workers;
    o.io.chunk_bytes = 16384; /* several chunks per slice */
    expert_cache *c = NULL;
    ts_status st = expert_cache_new(m, f, &o, &c);
    CHECKF(st == TS_OK, "%s: %s", what, ts_last_error());
    if (!c) return;
    CHECKF(expert_cache_residency(c) == cfg->want, "%s: residency %s", what, expert_residency_name(expert_cache_residency(c)));
    if (cfg->choice_has)
        CHECKF(contains(expert_cache_choice(c), cfg->choice_has), "%s: choice: %s", what, expert_cache_choice(c));
    char line[512];
    expert_cache_format_start(c, line, sizeof line);
    fprintf(stderr, "  %s: %s\n    %s\n", what, expert_cache_choice(c), line);
    const bool streamed = cfg->want == EXPERT_RESIDENCY_STREAMED;
    if (streamed) {
        CHECKF(expert_cache_slots(c) == (cfg->want_slots < NE ? cfg->want_slots : NE), "%s: %d slots", what, expert_cache_slots(c));
        char want[64];
        snprintf(want, sizeof want, "%d slots/layer (%s)", expert_cache_slots(c), cache_policy_name(cfg->policy));
        CHECKF(contains(line, want), "%s: start line: %s", what, line);
        /* Slot memory: one slot of each layer holds the largest expert plus
         * at most 3 alignment gaps. */
        uint64_t sum = 0;
        for (int l = 0; l < NMOE; l++) {
            uint64_t eb = m->layers[l].expert_bytes, stride = (eb + 3 * 4096 + 4095) / 4096 * 4096;
            sum += stride;
            CHECK(expert_cache_layer_state(c, l) != NULL);
        }
        CHECKF(expert_cache_slot_bytes(c) <= sum * (uint64_t)expert_cache_slots(c) &&
                   expert_cache_slot_bytes(c) >= m->max_expert_bytes * (uint64_t)expert_cache_slots(c),
               "%s: slot bytes %llu", what, (unsigned long long)expert_cache_slot_bytes(c));
        CHECK(expert_cache_slot_stride(c) % 4096 == 0 && expert_cache_slot_stride(c) >= m->max_expert_bytes);
    } else {
        CHECK(expert_cache_slots(c) == 0 && expert_cache_slot_bytes(c) == 0 && expert_cache_layer_state(c, 0) == NULL);
    }

    cache_layer replay[NMOE];
    for (int l = 0; l < NMOE; l++)
        CHECK(cache_layer_init(&replay[l], streamed ? cfg->want_slots : NE, NE, cfg->policy) == TS_OK);
    uint64_t r_hit[NMOE] = {0}, r_miss[NMOE] = {0}, r_cold[NMOE] = {0}, r_evict[NMOE] = {0}, r_req_b[NMOE] = {0},
             r_read_b[NMOE] = {0};

    const void *last[NMOE][3][TOPK];
    int32_t last_ids[NMOE][TOPK];
    bool have_last[NMOE] = {false};
    int bad_bytes = 0, bad_early = 0, bad_plan = 0, bad_old = 0, bad_cong = 0;
    rng_state = 0xABCDEF ^ (uint64_t)cfg->slots * 977 ^ (uint64_t)cfg->residency;
    for (int t = 0; t < ntok; t++)
        for (int l = 0; l < NMOE; l++) {
            int b = l + 1;
            const int32_t *ids = trace[t][l];
            const void *g[TOPK], *u[TOPK], *d[TOPK];
            const void **w[3] = {g, u, d};
            expert_cache_pass pass;
            bool split = rnd_below(2);
            if (split) {
                st = expert_cache_begin(c, b, ids, TOPK, g, u, d, &pass);
                CHECKF(st == TS_OK, "%s: begin: %s", what, ts_last_error());
                if (st) goto done;
                /* Hits (and every resident/mapped expert) are usable now. */
                for (int i = 0; i < TOPK; i++)
                    if (pass.plan.hit[i])
                        for (int p = 0; p < 3; p++) bad_early += !slice_ok(w[p][i], b, ids[i], p);
                st = expert_cache_end(c, b);
                CHECKF(st == TS_OK, "%s: end: %s", what, ts_last_error());
            } else {
                st = expert_cache_fetch(c, b, ids, TOPK, g, u, d, &pass);
                CHECKF(st == TS_OK, "%s: fetch: %s", what, ts_last_error());
            }
            if (st) goto done;
            for (int i = 0; i < TOPK; i++)
                for (int p = 0; p < 3; p++) {
                    bad_bytes += !slice_ok(w[p][i], b, ids[i], p);
                    /* Slots place each slice congruent to its file offset (O_DIRECT in place). */
                    if (streamed) bad_cong += ((uintptr_t)w[p][i] - expert_map_slice(m, l, ids[i], p)->offset) % 4096 != 0;
                }
            if (!split) expert_cache_release(c, b, &pass); /* fetch pinned the slots; the plan stays readable */

            /* Replay through policy.h directly. */
            uint64_t breq = 0, bread = 0;
            for (int i = 0; i < TOPK; i++)
                for (int p = 0; p < 3; p++) breq += proj_bytes(b, p);
            bool ok = pass.moe == l && pass.plan.k == TOPK && pass.bytes_requested == breq;
            if (streamed) {
                cache_plan rp;
                CHECK(cache_plan_make(&replay[l], ids, TOPK, &rp) == TS_OK);
                int32_t cold = 0, ev = 0;
                for (int i = 0; i < TOPK; i++) {
                    ok = ok && rp.hit[i] == pass.plan.hit[i] && rp.slot[i] == pass.plan.slot[i] &&
                         rp.evicted[i] == pass.plan.evicted[i];
                    if (!rp.hit[i]) {
                        for (int p = 0; p < 3; p++) bread += proj_bytes(b, p);
                        if (rp.evicted[i] >= 0) ev++;
                        else cold++;
                    }
                }
                ok = ok && rp.n_miss == pass.plan.n_miss && pass.n_cold == cold && pass.n_evict == ev && pass.bytes_read == bread;
                ok = ok && pass.tracked;
                cache_commit(&replay[l], ids, &rp);
                r_hit[l] += (uint64_t)(TOPK - rp.n_miss);
                r_miss[l] += (uint64_t)rp.n_miss;
                r_cold[l] += (uint64_t)cold;
                r_evict[l] += (uint64_t)ev;
            } else {
                ok = ok && pass.plan.n_miss == 0 && pass.bytes_read == 0 && pass.tracked == (cfg->want == EXPERT_RESIDENCY_RESIDENT);
                if (cfg->want == EXPERT_RESIDENCY_RESIDENT) r_hit[l] += TOPK;
            }
            r_req_b[l] += breq;
            r_read_b[l] += bread;
            bad_plan += !ok;

            for (int p = 0; p < 3; p++)
                for (int i = 0; i < TOPK; i++) last[l][p][i] = w[p][i];
            memcpy(last_ids[l], ids, sizeof last_ids[l]);
            have_last[l] = true;
            /* Passes on the other layers left this layer's experts alone. */
            if (t % 7 == 0)
                for (int l2 = 0; l2 < NMOE; l2++)
                    if (have_last[l2])
                        for (int i = 0; i < TOPK; i++)
                            for (int p = 0; p < 3; p++) bad_old += !slice_ok(last[l2][p][i], l2 + 1, last_ids[l2][i], p);
        }
done:
    CHECKF(bad_bytes == 0, "%s: %d slices differ from the file's bytes", what, bad_bytes);
    CHECKF(bad_early == 0, "%s: %d hit slices not usable at begin", what, bad_early);
    CHECKF(bad_plan == 0, "%s: %d passes differ from the policy replay", what, bad_plan);
    CHECKF(bad_cong == 0, "%s: %d slot slices not congruent to their file offsets", what, bad_cong);
    CHECKF(bad_old == 0, "%s: %d earlier slices overwritten by other layers", what, bad_old);

    expert_cache_stats tot, want_tot = {0};
    for (int l = 0; l < NMOE; l++) {
        expert_cache_stats s;
        expert_cache_get_stats(c, l, &s);
        CHECKF(s.passes == (uint64_t)ntok && s.requests == (uint64_t)ntok * TOPK, "%s: layer %d requests %llu", what, l,
               (unsigned long long)s.requests);
        CHECKF(s.hits == r_hit[l] && s.misses == r_miss[l] && s.cold_misses == r_cold[l] && s.evict_misses == r_evict[l],
               "%s: layer %d: hits %llu/%llu misses %llu/%llu cold %llu/%llu evict %llu/%llu", what, l,
               (unsigned long long)s.hits, (unsigned long long)r_hit[l], (unsigned long long)s.misses,
               (unsigned long long)r_miss[l], (unsigned long long)s.cold_misses, (unsigned long long)r_cold[l],
               (unsigned long long)s.evict_misses, (unsigned long long)r_evict[l]);
        CHECK(s.bytes_requested == r_req_b[l] && s.bytes_read == r_read_b[l]);
        want_tot.hits += r_hit[l];
        want_tot.misses += r_miss[l];
        want_tot.bytes_read += r_read_b[l];
        if (streamed) {
            /* The cache's policy state is the replay's. */
            const cache_layer *cl = expert_cache_layer_state(c, l);
            bool same = cl && cl->tick == replay[l].tick;
            for (int e = 0; same && e < NE; e++)
                same = cl->expert_slot[e] == replay[l].expert_slot[e] && cl->expert_count[e] == replay[l].expert_count[e];
            CHECKF(same, "%s: layer %d policy state differs from the replay", what, l);
        }
    }
    expert_cache_get_stats(c, -1, &tot);
    CHECK(tot.requests == (uint64_t)ntok * NMOE * TOPK && tot.hits == want_tot.hits && tot.misses == want_tot.misses &&
          tot.bytes_read == want_tot.bytes_read && tot.io_wait_s >= 0);
    if (streamed) {
        CHECKF(tot.misses > 0 && (cfg->want_slots >= NE || tot.evict_misses > 0), "%s: a trace without misses/evictions tests little", what);
        if (cfg->want_slots >= NE) CHECK(tot.evict_misses == 0 && tot.misses == tot.cold_misses && tot.cold_misses <= (uint64_t)NMOE * NE);
        if (cfg->want_slots == TOPK) CHECK(tot.hits > 0);
    }
    expert_cache_format_end(c, (uint64_t)ntok, line, sizeof line);
    fprintf(stderr, "    %s\n", line);
    CHECKF(contains(line, "requests") && (!streamed || (contains(line, "hits") && contains(line, "misses") && contains(line, "MiB read/token"))),
           "%s: end line: %s", what, line);
    uint64_t phys;
    st = expert_cache_physical_bytes(c, &phys);
    if (!cfg->disk_io) {
        CHECK(st == TS_ERR_UNSUPPORTED && contains(ts_last_error(), "TURBOSPARK_EXPERT_DISK_IO"));
    } else if (st == TS_OK) {
        fprintf(stderr, "    physical reads: %llu bytes for %llu read\n", (unsigned long long)phys, (unsigned long long)tot.bytes_read);
        if (cfg->nocache && !cfg->fadvise && contains(line, "o_direct"))
            CHECKF(phys >= tot.bytes_read, "%s: O_DIRECT reads not counted: %llu < %llu", what, (unsigned long long)phys,
                   (unsigned long long)tot.bytes_read);
        CHECK(contains(line, "from disk"));
    }
    expert_cache_reset_stats(c);
    expert_cache_get_stats(c, -1, &tot);
    CHECK(tot.requests == 0 && tot.hits == 0 && tot.bytes_read == 0);
    for (int l = 0; l < NMOE; l++) cache_layer_free(&replay[l]);
    expert_cache_free(c);
}

/* ---------------------------------------------------------------- refusals, misuse */

static ts_status try_open(const gguf_file *f, const expert_map *m, expert_cache_opts *o, expert_cache **c) {
    *c = NULL;
    ts_status st = expert_cache_new(m, f, o, c);
    if (st) CHECK(*c == NULL);
    return st;
}

static void test_refusals(const gguf_file *f, const expert_map *m) {
    expert_cache_opts o;
    expert_cache *c;
    char num[64];

    /* N below top-k. */
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = 1;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_ARG);
    CHECKF(contains(ts_last_error(), "1 slots per layer") && contains(ts_last_error(), "top-k = 2"), "%s", ts_last_error());
    o.residency = EXPERT_RESIDENCY_AUTO; /* the same in auto */
    CHECK(try_open(f, m, &o, &c) == TS_ERR_ARG && contains(ts_last_error(), "top-k = 2"));

    /* Budget: exactly top-k slots per layer fits, one byte less does not. */
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = 2;
    CHECK(try_open(f, m, &o, &c) == TS_OK);
    uint64_t stride = c ? expert_cache_slot_stride(c) : 0, need = c ? expert_cache_slot_bytes(c) : 0;
    expert_cache_free(c);
    CHECK(stride > 0 && need > 0);
    o.n_slots = 0;
    o.budget_bytes = (uint64_t)NMOE * TOPK * stride;
    CHECK(try_open(f, m, &o, &c) == TS_OK && c && expert_cache_slots(c) == TOPK);
    expert_cache_free(c);
    o.budget_bytes = (uint64_t)NMOE * 5 * stride + stride - 1; /* slots = floor(budget / (n_moe * stride)) */
    CHECK(try_open(f, m, &o, &c) == TS_OK && c && expert_cache_slots(c) == 5);
    expert_cache_free(c);
    o.budget_bytes = (uint64_t)NMOE * TOPK * stride - 1;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_LIMIT);
    snprintf(num, sizeof num, "%llu bytes", (unsigned long long)o.budget_bytes);
    fprintf(stderr, "  refusal: %s\n", ts_last_error());
    snprintf(num, sizeof num, "= %llu bytes", (unsigned long long)(o.budget_bytes + 1));
    CHECKF(contains(ts_last_error(), num), "%s", ts_last_error());
    snprintf(num, sizeof num, "%llu bytes", (unsigned long long)o.budget_bytes);
    CHECKF(contains(ts_last_error(), num) && contains(ts_last_error(), "top-k = 2") && contains(ts_last_error(), "3 MoE layers") &&
               contains(ts_last_error(), "expert budget"),
           "%s", ts_last_error());
    o.residency = EXPERT_RESIDENCY_AUTO; /* an explicit budget in auto is refused too, not quietly mapped */
    CHECK(try_open(f, m, &o, &c) == TS_ERR_LIMIT && contains(ts_last_error(), "top-k = 2"));
    /* Available memory too small for slots, without a budget: auto maps. */
    o.budget_bytes = 0;
    o.avail_bytes = 1u << 20;
    CHECK(try_open(f, m, &o, &c) == TS_OK && c && expert_cache_residency(c) == EXPERT_RESIDENCY_MAPPED);
    if (c) CHECKF(contains(expert_cache_choice(c), "mapped (auto") && contains(expert_cache_choice(c), "top-k slots"), "%s", expert_cache_choice(c));
    expert_cache_free(c);
    /* ... while streamed with auto slots refuses. */
    o.residency = EXPERT_RESIDENCY_STREAMED;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_LIMIT && contains(ts_last_error(), "available"));

    /* Explicit slots over an explicit budget. */
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = 8;
    o.budget_bytes = need; /* what 2 slots take */
    CHECK(try_open(f, m, &o, &c) == TS_ERR_LIMIT && contains(ts_last_error(), "8 slots per layer"));
    /* Resident over a budget. */
    o.residency = EXPERT_RESIDENCY_RESIDENT;
    o.n_slots = 0;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_LIMIT && contains(ts_last_error(), "resident"));

    /* Unknown policy / residency. */
    expert_cache_opts_default(&o);
    o.policy = (cache_policy)7;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_ARG && contains(ts_last_error(), "unknown policy 7"));
    expert_cache_opts_default(&o);
    o.residency = (expert_residency)9;
    CHECK(try_open(f, m, &o, &c) == TS_ERR_ARG && contains(ts_last_error(), "residency"));

    /* A model without routed experts. */
    expert_map dense;
    memset(&dense, 0, sizeof dense);
    expert_cache_opts_default(&o);
    CHECK(try_open(f, &dense, &o, &c) == TS_ERR_ARG && contains(ts_last_error(), "no routed experts"));
}

static void test_parsers(void) {
    expert_residency r;
    CHECK(expert_cache_parse_residency("streamed", &r) == TS_OK && r == EXPERT_RESIDENCY_STREAMED);
    CHECK(expert_cache_parse_residency("auto", &r) == TS_OK && r == EXPERT_RESIDENCY_AUTO);
    CHECK(expert_cache_parse_residency("mapped", &r) == TS_OK && r == EXPERT_RESIDENCY_MAPPED);
    CHECK(expert_cache_parse_residency("resident", &r) == TS_OK && r == EXPERT_RESIDENCY_RESIDENT);
    CHECK(expert_cache_parse_residency("stream", &r) == TS_ERR_ARG && contains(ts_last_error(), "expert residency 'stream'"));
    int32_t n;
    CHECK(expert_cache_parse_slots("auto", &n) == TS_OK && n == 0);
    CHECK(expert_cache_parse_slots("16", &n) == TS_OK && n == 16);
    const char *bad_slots[] = {"0", "-1", "abc", "", "12x", " 3", "99999999999"};
    for (size_t i = 0; i < sizeof bad_slots / sizeof *bad_slots; i++)
        CHECKF(expert_cache_parse_slots(bad_slots[i], &n) == TS_ERR_ARG && contains(ts_last_error(), "expert cache slots"), "'%s'",
               bad_slots[i]);
    cache_policy p;
    CHECK(expert_cache_parse_policy("lru", &p) == TS_OK && p == CACHE_POLICY_LRU);
    CHECK(expert_cache_parse_policy("lfu", &p) == TS_OK && p == CACHE_POLICY_LFU);
    CHECK(expert_cache_parse_policy("lfx", &p) == TS_ERR_ARG && contains(ts_last_error(), "expert policy 'lfx'") &&
          contains(ts_last_error(), "lfu or lru"));
    /* --expert-budget is read by ts_parse_bytes (tools/cli_common.c) */
    uint64_t v;
    CHECK(ts_parse_bytes("12G", &v) == TS_OK && v == 12ull << 30);
    CHECK(ts_parse_bytes("1.5GiB", &v) == TS_OK && v == 3ull << 29);
    CHECK(ts_parse_bytes("800M", &v) == TS_OK && v == 800ull << 20);
    CHECK(ts_parse_bytes("64kb", &v) == TS_OK && v == 64ull << 10);
    CHECK(ts_parse_bytes("1073741824", &v) == TS_OK && v == 1073741824ull);
    CHECK(ts_parse_bytes("2T", &v) == TS_OK && v == 2ull << 40);
    const char *bad_b[] = {"", "-5", "5X", "nan", "inf", "G", "1GG", "99999999T"};
    for (size_t i = 0; i < sizeof bad_b / sizeof *bad_b; i++)
        CHECKF(ts_parse_bytes(bad_b[i], &v) == TS_ERR_ARG && contains(ts_last_error(), "expected bytes"), "'%s'", bad_b[i]);

    uint64_t avail;
    char src[64] = "";
    ts_status st = expert_cache_available_memory(&avail, src, sizeof src);
    CHECKF(st == TS_OK && avail > 0 && src[0], "%s", ts_last_error());
    fprintf(stderr, "  available memory: %.1f MiB (%s)\n", (double)avail / 1048576.0, src);
}

static void test_misuse(const gguf_file *f, const expert_map *m) {
    expert_cache_opts o;
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = 2;
    expert_cache *c = NULL;
    CHECK(expert_cache_new(m, f, &o, &c) == TS_OK);
    if (!c) return;
    const void *g[3], *u[3], *d[3];
    int32_t ids[3] = {1, 2, 3};
    CHECK(expert_cache_fetch(c, 0, ids, 2, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "blk.0 is not an MoE"));
    CHECK(expert_cache_fetch(c, NB, ids, 2, g, u, d, NULL) == TS_ERR_ARG);
    CHECK(expert_cache_fetch(c, -1, ids, 2, g, u, d, NULL) == TS_ERR_ARG);
    CHECK(expert_cache_fetch(c, 1, ids, 3, g, u, d, NULL) == TS_ERR_ARG); /* k above the slots */
    CHECK(expert_cache_fetch(c, 1, ids, 0, g, u, d, NULL) == TS_ERR_ARG);
    int32_t dup[2] = {4, 4}, oob[2] = {1, NE};
    CHECK(expert_cache_fetch(c, 1, dup, 2, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "twice"));
    CHECK(expert_cache_fetch(c, 1, oob, 2, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "out of range"));
    CHECK(expert_cache_end(c, 1) == TS_ERR_ARG && contains(ts_last_error(), "without a begin"));
    CHECK(expert_cache_begin(c, 2, ids, 2, g, u, d, NULL) == TS_OK);
    CHECK(expert_cache_begin(c, 3, ids, 2, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "pending"));
    CHECK(expert_cache_end(c, 3) == TS_ERR_ARG && contains(ts_last_error(), "blk.2"));
    CHECK(expert_cache_end(c, 2) == TS_OK);
    CHECK(slice_ok(g[0], 2, 1, 0) && slice_ok(u[1], 2, 2, 1) && slice_ok(d[1], 2, 2, 2));
    expert_cache_stats s;
    expert_cache_get_stats(c, 1, &s);
    CHECK(s.passes == 1 && s.misses == 2 && s.cold_misses == 2);
    expert_cache_get_stats(c, 0, &s);
    CHECK(s.passes == 0); /* refused passes counted nothing */
    /* Freeing with a pass in flight waits for it. */
    CHECK(expert_cache_begin(c, 3, ids + 1, 2, g, u, d, NULL) == TS_OK);
    expert_cache_free(c);
}

/* Opened from memory: nothing to pread from. */
static void test_memory_file(const char *path, const expert_map *m) {
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    CHECK(fread(buf, 1, (size_t)n, fp) == (size_t)n);
    fclose(fp);
    gguf_file *f = NULL;
    CHECK(gguf_open_memory(buf, (uint64_t)n, "mem.gguf", &f) == TS_OK);
    if (f) {
        expert_cache_opts o;
        expert_cache_opts_default(&o);
        o.residency = EXPERT_RESIDENCY_STREAMED;
        o.n_slots = 4;
        expert_cache *c = NULL;
        CHECK(expert_cache_new(m, f, &o, &c) == TS_ERR_UNSUPPORTED && contains(ts_last_error(), "descriptor") && !c);
        o.residency = EXPERT_RESIDENCY_AUTO;
        o.n_slots = 0;
        o.avail_bytes = 1u << 20; /* too little for everything */
        CHECK(expert_cache_new(m, f, &o, &c) == TS_OK && c && expert_cache_residency(c) == EXPERT_RESIDENCY_MAPPED);
        if (c) CHECKF(contains(expert_cache_choice(c), "no descriptor"), "%s", expert_cache_choice(c));
        expert_cache_free(c);
        o.residency = EXPERT_RESIDENCY_RESIDENT;
        o.mlock = true;
        CHECK(expert_cache_new(m, f, &o, &c) == TS_OK && c);
        if (c) {
            const void *g[2], *u[2], *d[2];
            int32_t ids[2] = {7, 0};
            CHECK(expert_cache_fetch(c, 3, ids, 2, g, u, d, NULL) == TS_OK);
            CHECK(slice_ok(g[0], 3, 7, 0) && slice_ok(u[1], 3, 0, 1) && slice_ok(d[0], 3, 7, 2));
            CHECK((const uint8_t *)g[0] >= buf && (const uint8_t *)g[0] < buf + n); /* in place */
        }
        expert_cache_free(c);
        gguf_close(f);
    }
    free(buf);
}

/* The file loses its last expert under a streamed cache. */
static void test_read_error(const char *src_path, bool per_expert) {
    char path[512];
    snprintf(path, sizeof path, "%s/ts_expert_cache_trunc_%d.gguf", tmpdir(), (int)getpid());
    write_model(path, per_expert);
    gguf_file *f = NULL;
    CHECK(gguf_open(path, &f) == TS_OK);
    (void)src_path;
    expert_map m;
    if (!f || expert_map_build(f, NULL, &m) != TS_OK) {
        CHECK(0);
        gguf_close(f);
        return;
    }
    expert_cache_opts o;
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = 2;
    o.io.n_workers = 2;
    o.io.chunk_bytes = 8192;
    expert_cache *c = NULL;
    CHECK(expert_cache_new(&m, f, &o, &c) == TS_OK);
    const expert_slice *last = expert_map_slice(&m, NMOE - 1, NE - 1, 2);
    CHECK(last->offset + last->nbytes == f->map.size); /* the file ends with blk.3's expert 7's down */
    if (c) {
        const void *g[2], *u[2], *d[2];
        int32_t a[2] = {0, 1};
        CHECK(expert_cache_fetch(c, 3, a, 2, g, u, d, NULL) == TS_OK);
        CHECK(truncate(path, (off_t)(last->offset + 100)) == 0);
        int32_t b[2] = {0, NE - 1};
        expert_cache_pass pass;
        ts_status st = expert_cache_fetch(c, 3, b, 2, g, u, d, &pass);
        CHECK(st == TS_ERR_IO);
        CHECKF(contains(ts_last_error(), path) && contains(ts_last_error(), "blk.3") && contains(ts_last_error(), "offset"),
               "message: %s", ts_last_error());
        CHECK(pass.plan.n_miss == 1 && pass.plan.evicted[1] == 1);
        /* Expert 1's slot was being refilled: it is empty now, not expert 1. */
        int32_t again[2] = {1, 0};
        st = expert_cache_fetch(c, 3, again, 2, g, u, d, &pass);
        CHECKF(st == TS_OK, "%s", ts_last_error());
        CHECK(!pass.plan.hit[0] && pass.plan.evicted[0] == -1 && pass.plan.hit[1]);
        CHECK(slice_ok(g[0], 3, 1, 0) && slice_ok(u[0], 3, 1, 1) && slice_ok(d[0], 3, 1, 2) && slice_ok(d[1], 3, 0, 2));
        expert_cache_release(c, 3, &pass);
        /* Other layers are untouched. */
        int32_t o2[2] = {5, 6};
        CHECK(expert_cache_fetch(c, 1, o2, 2, g, u, d, NULL) == TS_OK && slice_ok(d[1], 1, 6, 2));
        expert_cache_stats s;
        expert_cache_get_stats(c, 2, &s);
        CHECK(s.passes == 2); /* the failed pass is not counted */
    }
    expert_cache_free(c);
    expert_map_free(&m);
    gguf_close(f);
    unlink(path);
}

/* Passes planned by the backend (expert_cache_device_*, the CPU backend's
 * reference op) against a host-slot cache on the same trace: the tables
 * point at exactly each requested expert's slices, and the counters are the
 * host cache's. A step that failed (duplicate ids: the op fails the stream)
 * leaves every slot empty, and the next passes refill them correctly. */
static void test_device_plan(const gguf_file *f, const expert_map *m, ts_backend *be, ts_stream *st, const expert_cache_opts *bo) {
    expert_cache_opts o;
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.n_slots = bo->n_slots;
    expert_cache *ref = NULL, *c = NULL;
    CHECK(expert_cache_new(m, f, &o, &ref) == TS_OK);
    CHECK(expert_cache_new(m, f, bo, &c) == TS_OK);
    if (!c || !ref || !expert_cache_device_plan(c)) {
        CHECKF(0, "device plan: %s", c ? "not offered with backend slots from the host tier" : ts_last_error());
        expert_cache_free(c);
        expert_cache_free(ref);
        return;
    }
    const size_t NE = (size_t)m->n_expert;
    const void **tabs = calloc(3 * NE, sizeof *tabs);
    const void **tab[3] = {tabs, tabs + NE, tabs + 2 * NE};
    const void *g[TOPK], *u[TOPK], *d[TOPK];
    int bad = 0;
    for (int t = 0; t < NTOK; t++) {
        CHECK(expert_cache_device_enter(c, st) == TS_OK);
        for (int l = 0; l < NMOE; l++) {
            CHECK(expert_cache_device_pass(c, st, l + 1, trace[t][l], TOPK, false, tab) == TS_OK);
            for (int i = 0; i < TOPK; i++)
                for (int p = 0; p < 3; p++) bad += !slice_ok(tab[p][trace[t][l][i]], l + 1, trace[t][l][i], p);
            CHECK(expert_cache_fetch(ref, l + 1, trace[t][l], TOPK, g, u, d, NULL) == TS_OK);
        }
        CHECK(expert_cache_device_leave(c, st, true) == TS_OK);
    }
    expert_cache_stats sc, sr;
    expert_cache_get_stats(c, -1, &sc);
    expert_cache_get_stats(ref, -1, &sr);
    CHECKF(bad == 0 && sc.passes == sr.passes && sc.hits == sr.hits && sc.misses == sr.misses && sc.evict_misses == sr.evict_misses &&
               sc.bytes_requested == sr.bytes_requested && sc.misses > 0 && sc.hits > 0,
           "device plan: %d slices wrong; passes %llu/%llu hits %llu/%llu misses %llu/%llu", bad, (unsigned long long)sc.passes,
           (unsigned long long)sr.passes, (unsigned long long)sc.hits, (unsigned long long)sr.hits, (unsigned long long)sc.misses,
           (unsigned long long)sr.misses);
    /* a failed step: the stream's error, then every slot given up */
    const int32_t dup[TOPK] = {1, 1};
    CHECK(expert_cache_device_enter(c, st) == TS_OK);
    CHECK(expert_cache_device_pass(c, st, 1, dup, TOPK, false, tab) == TS_OK);
    const ts_status es = be->ops->sync(st);
    CHECK(expert_cache_device_leave(c, st, es == TS_OK) == TS_OK);
    CHECKF(es != TS_OK, "device plan: duplicate ids did not fail the stream");
    int held = 0;
    for (int l = 0; l < NMOE; l++) {
        const cache_layer *cl = expert_cache_layer_state(c, l);
        for (int32_t s2 = 0; s2 < cl->n_slots; s2++) held += cl->slot_expert[s2] >= 0;
    }
    CHECKF(held == 0, "device plan: %d slots still held after a failed step", held);
    bad = 0;
    CHECK(expert_cache_device_enter(c, st) == TS_OK);
    for (int l = 0; l < NMOE; l++) {
        CHECK(expert_cache_device_pass(c, st, l + 1, trace[0][l], TOPK, false, tab) == TS_OK);
        for (int i = 0; i < TOPK; i++)
            for (int p = 0; p < 3; p++) bad += !slice_ok(tab[p][trace[0][l][i]], l + 1, trace[0][l][i], p);
    }
    CHECK(expert_cache_device_leave(c, st, true) == TS_OK);
    expert_cache_stats s2;
    expert_cache_get_stats(c, -1, &s2);
    CHECKF(bad == 0 && s2.cold_misses == sc.cold_misses + (uint64_t)NMOE * TOPK, "device plan after a failed step: %d slices wrong, cold %llu (was %llu)",
           bad, (unsigned long long)s2.cold_misses, (unsigned long long)sc.cold_misses);
    fprintf(stderr, "  device plan: %llu passes, %llu hits, %llu misses as the host cache's; a failed step empties the slots\n",
            (unsigned long long)sc.passes, (unsigned long long)sc.hits, (unsigned long long)sc.misses);
    free(tabs);
    expert_cache_free(c);
    expert_cache_free(ref);
}

/* Backend slots (the device path) on the CPU backend: misses copied through a
 * stream from the host tier or from the file via the staging. The bytes, and
 * every plan, equal a host-slot cache's on the same trace; the counters split
 * the bytes read from the file from the bytes copied; the misuse of the
 * stream-less calls and the device budget arithmetic. */
static void test_backend_slots(const gguf_file *f, const expert_map *m, uint64_t stride) {
    ts_backend *be = NULL;
    ts_stream *st = NULL;
    if (ts_backend_cpu_new(1, &be) != TS_OK || be->ops->stream_new(be, 1, &st) != TS_OK) {
        CHECKF(0, "cpu backend: %s", ts_last_error());
        if (be) ts_backend_free(be);
        return;
    }
    for (int src = EXPERT_SOURCE_HOST; src <= EXPERT_SOURCE_FILE; src++) {
        const char *sn = expert_source_name((expert_source)src);
        expert_cache_opts o;
        expert_cache_opts_default(&o);
        o.residency = EXPERT_RESIDENCY_STREAMED;
        o.n_slots = 3;
        expert_cache *ref = NULL, *c = NULL;
        CHECK(expert_cache_new(m, f, &o, &ref) == TS_OK);
        o.be = be;
        o.backend_slots = true;
        o.source = (expert_source)src;
        ts_status s0 = expert_cache_new(m, f, &o, &c);
        CHECKF(s0 == TS_OK, "backend slots %s: %s", sn, ts_last_error());
        if (!c || !ref) {
            expert_cache_free(c);
            expert_cache_free(ref);
            continue;
        }
        CHECK(expert_cache_backend_slots(c) && expert_cache_source(c) == (expert_source)src);
        const void *g[TOPK], *u[TOPK], *d[TOPK], *g2[TOPK], *u2[TOPK], *d2[TOPK];
        const void **w[3] = {g, u, d};
        int32_t ids2[TOPK] = {0, 1};
        CHECK(expert_cache_fetch(c, 1, ids2, TOPK, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "through a stream"));
        CHECK(expert_cache_begin(c, 1, ids2, TOPK, g, u, d, NULL) == TS_ERR_ARG && contains(ts_last_error(), "through a stream"));
        int bad = 0, plans = 0;
        for (int t = 0; t < NTOK; t++)
            for (int l = 0; l < NMOE; l++) {
                const int b = l + 1;
                expert_cache_pass pa, pb;
                if (expert_cache_fetch_on(c, st, b, trace[t][l], TOPK, g, u, d, &pa) != TS_OK ||
                    expert_cache_fetch(ref, b, trace[t][l], TOPK, g2, u2, d2, &pb) != TS_OK) {
                    CHECKF(0, "backend slots %s: fetch: %s", sn, ts_last_error());
                    t = NTOK;
                    break;
                }
                (void)be->ops->sync(st);
                for (int i = 0; i < TOPK; i++) {
                    for (int p = 0; p < 3; p++) bad += !slice_ok(w[p][i], b, trace[t][l][i], p);
                    plans += pa.plan.hit[i] != pb.plan.hit[i] || pa.plan.slot[i] != pb.plan.slot[i];
                }
                expert_cache_release(c, b, &pa);
                expert_cache_release(ref, b, &pb);
            }
        expert_cache_stats sc, sr;
        expert_cache_get_stats(c, -1, &sc);
        expert_cache_get_stats(ref, -1, &sr);
        CHECKF(bad == 0 && plans == 0, "backend slots %s: %d slices wrong, %d plans differ from host slots", sn, bad, plans);
        CHECKF(sc.hits == sr.hits && sc.misses == sr.misses && sc.misses > 0, "backend slots %s: hits %llu/%llu misses %llu/%llu", sn,
               (unsigned long long)sc.hits, (unsigned long long)sr.hits, (unsigned long long)sc.misses, (unsigned long long)sr.misses);
        /* the host tier read everything at open: nothing per pass from the file */
        if (src == EXPERT_SOURCE_HOST)
            CHECKF(sc.bytes_read == 0 && sc.bytes_uploaded >= sr.bytes_read && expert_cache_host_tier_bytes(c) >= m->total_bytes,
                   "host tier: read %llu, copied %llu (host slots read %llu)", (unsigned long long)sc.bytes_read,
                   (unsigned long long)sc.bytes_uploaded, (unsigned long long)sr.bytes_read);
        else
            CHECKF(sc.bytes_read == sr.bytes_read && sc.bytes_uploaded >= sc.bytes_read && expert_cache_host_tier_bytes(c) == 0,
                   "file tier: read %llu (host slots %llu), copied %llu", (unsigned long long)sc.bytes_read,
                   (unsigned long long)sr.bytes_read, (unsigned long long)sc.bytes_uploaded);
        char line[512];
        expert_cache_format_end(c, 0, line, sizeof line);
        CHECKF(contains(line, "copied to cpu"), "end line: %s", line);
        fprintf(stderr, "  backend slots/%s: %s\n", sn, line);
        expert_cache_free(c);
        expert_cache_free(ref);
        if (src == EXPERT_SOURCE_HOST) test_device_plan(f, m, be, st, &o);
    }
    /* the slots from the backend's free memory, less the 1 GiB headroom */
    expert_cache_opts o;
    expert_cache_opts_default(&o);
    o.residency = EXPERT_RESIDENCY_STREAMED;
    o.be = be;
    o.backend_slots = true;
    o.source = EXPERT_SOURCE_FILE;
    o.device_avail_bytes = (1ull << 30) + (uint64_t)NMOE * 4 * stride + 100;
    expert_cache *c = NULL;
    CHECKF(expert_cache_new(m, f, &o, &c) == TS_OK && expert_cache_slots(c) == 4, "device budget: %s, %d slots", c ? "" : ts_last_error(),
           c ? expert_cache_slots(c) : -1);
    expert_cache_free(c);
    c = NULL;
    o.device_avail_bytes = 0;
    o.device_budget_bytes = (uint64_t)NMOE * 2 * stride;
    o.n_slots = 3;
    CHECK(expert_cache_new(m, f, &o, &c) == TS_ERR_LIMIT && contains(ts_last_error(), "cpu expert budget"));
    expert_cache_free(c);
    o.backend_slots = true;
    o.be = NULL;
    c = NULL;
    CHECK(expert_cache_new(m, f, &o, &c) == TS_ERR_ARG && contains(ts_last_error(), "need a backend"));
    be->ops->stream_free(st);
    ts_backend_free(be);
}

static void run_layout(bool per_expert) {
    const char *layout = per_expert ? "per-expert" : "stacked";
    char path[512];
    snprintf(path, sizeof path, "%s/ts_expert_cache_%d_%s.gguf", tmpdir(), (int)getpid(), layout);
    write_model(path, per_expert);
    gguf_file *f = NULL;
    ts_status st = gguf_open(path, &f);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (!f) return;
    expert_map m;
    st = expert_map_build(f, NULL, &m);
    CHECKF(st == TS_OK, "%s", ts_last_error());
    if (st) {
        gguf_close(f);
        return;
    }
    CHECK(m.n_moe == NMOE && m.n_expert == NE && m.n_expert_used == TOPK);
    CHECK(m.layers[0].layout == (per_expert ? EXPERT_LAYOUT_PER_EXPERT : EXPERT_LAYOUT_STACKED));
    int unaligned = 0;
    for (int l = 0; l < NMOE; l++)
        for (int e = 0; e < NE; e++)
            for (int p = 0; p < 3; p++) unaligned += expert_map_slice(&m, l, e, p)->offset % 4096 != 0;
    CHECK(unaligned > NMOE * NE); /* the congruent placement is exercised */

    uint64_t stride = 0;
    {
        expert_cache_opts o;
        expert_cache_opts_default(&o);
        o.residency = EXPERT_RESIDENCY_STREAMED;
        o.n_slots = TOPK;
        expert_cache *c = NULL;
        CHECK(expert_cache_new(&m, f, &o, &c) == TS_OK);
        if (c) stride = expert_cache_slot_stride(c);
        expert_cache_free(c);
    }
    const uint64_t big = 64ull << 30;
    const uint64_t auto_budget_avail = (uint64_t)NMOE * 6 * stride + (256ull << 20); /* 6 slots after the 256 MiB headroom */
    const run_cfg cfgs[] = {
        {"resident", EXPERT_RESIDENCY_RESIDENT, EXPERT_RESIDENCY_RESIDENT, 0, 0, CACHE_POLICY_LFU, false, false, false, false, -1, 0, 0, "(as asked)", 0},
        {"resident+mlock", EXPERT_RESIDENCY_RESIDENT, EXPERT_RESIDENCY_RESIDENT, 0, 0, CACHE_POLICY_LFU, false, false, true, false, -1, 0, 0, NULL, 0},
        {"streamed k", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, TOPK, TOPK, CACHE_POLICY_LFU, false, false, false, true, 3, 0, 0, NULL, 0},
        {"streamed k lru", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, TOPK, TOPK, CACHE_POLICY_LRU, false, false, false, false, 3, 0, 0, NULL, 0},
        {"streamed 3 lru", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, 3, 3, CACHE_POLICY_LRU, false, false, false, false, 2, 0, 0, NULL, 0},
        {"streamed 5", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, 5, 5, CACHE_POLICY_LFU, false, false, false, false, 4, 0, 0, NULL, 0},
        {"streamed 8", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, NE, NE, CACHE_POLICY_LFU, false, false, false, false, 1, 0, 0, NULL, 0},
        {"streamed 20", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, 20, 20, CACHE_POLICY_LFU, false, false, false, false, 2, 0, 0, NULL, 0},
        {"streamed 3 no-threads", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, 3, 3, CACHE_POLICY_LFU, false, false, false, false, 0, 0, 0, NULL, 0},
        {"streamed k nocache", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, TOPK, TOPK, CACHE_POLICY_LFU, true, false, false, true, 3, 0, 0, NULL, 60},
        {"streamed 4 nocache-fadvise", EXPERT_RESIDENCY_STREAMED, EXPERT_RESIDENCY_STREAMED, 4, 4, CACHE_POLICY_LFU, true, true, false, false, 2, 0, 0, NULL, 60},
        {"mapped", EXPERT_RESIDENCY_MAPPED, EXPERT_RESIDENCY_MAPPED, 0, 0, CACHE_POLICY_LFU, false, false, false, true, -1, 0, 0, NULL, 0},
        {"auto big", EXPERT_RESIDENCY_AUTO, EXPERT_RESIDENCY_RESIDENT, 0, 0, CACHE_POLICY_LFU, false, false, false, false, -1, 0, big, "resident (auto: all", 0},
        {"auto budget 4", EXPERT_RESIDENCY_AUTO, EXPERT_RESIDENCY_STREAMED, 0, 4, CACHE_POLICY_LFU, false, false, false, false, 2, (uint64_t)NMOE * 4 * stride + 100, 0, "expert budget", 0},
        {"auto avail 6", EXPERT_RESIDENCY_AUTO, EXPERT_RESIDENCY_STREAMED, 0, 6, CACHE_POLICY_LRU, false, false, false, false, 2, 0, auto_budget_avail, "streamed (auto:", 0},
        {"auto slots 3", EXPERT_RESIDENCY_AUTO, EXPERT_RESIDENCY_STREAMED, 3, 3, CACHE_POLICY_LFU, false, false, false, false, 2, 0, 0, "3 slots per layer given", 0},
        {"auto tiny", EXPERT_RESIDENCY_AUTO, EXPERT_RESIDENCY_MAPPED, 0, 0, CACHE_POLICY_LFU, false, false, false, false, -1, 0, 1u << 20, "mapped (auto", 0},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof *cfgs; i++) run_trace(f, &m, &cfgs[i], layout);
    test_refusals(f, &m);
    test_misuse(f, &m);
    test_backend_slots(f, &m, stride);
    test_memory_file(path, &m);
    expert_map_free(&m);
    gguf_close(f);
    unlink(path);
    test_read_error(path, per_expert);
}

int main(void) {
    make_expected();
    make_trace();
    test_parsers();
    run_layout(false);
    run_layout(true);
    for (int b = 1; b < NB; b++)
        for (int e = 0; e < NE; e++)
            for (int p = 0; p < 3; p++) free(expected[b][e][p]);
    return tu_finish();
}
