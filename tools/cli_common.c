/* Helpers shared by the subcommands that load a model: the common flags,
 * the TURBOSPARK_* variables, loading with progress, interrupts. */
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void cli_common_init(cli_common *c) {
    memset(c, 0, sizeof *c);
    c->backend = TS_BACKEND_AUTO;
    c->mo = ts_model_opts_default();
}

int cli_backend_flag_unused(const char *cmd, int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "--backend")) return 0;
    const char *v = cli_flag_value(cmd, argc, argv, i);
    ts_backend_kind k;
    if (!v) return -1;
    if (ts_backend_kind_parse(v, &k) != TS_OK) return cli_error(cmd, "--backend %s", ts_last_error()), -1;
    fprintf(stderr, "backend: none (%s runs no model; --backend %s selects nothing)\n", cmd, v);
    return 1;
}

int cli_common_flag(const char *cmd, int argc, char **argv, int *i, cli_common *c) {
    const char *a = argv[*i], *v;
#define VAL()                                                        \
    do {                                                             \
        if (!(v = cli_flag_value(cmd, argc, argv, i))) return -1;    \
    } while (0)
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        VAL();
        c->model = v;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        VAL();
        if (!cli_parse_i64(cmd, a, v, 1, 256, &c->threads)) return -1;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
        VAL();
        if (!cli_parse_i64(cmd, a, v, 1, 1 << 24, &c->ctx)) return -1;
    } else if (!strcmp(a, "--precise")) {
        c->precise = true;
    } else if (!strcmp(a, "--cuda-pdl")) {
        VAL();
        if (strcmp(v, "on") && strcmp(v, "off")) return cli_error(cmd, "--cuda-pdl %s: expected on or off", v), -1;
        c->no_pdl = !strcmp(v, "off");
    } else if (!strcmp(a, "--backend")) {
        VAL();
        if (ts_backend_kind_parse(v, &c->backend) != TS_OK) return cli_error(cmd, "--backend %s", ts_last_error()), -1;
    } else if (!strcmp(a, "--expert-residency")) {
        VAL();
        if (ts_expert_residency_parse(v, &c->mo.expert_residency) != TS_OK) return cli_error(cmd, "--expert-residency: %s", ts_last_error()), -1;
        c->expert_given = true;
    } else if (!strcmp(a, "--expert-cache-slots")) {
        VAL();
        int64_t n = 0;
        if (strcmp(v, "auto") && !cli_parse_i64(cmd, a, v, 1, 1 << 20, &n)) return -1;
        c->mo.expert_slots = (int32_t)n;
        c->expert_given = true;
    } else if (!strcmp(a, "--expert-budget")) {
        VAL();
        if (ts_parse_bytes(v, &c->mo.expert_budget) != TS_OK) return cli_error(cmd, "--expert-budget: %s", ts_last_error()), -1;
        c->expert_given = true;
    } else if (!strcmp(a, "--gpu-expert-budget")) {
        VAL();
        c->mo.gpu_expert_budget = 0;
        if (strcmp(v, "auto") && ts_parse_bytes(v, &c->mo.gpu_expert_budget) != TS_OK)
            return cli_error(cmd, "--gpu-expert-budget: %s", ts_last_error()), -1;
        c->expert_given = true;
    } else if (!strcmp(a, "--gpu-expert-source")) {
        VAL();
        if (ts_expert_source_parse(v, &c->mo.expert_source) != TS_OK) return cli_error(cmd, "--gpu-expert-source: %s", ts_last_error()), -1;
        c->expert_given = true;
    } else if (!strcmp(a, "--pilot-prefetch")) {
        VAL();
        int64_t d = 0;
        c->no_prefetch = !strcmp(v, "off");
        if (strcmp(v, "on") && !c->no_prefetch) {
            if (!cli_parse_i64(cmd, a, v, 1, 64, &d)) return -1;
        }
        c->prefetch_depth = (int32_t)d;
        c->prefetch_given = true;
    } else if (!strcmp(a, "--expert-plan")) {
        VAL();
        if (ts_expert_plan_parse(v, &c->expert_plan) != TS_OK) return cli_error(cmd, "--expert-plan: %s", ts_last_error()), -1;
    } else if (!strcmp(a, "--expert-policy")) {
        VAL();
        if (ts_cache_policy_parse(v, &c->mo.expert_policy) != TS_OK) return cli_error(cmd, "--expert-policy: %s", ts_last_error()), -1;
        c->expert_given = true;
    } else {
        return 0;
    }
#undef VAL
    return 1;
}

/* ---- TURBOSPARK_* ---- */

/* On: set, non-empty and not "0". */
static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static const char *env_str(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool env_int(const char *cmd, const char *name, int64_t lo, int64_t hi, int64_t *out, bool *set) {
    const char *v = getenv(name);
    *set = false;
    if (!v || !*v) return true;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) {
        cli_error(cmd, "%s=%s: expected an integer in [%lld, %lld]", name, v, (long long)lo, (long long)hi);
        return false;
    }
    *out = x;
    *set = true;
    return true;
}

