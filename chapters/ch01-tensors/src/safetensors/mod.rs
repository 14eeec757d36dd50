//! Reading (and writing) the safetensors format, memory-mapped.
//!
//! A safetensors file is three parts, back to back:
//!
//! ```text
//! [ 8 bytes: N, little-endian u64 ][ N bytes: JSON header ][ data section ... ]
//! ```
//!
//! The header maps each tensor name to `{"dtype": "F32", "shape": [576, 1536],
//! "data_offsets": [begin, end]}`, with offsets counted in bytes from the start of the data
//! section. An optional `"__metadata__"` entry holds free-form strings; we ignore it.
//!
//! We `mmap` the file instead of reading it: the operating system pages the bytes in
//! when they are first touched, and an aligned F32 tensor becomes a [`Tensor`] whose
//! storage *is* the mapped file — opening a 500 MB model costs a header parse, not a
//! 500 MB copy. Everything the header claims is checked before it is believed: a
//! malformed or malicious file gives an [`Error`], never a panic or an out-of-bounds read.

mod write;

pub use write::write;

use crate::half::{bf16_to_f32, f16_to_f32};
use crate::storage::Storage;
use crate::{Error, Tensor};
use memmap2::Mmap;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The element types this loader reads. (The format has more: integers, F64, FP8...)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F16,
    BF16,
}

impl Dtype {
    /// Parses the header's dtype string; `None` for the ones we do not read.
    pub fn parse(s: &str) -> Option<Dtype> {
        match s {
            "F32" => Some(Dtype::F32),
            "F16" => Some(Dtype::F16),
            "BF16" => Some(Dtype::BF16),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::BF16 => 2,
        }
    }

    /// The name as written in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One header entry, validated: `data_offsets` are byte offsets into the data section,
/// `end - begin == dtype.size() × product(shape)`, and `end` is inside the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data_offsets: (usize, usize),
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// An open, memory-mapped safetensors file with a validated header.
pub struct SafeTensors {
    mmap: Arc<Mmap>,                       // the whole file
    data_start: usize,                     // 8 + header length: where the data section begins
    tensors: BTreeMap<String, TensorInfo>, // sorted by name
}

/// A header entry as written in the file, before validation.
#[derive(Deserialize)]
struct RawInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

impl SafeTensors {
    // ANCHOR: open
    /// Maps the file and validates its header. The tensors' bytes are not read yet.
    pub fn open(path: impl AsRef<Path>) -> Result<SafeTensors, Error> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        // A regular file only: a FIFO would block the open, a device cannot be mapped.
        let file = crate::files::open_regular(path).map_err(io)?;
        // SAFETY: the map is read-only, and every access below is bounds-checked against
        // its length. What mmap cannot protect against is another process truncating or
        // rewriting the file while it is mapped (reads could fault or see new bytes);
        // like every mmap-based model loader, we accept that for files we were given.
        let mmap = unsafe { Mmap::map(&file) }.map_err(io)?;
        let (data_start, tensors) = parse_header(&mmap)?;
        Ok(SafeTensors {
            mmap: Arc::new(mmap),
            data_start,
            tensors,
        })
    }
    // ANCHOR_END: open

    /// The tensor names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.keys().map(String::as_str).collect()
    }

    /// The header entry of `name`, if the file has such a tensor.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    /// Number of tensors in the file.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> usize {
        self.mmap.len()
    }

    // ANCHOR: tensor
    /// The tensor `name` as f32. An F32 tensor whose bytes are 4-byte aligned in memory
    /// is a zero-copy view of the mapped file; F16 and BF16 are decoded into a new buffer.
    pub fn tensor(&self, name: &str) -> Result<Tensor, Error> {
        let info = self
            .info(name)
            .ok_or_else(|| Error::TensorNotFound(name.to_string()))?;
        let (begin, end) = (
            self.data_start + info.data_offsets.0,
            self.data_start + info.data_offsets.1,
        );
        let bytes = &self.mmap[begin..end]; // in bounds: checked by parse_header
        let data: Vec<f32> = match info.dtype {
            Dtype::F32 => {
                if let Some(mapped) = Storage::mapped(Arc::clone(&self.mmap), begin, info.numel()) {
                    return Ok(Tensor::with_storage(mapped, &info.shape)); // zero-copy
                }
                let le = |c: &[u8]| f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                bytes.chunks_exact(4).map(le).collect()
            }
            Dtype::F16 => bytes
                .chunks_exact(2)
                .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            Dtype::BF16 => bytes
                .chunks_exact(2)
                .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        };
        Tensor::from_vec(data, &info.shape)
    }
    // ANCHOR_END: tensor
}

