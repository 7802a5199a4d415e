/* The command line: one file per subcommand (tools/cmd_<name>.c). The CLI
 * parses flags, maps the TURBOSPARK_* variables onto the library's option
 * structs, calls the public API (include/turbospark.h, the only header it may
 * include) and decides what to print; it computes nothing itself. Errors: one
 * line on stderr, "turbospark <cmd>: <message>", and a non-zero exit. */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <turbospark.h>

int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Prints "turbospark CMD: message" to stderr; returns exit code 1. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Strict numeric flag parsing: whole string must parse, within [lo, hi];
 * on failure prints a clear error and returns false. */
bool cli_parse_i64(const char *cmd, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f64(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* Fetches the value of a flag that takes one: argv[*i+1], advancing *i. */
const char *cli_flag_value(const char *cmd, int argc, char **argv, int *i);

/* The flags every model-running command shares: -m, -t, -c, --precise,
 * --backend and the --expert-* options. */
typedef struct cli_common {
    const char *model;      /* -m / --model */
    int64_t threads;        /* -t / --threads; 0 = the backend's default */
    int64_t ctx;            /* -c / --ctx; 0 = the model's (or the command's own default) */
    bool precise;           /* --precise */
    ts_backend_kind backend;/* --backend cpu|cuda|auto */
    bool no_pdl;            /* --cuda-pdl off */
    bool expert_given;      /* any --expert-* flag seen */
    bool no_prefetch;       /* --pilot-prefetch off */
    int32_t prefetch_depth; /* --pilot-prefetch N: the pilot's N best guesses; 0 = all top-k (on) */
    bool prefetch_given;    /* --pilot-prefetch given: prefetch_depth overrides the session default */
    ts_expert_plan expert_plan; /* --expert-plan */
    ts_model_opts mo;       /* expert options parsed into it */
} cli_common;

void cli_common_init(cli_common *c);
/* Returns 1 if argv[*i] was one of the shared flags (consumed, value
 * checked), 0 if not, -1 on a bad value (error printed). */
int cli_common_flag(const char *cmd, int argc, char **argv, int *i, cli_common *c);
/* --backend on a command that runs no model (inspect, tokenize, analyze): accepted as on every command, its value
 * checked, so one set of flags can go to every command. It selects nothing: the command says so in one stderr line.
 * Returns 1 if argv[*i] was --backend (consumed), 0 if not, -1 on a bad value (error printed). */
int cli_backend_flag_unused(const char *cmd, int argc, char **argv, int *i);
#define CLI_UNUSED_BACKEND_USAGE "  --backend cpu|cuda|auto  accepted; this command runs no model, so it selects nothing\n"
#define CLI_COMMON_USAGE                                                                               \
    "  common: -m MODEL  -t/--threads N  -c/--ctx N  --precise  --backend cpu|cuda|auto (default auto)\n" \
    "          --cuda-pdl on|off (programmatic dependent launch; default on)\n"                          \
    "  MoE models: --expert-residency resident|streamed|mapped|auto (default auto)\n"                   \
    "              --expert-cache-slots N|auto  --expert-budget BYTES (e.g. 8G)  --expert-policy lfu|lru\n"     \
    "              --gpu-expert-budget BYTES|auto  --gpu-expert-source host|file|auto (--backend cuda)\n"     \
    "              --pilot-prefetch on|off|N (streamed into device slots; default 2 guesses, on: all top-k)\n"  \
    "              --expert-plan auto|host|device (streamed into device slots: who plans a decode token's passes)\n"

/* The TURBOSPARK_* variables (docs/INSTRUMENTS.md), read once by the command
 * before any work: instruments, and the expert I/O settings into mo. A
 * malformed value is an error naming the variable. */
bool cli_env_instruments(const char *cmd, ts_instruments *out);
bool cli_env_model_opts(const char *cmd, ts_model_opts *mo);

/* A loaded model and the backend it runs on. */
typedef struct cli_model {
    ts_backend *be;
    ts_model *model;
    const ts_vocab *vocab; /* the model's; NULL when the file has none */
} cli_model;
/* Makes the backend, prints the start line ("backend: ..."), loads MODEL
 * (progress with bytes, rate and ETA on a terminal); for MoE models prints
 * the residency choice and the cache line. On failure prints the error and
 * returns false. */
bool cli_model_load(const char *cmd, const cli_common *c, cli_model *out);
/* MoE models: the end-of-run cache line (requests, hits, MiB/token). */
void cli_model_report(const cli_model *m, uint64_t n_tokens);
/* "memory: host peak RSS ...; device in use ..." (stderr, after a run): the
 * process's peak resident set (getrusage), and on a device backend what the
 * driver reports in use at this point. */
void cli_memory_report(const char *cmd, const cli_model *m);
void cli_model_free(cli_model *m);
/* Session options from the common flags; warns on stderr when the context
 * exceeds the trained one, with the KV memory it takes. */
ts_session_opts cli_session_opts(const char *cmd, const cli_common *c, const cli_model *m, const ts_instruments *ins);
/* "expert plan: device|host (...)" on stderr for a session streaming experts into device slots; nothing otherwise. */
void cli_print_expert_plan(const ts_session *s);
/* Parses "1 2 3" into ids (space/comma separated), each in [0, n_vocab). */
bool cli_parse_ids(const char *cmd, const char *s, int32_t n_vocab, int32_t **ids, int32_t *n);

/* SIGINT/SIGTERM: the first sets cli_interrupted (the command stops at the
 * next token and writes what its captures hold, marked partial); a second
 * one exits at once. */
extern volatile int cli_interrupted;
void cli_catch_interrupts(void);
/* Installs handler for SIGINT and SIGTERM (no SA_RESTART). */
void cli_on_stop_signals(void (*handler)(int));

#endif
