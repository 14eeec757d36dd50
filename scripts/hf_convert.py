"""Converts SmolLM2's GGUF into a Hugging Face checkpoint directory, and checks the result.

    hf/config.json            LlamaConfig keys, values read from the GGUF metadata
    hf/tokenizer.json         the byte-level BPE tokenizer, rebuilt from the GGUF metadata
    hf/tokenizer_config.json  chat template and special tokens
    hf/model.safetensors      every weight as F32, Hugging Face names and (out, in) layout

Three things differ between the two layouts:
  * names: `blk.3.attn_q.weight` is `model.layers.3.self_attn.q_proj.weight`;
  * dimension order: GGUF lists dimensions innermost first (ne0 = in_features), PyTorch
    outermost first, so a GGUF [576, 192] tensor is a PyTorch (192, 576) one;
  * Q and K rows: llama.cpp's converter reorders the rows of each attention head so that
    the two halves RoPE rotates together sit next to each other (see unpermute_rows).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

import safetensors_io

Say = Callable[[str], None]

# GGUF name (after "blk.N.") -> Hugging Face name (after "model.layers.N.")
LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def meta(reader: GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ValueError(f"GGUF metadata key {key!r} is missing")
        return default
    return field.contents()


def f32_repr(x: float) -> float:
    """The shortest decimal that reads back as the same f32 (9.999999747e-06 -> 1e-05)."""
    return float(str(np.float32(x)))


def llama_config(reader: GGUFReader) -> dict:
    if meta(reader, "general.architecture") != "llama":
        raise ValueError("this converter handles llama-architecture GGUFs only")
    hidden = int(meta(reader, "llama.embedding_length"))
    n_head = int(meta(reader, "llama.attention.head_count"))
    has_output = any(t.name == "output.weight" for t in reader.tensors)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(meta(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(meta(reader, "llama.block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(meta(reader, "llama.attention.head_count_kv")),
        "head_dim": hidden // n_head,
        "rms_norm_eps": f32_repr(meta(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": f32_repr(meta(reader, "llama.rope.freq_base")),
        "rope_scaling": None,
        "max_position_embeddings": int(meta(reader, "llama.context_length")),
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "tie_word_embeddings": not has_output,
        "bos_token_id": int(meta(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(meta(reader, "tokenizer.ggml.eos_token_id")),
        "pad_token_id": int(meta(reader, "tokenizer.ggml.padding_token_id")),
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "torch_dtype": "float32",
    }


def tensor_plan(cfg: dict) -> list[tuple[str, str, tuple[int, ...]]]:
    """(Hugging Face name, GGUF name, PyTorch shape) for every tensor, in model order."""
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    q_rows = cfg["num_attention_heads"] * cfg["head_dim"]
    kv_rows = cfg["num_key_value_heads"] * cfg["head_dim"]
    shapes = {
        "attn_norm.weight": (h,),                # (hidden,)
        "attn_q.weight": (q_rows, h),            # (n_head * head_dim, hidden)
        "attn_k.weight": (kv_rows, h),           # (n_kv_head * head_dim, hidden)
        "attn_v.weight": (kv_rows, h),           # (n_kv_head * head_dim, hidden)
        "attn_output.weight": (h, q_rows),       # (hidden, n_head * head_dim)
        "ffn_norm.weight": (h,),                 # (hidden,)
        "ffn_gate.weight": (inter, h),           # (intermediate, hidden)
        "ffn_up.weight": (inter, h),             # (intermediate, hidden)
        "ffn_down.weight": (h, inter),           # (hidden, intermediate)
    }
    plan = [("model.embed_tokens.weight", "token_embd.weight", (v, h))]  # (vocab, hidden)
    for layer in range(cfg["num_hidden_layers"]):
        for g_name, hf_name in LAYER_NAMES.items():
            plan.append((f"model.layers.{layer}.{hf_name}", f"blk.{layer}.{g_name}", shapes[g_name]))
    plan.append(("model.norm.weight", "output_norm.weight", (h,)))  # (hidden,)
    if not cfg["tie_word_embeddings"]:
        plan.append(("lm_head.weight", "output.weight", (v, h)))    # (vocab, hidden)
    return plan


# ANCHOR: unpermute
def unpermute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """GGUF row order -> Hugging Face row order, for a Q or K projection (out, in).

    Hugging Face's RoPE rotates element j of a head together with element j + head_dim/2.
    llama.cpp rotates neighbours (2j, 2j+1), so its converter moves row j + head_dim/2 of
    each head next to row j. GGUF row (h, j, s) came from Hugging Face row (h, s, j):
    view the rows as (head, head_dim/2, 2) and swap the last two axes back.
    """
    rows, cols = w.shape
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face row order -> GGUF row order: what llama.cpp's converter does."""
    rows, cols = w.shape
    half = rows // n_head // 2
    return w.reshape(n_head, 2, half, cols).swapaxes(1, 2).reshape(rows, cols)
