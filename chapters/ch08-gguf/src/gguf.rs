//! The GGUF container: a header, metadata, tensor descriptions, then the tensors' bytes.
//!
//! ```text
//! offset 0   "GGUF"  u32 version (2 or 3)  u64 tensor_count  u64 metadata_count
//!            metadata_count × (string key, u32 value type, value)
//!            tensor_count   × (string name, u32 n_dims, n_dims × u64 dim, u32 type, u64 offset)
//!            padding to `general.alignment` (default 32)
//! data       the tensors, each at data + offset, each offset a multiple of the alignment
//! ```
//!
//! Every integer is little-endian; a string is a u64 byte length and that many bytes of
//! UTF-8, with no terminator. (Version 1 used u32 lengths and counts; version 3 only added
//! big-endian files, which this reader recognises and refuses.) The layout is the one the
//! GGUF specification in ggml's repository describes.
//!
//! The parser treats the file as hostile. It reads through a [`Reader`] that checks every
//! length against the bytes that remain *before* allocating or looping, so a count of 2^62
//! is an error after one comparison, not an attempt to reserve exabytes; nested arrays stop
//! at a fixed depth, so a file cannot overflow the stack; and no tensor is accepted until
//! its size, alignment and place in the data section have been checked.

use std::collections::HashMap;

use crate::error::{Error, Result, format_error};
use crate::types::GgmlType;

/// The only versions this reader accepts.
pub const VERSIONS: [u32; 2] = [2, 3];
/// ggml's `GGML_MAX_NAME`: the bytes ggml keeps a tensor name in, its terminating zero
/// included, so a name must be shorter (llama.cpp refuses 64 bytes or more).
pub const MAX_NAME: usize = 64;
/// ggml tensors have at most four dimensions (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Arrays of arrays deeper than this are refused (real files nest at most once).
pub const MAX_DEPTH: usize = 8;
/// The alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most metadata entries or tensors room is made for before they are read. A count
/// has passed the check against the bytes left, but in a file of gigabytes that still
/// allows hundreds of millions; past this, the lists grow as entries really arrive.
const MAX_RESERVE: usize = 4096;

// ANCHOR: reader
/// A cursor over the file's bytes that never reads past the end: every read checks first,
/// and an error names what was being read and where.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Where the next read starts.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// The next `n` bytes, or an error if the file ends first. `n` comes from the file, so
    /// it is compared with what remains before it is used for anything.
    pub fn bytes(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what: what.to_string(),
                offset: self.offset(),
                need: n,
                have: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(out)
    }
    // ANCHOR_END: reader

    // ANCHOR: reader_reads
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self
            .bytes(N as u64, what)?
            .try_into()
            .expect("bytes returned N bytes"))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: a u64 length, then that many bytes of UTF-8.
    pub fn string(&mut self, what: &str) -> Result<&'a str> {
        let len = self.u64(&format!("the length of {what}"))?;
        let at = self.offset();
        let bytes = self.bytes(len, what)?;
        std::str::from_utf8(bytes).map_err(|e| {
            format_error(
                what,
                format!(
                    "not UTF-8 (invalid byte at file offset {})",
                    at + e.valid_up_to() as u64
                ),
            )
        })
    }

    /// A count of items that each take at least `min_bytes` bytes: more items than the
    /// remaining bytes could hold is an error here, so the count can size an allocation.
    pub fn count(&mut self, min_bytes: u64, what: &str) -> Result<usize> {
        let at = self.offset();
        let n = self.u64(what)?;
        if n > self.remaining() / min_bytes.max(1) {
            return Err(Error::Truncated {
                what: format!("{what} ({n} items of at least {min_bytes} bytes each)"),
                offset: at,
                need: n.saturating_mul(min_bytes),
                have: self.remaining(),
            });
        }
        Ok(n as usize)
    }
}
// ANCHOR_END: reader_reads

/// A metadata value. Arrays keep their element type, so a million-token vocabulary is one
/// `Vec<String>`, not a million tagged values.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A metadata array: all elements of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

// ANCHOR: value_types
/// GGUF's value type ids, in order, with the fewest bytes a value of each takes in the
/// file (a string is at least its 8-byte length; an array at least its type and count).
const VALUE_TYPES: [(&str, u64); 13] = [
    ("u8", 1),
    ("i8", 1),
    ("u16", 2),
    ("i16", 2),
    ("u32", 4),
    ("i32", 4),
    ("f32", 4),
    ("bool", 1),
    ("string", 8),
    ("array", 12),
    ("u64", 8),
    ("i64", 8),
    ("f64", 8),
];
// ANCHOR_END: value_types

