/* Sampling chain; the exact algorithm is specified in docs/SAMPLING.md and any
 * change here must change that document (and the golden test values). */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- RNG */

uint64_t sample_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ts_rng_seed(ts_rng *r, uint64_t seed) {
    uint64_t st = seed;
    for (int i = 0; i < 4; i++) r->s[i] = sample_splitmix64(&st);
    /* splitmix64 is a bijection of its counter, so four outputs cannot all be
     * zero; kept as a guard because an all-zero xoshiro state is a fixed point. */
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1;
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ts_rng_next(ts_rng *r) {
    uint64_t *s = r->s;
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double sample_rng_uniform(ts_rng *r) {
    return (double)(ts_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---------------------------------------------------------------- sampler */

typedef struct cand {
    float logit; /* after sanitising and the repetition penalty */
    int32_t id;
} cand;

struct sampler {
    sampler_params p;
    int32_t n_vocab;
    ts_rng rng;
    cand *cands;     /* (n_vocab) candidate scratch */
    cand *cands2;    /* (n_vocab) the top-k survivors in id order */
    double *w;       /* (n_vocab) exp weights of the sorted candidates */
    uint32_t *mark;  /* (n_vocab) stamp: token already penalised this call */
    uint32_t stamp;
    int32_t *recent; /* (repeat_last_n) ring of accepted ids */
    int32_t n_recent, recent_pos;
};

void sampler_params_default(sampler_params *p) {
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
}

ts_status sampler_new(const sampler_params *p, int32_t n_vocab, sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return ts_fail(TS_ERR_ARG, "sampler: vocabulary size %d must be positive", (int)n_vocab);
    if (!isfinite(p->temperature)) return ts_fail(TS_ERR_ARG, "sampler: temperature must be a finite number");
    if (!(p->top_p > 0.0f) || isnan(p->top_p))
        return ts_fail(TS_ERR_ARG, "sampler: top-p %g must be > 0 (1 turns it off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return ts_fail(TS_ERR_ARG, "sampler: min-p %g must be in [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return ts_fail(TS_ERR_ARG, "sampler: repeat penalty %g must be a finite number > 0", (double)p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > (1 << 20))
        return ts_fail(TS_ERR_ARG, "sampler: repeat-last-n %d must be in [0, 1048576]", (int)p->repeat_last_n);

    sampler *s = ts_calloc(1, sizeof *s);
    if (!s) return TS_ERR_NOMEM;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cands = ts_malloc((size_t)n_vocab * sizeof *s->cands);
    s->cands2 = ts_malloc((size_t)n_vocab * sizeof *s->cands2);
    s->w = ts_malloc((size_t)n_vocab * sizeof *s->w);
    s->mark = ts_calloc((size_t)n_vocab, sizeof *s->mark);
    if (p->repeat_last_n > 0) s->recent = ts_malloc((size_t)p->repeat_last_n * sizeof *s->recent);
    if (!s->cands || !s->cands2 || !s->w || !s->mark || (p->repeat_last_n > 0 && !s->recent)) {
        sampler_free(s);
        return TS_ERR_NOMEM;
    }
    sampler_reset(s);
    *out = s;
    return TS_OK;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->cands2);
    free(s->w);
    free(s->mark);
    free(s->recent);
    free(s);
}

void sampler_reset(sampler *s) {
    s->n_recent = 0;
    s->recent_pos = 0;
    /* -1 marks the slots not filled yet: the ring as a device sampler reads it */
    for (int32_t i = 0; i < s->p.repeat_last_n; i++) s->recent[i] = -1;
    ts_rng_seed(&s->rng, s->p.seed);
}

const sampler_params *sampler_get_params(const sampler *s) { return &s->p; }
ts_rng *sampler_rng(sampler *s) { return &s->rng; }

const int32_t *sampler_recent(const sampler *s, int32_t *cap) {
    *cap = s->p.repeat_last_n;
    return s->p.repeat_last_n > 0 ? s->recent : NULL;
}

void sampler_accept(sampler *s, int32_t id) {
    /* An id outside the vocab cannot be penalised; dropping it is harmless. */
    if (id < 0 || id >= s->n_vocab || s->p.repeat_last_n <= 0) return;
    s->recent[s->recent_pos] = id;
    s->recent_pos = (s->recent_pos + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* Each distinct recent id is penalised once, however often it occurs
 * (llama.cpp's penalty_repeat). */
static void apply_repeat_penalty(sampler *s, float *logits) {
    const float pen = s->p.repeat_penalty;
    if (pen == 1.0f || s->n_recent == 0) return;
    if (++s->stamp == 0) {
        memset(s->mark, 0, (size_t)s->n_vocab * sizeof *s->mark);
        s->stamp = 1;
    }
    for (int32_t i = 0; i < s->n_recent; i++) {
        const int32_t id = s->recent[i];
        if (s->mark[id] == s->stamp) continue;
        s->mark[id] = s->stamp;
        logits[id] = logits[id] > 0.0f ? logits[id] / pen : logits[id] * pen;
    }
}

/* The total order every step uses: higher logit first, then lower id. */
static inline bool cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

static int cand_cmp_id(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* Min-heap by the order (the worst kept candidate at the root). */
static void heap_sift_down(cand *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_before(&h[w], &h[l])) w = l;
        if (r < n && cand_before(&h[w], &h[r])) w = r;
        if (w == i) return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Keeps the k first candidates of c[0..n) by the order in c[0..k), sorted. */
static void select_top_k(cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (cand_before(&c[i], &c[0])) {
            c[0] = c[i];
            heap_sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

int32_t sampler_sample(sampler *s, float *logits) {
    const int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (isnan(logits[i])) logits[i] = -INFINITY;
    apply_repeat_penalty(s, logits);

    if (s->p.temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        if (logits[best] == -INFINITY) {
            ts_fail(TS_ERR_ARG, "sampler: every logit is -inf or NaN");
            return -1;
        }
        return best;
    }

    /* Candidates: finite logits; if any is +inf, only the +inf ones, equally likely. */
    float maxv = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > maxv) maxv = logits[i];
    if (maxv == -INFINITY) {
        ts_fail(TS_ERR_ARG, "sampler: every logit is -inf or NaN");
        return -1;
    }
    cand *c = s->cands;
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++) {
        if (maxv == INFINITY) {
            if (logits[i] == INFINITY) c[nc++] = (cand){0.0f, i};
        } else if (logits[i] > -INFINITY) {
            c[nc++] = (cand){logits[i], i};
        }
    }

    /* m: the largest candidate logit; e_j = exp(l_j - m) is p_j / p_max. */
    const double m = maxv == INFINITY ? 0.0 : (double)maxv;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < nc) {
        select_top_k(c, nc, s->p.top_k);
        nc = s->p.top_k;
        sorted = true;
    }

    /* Z for top-p, summed in ascending id order (an order that needs no sort
     * of the whole vocab). Unsorted candidates are in id order already. */
    double z = 0.0;
    const bool top_p_on = s->p.top_p < 1.0f;
    if (top_p_on) {
        if (sorted) {
            cand *byid = s->cands2;
            memcpy(byid, c, (size_t)nc * sizeof *c);
            qsort(byid, (size_t)nc, sizeof *byid, cand_cmp_id);
            for (int32_t j = 0; j < nc; j++) z += exp((double)byid[j].logit - m);
        } else {
            for (int32_t j = 0; j < nc; j++) z += exp((double)c[j].logit - m);
        }
    }

    /* The walks below need only a sorted prefix. The candidates with
     * e_j >= cut are exactly a prefix of the sorted order, so sorting just
     * them gives the same result as sorting everything whenever the top-p walk
     * ends inside them, or when cut is min-p itself (nothing past them survives
     * min-p). Otherwise sort everything. */
    int32_t nsorted = nc;
    if (!sorted) {
        const double minp = (double)s->p.min_p;
        const double cut = top_p_on ? (minp > 1e-4 ? minp : 1e-4) : minp;
        nsorted = nc;
        if (cut > 0.0) {
            int32_t np = 0;
            for (int32_t j = 0; j < nc; j++) {
                if (exp((double)c[j].logit - m) >= cut) {
                    cand tmp = c[np];
                    c[np++] = c[j];
                    c[j] = tmp;
                }
            }
            qsort(c, (size_t)np, sizeof *c, cand_cmp);
            nsorted = np;
            if (top_p_on && cut != minp) {
                /* Does the top-p walk end inside the prefix? */
                const double target = (double)s->p.top_p * z;
                double cum = 0.0;
                bool inside = false;
                for (int32_t j = 0; j < np && !inside; j++) inside = (cum += exp((double)c[j].logit - m)) >= target;
                if (!inside) {
                    qsort(c, (size_t)nc, sizeof *c, cand_cmp);
                    nsorted = nc;
                }
            }
        } else {
            qsort(c, (size_t)nc, sizeof *c, cand_cmp);
        }
    }

    double *w = s->w;
    int32_t keep = nsorted;
    if (top_p_on) {
        const double target = (double)s->p.top_p * z;
        double cum = 0.0;
        for (int32_t j = 0; j < nsorted; j++) {
            cum += exp((double)c[j].logit - m);
            if (cum >= target) {
                keep = j + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0.0f) {
        /* p_j / p_max = e_j; the first candidate always stays. */
        int32_t j = 1;
        while (j < keep && exp((double)c[j].logit - m) >= (double)s->p.min_p) j++;
        keep = j;
    }

    const double t = (double)s->p.temperature;
    double wsum = 0.0;
    for (int32_t j = 0; j < keep; j++) wsum += w[j] = exp(((double)c[j].logit - m) / t);
    const double target = sample_rng_uniform(&s->rng) * wsum;
    double acc = 0.0;
    for (int32_t j = 0; j < keep; j++) {
        acc += w[j];
        if (target < acc) return c[j].id;
    }
    return c[keep - 1].id;
}
