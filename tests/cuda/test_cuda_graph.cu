/* The launchers are graph-safe: one small decode step (embedding of the id in
 * device memory, RMSNorm folded into the fused Q/K/V matvec, RoPE + KV store
 * at the position in device memory, split-K attention over the whole cache,
 * O projection with the residual add, the int8 gate/up path, act_mul, down
 * projection, final norm, LM head, greedy argmax writing the next id back
 * into the id buffer) is captured in a CUDA graph once and replayed for 6
 * tokens, the position updated in device memory between replays; the same
 * steps run eagerly must give the same ids and bit-identical logits. (Each
 * kernel's numerics are the other tests' business; this checks that nothing
 * in a launch depends on host state at capture time.) GPU only: the CPU
 * emulation has no graphs. */
#include "cuda_test_util.h"

#define E 256
#define H 4
#define HKV 2
#define HD 64
#define FF 512
#define V 1000
#define CTX 64
#define STEPS 6

struct Model {
    ts_cuda_mat wq, wk, wv, wo, wg, wu, wd, out, emb;
    float *attn_norm, *ffn_norm, *out_norm, *freq;
};

struct State {
    float *x, *q, *k, *v, *att, *g, *u, *logits, *inv;
    int32_t *ids, *pos;
    uint16_t *kc, *vc;
    void *q8, *attn_scratch, *am_scratch;
    size_t attn_bytes;
    unsigned *err;
};

static ts_cuda_mat mk(uint32_t type, int64_t n_in, int64_t n_out) {
    const uint64_t rb = ts_type_row_bytes(type, (uint64_t)n_in);
    uint8_t *h = (uint8_t *)malloc(rb * n_out);
    tcu_fill_weights(type, h, n_out, n_in);
    void *d = tcu_dalloc(rb * n_out);
    tcu_up(d, h, rb * n_out);
    free(h);
    return ts_cuda_mat{d, type, n_in, n_out, rb, NULL};
}

static float *vec(int64_t n, float base, float spread) {
    float *h = (float *)malloc(4 * n);
    for (int64_t i = 0; i < n; i++) h[i] = base + spread * tcu_normal();
    float *d = (float *)tcu_dalloc(4 * n);
    tcu_up(d, h, 4 * n);
    free(h);
    return d;
}

/* One decode step on stream s; every status is checked (a failure inside a
 * capture is a failure of the test). */
static bool step(cudaStream_t s, const Model &m, State &st) {
    void *S = (void *)s;
    bool ok = true;
#define R(call) ok &= (call) == TS_OK
    R(ts_cuda_embed(S, &m.emb, st.ids, 1, 16.0f, st.x, st.err));
    R(ts_cuda_rms_inv(S, st.x, E, 1, 1e-6f, st.inv));
    {
        ts_cuda_mat w[3] = {m.wq, m.wk, m.wv};
        float *y[3] = {st.q, st.k, st.v};
        R(ts_cuda_matvec(S, 3, w, y, st.x, 1, st.inv, m.attn_norm, false));
    }
    ts_cuda_rope_kv r;
    memset(&r, 0, sizeof r);
    r.q = st.q, r.k = st.k, r.v = st.v, r.pos = st.pos, r.freq = m.freq, r.k_cache = st.kc, r.v_cache = st.vc;
    r.err = st.err, r.n_tok = 1, r.n_head = H, r.n_head_kv = HKV, r.head_dim = HD, r.n_rot = HD, r.n_ctx = CTX;
    r.mode = TS_CUDA_ROPE_NEOX, r.mscale = 1.0f, r.eps = 1e-6f;
    R(ts_cuda_rope_kv_store(S, &r));
    ts_cuda_attn a = {st.q, st.kc, st.vc, st.pos, st.att, st.err, 1, H, HKV, HD, CTX, 0, 0.125f};
    R(ts_cuda_attention(S, &a, st.attn_scratch, st.attn_bytes));
    {
        float *y[1] = {st.x};
        R(ts_cuda_matvec(S, 1, &m.wo, y, st.att, 1, NULL, NULL, true));
    }
    R(ts_cuda_quantize_q8(S, TS_TYPE_Q8_K, st.x, E, 1, m.ffn_norm, 1e-6f, st.q8));
    {
        ts_cuda_mat w[2] = {m.wg, m.wu};
        float *y[2] = {st.g, st.u};
        R(ts_cuda_matvec_q8(S, 2, w, y, TS_TYPE_Q8_K, st.q8, 1, false));
    }
    R(ts_cuda_act_mul(S, TS_CUDA_ACT_SILU, st.g, st.u, FF, st.g));
    {
        float *y[1] = {st.x};
        R(ts_cuda_matvec(S, 1, &m.wd, y, st.g, 1, NULL, NULL, true));
    }
    R(ts_cuda_rms_inv(S, st.x, E, 1, 1e-6f, st.inv));
    {
        float *y[1] = {st.logits};
        R(ts_cuda_matvec(S, 1, &m.out, y, st.x, 1, st.inv, m.out_norm, false));
    }
    R(ts_cuda_argmax(S, st.logits, V, st.ids, st.am_scratch, st.err));
#undef R
    if (!ok) fprintf(stderr, "step: %s\n", ts_last_error());
    return ok;
}

static void reset(State &st, int32_t first_id) {
    TCU(cudaMemset(st.kc, 0, 2 * (size_t)HKV * CTX * HD));
    TCU(cudaMemset(st.vc, 0, 2 * (size_t)HKV * CTX * HD));
    TCU(cudaMemset(st.err, 0, 4));
    tcu_up(st.ids, &first_id, 4);
}

