//! One field of a request's JSON object, read as the type it must have: a wrong type or a
//! number out of range is a 400 that names the field (`param`).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// Field `name` as a `T`, `None` when absent or `null`; a wrong type is a 400 naming it.
pub fn field<T: DeserializeOwned>(
    obj: &Map<String, Value>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|e| ApiError::invalid(name, format!("'{name}': {e}"))),
    }
}

/// A number field that must lie in `lo..=hi`.
pub(super) fn range(
    obj: &Map<String, Value>,
    name: &str,
    lo: f32,
    hi: f32,
) -> Result<Option<f32>, ApiError> {
    match field::<f32>(obj, name)? {
        Some(x) if !(lo..=hi).contains(&x) => Err(ApiError::invalid(
            name,
            format!("'{name}' must be from {lo} to {hi}, not {x}"),
        )),
        x => Ok(x),
    }
}