# ANCHOR_END: unpermute


def heads_for(gguf_name: str, cfg: dict) -> int | None:
    if gguf_name.endswith("attn_q.weight"):
        return cfg["num_attention_heads"]
    if gguf_name.endswith("attn_k.weight"):
        return cfg["num_key_value_heads"]
    return None


def gguf_values(tensor) -> np.ndarray:
    """The gguf package's dequantization, in PyTorch dimension order."""
    values = dequantize(tensor.data, tensor.tensor_type)
    return values.reshape(tuple(int(n) for n in reversed(tensor.shape)))


def exact_values(tensor) -> np.ndarray | None:
    """An independent float64 decoding of F32, Q8_0 and Q4_1 blocks (None for other types).

    Used to check that the F32 values lose nothing: Q8_0 is d·q and Q4_1 is d·q + m with
    f16 d and m and small integers q, which f32 holds exactly.
    """
    raw = np.asarray(tensor.data)
    kind = tensor.tensor_type
    if kind == GGMLQuantizationType.F32:
        values = raw.astype(np.float64)
    elif kind == GGMLQuantizationType.Q8_0:
        blocks = raw.reshape(-1, 34)                                   # (n_blocks, 2 + 32)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)        # (n_blocks, 1)
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)      # (n_blocks, 32)
        values = d * q
    elif kind == GGMLQuantizationType.Q4_1:
        blocks = raw.reshape(-1, 20)                                   # (n_blocks, 2 + 2 + 16)
        d = blocks[:, 0:2].copy().view("<f2").astype(np.float64)       # (n_blocks, 1)
        m = blocks[:, 2:4].copy().view("<f2").astype(np.float64)       # (n_blocks, 1)
        packed = blocks[:, 4:]                                         # (n_blocks, 16)
        q = np.concatenate([packed & 0x0F, packed >> 4], axis=1)       # (n_blocks, 32): low nibbles first
        values = d * q.astype(np.float64) + m
    else:
        return None
    return values.reshape(tuple(int(n) for n in reversed(tensor.shape)))


def tokenizer_json(reader: GGUFReader) -> dict:
    """SmolLM2's tokenizer in the Hugging Face `tokenizers` format."""
    if meta(reader, "tokenizer.ggml.model") != "gpt2":
        raise ValueError("expected a byte-level BPE ('gpt2') tokenizer in the GGUF")
    tokens = meta(reader, "tokenizer.ggml.tokens")
    kinds = meta(reader, "tokenizer.ggml.token_type")
    merges = meta(reader, "tokenizer.ggml.merges")
    added = [
        {"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": kinds[i] == 3}      # 3 = control, 4 = user-defined
        for i in range(len(tokens)) if kinds[i] in (3, 4)
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},   # every digit is its own piece
            byte_level,                                      # GPT-2 regex split, then bytes -> symbols
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {token: i for i, token in enumerate(tokens)},
            "merges": list(merges),                          # "left right", highest priority first
        },
    }


def tokenizer_config(reader: GGUFReader, cfg: dict) -> dict:
    tokens = meta(reader, "tokenizer.ggml.tokens")
    return {
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": bool(meta(reader, "tokenizer.ggml.add_bos_token", False)),
        "bos_token": tokens[cfg["bos_token_id"]],
        "eos_token": tokens[cfg["eos_token_id"]],
        "pad_token": tokens[cfg["pad_token_id"]],
        "unk_token": tokens[int(meta(reader, "tokenizer.ggml.unknown_token_id"))],
        "model_max_length": cfg["max_position_embeddings"],
        "chat_template": meta(reader, "tokenizer.chat_template"),
    }


