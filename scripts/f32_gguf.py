"""Writes an all-F32 copy of a GGUF: every tensor dequantized with the gguf package.

llama.cpp run on this copy (with an F32 KV cache) is the book's f32 oracle: the same
weights our F32 safetensors hold, the same tensor order and Q/K row permutation as the
original GGUF, and no quantized arithmetic anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

FILE_TYPE_ALL_F32 = 0   # general.file_type: llama.cpp's LLAMA_FTYPE_ALL_F32


def write_f32_copy(src: Path, dst: Path, say: Callable[[str], None]) -> None:
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    partial = dst.with_name(dst.name + ".partial")
    writer = GGUFWriter(partial, arch=arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue    # the writer adds these itself
        value = field.contents()
        if field.name == "general.file_type":
            value = FILE_TYPE_ALL_F32
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)

    for t in reader.tensors:
        rows = tuple(int(n) for n in reversed(t.shape))      # numpy order, outermost first
        nbytes = 4 * int(np.prod(rows))
        writer.add_tensor_info(t.name, rows, np.dtype(np.float32), nbytes, GGMLQuantizationType.F32)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for i, t in enumerate(reader.tensors):
            values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
            writer.write_tensor_data(np.ascontiguousarray(values).reshape(tuple(int(n) for n in reversed(t.shape))))
            if (i + 1) % 60 == 0 or i + 1 == len(reader.tensors):
                say(f"  wrote {i + 1}/{len(reader.tensors)} tensors as F32")
        writer.close()
        os.replace(partial, dst)
    finally:
        writer.close()
        partial.unlink(missing_ok=True)
