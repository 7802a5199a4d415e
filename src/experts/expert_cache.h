/* The runtime expert cache: where the MoE forward pass gets a routed
 * expert's gate, up and down weights from.
 *
 * Residency modes (--expert-residency):
 *   resident  every expert is used in place from the file mapping; at open
 *             all expert pages are faulted in (MADV_POPULATE_READ, or a touch
 *             per page) and, when asked and allowed, mlock'ed. No slots.
 *   streamed  each MoE layer has N slots (--expert-cache-slots); a routed
 *             pass asks the policy (policy.h) which experts hit and where the
 *             misses go, reads the misses' three slices with pread through
 *             the I/O pool (expert_io.h) as one batch, then commits. Slices
 *             are byte ranges of the file's own tensors (expert_locator.h):
 *             nothing is repacked.
 *   mapped    experts are used in place from the mapping and the OS page
 *             cache is the cache: no slots, no prefault, no hit accounting.
 *   On a device backend (or with backend slots asked, below):
 *     resident  each expert copied once into device memory at open; the
 *               tables and fetches give the copies.
 *     streamed  the slots are backend (device) memory; a miss is copied into
 *               its slot on the caller's stream (to_device, which a GPU runs
 *               as an async DMA) from one of two tiers (expert_source):
 *                 host  every expert read at open into pinned host memory,
 *                       laid out as the slots are: one copy per miss;
 *                 file  the misses pread (the same I/O pool) into pinned
 *                       staging, copied up, and the stream synced before the
 *                       staging is reused (still under the lock).
 *               Bytes over the bus (bytes_uploaded) and bytes from the file
 *               (bytes_read) are counted apart.
 *     mapped    refused: the device cannot read the mapping.
 *     auto      resident when every expert fits the device budget
 *               (--gpu-expert-budget, or the backend's free memory less a
 *               headroom), streamed when top-k slots per layer fit it.
 *   auto      picks one of the three from a memory budget (--expert-budget,
 *             or what /proc/meminfo MemAvailable and the cgroup limit leave)
 *             and says what it chose and why (expert_cache_choice()).
 * Non-expert weights are not this module's business: they stay in the
 * mapping, resident.
 *
 * Determinism. Whatever the mode, slot count or policy, fetching expert e of
 * a layer gives pointers to exactly that expert's bytes of the file, so the
 * forward pass's output does not depend on how experts are kept.
 *
 * Slot layout (streamed). One page-aligned allocation per layer of
 * n_slots * slot stride bytes. Inside a slot the gate, up and down slices
 * follow each other, each placed at an address congruent to its file offset
 * modulo EXPERT_IO_ALIGN (4096): with TURBOSPARK_EXPERT_NOCACHE=1 the O_DIRECT
 * reads then land in place, with at most one block of copy at each end of a
 * slice. The stride is the largest such layout over the layer's experts,
 * rounded up to 4096 (at most 3 * 4096 more than the layer's expert_bytes).
 * The positions are recomputed from the offsets on each fetch (no table).
 *
 * Sharing. The cache belongs to the model and serves every session at once:
 * one mutex per cache is held for the whole of a fetch (plan, reads, commit),
 * so passes are applied one after another, and the slots a fetch hands out
 * are pinned until the caller's expert_cache_release. A pinned slot is never
 * a victim; a fetch that finds every candidate slot pinned by other passes
 * waits (condition variable) for a release. Holding the lock across the
 * reads serialises the sessions' I/O, which a disk serves one queue at a
 * time anyway, and keeps the policy's order of passes well defined. A prefill's
 * fetch_ahead (below) is the one exception: its reads run with the lock
 * released while its caller computes, the cache marked pending meanwhile,
 * so the next fetch waits for fetch_finish just as it would have waited for
 * the lock, and the order of passes is the same. With one
 * session the order, and so every hit and miss, is exactly what the offline
 * replay (analyze cache) computes; with several, their passes interleave.
 *
 * The routed pass, one layer at a time (one thread):
 *   expert_cache_begin(c, block, ids, k, gate, up, down, &pass)
 *       plans, and submits the misses' reads as ONE batch; returns at once.
 *       gate/up/down[i] are set for every i. Where pass.hit[i] is true (and
 *       always in resident and mapped mode) the weights are usable at once;
 *       a miss's pointers are usable only after expert_cache_end returns OK.
 *   expert_cache_end(c, block)
 *       waits for the batch and commits the plan (the policy's use counts and
 *       ticks). Must follow every successful begin, before the next begin.
 *   expert_cache_fetch() = begin + end + pin; expert_cache_release() unpins.
 *   begin/end (tests) take and drop the lock themselves and pin nothing.
 * Pointer lifetime: resident and mapped pointers live as long as the mapping
 * (the gguf_file). Streamed pointers stay valid until the next begin/fetch on
 * the same layer, which may evict them (the current pass's own experts are
 * never evicted by it); passes on other layers do not touch them.
 * ids are what the forward pass asks for in one pass: for a chunk of one
 * token its top-k in router rank order; for a prefill chunk up to k of the
 * chunk's distinct experts, in order of first appearance over (token, rank)
 * (forward/moe.c). The policy's victim order depends on the order, and the
 * offline replay (analyze cache) rebuilds the same sequence from the router
 * trace and its chunk lengths.
 *
 * Errors. A failed read (I/O error, short file) is returned by
 * expert_cache_end with a message naming the block, the file and the offset;
 * the slots that were being filled are emptied (never left holding half an
 * expert under the old expert's name), the plan is not committed, and the
 * cache stays usable. Bad ids, a k above the slot count, begin while a pass is
 * pending, end without begin: TS_ERR_ARG, nothing changed.
 *
 * Memory. Nothing is allocated by begin/end/fetch: request arrays are fixed
 * (CACHE_MAX_K * 3), slots are allocated at open, and the I/O pool's chunk
 * array is grown at open by a warm-up read of top-k experts (which also checks
 * the file can be read before the first token); a later pass needing a few
 * more chunks grows it once more, never per pass. */
