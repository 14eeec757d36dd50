"""Writes fixtures/reference/hidden-smollm2-f64.json: the residual stream after every layer.

    .venv/bin/python scripts/make_hidden_fixture.py

Chapter 4's per-layer checker (`cargo run --release -p ch04-forward -- check`) compares its
f32 forward pass with these numbers, layer by layer, so that a bug shows up at the layer
that introduces it rather than only in the final logits. They come from a float64 numpy
forward pass over models/smollm2-135m-instruct/hf/model.safetensors that follows the
Hugging Face Llama definition step by step (written independently of the Rust code):

    x = embed[ids]
    for each layer:  x = x + o_proj(attention(RoPE(q), RoPE(k), v))   on RMSNorm(x)
                     x = x + down(silu(gate(h)) * up(h))               on h = RMSNorm(x)
    logits = RMSNorm(x) @ embed.T                                      (tied LM head)

For one short prompt the file keeps, after the embedding (layer 0) and after each layer,
the first DIMS coordinates and the Euclidean norm of every position's row, plus the top-20
logits of the last position. Float64 makes this the exact answer up to rounding far below
anything f32 can resolve, so the differences the checker prints are our own f32 error.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(os.environ.get("LLM_BOOK_MODELS") or ROOT / "models")
HF_DIR = MODELS / "smollm2-135m-instruct" / "hf"
OUT = ROOT / "fixtures" / "reference" / "hidden-smollm2-f64.json"
PROMPT = "The capital of France is"
DIMS = 8
TOP_K = 20


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every F32 tensor of a safetensors file, as read-only float32 arrays over a memory map."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"error: {name} is {info['dtype']}; this script reads F32 files only")
        begin, end = info["data_offsets"]
        tensors[name] = data[begin:end].view(np.float32).reshape(info["shape"])
    return tensors


def prompt_ids() -> list[int]:
    """The ids llama.cpp fed for PROMPT, from the logits fixture (so both checks share them)."""
    for variant in ("f32", "q4_1"):
        path = ROOT / "fixtures" / "reference" / f"logits-smollm2-{variant}.json"
        if path.exists():
            for p in json.loads(path.read_text(encoding="utf-8"))["prompts"]:
                if p["prompt"] == PROMPT:
                    return p["ids"]
    raise SystemExit("error: no logits-smollm2-*.json fixture holds the prompt; run scripts/make_fixtures.py first")


def main() -> int:
    if not (HF_DIR / "model.safetensors").exists():
        print(f"error: {HF_DIR / 'model.safetensors'} is missing; run `bash scripts/models.sh smollm2`", file=sys.stderr)
        return 1
    cfg = json.loads((HF_DIR / "config.json").read_text(encoding="utf-8"))
    t = read_safetensors(HF_DIR / "model.safetensors")
    w = lambda name: t[name].astype(np.float64)  # noqa: E731

    dim, n_head, n_kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or dim // n_head
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    ids = prompt_ids()
    seq = len(ids)

    def rmsnorm(x, name):                                        # x (seq, dim)
        return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * w(name)

    # RoPE, split-halves pairing: coordinate i turns with coordinate i + hd/2.
    freqs = theta ** (-np.arange(hd // 2, dtype=np.float64) * 2 / hd)  # (hd/2,)
    angle = np.arange(seq, dtype=np.float64)[:, None] * freqs[None, :]  # (seq, hd/2)
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]      # (seq, 1, hd/2)

    def rope(x):                                                 # x (seq, heads, hd)
        a, b = x[..., : hd // 2], x[..., hd // 2:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def record(layer, x):
        return {"layer": layer,
                "first": [[float(v) for v in row[:DIMS]] for row in x],
                "norm": [float(np.linalg.norm(row)) for row in x]}

    embed = w("model.embed_tokens.weight")                        # (vocab, dim)
    x = embed[ids]                                                # (seq, dim)
    layers = [record(0, x)]
    group = n_head // n_kv
    causal = np.triu(np.ones((seq, seq), dtype=bool), k=1)        # True where a query would see the future
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, p + "input_layernorm.weight")
        q = rope((h @ w(p + "self_attn.q_proj.weight").T).reshape(seq, n_head, hd))
        k = rope((h @ w(p + "self_attn.k_proj.weight").T).reshape(seq, n_kv, hd))
        v = (h @ w(p + "self_attn.v_proj.weight").T).reshape(seq, n_kv, hd)
        out = np.empty((seq, n_head, hd))
        for head in range(n_head):
            kv = head // group                                    # grouped-query: shared K/V head
            s = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd)      # (seq, seq)
            s[causal] = -np.inf
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, head, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(seq, n_head * hd) @ w(p + "self_attn.o_proj.weight").T
        h = rmsnorm(x, p + "post_attention_layernorm.weight")
        g = h @ w(p + "mlp.gate_proj.weight").T
        u = h @ w(p + "mlp.up_proj.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ w(p + "mlp.down_proj.weight").T
        layers.append(record(l + 1, x))
        print(f"  layer {l + 1:2d}: |x| of the last position = {layers[-1]['norm'][-1]:.4f}", flush=True)

    head = embed if cfg.get("tie_word_embeddings") else w("lm_head.weight")
    logits = rmsnorm(x[-1:], "model.norm.weight")[0] @ head.T      # (vocab,)
    top = np.argsort(-logits, kind="stable")[:TOP_K]
    fixture = {
        "what": "residual stream of SmolLM2-135M-Instruct after the embedding (layer 0) and after each decoder "
                "layer, from a float64 numpy forward pass over hf/model.safetensors "
                "(scripts/make_hidden_fixture.py): the first `dims` coordinates and the L2 norm of each position's "
                "row, and the top-20 logits of the last position",
        "prompt": PROMPT,
        "ids": ids,
        "dims": DIMS,
        "layers": layers,
        "last_top": [[int(i), float(logits[i])] for i in top],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # One line per layer: small, and a regenerated file diffs layer by layer.
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in fixture.items() if k != "layers")
    rows = ",\n".join("  " + json.dumps(layer) for layer in layers)
    OUT.write_text("{\n" + body + ',\n "layers": [\n' + rows + "\n ]\n}\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: top token {int(top[0])} (logit {logits[top[0]]:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
