//! Turning a request's [`Out`]s into its answer: a stream of Server-Sent Events, or one
//! JSON body at the end.
//!
//! A stream is `data: {chunk}` events, one per token that has text, then a chunk with the
//! finish reason, the usage chunk when asked for, and `data: [DONE]`. When the client goes
//! away, hyper drops the stream, the stream drops its receiver, and the engine thread sees a
//! closed channel and cancels the sequence: no message is needed to cancel.

use std::convert::Infallible;

use axum::Json;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::Endpoint;
use crate::error::ApiError;
use crate::reply::{Reply, finish_reason, logprobs};
use crate::structure::Shape;
use crate::toolcall::{self, Head};
use crate::worker::Out;

/// Where a stream is.
enum Phase {
    Start,
    Running,
    Ended,
}

struct Streaming {
    reply: Reply,
    rx: UnboundedReceiver<Out>,
    /// Bytes of text sent so far (completions' `text_offset`).
    sent: usize,
    phase: Phase,
    /// With tools: the text so far, and what it has turned out to be.
    buf: String,
    call: CallState,
}

/// A streamed answer to a request with tools.
enum CallState {
    /// Not known yet: the text is held back.
    Undecided,
    /// Plain text (`tool_choice: "auto"`, and the text does not start with `{`).
    Text,
    /// A call whose name has been sent; `sent` bytes of its arguments too.
    Args { args_at: usize, sent: usize },
}

fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

fn done() -> Event {
    Event::default().data("[DONE]")
}

fn error_event(e: &ApiError) -> Event {
    data(&e.body())
}