fn value_type(id: u32, what: &str) -> Result<u32> {
    if (id as usize) < VALUE_TYPES.len() {
        Ok(id)
    } else {
        Err(format_error(
            what,
            format!("value type {id} is not a GGUF type (0–12)"),
        ))
    }
}

impl Value {
    /// The type's name in GGUF's terms, for error messages and `inspect`.
    pub fn type_name(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.type_name()),
            other => {
                let id = match other {
                    Value::U8(_) => 0,
                    Value::I8(_) => 1,
                    Value::U16(_) => 2,
                    Value::I16(_) => 3,
                    Value::U32(_) => 4,
                    Value::I32(_) => 5,
                    Value::F32(_) => 6,
                    Value::Bool(_) => 7,
                    Value::String(_) => 8,
                    Value::U64(_) => 10,
                    Value::I64(_) => 11,
                    Value::F64(_) => 12,
                    Value::Array(_) => unreachable!(),
                };
                VALUE_TYPES[id].0.to_string()
            }
        }
    }

    /// The value as an integer, if it is one (of any width or sign).
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn type_name(&self) -> String {
        let id = match self {
            Array::U8(_) => 0,
            Array::I8(_) => 1,
            Array::U16(_) => 2,
            Array::I16(_) => 3,
            Array::U32(_) => 4,
            Array::I32(_) => 5,
            Array::F32(_) => 6,
            Array::Bool(_) => 7,
            Array::String(_) => 8,
            Array::Array(v) => {
                return format!(
                    "array (first: {})",
                    v.first().map_or("none".into(), Array::type_name)
                );
            }
            Array::U64(_) => 10,
            Array::I64(_) => 11,
            Array::F64(_) => 12,
        };
        VALUE_TYPES[id].0.to_string()
    }
}

// ANCHOR: read_value
/// Reads one value of type `ty`; `what` names it for errors (the metadata key).
fn read_value(r: &mut Reader, ty: u32, what: &str, depth: usize) -> Result<Value> {
    Ok(match ty {
        0 => Value::U8(r.u8(what)?),
        1 => Value::I8(r.u8(what)? as i8),
        2 => Value::U16(u16::from_le_bytes(r.array(what)?)),
        3 => Value::I16(i16::from_le_bytes(r.array(what)?)),
        4 => Value::U32(r.u32(what)?),
        5 => Value::I32(r.u32(what)? as i32),
        6 => Value::F32(f32::from_le_bytes(r.array(what)?)),
        7 => Value::Bool(read_bool(r, what)?),
        8 => Value::String(r.string(what)?.to_string()),
        9 => Value::Array(read_array(r, what, depth + 1)?),
        10 => Value::U64(r.u64(what)?),
        11 => Value::I64(r.u64(what)? as i64),
        12 => Value::F64(f64::from_le_bytes(r.array(what)?)),
        _ => unreachable!("value_type checked the id"),
    })
}

fn read_bool(r: &mut Reader, what: &str) -> Result<bool> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(format_error(
            what,
            format!("a bool must be 0 or 1, found {b}"),
        )),
    }
}
// ANCHOR_END: read_value

// ANCHOR: read_array
/// An array: element type, count, elements. The count is checked against the bytes left
/// (at the element type's smallest size) before anything is allocated.
fn read_array(r: &mut Reader, what: &str, depth: usize) -> Result<Array> {
    if depth > MAX_DEPTH {
        return Err(format_error(
            what,
            format!("arrays nested more than {MAX_DEPTH} deep"),
        ));
    }
    let ty = value_type(r.u32(what)?, what)?;
    let n = r.count(
        VALUE_TYPES[ty as usize].1,
        &format!("the element count of {what}"),
    )?;
    macro_rules! fixed {
        ($variant:ident, $t:ty) => {{
            const W: usize = std::mem::size_of::<$t>();
            let bytes = r.bytes((n * W) as u64, what)?; // n ≤ remaining / W: no overflow
            Array::$variant(
                bytes
                    .chunks_exact(W)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("W bytes")))
                    .collect(),
            )
        }};
    }
    Ok(match ty {
        0 => fixed!(U8, u8),
        1 => fixed!(I8, i8),
        2 => fixed!(U16, u16),
        3 => fixed!(I16, i16),
        4 => fixed!(U32, u32),
        5 => fixed!(I32, i32),
        6 => fixed!(F32, f32),
        7 => Array::Bool((0..n).map(|_| read_bool(r, what)).collect::<Result<_>>()?),
        8 => Array::String(
            (0..n)
                .map(|_| r.string(what).map(str::to_string))
                .collect::<Result<_>>()?,
        ),
        9 => Array::Array(
            (0..n)
                .map(|_| read_array(r, what, depth + 1))
                .collect::<Result<_>>()?,
        ),
        10 => fixed!(U64, u64),
        11 => fixed!(I64, i64),
        12 => fixed!(F64, f64),
        _ => unreachable!("value_type checked the id"),
    })
}
// ANCHOR_END: read_array

