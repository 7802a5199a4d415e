/* The dense transformer forward pass, top to bottom like the math.
 *
 * For a chunk of n tokens at positions p0..p0+n-1 (x rows are tokens):
 *
 *   x = embed(ids) * embd_scale
 *   for each layer:
 *     h = rmsnorm(x) ; q,k,v = h Wq, h Wk, h Wv (+bias)
 *     q,k = rmsnorm per head (qk-norm families) ; rope(q), rope(k)
 *     cache[p0..] = k, v ; a = softmax(q K^T * scale, causal [+window]) V
 *     o = a Wo ; o = rmsnorm(o) (post-norm families) ; x += o
 *     h = rmsnorm(x) ; f = act(h Wgate) * (h Wup)   <- FFN tap point
 *     o = f Wdown ; o = rmsnorm(o) (post-norm families) ; x += o
 *   logits = rmsnorm(x[rows]) Wout   (rows: the last token, or all)
 *
 * Only backend ops touch the buffers; this file does pointer arithmetic.
 * Where a norm feeds a matmul, or a matmul feeds the residual, the fused op
 * (norm_matmul, matmul_add, act_matmul_add, attn_matmul_add, rope_kv_store,
 * rope_attn_matmul_add) says so: on the CPU it is the same composition of
 * plain ops, on a GPU one pass fewer. */
#include <string.h>

#include "forward/forward_internal.h"

void ts_forward_stage(ts_session *s, const int32_t *ids, int n) {
    int32_t *ids_host = s->pos_host + s->n_batch;
    for (int t = 0; t < n; t++) s->pos_host[t] = s->n_past + t;
    memcpy(ids_host, ids, sizeof(int32_t) * (size_t)n);
}

void ts_forward_send(ts_session *s, int n) {
    /* positions then ids, n_batch apart in both buffers (layout): one copy
     * (a decode step's 8 bytes; its per-copy latency, not its size, is the cost) */
    s->be->ops->to_device(s->st, s->pos, s->pos_host, sizeof(int32_t) * ((size_t)s->n_batch + (size_t)n));
}

