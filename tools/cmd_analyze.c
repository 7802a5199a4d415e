/* turbospark analyze router|cache|window|ffn ... : parses flags into the
 * ts_analyze_* options and prints the report the library builds (all the
 * reading, checking, arithmetic and the --html page are in src/analyze/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbospark.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark analyze router A.json[,A2.json...] [B.json[,...]] [--html FILE]\n"
            "       turbospark analyze cache TRACE.json [--slots 8,16,32] [--skip N] [--policy lfu,lru,belady] [--html FILE]\n"
            "       turbospark analyze window TRACE.json [--skip N] [--m 2,4,8,16] [--html FILE]\n"
            "       turbospark analyze ffn CAP.json[,CAP2.json...] [--html FILE]\n"
            "  every analysis: --max-input BYTES  refuse a capture file larger than this (default 256M)\n"
            CLI_UNUSED_BACKEND_USAGE);
}

/* Splits a comma-separated list of paths (empty items dropped) into a NULL
 * terminated array pointing into *buf (free both). Returns the count, or -1
 * after printing an error. */
static int split_paths(const char *list, char **buf, const char ***paths) {
    *paths = NULL;
    if (!(*buf = strdup(list))) return cli_error("analyze", "out of memory"), -1;
    size_t n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    if (!(*paths = calloc(n + 1, sizeof **paths))) {
        free(*buf);
        return cli_error("analyze", "out of memory"), -1;
    }
    int k = 0;
    for (char *save = NULL, *t = strtok_r(*buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) (*paths)[k++] = t;
    if (!k) {
        free(*buf);
        free(*paths);
        return cli_error("analyze", "empty capture list"), -1;
    }
    return k;
}

/* Splits "a,b,c" into at most TS_ANALYZE_MAX_LIST integers in [lo, hi]. */
static int parse_int_list(const char *flag, const char *s, int64_t lo, int64_t hi, int32_t *out) {
    char buf[1024];
    if (strlen(s) >= sizeof buf) return cli_error("analyze", "%s: list too long", flag), -1;
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == TS_ANALYZE_MAX_LIST) return cli_error("analyze", "%s: more than %d values", flag, TS_ANALYZE_MAX_LIST), -1;
        int64_t v;
        if (!cli_parse_i64("analyze", flag, t, lo, hi, &v)) return -1;
        out[n++] = (int32_t)v;
    }
    if (!n) return cli_error("analyze", "%s: empty list", flag), -1;
    return n;
}

static int parse_policies(const char *v, ts_analyze_policy *pols) {
    char buf[256];
    if (strlen(v) >= sizeof buf) return cli_error("analyze", "--policy: list too long"), -1;
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == 3) return cli_error("analyze", "--policy: at most three policies (lfu, lru, belady)"), -1;
        if (!strcmp(t, "lfu")) pols[n++] = TS_ANALYZE_LFU;
        else if (!strcmp(t, "lru")) pols[n++] = TS_ANALYZE_LRU;
        else if (!strcmp(t, "belady")) pols[n++] = TS_ANALYZE_BELADY;
        else return cli_error("analyze", "--policy: unknown policy '%s' (lfu, lru, belady)", t), -1;
    }
    if (!n) return cli_error("analyze", "--policy: empty list"), -1;
    return n;
}

/* The flags every analysis takes. Returns 1 if argv[*i] was one (consumed),
 * 0 if not, -1 after printing an error. */
typedef struct common_flags {
    const char *html;
    uint64_t max_input;
} common_flags;

static int common_flag(int argc, char **argv, int *i, common_flags *cf) {
    int r = cli_backend_flag_unused("analyze", argc, argv, i);
    if (r) return r;
    if (!strcmp(argv[*i], "--html")) {
        const char *v = cli_flag_value("analyze", argc, argv, i);
        if (!v) return -1;
        if (!v[0]) return cli_error("analyze", "--html needs a file name"), -1;
        if (cf->html) return cli_error("analyze", "--html given twice"), -1;
        cf->html = v;
        return 1;
    }
    if (!strcmp(argv[*i], "--max-input")) {
        const char *v = cli_flag_value("analyze", argc, argv, i);
        if (!v) return -1;
        if (ts_parse_bytes(v, &cf->max_input) != TS_OK) return cli_error("analyze", "--max-input: %s", ts_last_error()), -1;
        if (!cf->max_input) return cli_error("analyze", "--max-input must be at least 1 byte"), -1;
        return 1;
    }
    return 0;
}

/* Prints the report, or the library's error (nothing on stdout then). */
static int finish(ts_status st, char *text, size_t len) {
    if (st != TS_OK)
        return cli_error("analyze", "%s%s", ts_last_error(), st == TS_ERR_LIMIT ? " (raise it with --max-input)" : "");
    fwrite(text, 1, len, stdout);
    ts_free(text);
    return 0;
}

/* router and ffn: positional capture lists plus the common flags. */
static int positional(int argc, char **argv, common_flags *cf, const char **pos, int max_pos) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        int r = common_flag(argc, argv, &i, cf);
        if (r < 0) return -1;
        if (r) continue;
        if (argv[i][0] == '-') return cli_error("analyze", "unknown option '%s'", argv[i]), -1;
        if (n == max_pos) return cli_error("analyze", "unexpected argument '%s'", argv[i]), -1;
        pos[n++] = argv[i];
    }
    return n;
}

