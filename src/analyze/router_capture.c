#include "analyze/router_capture.h"
#include "analyze/json_in.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ts_status bad(const char *path, const char *what) {
    return ts_fail(TS_ERR_FORMAT, "%s: inconsistent router capture: %s", path, what);
}

static bool get_int(const cJSON *o, const char *key, int32_t lo, int32_t hi, int32_t *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo || j->valuedouble > hi) return false;
    *out = (int32_t)j->valuedouble;
    return true;
}

/* Reads an array of integers in [lo, hi] (`kind` names them in the error)
 * into a new buffer. */
static ts_status read_ints(const char *path, const cJSON *arr, int64_t lo, int64_t hi, const char *kind, int32_t **v, uint64_t *len,
                           const char *what) {
    *v = NULL;
    *len = 0;
    char m[192];
    if (!cJSON_IsArray(arr)) {
        snprintf(m, sizeof m, "%s must be an array", what);
        return bad(path, m);
    }
    int n = cJSON_GetArraySize(arr);
    *v = ts_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!*v) return TS_ERR_NOMEM;
    const cJSON *e;
    uint64_t i = 0;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < (double)lo || e->valuedouble > (double)hi) {
            snprintf(m, sizeof m, "%s holds a value that is not %s in [%lld, %lld]", what, kind, (long long)lo, (long long)hi);
            return bad(path, m);
        }
        (*v)[i++] = (int32_t)e->valuedouble;
    }
    *len = i;
    return TS_OK;
}

static ts_status read_ids(const char *path, const cJSON *arr, int32_t n_experts, int32_t **ids, uint64_t *len, const char *what) {
    return read_ints(path, arr, 0, n_experts - 1, "an expert id", ids, len, what);
}

void router_capture_free(router_capture *c) {
    for (int32_t l = 0; l < c->num_layers; l++) {
        if (c->trace) free(c->trace[l]);
        if (c->pred) free(c->pred[l]);
        if (c->prefetch) free(c->prefetch[l]);
        if (c->chunks) free(c->chunks[l]);
    }
    free(c->chunks);
    free(c->chunks_len);
    free(c->trace);
    free(c->pred);
    free(c->prefetch);
    free(c->prefetch_len);
    free(c->trace_len);
    free(c->pred_len);
    free(c->counts);
    free(c->path);
    memset(c, 0, sizeof *c);
}

uint64_t router_capture_passes(const router_capture *c, int32_t l) {
    uint64_t s = 0;
    for (int32_t e = 0; e < c->num_experts; e++) s += c->counts[(size_t)l * c->num_experts + e];
    return s / (uint64_t)c->top_k;
}

bool router_capture_layer_routes(const router_capture *c, int32_t l) { return router_capture_passes(c, l) > 0; }