#ifndef TS_EXPERTS_CACHE_H
#define TS_EXPERTS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "experts/expert_io.h"
#include "experts/expert_locator.h"
#include "experts/policy.h"
#include "gguf/gguf.h"

/* Backend slots in streamed mode: the tier misses are copied from. */
typedef enum expert_source {
    EXPERT_SOURCE_AUTO = 0,
    EXPERT_SOURCE_HOST = 1, /* every expert in pinned host memory, read at open */
    EXPERT_SOURCE_FILE = 2, /* pread into pinned staging on each miss */
} expert_source;

const char *expert_source_name(expert_source s); /* "auto" / "host" / "file" */

typedef enum expert_residency {
    EXPERT_RESIDENCY_AUTO = 0,
    EXPERT_RESIDENCY_RESIDENT = 1,
    EXPERT_RESIDENCY_STREAMED = 2,
    EXPERT_RESIDENCY_MAPPED = 3,
} expert_residency;

const char *expert_residency_name(expert_residency r); /* "auto" / "resident" / "streamed" / "mapped" */

/* CLI value parsers: on a bad value TS_ERR_ARG and a message that names the
 * option and the accepted values. */
ts_status expert_cache_parse_residency(const char *s, expert_residency *out); /* --expert-residency */
ts_status expert_cache_parse_slots(const char *s, int32_t *out);             /* --expert-cache-slots N|auto; auto -> 0 */
ts_status expert_cache_parse_policy(const char *s, cache_policy *out);       /* --expert-policy lfu|lru */
ts_status expert_cache_parse_source(const char *s, expert_source *out);      /* --gpu-expert-source host|file|auto */
/* --expert-budget is parsed by ts_parse_bytes (include/turbospark.h). */

