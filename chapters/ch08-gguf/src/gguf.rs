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
//! A file with no tensors (llama.cpp ships vocabulary-only files) ends after its metadata:
//! no padding, no data section.
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

mod reader;
mod value;

use std::collections::HashMap;

use crate::error::{Error, Result, format_error};
use crate::types::GgmlType;
pub use reader::Reader;
pub use value::{Array, MAX_DEPTH, Value};
use value::{read_value, value_type};

/// The only versions this reader accepts.
pub const VERSIONS: [u32; 2] = [2, 3];
/// ggml's `GGML_MAX_NAME`: the bytes ggml keeps a tensor name in, its terminating zero
/// included, so a name must be shorter (llama.cpp refuses 64 bytes or more).
pub const MAX_NAME: usize = 64;
/// ggml tensors have at most four dimensions (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// The alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The most metadata entries or tensors room is made for before they are read. A count
/// has passed the check against the bytes left, but in a file of gigabytes that still
/// allows hundreds of millions; past this, the lists grow as entries really arrive.
const MAX_RESERVE: usize = 4096;

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
        // A file with no tensors (llama.cpp's vocabulary-only files) has no data section to
        // pad to, and may end right after its metadata; llama.cpp's reader then puts the
        // data offset at the header's end, and so does this one.
        let data_offset = match tensors.is_empty() {
            true => header_end,
            false => header_end.next_multiple_of(alignment),
        };
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
    fn a_file_without_tensors_may_end_after_its_metadata() {
        // llama.cpp's vocabulary-only files: one metadata entry, no tensors, no padding.
        let mut f = b"GGUF".to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(0u64.to_le_bytes()); // tensors
        f.extend(1u64.to_le_bytes()); // metadata
        let key = "general.name";
        f.extend((key.len() as u64).to_le_bytes());
        f.extend(key.as_bytes());
        f.extend(8u32.to_le_bytes()); // string
        f.extend(3u64.to_le_bytes());
        f.extend(b"voc");
        assert!(!f.len().is_multiple_of(DEFAULT_ALIGNMENT as usize));
        let g = Gguf::parse(&f).unwrap_or_else(|e| {
            panic!("a file with no tensors needs no data section, as in llama.cpp: {e}")
        });
        assert_eq!((g.tensors.len(), g.metadata.len()), (0, 1));
        assert_eq!(
            g.data_offset, g.header_end,
            "no padding to a data section that is not there"
        );
        assert_eq!(g.header_end, f.len() as u64);
        // With a tensor, the same cut is a truncated file.
        let mut one = one_tensor_file("t");
        one.truncate(one.len() - 32 * 4 - 1);
        let e = Gguf::parse(&one)
            .map(|_| ())
            .expect_err("the data section is missing");
        assert!(e.to_string().contains("truncated") || e.to_string().contains("past the end"));
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
