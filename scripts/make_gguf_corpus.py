"""Writes chapter 8's hostile-input corpus: one small valid GGUF file and one broken file per
defect, with a manifest saying what error each broken file must get.

    python3 scripts/make_gguf_corpus.py

The files land in fixtures/gguf-corpus/ (a few hundred bytes each, committed). The GGUF
bytes are laid out here by hand with `struct`, not with the `gguf` package, so that the
corpus does not share a misreading of the format with any parser it tests. Running the
script again gives identical bytes. It writes only the files its manifest names and never
deletes anything (fixtures/gguf-corpus/regressions/, written by hand from fuzzer finds, is
left alone).

Layout of a GGUF v3 file (every integer little-endian, a string = u64 length + UTF-8 bytes):

    "GGUF"  u32 version  u64 tensor_count  u64 metadata_count
    metadata_count x (string key, u32 value type, value)
    tensor_count   x (string name, u32 n_dims, n_dims x u64 dim, u32 ggml type, u64 offset)
    zero padding to general.alignment, then the data section
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "gguf-corpus"
ALIGNMENT = 32

# GGUF value type ids.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# struct codes of the fixed-size value types.
FIXED = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f",
         BOOL: "?", U64: "Q", I64: "q", F64: "d"}

# ggml tensor type ids, with (values per block, bytes per block).
GGML_F32, GGML_Q4_1, GGML_Q8_0 = 0, 3, 8
BLOCKS = {GGML_F32: (1, 4), GGML_Q4_1: (32, 20), GGML_Q8_0: (32, 34)}


# ---------------------------------------------------------------- encoding
class Enc:
    """Packs integers and strings in one byte order ('<' little-endian, '>' big-endian)."""

    def __init__(self, order: str = "<"):
        self.order = order

    def pack(self, code: str, v) -> bytes:
        return struct.pack(self.order + code, v)

    def u32(self, v: int) -> bytes:
        return self.pack("I", v)

    def u64(self, v: int) -> bytes:
        return self.pack("Q", v)

    def string(self, s: str | bytes, length: int | None = None) -> bytes:
        """A GGUF string; `length` overrides the length field (to lie about it)."""
        raw = s.encode() if isinstance(s, str) else s
        return self.u64(len(raw) if length is None else length) + raw

    def value(self, ty: int, v) -> bytes:
        """The bytes of one value of type `ty`; an array is `(element type, items)`."""
        if ty in FIXED:
            return self.pack(FIXED[ty], v)
        if ty == STRING:
            return self.string(v)
        if ty == ARRAY:
            elem, items = v
            return self.u32(elem) + self.u64(len(items)) + b"".join(self.value(elem, x) for x in items)
        raise ValueError(f"no GGUF value type {ty}")


def kv(key: str | bytes, ty: int, v, e: Enc = Enc()) -> bytes:
    """One metadata entry: key, value type, value."""
    return e.string(key) + e.u32(ty) + e.value(ty, v)


def kv_raw(key: str | bytes, ty: int, payload: bytes, e: Enc = Enc()) -> bytes:
    """A metadata entry whose value bytes are given as they are (to break them)."""
    return e.string(key) + e.u32(ty) + payload


def tensor_info(name: str | bytes, dims: list[int], ty: int, offset: int,
                e: Enc = Enc(), n_dims: int | None = None) -> bytes:
    """One tensor description; `n_dims` overrides the dimension count written."""
    count = len(dims) if n_dims is None else n_dims
    return e.string(name) + e.u32(count) + b"".join(e.u64(d) for d in dims) + e.u32(ty) + e.u64(offset)


def pad_to(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def assemble(kvs: list[bytes], infos: list[bytes], data: bytes, *, e: Enc = Enc(),
             magic: bytes = b"GGUF", version: int = 3,
             n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
    """Header, metadata, tensor descriptions, padding to ALIGNMENT, data."""
    head = (magic + e.u32(version)
            + e.u64(len(infos) if n_tensors is None else n_tensors)
            + e.u64(len(kvs) if n_kv is None else n_kv)
            + b"".join(kvs) + b"".join(infos))
    return head + bytes(pad_to(len(head), ALIGNMENT) - len(head)) + data


# ---------------------------------------------------------------- the valid file
def f16(x: float) -> bytes:
    return struct.pack("<e", x)


def q8_0_block(scale: float, qs: list[int]) -> bytes:
    """Q8_0: f16 scale d, then 32 signed bytes; value i = d * qs[i]."""
    assert len(qs) == 32
    return f16(scale) + struct.pack("<32b", *qs)


def q4_1_block(d: float, m: float, nibbles: list[int]) -> bytes:
    """Q4_1: f16 scale d, f16 minimum m, 16 bytes; value i = d * q[i] + m, with q[i] in the
    low nibble of byte i for i < 16 and the high nibble of byte i - 16 after."""
    assert len(nibbles) == 32
    packed = bytes(nibbles[i] | (nibbles[i + 16] << 4) for i in range(16))
    return f16(d) + f16(m) + packed


# (name, ggml dims with the row length first, type, bytes)
TENSORS = [
    ("norm.weight", [4], GGML_F32, struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)),
    ("q8.weight", [32, 2], GGML_Q8_0,
     q8_0_block(0.5, [i - 16 for i in range(32)]) + q8_0_block(-0.25, [(7 * i) % 41 - 20 for i in range(32)])),
    ("q4_1.weight", [32, 1], GGML_Q4_1, q4_1_block(0.125, -1.0, [i % 16 for i in range(32)])),
]


def layout(tensors=TENSORS) -> tuple[list[int], bytes]:
    """Offsets in the data section (each a multiple of ALIGNMENT) and the section itself,
    each tensor followed by zero padding to ALIGNMENT, as llama.cpp's writer does."""
    offsets, data = [], b""
    for _, dims, ty, raw in tensors:
        per_block, block_bytes = BLOCKS[ty]
        n = 1
        for d in dims:
            n *= d
        assert len(raw) == n // per_block * block_bytes
        offsets.append(len(data))
        data += raw + bytes(pad_to(len(raw), ALIGNMENT) - len(raw))
    return offsets, data


