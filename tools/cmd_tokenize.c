/* turbospark tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] [--max-input BYTES]
 *
 * Reads all of stdin as one text (nothing added or stripped, at most
 * --max-input bytes) and prints its token ids on one line, separated by
 * single spaces. --pieces prints each token's vocabulary piece instead, as a
 * JSON string, separated by single spaces. Vocab-only GGUF files work (no
 * tensors are touched). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <turbospark.h>

#include "cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] [--max-input BYTES] < text\n"
            "  stdin is read whole as one text; prints token ids on one line\n"
            "  --no-bos     do not add BOS/EOS (default: as tokenizer.ggml.add_bos_token / add_eos_token say)\n"
            "  --special    parse control tokens written in the text (e.g. <|im_start|>)\n"
            "  --pieces     print each token's vocabulary piece as a JSON string instead of its id\n"
            "  --max-input  refuse more than this much text (default 256M; e.g. 1G)\n" CLI_UNUSED_BACKEND_USAGE);
}

/* A piece as a JSON string: valid UTF-8 passes through, '"' '\\' and control
 * characters are escaped, bytes that are not valid UTF-8 become U+FFFD. */
static void put_json(FILE *o, const char *p, size_t n) {
    fputc('"', o);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') { fputc('\\', o); fputc(c, o); i++; continue; }
        if (c == '\n') { fputs("\\n", o); i++; continue; }
        if (c == '\t') { fputs("\\t", o); i++; continue; }
        if (c == '\r') { fputs("\\r", o); i++; continue; }
        if (c < 0x20 || c == 0x7F) { fprintf(o, "\\u%04x", c); i++; continue; }
        if (c < 0x80) { fputc(c, o); i++; continue; }
        /* multi-byte: copy a valid sequence whole */
        size_t l = c >= 0xC0 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF8 ? 4 : 0;
        if (l && l <= n - i && ts_utf8_valid(p + i, l)) {
            fwrite(p + i, 1, l, o);
            i += l;
        } else {
            fputs("\\ufffd", o);
            i++;
        }
    }
    fputc('"', o);
}

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    bool add_special = true, parse_special = false, pieces = false;
    uint64_t max_input = TS_READ_DEFAULT_CAP;
    for (int i = 1, r; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if ((r = cli_backend_flag_unused("tokenize", argc, argv, &i))) {
            if (r < 0) return 1;
        }
        else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (!(path = cli_flag_value("tokenize", argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "--no-bos")) add_special = false;
        else if (!strcmp(argv[i], "--special")) parse_special = true;
        else if (!strcmp(argv[i], "--pieces")) pieces = true;
        else if (!strcmp(argv[i], "--max-input")) {
            const char *v = cli_flag_value("tokenize", argc, argv, &i);
            if (!v) return 1;
            if (ts_parse_bytes(v, &max_input) != TS_OK) return cli_error("tokenize", "--max-input: %s", ts_last_error());
            if (!max_input) return cli_error("tokenize", "--max-input must be at least 1 byte");
        } else if (argv[i][0] == '-') return cli_error("tokenize", "unknown option '%s' (see --help)", argv[i]);
        else return cli_error("tokenize", "unexpected argument '%s' (the text is read from stdin)", argv[i]);
    }
    if (!path) return cli_error("tokenize", "no model given (-m FILE.gguf)");

    ts_vocab *v = NULL;
    if (ts_vocab_load(path, &v) != TS_OK) return cli_error("tokenize", "%s", ts_last_error());
    char *text = NULL;
    size_t len = 0;
    ts_status st = ts_read_file("-", max_input, &text, &len);
    if (st != TS_OK) {
        ts_vocab_free(v);
        return cli_error("tokenize", "%s%s", ts_last_error(), st == TS_ERR_LIMIT ? " (raise it with --max-input)" : "");
    }
    int32_t *ids = NULL;
    size_t n = 0;
    st = ts_tokenize(v, text, len, add_special, parse_special, &ids, &n);
    ts_free(text);
    if (st != TS_OK) {
        ts_vocab_free(v);
        return cli_error("tokenize", "%s", ts_last_error());
    }
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(' ', stdout);
        if (pieces) {
            size_t pl = 0;
            const char *p = ts_token_piece(v, ids[i], &pl);
            put_json(stdout, p ? p : "", p ? pl : 0);
        } else {
            fprintf(stdout, "%d", ids[i]);
        }
    }
    fputc('\n', stdout);
    ts_free(ids);
    ts_vocab_free(v);
    /* A closed pipe or full disk must not pass as success. */
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("tokenize", "writing the output: %s", strerror(errno));
    return 0;
}
