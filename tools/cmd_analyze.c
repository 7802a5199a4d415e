/* Placeholder until the subcommand lands. */
#include "cli.h"

int cmd_analyze(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("analyze", "not implemented yet");
}