// ANCHOR: stream
/// The streamed answer.
pub fn stream(reply: Reply, rx: UnboundedReceiver<Out>) -> Response {
    let state = Streaming {
        reply,
        rx,
        sent: 0,
        phase: Phase::Start,
        buf: String::new(),
        call: CallState::Undecided,
    };
    let events = futures_util::stream::unfold(state, |mut s| async move {
        let events = s.next_events().await?;
        Some((events, s))
    })
    .flat_map(|events| futures_util::stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
// ANCHOR_END: stream

impl Streaming {
    /// The next events to send; `None` ends the stream.
    async fn next_events(&mut self) -> Option<Vec<Event>> {
        match self.phase {
            Phase::Ended => return None,
            Phase::Start => {
                self.phase = Phase::Running;
                if self.reply.job.endpoint == Endpoint::Chat {
                    return Some(vec![data(&self.reply.chunk(None, None, None))]);
                }
            }
            Phase::Running => {}
        }
        // ANCHOR: next_events
        loop {
            let out = self.rx.recv().await;
            if !matches!(out, Some(Out::Token { .. })) {
                self.phase = Phase::Ended;
            }
            match out {
                Some(Out::Token { id, text, logits }) => {
                    self.reply.timed_token();
                    let lp = match (self.reply.job.logprobs, logits) {
                        (Some(n), Some(l)) => Some(logprobs(&l, id, n)),
                        _ => None,
                    };
                    if text.is_empty() && lp.is_none() {
                        continue; // held back: part of a character, or maybe a stop string
                    }
                    if matches!(self.reply.job.shape, Shape::ToolCall { .. }) {
                        let events = self.call_events(&text);
                        if events.is_empty() {
                            continue;
                        }
                        return Some(events);
                    }
                    let lp = lp.map(|t| self.reply.logprobs_json(&[t], self.sent));
                    self.sent += text.len();
                    return Some(vec![data(&self.reply.chunk(Some(&text), lp, None))]);
                }
                Some(Out::Done(f)) => {
                    self.reply.finished(&f);
                    let mut events = Vec::new();
                    let mut finish = finish_reason(f.reason);
                    if matches!(self.reply.job.shape, Shape::ToolCall { .. }) {
                        (events, finish) = self.call_end(&f.text, finish);
                    } else if !f.text.is_empty() {
                        events.push(data(&self.reply.chunk(Some(&f.text), None, None)));
                    }
                    match finish {
                        Some(reason) => {
                            events.push(data(&self.reply.chunk(None, None, Some(reason))));
                            if self.reply.job.include_usage {
                                events.push(data(&self.reply.usage_chunk(&f)));
                            }
                        }
                        None => events.push(error_event(&shutting_down())),
                    }
                    events.push(done());
                    return Some(events);
                }
                Some(Out::Failed(why)) => {
                    self.reply.outcome = Some("error");
                    return Some(vec![error_event(&engine_failed(&why)), done()]);
                }
                None => {
                    self.reply.outcome = Some("error");
                    return Some(vec![error_event(&engine_failed("it stopped")), done()]);
                }
            }
        }
        // ANCHOR_END: next_events
    }
}

impl Streaming {
    // ANCHOR: call_events
    /// A request with tools: the events for new `text`. A call is sent as soon as its name
    /// is known, then its arguments piece by piece; with `tool_choice: "auto"`, text that
    /// starts with `{` is held back to the end, when it is known whether it is a call.
    fn call_events(&mut self, text: &str) -> Vec<Event> {
        let Shape::ToolCall { names, required } = &self.reply.job.shape else {
            return Vec::new();
        };
        if let CallState::Text = self.call {
            return vec![data(&self.reply.chunk(Some(text), None, None))];
        }
        self.buf += text;
        let mut events = Vec::new();
        if let CallState::Undecided = self.call {
            let start = self.buf.trim_start();
            if !required && !start.is_empty() && !start.starts_with('{') {
                self.call = CallState::Text;
                return vec![data(&self.reply.chunk(Some(&self.buf), None, None))];
            }
            match toolcall::head(&self.buf) {
                Head::Call { name, args_at } if *required && names.contains(&name) => {
                    let call = self.reply.call_json(Some(&name), "", true);
                    events.push(data(&self.reply.tool_chunk(call)));
                    self.call = CallState::Args { args_at, sent: 0 };
                }
                _ => return events,
            }
        }
        if let CallState::Args { args_at, sent } = &mut self.call {
            let so_far = toolcall::arguments_so_far(&self.buf[*args_at..]);
            if so_far.len() > *sent {
                let piece = &so_far[*sent..];
                events.push(data(
                    &self
                        .reply
                        .tool_chunk(self.reply.call_json(None, piece, true)),
                ));
                *sent = so_far.len();
            }
        }
        events
    }
    // ANCHOR_END: call_events

    /// The last events of a request with tools, given the text held back to the end; and
    /// the finish reason, `tool_calls` for a call that ended by itself.
    fn call_end(
        &mut self,
        text: &str,
        finish: Option<&'static str>,
    ) -> (Vec<Event>, Option<&'static str>) {
        let (events, called) = self.call_end_events(text);
        let called_reason = |r| if r == "stop" { "tool_calls" } else { r };
        (
            events,
            if called {
                finish.map(called_reason)
            } else {
                finish
            },
        )
    }

    fn call_end_events(&mut self, text: &str) -> (Vec<Event>, bool) {
        match self.call {
            CallState::Text => {
                let events = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![data(&self.reply.chunk(Some(text), None, None))]
                };
                (events, false)
            }
            CallState::Args { args_at, sent } => {
                self.buf += text;
                let all = toolcall::arguments_at_end(&self.buf[args_at..]);
                let rest = all.get(sent..).unwrap_or_default();
                let events = if rest.is_empty() {
                    Vec::new()
                } else {
                    vec![data(
                        &self
                            .reply
                            .tool_chunk(self.reply.call_json(None, rest, true)),
                    )]
                };
                (events, true)
            }
            CallState::Undecided => {
                self.buf += text;
                match self.reply.tool_call(&self.buf) {
                    Some(call) => {
                        let json = self
                            .reply
                            .call_json(Some(&call.name), &call.arguments, true);
                        (vec![data(&self.reply.tool_chunk(json))], true)
                    }
                    None if self.buf.is_empty() => (Vec::new(), false),
                    None => (
                        vec![data(&self.reply.chunk(Some(&self.buf), None, None))],
                        false,
                    ),
                }
            }
        }
    }
}

fn shutting_down() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is shutting down: the request was ended",
    )
}

fn engine_failed(why: &str) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the engine failed while running this request: {why}"),
    )
}

/// The whole answer, once the last token is in.
pub async fn whole(mut reply: Reply, mut rx: UnboundedReceiver<Out>) -> Result<Response, ApiError> {
    let (mut text, mut lps) = (String::new(), Vec::new());
    while let Some(out) = rx.recv().await {
        match out {
            Out::Token {
                id,
                text: t,
                logits,
            } => {
                reply.timed_token();
                text += &t;
                if let (Some(n), Some(l)) = (reply.job.logprobs, logits) {
                    lps.push(logprobs(&l, id, n));
                }
            }
            Out::Done(f) => {
                reply.finished(&f);
                text += &f.text;
                if finish_reason(f.reason).is_none() {
                    return Err(shutting_down());
                }
                let lp = reply.job.logprobs.map(|_| reply.logprobs_json(&lps, 0));
                // with tools, the text is returned as a call when it is one ([`Reply::whole`])
                return Ok(Json(reply.whole(&text, lp, &f)).into_response());
            }
            Out::Failed(why) => {
                reply.outcome = Some("error");
                return Err(engine_failed(&why));
            }
        }
    }
    reply.outcome = Some("error");
    Err(engine_failed("it stopped"))
}
