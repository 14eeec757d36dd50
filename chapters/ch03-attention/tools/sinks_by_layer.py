"""How much weight each head of each SmolLM2 layer puts on token 0: the "attention sink".

Chapter 3 can compute layer 0 exactly; deeper layers need the residual stream of the
whole forward pass (chapter 4). This float64 numpy forward pass, written from the Llama
formulas, backs the chapter's remark about where the real sink appears.

Run from the workspace root, after `bash scripts/models.sh smollm2`:
    .venv/bin/python chapters/ch03-attention/tools/sinks_by_layer.py [ids,ids,...]
Without arguments it runs the chapter's two prompts (ids from `ch03-attention --json`).
"""
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np

MODELS = Path(os.environ.get("LLM_BOOK_MODELS") or Path(__file__).resolve().parents[3] / "models")
HF = MODELS / "smollm2-135m-instruct/hf"
PROMPTS = {
    "The quick brown fox jumps over the lazy dog because it": [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 975, 357],
    "Quick brown foxes jump over the lazy dog because they": [36453, 6354, 28510, 7379, 690, 260, 23790, 2767, 975, 502],
}

if not (HF / "model.safetensors").exists():
    sys.exit(f"error: {HF / 'model.safetensors'} is missing; run `bash scripts/models.sh smollm2`")
f = open(HF / "model.safetensors", "rb")
header_len = struct.unpack("<Q", f.read(8))[0]
header = json.loads(f.read(header_len))
data_start = 8 + header_len


def tensor(name):
    start, end = header[name]["data_offsets"]
    f.seek(data_start + start)
    raw = np.frombuffer(f.read(end - start), dtype="<f4")
    return raw.reshape(header[name]["shape"]).astype(np.float64)


cfg = json.loads((HF / "config.json").read_text())
n_heads, n_kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
eps = cfg["rms_norm_eps"]


def rmsnorm(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def sinks(ids):
    seq = len(ids)
    inv_freq = cfg["rope_theta"] ** (-np.arange(0, d, 2) / d)
    angles = np.arange(seq)[:, None] * inv_freq[None, :]
    cos = np.cos(np.concatenate([angles, angles], -1))[:, None, :]  # (seq, 1, d)
    sin = np.sin(np.concatenate([angles, angles], -1))[:, None, :]

    def rope(x, heads):  # split halves, Hugging Face's rotate_half
        x = x.reshape(seq, heads, d)
        return x * cos + np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1) * sin

    x = tensor("model.embed_tokens.weight")[ids]  # (seq, dim) the residual stream
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rmsnorm(x, tensor(p + "input_layernorm.weight"))
        q = rope(h @ tensor(p + "self_attn.q_proj.weight").T, n_heads)
        k = rope(h @ tensor(p + "self_attn.k_proj.weight").T, n_kv)
        v = (h @ tensor(p + "self_attn.v_proj.weight").T).reshape(seq, n_kv, d)
        out = np.zeros((seq, n_heads, d))
        shares = []
        for head in range(n_heads):
            g = head // (n_heads // n_kv)
            s = q[:, head] @ k[:, g].T / np.sqrt(d)
            s[np.triu_indices(seq, 1)] = -np.inf
            w = np.exp(s - s.max(-1, keepdims=True))
            w /= w.sum(-1, keepdims=True)
            out[:, head] = w @ v[:, g]
            shares.append(w[1:, 0].mean())  # queries 1.. on token 0
        print(f"layer {layer:2}  " + " ".join(f"{s:.2f}" for s in shares))
        x = x + out.reshape(seq, -1) @ tensor(p + "self_attn.o_proj.weight").T
        h = rmsnorm(x, tensor(p + "post_attention_layernorm.weight"))
        gate = h @ tensor(p + "mlp.gate_proj.weight").T
        up = h @ tensor(p + "mlp.up_proj.weight").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ tensor(p + "mlp.down_proj.weight").T


if len(sys.argv) > 1:
    PROMPTS = {"(ids)": [int(i) for i in sys.argv[1].split(",")]}
for text, ids in PROMPTS.items():
    print(f"{text}\nmean weight of queries 1.. on token 0, heads 0..{n_heads - 1}:")
    sinks(ids)
