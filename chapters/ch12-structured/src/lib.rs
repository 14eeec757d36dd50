//! Chapter 12: structured output — a grammar that decides, before each token is sampled,
//! which tokens may come next.
//!
//! - [`grammar`]: what a JSON value may look like, as a graph of nodes;
//! - [`schema`]: a JSON schema (the subset OpenAI's and pydantic's schemas use) compiled into one;
//! - [`matcher`]: the grammar read one byte at a time, as a set of parser stacks;
//! - [`mask`]: every token checked at once, by walking the vocabulary in sorted order.

pub mod constrain;
pub mod grammar;
pub mod json;
pub mod mask;
pub mod matcher;
pub mod schema;
