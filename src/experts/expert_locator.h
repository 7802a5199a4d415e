/* Where each routed expert lives in a GGUF file.
 *
 * The engine keeps non-expert weights resident and reads routed experts with
 * pread straight from the file into slot buffers. This module turns the
 * file's expert tensors into one table of byte ranges: for every MoE layer,
 * every expert and each of its three projections (gate, up, down), the
 * absolute file offset, the length and the quant type of that expert's slice.
 * Nothing is repacked: a slice of a stacked tensor is a contiguous range of
 * the tensor's bytes.
 *
 * Two layouts are understood (llama.cpp names, src/llama-arch.cpp):
 *   stacked     blk.N.ffn_{gate,up,down}_exps.weight, one 3-D tensor per
 *               projection; ne = [n_embd, n_ff_exp, n_expert] for gate/up and
 *               [n_ff_exp, n_embd, n_expert] for down. Expert e is bytes
 *               [e*nb2, (e+1)*nb2) of the tensor, nb2 = row_bytes(ne0)*ne1.
 *   per-expert  blk.N.ffn_{gate,up,down}.E.weight, one 2-D tensor per expert
 *               and projection (older Mixtral conversions).
 * A layer with neither is dense (no routed experts); a layer with both, or
 * with only part of either, is refused.
 *
 * Shapes are checked against the metadata: {arch}.expert_count,
 * {arch}.expert_used_count (top-k, 1..expert_count and <= CACHE_MAX_K),
 * {arch}.embedding_length and {arch}.expert_feed_forward_length (falling back
 * to {arch}.feed_forward_length, which is the expert width in Mixtral files).
 * Every refusal names the file and the offending key or tensor. */
#ifndef TS_EXPERTS_LOCATOR_H
#define TS_EXPERTS_LOCATOR_H

#include <stdint.h>

#include "base/base.h"
#include "gguf/gguf.h"

typedef enum expert_proj {
    EXPERT_PROJ_GATE = 0,
    EXPERT_PROJ_UP = 1,
    EXPERT_PROJ_DOWN = 2,
    EXPERT_PROJ_COUNT = 3
} expert_proj;

const char *expert_proj_name(int p); /* "gate" / "up" / "down" */

typedef enum expert_layout {
    EXPERT_LAYOUT_NONE = 0,       /* dense layer */
    EXPERT_LAYOUT_STACKED = 1,    /* ffn_*_exps */
    EXPERT_LAYOUT_PER_EXPERT = 2, /* ffn_*.E */
} expert_layout;

const char *expert_layout_name(expert_layout l);

typedef struct expert_slice {
    uint64_t offset; /* absolute file offset of the first byte */
    uint64_t nbytes; /* length in bytes: row_bytes(type, ne0) * ne1 */
    ts_type type;    /* of the rows */
} expert_slice;

typedef struct expert_layer_info {
    int32_t block;            /* blk.N index of this MoE layer */
    expert_layout layout;
    ts_type type[EXPERT_PROJ_COUNT];      /* per projection; the same for all experts of a stacked layer */
    uint64_t proj_bytes[EXPERT_PROJ_COUNT]; /* largest slice of each projection over the layer's experts */
    uint64_t expert_bytes;    /* largest gate+up+down sum over the layer's experts (the slot size it needs) */
    uint64_t layer_bytes;     /* all experts of the layer, summed */
} expert_layer_info;

typedef struct expert_map {
    int32_t n_block;          /* {arch}.block_count */
    int32_t n_moe;            /* MoE layers found (0 for a dense model) */
    int32_t n_expert;         /* {arch}.expert_count */
    int32_t n_expert_used;    /* {arch}.expert_used_count (top-k) */
    int64_t n_embd;           /* {arch}.embedding_length */
    int64_t n_ff_exp;         /* expert hidden width */
    int32_t *moe_of_block;    /* (n_block) index into layers[], -1 for a dense block */
    expert_layer_info *layers; /* (n_moe) in block order */
    expert_slice *slices;     /* (n_moe, n_expert, EXPERT_PROJ_COUNT) */
    uint64_t max_expert_bytes; /* max over layers of expert_bytes: one slot buffer fits any expert */
    uint64_t total_bytes;     /* all routed expert bytes in the file */
} expert_map;

/* Builds the map. arch: the metadata key prefix ("qwen3moe", "llama"...);
 * NULL reads general.architecture. A file without expert tensors and without
 * (or with zero) {arch}.expert_count gives n_moe = 0 and TS_OK. */
ts_status expert_map_build(const gguf_file *f, const char *arch, expert_map *out);
void expert_map_free(expert_map *m);

/* Slice of expert e's projection p in MoE layer index l (0..n_moe-1). */
static inline const expert_slice *expert_map_slice(const expert_map *m, int32_t l, int32_t e, int p) {
    return &m->slices[((uint64_t)l * (uint64_t)m->n_expert + (uint64_t)e) * EXPERT_PROJ_COUNT + (uint64_t)p];
}

/* gate+up+down bytes of one expert. */
uint64_t expert_map_expert_bytes(const expert_map *m, int32_t l, int32_t e);

#endif
