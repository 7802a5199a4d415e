/* turbospark inspect FILE.gguf [--tensors] [--json]: parses flags and prints
 * what ts_inspect describes (the reading and formatting are the library's). */
#include <stdio.h>
#include <string.h>

#include <turbospark.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark inspect FILE.gguf [--tensors] [--json]\n" CLI_UNUSED_BACKEND_USAGE);
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    ts_inspect_opts o = {0};
    for (int i = 1, r; i < argc; i++) {
        if (!strcmp(argv[i], "--tensors")) o.tensors = true;
        else if (!strcmp(argv[i], "--json")) o.json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if ((r = cli_backend_flag_unused("inspect", argc, argv, &i))) {
            if (r < 0) return 1;
        }
        else if (argv[i][0] == '-') return cli_error("inspect", "unknown option '%s'", argv[i]);
        else if (!path) path = argv[i];
        else return cli_error("inspect", "unexpected argument '%s'", argv[i]);
    }
    if (!path) return cli_error("inspect", "no file given");
    char *text = NULL;
    size_t len = 0;
    if (ts_inspect(path, &o, &text, &len) != TS_OK) return cli_error("inspect", "%s", ts_last_error());
    fwrite(text, 1, len, stdout);
    ts_free(text);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("inspect", "writing output failed");
    return 0;
}
