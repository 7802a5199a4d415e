/* Perplexity/KL arithmetic against closed forms, and the logits file. */
#include <math.h>
#include <unistd.h>

#include "eval/logits.h"
#include "test_util.h"

int main(void) {
    float a[3] = {0, 0, 0};
    CHECK(fabs(ts_logsumexp(a, 3) - log(3.0)) < 1e-12);
    CHECK(fabs(ts_nll(a, 3, 1) - log(3.0)) < 1e-12);
    float big[2] = {1000, 1000};
    CHECK(fabs(ts_logsumexp(big, 2) - (1000 + log(2.0))) < 1e-9);
    /* KL of two Bernoulli-like distributions, closed form */
    float p[2] = {0, logf(3.0f)}, q[2] = {0, 0}; /* p = (1/4, 3/4), q = (1/2, 1/2) */
    double want = 0.25 * log(0.25 / 0.5) + 0.75 * log(0.75 / 0.5);
    CHECKF(fabs(ts_kl_rows(p, q, 2) - want) < 1e-7, "%g vs %g", ts_kl_rows(p, q, 2), want);
    CHECK(ts_kl_rows(p, p, 2) < 1e-15);
    float t[4] = {1, 3, 3, 2};
    CHECK(ts_argmax(t, 4) == 1);

    char path[] = "/tmp/ts_logitsXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ts_logits_writer w;
    CHECK(ts_logits_writer_open(&w, path, 3) == TS_OK);
    float r0[3] = {1, 2, 3}, r1[3] = {-1, 0.5f, 7};
    CHECK(ts_logits_writer_add(&w, 2, r0) == TS_OK);
    CHECK(ts_logits_writer_add(&w, 0, r1) == TS_OK);
    CHECK(ts_logits_writer_close(&w) == TS_OK);
    ts_logits_file f;
    CHECKF(ts_logits_file_open(path, &f) == TS_OK, "%s", ts_last_error());
    CHECK(f.n_vocab == 3 && f.n_positions == 2);
    float got[3];
    CHECK(ts_logits_file_row(&f, 1, got) == 0 && got[2] == 7 && got[1] == 0.5f);
    ts_logits_file_close(&f);
    /* truncated file is refused */
    CHECK(truncate(path, 30) == 0);
    CHECK(ts_logits_file_open(path, &f) == TS_ERR_FORMAT);
    unlink(path);
    /* an abandoned writer leaves no file (nor its temporary) behind */
    CHECK(ts_logits_writer_open(&w, path, 3) == TS_OK);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s", w.af.tmp);
    CHECK(ts_logits_writer_add(&w, 1, r0) == TS_OK && access(tmp, F_OK) == 0);
    ts_logits_writer_abort(&w);
    CHECK(access(path, F_OK) != 0 && access(tmp, F_OK) != 0);

    ts_kl_stats s = {0};
    for (int i = 1; i <= 100; i++) ts_kl_stats_add(&s, i, i % 2);
    double mean, med, p99, same;
    ts_kl_stats_summary(&s, &mean, &med, &p99, &same);
    CHECK(mean == 50.5 && med == 50.5 && p99 == 99 && same == 50);
    ts_kl_stats_free(&s);
    return tu_finish();
}