typedef struct expert_cache_opts {
    expert_residency residency; /* AUTO by default */
    int32_t n_slots;            /* slots per MoE layer; 0 = auto (from the budget) */
    uint64_t budget_bytes;      /* --expert-budget: memory the experts may take (slots, or the resident experts); 0 = unset: from available memory */
    uint64_t reserve_bytes;     /* when the budget comes from available memory: what the rest of the run needs (non-expert weights, KV, scratch) */
    uint64_t avail_bytes;       /* available memory to assume instead of reading /proc/meminfo and the cgroup (tests); 0 = read them */
    cache_policy policy;        /* LFU by default */
    bool mlock;                 /* resident: try to mlock the expert pages (a failure is reported, not fatal) */
    expert_io_config io;        /* streamed: pool shape, TURBOSPARK_EXPERT_NOCACHE, TURBOSPARK_EXPERT_DISK_IO */
    struct ts_backend *be;      /* slot memory comes from its host_alloc; NULL: the C heap (tests) */
    /* backend slots: automatic on a device backend; backend_slots asks for
     * them on a host-memory one too, so the CPU runs (and tests) the device
     * path's copies */
    bool backend_slots;
    expert_source source;        /* backend slots: where misses are copied from (AUTO: host when all experts fit the host budget) */
    uint64_t device_budget_bytes; /* backend slots: backend memory the experts may take; 0 = from device_avail_bytes */
    uint64_t device_avail_bytes;  /* backend memory to assume free; 0 = ask the backend (mem_info) */
    /* called from the opening thread as expert bytes are loaded at open
     * (prefaulted, uploaded to a device, read into the host tier), `bytes`
     * more each time; NULL: no reports */
    void (*progress)(void *user, uint64_t bytes);
    void *progress_user;
} expert_cache_opts;

/* AUTO, slots auto, no budget, LFU, no mlock, expert_io_config_default. */
void expert_cache_opts_default(expert_cache_opts *o);

/* Memory this process could still take: min(MemAvailable, the tightest
 * cgroup (v2 or v1) limit on the way up from this process's group, less its
 * usage, plus its inactive page cache). src (may be NULL) gets where the
 * number came from, e.g. "MemAvailable" or "cgroup memory.max". */
ts_status expert_cache_available_memory(uint64_t *out, char *src, size_t src_n);

typedef struct expert_cache expert_cache;

/* Opens the cache for the experts of map (built from f). map and f must
 * outlive the cache; opts NULL = expert_cache_opts_default. Refusals (TS_ERR_ARG / TS_ERR_LIMIT / TS_ERR_UNSUPPORTED, message
 * with the numbers): a model without routed experts; N below top-k; a budget
 * that cannot hold top-k experts per layer; an unknown policy or residency;
 * streamed on a file with no descriptor (gguf_open_memory). */
ts_status expert_cache_new(const expert_map *map, const gguf_file *f, const expert_cache_opts *opts, expert_cache **out);
/* Waits for a pass in flight, frees slots, unlocks pages, stops the pool. */
void expert_cache_free(expert_cache *c);

/* What one routed pass did. */
typedef struct expert_cache_pass {
    int32_t moe;        /* MoE layer index (0..n_moe-1) of the block */
    bool tracked;       /* hits/misses are meaningful (streamed, resident); false in mapped mode */
    cache_plan plan;    /* streamed: the policy's plan; resident: all hits; mapped: all marked hit, slot -1 */
    int32_t n_cold;     /* misses into an empty slot */
    int32_t n_evict;    /* misses that evicted an expert */
    uint64_t bytes_requested; /* gate+up+down bytes of the k experts */
    uint64_t bytes_read;      /* bytes submitted for reading from the file (the misses; backend slots: file tier only) */
    uint64_t bytes_uploaded;  /* backend slots: bytes copied into slots over the bus (the misses) */
    double io_wait_s;         /* time this pass waited for its reads */
    bool pinned;              /* its slots are pinned (fetch): release them */
    bool ahead;               /* fetched by expert_cache_fetch_ahead, its reads not yet waited for: expert_cache_fetch_finish */
} expert_cache_pass;

