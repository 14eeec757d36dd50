"""Chapter 11's server through the official `openai` package, unchanged.

usage: python openai_client.py BASE_URL API_KEY MODEL
Prints one line per check, "ok NAME" or raises; exits non-zero on the first failure.
"""

import sys

import openai

base, key, model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=120)


def ok(name):
    print("ok", name, flush=True)


# The model list.
models = client.models.list()
assert [m.id for m in models.data] == [model], models
ok("models.list")

# A whole chat answer, greedy.
chat = client.chat.completions.create(
    model=model,
    messages=[{"role": "system", "content": "Answer briefly."},
              {"role": "user", "content": "What is the capital of France?"}],
    max_tokens=16, temperature=0, seed=1,
)
choice = chat.choices[0]
assert chat.object == "chat.completion", chat
assert choice.message.role == "assistant" and choice.message.content, chat
assert choice.finish_reason in ("stop", "length"), chat
assert chat.usage.completion_tokens >= 1 and chat.usage.prompt_tokens > 5, chat.usage
assert chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens
ok("chat")

# The same request streamed gives the same text, and the usage chunk at the end.
stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "system", "content": "Answer briefly."},
              {"role": "user", "content": "What is the capital of France?"}],
    max_tokens=16, temperature=0, seed=1, stream=True, stream_options={"include_usage": True},
)
text, finish, usage, roles = "", None, None, []
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage
    if not chunk.choices:
        continue
    delta = chunk.choices[0].delta
    if delta.role:
        roles.append(delta.role)
    text += delta.content or ""
    finish = chunk.choices[0].finish_reason or finish
assert roles == ["assistant"], roles
assert text == choice.message.content, (text, choice.message.content)
assert finish == choice.finish_reason, finish
assert usage is not None and usage.completion_tokens == chat.usage.completion_tokens, usage
ok("chat stream")

# Completions, whole and streamed, with a stop string and max_tokens.
comp = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0)
assert comp.object == "text_completion" and comp.choices[0].text, comp
assert comp.choices[0].finish_reason == "length", comp
assert comp.usage.completion_tokens == 12, comp.usage
ok("completions")
stopped = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=["7"])
assert stopped.choices[0].finish_reason == "stop" and "7" not in stopped.choices[0].text, stopped
ok("completions stop")
parts = list(client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stream=True))
assert "".join(p.choices[0].text for p in parts if p.choices) == comp.choices[0].text
ok("completions stream")

# Log-probabilities: the chosen token's, and the alternatives, most likely first.
lp = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Say yes."}],
    max_tokens=3, temperature=0, logprobs=True, top_logprobs=3,
)
content = lp.choices[0].logprobs.content
assert len(content) == 3, content
for t in content:
    assert t.logprob <= 0 and len(t.top_logprobs) == 3
    # greedy: the chosen token is the most likely one
    assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4, t
    assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
ok("logprobs")

# Our 4xx answers are the client's own error types.
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], n=2)
    raise AssertionError("n=2 was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and "n (only 1" in e.message, e
ok("BadRequestError")
try:
    client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "Hi"}])
    raise AssertionError("an unknown model was accepted")
except openai.NotFoundError as e:
    assert e.code == "model_not_found", e
ok("NotFoundError")
try:
    client.completions.create(model=model, prompt="Hi", max_tokens=10**6)
    raise AssertionError("max_tokens beyond the context was accepted")
except openai.BadRequestError as e:
    assert e.code == "context_length_exceeded", e
ok("context_length_exceeded")
wrong = openai.OpenAI(base_url=base + "/v1", api_key=key + "x", max_retries=0)
try:
    wrong.models.list()
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401, e
ok("AuthenticationError")
print("all passed")
