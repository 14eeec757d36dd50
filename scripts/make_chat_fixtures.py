"""Writes chapter 9's chat-template fixtures, rendered by the reference Jinja.

    bash scripts/models.sh all
    .venv/bin/pip install jinja2==3.1.6
    .venv/bin/python scripts/make_chat_fixtures.py

Two files:

- fixtures/chat/templates.json: for each model the book runs whose GGUF carries
  `tokenizer.chat_template`, the template rendered for a fixed three-turn conversation, with
  and without a system message, `add_generation_prompt` true.
- fixtures/chat/families.json: the chat templates of the families readers bring (Llama 3,
  Qwen 2.5/3, Mistral, Phi-3, Gemma-2 and their distillations; the list, with a reason for
  each, is FAMILIES below), from llama.cpp's `models/templates/`, each rendered for every
  conversation in CONVERSATIONS with `add_generation_prompt` false and true. Where jinja2
  itself raises (Gemma-2 has no system role), the error is recorded instead of the text.

The environment is the one Hugging Face's `apply_chat_template` builds (transformers,
`utils/chat_template_utils.py`, `_compile_jinja_template` and `render_jinja_template`): a
`jinja2.sandbox.ImmutableSandboxedEnvironment` with `trim_blocks` and `lstrip_blocks`, the
`loopcontrols` extension, `tojson` replaced by `json.dumps` with `ensure_ascii=False`, and the
globals `raise_exception` and `strftime_now`. The template is given `messages`, `tools=None`,
`documents=None`, `add_generation_prompt` and the tokenizer's special tokens (`bos_token`,
`eos_token`; a token the model's tokenizer does not define is not passed). One change for a
fixture that does not go stale: `strftime_now` reads the fixed clock NOW, not today's date.
(The `{% generation %}` tag of transformers' AssistantTracker is left out: none of these
templates uses it.) Chapter 9's renderer (minijinja, in its sandbox) must give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

import models

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "chat" / "templates.json"
FAMILIES_OUT = ROOT / "fixtures" / "chat" / "families.json"
FILES = {
    "smollm2": models.models_dir() / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": models.models_dir() / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf",
}
TEMPLATES = models.models_dir() / models.LLAMACPP_DIR / "templates"
TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? Answer in one word."},
]

# The clock `strftime_now` reads (UTC; Hugging Face reads the local clock, datetime.now()).
# A single-digit day, so a template's zero padding shows.
NOW = datetime(2025, 3, 7, 9, 5, 2, tzinfo=timezone.utc)

# Special tokens, as each model's own tokenizer_config.json names them (what
# `apply_chat_template` passes); None where the tokenizer defines no such token.
LLAMA3 = ("<|begin_of_text|>", "<|eot_id|>")
QWEN = (None, "<|im_end|>")
MISTRAL = ("<s>", "</s>")
DEEPSEEK = ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>")

# The templates in scope: file in llama.cpp's models/templates/, (bos_token, eos_token), why.
FAMILIES = [
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", LLAMA3, "Llama 3.1: tools in the system turn, a fixed date"),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", LLAMA3, "Llama 3.2: today's date from strftime_now"),
    ("meta-llama-Llama-3.3-70B-Instruct.jinja", LLAMA3, "Llama 3.3 (the same text as 3.1's, kept as its own file)"),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", QWEN, "Qwen 2.5: a default system turn"),
    ("Qwen-Qwen3-0.6B.jinja", QWEN, "Qwen 3: reasoning split off with str methods, messages[::-1]"),
    ("Qwen-QwQ-32B.jinja", QWEN, "QwQ (Qwen 2.5 reasoning): earlier <think> dropped"),
    ("Qwen3-Coder.jinja", QWEN, "Qwen 3 Coder: macros, tools as XML"),
    ("Qwen3.5-4B.jinja", QWEN, "Qwen 3.5: the family's newest, macros, content parts"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", MISTRAL, "Mistral Nemo: [INST] turns, roles must alternate"),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", MISTRAL, "Mistral Small 3.2: [SYSTEM_PROMPT], strftime_now"),
    ("unsloth-mistral-Devstral-Small-2507.jinja", MISTRAL, "Devstral (Mistral Small): a long default system prompt"),
    ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", MISTRAL, "Ministral 3: the family's newest, [THINK]"),
    ("microsoft-Phi-3.5-mini-instruct.jinja", ("<s>", "<|endoftext|>"), "Phi-3.5: <|user|> turns, eos_token at the end"),
    ("google-gemma-2-2b-it.jinja", ("<bos>", "<eos>"), "Gemma 2: no system role (raises), model turns"),
    ("HuggingFaceTB-SmolLM3-3B.jinja", (None, "<|im_end|>"), "SmolLM3 (Llama-style): /think flags, a dated system turn"),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", DEEPSEEK, "R1 distilled into Llama 3: DeepSeek's turns"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", DEEPSEEK, "R1 distilled into Qwen 2.5: DeepSeek's turns"),
]

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
CONVERSATIONS = {
    "user": [TURNS[0]],
    "system_user": [SYSTEM, TURNS[0]],
    "turns": TURNS,
    # Spaces around a message, and text outside ASCII.
    "system_turns": [
        SYSTEM,
        {"role": "user", "content": "  Spell these: café, naïve, 東京.  \n"},
        {"role": "assistant", "content": "café, naïve, 東京"},
        {"role": "user", "content": "Now in capitals."},
        {"role": "assistant", "content": "CAFÉ, NAÏVE, 東京"},
        {"role": "user", "content": "Thanks!"},
    ],
    # An earlier reply with its reasoning, as a reasoning model writes it.
    "reasoning": [
        TURNS[0],
        {"role": "assistant", "content": "<think>\nFrance's capital is Paris.\n</think>\n\nParis."},
        {"role": "user", "content": "And of Italy?"},
    ],
    # Two user turns in a row: templates that insist on alternation raise.
    "two_users": [
        TURNS[0],
        {"role": "user", "content": "Please answer."},
    ],
}


# Hugging Face's `tojson` and `strftime_now` on their own, where the conversations above do
# not reach them (no tools): each expression rendered with TOJSON_MESSAGES as `messages`.
TOJSON_MESSAGES = [
    SYSTEM,
    {"role": "user", "content": "quote \" backslash \\ newline \n tab \t bell \u0007 <b>&'</b> café 😀 \u2028"},
]
TOJSON = [
    "{{ messages | tojson }}",
    "{{ messages | tojson(indent=2) }}",
    "{{ messages | tojson(indent=4, ensure_ascii=true) }}",
    "{{ messages[1] | tojson(sort_keys=true, separators=(',', ':')) }}",
    "{{ messages | tojson(indent='\t') }}",
    "{{ [1, -2.5, 0.1, 1e-7, 1e22, 12345678901234567890, none, true, false, 'x', [], {}] | tojson }}",
    "{{ {'a': 1, 'b': {'c': [1, {'d': none}]}} | tojson(indent=0) }}",
    "{% for m in messages %}{{ m.role }}={{ m['content'] | length }};{% endfor %}{{ messages[0] | list | tojson }}",
    "{{ strftime_now('%A %a %d %B %b %Y %y %m %j %H %I %M %S %p %w %%') }}",
]


def raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format: str) -> str:
    return NOW.strftime(format)


def hf_environment() -> jinja2.Environment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(t: jinja2.Template, messages, add_generation_prompt: bool, bos, eos) -> dict:
    """What `apply_chat_template(..., tokenize=False)` returns, or the error it raises."""
    tokens = {k: v for k, v in [("bos_token", bos), ("eos_token", eos)] if v is not None}
    try:
        return {"rendered": t.render(messages=messages, tools=None, documents=None,
                                     add_generation_prompt=add_generation_prompt, **tokens)}
    except Exception as e:  # what jinja2 raises is the reference's answer
        return {"error": f"{type(e).__name__}: {e}"}


def model_templates(env: jinja2.Environment) -> dict:
    from gguf import GGUFReader

    out = {"jinja2": version("jinja2"), "models": {}}
    for name, path in FILES.items():
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run bash scripts/models.sh all")
        field = GGUFReader(path).fields.get("tokenizer.chat_template")
        if field is None:
            out["models"][name] = {"template": None}
            continue
        template = field.contents()
        t = env.from_string(template)
        cases = []
        for system in [None, "You are a terse assistant."]:
            messages = ([{"role": "system", "content": system}] if system else []) + TURNS
            cases.append({"messages": messages,
                          "rendered": t.render(messages=messages, add_generation_prompt=True)})
        out["models"][name] = {"template": template, "cases": cases}
    return out


def family_templates(env: jinja2.Environment) -> dict:
    out = {
        "jinja2": version("jinja2"),
        "environment": "jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, "
                       "extensions=[loopcontrols]); tojson = json.dumps(ensure_ascii=False, ...); "
                       "raise_exception; strftime_now at `now`; render(messages, tools=None, documents=None, "
                       "add_generation_prompt, bos_token, eos_token)",
        "now": NOW.isoformat(),
        "now_unix": int(NOW.timestamp()),
        "conversations": CONVERSATIONS,
        "templates": [],
        "tojson_messages": TOJSON_MESSAGES,
        "tojson": [{"template": t, **render(env.from_string(t), TOJSON_MESSAGES, False, None, None)}
                   for t in TOJSON],
    }
    for file, (bos, eos), why in FAMILIES:
        path = TEMPLATES / file
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run bash scripts/models.sh llamacpp")
        source = path.read_text(encoding="utf-8")
        t = env.from_string(source)
        cases = []
        for name, messages in CONVERSATIONS.items():
            for add in [False, True]:
                cases.append({"conversation": name, "add_generation_prompt": add,
                              **render(t, messages, add, bos, eos)})
        out["templates"].append({
            "file": file, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "why": why,
            "bos_token": bos, "eos_token": eos, "cases": cases,
        })
    return out


def write(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")


def main() -> None:
    env = hf_environment()
    write(OUT, model_templates(env))
    families = family_templates(env)
    write(FAMILIES_OUT, families)
    for t in families["templates"]:
        errors = sum("error" in c for c in t["cases"])
        print(f"  {t['file']}: {len(t['cases']) - errors} rendered, {errors} raised")


if __name__ == "__main__":
    main()
