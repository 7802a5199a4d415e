"""Load on a running turbospark serve (loopback only): N streamed chat
requests from C concurrent clients (asyncio, stdlib only), recording
failures, time to first token, inter-token latency, throughput, the
server's RSS at request 100 and at the end, and /metrics busy sessions at
the end. --disconnect F makes that share of the clients hang up mid-stream
at random (the fault run): those are not failures; every other request must
succeed. docs/SERVER.md records the results.

  python3 bench/serve_load.py --port P --pid SERVER_PID [--n 1000] [--concurrency 8] [--max-tokens 32] [--disconnect 0.1]
"""
import argparse, asyncio, json, random, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--pid", type=int, required=True, help="the server's pid, for its RSS")
ap.add_argument("--n", type=int, default=1000)
ap.add_argument("--concurrency", type=int, default=8)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--disconnect", type=float, default=0.0)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
if a.host not in ("127.0.0.1", "localhost", "::1"):
    sys.exit("loopback only")
rng = random.Random(a.seed)


def rss_kib():
    for line in open(f"/proc/{a.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def one(i, hang_after):
    """Returns (status, ttft, [inter-token gaps], n_content_events, hung_up)."""
    body = json.dumps({"messages": [{"role": "user", "content": f"Tell me something about the number {i}."}],
                       "max_tokens": a.max_tokens, "temperature": 0.7, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    t0 = time.perf_counter()
    r, w = await asyncio.open_connection(a.host, a.port)
    w.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await w.drain()
    status = int((await r.readline()).split()[1])
    while (await r.readline()) not in (b"\r\n", b""):
        pass
    ttft, last, gaps, n, done, buf = None, None, [], 0, False, b""
    try:
        while True:
            size = int((await r.readline()).strip() or b"0", 16)
            if size == 0:
                break
            chunk = await r.readexactly(size + 2)
            now = time.perf_counter()
            buf += chunk[:-2]
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if not ev.startswith(b"data: "):
                    continue
                d = ev[6:]
                if d == b"[DONE]":
                    done = True
                    continue
                j = json.loads(d)
                if "error" in j:
                    return (500, ttft, gaps, n, False)
                if j["choices"] and j["choices"][0]["delta"].get("content"):
                    n += 1
                    if ttft is None:
                        ttft = now - t0
                    else:
                        gaps.append(now - last)
                    last = now
                    if hang_after is not None and n >= hang_after:
                        w.transport.abort()
                        return (status, ttft, gaps, n, True)
    finally:
        w.close()
    return (status if done else 599, ttft, gaps, n, False)


async def main():
    results, rss = [], {}
    q = asyncio.Queue()
    for i in range(a.n):
        q.put_nowait(i)
    t_start = time.perf_counter()

    async def client():
        while not q.empty():
            i = q.get_nowait()
            hang = rng.randint(1, max(1, a.max_tokens // 2)) if rng.random() < a.disconnect else None
            try:
                res = await one(i, hang)
            except Exception as e:  # a failed request, counted
                res = (0, None, [], 0, False)
                print("request", i, "failed:", repr(e), file=sys.stderr)
            results.append(res)
            k = len(results)
            if k % 100 == 0:
                rss[k] = rss_kib()

    await asyncio.gather(*[client() for _ in range(a.concurrency)])
    wall = time.perf_counter() - t_start
    await asyncio.sleep(0.5)
    r, w = await asyncio.open_connection(a.host, a.port)
    w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await w.drain()
    metrics = (await r.read()).decode()
    w.close()
    busy = [l.split()[1] for l in metrics.splitlines() if l.startswith("turbospark_sessions_busy ")]

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")

    hung = [x for x in results if x[4]]
    full = [x for x in results if not x[4]]
    failed = [x for x in full if x[0] != 200]
    ttft = [x[1] for x in full if x[1] is not None]
    gaps = [g for x in full for g in x[2]]
    tokens = sum(x[3] for x in results)
    per_stream = [(x[3] - 1) / sum(x[2]) for x in full if x[2] and sum(x[2]) > 0]
    out = {"requests": a.n, "concurrency": a.concurrency, "max_tokens": a.max_tokens, "hung_up": len(hung),
           "failed": len(failed), "wall_s": round(wall, 2), "content_events": tokens,
           "throughput_events_per_s": round(tokens / wall, 1),
           "ttft_p50_ms": round(pct(ttft, 50) * 1e3, 1), "ttft_p99_ms": round(pct(ttft, 99) * 1e3, 1),
           "itl_p50_ms": round(pct(gaps, 50) * 1e3, 1), "itl_p99_ms": round(pct(gaps, 99) * 1e3, 1),
           "per_stream_tok_s_p50": round(pct(per_stream, 50), 1),
           "rss_kib": rss, "busy_at_end": busy[0] if busy else None}
    if 100 in rss and rss:
        last = rss[max(rss)]
        out["rss_growth_100_to_end_pct"] = round(100 * (last - rss[100]) / rss[100], 2)
    print(json.dumps(out, indent=1))
    ok = not failed and out["busy_at_end"] == "0" and abs(out.get("rss_growth_100_to_end_pct", 0)) <= 5
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


asyncio.run(main())