impl fmt::Debug for SafeTensors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafeTensors")
            .field("file_size", &self.mmap.len())
            .field("data_start", &self.data_start)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// The largest header accepted: 16 MiB. Parsing costs many times the header's size in
/// memory, so a header of millions of tiny entries is refused before it is parsed.
pub const MAX_HEADER_BYTES: u64 = 16 << 20;

/// A JSON object whose keys must all differ: serde_json alone keeps the last of two equal
/// keys, so a file could name one tensor twice and have the reader see only one of them.
struct UniqueKeys(BTreeMap<String, serde_json::Value>);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object with distinct keys")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<UniqueKeys, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                    if out.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "the key {key:?} appears twice"
                        )));
                    }
                    out.insert(key, value);
                }
                Ok(UniqueKeys(out))
            }
        }
        d.deserialize_map(Visitor)
    }
}

// ANCHOR: parse_header
/// Reads and checks the header of a whole file's bytes. Returns where the data section
/// starts and the validated entries.
fn parse_header(file: &[u8]) -> Result<(usize, BTreeMap<String, TensorInfo>), Error> {
    let Some(&len_bytes) = file.first_chunk::<8>() else {
        return Err(Error::Format(format!(
            "file is {} bytes, too short for the 8-byte header length",
            file.len()
        )));
    };
    let n = u64::from_le_bytes(len_bytes);
    // Compare in u64 before converting: a header length of 2^60 must be an error, not an
    // overflow or an allocation.
    if n > (file.len() - 8) as u64 {
        return Err(Error::Format(format!(
            "header length {n} runs past the end of the {}-byte file (truncated or not safetensors?)",
            file.len()
        )));
    }
    if n > MAX_HEADER_BYTES {
        return Err(Error::Format(format!(
            "header length {n} is more than the {MAX_HEADER_BYTES} bytes this reader accepts \
             (a real model's header is a few hundred kB)"
        )));
    }
    let data_start = 8 + n as usize;
    let data_len = file.len() - data_start;
    let json: UniqueKeys = serde_json::from_slice(&file[8..data_start])
        .map_err(|e| Error::Format(format!("header is not a JSON object of tensors: {e}")))?;
    let json = json.0;
    // ANCHOR_END: parse_header

    // ANCHOR: parse_entries
    let mut tensors = BTreeMap::new();
    for (name, value) in json {
        if name == "__metadata__" {
            continue; // free-form strings (e.g. {"format": "pt"}); nothing we need
        }
        let raw: RawInfo = serde_json::from_value(value)
            .map_err(|e| Error::Format(format!("tensor {name}: bad header entry: {e}")))?;
        let dtype = Dtype::parse(&raw.dtype).ok_or_else(|| Error::UnsupportedDtype {
            dtype: raw.dtype.clone(),
            tensor: name.clone(),
        })?;
        let [begin, end] = raw.data_offsets;
        if begin > end || end > data_len {
            return Err(Error::Format(format!(
                "tensor {name}: data_offsets [{begin}, {end}] outside the {data_len}-byte data section"
            )));
        }
        // shape product × dtype size, checked: a shape like [2^40, 2^40] must not wrap around.
        let nbytes = raw
            .shape
            .iter()
            .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d));
        if nbytes != Some(end - begin) {
            return Err(Error::Format(format!(
                "tensor {name}: shape {:?} of {dtype} needs {} bytes but data_offsets [{begin}, {end}] hold {}",
                raw.shape,
                nbytes.map_or("too many".to_string(), |b| b.to_string()),
                end - begin
            )));
        }
        tensors.insert(
            name,
            TensorInfo {
                dtype,
                shape: raw.shape,
                data_offsets: (begin, end),
            },
        );
    }
    check_no_overlap(&tensors)?;
    Ok((data_start, tensors))
}
// ANCHOR_END: parse_entries

/// Two tensors must not claim the same bytes: a crafted file could otherwise alias them.
fn check_no_overlap(tensors: &BTreeMap<String, TensorInfo>) -> Result<(), Error> {
    let mut spans: Vec<(usize, usize, &str)> = tensors
        .iter()
        .filter(|(_, t)| t.data_offsets.0 < t.data_offsets.1) // empty tensors occupy nothing
        .map(|(name, t)| (t.data_offsets.0, t.data_offsets.1, name.as_str()))
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, end_a, a), (begin_b, _, b)) = (pair[0], pair[1]);
        if begin_b < end_a {
            return Err(Error::Format(format!(
                "tensors {a} and {b} overlap in the data section"
            )));
        }
    }
    Ok(())
}