/* block: the blk.N index (the forward pass's layer); must be an MoE block.
 * ids: k distinct expert ids in request order (above), 1 <= k <= min(slots,
 * CACHE_MAX_K). gate/up/down: arrays of k; pass may be NULL. */
ts_status expert_cache_begin(expert_cache *c, int32_t block, const int32_t *ids, int32_t k, const void **gate,
                             const void **up, const void **down, expert_cache_pass *pass);
ts_status expert_cache_end(expert_cache *c, int32_t block);
/* Thread-safe: plan, reads and commit under the cache's lock; the returned
 * pointers stay valid until expert_cache_release(c, block, pass). With pass
 * NULL nothing is pinned (single-threaded callers only). */
ts_status expert_cache_fetch(expert_cache *c, int32_t block, const int32_t *ids, int32_t k, const void **gate,
                             const void **up, const void **down, expert_cache_pass *pass);
void expert_cache_release(expert_cache *c, int32_t block, expert_cache_pass *pass);
/* fetch for a cache with backend slots: the misses' copies are enqueued on
 * st (the pass's kernels follow them on it); the slots stay pinned until
 * release, which the caller does once st has run past the kernels that
 * read them (a sync). With host slots st is unused (may be NULL). */
struct ts_stream;
ts_status expert_cache_fetch_on(expert_cache *c, struct ts_stream *st, int32_t block, const int32_t *ids, int32_t k,
                                const void **gate, const void **up, const void **down, expert_cache_pass *pass);
/* A prefill chunk's next pass, fetched while the caller still computes with
 * its current pass (whose slots it holds pinned): the next pass's plan avoids
 * every pinned slot, so it never takes a slot the current pass is reading.
 * When that leaves a miss without a victim (few slots: fewer than about two
 * passes' worth) it returns TS_ERR_LIMIT at once, with no message and nothing
 * changed, instead of waiting: the caller releases its pass and fetches.
 * Host slots: the plan is made and pinned and the misses' reads submitted,
 * and the call returns with pass->ahead set; expert_cache_fetch_finish waits
 * for the reads and commits. In between the cache is pending (another
 * session's fetch waits, as it waits for a fetch's reads), and the pass's
 * miss pointers must not be read. Backend slots: the whole fetch (fetch_on:
 * the copies are enqueued on st, behind what st already holds), pass->ahead
 * false. The plan rule, not the overlap, is what analyze cache's replay
 * follows (router_replay_layer): a chunk's pass after its first is planned
 * with the previous pass's slots busy, or freely when that is impossible. */
ts_status expert_cache_fetch_ahead(expert_cache *c, struct ts_stream *st, int32_t block, const int32_t *ids, int32_t k,
                                   const void **gate, const void **up, const void **down, expert_cache_pass *pass);
/* Waits for fetch_ahead's reads and commits its plan (no-op when pass->ahead
 * is false). pass->io_wait_s gets the time waited. On a failed read the
 * pass's slots are emptied and unpinned, and the error returned. */
ts_status expert_cache_fetch_finish(expert_cache *c, int32_t block, expert_cache_pass *pass);
/* Pilot prefetch (backend slots): warms block's slots with the experts
 * ids[0..k) a pilot guesses its next pass will ask for. Each one not in a
 * slot is copied on strm into a victim the policy picks (never a pinned
 * slot), and placed there without a use (cache_prefetch_commit). When any
 * copy is made, strm first waits for `after` (an event the caller recorded
 * on another stream; may be NULL), and `done` is recorded on strm after the
 * copies. The copied slots are pinned in *pass (pass->plan.k of them; none
 * when nothing needed copying or every victim is pinned elsewhere, which is
 * not an error: a guess never waits). The caller waits for `done` and
 * releases the pass before its next fetch on block; that fetch then counts
 * each copy saved (asked for) or wasted. The file tier reads and syncs strm
 * under the lock (its staging is shared). Output never depends on it: a
 * slot holds exactly its expert's bytes either way. */
