/* turbospark inspect FILE.gguf [--tensors] [--json] */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf/gguf.h"

static const char *hp_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base", "rope.dimension_count",
    "rope.scaling.type", "rope.scaling.factor", "expert_count", "expert_used_count", "expert_feed_forward_length",
    "expert_shared_feed_forward_length", "vocab_size",
};

static void usage(FILE *f) {
    fprintf(f, "usage: turbospark inspect FILE.gguf [--tensors] [--json]\n");
}

/* Value of a scalar kv as JSON; arrays as {"type","n"} (they can be huge). */
static cJSON *value_json(const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: return cJSON_CreateNumber((double)v->v.u64);
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: return cJSON_CreateNumber((double)v->v.i64);
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: return cJSON_CreateNumber(v->v.f64);
    case GGUF_VT_BOOL: return cJSON_CreateBool(v->v.b);
    case GGUF_VT_STRING: {
        char *s = gguf_strdup(v->v.str);
        cJSON *j = cJSON_CreateString(s ? s : "");
        free(s);
        return j;
    }
    default: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "array_of", gguf_vtype_name(v->v.arr.type));
        cJSON_AddNumberToObject(o, "n", (double)v->v.arr.n);
        return o;
    }
    }
}

static void print_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: printf("%" PRIu64, v->v.u64); break;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: printf("%" PRId64, v->v.i64); break;
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: printf("%g", v->v.f64); break;
    case GGUF_VT_BOOL: printf("%s", v->v.b ? "true" : "false"); break;
    case GGUF_VT_STRING: printf("%.*s", (int)(v->v.str.len > 200 ? 200 : v->v.str.len), v->v.str.ptr); break;
    default: printf("[%" PRIu64 " x %s]", v->v.arr.n, gguf_vtype_name(v->v.arr.type)); break;
    }
}

