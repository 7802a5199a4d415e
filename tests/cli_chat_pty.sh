#!/usr/bin/env bash
# turbospark chat through a real pseudo-terminal: prompt, two turns that keep
# the conversation (the second turn re-uses the KV cache prefix), /exit.
cli=$1; fix=$2; src=$3
# A real chat model (BPE + ChatML special tokens), fetched by scripts/fetch_models.sh --ci.
# Missing, it fails: only TS_ALLOW_MISSING_MODELS=1 makes it a skip, named in the summary.
if ! model=$("$src/scripts/fetch_models.sh" --path smollm2 2>/dev/null); then
  if [ "${TS_ALLOW_MISSING_MODELS:-}" = 1 ]; then
    echo "SKIPPED (TS_ALLOW_MISSING_MODELS=1): model smollm2 is not in the cache"
    echo "0 passed, 0 failed, 1 skipped (TS_ALLOW_MISSING_MODELS=1: smollm2)"; exit 0
  fi
  echo "FAIL: model smollm2 is not in the cache: run scripts/fetch_models.sh --ci, or set TS_ALLOW_MISSING_MODELS=1 to skip it explicitly" >&2
  echo "0 passed, 1 failed"; exit 1
fi
python3 - "$cli" "$model" <<'PY'
import os, pty, select, sys, time

cli, model = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(cli, [cli, "chat", "-m", model, "--max-new", "6", "--temperature", "0"])

buf = b""
def read_until(pred, timeout=60):
    global buf
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return pred(buf)
            if not chunk:
                return pred(buf)
            buf += chunk
            if pred(buf):
                return True
    return False

passed = failed = 0
def check(cond, what):
    global passed, failed
    if cond: passed += 1
    else:
        failed += 1
        print("FAIL:", what, repr(buf[-400:]), file=sys.stderr)

check(read_until(lambda b: b.count(b"> ") >= 1), "first prompt")
os.write(fd, b"hello\n")
check(read_until(lambda b: b.count(b"[stop=") >= 1 and b.rstrip().endswith(b">")), "first reply + footer + prompt")
os.write(fd, b"and again\n")
check(read_until(lambda b: b.count(b"[stop=") >= 2 and b.rstrip().endswith(b">")), "second reply")
# the second turn only evaluates the new tokens: its prefill is shorter than the whole conversation
import re
pre = [int(x) for x in re.findall(rb"prefill=(\d+)tok", buf)]
# without re-use the second prefill would be the whole conversation (> the first one)
check(len(pre) == 2 and 0 < pre[1] < pre[0], "second turn re-uses the cached prefix: prefill %s" % pre)
os.write(fd, b"/exit\n")
_, status = os.waitpid(pid, 0)
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "exit status %r" % status)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
