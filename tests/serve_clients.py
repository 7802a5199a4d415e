"""The official openai and anthropic clients against a running turbospark
serve (tests/cli_serve.sh runs this). argv: BASE_URL MODEL_ID. Prints one
"ok NAME" / "FAIL NAME: why" line per check; exits 1 on any failure."""
import sys

base, model = sys.argv[1], sys.argv[2]
fails = 0


def check(name, cond, why=""):
    global fails
    if cond:
        print("ok", name)
    else:
        fails += 1
        print("FAIL", name + ":", why)


import anthropic
import openai

oc = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
r = oc.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=6, seed=3, temperature=0.7)
check("openai chat", r.choices[0].message.role == "assistant" and r.usage.completion_tokens >= 1
      and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, repr(r))
r2 = oc.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=6, seed=3, temperature=0.7)
check("openai seeded determinism", r.choices[0].message.content == r2.choices[0].message.content)
parts, usage = [], None
for ch in oc.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=6, seed=3,
                                     temperature=0.7, stream=True, stream_options={"include_usage": True}):
    if ch.usage:
        usage = ch.usage
    for c in ch.choices:
        if c.delta.content:
            parts.append(c.delta.content)
check("openai chat stream = non-stream", "".join(parts) == r.choices[0].message.content, repr(parts))
check("openai stream usage", usage is not None and usage.completion_tokens == r.usage.completion_tokens, repr(usage))
c = oc.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0)
check("openai completions", c.choices[0].finish_reason in ("length", "stop") and c.usage.completion_tokens >= 1, repr(c))
s = "".join(x.choices[0].text for x in oc.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0,
                                                            stream=True) if x.choices)
check("openai completions stream", s == c.choices[0].text, repr(s))
lp = oc.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3, logprobs=True, top_logprobs=2)
check("openai logprobs", lp.choices[0].logprobs is not None and len(lp.choices[0].logprobs.content) >= 1
      and len(lp.choices[0].logprobs.content[0].top_logprobs) == 2, repr(lp.choices[0].logprobs))
check("openai models", [m.id for m in oc.models.list()] == [model])
try:
    oc.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    check("openai unknown model", False, "no error")
except openai.NotFoundError as e:
    check("openai unknown model", e.status_code == 404)
try:
    oc.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                               tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    check("openai tools refused", False, "no error")
except openai.BadRequestError as e:
    check("openai tools refused", "tools" in str(e), str(e))

ac = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
m = ac.messages.create(model=model, max_tokens=6, system="You are terse.", messages=[{"role": "user", "content": "Say hi"}])
check("anthropic messages", m.role == "assistant" and m.content[0].type == "text" and m.usage.output_tokens >= 1
      and m.stop_reason in ("end_turn", "max_tokens", "stop_sequence"), repr(m))
with ac.messages.stream(model=model, max_tokens=6, system=[{"type": "text", "text": "You are terse."}],
                        messages=[{"role": "user", "content": "Say hi"}]) as st:
    text = "".join(st.text_stream)
    fin = st.get_final_message()
check("anthropic stream", fin.usage.output_tokens >= 1 and text == fin.content[0].text, repr(fin))
n = ac.messages.count_tokens(model=model, system="You are terse.", messages=[{"role": "user", "content": "Say hi"}])
check("anthropic count_tokens", n.input_tokens > 0, repr(n))
try:
    ac.messages.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    check("anthropic image refused", False, "no error")
except anthropic.BadRequestError as e:
    check("anthropic image refused", "messages[0].content[0].type" in str(e), str(e))
print("clients: %d failed" % fails)
sys.exit(1 if fails else 0)
