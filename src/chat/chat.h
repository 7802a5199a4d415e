/* Chat prompts: recognise a model's Jinja chat template (GGUF key
 * tokenizer.chat_template) by its content, and render a conversation into the
 * exact text that template renders. There is no Jinja interpreter here: each
 * supported family has a renderer checked byte for byte against jinja2's
 * output on the real template (tests/fixtures/chat/). A template that is not
 * recognised is refused, never replaced by a guess; --chat-template NAME
 * chooses a renderer explicitly.
 *
 * BOS: the rendered text contains bos_text wherever the template writes
 * bos_token (llama3, llama2, mistral, gemma put it first). Tokenize the text
 * with special tokens parsed, and add no BOS of your own when
 * chat_template_emits_bos() is true; otherwise follow the GGUF's
 * tokenizer.ggml.add_bos_token. That way the prompt holds exactly one BOS. */
#ifndef TS_CHAT_H
#define TS_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

typedef enum chat_role {
    CHAT_ROLE_SYSTEM,
    CHAT_ROLE_USER,
    CHAT_ROLE_ASSISTANT,
} chat_role;

typedef struct chat_message {
    chat_role role;
    const char *content; /* NUL-terminated UTF-8 */
} chat_message;

/* An owned list of messages (from JSON). */
typedef struct chat_messages {
    chat_message *msgs; /* (n); each content is its own heap string */
    size_t n;
} chat_messages;

typedef enum chat_template_kind {
    CHAT_TMPL_CHATML,         /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2.5, OpenHermes) */
    CHAT_TMPL_LLAMA3,         /* Meta-Llama-3-Instruct: headers, trimmed content, <|eot_id|> */
    CHAT_TMPL_LLAMA2,         /* Llama-2-chat: <s>[INST] <<SYS>>..<</SYS>> .. [/INST] ... </s> */
    CHAT_TMPL_MISTRAL_V1,     /* Mistral-7B-Instruct v0.2 'v1': " [INST] sys\n\nuser [/INST] asst</s>" */
    CHAT_TMPL_MISTRAL_LEGACY, /* Mistral-7B-Instruct v0.1/v0.2 original: no system role */
    CHAT_TMPL_GEMMA,          /* Gemma 3: system merged into the first user turn, assistant -> model */
} chat_template_kind;

typedef struct chat_template {
    chat_template_kind kind;
    /* chatml only: the system prompt the template writes when the conversation
     * does not start with a system message (SmolLM2, Qwen2.5); NULL if none.
     * Owned: chat_template_free(). */
    char *default_system;
} chat_template;

/* Recognises a Jinja template by its content. TS_ERR_UNSUPPORTED with a
 * message naming what was seen when it is not one we render exactly;
 * TS_ERR_FORMAT when the text is not valid UTF-8. */
ts_status chat_template_detect(const char *jinja, chat_template *out);

/* "chatml", "llama3", "llama2", "mistral" (= "mistral-v1"), "mistral-legacy",
 * "gemma"; TS_ERR_ARG listing the names otherwise. */
ts_status chat_template_from_name(const char *name, chat_template *out);

void chat_template_free(chat_template *t);

const char *chat_template_kind_name(chat_template_kind kind);

/* True when the rendered text starts with bos_text (so the tokenizer must not add one). */
bool chat_template_emits_bos(const chat_template *t);

/* Renders msgs[0..n) as the template does. bos_text/eos_text are the vocab's
 * BOS/EOS token texts (NULL means ""). add_generation_prompt appends the
 * assistant header for templates that have one (chatml, llama3, gemma; the
 * llama2 and mistral templates have none and ignore it). Conversations the
 * real template rejects with raise_exception (roles out of turn, a system
 * message where none is allowed) are rejected with the same words.
 * *out is a NUL-terminated heap string (free()); *out_len its length when non-NULL. */
ts_status chat_render(const chat_template *t, const chat_message *msgs, size_t n, bool add_generation_prompt,
                      const char *bos_text, const char *eos_text, char **out, size_t *out_len);

/* Parses a JSON array of {"role": "system"|"user"|"assistant", "content": string}.
 * Malformed JSON (with line:column), wrong types, unknown roles or keys, an
 * empty array, NUL characters and invalid UTF-8 are TS_ERR_FORMAT. */
ts_status chat_messages_parse_json(const char *json, size_t len, chat_messages *out);
void chat_messages_free(chat_messages *m);

const char *chat_role_name(chat_role r);
/* "system"/"user"/"assistant"; false for anything else. */
bool chat_role_parse(const char *s, chat_role *out);

#endif
