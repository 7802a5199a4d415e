/* turbospark bench -m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS] [--json]
 *
 * llama-bench style: ppN = prefill of N tokens in one batched eval from an
 * empty context; tgN = N single-token decode steps from an empty context.
 * Tokens are seeded-random ids (as llama-bench feeds), so routing in MoE
 * models varies; the number of distinct ids fed is printed. One warm-up run
 * precedes the r timed repetitions; rows give mean +- sample sd of t/s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "forward/engine.h"
#include "sample/sample.h"

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark bench -m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS] [--json]\n"
               "  -p N  prompt-processing test of N tokens (0 skips); -n N: generation test of N tokens (0 skips)\n" CLI_EXPERT_USAGE);
}

static void mean_sd(const double *x, int n, double *m, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *m = s / n;
    for (int i = 0; i < n; i++) q += (x[i] - *m) * (x[i] - *m);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* A JSON string: the model path may hold '"', '\\' or control characters. */
static void put_json_str(const char *v) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void fmt_size(char *b, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(b, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else snprintf(b, n, "%.2f MiB", bytes / (1024.0 * 1024));
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench", *model = NULL;
    int64_t p = 512, n = 128, r = 5, threads = 0;
    bool json = false;
    cli_expert_flags ef = {0};
    bool precise = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int ex = cli_parse_expert_flag(cmd, argc, argv, &i, &ef);
        if (ex < 0) return 1;
        if (ex > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--precise")) precise = true;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; model = v; }
        else if (!strcmp(a, "-p")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 0, 1 << 20, &p)) return 1; }
        else if (!strcmp(a, "-n")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 0, 1 << 20, &n)) return 1; }
        else if (!strcmp(a, "-r")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 1000, &r)) return 1; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 256, &threads)) return 1; }
        else if (!strcmp(a, "--json")) json = true;
        else { return cli_error(cmd, "unknown option '%s'", a); }
    }
    if (!model) { return cli_error(cmd, "no model given (-m MODEL)"); }
    if (!p && !n) return cli_error(cmd, "nothing to measure (-p 0 and -n 0)");
    cli_model m;
    if (!cli_model_load(cmd, model, &ef, &m)) return 1;
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = (int32_t)(p > n ? p : n) + 1;
    so.n_threads = (int32_t)threads;
    so.precise = precise;
    so.n_batch = (int32_t)(p > 0 ? p : 1);
    ts_session *s = NULL;
    int rc = 0;
    int32_t *ids = NULL;
    if (ts_session_new(m.model, &so, &s) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    int32_t nv = ts_session_n_vocab(s);
    int64_t n_ids = p > n ? p : n;
    ids = malloc(sizeof *ids * (size_t)n_ids);
    bool *seen = calloc((size_t)nv, 1);
    if (!ids || !seen) { free(seen); rc = cli_error(cmd, "out of memory"); goto done; }
    /* fresh seeded-random ids for every run, warm-ups included (as llama-bench) */
    ts_rng rng;
    ts_rng_seed(&rng, 42);
    int distinct[2] = {0, 0};
    char size[32], desc[96];
    const gguf_file *gf = ts_model_gguf(m.model);
    uint64_t params = 0, file_bytes = 0;
    for (uint64_t t = 0; t < gf->n_tensors; t++) {
        params += gf->tensors[t].ne[0] * gf->tensors[t].ne[1] * gf->tensors[t].ne[2] * gf->tensors[t].ne[3];
        file_bytes += gf->tensors[t].nbytes;
    }
    fmt_size(size, sizeof size, (double)file_bytes);
    snprintf(desc, sizeof desc, "%s", ts_model_arch(m.model));
    if (!json) {
        printf("| %-14s | %10s | %8s | %-7s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads", "test", "t/s");
        printf("| %-14s | %10s | %8s | %-7s | %7s | %8s | %20s |\n", "---", "---:", "---:", "---", "---:", "---:", "---:");
    } else {
        printf("[");
    }
    /* warm-ups first, then the cache/instrument counters restart, so the
     * end-of-run lines describe the timed runs only */
    int64_t counts[2] = {p, n};
    double *all_tps = calloc((size_t)(2 * r), sizeof *all_tps);
    if (!all_tps) { free(seen); rc = cli_error(cmd, "out of memory"); goto done; }
    for (int phase = 0; phase < 2 && !rc; phase++) {
        for (int test = 0; test < 2 && !rc; test++) {
            int64_t count = counts[test];
            if (!count) continue;
            int64_t reps = phase == 0 ? 1 : r;
            for (int64_t rep = 0; rep < reps && !rc; rep++) {
                for (int64_t i = 0; i < count; i++) {
                    ids[i] = (int32_t)(ts_rng_next(&rng) % (uint64_t)nv);
                    if (phase == 1 && !seen[ids[i]]) distinct[test]++, seen[ids[i]] = true;
                }
                ts_session_reset(s);
                float *logits;
                double t0 = ts_now();
                if (test == 0) {
                    if (ts_session_eval(s, ids, (int32_t)count, &logits) != TS_OK) rc = cli_error(cmd, "%s", ts_last_error());
                } else {
                    for (int64_t i = 0; i < count && !rc; i++)
                        if (ts_session_eval(s, ids + i, 1, &logits) != TS_OK) rc = cli_error(cmd, "%s", ts_last_error());
                }
                if (phase == 1) all_tps[test * r + rep] = (double)count / (ts_now() - t0);
            }
            if (phase == 1) memset(seen, 0, (size_t)nv);
        }
        if (phase == 0 && ts_model_expert_cache(m.model)) expert_cache_reset_stats(ts_model_expert_cache(m.model));
    }
    free(seen);
    int rows = 0;
    for (int test = 0; test < 2 && !rc; test++) {
        int64_t count = counts[test];
        if (!count) continue;
        double mean, sd;
        mean_sd(all_tps + test * r, (int)r, &mean, &sd);
        char test_name[32];
        snprintf(test_name, sizeof test_name, "%s%lld", test == 0 ? "pp" : "tg", (long long)count);
        if (!json)
            printf("| %-14s | %10s | %6.2f B | %-7s | %7d | %8s | %12.2f ± %5.2f |\n", desc, size, (double)params / 1e9, "CPU",
                   ts_session_n_threads(s), test_name, mean, sd);
        else {
            printf("%s\n  {\"model\": \"%s\", \"file\": ", rows ? "," : "", desc);
            put_json_str(model);
            printf(", \"size_bytes\": %llu, \"active_bytes_per_token\": %llu, \"params\": %llu, "
                   "\"backend\": \"CPU\", \"threads\": %d, \"test\": \"%s\", \"n_tokens\": %lld, \"reps\": %lld, \"tps_mean\": %.4f, "
                   "\"tps_sd\": %.4f, \"distinct_tokens\": %d}",
                   (unsigned long long)file_bytes, (unsigned long long)ts_model_weight_bytes(m.model),
                   (unsigned long long)params, ts_session_n_threads(s), test_name, (long long)count, (long long)r, mean, sd, distinct[test]);
        }
        rows++;
    }
    free(all_tps);
    if (json) printf("\n]\n");
    fflush(stdout); /* the rows before the stderr lines */
    if (!rc) cli_model_report(&m, (uint64_t)((p + n) * r));
    if (!rc && ts_model_instruments_finish(m.model, stderr) != TS_OK) rc = 1;
    if (!rc)
        fprintf(stderr, "bench: fed fresh seeded-random ids every run: %d distinct of %lld (pp), %d distinct of %lld (tg) in the timed runs; "
                        "%lld reps after 1 warm-up each\n",
                distinct[0], (long long)(p * r), distinct[1], (long long)(n * r), (long long)r);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) rc = cli_error(cmd, "writing output failed");
done:
    free(ids);
    ts_session_free(s);
    cli_model_free(&m);
    return rc;
}
