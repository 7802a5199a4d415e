/* turbospark: subcommand dispatch only. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "turbospark.h"
#include "cli.h"
#include "turbospark.h"

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "turbospark %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

bool cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno) {
        cli_error(cmd, "%s: '%s' is not an integer", flag, s);
        return false;
    }
    if (v < lo || v > hi) {
        cli_error(cmd, "%s: %lld is out of range [%lld, %lld]", flag, v, (long long)lo, (long long)hi);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v)) {
        cli_error(cmd, "%s: '%s' is not a number", flag, s);
        return false;
    }
    if (v < lo || v > hi) {
        cli_error(cmd, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_error(cmd, "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* Weights are used in place from the GGUF mapping, so a model file that
 * shrinks under a running command (truncated, rewritten in place) raises
 * SIGBUS on the next touch of a lost page. Say which file, in one line, and
 * exit 1 instead of dying with a bare "Bus error". Only async-signal-safe
 * calls here: the name comes from the library's table of live mappings
 * (ts_map_name_at), the line goes out with write(2). A SIGBUS outside every
 * mapped file is not ours to explain: the default action is restored and the
 * faulting access re-runs into it. */
static void put(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    const char *name = si ? ts_map_name_at(si->si_addr) : NULL;
    if (!name) {
        signal(sig, SIG_DFL);
        return;
    }
    /* several worker threads fault on the same lost pages: one line only;
     * the others wait here for the _exit below */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&said))
        for (;;) pause();
    put("turbospark: ");
    put(name);
    put(" changed size under the mapping (truncated?)\n");
    _exit(1);
}

static void usage(FILE *f) {
    fprintf(f,
            "turbospark " TS_VERSION " - LLM inference for dense and MoE GGUF models\n"
            "usage: turbospark COMMAND [options]\n"
            "commands:\n"
            "  run         generate text from a prompt\n"
            "  chat        interactive chat (same as run --chat)\n"
            "  bench       prompt-processing and generation speed\n"
            "  perplexity  perplexity and KL divergence over a text file\n"
            "  inspect     describe a GGUF file\n"
            "  tokenize    text on stdin -> token ids\n"
            "  analyze     read instrument captures\n"
            "  serve       OpenAI- and Anthropic-compatible HTTP server with a chat page\n"
            "run 'turbospark COMMAND --help' for a command's options\n");
}

int main(int argc, char **argv) {
    /* A closed pipe must surface as a write error we report, not a silent kill. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"inspect", cmd_inspect}, {"tokenize", cmd_tokenize}, {"run", cmd_run},
        {"chat", cmd_chat}, {"bench", cmd_bench}, {"perplexity", cmd_perplexity},
        {"analyze", cmd_analyze}, {"serve", cmd_serve},
    };
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(c, "--version")) {
        printf("turbospark %s\n", TS_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(c, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "turbospark: unknown command '%s'\n", c);
    usage(stderr);
    return 2;
}
