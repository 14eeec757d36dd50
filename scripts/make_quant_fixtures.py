"""Writes chapter 6's quantization fixtures in fixtures/quant/.

    bash scripts/models.sh smollm2
    .venv/bin/python scripts/make_quant_fixtures.py

quantizers.json: blocks of f32 values (random and adversarial) and the bytes the `gguf`
package's numpy quantizers (the same rules as llama.cpp's reference C quantizers) make of
them in Q8_0, Q4_0 and Q4_1. Chapter 6's Rust quantizers must produce the same bytes.

smollm2-shipped-blocks.json: for every quantized tensor of SmolLM2's shipped Q4_1 GGUF, the
sha256 of its raw blocks in Hugging Face row order (llama.cpp's converter permutes the rows
of the Q and K projections; blocks never straddle rows, so un-permuting whole rows of
blocks gives the order of models/.../hf/model.safetensors). Quantizing those f32 weights
with the same rule must give these bytes.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import quantize

import hf_convert
import models

OUT = models.ROOT / "fixtures" / "quant"
QTYPES = {"q8_0": GGMLQuantizationType.Q8_0, "q4_0": GGMLQuantizationType.Q4_0, "q4_1": GGMLQuantizationType.Q4_1}


def cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(20261122)
    out: list[tuple[str, np.ndarray]] = []
    for i in range(6):
        out.append((f"normal-{i}", rng.standard_normal(64)))
    for i in range(6):
        out.append((f"weights-like-{i}", rng.normal(0.0, 0.02, 96)))
    for i in range(4):
        out.append((f"uniform-{i}", rng.uniform(-3.0, 5.0, 32)))
    for i in range(4):
        out.append((f"heavy-tailed-{i}", rng.standard_t(2.0, 128)))
    one_huge = rng.normal(0.0, 0.01, 32)
    one_huge[11] = 40.0
    near_f16_max = rng.uniform(-6.0e4, 6.0e4, 32)
    near_f16_max[3] = 6.5e4
    midpoints = np.arange(32, dtype=np.float64) - 15.5   # x / d lands on k + 0.5 for q4 rules
    midpoints_q8 = np.concatenate([[127.0], np.arange(31) + 0.5])  # d = 1: x·(1/d) = k + 0.5
    flat_but_one = np.full(32, 0.25)
    flat_but_one[30] = -0.75
    out += [
        ("zeros", np.zeros(32)),
        ("one-huge", one_huge),
        ("all-equal-positive", np.full(32, 1.5)),
        ("all-equal-negative", np.full(32, -2.25)),
        ("negative-only", -np.abs(rng.standard_normal(32)) - 0.1),
        ("positive-only", np.abs(rng.standard_normal(32)) + 0.1),
        ("alternating", np.array([(-1.0) ** j * (1 + j / 10) for j in range(32)])),
        ("midpoints", midpoints),
        ("midpoints-q8", midpoints_q8),
        ("tiny", rng.uniform(-1e-6, 1e-6, 32)),
        ("near-f16-max", near_f16_max),
        ("flat-but-one", flat_but_one),
    ]
    return [(name, values.astype(np.float32)) for name, values in out]


def quantizers() -> dict:
    entries = []
    for name, x in cases():
        entry = {
            "name": name,
            "values": [float(v) for v in x],            # each the exact float64 of an f32
            "bits": x.view("<u4").tolist(),              # the same values as f32 bit patterns
        }
        for key, qtype in QTYPES.items():
            entry[key] = quantize(x.reshape(1, -1), qtype).tobytes().hex()
        entries.append(entry)
    return {"generator": f"gguf {version('gguf')} (gguf.quants.quantize)", "cases": entries}


def row_order_bytes(raw: np.ndarray, rows: int, heads: int | None) -> bytes:
    """The tensor's raw block bytes with its rows in Hugging Face order."""
    by_row = raw.reshape(rows, -1)
    if heads:
        by_row = hf_convert.unpermute_rows(by_row, heads)
    return np.ascontiguousarray(by_row).tobytes()


def shipped_blocks() -> dict:
    path = models.models_dir() / models.SMOLLM2.subdir / models.SMOLLM2.filename
    if not path.exists():
        raise models.Failure(f"{path} is missing; run `bash scripts/models.sh smollm2` first")
    reader = GGUFReader(path)
    cfg = hf_convert.llama_config(reader)
    hf_names = {g: h for h, g, _ in hf_convert.tensor_plan(cfg)}
    tensors = []
    for t in reader.tensors:
        kind = GGMLQuantizationType(t.tensor_type).name
        if kind in ("F32", "F16"):
            continue
        rows = int(t.shape[1])
        hf_order = row_order_bytes(np.asarray(t.data), rows, hf_convert.heads_for(t.name, cfg))
        tensors.append({
            "gguf_name": t.name,
            "hf_name": hf_names[t.name],
            "type": kind.lower(),
            "shape": [rows, int(t.shape[0])],
            "bytes": len(hf_order),
            "sha256_hf_order": hashlib.sha256(hf_order).hexdigest(),
            "sha256_file_order": hashlib.sha256(np.asarray(t.data).tobytes()).hexdigest(),
            "first_bytes_hex": hf_order[:64].hex(),
        })
    return {
        "model": models.SMOLLM2.filename,
        "model_sha256": models.SMOLLM2.sha256,
        "method": "raw block bytes of each quantized tensor, rows reordered to Hugging Face order "
                  "(Q and K projections un-permuted as scripts/hf_convert.py does), sha256 over all of them",
        "tensors": tensors,
    }


def write(name: str, value: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(models.ROOT)} ({path.stat().st_size} bytes)")


def main() -> int:
    write("quantizers.json", quantizers())
    write("smollm2-shipped-blocks.json", shipped_blocks())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
