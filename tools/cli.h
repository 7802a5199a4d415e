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
struct tok_vocab;
typedef struct cli_model {
    struct ts_model *model;
    struct tok_vocab *vocab;
} cli_model;
/* Loads MODEL and its tokenizer; on failure prints the error and returns false. */
bool cli_model_load(const char *cmd, const char *path, cli_model *out);
void cli_model_free(cli_model *m);
/* Parses "1 2 3" into ids (space/comma separated), each in [0, n_vocab). */
bool cli_parse_ids(const char *cmd, const char *s, int32_t n_vocab, int32_t **ids, int32_t *n);

#endif
