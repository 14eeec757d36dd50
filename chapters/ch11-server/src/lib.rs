//! Chapter 11: the server — an OpenAI-compatible HTTP API over chapter 10's batched engine.
//!
//! The request's path through the files:
//!
//! - [`launch`]: the flags, and starting everything; [`serve`]: accepting connections (hyper, with a header timeout and a graceful stop);
//! - [`routes`]: the router, its handlers, the API key, the limits as tower-http layers;
//! - [`api`]: OpenAI's request bodies, checked field by field; [`error`]: every refusal in
//!   OpenAI's error shape;
//! - [`worker`]: the engine thread, the only owner of the model, and the channels to it;
//! - [`answer`]: tokens into Server-Sent Events, or into one JSON body; [`reply`]: the wire
//!   format of both;
//! - [`structure`]: the seam where a later chapter answers `response_format` and `tools`;
//!   [`toolcall`]: a tool call read out of the text and returned in OpenAI's shape;
//! - [`metrics`]: counters, gauges and histograms for `/metrics`;
//! - [`loadtest`]: many clients against any server that speaks this API; [`demo`]: a scripted
//!   session, printed.

pub mod answer;
pub mod api;
pub mod demo;
pub mod error;
pub mod launch;
pub mod loadtest;
pub mod metrics;
pub mod reply;
pub mod routes;
pub mod serve;
pub mod structure;
pub mod toolcall;
pub mod worker;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;
