/* turbospark perplexity -m MODEL -f TEXT [--ctx N] [--save-logits F] [--kl-base F]
 *
 * Method (as llama.cpp's perplexity tool, so numbers compare): the text is
 * tokenized once (with BOS when the model adds one), cut into chunks of ctx
 * tokens, each chunk is evaluated from an empty context with its first token
 * replaced by BOS, and only positions ctx/2 .. ctx-1 are scored (each has at
 * least ctx/2 tokens of context). A text shorter than one chunk becomes one
 * chunk of its own length. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval/logits.h"
#include "forward/engine.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark perplexity -m MODEL -f TEXT.txt [--ctx N (512)] [--chunks N] [--threads N]\n"
               "                             [--save-logits FILE] [--kl-base FILE]\n" CLI_EXPERT_USAGE);
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "perplexity", *model = NULL, *text_path = NULL, *save = NULL, *base = NULL;
    int64_t ctx = 512, threads = 0, max_chunks = 0;
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
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; text_path = v; }
        else if (!strcmp(a, "--save-logits")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; save = v; }
        else if (!strcmp(a, "--kl-base")) { if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1; base = v; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 4, 1 << 20, &ctx)) return 1; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 256, &threads)) return 1; }
        else if (!strcmp(a, "--chunks")) { if (!(v = cli_flag_value(cmd, argc, argv, &i)) || !cli_parse_i64(cmd, a, v, 1, 1 << 30, &max_chunks)) return 1; }
        else { return cli_error(cmd, "unknown option '%s'", a); }
    }
    if (!model || !text_path) { return cli_error(cmd, "need -m MODEL and -f TEXT"); }
    if (save && base && !strcmp(save, base)) return cli_error(cmd, "--save-logits and --kl-base name the same file");
    char *text;
    size_t len;
    if (ts_read_file(text_path, 0, &text, &len) != TS_OK) return cli_error(cmd, "%s", ts_last_error());
    ts_logits_file bf = {0};
    if (base && ts_logits_file_open(base, &bf) != TS_OK) { free(text); return cli_error(cmd, "%s", ts_last_error()); }
    cli_model m;
    if (!cli_model_load(cmd, model, &ef, &m)) { free(text); if (base) ts_logits_file_close(&bf); return 1; }
    int rc = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    ts_session *s = NULL;
    ts_logits_writer w = {0};
    bool writing = false;
    ts_kl_stats kl = {0};
    float *base_row = NULL;
    if (tok_encode(m.vocab, text, len, true, false, &ids, &n_ids) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    if (n_ids < 4) { rc = cli_error(cmd, "%s: only %zu tokens; perplexity needs at least 4", text_path, n_ids); goto done; }
    if ((size_t)ctx > n_ids) ctx = (int64_t)n_ids;
    int64_t n_chunks = (int64_t)n_ids / ctx;
    if (max_chunks && n_chunks > max_chunks) n_chunks = max_chunks;
    int32_t first = (int32_t)(ctx / 2);
    uint64_t n_scored = (uint64_t)n_chunks * (uint64_t)(ctx - 1 - first);
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = (int32_t)ctx;
    so.n_threads = (int32_t)threads;
    so.precise = precise;
    so.all_logits = true;
    if (ts_session_new(m.model, &so, &s) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
    int32_t nv = ts_session_n_vocab(s);
    if (base) {
        if (bf.n_vocab != (uint32_t)nv || bf.n_positions != n_scored) {
            rc = cli_error(cmd, "%s: holds %llu positions of %u logits, this run scores %llu of %d (same text, --ctx and --chunks needed)",
                           base, (unsigned long long)bf.n_positions, bf.n_vocab, (unsigned long long)n_scored, nv);
            goto done;
        }
        base_row = malloc(sizeof(float) * (size_t)nv);
        if (!base_row) { rc = cli_error(cmd, "out of memory"); goto done; }
    }
    if (save) {
        if (ts_logits_writer_open(&w, save, (uint32_t)nv) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); goto done; }
        writing = true;
    }
    fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, scoring positions %d..%lld of each\n", n_ids, (long long)n_chunks,
            (long long)ctx, first, (long long)ctx - 2);
    double nll = 0;
    uint64_t pos_i = 0;
    int32_t bos = tok_bos(m.vocab);
    for (int64_t c = 0; c < n_chunks && !rc; c++) {
        int32_t *chunk = ids + c * ctx;
        int32_t saved0 = chunk[0];
        if (bos >= 0 && tok_add_bos(m.vocab)) chunk[0] = bos;
        ts_session_reset(s);
        float *logits;
        ts_status st = ts_session_eval(s, chunk, (int32_t)ctx, &logits);
        chunk[0] = saved0;
        if (st) { rc = cli_error(cmd, "%s", ts_last_error()); break; }
        for (int32_t p = first; p < ctx - 1; p++, pos_i++) {
            const float *row = logits + (size_t)p * nv;
            int32_t target = chunk[p + 1];
            nll += ts_nll(row, nv, target);
            if (writing && ts_logits_writer_add(&w, target, row) != TS_OK) { rc = cli_error(cmd, "%s", ts_last_error()); break; }
            if (base) {
                int32_t bt = ts_logits_file_row(&bf, pos_i, base_row);
                if (bt != target) { rc = cli_error(cmd, "%s: position %llu scores token %d, this run token %d: not the same text", base, (unsigned long long)pos_i, bt, target); break; }
                ts_kl_stats_add(&kl, ts_kl_rows(base_row, row, nv), ts_argmax(base_row, nv) == ts_argmax(row, nv));
            }
        }
        fprintf(stderr, "[%lld/%lld] ppl so far %.4f\n", (long long)c + 1, (long long)n_chunks, exp(nll / (double)pos_i));
    }
    if (!rc) {
        printf("perplexity: %.4f over %llu positions (%lld chunks of %lld tokens)\n", exp(nll / (double)pos_i), (unsigned long long)pos_i,
               (long long)n_chunks, (long long)ctx);
        if (base) {
            double mean, med, p99, same;
            ts_kl_stats_summary(&kl, &mean, &med, &p99, &same);
            printf("KL divergence vs %s: mean %.6f, median %.6f, p99 %.6f; same top-1 %.2f%%\n", base, mean, med, p99, same);
        }
        if (writing) {
            writing = false;
            if (ts_logits_writer_close(&w) != TS_OK) rc = cli_error(cmd, "%s", ts_last_error());
            else fprintf(stderr, "wrote %llu logit rows to %s\n", (unsigned long long)pos_i, save);
        }
        if (!rc && (fflush(stdout) != 0 || ferror(stdout))) rc = cli_error(cmd, "writing output failed");
        cli_model_report(&m, (uint64_t)(n_chunks * ctx));
        if (ts_model_instruments_finish(m.model, stderr) != TS_OK && !rc) rc = 1;
    }
done:
    if (writing) ts_logits_writer_abort(&w);
    free(base_row);
    ts_kl_stats_free(&kl);
    if (base) ts_logits_file_close(&bf);
    ts_session_free(s);
    free(ids);
    free(text);
    cli_model_free(&m);
    return rc;
}
