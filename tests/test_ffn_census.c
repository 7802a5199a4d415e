/* FFN census: bucket edges, the count invariant, top-K overlap with ties and
 * NaN, and a write -> analyzer-load round trip with hand-checked numbers. */
#include <math.h>
#include <unistd.h>

#include "analyze/ffn_capture.h"
#include "diag/ffn_census.h"
#include "test_util.h"

int main(void) {
    CHECK(ffn_bucket(0.0f) == 0 && ffn_bucket(-0.0f) == 0);
    CHECK(ffn_bucket(NAN) == 63 && ffn_bucket(INFINITY) == 63 && ffn_bucket(-INFINITY) == 63);
    CHECK(ffn_bucket(1.0f) == 33);           /* [2^0, 2^1) */
    CHECK(ffn_bucket(1.999f) == 33 && ffn_bucket(2.0f) == 34);
    CHECK(ffn_bucket(-0.5f) == 32);          /* [2^-1, 2^0) */
    CHECK(ffn_bucket(ldexpf(1, -32)) == 1);  /* lowest bucket's floor */
    CHECK(ffn_bucket(ldexpf(1, -40)) == 1);  /* clamped */
    CHECK(ffn_bucket(ldexpf(1, 29)) == 62 && ffn_bucket(1e30f) == 62);

    ffn_census c;
    CHECK(ffn_census_init(&c, 2, 8) == TS_OK);
    /* overlap_k clamps to the width 8 */
    CHECK(c.overlap_k[0] == 8 && c.overlap_k[3] == 8);
    float a0[8] = {1, 2, 3, 4, 0, 0, 0, 0};
    float a1[8] = {NAN, 2, 3, 4, 5, 0, 0, 0};
    ffn_census_observe(&c, 0, a0, false); /* prefill: only counted */
    ffn_census_observe(&c, 1, a0, false);
    ffn_census_observe(&c, 0, a0, true);
    ffn_census_observe(&c, 1, a0, true);
    ffn_census_observe(&c, 0, a1, true);
    ffn_census_observe(&c, 1, a1, true);
    CHECK(c.decode_passes[0] == 2 && c.prefill_passes[0] == 1);
    uint64_t hs = 0;
    for (int b = 0; b < FFN_BUCKETS; b++) hs += c.hist_count[b];
    CHECK(hs == 2 * 8);
    CHECK(c.hist_count[63] == 1 && c.hist_count[0] == 4 + 3);
    /* K = 8 (clamped), NaN never ranks: a1 ranks 7 finite values, all of
     * which were in a0's top-8 -> 7 hits of one pair */
    CHECK(c.overlap_pairs[0] == 1 && c.overlap_hits[0] == 7);
    CHECK(c.mass[0] == 1 && c.mass[1] == 4 && c.mass[4] == 5);

    char path[] = "/tmp/ts_ffnXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECKF(ffn_census_write(&c, path, false) == TS_OK, "%s", ts_last_error());
    ffn_capture cap;
    CHECKF(ffn_capture_load(path, 0, &cap) == TS_OK, "%s", ts_last_error());
    ffn_layer_stats s;
    ffn_layer_analyze(&cap, 0, &s);
    /* mass = {1,4,6,8,5,0,0,0}, total 24: n50 needs 8+6 = 14 >= 12 -> 2 */
    CHECK(s.n50 == 2 && s.n99 == 5);
    CHECK(fabs(s.overlap[0] - 7.0 / 8) < 1e-12 && s.chance[0] == 1.0);
    ffn_capture_free(&cap);
    ffn_census_free(&c);

    /* a capture that breaks the invariant is refused */
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"num_layers\":1,\"inter\":2,\"decode_passes\":2,\"prefill_passes\":0,\"bucket_exp_offset\":33,\"tapped\":[true],"
               "\"overlap_ks\":[2,2,2,2],\"overlap_pairs\":[[0,0,0,0]],\"overlap_hits\":[[0,0,0,0]],\"hist_count\":[[");
    for (int b = 0; b < 64; b++) fprintf(f, b ? ",%d" : "%d", b == 33 ? 3 : 0);
    fprintf(f, "]],\"hist_mass\":[[");
    for (int b = 0; b < 64; b++) fprintf(f, b ? ",%d" : "%d", b == 33 ? 3 : 0);
    fprintf(f, "]],\"mass\":[[1,2]]}");
    fclose(f);
    CHECK(ffn_capture_load(path, 0, &cap) == TS_ERR_FORMAT && strstr(ts_last_error(), "decode_passes x inter"));
    /* a zero-filled capture is refused as degenerate */
    f = fopen(path, "w");
    fprintf(f, "{\"num_layers\":1,\"inter\":2,\"decode_passes\":1,\"prefill_passes\":0,\"bucket_exp_offset\":33,\"tapped\":[true],"
               "\"overlap_ks\":[2,2,2,2],\"overlap_pairs\":[[0,0,0,0]],\"overlap_hits\":[[0,0,0,0]],\"hist_count\":[[2");
    for (int b = 1; b < 64; b++) fprintf(f, ",0");
    fprintf(f, "]],\"hist_mass\":[[0");
    for (int b = 1; b < 64; b++) fprintf(f, ",0");
    fprintf(f, "]],\"mass\":[[0,0]]}");
    fclose(f);
    CHECK(ffn_capture_load(path, 0, &cap) == TS_ERR_FORMAT && strstr(ts_last_error(), "degenerate"));
    /* decode_passes 2^63 x inter 2 wraps to 0 in uint64, matching an all-zero
     * histogram; counts past 2^53 (inexact in JSON, undefined past 2^64 as
     * uint64) and fractional counts are refused */
    const char *dp[3] = {"9223372036854775808", "1", "1"}, *hc0[3] = {"0", "1e300", "1.5"}, *want[3] = {"decode_passes", "hist_count[0][0]", "hist_count[0][0]"};
    for (int t = 0; t < 3; t++) {
        f = fopen(path, "w");
        fprintf(f, "{\"num_layers\":1,\"inter\":2,\"decode_passes\":%s,\"prefill_passes\":0,\"bucket_exp_offset\":33,\"tapped\":[true],"
                   "\"overlap_ks\":[2,2,2,2],\"overlap_pairs\":[[0,0,0,0]],\"overlap_hits\":[[0,0,0,0]],\"hist_count\":[[%s",
                dp[t], hc0[t]);
        for (int b = 1; b < 64; b++) fprintf(f, b == 33 && t ? ",2" : ",0");
        fprintf(f, "]],\"hist_mass\":[[0");
        for (int b = 1; b < 64; b++) fprintf(f, b == 33 ? ",3" : ",0");
        fprintf(f, "]],\"mass\":[[1,2]]}");
        fclose(f);
        ts_status st = ffn_capture_load(path, 0, &cap);
        CHECKF(st == TS_ERR_FORMAT && strstr(ts_last_error(), want[t]), "case %d: %s", t, ts_last_error());
        if (st == TS_OK) ffn_capture_free(&cap);
    }
    unlink(path);
    return tu_finish();
}
