//! Hostile files that parse: a valid file changed one metadata value or one tensor at a
//! time, for the tests that hold a loader to an error rather than a panic (chapter 8's
//! `tests/hostile_models.rs`).

use crate::error::{Error, Result};
use crate::gguf::{Array, Gguf, TensorInfo, Value};
use crate::gguf_write::Writer;
use crate::types::GgmlType;

/// One change to a valid file.
#[derive(Clone, Debug)]
pub enum Change {
    /// Metadata key `.0` set to `.1`, or removed (`None`).
    Key(String, Option<Value>),
    /// Tensor `.0` given dims `.1` and type `.2` (new bytes when either changed), or
    /// removed (`None`).
    Tensor(String, Option<(Vec<u64>, GgmlType)>),
}

/// Every change this module knows for the file `g`.
pub fn changes(g: &Gguf) -> Vec<Change> {
    let mut out = Vec::new();
    for (key, value) in &g.metadata {
        let mut values: Vec<Value> = match value {
            Value::Array(a) => arrays(a)
                .into_iter()
                .map(Value::Array)
                .chain([Value::U32(3)])
                .collect(),
            Value::F32(_) | Value::F64(_) => [0.0, -1.0, f32::NAN, f32::INFINITY, 1e30, 1e-30]
                .into_iter()
                .map(Value::F32)
                .collect(),
            Value::String(_) => vec![Value::U32(3)],
            _ => [0, 1, 2, 3, 5, 7, 33, 1000, 1 << 31, 1 << 40, u64::MAX]
                .into_iter()
                .map(Value::U64)
                .collect(),
        };
        values.extend([Value::String("x".into()), Value::I32(-1)]);
        out.extend(
            values
                .into_iter()
                .map(|v| Change::Key(key.clone(), Some(v))),
        );
        out.push(Change::Key(key.clone(), None));
    }
    for t in &g.tensors {
        let d = &t.dims;
        let with = |i: usize, f: &dyn Fn(u64) -> u64| {
            let (mut d, i) = (d.clone(), i.min(d.len() - 1));
            d[i] = f(d[i]);
            d
        };
        let mut shapes = vec![
            d.iter().rev().copied().collect(),
            with(1, &|n| n + 1),
            with(1, &|n| n.saturating_sub(1)),
            with(0, &|n| n + 32),
            with(0, &|n| 2 * n),
            d.iter().copied().chain([1]).collect(),
            vec![d.iter().product()],
        ];
        shapes.retain(|s| s != d);
        let reshaped = shapes.into_iter().map(|s| Some((s, t.ty)));
        let types = [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ];
        let retyped = types
            .into_iter()
            .filter(|&ty| ty != t.ty)
            .map(|ty| Some((d.clone(), ty)));
        for to in reshaped.chain(retyped).chain([None]) {
            out.push(Change::Tensor(t.name.clone(), to));
        }
    }
    out
}

/// A copy of the parsed file `g` (its `bytes`) through a [`Writer`]: each metadata entry
/// as `key` gives it back (renamed or changed; `None` leaves it out), each tensor as
/// `tensor` writes it, given its bytes (as they are, changed, left out, or with others
/// beside it).
pub fn rewrite(
    bytes: &[u8],
    g: &Gguf,
    mut key: impl FnMut(&str, &Value) -> Option<(String, Value)>,
    mut tensor: impl FnMut(&mut Writer, &TensorInfo, &[u8]) -> Result<()>,
) -> Result<Vec<u8>> {
    let mut w = Writer::new();
    for (k, v) in &g.metadata {
        if let Some((k, v)) = key(k, v) {
            w.set(&k, v);
        }
    }
    for t in &g.tensors {
        let at = usize::try_from(g.absolute_offset(t)).unwrap_or(usize::MAX);
        let data = usize::try_from(t.size)
            .ok()
            .and_then(|n| bytes.get(at..at.checked_add(n)?))
            .ok_or_else(|| Error::Unsupported(format!("tensor {} outside the bytes", t.name)))?;
        tensor(&mut w, t, data)?;
    }
    Ok(w.to_bytes())
}

