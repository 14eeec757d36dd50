//! One error type for the whole API, answered in OpenAI's shape:
//! `{"error": {"message": …, "type": …, "param": …, "code": …}}`.
//!
//! Every refusal in the server is an [`ApiError`]; axum turns it into a response through
//! [`IntoResponse`], so a handler just returns `Err(…)` with `?`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

// ANCHOR: api_error
/// A request the server will not or cannot answer, with what the client should know.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable reason (`context_length_exceeded`, `model_not_found`, …).
    pub code: Option<&'static str>,
    /// Seconds after which a retry may succeed (a full queue, a model still loading).
    pub retry_after: Option<u32>,
}
// ANCHOR_END: api_error

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// A 400 about field `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message).param(param)
    }

    pub fn param(mut self, param: &str) -> ApiError {
        self.param = Some(param.to_string());
        self
    }

    pub fn code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    pub fn retry_after(mut self, seconds: u32) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    // ANCHOR: shape
    /// OpenAI's `type`: the client's fault, the server's, or too many requests.
    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            429 => "rate_limit_error",
            500..=599 => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "param": self.param,
            "code": self.code,
        }})
    }
    // ANCHOR_END: shape
}

// ANCHOR: into_response
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        response
    }
}
// ANCHOR_END: into_response

// ANCHOR: engine_error
/// What chapter 10's engine refused, as an HTTP answer: the caller's mistakes are 400s with
/// the engine's own message (it has the numbers), the rest are the server's 500s.
pub fn from_engine(e: ch10_batching::Error) -> ApiError {
    use ch10_batching::Error as E;
    match e {
        E::ContextTooSmall { .. } | E::PoolTooSmall { .. } => {
            ApiError::invalid("max_tokens", e.to_string()).code("context_length_exceeded")
        }
        E::EmptyPrompt => ApiError::invalid("prompt", e.to_string()),
        E::ZeroMaxTokens => ApiError::invalid("max_tokens", e.to_string()),
        E::UnknownRequest(_) | E::Config(_) | E::Model(_) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}
// ANCHOR_END: engine_error

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_openai_shape() {
        let e = ApiError::invalid("n", "n must be 1").code("unsupported");
        assert_eq!(
            e.body(),
            json!({"error": {"message": "n must be 1", "type": "invalid_request_error",
                   "param": "n", "code": "unsupported"}})
        );
    }

    #[test]
    fn engine_errors_map_to_statuses() {
        let too_long = ch10_batching::Error::ContextTooSmall {
            prompt: 9000,
            max_tokens: 10,
            context: 8192,
        };
        let e = from_engine(too_long);
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("9000") && e.message.contains("8192"));
        let e = from_engine(ch10_batching::Error::Model("boom".into()));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