int main(void) {
    tcu_seed_init("test_cuda_graph");
    tcu_require_gpu("test_cuda_graph");
    Model m;
    m.wq = mk(TS_TYPE_Q4_K, E, H * HD), m.wk = mk(TS_TYPE_Q4_K, E, HKV * HD), m.wv = mk(TS_TYPE_Q6_K, E, HKV * HD);
    m.wo = mk(TS_TYPE_Q4_0, H * HD, E), m.wg = mk(TS_TYPE_Q4_K, E, FF), m.wu = mk(TS_TYPE_Q5_K, E, FF);
    m.wd = mk(TS_TYPE_Q8_0, FF, E), m.out = mk(TS_TYPE_Q6_K, E, V), m.emb = mk(TS_TYPE_Q8_0, E, V);
    m.attn_norm = vec(E, 1.0f, 0.2f), m.ffn_norm = vec(E, 1.0f, 0.2f), m.out_norm = vec(E, 1.0f, 0.2f);
    float fr[HD / 2];
    for (int i = 0; i < HD / 2; i++) fr[i] = powf(10000.0f, -2.0f * i / HD);
    m.freq = (float *)tcu_dalloc(sizeof fr);
    tcu_up(m.freq, fr, sizeof fr);

    State st;
    st.x = (float *)tcu_dalloc(4 * E), st.q = (float *)tcu_dalloc(4 * H * HD), st.k = (float *)tcu_dalloc(4 * HKV * HD);
    st.v = (float *)tcu_dalloc(4 * HKV * HD), st.att = (float *)tcu_dalloc(4 * H * HD), st.g = (float *)tcu_dalloc(4 * FF);
    st.u = (float *)tcu_dalloc(4 * FF), st.logits = (float *)tcu_dalloc(4 * V), st.inv = (float *)tcu_dalloc(4);
    st.ids = (int32_t *)tcu_dalloc(4), st.pos = (int32_t *)tcu_dalloc(4), st.err = (unsigned *)tcu_dalloc(4);
    st.kc = (uint16_t *)tcu_dalloc(2 * (size_t)HKV * CTX * HD), st.vc = (uint16_t *)tcu_dalloc(2 * (size_t)HKV * CTX * HD);
    st.q8 = tcu_dalloc(ts_cuda_q8_bytes(TS_TYPE_Q8_K, E, 1));
    ts_cuda_attn a0 = {st.q, st.kc, st.vc, st.pos, st.att, NULL, 1, H, HKV, HD, CTX, 0, 0.125f};
    st.attn_bytes = ts_cuda_attn_scratch_bytes(&a0);
    st.attn_scratch = st.attn_bytes ? tcu_dalloc(st.attn_bytes) : NULL;
    const size_t ab = ts_cuda_argmax_scratch_bytes(V);
    st.am_scratch = tcu_dalloc(ab);
    TCU(cudaMemset(st.am_scratch, 0, ab));
    printf("attention scratch %zu bytes (splits over %d positions)\n", st.attn_bytes, CTX);

    cudaStream_t s;
    TCU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int32_t ids_e[STEPS], ids_g[STEPS];
    float *lg_e = (float *)malloc(4 * V * STEPS), *lg_g = (float *)malloc(4 * V * STEPS);

    /* eager */
    reset(st, 7);
    for (int t = 0; t < STEPS; t++) {
        tcu_up(st.pos, &t, 4);
        CHECKF(step(s, m, st), "eager step %d", t);
        TCU(cudaStreamSynchronize(s));
        tcu_down(&ids_e[t], st.ids, 4);
        tcu_down(lg_e + t * V, st.logits, 4 * V);
    }
    /* captured once, replayed */
    reset(st, 7);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TCU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const bool cap_ok = step(s, m, st);
    TCU(cudaStreamEndCapture(s, &graph));
    CHECKF(cap_ok, "a launcher failed during capture");
    TCU(cudaGraphInstantiate(&exec, graph, 0));
    for (int t = 0; t < STEPS; t++) {
        tcu_up(st.pos, &t, 4);
        TCU(cudaGraphLaunch(exec, s));
        TCU(cudaStreamSynchronize(s));
        tcu_down(&ids_g[t], st.ids, 4);
        tcu_down(lg_g + t * V, st.logits, 4 * V);
    }
    unsigned err = 0;
    tcu_down(&err, st.err, 4);
    int diff_ids = 0, diff_lg = 0;
    for (int t = 0; t < STEPS; t++) {
        diff_ids += ids_e[t] != ids_g[t];
        diff_lg += memcmp(lg_e + t * V, lg_g + t * V, 4 * V) != 0;
    }
    printf("ids eager:");
    for (int t = 0; t < STEPS; t++) printf(" %d", ids_e[t]);
    printf("\nids graph:");
    for (int t = 0; t < STEPS; t++) printf(" %d", ids_g[t]);
    printf("\n%-60s %d ids, %d logit rows differ, err %u %s\n", "graph replay vs eager (6 steps)", diff_ids, diff_lg, err,
           diff_ids || diff_lg || err ? "FAIL" : "ok");
    CHECKF(diff_ids == 0 && diff_lg == 0 && err == 0, "graph replay differs from eager launches");
    size_t unwritten = tcu_unwritten(lg_g, (size_t)V * STEPS, 4);
    CHECK(unwritten == 0);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    free(lg_e), free(lg_g);
    return tu_finish();
}
