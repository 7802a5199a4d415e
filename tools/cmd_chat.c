/* Placeholder until the subcommand lands. */
#include "cli.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_error("chat", "not implemented yet");
}
