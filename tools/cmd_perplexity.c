/* turbospark perplexity -m MODEL -f TEXT [--ctx N] [--save-logits F] [--kl-base F]
 *
 * Flags in, numbers out: the method (llama.cpp's chunking) is the library's
 * ts_perplexity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark perplexity -m MODEL -f TEXT.txt [--ctx N (512)] [--chunks N] [--threads N]\n"
               "                             [--save-logits FILE] [--kl-base FILE] [--max-input BYTES (256M)]\n" CLI_COMMON_USAGE);
}

static void on_progress(void *user, const ts_perplexity_progress *p) {
    (void)user;
    if (p->chunks_done == 0)
        fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %d, scoring positions %d..%d of each\n", p->n_tokens, (long long)p->n_chunks,
                p->chunk_len, p->first_scored, p->chunk_len - 2);
    else fprintf(stderr, "[%lld/%lld] ppl so far %.4f\n", (long long)p->chunks_done, (long long)p->n_chunks, p->ppl);
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity", *text_path = NULL;
    ts_perplexity_opts po = {.n_ctx = 512};
    uint64_t max_input = 0;
    cli_common cc;
    cli_common_init(&cc);
    cc.ctx = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        int cf = cli_common_flag(cmd, argc, argv, &i, &cc);
        if (cf < 0) return 1;
        if (cf > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; text_path = v; }
        else if (!strcmp(a, "--save-logits")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; po.save_logits = v; }
        else if (!strcmp(a, "--kl-base")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; po.kl_base = v; }
        else if (!strcmp(a, "--chunks")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 1 << 30, &n)) return 1; po.max_chunks = n; }
        else if (!strcmp(a, "--max-input")) {
            if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1;
            if (ts_parse_bytes(v, &max_input) != TS_OK || !max_input) return cli_error(cmd, "--max-input %s", ts_last_error());
        }
        else { return cli_error(cmd, "unknown option '%s'", a); }
    }
    if (!cc.model || !text_path) { return cli_error(cmd, "need -m MODEL and -f TEXT"); }
    if (cc.ctx < 4) return cli_error(cmd, "--ctx: %lld is out of range [4, %d]", (long long)cc.ctx, 1 << 20);
    po.n_ctx = (int32_t)cc.ctx;
    if (po.save_logits && po.kl_base && !strcmp(po.save_logits, po.kl_base)) return cli_error(cmd, "--save-logits and --kl-base name the same file");
    if (po.save_logits && !strcmp(po.save_logits, text_path)) return cli_error(cmd, "--save-logits would overwrite the text file %s", text_path);
    ts_instruments ins;
    if (!cli_env_instruments(cmd, &ins)) return 1;
    char *text;
    size_t len;
    ts_status rst = ts_read_file(text_path, max_input, &text, &len);
    if (rst != TS_OK) return cli_error(cmd, "%s%s", ts_last_error(), rst == TS_ERR_LIMIT ? " (raise it with --max-input)" : "");
    cli_model m;
    if (!cli_model_load(cmd, &cc, &m)) { ts_free(text); return 1; }
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_session *s = NULL;
    if (ts_tokenize(m.vocab, text, len, true, false, &ids, &n_ids) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    if (n_ids < 4) { rc = cli_error(cmd, "%s: only %zu tokens; perplexity needs at least 4", text_path, n_ids); goto done; }
    cli_common sc = cc;
    sc.ctx = (size_t)cc.ctx > n_ids ? (int64_t)n_ids : cc.ctx;
    ts_session_opts so = cli_session_opts(cmd, &sc, &m, &ins);
    so.all_logits = true;
    if (ts_session_new(m.model, &so, &s) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    ts_perplexity_result res;
    if (ts_perplexity(s, ids, n_ids, &po, on_progress, NULL, &res) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    printf("perplexity: %.4f over %llu positions (%lld chunks of %d tokens)\n", res.ppl, (unsigned long long)res.n_scored,
           (long long)res.n_chunks, res.chunk_len);
    if (res.have_kl)
        printf("KL divergence vs %s: mean %.6f, median %.6f, p99 %.6f; same top-1 %.2f%%\n", po.kl_base, res.kl_mean, res.kl_median,
               res.kl_p99, res.same_top1_pct);
    if (po.save_logits) fprintf(stderr, "wrote %llu logit rows to %s\n", (unsigned long long)res.n_scored, po.save_logits);
    if (fflush(stdout) != 0 || ferror(stdout)) rc = cli_error(cmd, "writing output failed");
    cli_model_report(&m, (uint64_t)(res.n_chunks * res.chunk_len));
    if (ts_session_instruments_finish(s, stderr, false) != TS_OK && !rc) rc = 1;
done:
    ts_session_free(s);
    ts_free(ids);
    ts_free(text);
    cli_model_free(&m);
    return rc;
}
