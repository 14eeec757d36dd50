//! Chapter 9: the generator.
//!
//! - [`sampling`]: the chain from logits to a token (penalties, top-k, top-p, min-p,
//!   temperature, a seeded draw);
//! - [`stop`]: stop strings matched across token boundaries;
//! - [`generate`](mod@generate): the loop that ties chapter 8's engine, the sampler and the
//!   streaming decoder together, and says why it stopped;
//! - [`stages`]: the distribution after each stage of the chain, as a table or a figure;
//! - [`streamed`]: decode speed as a user meets it, through the whole loop;
//! - [`scaling`]: speed and memory against the model's size, as a table and a figure.

pub mod chat;
pub mod generate;
pub mod perplexity;
pub mod plot;
pub mod race;
pub mod rng;
pub mod sampling;
pub mod scaling;
pub mod session;
pub mod stages;
pub mod stop;
pub mod streamed;

/// The chapter's exercises: stubs for you to fill in (see the book's "Exercises" page).
#[cfg_attr(feature = "solutions", path = "../solutions/exercises.rs")]
pub mod exercises;

pub use generate::{Generation, StopReason, generate};
pub use sampling::{Sampler, SamplerConfig};
pub use stop::StopMatcher;
