//! Writing a GGUF file: the reader's layout ([`crate::gguf`]) run the other way.
//!
//! A [`Writer`] collects metadata (any [`Value`], arrays of strings included) and tensors
//! (a name, ggml dims, a type and its bytes), then lays them out as llama.cpp's own writer
//! does: header, metadata, tensor descriptions, padding to the alignment, and each tensor's
//! data at an offset that is a multiple of the alignment. The file it writes is read back
//! by [`crate::gguf::Gguf::parse`] before it is kept, so a writer bug is an error here, not
//! a file that only fails later.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::gguf::{Array, DEFAULT_ALIGNMENT, Gguf, MAX_DIMS, MAX_NAME, Value};
use crate::types::GgmlType;

/// One tensor to write.
struct Tensor {
    name: String,
    /// ggml order: `dims[0]` is the row length.
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// A GGUF file being put together in memory.
#[derive(Default)]
pub struct Writer {
    metadata: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    /// Adds `key = value`, or replaces the value of a key already added.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key.to_string(), value)),
        }
    }

    /// Adds tensor `name` of ggml shape `dims`, whose bytes `data` must be exactly what
    /// `ty` takes for that shape.
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Result<()> {
        let err = |message: String| Error::Tensor {
            name: name.into(),
            message,
        };
        if name.len() >= MAX_NAME || dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(err(format!("cannot be written with dims {dims:?}")));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(err("added twice".into()));
        }
        let size = ty.byte_size(name, dims)?;
        if size != data.len() as u64 {
            return Err(err(format!(
                "{} bytes given, a {} tensor of dims {dims:?} takes {size}",
                data.len(),
                ty.name()
            )));
        }
        self.tensors.push(Tensor {
            name: name.into(),
            dims: dims.to_vec(),
            ty,
            data,
        });
        Ok(())
    }

    // ANCHOR: to_bytes
    /// The whole file: version 3, little-endian, every tensor aligned to 32 bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = DEFAULT_ALIGNMENT;
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut out, key);
            out.extend_from_slice(&value.type_id().to_le_bytes());
            put_value(&mut out, value);
        }
        // Each tensor's offset within the data section, padded up to the alignment.
        let mut offset = 0u64;
        for t in &self.tensors {
            put_string(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + t.data.len() as u64).next_multiple_of(align);
        }
        for t in &self.tensors {
            out.resize((out.len() as u64).next_multiple_of(align) as usize, 0);
            out.extend_from_slice(&t.data);
        }
        out.resize((out.len() as u64).next_multiple_of(align) as usize, 0);
        out
    }
    // ANCHOR_END: to_bytes

    /// Writes the file to `path`, which must not exist yet (nothing is ever overwritten):
    /// to a temporary name beside it first, checked by the parser, then renamed into place.
    pub fn write_new(&self, path: &Path) -> Result<()> {
        let io = |e: std::io::Error| Error::Io {
            path: path.to_path_buf(),
            source: e,
        };
        if path.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the file exists; this command never overwrites one (remove it first)",
            )));
        }
        let bytes = self.to_bytes();
        Gguf::parse(&bytes)?; // the writer's own check: what it wrote reads back
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = std::path::PathBuf::from(tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io)?;
        let written = f.write_all(&bytes).and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp); // ours: created just above
            return Err(io(e));
        }
        std::fs::rename(&tmp, path).map_err(io)
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Array(a) => put_array(out, a),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// An array: its element type, its length, then the elements (no type per element).
fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.type_id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    fn each<T>(out: &mut Vec<u8>, v: &[T], f: impl Fn(&T) -> Value) {
        for x in v {
            put_value(out, &f(x));
        }
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each(out, v, |x| Value::I8(*x)),
        Array::U16(v) => each(out, v, |x| Value::U16(*x)),
        Array::I16(v) => each(out, v, |x| Value::I16(*x)),
        Array::U32(v) => each(out, v, |x| Value::U32(*x)),
        Array::I32(v) => each(out, v, |x| Value::I32(*x)),
        Array::F32(v) => each(out, v, |x| Value::F32(*x)),
        Array::Bool(v) => each(out, v, |x| Value::Bool(*x)),
        Array::String(v) => v.iter().for_each(|s| put_string(out, s)),
        Array::Array(v) => v.iter().for_each(|inner| put_array(out, inner)),
        Array::U64(v) => each(out, v, |x| Value::U64(*x)),
        Array::I64(v) => each(out, v, |x| Value::I64(*x)),
        Array::F64(v) => each(out, v, |x| Value::F64(*x)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_the_same() {
        let mut w = Writer::new();
        w.set("general.architecture", Value::String("llama".into()));
        w.set("a.u32", Value::U32(7));
        w.set("a.f32", Value::F32(0.5));
        w.set("a.bool", Value::Bool(true));
        let words = vec!["a".to_string(), "bé".into(), String::new()];
        w.set("a.words", Value::Array(Array::String(words.clone())));
        w.set("a.ints", Value::Array(Array::I32(vec![-1, 2, 3])));
        let f32s: Vec<u8> = [1.0f32, 2.0, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        w.tensor("x.weight", &[3], GgmlType::F32, f32s.clone())
            .unwrap();
        w.tensor("q.weight", &[32, 2], GgmlType::Q8_0, vec![0; 68])
            .unwrap();
        assert!(w.tensor("bad", &[32], GgmlType::Q8_0, vec![0; 33]).is_err());
        let bytes = w.to_bytes();
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.str("general.architecture").unwrap(), "llama");
        assert_eq!(g.u64("a.u32").unwrap(), 7);
        assert_eq!(g.get("a.f32"), Some(&Value::F32(0.5)));
        assert_eq!(g.get("a.bool"), Some(&Value::Bool(true)));
        assert_eq!(g.get("a.words"), Some(&Value::Array(Array::String(words))));
        assert_eq!(
            g.get("a.ints"),
            Some(&Value::Array(Array::I32(vec![-1, 2, 3])))
        );
        let x = g.tensor("x.weight").unwrap();
        let start = g.absolute_offset(x) as usize;
        assert_eq!(&bytes[start..start + 12], &f32s[..]);
        let q = g.tensor("q.weight").unwrap();
        assert_eq!(
            (q.ty, q.dims.clone(), q.size),
            (GgmlType::Q8_0, vec![32, 2], 68)
        );
        assert_eq!(q.offset % 32, 0);
    }
}