OFFSETS, DATA = layout()


def valid_kvs(e: Enc = Enc(), **replace: bytes) -> list[bytes]:
    """The valid file's metadata, one entry of every value type; `replace` swaps an entry
    (by key, dots as underscores) for other bytes."""
    entries = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "hostile-input corpus"),
        ("general.alignment", U32, ALIGNMENT),
        ("llama.embedding_length", U32, 8),
        ("llama.block_count", U32, 1),
        ("llama.attention.head_count", U32, 2),
        ("llama.attention.head_count_kv", U32, 1),
        ("llama.feed_forward_length", U32, 16),
        ("llama.context_length", U32, 64),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.freq_base", F32, 10000.0),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<unk>", "<s>", "</s>", "\u2581a", "b"])),
        ("tokenizer.ggml.scores", ARRAY, (F32, [0.0, 0.0, 0.0, -1.0, -2.0])),
        ("tokenizer.ggml.token_type", ARRAY, (I32, [2, 3, 3, 1, 1])),
        ("tokenizer.ggml.bos_token_id", U32, 1),
        ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("corpus.u8", U8, 200),
        ("corpus.i8", I8, -7),
        ("corpus.u16", U16, 65535),
        ("corpus.i16", I16, -300),
        ("corpus.i32", I32, -70000),
        ("corpus.u64", U64, 1 << 40),
        ("corpus.i64", I64, -(1 << 40)),
        ("corpus.f64", F64, 0.1),
        ("corpus.u64s", ARRAY, (U64, [1, 1 << 40, (1 << 64) - 1])),
        ("corpus.bools", ARRAY, (BOOL, [True, False, True])),
        ("corpus.nested", ARRAY, (ARRAY, [(U16, [1, 2, 3]), (STRING, ["inner"])])),
    ]
    out = []
    for key, ty, v in entries:
        swap = replace.pop(key.replace(".", "_"), None)
        out.append(kv(key, ty, v, e) if swap is None else swap)
    assert not replace, f"no metadata key for {sorted(replace)}"
    return out


