/* libFuzzer harness for the GGUF reader: any byte string must either open
 * (and then every getter and tensor must be safe to touch) or fail cleanly. */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    if (gguf_open_memory(data, size, "fuzz", &f) != TS_OK) return 0;
    uint32_t u;
    gguf_str s;
    const gguf_array *a;
    gguf_get_u32(f, "general.alignment", &u);
    gguf_get_str(f, "general.architecture", &s);
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &a) == GGUF_GET_OK)
        for (uint64_t i = 0; i < a->n; i++) (void)a->strs[i].len;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->nbytes) sink ^= t->data[0] ^ t->data[t->nbytes - 1];
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_value *v = &f->kv[i].val;
        if (v->type == GGUF_VT_ARRAY && v->v.arr.raw && v->v.arr.n) (void)gguf_arr_int(&v->v.arr, v->v.arr.n - 1);
    }
    (void)sink;
    gguf_close(f);
    return 0;
}
