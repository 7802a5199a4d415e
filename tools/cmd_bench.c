/* turbospark bench -m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS] [--logits auto|device|host] [--json]
 *
 * llama-bench style: ppN = prefill of N tokens in one batched eval from an
 * empty context; tgN = N single-token decode steps from an empty context.
 * Each test has its own session with a context of N + 1 positions, as each
 * llama-bench test has its own (a tg128 context is 128, whatever -p says):
 * a GPU's attention plan depends on the context length. With instruments
 * on, both tests share one session (one capture), sized for the larger.
 * Tokens are seeded-random ids (as llama-bench feeds), so routing in MoE
 * models varies; the number of distinct ids fed is printed. One warm-up run
 * precedes the r timed repetitions; rows give mean +- sample sd of t/s.
 * Every eval returns its logits to the host, as llama-bench's token loop
 * gets them: on a GPU copied after each step or written there by the LM
 * head, as the session's ts_logits_dest decides (--logits; default auto). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark bench -m MODEL [-p 512] [-n 128] [-r 5] [-t THREADS] [--logits auto|device|host] [--json]\n"
               "  -p N  prompt-processing test of N tokens (0 skips); -n N: generation test of N tokens (0 skips)\n"
               "  --logits D  where a GPU's LM head writes the logits: host memory (no copy after each step), device\n"
               "              memory (copied out), or auto: host where the head's rows are long enough to hide the stores\n" CLI_COMMON_USAGE);
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

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    int64_t p = 512, n = 128, r = 5;
    bool json = false;
    ts_logits_dest logits_dest = TS_LOGITS_AUTO;
    cli_common cc;
    cli_common_init(&cc);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int cf = cli_common_flag(cmd, argc, argv, &i, &cc);
        if (cf < 0) return 1;
        if (cf > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-p")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 0, 1 << 20, &p)) return 1; }
        else if (!strcmp(a, "-n")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 0, 1 << 20, &n)) return 1; }
        else if (!strcmp(a, "-r")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 1000, &r)) return 1; }
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--logits")) {
            if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1;
            if (ts_logits_dest_parse(v, &logits_dest) != TS_OK) return cli_error(cmd, "--logits: %s", ts_last_error());
        }
        else { return cli_error(cmd, "unknown option '%s'", a); }
    }
    const char *model = cc.model;
    if (!model) { return cli_error(cmd, "no model given (-m MODEL)"); }
    if (!p && !n) return cli_error(cmd, "nothing to measure (-p 0 and -n 0)");
    ts_instruments ins;
    if (!cli_env_instruments(cmd, &ins)) return 1;
    cli_model m;
    if (!cli_model_load(cmd, &cc, &m)) return 1;
    /* the instruments that give a session a capture (the pilot and logit rows ride on the router's) */
    const bool shared = ins.router_path || ins.ffn_path || ins.phases;
    ts_session *ss[2] = {NULL, NULL}; /* pp's, tg's (the same one when shared) */
    int rc = 0;
    int32_t *ids = NULL;
    for (int test = 0; test < 2; test++) {
        const int64_t count = test ? n : p;
        if (!count) continue;
        if (shared && ss[0]) { ss[1] = ss[0]; continue; }
        ts_session_opts so = cli_session_opts(cmd, &cc, &m, &ins);
        so.n_ctx = (int32_t)(shared ? (p > n ? p : n) : count) + 1;
        so.n_batch = (int32_t)(test == 0 ? p : 1); /* test 0 runs only when p > 0 */
        so.logits_dest = logits_dest;
        if (ts_session_new(m.model, &so, &ss[test]) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    }
    ts_session *s = ss[0] ? ss[0] : ss[1]; /* for what both share: vocabulary, threads, instruments */
    cli_print_expert_plan(ss[1] ? ss[1] : s); /* the decode session's */
    int32_t nv = ts_session_n_vocab(s);
    int64_t n_ids = p > n ? p : n;
    ids = malloc(sizeof *ids * (size_t)n_ids);
    bool *seen = calloc((size_t)nv, 1);
    if (!ids || !seen) { free(seen); rc = cli_error(cmd, "out of memory"); goto done; }
    /* fresh seeded-random ids for every run, warm-ups included (as llama-bench) */
    ts_rng rng;
    ts_rng_seed(&rng, 42);
    int distinct[2] = {0, 0};
    char size[32], desc[96], backend[16];
    ts_model_info mi;
    ts_model_get_info(m.model, &mi);
    uint64_t params = mi.n_params, file_bytes = mi.file_bytes;
    /* llama-bench's units: GiB, else MiB */
    if (file_bytes >= (1ull << 30)) snprintf(size, sizeof size, "%.2f GiB", (double)file_bytes / (1024.0 * 1024 * 1024));
    else snprintf(size, sizeof size, "%.2f MiB", (double)file_bytes / (1024.0 * 1024));
    snprintf(desc, sizeof desc, "%s", mi.arch);
    snprintf(backend, sizeof backend, "%s", ts_backend_kind_of(m.be) == TS_BACKEND_CUDA ? "CUDA" : "CPU");
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
                ts_session *st = ss[test];
                ts_session_reset(st);
                float *logits;
                double t0 = ts_now();
                if (test == 0) {
                    if (ts_session_eval(st, ids, (int32_t)count, &logits) != TS_OK) rc = cli_error(cmd, "%s", ts_last_error());
                } else {
                    for (int64_t i = 0; i < count && !rc; i++)
                        if (ts_session_eval(st, ids + i, 1, &logits) != TS_OK) rc = cli_error(cmd, "%s", ts_last_error());
                }
                if (phase == 1) all_tps[test * r + rep] = (double)count / (ts_now() - t0);
            }
            if (phase == 1) memset(seen, 0, (size_t)nv);
        }
        if (phase == 0) ts_model_expert_reset_stats(m.model);
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
            printf("| %-14s | %10s | %6.2f B | %-7s | %7d | %8s | %12.2f ± %5.2f |\n", desc, size, (double)params / 1e9, backend,
                   ts_session_n_threads(s), test_name, mean, sd);
        else {
            printf("%s\n  {\"model\": \"%s\", \"file\": ", rows ? "," : "", desc);
            put_json_str(model);
            printf(", \"size_bytes\": %llu, \"active_bytes_per_token\": %llu, \"params\": %llu, "
                   "\"backend\": \"%s\", \"threads\": %d, \"test\": \"%s\", \"n_tokens\": %lld, \"reps\": %lld, \"tps_mean\": %.4f, "
                   "\"tps_sd\": %.4f, \"distinct_tokens\": %d}",
                   (unsigned long long)file_bytes, (unsigned long long)mi.active_bytes,
                   (unsigned long long)params, backend, ts_session_n_threads(s), test_name, (long long)count, (long long)r, mean, sd, distinct[test]);
        }
        rows++;
    }
    free(all_tps);
    if (json) printf("\n]\n");
    fflush(stdout); /* the rows before the stderr lines */
    if (!rc) cli_model_report(&m, (uint64_t)((p + n) * r));
    if (!rc) cli_memory_report(cmd, &m);
    if (!rc && ts_session_instruments_finish(s, stderr, false) != TS_OK) rc = 1;
    if (!rc)
        fprintf(stderr, "bench: fed fresh seeded-random ids every run: %d distinct of %lld (pp), %d distinct of %lld (tg) in the timed runs; "
                        "%lld reps after 1 warm-up each\n",
                distinct[0], (long long)(p * r), distinct[1], (long long)(n * r), (long long)r);
    if (!rc) { /* which kernels ran: the CPU's level (TS_FORCE_ISA can lower it) or the GPU */
        char d[256];
        fprintf(stderr, "bench: backend %s\n", ts_backend_describe(m.be, d, sizeof d));
    }
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) rc = cli_error(cmd, "writing output failed");
done:
    free(ids);
    ts_session_free(ss[0]);
    if (ss[1] != ss[0]) ts_session_free(ss[1]);
    cli_model_free(&m);
    return rc;
}