struct ts_event;
ts_status expert_cache_prefetch_on(expert_cache *c, struct ts_stream *strm, struct ts_event *after, struct ts_event *done,
                                   int32_t block, const int32_t *ids, int32_t k, expert_cache_pass *pass);
/* Streamed decode planned by the backend: no host round trip per layer,
 * so a device records a decode token as one graph. The backend keeps a copy
 * of every layer's policy state (and prefetch marks and counters) and runs
 * each pass on it (the expert_pass op: the same policy, judgement and
 * counters as a host pass, the misses copied from the host tier by the
 * backend itself). Bracketed, by one thread, around a decode step:
 *   expert_cache_device_enter(c, st)
 *       takes the cache's lock (held until leave: other sessions' passes
 *       wait a step), waits until no slot is pinned by a host pass, and
 *       uploads the host's state when a host pass changed it since the last
 *       leave;
 *   expert_cache_device_pass(c, st, block, ids, k, prefetch, tab)  (any number)
 *       enqueues one pass on st (ids: k backend ids; a prefetch: the pilot's
 *       guesses placed without a use, tab unused) and points tab[p][ids[i]]
 *       (3 tables, backend memory) at the slots;
 *   expert_cache_device_leave(c, st, step_ok)
 *       downloads the state (a sync of st), makes it the host's (stats,
 *       layer state, analyze's replay all see it), and unlocks. When the
 *       step failed (step_ok false: the caller saw an error, e.g. at its own
 *       sync) or the download fails, every slot is emptied instead: a slot
 *       never serves bytes that may not be its expert's.
 * Enqueueing on a stream being recorded is fine: the passes read the ids
 * and the state where they are when they run. Needs backend slots fed from
 * the host tier and a backend with expert_pass (expert_cache_device_plan). */
bool expert_cache_device_plan(const expert_cache *c);
ts_status expert_cache_device_enter(expert_cache *c, struct ts_stream *st);
ts_status expert_cache_device_pass(expert_cache *c, struct ts_stream *st, int32_t block, const int32_t *ids, int32_t k, bool prefetch,
                                   const void **const *tab);
ts_status expert_cache_device_leave(expert_cache *c, struct ts_stream *st, bool step_ok);
/* The slots are backend memory filled through a stream (fetch_on). */
bool expert_cache_backend_slots(const expert_cache *c);
/* Resident and mapped modes: every expert addressable by id. tab[p] (backend
 * memory, n_expert entries) holds the backend address of each expert's
 * projection p (the ops' ts_expert_mat.table), host_tab[p] (host memory,
 * may be NULL) the same addresses; valid for the cache's life. False in
 * streamed mode, where only a fetch says where an expert is. Reading
 * through the tables takes no lock: nothing they point to moves. */
bool expert_cache_tables(const expert_cache *c, int32_t block, const void *const *tab[EXPERT_PROJ_COUNT],
                         const void *const *host_tab[EXPERT_PROJ_COUNT]);
/* The tables exist (resident or mapped mode): expert_cache_tables succeeds
 * for every MoE block. */
bool expert_cache_addressable(const expert_cache *c);
/* Counts a routed pass of k experts that went through the tables (the ids
 * stay where they were routed, maybe on a device): passes, requests, hits
 * (resident) and bytes requested (k times the layer's expert size: exact for
 * stacked layouts, the largest expert for per-expert ones). Under the lock. */
void expert_cache_count(expert_cache *c, int32_t block, int32_t k);
/* Physical-bytes accounting was asked for (TURBOSPARK_EXPERT_DISK_IO). */
bool expert_cache_disk_io_on(const expert_cache *c);

