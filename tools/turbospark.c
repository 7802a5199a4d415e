/* turbospark: subcommand dispatch only. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            "run 'turbospark COMMAND --help' for a command's options\n");
}

int main(int argc, char **argv) {
    /* A closed pipe must surface as a write error we report, not a silent kill. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"inspect", cmd_inspect}, {"tokenize", cmd_tokenize}, {"run", cmd_run},
        {"chat", cmd_chat}, {"bench", cmd_bench}, {"perplexity", cmd_perplexity},
        {"analyze", cmd_analyze},
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