static int analyze_router(int argc, char **argv) {
    common_flags cf = {0};
    const char *pos[2];
    int np = positional(argc, argv, &cf, pos, 2);
    if (np < 0) return 1;
    if (np < 1) return cli_error("analyze", "router takes one or two capture groups");
    char *ba = NULL, *bb = NULL;
    const char **pa = NULL, **pb = NULL;
    int na = split_paths(pos[0], &ba, &pa), nb = 0;
    if (na < 0) return 1;
    if (np == 2 && (nb = split_paths(pos[1], &bb, &pb)) < 0) {
        free(ba), free(pa);
        return 1;
    }
    ts_analyze_router_opts o = {.a = pa, .n_a = (size_t)na, .b = pb, .n_b = (size_t)nb, .html = cf.html, .max_input = cf.max_input};
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_analyze_router(&o, &text, &len);
    free(ba), free(pa), free(bb), free(pb);
    return finish(st, text, len);
}

static int analyze_cache(int argc, char **argv) {
    common_flags cf = {0};
    ts_analyze_cache_opts o = {0};
    int32_t slots[TS_ANALYZE_MAX_LIST];
    ts_analyze_policy pols[3];
    for (int i = 1; i < argc; i++) {
        int r = common_flag(argc, argv, &i, &cf);
        if (r < 0) return 1;
        if (r) continue;
        if (!strcmp(argv[i], "--slots")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            int n = v ? parse_int_list("--slots", v, 1, 1 << 20, slots) : -1;
            if (n < 0) return 1;
            o.slots = slots, o.n_slots = (size_t)n;
        } else if (!strcmp(argv[i], "--skip")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            int64_t skip;
            if (!v || !cli_parse_i64("analyze", "--skip", v, 0, INT64_MAX, &skip)) return 1;
            o.skip = (uint64_t)skip;
        } else if (!strcmp(argv[i], "--policy")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            int n = v ? parse_policies(v, pols) : -1;
            if (n < 0) return 1;
            o.policies = pols, o.n_policies = (size_t)n;
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!o.trace) {
            o.trace = argv[i];
        } else {
            return cli_error("analyze", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!o.trace) return cli_error("analyze", "cache needs a trace capture");
    o.html = cf.html, o.max_input = cf.max_input;
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_analyze_cache(&o, &text, &len);
    return finish(st, text, len);
}

static int analyze_window(int argc, char **argv) {
    common_flags cf = {0};
    ts_analyze_window_opts o = {0};
    int32_t ms[TS_ANALYZE_MAX_LIST];
    for (int i = 1; i < argc; i++) {
        int r = common_flag(argc, argv, &i, &cf);
        if (r < 0) return 1;
        if (r) continue;
        if (!strcmp(argv[i], "--m")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            int n = v ? parse_int_list("--m", v, 1, 1 << 20, ms) : -1;
            if (n < 0) return 1;
            o.m = ms, o.n_m = (size_t)n;
        } else if (!strcmp(argv[i], "--skip")) {
            const char *v = cli_flag_value("analyze", argc, argv, &i);
            int64_t skip;
            if (!v || !cli_parse_i64("analyze", "--skip", v, 0, INT64_MAX, &skip)) return 1;
            o.skip = (uint64_t)skip;
        } else if (argv[i][0] == '-') {
            return cli_error("analyze", "unknown option '%s'", argv[i]);
        } else if (!o.trace) {
            o.trace = argv[i];
        } else {
            return cli_error("analyze", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!o.trace) return cli_error("analyze", "window needs a trace capture");
    o.html = cf.html, o.max_input = cf.max_input;
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_analyze_window(&o, &text, &len);
    return finish(st, text, len);
}

static int analyze_ffn(int argc, char **argv) {
    common_flags cf = {0};
    const char *pos[1];
    int np = positional(argc, argv, &cf, pos, 1);
    if (np < 0) return 1;
    if (np != 1) return cli_error("analyze", "ffn takes one comma-separated list of captures");
    char *buf = NULL;
    const char **paths = NULL;
    int n = split_paths(pos[0], &buf, &paths);
    if (n < 0) return 1;
    ts_analyze_ffn_opts o = {.captures = paths, .n_captures = (size_t)n, .html = cf.html, .max_input = cf.max_input};
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_analyze_ffn(&o, &text, &len);
    free(buf), free(paths);
    return finish(st, text, len);
}

int cmd_analyze(int argc, char **argv) {
    if (argc < 2) return cli_error("analyze", "which analysis? (router, cache, window, ffn)");
    const char *what = argv[1];
    int rc;
    if (!strcmp(what, "router")) rc = analyze_router(argc - 1, argv + 1);
    else if (!strcmp(what, "cache")) rc = analyze_cache(argc - 1, argv + 1);
    else if (!strcmp(what, "window")) rc = analyze_window(argc - 1, argv + 1);
    else if (!strcmp(what, "ffn")) rc = analyze_ffn(argc - 1, argv + 1);
    else if (!strcmp(what, "-h") || !strcmp(what, "--help")) { usage(stdout); return 0; }
    else return cli_error("analyze", "unknown analysis '%s'", what);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) return cli_error("analyze", "writing output failed");
    return rc;
}
