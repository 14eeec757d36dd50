//! The API key check: with `--api-key`, every `/v1` request must carry the key, compared in
//! constant time.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::ApiError;

// ANCHOR: require_key
/// With `--api-key`, every `/v1` request needs `Authorization: Bearer KEY`. The keys are
/// compared as SHA-256 digests, every byte, so the time taken says nothing about how much
/// of a wrong key was right. Its state is the key's digest (`None`: no key, all may pass).
pub(super) async fn require_key(
    State(key): State<Option<[u8; 32]>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(want) = &key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let refused = match given {
            None => Some("no API key: send the header 'Authorization: Bearer KEY'"),
            Some(k) if !same_digest(&digest(k), want) => Some("the API key is not valid"),
            Some(_) => None,
        };
        if let Some(message) = refused {
            return ApiError::new(StatusCode::UNAUTHORIZED, message)
                .code("invalid_api_key")
                .into_response();
        }
    }
    next.run(req).await
}

pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Equal digests, looking at every byte whatever the first difference.
pub fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}
// ANCHOR_END: require_key

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_compare() {
        assert!(same_digest(&digest("k"), &digest("k")));
        assert!(!same_digest(&digest("k"), &digest("K")));
    }
}
