"""Writes chapter 8's K-quant fixture, fixtures/quant/gemma3-rows.json.

    bash scripts/models.sh gemma3
    .venv/bin/python scripts/make_kquant_fixtures.py

For one tensor of each block type in Gemma-3-270M's Q4_K_M file (Q4_K, Q6_K, Q5_0, Q8_0),
three rows (first, second, last) dequantized by the `gguf` package's numpy code, which
follows llama.cpp's reference C dequantizers. Chapter 8's Rust dequantizers, reading the
same rows from the file, must give the same floats.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

import models

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "quant" / "gemma3-rows.json"
TENSORS = {
    "Q4_K": "blk.0.attn_output.weight",
    "Q6_K": None,  # the first ffn_down stored as Q6_K
    "Q5_0": "blk.0.attn_q.weight",
    "Q8_0": "token_embd.weight",
}


def main() -> None:
    path = models.models_dir() / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run bash scripts/models.sh gemma3")
    reader = GGUFReader(path)
    by_name = {t.name: t for t in reader.tensors}
    out = {"file": path.name, "gguf_package": version("gguf"), "rows": []}
    for ty, name in TENSORS.items():
        if name is None:
            name = next(t.name for t in reader.tensors
                        if t.name.endswith("ffn_down.weight") and t.tensor_type.name == ty)
        t = by_name[name]
        assert t.tensor_type.name == ty, (name, t.tensor_type.name)
        raw = np.asarray(t.data)  # (rows, bytes per row) of uint8
        n_rows = raw.shape[0]
        for r in sorted({0, 1, n_rows - 1}):
            values = dequantize(raw[r : r + 1], t.tensor_type).reshape(-1)
            out["rows"].append({
                "type": ty, "tensor": name, "row": r,
                "values": [float(v) for v in values.astype(np.float32)],
            })
    OUT.write_text(json.dumps(out) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(out['rows'])} rows")


if __name__ == "__main__":
    main()
