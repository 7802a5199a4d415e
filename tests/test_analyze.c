/* Router capture reader and analyzers on hand-made captures whose answers
 * are worked out by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analyze/router_capture.h"
#include "diag/router_capture_w.h"
#include "test_util.h"

static const char *write_tmp(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ts_capXXXXXX");
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_refused(const char *json, const char *want) {
    const char *p = write_tmp(json);
    router_capture c;
    ts_status st = router_capture_load(p, 0, &c);
    CHECKF(st != TS_OK && strstr(ts_last_error(), want), "want '%s', got '%s'", want, ts_last_error());
    if (st == TS_OK) router_capture_free(&c);
    unlink(p);
}

int main(void) {
    /* Layer 0 does not route; layer 1: top_k=1 over 4 experts, trace
     * 0 1 2 0 1 3 0 1 (8 passes). */
    const char *good =
        "{\"num_layers\":2,\"num_experts\":4,\"top_k\":1,"
        "\"counts\":[[0,0,0,0],[3,3,1,1]],"
        "\"trace\":[[],[0,1,2,0,1,3,0,1]]}";
    const char *p = write_tmp(good);
    router_capture c;
    CHECKF(router_capture_load(p, 0, &c) == TS_OK, "%s", ts_last_error());
    unlink(p);
    CHECK(!router_capture_layer_routes(&c, 0) && router_capture_passes(&c, 1) == 8);
    router_layer_stats rs;
    router_layer_concentration(c.counts + 4, 4, &rs);
    /* 95% of 8 = 7.6 -> needs all 4 (3+3+1=7 < 7.6) */
    CHECK(rs.n95 == 4 && rs.n99 == 4 && rs.never == 0);
    replay_result r;
    /* 2 slots, LRU: 0m 1m 2m(ev0) 0m(ev1) 1m(ev2) 3m(ev0) 0m(ev1) 1m(ev3) -> 8 misses */
    CHECK(router_replay_layer(&c, 1, 2, REPLAY_LRU, 0, 0, &r) == TS_OK && r.misses == 8 && r.cold_misses == 2);
    /* LFU: 0m 1m [c0=1,c1=1] 2m evicts LRU-tied 0 -> {2,1}; 0m: counts 1:1,2:1 -> evict 1 (tick2<3) -> {2,0};
     * 1m: 2:1,0:2 -> evict 2 -> {1,0}; 3m: 1:2,0:2 tie, LRU -> 0 (tick4<5) evicted -> {1,3};
     * 0m: 1:2,3:1 -> evict 3 -> {1,0}; 1 hit. -> 7 misses, 1 hit */
    CHECK(router_replay_layer(&c, 1, 2, REPLAY_LFU, 0, 0, &r) == TS_OK && r.misses == 7 && r.hits == 1);
    /* Belady with 2 slots: 0m 1m 2m(evict farthest: 0 next@3, 1 next@4 -> evict 1) {0,2}; 0h; 1m (2 never again -> evict 2) {0,1};
     * 3m (0 next@6, 1 next@7 -> evict 1) {0,3}; 0h; 1m -> 6 misses, 2 hits */
    CHECK(router_replay_layer(&c, 1, 2, REPLAY_BELADY, 0, 0, &r) == TS_OK && r.misses == 6 && r.hits == 2);
    /* skip: first 4 passes warm, not counted */
    CHECK(router_replay_layer(&c, 1, 2, REPLAY_BELADY, 4, 0, &r) == TS_OK && r.passes == 4 && r.misses + r.hits == 4);
    CHECK(router_replay_layer(&c, 1, 1, REPLAY_LFU, 0, 0, &r) == TS_OK && r.misses == 8);
    double d;
    /* windows of 2 over 0 1 2 0 1 3 0 1: all pairs distinct -> 2 */
    CHECK(router_window_layer(&c, 1, 2, 0, &d) == TS_OK && d == 2.0);
    /* windows of 3: {0,1,2},{1,2,0},{2,0,1},{0,1,3},{1,3,0},{3,0,1} -> 3 */
    CHECK(router_window_layer(&c, 1, 3, 0, &d) == TS_OK && d == 3.0);
    /* windows of 4: 0120->3, 1201->3, 2013->4, 0130->3, 1301->3 -> 16/5 */
    CHECK(router_window_layer(&c, 1, 4, 0, &d) == TS_OK && fabs(d - 3.2) < 1e-12);
    router_capture_free(&c);

    expect_refused("{\"num_layers\":1,\"num_experts\":4,\"top_k\":1,\"counts\":[[0,0,0,0]]}", "all counts are zero");
    expect_refused("{\"num_layers\":1,\"num_experts\":4,\"top_k\":2,\"counts\":[[1,0,0,0]]}", "not a multiple of top_k");
    expect_refused("{\"num_layers\":1,\"num_experts\":2,\"top_k\":1,\"counts\":[[1,1]],\"trace\":[[0,0]]}",
                   "do not equal the histogram");
    expect_refused("{\"num_layers\":1,\"num_experts\":2,\"top_k\":2,\"counts\":[[2,0]],\"trace\":[[0,0]]}", "twice");
    expect_refused("{\"num_layers\":2,\"num_experts\":2,\"top_k\":1,\"counts\":[[1,1]]}", "num_layers rows");
    expect_refused("{\"num_layers\":1,\"num_experts\":2,\"top_k\":1,\"counts\":[[1,1]],\"trace\":[[0,7]]}", "not an expert id");
    expect_refused("{\"num_layers\":2,\"num_experts\":2,\"top_k\":1,\"counts\":[[1,0],[1,0]],\"trace\":[[0],[0]],\"pred\":[[1],[0]]}",
                   "row 0 must be empty");
    expect_refused("not json", "not valid JSON");

    /* writer -> reader round trip: 3 layers (layer 0 dense), 6 experts, top-2,
     * trace + pilot + one logit row; replay through the policy. */
    diag_router w;
    CHECK(diag_router_init(&w, 3, 6, 2, true, true, 2, 1) == TS_OK);
    uint64_t rng = 7;
    float lg[6] = {0.5f, -1, 2, 3.25f, 0, 1};
    for (int pass = 0; pass < 50; pass++)
        for (int l = 1; l < 3; l++) {
            int32_t ids[2];
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            ids[0] = (int32_t)((rng >> 40) % 6);
            ids[1] = (ids[0] + 1 + (int32_t)((rng >> 20) % 5)) % 6;
            if (l == 2) CHECK(diag_router_record_pred(&w, l, ids) == TS_OK);
            lg[0] = (float)pass;
            CHECK(diag_router_record(&w, l, ids, lg) == TS_OK);
        }
    char wp[] = "/tmp/ts_rcapXXXXXX";
    close(mkstemp(wp));
    CHECKF(diag_router_write(&w, wp) == TS_OK, "%s", ts_last_error());
    diag_router_free(&w);
    CHECKF(router_capture_load(wp, 0, &c) == TS_OK, "%s", ts_last_error());
    CHECK(c.has_trace && c.has_pred && router_capture_passes(&c, 1) == 50 && !router_capture_layer_routes(&c, 0));
    /* the pilot here named exactly the routed ids at layer 2: recall must be 100% */
    CHECK(router_replay_layer(&c, 2, 2, REPLAY_LFU, 0, 2, &r) == TS_OK && r.pred_total == 100 && r.pred_hits == 100);
    router_capture_free(&c);
    FILE *rf = fopen(wp, "r");
    char text[65536];
    size_t tn = fread(text, 1, sizeof text - 1, rf);
    fclose(rf);
    text[tn] = 0;
    CHECK(strstr(text, "\"router_logits\":{\"layer\":2,\"pass\":1,\"values\":[1,-1,2,3.25,0,1]}") != NULL);
    unlink(wp);
    /* non-finite router logits (a broken model is when the capture matters)
     * are written as null, so the capture stays valid JSON */
    CHECK(diag_router_init(&w, 1, 3, 1, false, false, 0, 0) == TS_OK);
    float bad_lg[3] = {NAN, INFINITY, 1};
    int32_t id0 = 0;
    CHECK(diag_router_record(&w, 0, &id0, bad_lg) == TS_OK);
    CHECKF(diag_router_write(&w, wp) == TS_OK, "%s", ts_last_error());
    diag_router_free(&w);
    CHECKF(router_capture_load(wp, 0, &c) == TS_OK, "%s", ts_last_error());
    if (c.num_layers) router_capture_free(&c);
    rf = fopen(wp, "r");
    tn = fread(text, 1, sizeof text - 1, rf);
    fclose(rf);
    text[tn] = 0;
    CHECK(strstr(text, "\"values\":[null,null,1]") != NULL);
    unlink(wp);
    /* 18447 counts of 1e15 sum past 2^64: refused, not wrapped */
    {
        size_t cap = 20000 * 20 + 256, n = 0;
        char *big = malloc(cap);
        n += (size_t)snprintf(big + n, cap - n, "{\"num_layers\":1,\"num_experts\":18447,\"top_k\":1,\"counts\":[[");
        for (int e = 0; e < 18447; e++) n += (size_t)snprintf(big + n, cap - n, e ? ",1000000000000000" : "1000000000000000");
        snprintf(big + n, cap - n, "]]}");
        expect_refused(big, "overflow");
        free(big);
    }
    /* a capture with no routed pass is refused at write time */
    CHECK(diag_router_init(&w, 2, 4, 1, false, false, -1, 0) == TS_OK);
    CHECK(diag_router_write(&w, wp) == TS_ERR_LIMIT && access(wp, F_OK) != 0);
    diag_router_free(&w);
    return tu_finish();
}
