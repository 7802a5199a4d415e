/* The model description: hyperparameters from GGUF metadata and weights bound
 * in place by tensor name, for the dense transformer families in one table.
 * Building it validates everything the forward pass relies on (presence,
 * shape and type of every tensor), so the forward pass checks nothing. */
#ifndef TS_MODEL_H
#define TS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "compute/backend.h"
#include "experts/expert_locator.h"
#include "gguf/gguf.h"

typedef enum ts_arch {
    TS_ARCH_LLAMA = 0, /* Llama 2/3, Mistral, SmolLM2 */
    TS_ARCH_QWEN2,     /* + Q/K/V biases */
    TS_ARCH_QWEN3,     /* + per-head Q/K RMSNorm */
    TS_ARCH_GEMMA3,    /* + sliding/global layers, post-norms, GELU, scaled embeddings */
    TS_ARCH_QWEN2MOE,  /* qwen2 attention; routed experts + a sigmoid-gated shared expert */
    TS_ARCH_QWEN3MOE,  /* qwen3 attention; routed experts */
    TS_ARCH_OLMOE,     /* full-width Q/K RMSNorm; routed experts */
    TS_ARCH_COUNT
} ts_arch;

/* What distinguishes one family from another: flags and constants, read by
 * the binder and the forward pass. */
typedef struct ts_family {
    const char *name;      /* general.architecture */
    ts_arch arch;
    ts_rope_mode rope_mode;
    ts_act act;            /* FFN gate activation */
    bool qkv_bias;         /* attn_{q,k,v}.bias present */
    bool qk_norm;          /* attn_{q,k}_norm: RMSNorm per head before RoPE */
    bool post_norms;       /* post_attention_norm / post_ffw_norm on block outputs */
    bool embd_scale;       /* embeddings times sqrt(n_embd) */
    int swa_pattern;       /* every swa_pattern-th layer is global, the others slide; 0 = none */
    float swa_rope_base;   /* RoPE base of the sliding layers */
    bool qk_norm_full;     /* attn_{q,k}_norm over the whole projection (OLMoE), not per head */
    bool moe;              /* FFN layers are routed experts (a dense family becomes MoE when expert_count > 0) */
    bool moe_norm_topk;    /* renormalise the top-k weights, unless {arch}.expert_weights_norm says otherwise */
    bool shared_expert;    /* ffn_*_shexp behind a sigmoid gate ffn_gate_inp_shexp (qwen2moe) */
} ts_family;

/* The family table entry for a GGUF architecture name, or NULL. */
const ts_family *ts_family_find(const char *arch);
/* "llama, qwen2, qwen3, gemma3": for messages. */
const char *ts_family_list(void);

/* One RoPE configuration; layers point at theirs. Base, linear/YaRN scaling
 * and Llama 3 frequency factors are folded into freq. */
typedef struct ts_rope {
    int n_rot;      /* rotated dims per head (even, <= head_dim) */
    float *freq;    /* (n_rot/2) angle per position of each pair, owned */
    float mscale;   /* magnitude factor on cos/sin (YaRN), else 1 */
} ts_rope;

typedef struct ts_hparams {
    int n_vocab;        /* rows of token_embd */
    int n_embd;         /* residual width */
    int n_layer;
    int n_ff;           /* FFN hidden width */
    int n_head;         /* query heads */
    int n_head_kv;      /* key/value heads */
    int head_dim;       /* key_length == value_length */
    int n_ctx_train;    /* context_length */
    int n_swa;          /* sliding window (positions) of sliding layers, 0 = none */
    float norm_eps;     /* RMSNorm epsilon */
    float attn_scale;   /* on q.k: 1/sqrt(head_dim) or the family's rule */
    float embd_scale;   /* on embeddings: 1 or sqrt(n_embd) */
    float logit_softcap;/* final logit soft-capping, 0 = none */
    int n_expert;       /* routed experts per MoE layer, 0 = dense model */
    int n_expert_used;  /* top-k */
    int n_ff_exp;       /* expert FFN width */
    int n_ff_shexp;     /* shared expert FFN width, 0 = none */
    bool expert_norm;   /* top-k weights renormalised to sum 1 */
} ts_hparams;

typedef struct ts_layer {
    const float *attn_norm;      /* (n_embd) */
    ts_mat wq;                   /* (n_head*head_dim, n_embd) [+bias] */
    ts_mat wk;                   /* (n_head_kv*head_dim, n_embd) [+bias] */
    ts_mat wv;                   /* (n_head_kv*head_dim, n_embd) [+bias] */
    ts_mat wo;                   /* (n_embd, n_head*head_dim) */
    const float *q_norm;         /* (head_dim) or NULL */
    const float *k_norm;         /* (head_dim) or NULL */
    const float *attn_post_norm; /* (n_embd) or NULL */
    const float *ffn_norm;       /* (n_embd) */
    ts_mat ffn_gate;             /* (n_ff, n_embd) */
    ts_mat ffn_up;               /* (n_ff, n_embd) */
    ts_mat ffn_down;             /* (n_embd, n_ff) */
    const float *ffn_post_norm;  /* (n_embd) or NULL */
    bool moe;                    /* routed experts instead of ffn_gate/up/down */
    ts_mat ffn_router;           /* (n_expert, n_embd) ffn_gate_inp: router logits */
    ts_mat pilot_router;         /* (n_expert, n_embd) F32 or unbound: the next layer's router with its FFN norm
                                    over this one's folded in, so that on this layer's normed input it gives the
                                    pilot's guess (engine.c, fold_pilot_routers) */
    ts_mat ffn_gate_shexp;       /* (n_ff_shexp, n_embd) or unbound */
    ts_mat ffn_up_shexp;         /* (n_ff_shexp, n_embd) */
    ts_mat ffn_down_shexp;       /* (n_embd, n_ff_shexp) */
    ts_mat ffn_gate_inp_shexp;   /* (1, n_embd): the shared expert's gate logit */
    bool swa;                    /* sliding-window layer */
    const ts_rope *rope;         /* this layer's RoPE (global or sliding) */
} ts_layer;

typedef struct ts_model_desc {
    const ts_family *fam;
    ts_hparams hp;
    ts_mat tok_embd;          /* (n_vocab, n_embd) */
    const float *out_norm;    /* (n_embd) */
    ts_mat output;            /* (n_vocab, n_embd); token_embd when tied */
    bool tied;                /* output shares token_embd */
    ts_layer *layers;         /* (n_layer) */
    ts_rope rope_global;      /* global layers (all layers without SWA) */
    ts_rope rope_swa;         /* sliding layers (gemma3) */
    bool has_moe;             /* some layer routes experts; emap is built */
    expert_map emap;          /* where every expert's slices live in the file */
    float **owned;            /* (n_owned) the desc's own F32 arrays: copies of non-F32 vectors, folded pilot routers */
    int n_owned;
} ts_model_desc;

/* n floats the desc owns (freed with it); NULL when out of memory. */
float *ts_model_desc_alloc(ts_model_desc *md, size_t n);

/* Reads the hyperparameters of f, checks the family is supported and binds
 * every tensor (pointers into f's mapping: f must outlive the description). */
ts_status ts_model_desc_build(const gguf_file *f, ts_model_desc *out);
void ts_model_desc_free(ts_model_desc *m);

/* Weight bytes the description binds (for bandwidth estimates). */
uint64_t ts_model_desc_weight_bytes(const ts_model_desc *m);

#endif
