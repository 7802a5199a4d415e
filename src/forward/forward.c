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
 * Only backend ops touch the buffers; this file does pointer arithmetic. */
#include "forward/forward_internal.h"

ts_status ts_forward_chunk(ts_session *s, const int32_t *ids, int n, bool all_rows, bool is_final_chunk) {
    const ts_model_desc *md = &s->model->desc;
    const ts_hparams *hp = &md->hp;
    const ts_family *fam = md->fam;
    ts_stream *st = s->st;
    const ts_backend_ops *op = s->be->ops;
    const ts_hooks *h = s->hooks;
    const int E = hp->n_embd, HD = hp->head_dim, H = hp->n_head, HKV = hp->n_head_kv, FF = hp->n_ff;
    const float eps = hp->norm_eps;

    /* positions and their RoPE rotations, once per chunk for every layer */
    for (int t = 0; t < n; t++) s->pos_host[t] = s->n_past + t;
    op->to_device(st, s->pos, s->pos_host, sizeof(int32_t) * (size_t)n);
    op->to_device(st, s->ids_dev, ids, sizeof(int32_t) * (size_t)n);
    op->rope_table(st, md->rope_global.freq, md->rope_global.n_rot, s->pos, n, md->rope_global.mscale, s->rope_cs[0]);
    if (md->rope_swa.freq)
        op->rope_table(st, md->rope_swa.freq, md->rope_swa.n_rot, s->pos, n, md->rope_swa.mscale, s->rope_cs[1]);

    op->embed(st, &md->tok_embd, s->ids_dev, n, hp->embd_scale, s->x);
    s->chunk_final = is_final_chunk;
    HOOK(h, mark, s, -1);

    for (int l = 0; l < hp->n_layer; l++) {
        const ts_layer *L = &md->layers[l];

        /* ---- attention ---- */
        op->rmsnorm(st, s->x, L->attn_norm, E, n, eps, s->xb);
        const ts_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *qkv_out[3] = {s->q, s->k, s->v};
        op->matmul(st, 3, qkv, qkv_out, s->xb, n);
        if (L->q_norm && fam->qk_norm_full) {
            op->rmsnorm(st, s->q, L->q_norm, (int64_t)H * HD, n, eps, s->q);
            op->rmsnorm(st, s->k, L->k_norm, (int64_t)HKV * HD, n, eps, s->k);
        } else if (L->q_norm) {
            op->rmsnorm(st, s->q, L->q_norm, HD, (int64_t)n * H, eps, s->q);
            op->rmsnorm(st, s->k, L->k_norm, HD, (int64_t)n * HKV, eps, s->k);
        }
        const float *cs = L->swa ? s->rope_cs[1] : s->rope_cs[0];
        op->rope(st, s->q, n, H, HD, L->rope->n_rot, cs, fam->rope_mode);
        op->rope(st, s->k, n, HKV, HD, L->rope->n_rot, cs, fam->rope_mode);

        ts_attn_desc ad = {
            .n_tok = n,
            .pos0 = s->n_past,
            .n_head = H,
            .n_head_kv = HKV,
            .head_dim = HD,
            .n_ctx = s->n_ctx,
            .window = L->swa ? hp->n_swa : 0,
            .scale = hp->attn_scale,
            .kv_type = s->kv_type,
        };
        op->kv_store(st, &s->kv[l], &ad, s->k, s->v);
        op->attention(st, &s->kv[l], &ad, s->q, s->att);

        const ts_mat *wo[1] = {&L->wo};
        op->matmul(st, 1, wo, &s->xb2, s->att, n);
        if (L->attn_post_norm) op->rmsnorm(st, s->xb2, L->attn_post_norm, E, n, eps, s->xb2);
        op->add(st, s->x, s->xb2, (int64_t)n * E);
        HOOK(h, mark, s, TS_PHASE_ATTENTION);
        HOOK(h, after_attention, s, l, n); /* the pilot probe; its own cost is no phase's: */
        HOOK(h, mark, s, -1);

        /* ---- feed-forward ---- */
        op->rmsnorm(st, s->x, L->ffn_norm, E, n, eps, s->xb);
        if (L->moe) {
            ts_status rc = ts_forward_moe(s, l, n); /* marks its own phases */
            if (rc != TS_OK) return rc;
            op->add(st, s->x, s->xb2, (int64_t)n * E);
            HOOK(h, mark, s, -1);
            continue;
        }
        const ts_mat *gu[2] = {&L->ffn_gate, &L->ffn_up};
        float *gu_out[2] = {s->ffn_act, s->ffn_up};
        op->matmul(st, 2, gu, gu_out, s->xb, n);
        op->act_mul(st, fam->act, s->ffn_act, s->ffn_up, (int64_t)n * FF, s->ffn_act);
        HOOK(h, ffn_act, s, l, s->ffn_act, n, FF, is_final_chunk);

        const ts_mat *down[1] = {&L->ffn_down};
        op->matmul(st, 1, down, &s->xb2, s->ffn_act, n);
        if (L->ffn_post_norm) op->rmsnorm(st, s->xb2, L->ffn_post_norm, E, n, eps, s->xb2);
        op->add(st, s->x, s->xb2, (int64_t)n * E);
        HOOK(h, mark, s, TS_PHASE_DENSE_FFN);
    }

    /* ---- LM head: only the rows whose logits are wanted ---- */
    int rows = all_rows ? n : 1;
    const float *xr = all_rows ? s->x : s->x + (int64_t)(n - 1) * E;
    op->rmsnorm(st, xr, md->out_norm, E, rows, eps, s->xb);
    const ts_mat *head[1] = {&md->output};
    op->matmul(st, 1, head, &s->logits, s->xb, rows);
    if (hp->logit_softcap > 0) op->softcap(st, s->logits, (int64_t)rows * hp->n_vocab, hp->logit_softcap);
    HOOK(h, mark, s, TS_PHASE_LM_HEAD);
    return TS_OK;
}