bool cli_env_instruments(const char *cmd, ts_instruments *out) {
    *out = ts_instruments_default();
    out->router_path = env_str("TURBOSPARK_ROUTER_HIST");
    out->router_trace = env_on("TURBOSPARK_ROUTER_TRACE");
    out->ffn_path = env_str("TURBOSPARK_FFN_HIST");
    out->phases = env_on("TURBOSPARK_PHASES");
    const char *pp = getenv("TURBOSPARK_PILOT_PROBE");
    if (pp && *pp && strcmp(pp, "0") != 0) {
        if (!strcmp(pp, "1")) out->pilot = TS_PILOT_NEXT;
        else if (!strcmp(pp, "self")) out->pilot = TS_PILOT_SELF;
        else return cli_error(cmd, "TURBOSPARK_PILOT_PROBE=%s: expected 1 (next layer) or self", pp), false;
    }
    int64_t v;
    bool set_l, set_p;
    if (!env_int(cmd, "TURBOSPARK_ROUTER_LOGITS_LAYER", 0, 1 << 20, &v, &set_l)) return false;
    if (set_l) out->router_logits_layer = (int32_t)v;
    if (!env_int(cmd, "TURBOSPARK_ROUTER_LOGITS_PASS", 0, INT64_MAX, &out->router_logits_pass, &set_p)) return false;
    if (set_p && !set_l) return cli_error(cmd, "TURBOSPARK_ROUTER_LOGITS_PASS needs TURBOSPARK_ROUTER_LOGITS_LAYER"), false;
    /* before the model loads, which can take minutes */
    if (ts_instruments_check(out) != TS_OK) return cli_error(cmd, "%s", ts_last_error()), false;
    return true;
}

bool cli_env_model_opts(const char *cmd, ts_model_opts *mo) {
    int64_t v;
    bool set;
    if (!env_int(cmd, "TURBOSPARK_EXPERT_NOCACHE", 0, 1, &v, &set)) return false;
    if (set) mo->expert_direct_io = v == 1;
    if (!env_int(cmd, "TURBOSPARK_EXPERT_DISK_IO", 0, 1, &v, &set)) return false;
    if (set) mo->expert_disk_io = v == 1;
    if (!env_int(cmd, "TURBOSPARK_EXPERT_IO_THREADS", 0, 64, &v, &set)) return false;
    if (set) mo->expert_io_threads = (int32_t)v;
    return true;
}

/* ---- loading ---- */

typedef struct load_progress {
    double t0;
    int last_pct;
} load_progress;

/* "loading model: 42% 1.9 GiB / 4.6 GiB, 1.2 GiB/s, ETA 2 s" on one line */
static void progress(void *user, uint64_t done, uint64_t total) {
    load_progress *p = user;
    int pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
    if (pct == p->last_pct) return;
    p->last_pct = pct;
    double dt = ts_now() - p->t0, rate = dt > 0 ? (double)done / dt : 0;
    char b1[32], b2[32], b3[32];
    fprintf(stderr, "\rloading model: %3d%% %s / %s", pct, ts_fmt_bytes(done, 1, b1, sizeof b1), ts_fmt_bytes(total, 1, b2, sizeof b2));
    if (rate > 0 && done < total)
        fprintf(stderr, ", %s/s, ETA %.0f s", ts_fmt_bytes((uint64_t)rate, 1, b3, sizeof b3), (double)(total - done) / rate);
    fputs("\033[K", stderr);
    if (done >= total) fputs("\r\033[K", stderr);
    fflush(stderr);
}

void cli_model_report(const cli_model *m, uint64_t n_tokens) {
    if (!m->model || !ts_model_has_experts(m->model)) return;
    char line[512];
    fprintf(stderr, "%s\n", ts_model_expert_end_line(m->model, n_tokens, line, sizeof line));
}

void cli_memory_report(const char *cmd, const cli_model *m) {
    struct rusage ru;
    char a[32], b[32], c[32];
    if (getrusage(RUSAGE_SELF, &ru) != 0) return;
    fprintf(stderr, "%s: memory: host peak RSS %s", cmd, ts_fmt_bytes((uint64_t)ru.ru_maxrss * 1024, 1, a, sizeof a));
    uint64_t fr = 0, tot = 0;
    if (m->be && ts_backend_kind_of(m->be) != TS_BACKEND_CPU && ts_backend_device_memory(m->be, &fr, &tot) == TS_OK)
        /* allocations are made at load and at the first step of each shape and
         * kept to the end, so what is in use now is the run's peak, the
         * context and cuBLAS's workspace included */
        fprintf(stderr, "; device in use at the end %s of %s (the driver's total - free)", ts_fmt_bytes(tot - fr, 1, b, sizeof b),
                ts_fmt_bytes(tot, 1, c, sizeof c));
    fputc('\n', stderr);
}

