"""A minimal reader and writer for the safetensors format, F32 only.

The format, as the chapter 1 loader reads it:

    [8 bytes]  N, the header length, unsigned little-endian
    [N bytes]  JSON: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
                      "__metadata__": {"format": "pt"}}
    [rest]     the tensors' raw little-endian bytes, back to back; offsets count from here

The header is padded with spaces so the data starts on an 8-byte boundary, and every
tensor here has an even number of f32 elements, so every tensor starts 8-byte aligned too
(the format forbids gaps between tensors, so alignment has to come from the sizes).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Callable, Iterable

import numpy as np


def write(path: Path, specs: list[tuple[str, tuple[int, ...]]],
          produce: Callable[[str], np.ndarray], on_tensor: Callable[[int, str], None] | None = None) -> None:
    """Writes the tensors named in `specs` (name, shape), in that order, to `path`.

    `produce(name)` returns the tensor's values; it is called once per tensor, in order,
    so only one tensor is in memory at a time.
    """
    header: dict[str, object] = {}
    offset = 0
    for name, shape in specs:
        size = 4 * int(np.prod(shape, dtype=np.int64))
        if size % 8 != 0:
            raise ValueError(f"{name}: {shape} has an odd number of elements; it would misalign the next tensor")
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)

    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for index, (name, shape) in enumerate(specs):
            values = np.ascontiguousarray(produce(name), dtype="<f4")
            if values.shape != tuple(shape):
                raise ValueError(f"{name}: produced shape {values.shape}, header says {tuple(shape)}")
            out.write(values.tobytes())
            if on_tensor is not None:
                on_tensor(index, name)


def expected_size(path: Path) -> int:
    """The file size the header implies: 8 + header length + the largest data end offset."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", prefix)
        if n > 100_000_000:
            raise ValueError(f"{path}: header length {n} is implausible")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return 8 + n + max((info["data_offsets"][1] for info in header.values()), default=0)


class SafeTensors:
    """Read-only view of an F32 safetensors file, memory-mapped."""

    def __init__(self, path: Path):
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        if raw.size < 8:
            raise ValueError(f"{path}: {raw.size} bytes is too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw[:8].tobytes())
        if 8 + n > raw.size:
            raise ValueError(f"{path}: header length {n} runs past the end of the file")
        self.header = json.loads(raw[8:8 + n].tobytes())
        self.metadata = self.header.pop("__metadata__", {})
        self._data = raw[8 + n:]

    def names(self) -> Iterable[str]:
        return self.header.keys()

    def get(self, name: str) -> np.ndarray:
        info = self.header[name]
        if info["dtype"] != "F32":
            raise ValueError(f"{name}: dtype {info['dtype']}, this reader handles F32 only")
        begin, end = info["data_offsets"]
        return self._data[begin:end].view("<f4").reshape(info["shape"])
