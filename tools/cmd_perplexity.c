/* Placeholder until the subcommand lands. */
#include "cli.h"

int cmd_perplexity(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("perplexity", "not implemented yet");
}