expert_residency expert_cache_residency(const expert_cache *c); /* never AUTO: the mode chosen */
expert_source expert_cache_source(const expert_cache *c);       /* backend slots: the tier (never AUTO); AUTO otherwise */
uint64_t expert_cache_host_tier_bytes(const expert_cache *c);   /* pinned host memory holding every expert (host tier), 0 otherwise */
int32_t expert_cache_slots(const expert_cache *c);              /* slots per layer (streamed), 0 otherwise */
uint64_t expert_cache_slot_bytes(const expert_cache *c);        /* all slot buffers together */
uint64_t expert_cache_slot_stride(const expert_cache *c);       /* largest slot over the layers: the unit of the budget arithmetic */
cache_policy expert_cache_policy(const expert_cache *c);
/* Streamed: the policy state of MoE layer moe (read only; the replay
 * analyzer's equal). NULL otherwise. */
const cache_layer *expert_cache_layer_state(const expert_cache *c, int32_t moe);
/* One line: the mode and why, e.g. "expert residency: streamed (auto: 30.5
 * GiB of experts exceed the 12.0 GiB budget from available memory)". */
const char *expert_cache_choice(const expert_cache *c);

typedef struct expert_cache_stats {
    uint64_t passes;          /* routed passes committed */
    uint64_t requests;        /* experts requested (the sum of the passes' k: a prefill chunk's last pass may ask fewer) */
    uint64_t hits;            /* streamed: resident in a slot; resident mode: every request; mapped: 0 (unknown) */
    uint64_t misses;          /* streamed: read from the file */
    uint64_t cold_misses;     /* misses into an empty slot */
    uint64_t evict_misses;    /* misses that evicted another expert */
    uint64_t bytes_requested; /* gate+up+down bytes of the requested experts */
    uint64_t bytes_read;      /* bytes read from the file for slots (logical; pread lengths; prefetches included) */
    uint64_t bytes_uploaded;  /* backend slots: bytes copied into slots over the bus */
    double io_wait_s;         /* time expert_cache_end spent waiting for reads */
    /* pilot prefetch (expert_cache_prefetch_on); once the layer's next pass
     * has run, copies = saved + wasted */
    uint64_t prefetch_copies;  /* experts copied into slots ahead of their pass */
    uint64_t prefetch_saved;   /* of those, asked for by the layer's next pass: a miss it did not have */
    uint64_t prefetch_wasted;  /* of those, not asked for by it */
    uint64_t bytes_prefetched; /* bytes of those copies (over the bus; not in bytes_uploaded) */
} expert_cache_stats;

/* moe = MoE layer index, or -1 for the total over layers. */
void expert_cache_get_stats(const expert_cache *c, int32_t moe, expert_cache_stats *out);
/* Bytes this process read from storage since open / the last reset
 * (/proc/self/io read_bytes: every read of the process, mapping faults
 * included). TS_ERR_UNSUPPORTED when disk-io accounting is off
 * (TURBOSPARK_EXPERT_DISK_IO) or /proc/self/io is unreadable. */
ts_status expert_cache_physical_bytes(const expert_cache *c, uint64_t *out);
/* Zeroes the counters (e.g. after prefill); the cache contents stay. */
void expert_cache_reset_stats(expert_cache *c);

/* "expert cache: streamed, 16 slots/layer (lfu), 2.1 GiB of slots for 48
 * layers". Returns snprintf's count. */
int expert_cache_format_start(const expert_cache *c, char *buf, size_t n);
/* "expert cache: 4800 requests, 3900 hits (81.3%), 900 misses (120 cold, 780
 * evict), 12.3 MiB read/token, 0.52 s I/O wait"; n_tokens = tokens the run
 * processed (0: no per-token figures). */
int expert_cache_format_end(const expert_cache *c, uint64_t n_tokens, char *buf, size_t n);

#endif
