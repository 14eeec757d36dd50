//! Typed reads of metadata, each error naming the key.
//!
//! GGUF writers are not consistent about integer widths (a token id may be a u32 in one
//! file and an i32 in another), so the integer accessors take any integer type and check
//! that the value fits; everything else must have the type asked for.

use crate::error::{Error, Result};
use crate::gguf::{Array, Gguf, Value};

fn wrong(key: &str, want: &str, found: &Value) -> Error {
    Error::Metadata {
        key: key.to_string(),
        message: format!("expected {want}, found {}", found.type_name()),
    }
}

fn missing(key: &str) -> Error {
    Error::Metadata {
        key: key.to_string(),
        message: "missing".into(),
    }
}

// ANCHOR: accessors
impl Gguf {
    /// An integer that fits a `u64`, or `None` if the key is absent.
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let n = v.as_i128().ok_or_else(|| wrong(key, "an integer", v))?;
        u64::try_from(n).map(Some).map_err(|_| Error::Metadata {
            key: key.to_string(),
            message: format!("{n} is negative"),
        })
    }

    /// A required integer that fits a `u64`.
    pub fn u64(&self, key: &str) -> Result<u64> {
        self.opt_u64(key)?.ok_or_else(|| missing(key))
    }

    /// A number (f32, f64, or an integer), or `None` if the key is absent.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(f64::from(*x))),
            Some(Value::F64(x)) => Ok(Some(*x)),
            Some(v) => match v.as_i128() {
                Some(n) => Ok(Some(n as f64)),
                None => Err(wrong(key, "a number", v)),
            },
        }
    }
    // ANCHOR_END: accessors

    // ANCHOR: accessors_typed
    /// A string, or `None` if the key is absent.
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(wrong(key, "a string", v)),
        }
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&str> {
        self.opt_str(key)?.ok_or_else(|| missing(key))
    }

    /// A bool, or `None` if the key is absent.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong(key, "a bool", v)),
        }
    }

    /// An array, or `None` if the key is absent.
    pub fn opt_array(&self, key: &str) -> Result<Option<&Array>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(wrong(key, "an array", v)),
        }
    }

    /// A required array of strings.
    pub fn strings(&self, key: &str) -> Result<&[String]> {
        match self.opt_array(key)?.ok_or_else(|| missing(key))? {
            Array::String(v) => Ok(v),
            a => Err(Error::Metadata {
                key: key.to_string(),
                message: format!(
                    "expected an array of string, found an array of {}",
                    a.type_name()
                ),
            }),
        }
    }
    // ANCHOR_END: accessors_typed

    // ANCHOR: accessors_ints
    /// An array of integers, each converted to `i64`, or `None` if the key is absent.
    pub fn opt_ints(&self, key: &str) -> Result<Option<Vec<i64>>> {
        let Some(a) = self.opt_array(key)? else {
            return Ok(None);
        };
        let v: Vec<i64> = match a {
            Array::I32(v) => v.iter().map(|&x| x.into()).collect(),
            Array::U32(v) => v.iter().map(|&x| x.into()).collect(),
            Array::I8(v) => v.iter().map(|&x| x.into()).collect(),
            Array::U8(v) => v.iter().map(|&x| x.into()).collect(),
            Array::I16(v) => v.iter().map(|&x| x.into()).collect(),
            Array::U16(v) => v.iter().map(|&x| x.into()).collect(),
            Array::I64(v) => v.clone(),
            other => {
                return Err(Error::Metadata {
                    key: key.to_string(),
                    message: format!(
                        "expected an array of integers, found an array of {}",
                        other.type_name()
                    ),
                });
            }
        };
        Ok(Some(v))
    }

    /// An array of f32, or `None` if the key is absent.
    pub fn opt_f32s(&self, key: &str) -> Result<Option<&[f32]>> {
        match self.opt_array(key)? {
            None => Ok(None),
            Some(Array::F32(v)) => Ok(Some(v)),
            Some(a) => Err(Error::Metadata {
                key: key.to_string(),
                message: format!(
                    "expected an array of f32, found an array of {}",
                    a.type_name()
                ),
            }),
        }
    }
}
// ANCHOR_END: accessors_ints
