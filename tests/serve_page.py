"""Drives the chat page of a running turbospark serve in headless Chromium
over the DevTools protocol (--remote-debugging-pipe, stdlib only): types a
question into the box, presses Enter, waits for the streamed answer and its
stats line, and takes a screenshot. argv: CHROMIUM URL PNG. Exit 0 when the
answer arrived; prints what it saw. TS_TIME_SCALE=N (cli_serve.sh sets it for
sanitizer builds) multiplies every wait."""
import base64, json, os, subprocess, sys, tempfile, time

chrome, url, png = sys.argv[1], sys.argv[2], sys.argv[3]
scale = int(os.environ.get("TS_TIME_SCALE", "1"))
r_in, w_in = os.pipe()    # we write commands -> chromium reads fd 3
r_out, w_out = os.pipe()  # chromium writes fd 4 -> we read
prof = tempfile.mkdtemp()
# chromium talks on fds 3 (in) and 4 (out): move our ends there in the child
# (through fresh numbers first, so neither overwrites the other)
def child_fds():
    a, b = os.dup(r_in), os.dup(w_out)
    os.dup2(a, 3)
    os.dup2(b, 4)


p = subprocess.Popen([chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
                      "--user-data-dir=" + prof, "--window-size=1000,800", "about:blank"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(png + ".chrome.txt", "w"),
                     preexec_fn=child_fds, close_fds=False)
os.close(r_in); os.close(w_out)
buf, next_id, events = b"", 0, []


def send(method, params=None, session=None):
    global next_id
    next_id += 1
    m = {"id": next_id, "method": method, "params": params or {}}
    if session: m["sessionId"] = session
    os.write(w_in, json.dumps(m).encode() + b"\0")
    return wait_id(next_id)


def wait_id(i, timeout=60):
    global buf
    end = time.time() + timeout * scale
    while time.time() < end:
        while b"\0" in buf:
            raw, buf = buf.split(b"\0", 1)
            m = json.loads(raw)
            if m.get("id") == i:
                if "error" in m: raise RuntimeError(m["error"])
                return m.get("result", {})
            events.append(m)
        chunk = os.read(r_out, 1 << 20)
        if not chunk: raise RuntimeError("chromium closed the pipe")
        buf += chunk
    raise RuntimeError("no answer from chromium")


try:
    tid = send("Target.createTarget", {"url": url})["targetId"]
    sid = send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
    ev = lambda js: send("Runtime.evaluate", {"expression": js, "returnByValue": True}, sid)["result"].get("value")
    end = time.time() + 30 * scale
    while time.time() < end and not ev("document.readyState == 'complete' && document.getElementById('model').textContent.length > 1"):
        time.sleep(0.1)
    ev("document.getElementById('max').value = '48'")  # short replies: the waits stay short under sanitizers
    ev("document.getElementById('input').focus()")
    send("Input.insertText", {"text": "What is the capital of France?"}, sid)
    for t in ("keyDown", "keyUp"):
        send("Input.dispatchKeyEvent", {"type": t, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r" if t == "keyDown" else ""}, sid)
    seen_partial, end = False, time.time() + 60 * scale
    while time.time() < end:
        st = ev("JSON.stringify([...document.querySelectorAll('.msg')].map(d => [d.className, d.textContent]))")
        msgs = json.loads(st)
        if len(msgs) >= 2 and msgs[1][1] and "tok/s" not in msgs[1][1]: seen_partial = True
        if len(msgs) >= 2 and "tok/s" in msgs[1][1]: break
        time.sleep(0.05)
    # a second turn: the page keeps the conversation, and the server re-uses its prefix
    ev("document.getElementById('input').focus()")
    send("Input.insertText", {"text": "And of Italy?"}, sid)
    for t in ("keyDown", "keyUp"):
        send("Input.dispatchKeyEvent", {"type": t, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r" if t == "keyDown" else ""}, sid)
    end = time.time() + 60 * scale
    while time.time() < end:
        msgs2 = json.loads(ev("JSON.stringify([...document.querySelectorAll('.msg')].map(d => [d.className, d.textContent]))"))
        if len(msgs2) >= 4 and "tok/s" in msgs2[3][1]: break
        time.sleep(0.05)
    shot = send("Page.captureScreenshot", {"format": "png"}, sid)["data"]
    open(png, "wb").write(base64.b64decode(shot))
    print("messages:", msgs)
    ok = (len(msgs) == 2 and msgs[0] == ["msg user", "What is the capital of France?"] and msgs[1][0] == "msg assistant"
          and "tok/s" in msgs[1][1] and "cache hit" in msgs[1][1] and len(msgs[1][1].split("tokens,")[0]) > 0)
    print("streamed (seen before the end):", seen_partial)
    print("second turn:", msgs2[2:])
    ok = ok and seen_partial and len(msgs2) == 4 and msgs2[2][1] == "And of Italy?" and "tok/s" in msgs2[3][1]
    ok = ok and "cache hit 0%" not in msgs2[3][1]
    sys.exit(0 if ok else 1)
finally:
    p.kill()
    p.wait()