ts_status ts_forward_chunk(ts_session *s, int n, bool all_rows, bool is_final_chunk) {
    const ts_model_desc *md = &s->model->desc;
    const ts_hparams *hp = &md->hp;
    const ts_family *fam = md->fam;
    ts_stream *st = s->st;
    const ts_backend_ops *op = s->be->ops;
    const ts_hooks *h = s->hooks;
    const int E = hp->n_embd, HD = hp->head_dim, H = hp->n_head, HKV = hp->n_head_kv, FF = hp->n_ff;
    const float eps = hp->norm_eps;

    /* the positions (s->pos) and ids (s->ids_dev) are in backend memory
     * (ts_forward_send); their RoPE rotations, once per chunk for every layer */
    op->rope_table(st, md->rope_global.freq, md->rope_global.n_rot, s->pos, n, md->rope_global.mscale, s->rope_cs[0]);
    if (md->rope_swa.freq)
        op->rope_table(st, md->rope_swa.freq, md->rope_swa.n_rot, s->pos, n, md->rope_swa.mscale, s->rope_cs[1]);

    op->embed(st, &md->tok_embd, s->ids_dev, n, hp->embd_scale, s->x);
    s->chunk_final = is_final_chunk;
    HOOK(h, mark, s, -1);

    for (int l = 0; l < hp->n_layer; l++) {
        const ts_layer *L = &md->layers[l];

        /* ---- attention ---- */
        const ts_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[3] = {s->q, s->k, s->v};
        op->norm_matmul(st, s->x, L->attn_norm, eps, s->xb, false, 3, qkv, qkv_out, n);
        if (L->q_norm && fam->qk_norm_full) {
            op->rmsnorm(st, s->q, L->q_norm, (int64_t)H * HD, n, eps, s->q);
            op->rmsnorm(st, s->k, L->k_norm, (int64_t)HKV * HD, n, eps, s->k);
        }
        const bool swa = L->swa;
        ts_rope_args ra = {
            .cs = s->rope_cs[swa ? 1 : 0],
            .freq = L->rope->freq,
            .mscale = L->rope->mscale,
            .n_rot = L->rope->n_rot,
            .mode = fam->rope_mode,
            .q_norm = L->q_norm && !fam->qk_norm_full ? L->q_norm : NULL,
            .k_norm = L->q_norm && !fam->qk_norm_full ? L->k_norm : NULL,
            .eps = eps,
        };
        ts_attn_desc ad = {
            .n_tok = n,
            .pos0 = s->n_past,
            .n_head = H,
            .n_head_kv = HKV,
            .head_dim = HD,
            .n_ctx = s->n_ctx,
            .window = swa ? hp->n_swa : 0,
            .scale = hp->attn_scale,
            .kv_type = s->kv_type,
            .pos = s->pos,
        };
        if (L->attn_post_norm) {
            op->rope_kv_store(st, &s->kv[l], &ad, &ra, s->q, s->k, s->v);
            op->attention(st, &s->kv[l], &ad, s->q, s->att);
            const ts_mat *wo[1] = {&L->wo};
            op->matmul(st, 1, wo, &s->xb2, s->att, n);
            op->rmsnorm(st, s->xb2, L->attn_post_norm, E, n, eps, s->xb2);
            op->add(st, s->x, s->xb2, (int64_t)n * E);
        } else {
            op->rope_attn_matmul_add(st, &s->kv[l], &ad, &ra, s->q, s->k, s->v, s->att, &L->wo, s->x, s->xb2);
        }
        HOOK(h, mark, s, TS_PHASE_ATTENTION);
        HOOK(h, after_attention, s, l, n); /* the pilot probe; its own cost is no phase's: */
        HOOK(h, mark, s, -1);

        /* ---- feed-forward ---- */
        if (L->moe) {
            ts_status rc = ts_forward_moe(s, l, n); /* xb = ffn_norm(x), x += the routed FFN; marks its own phases */
            if (rc != TS_OK) {
                (void)ts_forward_moe_release(s);
                return rc;
            }
            HOOK(h, mark, s, -1);
            continue;
        }
        const ts_mat *gu[2] = {&L->ffn_gate, &L->ffn_up};
        float *gu_out[2] = {s->ffn_act, s->ffn_up};
        op->norm_matmul(st, s->x, L->ffn_norm, eps, s->xb, false, 2, gu, gu_out, n);
        if (L->ffn_post_norm) {
            op->act_mul(st, fam->act, s->ffn_act, s->ffn_up, (int64_t)n * FF, s->ffn_act);
            const ts_mat *down[1] = {&L->ffn_down};
            op->matmul(st, 1, down, &s->xb2, s->ffn_act, n);
            op->rmsnorm(st, s->xb2, L->ffn_post_norm, E, n, eps, s->xb2);
            op->add(st, s->x, s->xb2, (int64_t)n * E);
        } else {
            op->act_matmul_add(st, fam->act, s->ffn_act, s->ffn_up, &L->ffn_down, n, s->x, s->xb2);
        }
        /* act(gate) * up, which the down projection has read and left in place */
        HOOK(h, ffn_act, s, l, s->ffn_act, n, FF, is_final_chunk);
        HOOK(h, mark, s, TS_PHASE_DENSE_FFN);
    }

    /* ---- LM head: only the rows whose logits are wanted ---- */
    int rows = all_rows ? n : 1;
    const float *xr = all_rows ? s->x : s->x + (int64_t)(n - 1) * E;
    const ts_mat *head[1] = {&md->output};
    op->norm_matmul(st, xr, md->out_norm, eps, s->xb, false, 1, head, &s->logits, rows);
    if (hp->logit_softcap > 0) op->softcap(st, s->logits, (int64_t)rows * hp->n_vocab, hp->logit_softcap);
    HOOK(h, mark, s, TS_PHASE_LM_HEAD);
    return ts_forward_moe_release(s);
}
