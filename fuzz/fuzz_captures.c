/* libFuzzer harness for the capture readers of `turbospark analyze`: router
 * captures (TURBOSPARK_ROUTER_HIST) and FFN census captures
 * (TURBOSPARK_FFN_HIST). The readers take a path, so each input is written to
 * one temporary file (made once per process under $TMPDIR or /tmp, removed at
 * exit) and both readers load it. Whatever loads must survive every analyzer
 * the command runs on it: concentration, top sets, cache replay under each
 * policy (with the capture's pilot predictions when present), windows, the
 * FFN layer analysis, and merging a capture with itself.
 * Seeds: the JSON captures in tests/fixtures/captures. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/ffn_capture.h"
#include "analyze/router_capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[512];
static int g_fd = -1;

static void cleanup(void) {
    if (g_fd >= 0) close(g_fd);
    if (g_path[0]) unlink(g_path);
}

static bool write_input(const uint8_t *data, size_t size) {
    if (g_fd < 0) {
        const char *t = getenv("TMPDIR");
        snprintf(g_path, sizeof g_path, "%s/fuzz_captures_XXXXXX", t && *t ? t : "/tmp");
        g_fd = mkstemp(g_path);
        if (g_fd < 0) {
            perror("fuzz_captures: mkstemp");
            abort();
        }
        atexit(cleanup);
    }
    if (ftruncate(g_fd, 0) != 0) abort();
    size_t at = 0;
    while (at < size) {
        ssize_t w = pwrite(g_fd, data + at, size - at, (off_t)at);
        if (w <= 0) abort();
        at += (size_t)w;
    }
    return true;
}

static void router(const char *path, uint8_t knob) {
    router_capture c;
    if (router_capture_load(path, 0, &c) != TS_OK) return;
    if (c.num_layers <= 0 || c.num_experts <= 0 || c.top_k <= 0) abort(); /* loaded means consistent */
    bool *set = calloc((size_t)c.num_experts, sizeof *set);
    for (int32_t l = 0; l < c.num_layers; l++) {
        (void)router_capture_passes(&c, l);
        if (!router_capture_layer_routes(&c, l)) continue;
        const uint64_t *counts = c.counts + (size_t)l * (size_t)c.num_experts;
        router_capture_layer_stats s;
        router_capture_concentration(counts, c.num_experts, &s);
        if (s.n95 < 0 || s.n95 > c.num_experts || s.n99 < s.n95 || s.n99 > c.num_experts) abort();
        if (set) router_layer_top_set(counts, c.num_experts, 0.95, set);
        if (!c.has_trace) continue;
        int32_t slots = 1 + knob % (c.num_experts + 1);
        for (int p = 0; p < 3; p++) {
            replay_result r;
            if (router_replay_layer(&c, l, slots, (replay_policy)p, knob % 7, 0, &r) == TS_OK && r.hits + r.misses != r.requests)
                abort();
        }
        if (c.has_pred) {
            replay_result r;
            (void)router_replay_layer(&c, l, slots, REPLAY_LFU, 0, 1 + knob % (c.pred_k ? c.pred_k : 1), &r);
        }
        double d;
        (void)router_window_layer(&c, l, 1 + knob % 4, knob % 3, &d);
    }
    free(set);
    router_capture_free(&c);
}

static void ffn(const char *path) {
    ffn_capture a, b;
    if (ffn_capture_load(path, 0, &a) != TS_OK) return;
    for (int32_t l = 0; l < a.num_layers; l++) {
        if (!a.tapped[l]) continue;
        ffn_layer_stats s;
        ffn_layer_analyze(&a, l, &s);
        (void)ffn_mass_below_pow2(&a, l, -7);
    }
    if (ffn_capture_load(path, 0, &b) == TS_OK) {
        (void)ffn_capture_merge(&a, &b, "self");
        ffn_capture_free(&b);
    }
    ffn_capture_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!write_input(data, size)) return 0;
    uint8_t knob = size ? data[size / 2] : 0;
    router(g_path, knob);
    ffn(g_path);
    return 0;
}
