#!/usr/bin/env python3
"""Writes a large Llama-shaped GGUF with random weights: a speed and memory test, nothing more.

The book's two real models are small (135M and 270M parameters), and at that size the weights
nearly fit in a server's cache. To see how the engine scales to the sizes readers try next,
this writes a file of a real model's shape (1B, 3B, 7B or 9B) in a real quantization mix,
with SmolLM2's tokenizer and random quantized weights. `--shape gemma3` writes Gemma-3-270M's
architecture instead (its extra norms, head size and sliding window); give it Gemma's tokenizer
with --tokenizer-from, since its embedding has a row for each of Gemma's 262 144 tokens. Its text is noise: use it with
`ch08-gguf bench`/`compare` and `ch09-generate bench`, never to judge output.

    .venv/bin/python scripts/make_synthetic_gguf.py --shape 7b --mix q4_0 --out models/synthetic/llama-7b-q4_0.gguf

Mixes:
    q4_0    every layer matrix and the output Q4_0, the token embedding Q8_0
    q4_k_m  like llama.cpp's Q4_K_M: Q4_K for most matrices, Q6_K for attn_v, ffn_down
            and the output, the token embedding Q8_0 (the smallest format our loader
            dequantizes rows of for the embedding lookup); for gemma3, the formats of
            Gemma-3-270M's own Q4_K_M file, layer by layer (Q5_0, Q4_K, Q6_K, Q8_0)

The random bytes come from numpy's generator seeded with --seed, so the same arguments give
the same file. Scales are set so each weight row has a standard deviation near 1/sqrt(cols)
(activations stay finite through the layers). The output is written to a temporary file in
the same folder and renamed into place; an existing file is never overwritten.

Each tensor is cut from a pool of random blocks (16 MiB of each format, at a random start in
the pool and wrapping round), not drawn whole: a 7B file is then written at the speed of a
copy, not of the generator (minutes). A speed test reads the same bytes either way.

With --vocab-only, the file holds the tokenizer's metadata alone (no tensors): a small
stand-in for --tokenizer-from on a machine that has no real model file.

    .venv/bin/python scripts/make_synthetic_gguf.py --vocab-only --out smollm2-vocab.gguf
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import gguf

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = Path(os.environ.get("LLM_BOOK_MODELS", ROOT / "models")) / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# Real models' shapes: (layers, dim, heads, kv heads, ffn). Vocabulary: SmolLM2's 49 152.
SHAPES = {
    "smollm2": (30, 576, 9, 3, 1536),  # SmolLM2-135M
    "1b": (16, 2048, 32, 8, 8192),   # Llama-3.2-1B
    "3b": (28, 3072, 24, 8, 8192),   # Llama-3.2-3B
    "7b": (32, 4096, 32, 32, 11008),  # Llama-2-7B
    "9b": (48, 4096, 32, 4, 11008),  # Yi-1.5-9B
    "gemma3": (18, 640, 4, 1, 2048),  # Gemma-3-270M: head size 256, tied embedding (GEMMA3)
}

# Gemma-3-270M's architecture beyond the table: its heads are wider than dim / heads, its
# output is the embedding, RoPE runs at two bases (10 000 on the sliding-window layers, this on
# the others) and 5 of every 6 layers see the last 512 positions.
GEMMA3 = dict(head_dim=256, rope_base=1e6, window=512, eps=1e-6, context=32768)

Q = gguf.GGMLQuantizationType
MIXES = {
    # (q, k, v, o, gate, up, down, output)
    "q4_0": dict(q=Q.Q4_0, k=Q.Q4_0, v=Q.Q4_0, o=Q.Q4_0, gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, output=Q.Q4_0),
    "q4_k_m": dict(q=Q.Q4_K, k=Q.Q4_K, v=Q.Q6_K, o=Q.Q4_K, gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q6_K, output=Q.Q6_K),
}


def gemma3_q4_k_m(layer: int, layers: int) -> dict:
    """The formats of Gemma-3-270M's Q4_K_M file in one layer: llama.cpp gives attn_v and
    ffn_down more bits on the first eighth of the layers, the last eighth and every third
    between (Q8_0 and Q6_K there, Q5_0 and Q4_K elsewhere)."""
    more = layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2
    return dict(q=Q.Q5_0, k=Q.Q5_0, v=Q.Q8_0 if more else Q.Q5_0, o=Q.Q4_K, gate=Q.Q5_0,
                up=Q.Q5_0, down=Q.Q6_K if more else Q.Q4_K)

# Where each format keeps its f16 scales (byte offsets in a block), and the scale that gives
# weights of standard deviation 1 (times 1/sqrt(cols) below) for random quant bytes.
#   Q4_0: d, 16 bytes of nibbles; w = d·(q − 8), std(q − 8) ≈ 4.6
#   Q8_0: d, 32 int8; std ≈ 74
#   Q5_0: d, 4 bytes of high bits, 16 bytes of nibbles; w = d·(q − 16), std ≈ 9.2
#   Q4_K: d, dmin, 12 bytes of 6-bit scales and mins (≈ 31 on average), 128 bytes of nibbles
#   Q6_K: 128 + 64 bytes of 6-bit quants (q − 32, std ≈ 18.5), 16 int8 scales (std ≈ 74), d last
F16_FIELDS = {
    Q.Q4_0: ([0], 4.6),
    Q.Q8_0: ([0], 74.0),
    Q.Q5_0: ([0], 9.2),
    Q.Q4_K: ([0, 2], 31.0 * 4.6),
    Q.Q6_K: ([208], 74.0 * 18.5),
}


POOL_BYTES = 16 << 20


def pool(rng: np.random.Generator, qtype: Q, cols: int) -> np.ndarray:
    """About POOL_BYTES of random `qtype` blocks for rows of `cols` columns, with finite f16
    scales sized for that row length: (blocks, block bytes)."""
    per_block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n = POOL_BYTES // block_bytes
    data = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    offsets, spread = F16_FIELDS[qtype]
    for at in offsets:
        d = (rng.uniform(0.5, 1.5, size=n) / (spread * np.sqrt(cols))).astype(np.float16)
        data[:, at:at + 2] = d.view(np.uint8).reshape(n, 2)
    return data


def blocks(rng: np.random.Generator, pools: dict, qtype: Q, rows: int, cols: int) -> np.ndarray:
    """Random blocks of `qtype` for a (rows, cols) matrix: the pool for (qtype, cols), from a
    random block on, wrapping round."""
    per_block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if cols % per_block:
        raise SystemExit(f"error: {cols} columns are not whole {qtype.name} blocks of {per_block}")
    if (qtype, cols) not in pools:
        pools[(qtype, cols)] = pool(rng, qtype, cols)
    src = pools[(qtype, cols)]
    n = rows * cols // per_block
    take = (int(rng.integers(0, len(src))) + np.arange(n)) % len(src) if n > len(src) else None
    if take is None:
        start = int(rng.integers(0, len(src) - n + 1))
        data = src[start:start + n]
    else:
        data = src[take]
    return np.ascontiguousarray(data).reshape(rows, cols // per_block * block_bytes)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES))
    p.add_argument("--mix", choices=sorted(MIXES))
    p.add_argument("--vocab-only", action="store_true",
                   help="write the tokenizer's metadata alone (no tensors, no --shape or --mix)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tokenizer-from", type=Path, default=SMOLLM2,
                   help="a GGUF whose tokenizer.* keys are copied (default: SmolLM2's)")
    a = p.parse_args()
    if a.vocab_only != (a.shape is None and a.mix is None) or (a.shape is None) != (a.mix is None):
        p.error("give --shape and --mix, or --vocab-only alone")
    if os.path.lexists(a.out):
        print(f"error: {a.out} exists; this script never overwrites a file", file=sys.stderr)
        return 1
    if not a.tokenizer_from.is_file():
        print(f"error: {a.tokenizer_from} is missing; fetch it with: cargo xtask fetch-models smollm2-gguf",
              file=sys.stderr)
        return 1
    src = gguf.GGUFReader(a.tokenizer_from)
    if a.vocab_only:
        return write_vocab(src, a.tokenizer_from, a.out)
    layers, dim, heads, kv_heads, ffn = SHAPES[a.shape]
    gemma = a.shape == "gemma3"
    head_dim = GEMMA3["head_dim"] if gemma else dim // heads
    vocab = len(src.fields["tokenizer.ggml.tokens"].data)

    # (name, rows, cols, type); rows are the output features, as GGUF stores (cols, rows)
    tensors = [("token_embd.weight", vocab, dim, Q.Q8_0)]
    for i in range(layers):
        b = f"blk.{i}"
        mix = gemma3_q4_k_m(i, layers) if gemma and a.mix == "q4_k_m" else MIXES[a.mix]
        tensors += [
            (f"{b}.attn_norm.weight", 1, dim, Q.F32),
            (f"{b}.attn_q.weight", heads * head_dim, dim, mix["q"]),
            (f"{b}.attn_k.weight", kv_heads * head_dim, dim, mix["k"]),
            (f"{b}.attn_v.weight", kv_heads * head_dim, dim, mix["v"]),
            (f"{b}.attn_output.weight", dim, heads * head_dim, mix["o"]),
            (f"{b}.ffn_norm.weight", 1, dim, Q.F32),
            (f"{b}.ffn_gate.weight", ffn, dim, mix["gate"]),
            (f"{b}.ffn_up.weight", ffn, dim, mix["up"]),
            (f"{b}.ffn_down.weight", dim, ffn, mix["down"]),
        ]
        if gemma:
            tensors += [
                (f"{b}.attn_q_norm.weight", 1, head_dim, Q.F32),
                (f"{b}.attn_k_norm.weight", 1, head_dim, Q.F32),
                (f"{b}.post_attention_norm.weight", 1, dim, Q.F32),
                (f"{b}.post_ffw_norm.weight", 1, dim, Q.F32),
            ]
    tensors += [("output_norm.weight", 1, dim, Q.F32)]
    if not gemma:
        tensors += [("output.weight", vocab, dim, MIXES[a.mix]["output"])]

    a.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".synthetic-", suffix=".gguf", dir=a.out.parent)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, "gemma3" if gemma else "llama")
        family = "Gemma-3" if gemma else "Llama"
        w.add_name(f"synthetic {family} {a.shape} {a.mix} (random weights, seed {a.seed})")
        w.add_context_length(GEMMA3["context"] if gemma else 4096 + 512)
        w.add_embedding_length(dim)
        w.add_block_count(layers)
        w.add_feed_forward_length(ffn)
        w.add_head_count(heads)
        w.add_head_count_kv(kv_heads)
        if gemma:
            w.add_key_length(head_dim)
            w.add_value_length(head_dim)
            w.add_rope_freq_base(GEMMA3["rope_base"])
            w.add_sliding_window(GEMMA3["window"])
            w.add_layer_norm_rms_eps(GEMMA3["eps"])
        else:
            w.add_rope_dimension_count(head_dim)
            w.add_rope_freq_base(10000.0)
            w.add_layer_norm_rms_eps(1e-5)
            w.add_vocab_size(vocab)
        for key, field in src.fields.items():
            if key.startswith("tokenizer."):
                copy_field(w, key, field)
        for name, rows, cols, qtype in tensors:
            if qtype == Q.F32:
                w.add_tensor_info(name, [cols], np.dtype(np.float32), cols * 4)
            else:
                per_block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
                nbytes = rows * cols // per_block * block_bytes
                w.add_tensor_info(name, [rows, cols // per_block * block_bytes], np.dtype(np.uint8),
                                  nbytes, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        rng = np.random.default_rng(a.seed)
        pools = {}
        total = 0
        for i, (name, rows, cols, qtype) in enumerate(tensors):
            data = np.ones(cols, dtype=np.float32) if qtype == Q.F32 else blocks(rng, pools, qtype, rows, cols)
            w.write_tensor_data(data)
            total += data.nbytes
            print(f"\r  {i + 1}/{len(tensors)} tensors, {total / 1e9:.2f} GB", end="", file=sys.stderr)
        w.close()
        print(file=sys.stderr)
        if os.path.lexists(a.out):
            print(f"error: {a.out} appeared while this ran; left it alone", file=sys.stderr)
            return 1
        os.chmod(tmp, 0o644)  # mkstemp makes it private
        os.rename(tmp, a.out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)  # this run's own temporary file
    params = sum(r * c for _, r, c, _ in tensors)
    print(f"wrote {a.out}: {a.shape} ({params / 1e9:.2f}B parameters), {a.mix}, {os.path.getsize(a.out) / 1e9:.2f} GB")
    return 0


def write_vocab(src: gguf.GGUFReader, origin: Path, out: Path) -> int:
    """Writes the tokenizer.* keys of `src` alone into `out` (temporary file, then renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".vocab-", suffix=".gguf", dir=out.parent)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, "llama")
        for key, field in src.fields.items():
            if key.startswith("tokenizer."):
                copy_field(w, key, field)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        if os.path.lexists(out):
            print(f"error: {out} appeared while this ran; left it alone", file=sys.stderr)
            return 1
        os.chmod(tmp, 0o644)
        os.rename(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)  # this run's own temporary file
    print(f"wrote {out}: the tokenizer of {origin.name}, {os.path.getsize(out) / 1e6:.1f} MB")
    return 0


def copy_field(w: gguf.GGUFWriter, key: str, field) -> None:
    """Copies one metadata field from a reader to a writer, keeping its type."""
    t = field.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            values = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
        else:
            values = [field.parts[i].tolist()[0] for i in field.data]
        w.add_key_value(key, values, t, sub_type=sub)
    elif t == gguf.GGUFValueType.STRING:
        w.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8"), t)
    else:
        w.add_key_value(key, field.parts[field.data[0]].tolist()[0], t)


if __name__ == "__main__":
    sys.exit(main())