def valid_infos(e: Enc = Enc(), **replace: bytes) -> list[bytes]:
    """The valid file's tensor descriptions; `replace` swaps one (by name, dots as
    underscores) for other bytes."""
    out = []
    for (name, dims, ty, _), off in zip(TENSORS, OFFSETS):
        swap = replace.pop(name.replace(".", "_"), None)
        out.append(tensor_info(name, dims, ty, off, e) if swap is None else swap)
    assert not replace, f"no tensor for {sorted(replace)}"
    return out


def valid(e: Enc = Enc()) -> bytes:
    return assemble(valid_kvs(e), valid_infos(e), DATA, e=e)


def header_end() -> int:
    """Where the valid file's tensor descriptions end (before the padding)."""
    return 24 + sum(map(len, valid_kvs())) + sum(map(len, valid_infos()))


# ---------------------------------------------------------------- the broken files
def nested(depth: int) -> bytes:
    """The value bytes of arrays nested `depth` deep: each holds one array, the innermost
    is an empty array of u8."""
    e = Enc()
    inner = e.u32(U8) + e.u64(0)
    for _ in range(depth - 1):
        inner = e.u32(ARRAY) + e.u64(1) + inner
    return inner


def malformed() -> list[tuple[str, str, str, bytes]]:
    """(file name, the defect, a phrase its error must contain, bytes)."""
    e = Enc()
    good = valid()
    data_offset = pad_to(header_end(), ALIGNMENT)
    f32_end = OFFSETS[0] + len(TENSORS[0][3])
    q4_name, q4_dims, q4_ty, _ = TENSORS[2]
    two_62, two_60 = 1 << 62, 1 << 60

    def with_kvs(**replace: bytes) -> bytes:
        return assemble(valid_kvs(**replace), valid_infos(), DATA)

    def with_infos(**replace: bytes) -> bytes:
        return assemble(valid_kvs(), valid_infos(**replace), DATA)

    def q4_1(dims=q4_dims, ty=q4_ty, offset=OFFSETS[2], name=q4_name, n_dims=None) -> bytes:
        return tensor_info(name, dims, ty, offset, n_dims=n_dims)

    return [
        ("empty.gguf", "a file of 0 bytes", "truncated file", b""),
        ("short.gguf", "the magic and version, then the file ends (12 bytes)",
         "truncated file", good[:12]),
        ("bad-magic.gguf", "starts with \"GGML\" instead of \"GGUF\"", "not a GGUF file",
         b"GGML" + good[4:]),
        ("version-1.gguf", "version 1 (32-bit counts, long gone)", "GGUF version 1",
         assemble(valid_kvs(), valid_infos(), DATA, version=1)),
        ("version-4.gguf", "version 4, which does not exist yet", "GGUF version 4",
         assemble(valid_kvs(), valid_infos(), DATA, version=4)),
        ("big-endian.gguf", "the valid file written big-endian throughout", "big-endian",
         valid(Enc(">"))),
        ("tensor-count-2e62.gguf", "a tensor count of 2^62", "the tensor count",
         assemble(valid_kvs(), valid_infos(), DATA, n_tensors=two_62)),
        ("metadata-count-2e62.gguf", "a metadata count of 2^62", "the metadata count",
         assemble(valid_kvs(), valid_infos(), DATA, n_kv=two_62)),
        ("string-length-2e60.gguf", "general.name's string claims 2^60 bytes",
         f"needs {two_60} bytes",
         with_kvs(general_name=e.string("general.name") + e.u32(STRING) + e.string("x", length=two_60))),
        ("key-length-max.gguf", "general.name's key claims 2^64 - 1 bytes",
         f"needs {(1 << 64) - 1} bytes",
         with_kvs(general_name=e.string("general.name", length=(1 << 64) - 1) + e.u32(STRING) + e.string("x"))),
        ("key-not-utf8.gguf", "a metadata key with the bytes ff fe in it", "not UTF-8",
         with_kvs(general_name=kv(b"general.\xff\xfename", STRING, "x"))),
        ("value-type-13.gguf", "a value of type 13 (the types stop at 12)", "value type 13",
         with_kvs(corpus_u8=kv_raw("corpus.u8", 13, b"\x00"))),
        ("bool-7.gguf", "a bool whose byte is 7", "a bool must be 0 or 1, found 7",
         with_kvs(tokenizer_ggml_add_bos_token=kv_raw("tokenizer.ggml.add_bos_token", BOOL, b"\x07"))),
        ("bool-array-2.gguf", "an array of bools holding a 2", "a bool must be 0 or 1, found 2",
         with_kvs(corpus_bools=kv_raw("corpus.bools", ARRAY, e.u32(BOOL) + e.u64(3) + b"\x01\x02\x00"))),
        ("array-count-2e62.gguf", "an array of u64 with a count of 2^62",
         "the element count of corpus.u64s",
         with_kvs(corpus_u64s=kv_raw("corpus.u64s", ARRAY, e.u32(U64) + e.u64(two_62) + e.u64(1)))),
        ("string-array-past-eof.gguf", "an array of 10^6 strings in a file of 1 KiB",
         "the element count of tokenizer.ggml.tokens",
         with_kvs(tokenizer_ggml_tokens=kv_raw("tokenizer.ggml.tokens", ARRAY,
                                               e.u32(STRING) + e.u64(10**6) + e.string("<unk>")))),
        ("array-element-type-13.gguf", "an array whose elements are of type 13", "value type 13",
         with_kvs(corpus_u64s=kv_raw("corpus.u64s", ARRAY, e.u32(13) + e.u64(1) + e.u64(1)))),
        ("nested-100-deep.gguf", "arrays nested 100 deep", "nested more than 8 deep",
         with_kvs(corpus_nested=kv_raw("corpus.nested", ARRAY, nested(100)))),
        ("duplicate-key.gguf", "general.name twice", "`general.name`: appears twice",
         assemble(valid_kvs() + [kv("general.name", STRING, "again")], valid_infos(), DATA)),
        ("alignment-3.gguf", "general.alignment = 3, not a power of two", "must be a u32 power of two",
         with_kvs(general_alignment=kv("general.alignment", U32, 3))),
        ("alignment-0.gguf", "general.alignment = 0", "must be a u32 power of two",
         with_kvs(general_alignment=kv("general.alignment", U32, 0))),
        ("alignment-string.gguf", "general.alignment = \"32\", a string", "must be a u32 power of two",
         with_kvs(general_alignment=kv("general.alignment", STRING, "32"))),
        ("tensor-name-65-bytes.gguf", "a tensor name of 65 bytes (llama.cpp's limit is 64)", "at most 64",
         with_infos(q4_1_weight=q4_1(name="n" * 65))),
        ("tensor-0-dims.gguf", "a tensor with n_dims = 0", "0 dimensions",
         with_infos(q4_1_weight=q4_1(dims=[], n_dims=0))),
        ("tensor-5-dims.gguf", "a tensor with n_dims = 5", "5 dimensions",
         with_infos(q4_1_weight=q4_1(dims=[32, 1, 1, 1, 1]))),
        ("tensor-n-dims-lies.gguf", "n_dims = 4 but the file ends before the fourth dimension",
         "truncated file", with_infos(q4_1_weight=q4_1(n_dims=4))[:header_end()]),
        ("dimension-0.gguf", "a tensor of shape [32, 0]", "dimension 1 is 0",
         with_infos(q4_1_weight=q4_1(dims=[32, 0]))),
        ("dimension-2e63.gguf", "a dimension of 2^63 (more than i64::MAX)", f"dimension 1 is {1 << 63}",
         with_infos(q4_1_weight=q4_1(dims=[32, 1 << 63]))),
        ("dims-product-overflow.gguf", "an F32 tensor of shape [2^32, 2^32]: 2^64 values",
         "2^64 values or more",
         with_infos(norm_weight=tensor_info("norm.weight", [1 << 32, 1 << 32], GGML_F32, OFFSETS[0]))),
        ("bytes-overflow.gguf", "an F32 tensor of 2^62 values: 2^64 bytes", "2^64 bytes or more",
         with_infos(norm_weight=tensor_info("norm.weight", [1 << 31, 1 << 31], GGML_F32, OFFSETS[0]))),
        ("tensor-type-4.gguf", "tensor type 4 (Q4_2, removed from ggml)", "type 4 is not a ggml type",
         with_infos(q4_1_weight=q4_1(ty=4))),
        ("tensor-type-99.gguf", "tensor type 99", "type 99 is not a ggml type",
         with_infos(q4_1_weight=q4_1(ty=99))),
        ("q8_0-row-33.gguf", "a Q8_0 tensor whose rows hold 33 values (blocks hold 32)",
         "rows of 33 values are not whole Q8_0 blocks",
         with_infos(q8_weight=tensor_info("q8.weight", [33, 2], GGML_Q8_0, OFFSETS[1]))),
        ("offset-unaligned.gguf", "a tensor at data offset 129 with alignment 32",
         "offset 129 is not a multiple of the alignment 32",
         with_infos(q4_1_weight=q4_1(offset=OFFSETS[2] + 1))),
        ("tensor-past-eof.gguf", "a tensor at data offset 4096 in a file of 1 KiB",
         "run past the end of the file", with_infos(q4_1_weight=q4_1(offset=4096))),
        ("offset-overflow.gguf", "the Q8_0 tensor (68 bytes) at data offset 2^64 - 32: the end overflows",
         "run past the end of the file",
         with_infos(q8_weight=tensor_info("q8.weight", [32, 2], GGML_Q8_0, (1 << 64) - 32))),
        ("overlapping-tensors.gguf", "the Q4_1 tensor placed inside the Q8_0 one",
         "overlaps tensor `q8.weight`", with_infos(q4_1_weight=q4_1(offset=OFFSETS[1] + 32))),
        ("overlap-same-offset.gguf", "the Q4_1 tensor at the same offset as the F32 one",
         "overlaps tensor", with_infos(q4_1_weight=q4_1(offset=OFFSETS[0]))),
        ("duplicate-tensor.gguf", "two tensors named norm.weight", "tensor `norm.weight`: appears twice",
         with_infos(q4_1_weight=q4_1(name="norm.weight"))),
        ("truncated-header.gguf", "the valid file cut inside the metadata (at byte 200)",
         "truncated file", good[:200]),
        ("truncated-padding.gguf", "the valid file cut after the tensor descriptions, before the data section",
         "the padding before the data section", good[:header_end()]),
        ("truncated-data.gguf", "the valid file cut in the middle of the data section",
         "run past the end of the file", good[:data_offset + f32_end + 40]),
    ]


