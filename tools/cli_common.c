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

int cli_parse_expert_flag(const char *cmd, int argc, char **argv, int *i, cli_expert_flags *ef) {
    const char *a = argv[*i];
    const char **dst = !strcmp(a, "--expert-residency")    ? &ef->residency
                       : !strcmp(a, "--expert-cache-slots") ? &ef->slots
                       : !strcmp(a, "--expert-budget")      ? &ef->budget
                       : !strcmp(a, "--expert-policy")      ? &ef->policy
                                                            : NULL;
    if (!dst) return 0;
    const char *v = cli_flag_value(cmd, argc, argv, i);
    if (!v) return -1;
    *dst = v;
    ef->given = true;
    /* validate now, so a bad value is refused before any work */
    expert_cache_opts eo;
    expert_cache_opts_default(&eo);
    ts_status st = TS_OK;
    if (dst == &ef->residency) st = expert_cache_parse_residency(v, &eo.residency);
    else if (dst == &ef->slots) st = expert_cache_parse_slots(v, &eo.n_slots);
    else if (dst == &ef->budget) st = expert_cache_parse_bytes(v, &eo.budget_bytes);
    else st = expert_cache_parse_policy(v, &eo.policy);
    if (st != TS_OK) {
        const char *msg = ts_last_error();
        if (strncmp(msg, a, strlen(a)) == 0) cli_error(cmd, "%s", msg);
        else cli_error(cmd, "%s: %s", a, msg);
        return -1;
    }
    return 1;
}

static bool expert_opts(const char *cmd, const cli_expert_flags *ef, expert_cache_opts *eo) {
    expert_cache_opts_default(eo);
    ts_status st = expert_io_config_from_env(&eo->io);
    if (!st && ef && ef->residency) st = expert_cache_parse_residency(ef->residency, &eo->residency);
    if (!st && ef && ef->slots) st = expert_cache_parse_slots(ef->slots, &eo->n_slots);
    if (!st && ef && ef->budget) st = expert_cache_parse_bytes(ef->budget, &eo->budget_bytes);
    if (!st && ef && ef->policy) st = expert_cache_parse_policy(ef->policy, &eo->policy);
    if (st) cli_error(cmd, "%s", ts_last_error());
    return st == TS_OK;
}

void cli_model_report(const cli_model *m, uint64_t n_tokens) {
    expert_cache *ec = m->model ? ts_model_expert_cache(m->model) : NULL;
    if (!ec) return;
    char line[512];
    expert_cache_format_end(ec, n_tokens, line, sizeof line);
    fprintf(stderr, "%s\n", line);
}

bool cli_model_load(const char *cmd, const char *path, const cli_expert_flags *ef, cli_model *out) {
    memset(out, 0, sizeof *out);
    int last = -1;
    expert_cache_opts eo;
    if (!expert_opts(cmd, ef, &eo)) return false;
    ts_model_opts mo = {.experts = &eo};
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
    expert_cache *ec = ts_model_expert_cache(out->model);
    if (ec) {
        char line[512];
        expert_cache_format_start(ec, line, sizeof line);
        fprintf(stderr, "%s\n%s\n", expert_cache_choice(ec), line);
    } else if (ef && ef->given) {
        cli_error(cmd, "--expert-* options apply to mixture-of-experts models; %s is dense", path);
        ts_model_free(out->model);
        out->model = NULL;
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