ts_status router_capture_load(const char *path, uint64_t max_bytes, router_capture *out) {
    memset(out, 0, sizeof *out);
    cJSON *root;
    ts_status st = json_in_load(path, max_bytes, &root);
    if (st) return st;
    char msg[256];
    if (!(out->path = strdup(path))) {
        st = ts_fail(TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!get_int(root, "num_layers", 1, 100000, &out->num_layers) || !get_int(root, "num_experts", 1, 1000000, &out->num_experts) ||
        !get_int(root, "top_k", 1, CACHE_MAX_K, &out->top_k)) {
        st = bad(path, "num_layers, num_experts and top_k must be positive integers");
        goto done;
    }
    if (out->top_k > out->num_experts) { st = bad(path, "top_k exceeds num_experts"); goto done; }
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(root, "counts");
    if (!cJSON_IsArray(counts) || cJSON_GetArraySize(counts) != out->num_layers) { st = bad(path, "counts must have num_layers rows"); goto done; }
    out->counts = ts_calloc((size_t)out->num_layers * (size_t)out->num_experts, sizeof(uint64_t));
    if (!out->counts) { st = TS_ERR_NOMEM; goto done; }
    int32_t l = 0;
    const cJSON *row;
    uint64_t total = 0;
    cJSON_ArrayForEach(row, counts) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != out->num_experts) {
            snprintf(msg, sizeof msg, "counts row %d does not have num_experts entries", l);
            st = bad(path, msg);
            goto done;
        }
        int32_t e = 0;
        const cJSON *v;
        uint64_t sum = 0;
        cJSON_ArrayForEach(v, row) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) || v->valuedouble > 1e15) {
                snprintf(msg, sizeof msg, "counts[%d][%d] is not a non-negative integer", l, e);
                st = bad(path, msg);
                goto done;
            }
            out->counts[(size_t)l * out->num_experts + e++] = (uint64_t)v->valuedouble;
            if (!ts_add_u64(sum, (uint64_t)v->valuedouble, &sum)) {
                snprintf(msg, sizeof msg, "layer %d counts overflow 64 bits", l);
                st = bad(path, msg);
                goto done;
            }
        }
        if (sum % (uint64_t)out->top_k) {
            snprintf(msg, sizeof msg, "layer %d counts sum to %llu, not a multiple of top_k=%d", l, (unsigned long long)sum, out->top_k);
            st = bad(path, msg);
            goto done;
        }
        if (!ts_add_u64(total, sum, &total)) { st = bad(path, "counts overflow 64 bits"); goto done; }
        l++;
    }
    if (total == 0) { st = bad(path, "no layer routed a single pass (all counts are zero): nothing to analyse"); goto done; }

    const cJSON *trace = cJSON_GetObjectItemCaseSensitive(root, "trace");
    if (trace && !cJSON_IsNull(trace)) {
        if (!cJSON_IsArray(trace) || cJSON_GetArraySize(trace) != out->num_layers) { st = bad(path, "trace must have num_layers rows"); goto done; }
        out->has_trace = true;
        out->trace = ts_calloc((size_t)out->num_layers, sizeof *out->trace);
        out->trace_len = ts_calloc((size_t)out->num_layers, sizeof *out->trace_len);
        uint64_t *hist = ts_calloc((size_t)out->num_experts, sizeof *hist);
        if (!out->trace || !out->trace_len || !hist) { free(hist); st = TS_ERR_NOMEM; goto done; }
        l = 0;
        cJSON_ArrayForEach(row, trace) {
            snprintf(msg, sizeof msg, "trace row %d", l);
            if ((st = read_ids(path, row, out->num_experts, &out->trace[l], &out->trace_len[l], msg))) { free(hist); goto done; }
            memset(hist, 0, sizeof(uint64_t) * (size_t)out->num_experts);
            for (uint64_t i = 0; i < out->trace_len[l]; i++) hist[out->trace[l][i]]++;
            if (memcmp(hist, out->counts + (size_t)l * out->num_experts, sizeof(uint64_t) * (size_t)out->num_experts) != 0) {
                snprintf(msg, sizeof msg, "layer %d counts do not equal the histogram of its trace", l);
                free(hist);
                st = bad(path, msg);
                goto done;
            }
            /* within a pass the top-k ids are distinct */
            for (uint64_t p = 0; p + (uint64_t)out->top_k <= out->trace_len[l]; p += (uint64_t)out->top_k)
                for (int32_t i = 0; i < out->top_k; i++)
                    for (int32_t j = 0; j < i; j++)
                        if (out->trace[l][p + i] == out->trace[l][p + j]) {
                            snprintf(msg, sizeof msg, "layer %d pass %llu names expert %d twice", l, (unsigned long long)(p / out->top_k),
                                     out->trace[l][p + i]);
                            free(hist);
                            st = bad(path, msg);
                            goto done;
                        }
            l++;
        }
        free(hist);
    }
    const cJSON *pred = cJSON_GetObjectItemCaseSensitive(root, "pred");
    if (pred && !cJSON_IsNull(pred)) {
        if (!out->has_trace) { st = bad(path, "pred without trace cannot be lined up"); goto done; }
        if (!cJSON_IsArray(pred) || cJSON_GetArraySize(pred) != out->num_layers) { st = bad(path, "pred must have num_layers rows"); goto done; }
        out->has_pred = true;
        out->pred_k = out->top_k;
        out->pred = ts_calloc((size_t)out->num_layers, sizeof *out->pred);
        out->pred_len = ts_calloc((size_t)out->num_layers, sizeof *out->pred_len);
        if (!out->pred || !out->pred_len) { st = TS_ERR_NOMEM; goto done; }
        l = 0;
        cJSON_ArrayForEach(row, pred) {
            snprintf(msg, sizeof msg, "pred row %d", l);
            if ((st = read_ids(path, row, out->num_experts, &out->pred[l], &out->pred_len[l], msg))) goto done;
            if (l == 0 && out->pred_len[0]) { st = bad(path, "pred row 0 must be empty (no layer before it to probe from)"); goto done; }
            if (l > 0 && out->pred_len[l] && out->pred_len[l] != out->trace_len[l]) {
                snprintf(msg, sizeof msg, "pred row %d has %llu ids but trace row has %llu: they must line up pass by pass", l,
                         (unsigned long long)out->pred_len[l], (unsigned long long)out->trace_len[l]);
                st = bad(path, msg);
                goto done;
            }
            /* a prediction names top_k distinct experts per pass, like the
             * router: a repeat would count one prefetch as two */
            for (uint64_t p = 0; p + (uint64_t)out->pred_k <= out->pred_len[l]; p += (uint64_t)out->pred_k)
                for (int32_t i = 0; i < out->pred_k; i++)
                    for (int32_t j = 0; j < i; j++)
                        if (out->pred[l][p + i] == out->pred[l][p + j]) {
                            snprintf(msg, sizeof msg, "pred layer %d pass %llu names expert %d twice", l,
                                     (unsigned long long)(p / (uint64_t)out->pred_k), out->pred[l][p + i]);
                            st = bad(path, msg);
                            goto done;
                        }
            l++;
        }
    }
    const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(root, "chunks");
    if (chunks && !cJSON_IsNull(chunks)) {
        if (!out->has_trace) { st = bad(path, "chunks without trace have nothing to divide"); goto done; }
        if (!cJSON_IsArray(chunks) || cJSON_GetArraySize(chunks) != out->num_layers) { st = bad(path, "chunks must have num_layers rows"); goto done; }
        out->has_chunks = true;
        out->chunks = ts_calloc((size_t)out->num_layers, sizeof *out->chunks);
        out->chunks_len = ts_calloc((size_t)out->num_layers, sizeof *out->chunks_len);
        if (!out->chunks || !out->chunks_len) { st = TS_ERR_NOMEM; goto done; }
        l = 0;
        cJSON_ArrayForEach(row, chunks) {
            snprintf(msg, sizeof msg, "chunks row %d", l);
            if ((st = read_ints(path, row, 1, 1000000000, "a token count", &out->chunks[l], &out->chunks_len[l], msg))) goto done;
            uint64_t sum = 0;
            for (uint64_t i = 0; i < out->chunks_len[l]; i++) sum += (uint64_t)out->chunks[l][i];
            if (sum != out->trace_len[l] / (uint64_t)out->top_k) {
                snprintf(msg, sizeof msg, "layer %d chunks sum to %llu tokens but its trace has %llu passes", l, (unsigned long long)sum,
                         (unsigned long long)(out->trace_len[l] / (uint64_t)out->top_k));
                st = bad(path, msg);
                goto done;
            }
            l++;
        }
    }
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(root, "prefetch");
    if (pf && !cJSON_IsNull(pf)) {
        if (!out->has_trace) { st = bad(path, "prefetch without trace has no passes to precede"); goto done; }
        if (!cJSON_IsArray(pf) || cJSON_GetArraySize(pf) != out->num_layers) { st = bad(path, "prefetch must have num_layers rows"); goto done; }
        out->has_prefetch = true;
        out->prefetch = ts_calloc((size_t)out->num_layers, sizeof *out->prefetch);
        out->prefetch_len = ts_calloc((size_t)out->num_layers, sizeof *out->prefetch_len);
        if (!out->prefetch || !out->prefetch_len) { st = TS_ERR_NOMEM; goto done; }
        l = 0;
        cJSON_ArrayForEach(row, pf) {
            snprintf(msg, sizeof msg, "prefetch row %d", l);
            if ((st = read_ints(path, row, 0, INT32_MAX, "a pass, count or expert id", &out->prefetch[l], &out->prefetch_len[l], msg)))
                goto done;
            const uint64_t i = out->prefetch_len[l];
            /* records (pass, k, k distinct ids), passes increasing and inside the trace */
            const uint64_t passes = out->trace_len[l] / (uint64_t)out->top_k;
            int64_t last = -1;
            for (uint64_t r = 0; r < i;) {
                const int32_t *rec = out->prefetch[l] + r;
                const int32_t k = r + 1 < i ? rec[1] : 0;
                /* (a partial run's last prefetch may precede the pass it never reached: pass == passes) */
                if (k < 1 || k > out->top_k || r + 2 + (uint64_t)k > i || rec[0] <= last || (uint64_t)rec[0] > passes) {
                    snprintf(msg, sizeof msg, "prefetch row %d: record at %llu is not (pass, k in 1..top_k, k ids) with passes increasing "
                             "inside the layer's %llu", l, (unsigned long long)r, (unsigned long long)passes);
                    st = bad(path, msg);
                    goto done;
                }
                for (int32_t a = 0; a < k; a++) {
                    bool twice = false;
                    for (int32_t b = 0; b < a; b++) twice |= rec[2 + a] == rec[2 + b];
                    if (rec[2 + a] >= out->num_experts || twice) {
                        snprintf(msg, sizeof msg, "prefetch row %d: pass %d names expert %d %s", l, rec[0], rec[2 + a],
                                 twice ? "twice" : "out of range");
                        st = bad(path, msg);
                        goto done;
                    }
                }
                last = rec[0];
                r += 2 + (uint64_t)k;
            }
            l++;
        }
    }