/// One tensor's description from the header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the row length (a PyTorch shape reversed).
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// From the start of the data section.
    pub offset: u64,
    /// Bytes of data, from the type and the shape.
    pub size: u64,
}

impl TensorInfo {
    /// Values in the tensor.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A parsed GGUF header: everything but the tensors' data.
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensor descriptions in file order.
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Where the tensor descriptions end (the data section starts at the next multiple of
    /// the alignment).
    pub header_end: u64,
    /// Where the data section starts, from the start of the file.
    pub data_offset: u64,
    /// The file's length.
    pub file_len: u64,
    keys: HashMap<String, usize>,
    names: HashMap<String, usize>,
}

impl Gguf {
    // ANCHOR: parse
    /// Parses and checks the header of the GGUF file whose bytes are `file`. Reads only the
    /// header: the tensors' data is checked for its place, never touched.
    pub fn parse(file: &[u8]) -> Result<Gguf> {
        let mut r = Reader::new(file);
        let magic = r.bytes(4, "the magic number")?;
        if magic != b"GGUF" {
            return Err(format_error(
                "the magic number",
                format!("expected \"GGUF\", found {magic:02x?}: not a GGUF file"),
            ));
        }
        let version = r.u32("the version")?;
        if !VERSIONS.contains(&version) {
            let hint = if version.swap_bytes() <= 3 {
                " (a big-endian file, which this reader does not support)"
            } else if version == 1 {
                " (version 1, with 32-bit counts, predates llama.cpp's current files)"
            } else {
                ""
            };
            return Err(Error::Unsupported(format!(
                "GGUF version {version}{hint}; this reader knows versions 2 and 3"
            )));
        }
        // A tensor description takes at least 8 + 4 + 8 + 4 + 8 bytes (an empty name, one
        // dimension); a metadata entry at least 8 + 4 + 1.
        let n_tensors = r.count(32, "the tensor count")?;
        let n_kv = r.count(13, "the metadata count")?;

        let mut metadata = Vec::with_capacity(n_kv.min(MAX_RESERVE));
        let mut keys = HashMap::with_capacity(n_kv.min(MAX_RESERVE));
        for i in 0..n_kv {
            let key = r.string(&format!("metadata key {i}"))?.to_string();
            let ty = value_type(r.u32(&key)?, &key)?;
            let value = read_value(&mut r, ty, &key, 0)?;
            if keys.insert(key.clone(), i).is_some() {
                return Err(Error::Metadata {
                    key,
                    message: "appears twice".into(),
                });
            }
            metadata.push((key, value));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
            Some((k, v)) => {
                return Err(Error::Metadata {
                    key: k.clone(),
                    message: format!("must be a u32 power of two, found {v:?}"),
                });
            }
        };
        // ANCHOR_END: parse

        // ANCHOR: parse_tensors
        let mut tensors = Vec::with_capacity(n_tensors.min(MAX_RESERVE));
        let mut names = HashMap::with_capacity(n_tensors.min(MAX_RESERVE));
        for i in 0..n_tensors {
            let t = read_tensor_info(&mut r, i, alignment)?;
            if names.insert(t.name.clone(), i).is_some() {
                return Err(Error::Tensor {
                    name: t.name,
                    message: "appears twice".into(),
                });
            }
            tensors.push(t);
        }
        let header_end = r.offset();
        let data_offset = header_end.next_multiple_of(alignment);
        let file_len = file.len() as u64;
        check_places(&tensors, data_offset, file_len)?;
        Ok(Gguf {
            version,
            metadata,
            tensors,
            alignment,
            header_end,
            data_offset,
            file_len,
            keys,
            names,
        })
    }
    // ANCHOR_END: parse_tensors

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    /// The description of tensor `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.names.get(name).map(|&i| &self.tensors[i])
    }

    /// Where tensor `t`'s data starts in the file (checked by `parse` to fit).
    pub fn absolute_offset(&self, t: &TensorInfo) -> u64 {
        self.data_offset + t.offset
    }
}

