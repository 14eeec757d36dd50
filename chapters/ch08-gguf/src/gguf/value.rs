//! Metadata values: GGUF's thirteen value types, and the reads of a value and of an array
//! (whose count is checked against the bytes left before anything is allocated).

use super::reader::Reader;
use crate::error::{Result, format_error};

/// Arrays of arrays deeper than this are refused (real files nest at most once).
pub const MAX_DEPTH: usize = 8;

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

/// `id` if it names a GGUF value type; an error naming `what` if not.
pub(super) fn value_type(id: u32, what: &str) -> Result<u32> {
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
            other => VALUE_TYPES[other.type_id() as usize].0.to_string(),
        }
    }

    /// GGUF's id for the value's type (its index in `VALUE_TYPES`), as a file stores it.
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::String(_) => 8,
            Value::Array(_) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
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
        match self {
            Array::Array(v) => format!(
                "array (first: {})",
                v.first().map_or("none".into(), Array::type_name)
            ),
            other => VALUE_TYPES[other.type_id() as usize].0.to_string(),
        }
    }

    /// GGUF's id for the type of the array's elements, as a file stores it.
    pub fn type_id(&self) -> u32 {
        match self {
            Array::U8(_) => 0,
            Array::I8(_) => 1,
            Array::U16(_) => 2,
            Array::I16(_) => 3,
            Array::U32(_) => 4,
            Array::I32(_) => 5,
            Array::F32(_) => 6,
            Array::Bool(_) => 7,
            Array::String(_) => 8,
            Array::Array(_) => 9,
            Array::U64(_) => 10,
            Array::I64(_) => 11,
            Array::F64(_) => 12,
        }
    }
}

// ANCHOR: read_value
/// Reads one value of type `ty`; `what` names it for errors (the metadata key).
pub(super) fn read_value(r: &mut Reader, ty: u32, what: &str, depth: usize) -> Result<Value> {
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
