//! The HTTP side: the router and its handlers (the API key check is in `routes/auth.rs`).
//!
//! Handlers are plain async functions with axum's extractors. The completion handlers do
//! only quick things on the async runtime: read and check the body, take a place in the
//! queue, hand the chat template and the tokenizer to a blocking thread, send the request
//! to the engine thread, and wait on channels.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{Semaphore, oneshot};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::CorsLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

use ch08_gguf::Loaded;
use ch09_generate::chat::Chat;
use ch10_batching::Request as EngineRequest;

use crate::answer;
use crate::api::{self, Endpoint, Prompt};
use crate::error::{ApiError, from_engine};
use crate::metrics::Metrics;
use crate::reply::Reply;
use crate::structure::Structurer;
use crate::worker::{self, Command, Worker};

mod auth;
use auth::require_key;
pub use auth::{digest, same_digest};

/// The chat page, served from the binary.
const PAGE: &str = include_str!("../static/chat.html");

/// What every handler shares.
pub struct Shared {
    pub loaded: &'static Loaded,
    /// The model's chat template, run in a child process, and its control tokens.
    pub chat: Option<Chat>,
    /// The model's id in the API (`/v1/models`, the `model` field).
    pub name: String,
    /// Positions one request may use, prompt and reply together (`--ctx`).
    pub ctx: usize,
    pub worker: Worker,
    pub metrics: Metrics,
    /// Places in the engine: running plus queued requests at most (`--parallel` + `--queue`).
    pub slots: Arc<Semaphore>,
    pub capacity: usize,
    /// SHA-256 of the API key, when there is one.
    pub key: Option<[u8; 32]>,
    pub created: u64,
    pub next_id: AtomicU64,
    /// What reads `response_format` and `tools`; `None`: they are refused.
    pub structurer: Option<Arc<dyn Structurer>>,
}

pub type App = Arc<Shared>;

/// Limits on what clients send.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// The largest request body, in bytes (`--body-limit`).
    pub body_limit: usize,
    /// How long a client may take to send its headers (in [`crate::serve`]), or the next
    /// piece of its body (tower-http restarts the clock at each one).
    pub client_timeout: Duration,
    pub cors: bool,
}

// ANCHOR: router
pub fn router(app: App, limits: HttpLimits) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route_layer(middleware::from_fn_with_state(app.key, require_key));
    let router = Router::new()
        .merge(api)
        .route("/", get(page))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limits.body_limit))
        .layer(RequestBodyTimeoutLayer::new(limits.client_timeout))
        .layer(CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send + 'static>| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the server failed while answering this request",
                )
                .into_response()
            },
        ))
        .with_state(app);
    if limits.cors {
        router.layer(CorsLayer::permissive())
    } else {
        router
    }
}
// ANCHOR_END: router

async fn chat_completions(
    State(app): State<App>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    counted(
        &app,
        Endpoint::Chat,
        complete(app.clone(), &headers, body, Endpoint::Chat).await,
    )
}

async fn completions(
    State(app): State<App>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    counted(
        &app,
        Endpoint::Completions,
        complete(app.clone(), &headers, body, Endpoint::Completions).await,
    )
}

// ANCHOR: json_only
/// A body is parsed only when it says it is JSON (`application/json`, any parameters). A web
/// page on another site may POST `text/plain` to 127.0.0.1 from its visitor's browser with
/// no CORS preflight (a "simple request"); JSON it can send only after asking.
fn json_only(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let essence = given.map(|v| v.split(';').next().unwrap_or_default().trim());
    match essence {
        Some(e) if e.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body must be JSON, sent with Content-Type: application/json (this request's: {})",
                given.unwrap_or("none")
            ),
        )
        .code("unsupported_media_type")),
    }
}
// ANCHOR_END: json_only

/// A refused request counts under its HTTP status (an accepted one counts itself, in [`Reply`]).
fn counted(app: &App, endpoint: Endpoint, r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(|e| {
        let name = if endpoint == Endpoint::Chat {
            "chat"
        } else {
            "completions"
        };
        app.metrics.count_request(name, e.status.as_str());
        e.into_response()
    })
}