// ANCHOR: tensor_info
fn read_tensor_info(r: &mut Reader, i: usize, alignment: u64) -> Result<TensorInfo> {
    let name = r.string(&format!("the name of tensor {i}"))?.to_string();
    let err = |message: String| Error::Tensor {
        name: name.clone(),
        message,
    };
    if name.len() >= MAX_NAME {
        return Err(err(format!(
            "the name is {} bytes; ggml keeps a name in at most {MAX_NAME} bytes with its \
             terminating zero, so {} is the longest",
            name.len(),
            MAX_NAME - 1
        )));
    }
    let n_dims = r.u32(&name)? as usize;
    if !(1..=MAX_DIMS).contains(&n_dims) {
        return Err(err(format!(
            "{n_dims} dimensions; ggml has 1 to {MAX_DIMS}"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims);
    for d in 0..n_dims {
        let n = r.u64(&name)?;
        if n == 0 || n > i64::MAX as u64 {
            return Err(err(format!("dimension {d} is {n}")));
        }
        dims.push(n);
    }
    let type_id = r.u32(&name)?;
    let ty = GgmlType::from_id(type_id).ok_or_else(|| {
        err(format!(
            "type {type_id} is not a ggml type this reader knows"
        ))
    })?;
    let offset = r.u64(&name)?;
    if !offset.is_multiple_of(alignment) {
        return Err(err(format!(
            "offset {offset} is not a multiple of the alignment {alignment}"
        )));
    }
    let size = ty.byte_size(&name, &dims)?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        size,
    })
}
// ANCHOR_END: tensor_info

// ANCHOR: check_places
/// Every tensor lies inside the data section, and no two overlap.
fn check_places(tensors: &[TensorInfo], data_offset: u64, file_len: u64) -> Result<()> {
    let data_len = file_len
        .checked_sub(data_offset)
        .ok_or_else(|| Error::Truncated {
            what: "the padding before the data section".into(),
            offset: file_len,
            need: data_offset - file_len,
            have: 0,
        })?;
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
    by_offset.sort_by_key(|t| t.offset);
    let mut end_of_previous: Option<(&str, u64)> = None;
    for t in by_offset {
        let end = t.offset.checked_add(t.size).filter(|&e| e <= data_len);
        let Some(end) = end else {
            return Err(Error::Tensor {
                name: t.name.clone(),
                message: format!(
                    "{} bytes at data offset {} run past the end of the file (the data section has {data_len} bytes)",
                    t.size, t.offset
                ),
            });
        };
        if let Some((prev, prev_end)) = end_of_previous
            && t.offset < prev_end
        {
            return Err(Error::Tensor {
                name: t.name.clone(),
                message: format!(
                    "its data (from {}) overlaps tensor `{prev}` (which ends at {prev_end})",
                    t.offset
                ),
            });
        }
        end_of_previous = Some((&t.name, end));
    }
    Ok(())
}
// ANCHOR_END: check_places

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF v3 file with no metadata and one F32 tensor of 32 values named `name`.
    fn one_tensor_file(name: &str) -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(1u64.to_le_bytes()); // tensors
        f.extend(0u64.to_le_bytes()); // metadata
        f.extend((name.len() as u64).to_le_bytes());
        f.extend(name.as_bytes());
        f.extend(1u32.to_le_bytes()); // n_dims
        f.extend(32u64.to_le_bytes()); // dims[0]
        f.extend(0u32.to_le_bytes()); // F32
        f.extend(0u64.to_le_bytes()); // offset
        f.resize(f.len().next_multiple_of(DEFAULT_ALIGNMENT as usize), 0);
        f.extend([0u8; 32 * 4]);
        f
    }

    #[test]
    fn a_tensor_name_is_refused_from_64_bytes_as_llama_cpp_does() {
        let longest = "n".repeat(MAX_NAME - 1);
        let g = Gguf::parse(&one_tensor_file(&longest))
            .unwrap_or_else(|e| panic!("a 63-byte name should load, as in llama.cpp: {e}"));
        assert_eq!(g.tensors[0].name, longest);
        for len in [MAX_NAME, MAX_NAME + 1] {
            let e = Gguf::parse(&one_tensor_file(&"n".repeat(len)))
                .map(|_| ())
                .expect_err("a name of 64 bytes or more has no room for ggml's terminating zero");
            let text = e.to_string();
            assert!(
                text.contains(&format!("the name is {len} bytes"))
                    && text.contains("63 is the longest"),
                "a {len}-byte name should be refused with its length and the limit, got: {text}"
            );
        }
    }
}