done:
    cJSON_Delete(root);
    if (st) router_capture_free(out);
    return st;
}

typedef struct idx_count {
    int32_t id;
    uint64_t n;
} idx_count;

static int cmp_desc(const void *a, const void *b) {
    const idx_count *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return x->id - y->id;
}

static int32_t cover(const uint64_t *counts, int32_t n, double share, bool *set) {
    if (n < 1) return 0;
    idx_count *v = malloc(sizeof *v * (size_t)n);
    if (!v) return -1;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) v[i] = (idx_count){i, counts[i]}, total += counts[i];
    qsort(v, (size_t)n, sizeof *v, cmp_desc);
    if (set)
        for (int32_t i = 0; i < n; i++) set[i] = false;
    int32_t k = 0;
    uint64_t acc = 0;
    while (k < n && (double)acc < share * (double)total - 1e-9) {
        acc += v[k].n;
        if (set) set[v[k].id] = true;
        k++;
    }
    free(v);
    return k;
}

ts_status router_capture_concentration(const uint64_t *counts, int32_t n_experts, router_capture_layer_stats *out) {
    out->n95 = cover(counts, n_experts, 0.95, NULL);
    out->n99 = cover(counts, n_experts, 0.99, NULL);
    out->never = 0;
    for (int32_t e = 0; e < n_experts; e++) out->never += counts[e] == 0;
    return out->n95 < 0 || out->n99 < 0 ? ts_fail(TS_ERR_NOMEM, "out of memory") : TS_OK;
}