# ---------------------------------------------------------------- writing
def write(path: Path, data: bytes) -> None:
    """Writes `data` unless the file already holds it (so a rerun touches nothing)."""
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def main() -> None:
    good = valid()
    assert header_end() % ALIGNMENT != 0, "the corpus needs padding before the data section"
    broken = malformed()
    names = [name for name, *_ in broken]
    assert len(set(names)) == len(names), "two broken files share a name"
    for name, _, _, data in [("valid.gguf", "", "", good)] + broken:
        assert len(data) < 4096, f"{name} is {len(data)} bytes; keep the corpus tiny"

    OUT.mkdir(parents=True, exist_ok=True)
    write(OUT / "valid.gguf", good)
    for name, _, _, data in broken:
        write(OUT / name, data)
    manifest = {
        "written_by": "scripts/make_gguf_corpus.py",
        "valid": {
            "file": "valid.gguf",
            "bytes": len(good),
            "header_end": header_end(),
            "data_offset": pad_to(header_end(), ALIGNMENT),
            "tensors": [{"name": n, "dims": d, "type": t, "offset": o, "size": len(raw)}
                        for (n, d, t, raw), o in zip(TENSORS, OFFSETS)],
        },
        "malformed": [{"file": name, "defect": defect, "error_contains": phrase}
                      for name, defect, phrase, _ in broken],
    }
    write(OUT / "manifest.json", (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode())
    print(f"wrote valid.gguf ({len(good)} bytes), {len(broken)} malformed files and "
          f"manifest.json to {OUT.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