def check_tokenizer(tok: dict, reader: GGUFReader, say: Say) -> None:
    tokens = meta(reader, "tokenizer.ggml.tokens")
    vocab = tok["model"]["vocab"]
    if len(vocab) != len(tokens):
        raise ValueError(f"tokenizer.json: {len(vocab)} vocabulary entries for {len(tokens)} GGUF tokens (duplicates?)")
    for i, token in enumerate(tokens):
        if vocab[token] != i:
            raise ValueError(f"tokenizer.json: token {token!r} maps to {vocab[token]}, GGUF says {i}")
    merges = tok["model"]["merges"]
    for rank, merge in enumerate(merges):
        left, sep, right = merge.partition(" ")
        if not sep or " " in right or left not in vocab or right not in vocab or left + right not in vocab:
            raise ValueError(f"tokenizer.json: merge {rank} {merge!r} is not two tokens that merge into a token")
    specials = [t["content"] for t in tok["added_tokens"] if t["special"]]
    say(f"  tokenizer: {len(vocab)} tokens round-trip, {len(merges)} merges, "
        f"{len(specials)} special tokens ({specials[0]} ... {specials[-1]})")


def write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def convert(gguf_path: Path, out_dir: Path, say: Say) -> None:
    """Writes config.json, tokenizer.json, tokenizer_config.json and model.safetensors into out_dir."""
    reader = GGUFReader(gguf_path)
    cfg = llama_config(reader)
    say(f"  config: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, "
        f"{cfg['num_attention_heads']} heads / {cfg['num_key_value_heads']} kv heads, vocab {cfg['vocab_size']}, "
        f"tied lm_head: {cfg['tie_word_embeddings']}")
    write_json(out_dir / "config.json", cfg)
    tok = tokenizer_json(reader)
    check_tokenizer(tok, reader, say)
    write_json(out_dir / "tokenizer.json", tok)
    write_json(out_dir / "tokenizer_config.json", tokenizer_config(reader, cfg))

    plan = tensor_plan(cfg)
    by_name = {t.name: t for t in reader.tensors}
    extra = set(by_name) - {g for _, g, _ in plan}
    if extra:
        raise ValueError(f"GGUF has tensors this converter does not place: {sorted(extra)}")
    source = {hf: g for hf, g, _ in plan}

    def produce(hf_name: str) -> np.ndarray:
        g_name = source[hf_name]
        values = gguf_values(by_name[g_name])
        heads = heads_for(g_name, cfg)
        return unpermute_rows(values, heads) if heads else values

    def progress(index: int, name: str) -> None:
        if (index + 1) % 30 == 0 or index + 1 == len(plan):
            say(f"  dequantized {index + 1}/{len(plan)} tensors")

    say(f"  writing model.safetensors ({len(plan)} tensors, F32)")
    safetensors_io.write(out_dir / "model.safetensors", [(hf, shape) for hf, _, shape in plan], produce, progress)


def check(gguf_path: Path, hf_dir: Path, say: Say) -> None:
    """Re-reads hf_dir and checks it against the GGUF; raises ValueError on any difference."""
    reader = GGUFReader(gguf_path)
    cfg = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    if cfg != llama_config(reader):
        raise ValueError("config.json differs from the GGUF metadata")
    check_tokenizer(json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8")), reader, say)

    st = safetensors_io.SafeTensors(hf_dir / "model.safetensors")
    plan = tensor_plan(cfg)
    if sorted(st.names()) != sorted(hf for hf, _, _ in plan):
        raise ValueError("model.safetensors does not hold exactly the expected tensor names")
    by_name = {t.name: t for t in reader.tensors}
    inexact = 0
    for index, (hf_name, g_name, shape) in enumerate(plan):
        stored = st.get(hf_name)
        if stored.shape != shape:
            raise ValueError(f"{hf_name}: shape {stored.shape}, expected {shape}")
        heads = heads_for(g_name, cfg)
        as_gguf = permute_rows(stored, heads) if heads else stored     # redo llama.cpp's permutation
        tensor = by_name[g_name]
        if not np.array_equal(as_gguf, gguf_values(tensor)):
            raise ValueError(f"{hf_name}: differs from the gguf package's dequantization of {g_name}")
        exact = exact_values(tensor)
        if exact is not None and not np.array_equal(as_gguf.astype(np.float64), exact):
            inexact += 1
        if (index + 1) % 60 == 0 or index + 1 == len(plan):
            say(f"  checked {index + 1}/{len(plan)} tensors")
    if inexact:
        raise ValueError(f"{inexact} tensors lost precision in F32 (d*q+m not exactly representable)")
    say(f"  all {len(plan)} tensors: names and shapes as expected, equal to the gguf package's dequantization "
        "(Q/K re-permuted), and exactly the float64 value of every quantized block")