static void fmt_bytes(char *buf, size_t n, double b) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) { b /= 1024; i++; }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tensors")) tensors = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (argv[i][0] == '-') { return cli_error("inspect", "unknown option '%s'", argv[i]); }
        else if (!path) path = argv[i];
        else return cli_error("inspect", "unexpected argument '%s'", argv[i]);
    }
    if (!path) { return cli_error("inspect", "no file given"); }
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != TS_OK) return cli_error("inspect", "%s", ts_last_error());

    gguf_str arch = {"", 0};
    char *archs = NULL;
    if (gguf_get_str(f, "general.architecture", &arch) == GGUF_GET_OK) archs = gguf_strdup(arch);
    gguf_str tokm = {"", 0}, tokpre = {"", 0}, name = {"", 0};
    gguf_get_str(f, "tokenizer.ggml.model", &tokm);
    gguf_get_str(f, "tokenizer.ggml.pre", &tokpre);
    gguf_get_str(f, "general.name", &name);
    const gguf_array *toks = NULL;
    uint64_t n_vocab = 0;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks) == GGUF_GET_OK) n_vocab = toks->n;

    uint64_t type_bytes[TS_TYPE_COUNT] = {0}, type_count[TS_TYPE_COUNT] = {0}, n_params = 0, total = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        type_bytes[t->type] += t->nbytes;
        type_count[t->type]++;
        n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        total += t->nbytes;
    }

    int rc = 0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", path);
        cJSON_AddNumberToObject(o, "version", f->version);
        cJSON_AddNumberToObject(o, "file_bytes", (double)f->map.size);
        cJSON_AddStringToObject(o, "architecture", archs ? archs : "");
        char *nm = gguf_strdup(name);
        cJSON_AddStringToObject(o, "name", nm ? nm : "");
        free(nm);
        cJSON *hp = cJSON_AddObjectToObject(o, "hparams");
        for (size_t k = 0; archs && k < sizeof hp_keys / sizeof hp_keys[0]; k++) {
            char key[256];
            snprintf(key, sizeof key, "%s.%s", archs, hp_keys[k]);
            const gguf_kv *kv = gguf_get_kv(f, key);
            if (kv) cJSON_AddItemToObject(hp, hp_keys[k], value_json(&kv->val));
        }
        cJSON *tk = cJSON_AddObjectToObject(o, "tokenizer");
        char *s1 = gguf_strdup(tokm), *s2 = gguf_strdup(tokpre);
        cJSON_AddStringToObject(tk, "model", s1 ? s1 : "");
        cJSON_AddStringToObject(tk, "pre", s2 ? s2 : "");
        cJSON_AddNumberToObject(tk, "n_vocab", (double)n_vocab);
        cJSON_AddBoolToObject(tk, "chat_template", gguf_find_key(f, "tokenizer.chat_template") >= 0);
        free(s1);
        free(s2);
        cJSON_AddNumberToObject(o, "n_kv", (double)f->n_kv);
        cJSON_AddNumberToObject(o, "n_tensors", (double)f->n_tensors);
        cJSON_AddNumberToObject(o, "n_params", (double)n_params);
        cJSON_AddNumberToObject(o, "tensor_bytes", (double)total);
        cJSON *bt = cJSON_AddObjectToObject(o, "bytes_per_type");
        for (int t = 0; t < TS_TYPE_COUNT; t++)
            if (type_count[t]) {
                cJSON *e = cJSON_AddObjectToObject(bt, ts_type_name(t));
                cJSON_AddNumberToObject(e, "tensors", (double)type_count[t]);
                cJSON_AddNumberToObject(e, "bytes", (double)type_bytes[t]);
            }
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        for (uint64_t i = 0; i < f->n_kv; i++) {
            char *k = gguf_strdup(f->kv[i].key);
            if (k) cJSON_AddItemToObject(md, k, value_json(&f->kv[i].val));
            free(k);
        }
        if (tensors) {
            cJSON *ta = cJSON_AddArrayToObject(o, "tensors");
            for (uint64_t i = 0; i < f->n_tensors; i++) {
                const gguf_tensor *t = &f->tensors[i];
                cJSON *e = cJSON_CreateObject();
                char *tn = gguf_strdup(t->name);
                cJSON_AddStringToObject(e, "name", tn ? tn : "");
                free(tn);
                cJSON_AddStringToObject(e, "type", ts_type_name(t->type));
                cJSON *sh = cJSON_AddArrayToObject(e, "shape");
                for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
                cJSON_AddNumberToObject(e, "offset", (double)(f->data_offset + t->offset));
                cJSON_AddNumberToObject(e, "bytes", (double)t->nbytes);
                cJSON_AddItemToArray(ta, e);
            }
        }
        char *out = cJSON_Print(o);
        if (out) printf("%s\n", out);
        else rc = cli_error("inspect", "out of memory building JSON");
        free(out);
        cJSON_Delete(o);
    } else {
        char b1[32], b2[32];
        fmt_bytes(b1, sizeof b1, (double)f->map.size);
        printf("file:         %s (%s, GGUF v%u)\n", path, b1, f->version);
        printf("architecture: %s\n", archs ? archs : "(none)");
        if (name.len) printf("name:         %.*s\n", (int)name.len, name.ptr);
        for (size_t k = 0; archs && k < sizeof hp_keys / sizeof hp_keys[0]; k++) {
            char key[256];
            snprintf(key, sizeof key, "%s.%s", archs, hp_keys[k]);
            const gguf_kv *kv = gguf_get_kv(f, key);
            if (!kv) continue;
            printf("  %-34s ", hp_keys[k]);
            print_value(&kv->val);
            printf("\n");
        }
        if (tokm.len)
            printf("tokenizer:    %.*s%s%.*s, %" PRIu64 " tokens%s\n", (int)tokm.len, tokm.ptr, tokpre.len ? " / pre=" : "",
                   (int)tokpre.len, tokpre.ptr, n_vocab, gguf_find_key(f, "tokenizer.chat_template") >= 0 ? ", chat template" : "");
        else
            printf("tokenizer:    (none)\n");
        printf("metadata:     %" PRIu64 " keys\n", f->n_kv);
        fmt_bytes(b1, sizeof b1, (double)total);
        printf("tensors:      %" PRIu64 " (%s), %.3f B parameters\n", f->n_tensors, b1, (double)n_params / 1e9);
        for (int t = 0; t < TS_TYPE_COUNT; t++)
            if (type_count[t]) {
                fmt_bytes(b2, sizeof b2, (double)type_bytes[t]);
                printf("  %-8s %6" PRIu64 " tensors  %12s\n", ts_type_name(t), type_count[t], b2);
            }
        if (tensors) {
            printf("\n%-48s %-8s %-28s %14s %12s\n", "name", "type", "shape", "offset", "bytes");
            for (uint64_t i = 0; i < f->n_tensors; i++) {
                const gguf_tensor *t = &f->tensors[i];
                char shape[64] = "";
                size_t o = 0;
                for (uint32_t d = 0; d < t->n_dims; d++)
                    o += (size_t)snprintf(shape + o, sizeof shape - o, d ? " x %" PRIu64 : "%" PRIu64, t->ne[d]);
                printf("%-48.*s %-8s %-28s %14" PRIu64 " %12" PRIu64 "\n", (int)(t->name.len > 48 ? 48 : t->name.len), t->name.ptr,
                       ts_type_name(t->type), shape, f->data_offset + t->offset, t->nbytes);
            }
        }
    }
    free(archs);
    gguf_close(f);
    if (fflush(stdout) != 0 || ferror(stdout)) return rc ? rc : cli_error("inspect", "writing output failed");
    return rc;
}
