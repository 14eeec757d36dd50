"""An independent reference for tests/smollm2.rs: SmolLM2's layer-0 and layer-1 attention
weights for a fixed list of token ids, computed in float64 with numpy, written from the
formulas rather than from the Rust code (split-halves RoPE written as Hugging Face's
rotate_half, GQA by indexing, the causal mask as -inf above the diagonal).

Regenerate (from the workspace root, after `bash scripts/models.sh smollm2`):
    .venv/bin/python chapters/ch03-attention/tests/data/attention_reference.py \
        > chapters/ch03-attention/tests/data/smollm2_attention_reference.json
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

HF = Path(__file__).resolve().parents[4] / "models/smollm2-135m-instruct/hf"
# "The quick brown fox jumps over the lazy dog because it", as SmolLM2 tokenizes it
IDS = [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 975, 357]
LAYERS = [0, 1]

with open(HF / "model.safetensors", "rb") as f:
    header_len = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(header_len))
    data_start = 8 + header_len

    def tensor(name):
        info = header[name]
        start, end = info["data_offsets"]
        f.seek(data_start + start)
        raw = np.frombuffer(f.read(end - start), dtype="<f4")
        return raw.reshape(info["shape"]).astype(np.float64)

    cfg = json.loads((HF / "config.json").read_text())
    n_heads, n_kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    seq = len(IDS)
    inv_freq = cfg["rope_theta"] ** (-np.arange(0, d, 2) / d)  # (d/2)
    angles = np.arange(seq)[:, None] * inv_freq[None, :]  # (seq, d/2)
    cos = np.cos(np.concatenate([angles, angles], -1))[:, None, :]  # (seq, 1, d)
    sin = np.sin(np.concatenate([angles, angles], -1))[:, None, :]

    def rope(x, heads):  # x (seq, heads*d)
        x = x.reshape(seq, heads, d)
        rotated_half = np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], -1)
        return x * cos + rotated_half * sin

    out = {"ids": IDS, "layers": {}}
    emb = tensor("model.embed_tokens.weight")[IDS]  # (seq, dim)
    for layer in LAYERS:
        p = f"model.layers.{layer}"
        x = emb / np.sqrt((emb * emb).mean(-1, keepdims=True) + cfg["rms_norm_eps"])
        x = x * tensor(f"{p}.input_layernorm.weight")
        q = rope(x @ tensor(f"{p}.self_attn.q_proj.weight").T, n_heads)
        k = rope(x @ tensor(f"{p}.self_attn.k_proj.weight").T, n_kv)
        weights = []
        for h in range(n_heads):
            s = q[:, h] @ k[:, h // (n_heads // n_kv)].T / np.sqrt(d)  # (seq, seq)
            s[np.triu_indices(seq, 1)] = -np.inf
            e = np.exp(s - s.max(-1, keepdims=True))
            weights.append((e / e.sum(-1, keepdims=True)).round(7).tolist())
        out["layers"][str(layer)] = weights

json.dump(out, sys.stdout)
sys.stdout.write("\n")