ts_status router_layer_top_set(const uint64_t *counts, int32_t n_experts, double share, bool *set) {
    return cover(counts, n_experts, share, set) < 0 ? ts_fail(TS_ERR_NOMEM, "out of memory") : TS_OK;
}

/* The engine's cache requests for layer l (forward/moe.c): per chunk, the
 * distinct experts by first appearance over (token, rank), top_k per pass.
 * req gets the ids, pstart[p]..pstart[p+1] the ids of pass p, ptok[p] the
 * first trace pass (token) of its chunk, pm[p] the chunk's length. */
static uint64_t replay_requests(const router_capture *c, int32_t l, int32_t *req, uint64_t *pstart, uint64_t *ptok, int32_t *pm,
                                uint64_t *stamp) {
    const int32_t k = c->top_k;
    const uint64_t tokens = c->trace_len[l] / (uint64_t)k;
    const int32_t *tr = c->trace[l];
    uint64_t np = 0, nr = 0, t0 = 0, ci = 0;
    while (t0 < tokens) {
        int32_t m = c->has_chunks ? c->chunks[l][ci++] : 1;
        uint64_t first = nr;
        for (uint64_t j = t0 * (uint64_t)k; j < (t0 + (uint64_t)m) * (uint64_t)k; j++)
            if (stamp[tr[j]] != t0 + 1) stamp[tr[j]] = t0 + 1, req[nr++] = tr[j];
        for (uint64_t g = first; g < nr; g += (uint64_t)k) pstart[np] = g, ptok[np] = t0, pm[np] = m, np++;
        t0 += (uint64_t)m;
    }
    pstart[np] = nr;
    return np;
}

