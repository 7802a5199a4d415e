/* The command line: one file per subcommand (tools/cmd_<name>.c). The CLI
 * parses flags, calls the library and decides what to print; it computes
 * nothing itself. Errors: one line on stderr, "turbospark <cmd>: <message>",
 * and a non-zero exit. */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <stdbool.h>
#include <stdint.h>

int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_analyze(int argc, char **argv);

/* Prints "turbospark CMD: message" to stderr; returns exit code 1. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Strict numeric flag parsing: whole string must parse, within [lo, hi];
 * on failure prints a clear error and returns false. */
bool cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* Fetches the value of a flag that takes one: argv[*i+1], advancing *i. */
const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i);

/* A model with its tokenizer, loaded for a command (progress on a terminal). */
struct ts_model;
struct ts_vocab;
typedef struct cli_model {
    struct ts_model *model;
    struct ts_vocab *vocab;
} cli_model;
/* MoE flags shared by run/chat/bench/perplexity: --expert-residency,
 * --expert-cache-slots, --expert-budget, --expert-policy. Returns 1 if argv[*i]
 * was one of them (consumed, value parsed into the options), 0 if not, -1 on
 * a bad value (error printed). */
struct expert_cache_opts;
typedef struct cli_expert_flags {
    bool given;            /* any flag seen */
    const char *residency, *slots, *budget, *policy;
} cli_expert_flags;
int cli_parse_expert_flag(const char *cmd, int argc, char **argv, int *i, cli_expert_flags *ef);
#define CLI_EXPERT_USAGE                                                                             \
    "  MoE models: --expert-residency resident|streamed|mapped|auto (default auto)\n"              \
    "              --expert-cache-slots N|auto  --expert-budget BYTES (e.g. 8G)  --expert-policy lfu|lru\n"

/* Loads MODEL and its tokenizer; on failure prints the error and returns
 * false. For MoE models prints the residency choice and the cache line. */
bool cli_model_load(const char *cmd, const char *path, const cli_expert_flags *ef, cli_model *out);
/* MoE models: the end-of-run cache line (requests, hits, MiB/token). */
void cli_model_report(const cli_model *m, uint64_t n_tokens);
void cli_model_free(cli_model *m);
/* Parses "1 2 3" into ids (space/comma separated), each in [0, n_vocab). */
bool cli_parse_ids(const char *cmd, const char *s, int32_t n_vocab, int32_t **ids, int32_t *n);

#endif
