"""An exact-as-possible Llama forward pass in float64 numpy, from the Hugging Face files.

It follows the Hugging Face LlamaForCausalLM definition (RoPE by rotate_half, grouped-query
attention, SwiGLU MLP, tied lm_head) and reads hf/model.safetensors, so it checks two
things at once: that the converted checkpoint is a genuine Hugging Face Llama (the Q/K
un-permutation is right), and how close llama.cpp's f32 run gets to exact arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import safetensors_io


class Llama64:
    def __init__(self, hf_dir: Path):
        self.cfg = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
        self.st = safetensors_io.SafeTensors(hf_dir / "model.safetensors")

    def w(self, name: str) -> np.ndarray:
        return self.st.get(name).astype(np.float64)

    def rmsnorm(self, x: np.ndarray, name: str) -> np.ndarray:
        eps = self.cfg["rms_norm_eps"]
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * self.w(name)

    def rope(self, x: np.ndarray) -> np.ndarray:
        """x (seq, heads, head_dim): element j rotates with element j + head_dim/2."""
        seq, _, hd = x.shape
        inv_freq = self.cfg["rope_theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)   # (hd/2,)
        angles = np.arange(seq, dtype=np.float64)[:, None] * inv_freq[None, :]              # (seq, hd/2)
        cos = np.cos(np.concatenate([angles, angles], axis=1))[:, None, :]                  # (seq, 1, hd)
        sin = np.sin(np.concatenate([angles, angles], axis=1))[:, None, :]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        rotated = np.concatenate([-x2, x1], axis=-1)                                         # rotate_half
        return x * cos + rotated * sin

    def forward(self, ids: list[int]) -> np.ndarray:
        """Logits (seq, vocab) for every position."""
        c = self.cfg
        n_head, n_kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        seq = len(ids)
        embed = self.w("model.embed_tokens.weight")                    # (vocab, hidden)
        x = embed[ids]                                                   # (seq, hidden)
        mask = np.triu(np.full((seq, seq), -np.inf), k=1)                # (seq, seq): no peeking ahead
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = self.rmsnorm(x, p + "input_layernorm.weight")            # (seq, hidden)
            q = (h @ self.w(p + "self_attn.q_proj.weight").T).reshape(seq, n_head, hd)
            k = (h @ self.w(p + "self_attn.k_proj.weight").T).reshape(seq, n_kv, hd)
            v = (h @ self.w(p + "self_attn.v_proj.weight").T).reshape(seq, n_kv, hd)
            q, k = self.rope(q), self.rope(k)
            group = n_head // n_kv
            k = np.repeat(k, group, axis=1)                              # (seq, n_head, hd)
            v = np.repeat(v, group, axis=1)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask  # (n_head, seq, seq)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            attn = np.einsum("hqk,khd->qhd", probs, v).reshape(seq, n_head * hd)
            x = x + attn @ self.w(p + "self_attn.o_proj.weight").T
            h = self.rmsnorm(x, p + "post_attention_layernorm.weight")
            gate = h @ self.w(p + "mlp.gate_proj.weight").T               # (seq, intermediate)
            up = h @ self.w(p + "mlp.up_proj.weight").T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self.w(p + "mlp.down_proj.weight").T
        x = self.rmsnorm(x, "model.norm.weight")
        return x @ embed.T                                               # (seq, vocab), tied lm_head