ts_status router_replay_layer(const router_capture *c, int32_t l, int32_t n_slots, replay_policy pol, uint64_t skip, int32_t pilot_k,
                              replay_result *out) {
    memset(out, 0, sizeof *out);
    if (!c->has_trace) return ts_fail(TS_ERR_ARG, "%s: capture has no trace (set TURBOSPARK_ROUTER_TRACE when capturing)", c->path);
    if (n_slots < c->top_k) return ts_fail(TS_ERR_ARG, "%d slots cannot hold top_k=%d experts", n_slots, c->top_k);
    if (pilot_k > 0 && !c->has_pred) return ts_fail(TS_ERR_ARG, "%s: capture has no pred (set TURBOSPARK_PILOT_PROBE)", c->path);
    const int32_t k = c->top_k, E = c->num_experts;
    const uint64_t tokens = c->trace_len[l] / (uint64_t)k, nt = tokens ? tokens : 1;
    cache_layer cl;
    ts_status st = cache_layer_init(&cl, n_slots, E, pol == REPLAY_LRU ? CACHE_POLICY_LRU : CACHE_POLICY_LFU);
    if (st) return st;
    int32_t *req = ts_malloc(sizeof(int32_t) * (size_t)(c->trace_len[l] ? c->trace_len[l] : 1));
    uint64_t *pstart = ts_malloc(sizeof(uint64_t) * (size_t)(nt + 1)), *ptok = ts_malloc(sizeof(uint64_t) * (size_t)nt);
    int32_t *pm = ts_malloc(sizeof(int32_t) * (size_t)nt);
    uint64_t *stamp = ts_calloc((size_t)E, sizeof(uint64_t));
    bool *prev = ts_calloc((size_t)E, 1), *cur = ts_calloc((size_t)E, 1);
    uint64_t *next_occ = NULL, *nxt = NULL;
    uint16_t *busy = ts_calloc((size_t)n_slots, sizeof(uint16_t)); /* (n_slots) the previous pass's slots */
    cache_plan last = {0};                                        /* the previous pass's plan */
    if (!req || !pstart || !ptok || !pm || !stamp || !prev || !cur || !busy) { st = TS_ERR_NOMEM; goto out; }
    const uint64_t passes = replay_requests(c, l, req, pstart, ptok, pm, stamp);
    /* the run's own pilot prefetches (LFU/LRU): placed as the engine placed
     * them (cache_prefetch_commit) before their one-token passes */
    const int32_t *pf = pol != REPLAY_BELADY && c->has_prefetch ? c->prefetch[l] : NULL;
    const uint64_t pf_len = pf ? c->prefetch_len[l] : 0;
    uint64_t pfi = 0;
    int32_t pf_copied[CACHE_MAX_K], pf_nc = 0;
    /* Belady: next pass at which each request's expert is asked for again. */
    if (pol == REPLAY_BELADY) {
        next_occ = ts_malloc(sizeof(uint64_t) * (size_t)(pstart[passes] ? pstart[passes] : 1));
        nxt = ts_malloc(sizeof(uint64_t) * (size_t)E);
        uint64_t *last = stamp; /* reused: its chunk stamps are spent */
        if (!next_occ || !nxt) { st = TS_ERR_NOMEM; goto out; }
        for (int32_t e = 0; e < E; e++) last[e] = UINT64_MAX, nxt[e] = UINT64_MAX;
        for (uint64_t p = passes; p-- > 0;)
            for (uint64_t j = pstart[p]; j < pstart[p + 1]; j++) {
                next_occ[j] = last[req[j]];
                last[req[j]] = p;
            }
    }
    for (uint64_t p = 0; p < passes; p++) {
        const int32_t *pr_req = req + pstart[p];
        const int32_t pk_n = (int32_t)(pstart[p + 1] - pstart[p]);
        bool count = ptok[p] >= skip;
        bool chunk_first = p == 0 || ptok[p - 1] != ptok[p];
        memset(cur, 0, (size_t)E);
        for (int32_t i = 0; i < pk_n; i++) cur[pr_req[i]] = true;
        if (count && chunk_first) out->tokens += (uint64_t)pm[p];
        if (count && chunk_first && pilot_k > 0 && c->pred_len[l]) {
            /* recall over the chunk's tokens */
            for (uint64_t t = ptok[p]; t < ptok[p] + (uint64_t)pm[p]; t++) {
                const int32_t *pr = c->pred[l] + t * (uint64_t)c->pred_k, *act = c->trace[l] + t * (uint64_t)k;
                for (int32_t i = 0; i < k; i++) {
                    bool named = false;
                    for (int32_t j = 0; j < c->pred_k; j++) named |= pr[j] == act[i];
                    out->pred_total++;
                    out->pred_hits += named;
                }
            }
            /* prefetch: one-token chunks (decode), residency snapshotted before the plan */
            if (pm[p] == 1) {
                const int32_t *pr = c->pred[l] + ptok[p] * (uint64_t)c->pred_k;
                int32_t pk = pilot_k < c->pred_k ? pilot_k : c->pred_k;
                for (int32_t j = 0; j < pk; j++) {
                    bool again = false; /* distinct ids: one expert is read once */
                    for (int32_t q = 0; q < j; q++) again |= pr[q] == pr[j];
                    if (again || cl.expert_slot[pr[j]] >= 0) continue;
                    out->prefetch_reads++;
                    out->prefetch_useful += cur[pr[j]];
                }
            }
        }
        pf_nc = 0;
        while (pfi < pf_len && (uint64_t)pf[pfi] < ptok[p]) pfi += 2 + (uint64_t)pf[pfi + 1]; /* inside a longer chunk: none ran */
        if (pfi < pf_len && (uint64_t)pf[pfi] == ptok[p] && pm[p] == 1) {
            const int32_t pk = pf[pfi + 1], *ids = pf + pfi + 2;
            cache_plan pp;
            if ((st = cache_plan_make(&cl, ids, pk, &pp))) break;
            for (int32_t i = 0; i < pk; i++)
                if (!pp.hit[i]) pf_copied[pf_nc++] = ids[i];
            cache_prefetch_commit(&cl, ids, &pp);
            pfi += 2 + (uint64_t)pk;
        }
        cache_plan plan;
        if (pol == REPLAY_BELADY) {
            /* Same plan shape, victims by farthest next use (never-again first). */
            plan.k = pk_n;
            plan.n_miss = 0;
            bool pin[4096] = {0};
            bool *pinp = n_slots <= 4096 ? pin : ts_calloc((size_t)n_slots, 1);
            if (!pinp) { st = TS_ERR_NOMEM; break; }
            for (int32_t i = 0; i < pk_n; i++) {
                int32_t s = cl.expert_slot[pr_req[i]];
                plan.hit[i] = s >= 0;
                plan.slot[i] = s;
                plan.evicted[i] = -1;
                if (s >= 0) pinp[s] = true;
                else plan.n_miss++;
            }
            for (int32_t i = 0; i < pk_n; i++) {
                if (plan.hit[i]) continue;
                int32_t best = -1;
                for (int32_t s = 0; s < n_slots && best < 0; s++)
                    if (!pinp[s] && cl.slot_expert[s] < 0) best = s;
                if (best < 0)
                    for (int32_t s = 0; s < n_slots; s++) {
                        if (pinp[s]) continue;
                        if (best < 0 || nxt[cl.slot_expert[s]] > nxt[cl.slot_expert[best]]) best = s;
                    }
                pinp[best] = true;
                plan.slot[i] = best;
                plan.evicted[i] = cl.slot_expert[best];
            }
            if (pinp != pin) free(pinp);
            for (int32_t i = 0; i < pk_n; i++) nxt[pr_req[i]] = next_occ[pstart[p] + (uint64_t)i];
        } else {
            /* a chunk's pass after its first is fetched while the previous
             * one still computes (forward/moe.c streamed_passes): planned
             * around that pass's slots when enough others are free */
            const uint16_t *bz = NULL;
            if (!chunk_first) {
                memset(busy, 0, sizeof(uint16_t) * (size_t)n_slots);
                for (int32_t i = 0; i < last.k; i++) busy[last.slot[i]] = 1;
                bz = busy;
            }
            st = cache_plan_make_avoiding(&cl, pr_req, pk_n, bz, &plan);
            if (st == TS_ERR_LIMIT) st = cache_plan_make(&cl, pr_req, pk_n, &plan);
            if (st) break;
        }
        last = plan;
        if (count) {
            /* each copy is judged by the pass it preceded, as the engine does */
            out->run_pf_copies += (uint64_t)pf_nc;
            for (int32_t i = 0; i < pf_nc; i++) {
                if (cur[pf_copied[i]]) out->run_pf_saved++;
                else out->run_pf_wasted++;
            }
            out->passes++;
            out->requests += (uint64_t)pk_n;
            for (int32_t i = 0; i < pk_n; i++) {
                if (plan.hit[i]) { out->hits++; continue; }
                out->misses++;
                if (plan.evicted[i] < 0) out->cold_misses++;
                else out->evict_misses++;
                if (p > 0 && prev[pr_req[i]]) out->prev_named++;
            }
        }
        cache_commit(&cl, pr_req, &plan);
        bool *t = prev;
        prev = cur;
        cur = t;
    }
    if (pilot_k > 0) out->residual_misses = out->misses - (out->prefetch_useful < out->misses ? out->prefetch_useful : out->misses);
out:
    free(req);
    free(pstart);
    free(ptok);
    free(pm);
    free(stamp);
    free(prev);
    free(cur);
    free(next_occ);
    free(nxt);
    free(busy);
    cache_layer_free(&cl);
    return st;
}