// ANCHOR: complete
async fn complete(
    app: App,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    endpoint: Endpoint,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    json_only(headers)?;
    let body = body.map_err(body_error)?;
    let takes_tools = app.chat.as_ref().is_some_and(Chat::takes_tools);
    let (job, make_steer) =
        api::parse_with(&body, endpoint, app.structurer.as_deref(), takes_tools)?;
    if let Some(m) = job.model.as_deref().filter(|m| *m != app.name) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "the model {m:?} does not exist: this server has {:?}",
                app.name
            ),
        )
        .param("model")
        .code("model_not_found"));
    }
    match app.metrics.ready.get() {
        1 => {}
        worker::FAILED => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the engine stopped after a failure it could not recover from: restart the server",
            )
            .code("engine_failed"));
        }
        _ => {
            return Err(
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the model is loading")
                    .retry_after(1),
            );
        }
    }
    // A place in the bounded queue, or a 503 now: never an unbounded wait.
    let permit = app.slots.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server is busy: {} requests are running or queued; retry later",
                app.capacity
            ),
        )
        .code("server_busy")
        .retry_after(1)
    })?;
    // ANCHOR_END: complete
    // ANCHOR: submit
    // The template and the tokenizer are CPU work: a blocking thread, not the runtime's.
    let (shared, prompt, tools) = (app.clone(), job.prompt.clone(), job.tools.clone());
    let ids = tokio::task::spawn_blocking(move || prompt_ids(&shared, &prompt, tools.as_ref()))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "tokenizing the prompt failed",
            )
        })??;
    let prompt_len = ids.len();
    let max_tokens = fit(prompt_len, job.max_tokens, app.ctx, endpoint)?;
    // A steer that must close its document within the budget (chapter 12)
    let steer = make_steer
        .map(|make| make(max_tokens))
        .transpose()
        .map_err(|e| ApiError::invalid("max_tokens", e))?;
    let req = EngineRequest {
        prompt: ids,
        max_tokens,
        sampling: job.sampling.clone(),
        stops: job.stops.clone(),
        ignore_eos: job.ignore_eos,
        keep_logits: job.logprobs.is_some(),
    };
    let (reply_tx, reply_rx) = oneshot::channel();
    let gone = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        )
    };
    if !app.worker.send(Command::Submit {
        req,
        steer,
        reply: reply_tx,
    }) {
        return Err(gone());
    }
    let rx = reply_rx.await.map_err(|_| gone())?.map_err(from_engine)?;
    app.metrics.prompt_tokens.inc_by(prompt_len as u64);
    // ANCHOR_END: submit
    let n = app.next_id.fetch_add(1, Ordering::Relaxed);
    let prefix = if endpoint == Endpoint::Chat {
        "chatcmpl"
    } else {
        "cmpl"
    };
    let reply = Reply {
        id: format!("{prefix}-{:x}{n:06}", app.created),
        model: app.name.clone(),
        created: app.created,
        tokenizer: &app.loaded.tokenizer.tokenizer,
        metrics: app.metrics.clone(),
        arrived,
        last_token: None,
        permit,
        outcome: None,
        job,
    };
    if reply.job.stream {
        Ok(answer::stream(reply, rx))
    } else {
        answer::whole(reply, rx).await
    }
}

/// The prompt's tokens: a chat through the model's template, its messages kept as text; a
/// completion's prompt as the client wrote it, control tokens included (as llama-server does).
fn prompt_ids(
    app: &Shared,
    prompt: &Prompt,
    tools: Option<&serde_json::Value>,
) -> Result<Vec<u32>, ApiError> {
    let ids = match prompt {
        Prompt::Text(t) => app.loaded.tokenizer.encode_prompt(t, true),
        Prompt::Chat(messages) => {
            let chat = app.chat.as_ref().ok_or_else(|| {
                ApiError::invalid(
                    "messages",
                    "this model has no chat template: use /v1/completions",
                )
            })?;
            chat.prompt_ids_with_tools(&app.loaded.tokenizer, messages, tools)
                .map_err(|e| ApiError::invalid("messages", e))?
        }
    };
    if ids.is_empty() {
        return Err(ApiError::invalid("prompt", "the prompt is empty"));
    }
    Ok(ids)
}

// ANCHOR: fit
/// `max_tokens`, checked against the context; absent, as many as the context leaves.
pub fn fit(
    prompt: usize,
    max_tokens: Option<usize>,
    ctx: usize,
    endpoint: Endpoint,
) -> Result<usize, ApiError> {
    let param = if endpoint == Endpoint::Chat {
        "messages"
    } else {
        "prompt"
    };
    if prompt >= ctx {
        return Err(ApiError::invalid(
            param,
            format!("the prompt is {prompt} tokens; the context holds {ctx}, and the reply needs at least one more"),
        )
        .code("context_length_exceeded"));
    }
    match max_tokens {
        None => Ok(ctx - prompt),
        Some(m) if m > ctx - prompt => Err(ApiError::invalid(
            "max_tokens",
            format!(
                "the prompt ({prompt} tokens) plus max_tokens ({m}) is {} tokens; the context holds {ctx}",
                prompt.saturating_add(m)
            ),
        )
        .code("context_length_exceeded")),
        Some(m) => Ok(m),
    }
}
// ANCHOR_END: fit

fn body_error(r: BytesRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is larger than the server's limit (--body-limit)",
        )
        .code("request_too_large")
    } else {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive in time, or broke off: {}",
                r.body_text()
            ),
        )
    }
}

async fn models(State(app): State<App>) -> Response {
    axum::Json(json!({"object": "list", "data": [
        {"id": app.name, "object": "model", "created": app.created, "owned_by": "llm-book"}
    ]}))
    .into_response()
}

async fn health(State(app): State<App>) -> Response {
    let status = match app.metrics.ready.get() {
        1 => return axum::Json(json!({"status": "ok"})).into_response(),
        worker::FAILED => "failed",
        _ => "loading",
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "status": status })),
    )
        .into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}

async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no such endpoint: {method} {}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tokens_must_fit_the_context() {
        assert_eq!(fit(10, None, 100, Endpoint::Completions), Ok(90));
        assert_eq!(fit(10, Some(90), 100, Endpoint::Completions), Ok(90));
        let e = fit(10, Some(91), 100, Endpoint::Completions).unwrap_err();
        assert!(
            e.message.contains("(10 tokens)")
                && e.message.contains("(91)")
                && e.message.contains("101"),
            "{}",
            e.message
        );
        let e = fit(100, None, 100, Endpoint::Chat).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
    }
}
