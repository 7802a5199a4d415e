/* turbospark tokenize -m FILE.gguf [--no-bos] [--special] [--pieces]
 *
 * Reads all of stdin as one text (nothing added or stripped) and prints its
 * token ids on one line, separated by single spaces. --pieces prints each
 * token's vocabulary piece instead, as a JSON string, separated by single
 * spaces. Vocab-only GGUF files work (no tensors are touched). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: turbospark tokenize -m FILE.gguf [--no-bos] [--special] [--pieces] < text\n"
            "  stdin is read whole as one text; prints token ids on one line\n"
            "  --no-bos   do not add BOS/EOS (default: as tokenizer.ggml.add_bos_token / add_eos_token say)\n"
            "  --special  parse control tokens written in the text (e.g. <|im_start|>)\n"
            "  --pieces   print each token's vocabulary piece as a JSON string instead of its id\n");
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
        size_t l = c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        bool ok = l && i + l <= n;
        for (size_t k = 1; ok && k < l; k++) ok = ((unsigned char)p[i + k] & 0xC0) == 0x80;
        if (ok && l == 3) {
            unsigned c1 = (unsigned char)p[i + 1];
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
        }
        if (ok && l == 4) {
            unsigned c1 = (unsigned char)p[i + 1];
            ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
        }
        if (ok) {
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (!(path = cli_flag_value("tokenize", argc, argv, &i))) return 1;
        } else if (!strcmp(argv[i], "--no-bos")) add_special = false;
        else if (!strcmp(argv[i], "--special")) parse_special = true;
        else if (!strcmp(argv[i], "--pieces")) pieces = true;
        else if (argv[i][0] == '-') return cli_error("tokenize", "unknown option '%s' (see --help)", argv[i]);
        else return cli_error("tokenize", "unexpected argument '%s' (the text is read from stdin)", argv[i]);
    }
    if (!path) return cli_error("tokenize", "no model given (-m FILE.gguf)");

    gguf_file *f = NULL;
    if (gguf_open(path, &f) != TS_OK) return cli_error("tokenize", "%s", ts_last_error());
    tok_vocab *v = NULL;
    ts_status st = tok_load(f, &v);
    gguf_close(f);
    if (st != TS_OK) return cli_error("tokenize", "%s", ts_last_error());

    char *text = NULL;
    size_t len = 0;
    if (ts_read_file("-", 0, &text, &len) != TS_OK) {
        tok_free(v);
        return cli_error("tokenize", "%s", ts_last_error()); /* "stdin: ..." already */
    }
    int32_t *ids = NULL;
    size_t n = 0;
    st = tok_encode(v, text, len, add_special, parse_special, &ids, &n);
    free(text);
    if (st != TS_OK) {
        tok_free(v);
        return cli_error("tokenize", "%s", ts_last_error());
    }
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(' ', stdout);
        if (pieces) {
            size_t pl;
            const char *p = tok_piece(v, ids[i], &pl);
            put_json(stdout, p, pl);
        } else {
            fprintf(stdout, "%d", ids[i]);
        }
    }
    fputc('\n', stdout);
    free(ids);
    tok_free(v);
    /* A closed pipe or full disk must not pass as success. */
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("tokenize", "writing the output: %s", strerror(errno));
    return 0;
}