/// `bytes` with `change` made, or `None` when no file can hold it (a type whose blocks do
/// not divide the new row).
pub fn apply(bytes: &[u8], g: &Gguf, change: &Change) -> Option<Vec<u8>> {
    let key = |k: &str, v: &Value| match change {
        Change::Key(key, to) if key == k => to.clone().map(|to| (k.to_string(), to)),
        _ => Some((k.to_string(), v.clone())),
    };
    let tensor = |w: &mut Writer, t: &TensorInfo, data: &[u8]| match change {
        Change::Tensor(name, None) if *name == t.name => Ok(()),
        Change::Tensor(name, Some((dims, ty))) if *name == t.name => {
            let size = ty.byte_size(name, dims)?;
            // any bytes: a pattern, so that every block's scale is some number
            let data = (0..size).map(|i| (i * 37 % 251) as u8).collect();
            w.tensor(&t.name, dims, *ty, data)
        }
        _ => w.tensor(&t.name, &t.dims, t.ty, data.to_vec()),
    };
    rewrite(bytes, g, key, tensor).ok()
}

/// Changed copies of array `a`: half of it, none of it, and (for the vocabulary's kinds of
/// array) one element made odd: an empty token or one that repeats the first, a NaN or an
/// infinite score, a token type or id out of range.
fn arrays(a: &Array) -> Vec<Array> {
    fn cut<T: Clone>(v: &[T], wrap: fn(Vec<T>) -> Array) -> Vec<Array> {
        vec![wrap(v[..v.len() / 2].to_vec()), wrap(Vec::new())]
    }
    fn odd<T: Clone>(v: &[T], at: usize, x: T, wrap: fn(Vec<T>) -> Array) -> Option<Array> {
        let mut v = v.to_vec();
        *v.get_mut(at)? = x;
        Some(wrap(v))
    }
    let last = |n: usize| n.saturating_sub(1);
    match a {
        Array::String(v) => {
            let mut out = cut(v, Array::String);
            out.extend(odd(v, 0, String::new(), Array::String));
            let first = v.first().cloned().unwrap_or_default();
            out.extend(odd(v, last(v.len()), first, Array::String));
            out
        }
        Array::F32(v) => {
            let mut out = cut(v, Array::F32);
            out.extend(odd(v, 0, f32::NAN, Array::F32));
            out.extend(odd(v, last(v.len()), f32::INFINITY, Array::F32));
            out
        }
        Array::I32(v) => {
            let mut out = cut(v, Array::I32);
            out.extend(odd(v, 0, -1, Array::I32));
            out.extend(odd(v, last(v.len()), 99, Array::I32));
            out
        }
        Array::U32(v) => {
            let mut out = cut(v, Array::U32);
            out.extend(odd(v, 0, u32::MAX, Array::U32));
            out
        }
        _ => Vec::new(),
    }
}

/// A Gemma-3 file made from the Gemma-2 one (`bytes`), for the architecture the synthetic
/// files lack: its keys renamed `gemma3.*`, no soft-caps (Gemma-3 has none), and the RMSNorm
/// of each head of Q and K (weights of one).
pub fn as_gemma3(bytes: &[u8]) -> Result<Vec<u8>> {
    let g = Gguf::parse(bytes)?;
    let head_dim = g
        .get("gemma2.attention.key_length")
        .and_then(Value::as_i128)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| Error::Unsupported("a Gemma-2 file's key_length".into()))?;
    let ones: Vec<u8> = (0..head_dim).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    let key = |k: &str, v: &Value| match (k.strip_prefix("gemma2."), k) {
        (Some("attn_logit_softcapping" | "final_logit_softcapping"), _) => None,
        (Some(rest), _) => Some((format!("gemma3.{rest}"), v.clone())),
        (None, "general.architecture") => Some((k.into(), Value::String("gemma3".into()))),
        (None, _) => Some((k.into(), v.clone())),
    };
    let tensor = |w: &mut Writer, t: &TensorInfo, data: &[u8]| {
        w.tensor(&t.name, &t.dims, t.ty, data.to_vec())?;
        if let Some(layer) = t.name.strip_suffix(".attn_q.weight") {
            for norm in ["attn_q_norm", "attn_k_norm"] {
                let name = format!("{layer}.{norm}.weight");
                w.tensor(&name, &[head_dim], GgmlType::F32, ones.clone())?;
            }
        }
        Ok(())
    };
    rewrite(bytes, &g, key, tensor)
}
