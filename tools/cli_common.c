/* Helpers shared by the subcommands that load a model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "forward/engine.h"
#include "tokenizer/tokenizer.h"

static void progress(void *user, float frac) {
    int *last = user;
    int pct = (int)(frac * 100.0f);
    if (pct == *last) return;
    *last = pct;
    fprintf(stderr, "\rloading model: %3d%%", pct);
    if (pct >= 100) fputs("\r\033[K", stderr);
    fflush(stderr);
}

bool cli_model_load(const char *cmd, const char *path, cli_model *out) {
    memset(out, 0, sizeof *out);
    int last = -1;
    ts_model_opts mo = {0};
    if (isatty(STDERR_FILENO)) {
        mo.progress = progress;
        mo.progress_user = &last;
        mo.prefault = true;
    }
    if (ts_model_load(path, &mo, &out->model) != TS_OK) {
        if (last >= 0) fputs("\r\033[K", stderr);
        cli_error(cmd, "%s", ts_last_error());
        return false;
    }
    if (tok_load(ts_model_gguf(out->model), &out->vocab) != TS_OK) {
        cli_error(cmd, "%s", ts_last_error());
        ts_model_free(out->model);
        out->model = NULL;
        return false;
    }
    return true;
}

void cli_model_free(cli_model *m) {
    tok_free(m->vocab);
    ts_model_free(m->model);
    memset(m, 0, sizeof *m);
}

bool cli_parse_ids(const char *cmd, const char *s, int32_t n_vocab, int32_t **ids, int32_t *n) {
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) { cli_error(cmd, "out of memory"); return false; }
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
            cli_error(cmd, "--prompt-ids: '%.*s' is not a token id", (int)strcspn(p, " ,\t\n"), p);
            goto fail;
        }
        if (v < 0 || v >= n_vocab) {
            cli_error(cmd, "--prompt-ids: token id %lld is outside the vocabulary [0, %d)", v, n_vocab);
            goto fail;
        }
        if ((size_t)*n == cap) {
            int32_t *q = realloc(*ids, (cap *= 2) * sizeof **ids);
            if (!q) { cli_error(cmd, "out of memory"); goto fail; }
            *ids = q;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if (!*n) { cli_error(cmd, "--prompt-ids: no token ids given"); goto fail; }
    return true;
fail:
    free(*ids);
    *ids = NULL;
    return false;
}