bool cli_model_load(const char *cmd, const cli_common *c, cli_model *out) {
    memset(out, 0, sizeof *out);
    if (!c->model) return cli_error(cmd, "no model given (-m MODEL)"), false;
    ts_model_opts mo = c->mo;
    if (!cli_env_model_opts(cmd, &mo)) return false;
    ts_backend_opts bo = ts_backend_opts_default();
    bo.kind = c->backend;
    bo.n_threads = (int32_t)c->threads;
    bo.cuda_no_pdl = c->no_pdl;
    if (ts_backend_new(&bo, &out->be) != TS_OK) return cli_error(cmd, "%s", ts_last_error()), false;
    if (ts_backend_kind_of(out->be) != TS_BACKEND_CPU) {
        char d[256];
        fprintf(stderr, "backend: %s\n", ts_backend_describe(out->be, d, sizeof d));
    }
    mo.backend = out->be;
    load_progress lp = {.t0 = ts_now(), .last_pct = -1};
    if (isatty(STDERR_FILENO)) {
        mo.progress = progress;
        mo.progress_user = &lp;
        mo.prefault = true;
    }
    ts_status st = ts_model_load(c->model, &mo, &out->model);
    if (st == TS_ERR_UNSUPPORTED && c->backend == TS_BACKEND_AUTO && ts_backend_kind_of(out->be) != TS_BACKEND_CPU) {
        /* auto: a model the device backend does not run (a weight type or
         * a mode it lacks) runs on the cpu, as it did before there was a choice */
        if (lp.last_pct >= 0) fputs("\r\033[K", stderr);
        fprintf(stderr, "backend: cpu (%s)\n", ts_last_error());
        ts_backend_free(out->be);
        bo.kind = TS_BACKEND_CPU;
        if (ts_backend_new(&bo, &out->be) != TS_OK) return out->be = NULL, cli_error(cmd, "%s", ts_last_error()), false;
        mo.backend = out->be;
        lp = (load_progress){.t0 = ts_now(), .last_pct = -1};
        st = ts_model_load(c->model, &mo, &out->model);
    }
    if (st != TS_OK) {
        if (lp.last_pct >= 0) fputs("\r\033[K", stderr);
        cli_error(cmd, "%s", ts_last_error());
        ts_backend_free(out->be);
        out->be = NULL;
        return false;
    }
    if (c->expert_given && !ts_model_has_experts(out->model)) {
        cli_error(cmd, "--expert-* options apply to mixture-of-experts models; %s is dense", c->model);
        cli_model_free(out);
        return false;
    }
    if (ts_model_has_experts(out->model)) {
        char line[512];
        fprintf(stderr, "%s\n%s\n", ts_model_expert_choice(out->model), ts_model_expert_start_line(out->model, line, sizeof line));
    }
    out->vocab = ts_model_vocab(out->model);
    if (!out->vocab) {
        cli_error(cmd, "%s has no tokenizer (tokenizer.ggml.*)", c->model);
        cli_model_free(out);
        return false;
    }
    return true;
}

void cli_model_free(cli_model *m) {
    ts_model_free(m->model);
    ts_backend_free(m->be);
    memset(m, 0, sizeof *m);
}

ts_session_opts cli_session_opts(const char *cmd, const cli_common *c, const cli_model *m, const ts_instruments *ins) {
    ts_session_opts so = ts_session_opts_default();
    so.n_ctx = (int32_t)c->ctx;
    so.n_threads = (int32_t)c->threads;
    so.precise = c->precise;
    so.pilot_prefetch = !c->no_prefetch;
    if (c->prefetch_given) so.pilot_prefetch_depth = c->prefetch_depth; /* else the library's default */
    so.expert_plan = c->expert_plan;
    so.instruments = ins;
    ts_model_info mi;
    ts_model_get_info(m->model, &mi);
    if (c->ctx > mi.n_ctx_train) {
        char b[32];
        fprintf(stderr, "turbospark %s: warning: --ctx %lld exceeds the model's trained context of %d; the KV cache takes %s\n", cmd,
                (long long)c->ctx, mi.n_ctx_train, ts_fmt_bytes(mi.kv_bytes_per_pos * (uint64_t)c->ctx, 1, b, sizeof b));
    }
    return so;
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

/* ---- interrupts ---- */

volatile int cli_interrupted;

static void on_signal(int sig) {
    if (cli_interrupted) {
        /* a second signal: stop now, leaving any capture unwritten (never half-written) */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    cli_interrupted = 1;
}

void cli_on_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_catch_interrupts(void) { cli_on_stop_signals(on_signal); }

void cli_print_expert_plan(const ts_session *s) {
    const ts_expert_plan p = ts_session_expert_plan(s);
    if (p == TS_EXPERT_PLAN_AUTO) return;
    fprintf(stderr, "expert plan: %s\n",
            p == TS_EXPERT_PLAN_DEVICE ? "device (decode's cache passes planned by the backend: no host round trip per layer)"
                                       : "host (decode's cache passes planned on the host after each MoE layer's readback)");
    const int32_t d = ts_session_pilot_prefetch(s);
    if (d) fprintf(stderr, "expert prefetch: the pilot's %d most confident guesses a layer\n", d);
    else fprintf(stderr, "expert prefetch: off\n");
}