ts_status router_window_layer(const router_capture *c, int32_t l, int32_t m, uint64_t skip, double *mean_distinct) {
    *mean_distinct = NAN;
    if (!c->has_trace) return ts_fail(TS_ERR_ARG, "%s: capture has no trace (set TURBOSPARK_ROUTER_TRACE when capturing)", c->path);
    const int32_t k = c->top_k, E = c->num_experts;
    const uint64_t passes = c->trace_len[l] / (uint64_t)k;
    if (m < 1) return ts_fail(TS_ERR_ARG, "window size %d must be at least 1", m);
    if (passes < skip + (uint64_t)m) return TS_OK; /* too short: NaN, reported as n/a */
    uint32_t *in = ts_calloc((size_t)E, sizeof *in);
    if (!in) return TS_ERR_NOMEM;
    uint64_t distinct = 0, windows = 0;
    double sum = 0;
    for (uint64_t p = skip; p < passes; p++) {
        for (int32_t i = 0; i < k; i++) distinct += in[c->trace[l][p * k + i]]++ == 0;
        if (p >= skip + (uint64_t)m) /* drop pass p - m */
            for (int32_t i = 0; i < k; i++) distinct -= --in[c->trace[l][(p - m) * k + i]] == 0;
        if (p + 1 >= skip + (uint64_t)m) {
            sum += (double)distinct;
            windows++;
        }
    }
    free(in);
    *mean_distinct = sum / (double)windows;
    return TS_OK;
}
