//! Writing F32 tensors as a safetensors file: the inverse of `SafeTensors::open`.

use crate::{Error, Tensor};
use serde_json::{Map, Value, json};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

// ANCHOR: write
/// Writes `tensors` as F32 to a new safetensors file at `path`, in the order given.
///
/// The header is padded with spaces to a multiple of 8 bytes, so the data section — and
/// with it every F32 tensor — starts 8-byte aligned in the file, and therefore in a
/// page-aligned memory map: that is what lets a reader view the tensors without copying.
pub fn write(path: impl AsRef<Path>, tensors: &[(&str, &Tensor)]) -> Result<(), Error> {
    let path = path.as_ref();
    let mut header = Map::new();
    let mut offset = 0;
    for (name, t) in tensors {
        if *name == "__metadata__" || header.contains_key(*name) {
            return Err(Error::Format(format!(
                "tensor name {name:?} is reserved or repeated"
            )));
        }
        let end = offset + 4 * t.numel();
        let entry = json!({ "dtype": "F32", "shape": t.shape(), "data_offsets": [offset, end] });
        header.insert(name.to_string(), entry);
        offset = end;
    }
    let mut header =
        serde_json::to_vec(&Value::Object(header)).expect("a map of numbers serializes");
    header.resize(header.len().next_multiple_of(8), b' '); // JSON allows trailing spaces

    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&header).map_err(io)?;
    for (_, t) in tensors {
        for v in t.to_vec() {
            out.write_all(&v.to_le_bytes()).map_err(io)?;
        }
    }
    out.flush().map_err(io)
}
// ANCHOR_END: write
