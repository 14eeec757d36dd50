"""Writes chapter 9's chat-template fixture, fixtures/chat/templates.json.

    bash scripts/models.sh all
    .venv/bin/pip install jinja2==3.1.6
    .venv/bin/python scripts/make_chat_fixtures.py

For each model whose GGUF carries `tokenizer.chat_template`, the template rendered by the
`jinja2` package (what Hugging Face's tokenizers use) for a fixed three-turn conversation,
with and without a system message, `add_generation_prompt` true. Chapter 9's renderer
(minijinja) must give the same strings.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import jinja2
from gguf import GGUFReader

import models

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "chat" / "templates.json"
FILES = {
    "smollm2": models.models_dir() / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": models.models_dir() / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf",
}
TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? Answer in one word."},
]


def raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def main() -> None:
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
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
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
