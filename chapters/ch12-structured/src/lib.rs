//! Chapter 12: structured output — a grammar that decides, before each token is sampled,
//! which tokens may come next.
//!
//! - [`grammar`]: what a JSON value may look like, as a graph of nodes;
//! - [`schema`]: a JSON schema (the subset OpenAI's and pydantic's schemas use) compiled into one;
//! - [`matcher`]: the grammar read one byte at a time, as a set of parser stacks;
//! - [`mask`]: every token checked at once, by walking the vocabulary in sorted order;
//! - [`constrain`]: one generation under a grammar, closed in time, as chapter 10's steer;
//! - [`api`]: `response_format` and `tools` for chapter 11's server; [`tools`]: the tools
//!   checked, the grammar of a call, the prompt that lists them;
//! - [`answer`]: one request through chapter 10's engine; [`bench`](mod@bench): what the
//!   grammar costs.

pub mod answer;
pub mod api;
pub mod bench;
pub mod constrain;
pub mod grammar;
pub mod json;
pub mod mask;
pub mod matcher;
pub mod schema;
pub mod tools;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;
