/* turbospark serve: flags -> ts_server_opts; the server itself is
 * src/server/ (docs/SERVER.md). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static ts_server *g_srv;

static void on_stop(int sig) {
    (void)sig;
    if (g_srv) ts_server_stop(g_srv); /* async-signal-safe */
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N] [--queue N]\n"
            "         [--api-key KEY] [--chat-template NAME] [--model-id NAME] [--max-body BYTES] [--max-depth N]\n"
            "         [--max-messages N] [--header-bytes BYTES] [--timeout SECONDS] [--request-timeout SECONDS]\n"
            "         [--max-connections N] [--ping-ms N]\n"
            "  --host ADDR          address to bind (default 127.0.0.1: this machine only)\n"
            "  --port N             0 = any free port (the port is printed)\n"
            "  --parallel N         sessions, each with its own KV cache of --ctx positions (default 1)\n"
            "  --ctx N              positions per session (default: the trained context, at most 4096)\n"
            "  --queue N            requests that may wait for a session; beyond, 503 + Retry-After (default 16)\n"
            "  --api-key KEY        require Authorization: Bearer KEY or x-api-key: KEY (also TURBOSPARK_API_KEY)\n"
            "  --chat-template NAME chatml, llama3, llama2, mistral, mistral-legacy, gemma (default: the model's)\n"
            "  --model-id NAME      the model's id in the API (default: the file name without .gguf)\n"
            "  --max-body BYTES     largest request body (default 1M; 413 beyond)\n"
            "  --max-depth N        JSON nesting (default 32); --max-messages N (default 256)\n"
            "  --header-bytes BYTES memory for the request line and headers (default 16K; 431 beyond)\n"
            "  --timeout SECONDS    close connections idle this long (default 30)\n"
            "  --request-timeout SECONDS  a request not received this long after its connection was ready for it\n"
            "                       gets 408 and the connection is closed (default 30; slow clients)\n"
            "  --max-connections N  open connections at once (default 64)\n"
            "  --ping-ms N          an SSE comment after N ms of silence on a stream (default 2000)\n"
            "  --load-delay-ms N    for tests: wait N ms between listening and loading the model, so the\n"
            "                       loading state (/health 503) can be observed (default 0)\n" CLI_COMMON_USAGE);
}

int cmd_serve(int argc, char **argv) {
    const char *cmd = "serve";
    cli_common c;
    cli_common_init(&c);
    ts_server_opts o = ts_server_opts_default();
    const char *key = getenv("TURBOSPARK_API_KEY");
    int64_t load_delay_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        uint64_t b;
#define VAL() \
    if (!(v = cli_flag_value(cmd, argc, argv, &i))) return 1
        int cf = cli_common_flag(cmd, argc, argv, &i, &c);
        if (cf < 0) return 1;
        if (cf > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--host")) { VAL(); o.host = v; }
        else if (!strcmp(a, "--port")) { VAL(); if (!cli_parse_i64(cmd, a, v, 0, 65535, &n)) return 1; o.port = (int32_t)n; }
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 256, &n)) return 1; o.n_parallel = (int32_t)n; }
        else if (!strcmp(a, "--queue")) { VAL(); if (!cli_parse_i64(cmd, a, v, 0, 65536, &n)) return 1; o.n_queue = (int32_t)n; }
        else if (!strcmp(a, "--api-key")) { VAL(); if (!*v) return cli_error(cmd, "--api-key: empty key"); key = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); o.chat_template = v; }
        else if (!strcmp(a, "--model-id")) { VAL(); if (!*v) return cli_error(cmd, "--model-id: empty name"); o.model_id = v; }
        else if (!strcmp(a, "--max-body") || !strcmp(a, "--header-bytes")) {
            VAL();
            if (ts_parse_bytes(v, &b) != TS_OK) return cli_error(cmd, "%s %s", a, ts_last_error());
            if (a[2] == 'm') {
                if (b < 64 || b > ((uint64_t)1 << 30)) return cli_error(cmd, "--max-body %s is outside [64, 1G]", v);
                o.max_body = b;
            } else {
                if (b < 1024 || b > (1u << 20)) return cli_error(cmd, "--header-bytes %s is outside [1K, 1M]", v);
                o.header_bytes = (int32_t)b;
            }
        }
        else if (!strcmp(a, "--max-depth")) { VAL(); if (!cli_parse_i64(cmd, a, v, 2, 512, &n)) return 1; o.max_depth = (int32_t)n; }
        else if (!strcmp(a, "--max-messages")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 1 << 20, &n)) return 1; o.max_messages = (int32_t)n; }
        else if (!strcmp(a, "--timeout")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 86400, &n)) return 1; o.timeout_s = (int32_t)n; }
        else if (!strcmp(a, "--request-timeout")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 86400, &n)) return 1; o.request_timeout_s = (int32_t)n; }
        else if (!strcmp(a, "--load-delay-ms")) { VAL(); if (!cli_parse_i64(cmd, a, v, 0, 600000, &n)) return 1; load_delay_ms = n; }
        else if (!strcmp(a, "--ping-ms")) { VAL(); if (!cli_parse_i64(cmd, a, v, 10, 3600000, &n)) return 1; o.ping_ms = (int32_t)n; }
        else if (!strcmp(a, "--max-connections")) { VAL(); if (!cli_parse_i64(cmd, a, v, 1, 4096, &n)) return 1; o.max_connections = (int32_t)n; }
        else return cli_error(cmd, "unknown option '%s'", a);
#undef VAL
    }
    if (!c.model) return cli_error(cmd, "no model given (-m MODEL)");
    if (c.precise) return cli_error(cmd, "--precise is not supported by serve");
    ts_model_opts mo = c.mo;
    if (!cli_env_model_opts(cmd, &mo)) return 1;
    ts_backend_opts bo = ts_backend_opts_default();
    bo.kind = c.backend;
    bo.n_threads = (int32_t)c.threads;
    ts_backend *be = NULL;
    if (ts_backend_new(&bo, &be) != TS_OK) return cli_error(cmd, "%s", ts_last_error());
    mo.backend = be;
    o.model_path = c.model;
    o.model_opts = mo;
    o.n_ctx = (int32_t)c.ctx;
    o.n_threads = (int32_t)c.threads;
    o.api_key = key;
    o.log = stderr;
    if (ts_server_new(&o, &g_srv) != TS_OK) {
        ts_backend_free(be);
        return cli_error(cmd, "%s", ts_last_error());
    }
    cli_on_stop_signals(on_stop);
    fprintf(stderr, "listening on http://%s:%d (loading %s)\n", o.host, ts_server_port(g_srv), c.model);
    /* The server answers from ts_server_new on; the delay only widens the
     * window before the load (a test hook: small models load faster than a
     * client can ask). A stop signal ends it early. */
    struct timespec d = {(time_t)(load_delay_ms / 1000), (long)(load_delay_ms % 1000) * 1000000L};
    if (load_delay_ms > 0) nanosleep(&d, NULL);
    ts_status st = ts_server_run(g_srv);
    int rc = 0;
    if (st) rc = cli_error(cmd, "%s", ts_last_error());
    ts_server_free(g_srv);
    g_srv = NULL;
    ts_backend_free(be);
    if (!rc) fprintf(stderr, "stopped\n");
    return rc;
}
