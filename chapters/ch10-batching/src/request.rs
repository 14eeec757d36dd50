//! What a caller hands the engine, and what it gets back: a [`Request`] in, a stream of
//! [`Event`]s out through a channel.
//!
//! The shape is for chapter 11: one thread owns the model and calls
//! [`crate::engine::BatchEngine::step`] in a loop; each request's events travel through a
//! `std::sync::mpsc` channel to whoever waits for them (an HTTP handler), token by token,
//! as soon as the step that made them ends.

use ch09_generate::SamplerConfig;

// ANCHOR: request
/// One generation request.
#[derive(Clone, Debug)]
pub struct Request {
    /// The prompt's token ids (at least one).
    pub prompt: Vec<u32>,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Chapter 9's sampling chain, with its own seed.
    pub sampling: SamplerConfig,
    /// Stop when one of these appears in the text.
    pub stops: Vec<String>,
    /// Keep going past an end-of-generation token (benchmarks).
    pub ignore_eos: bool,
    /// Send each token's logits with it (tests of batch invariance).
    pub keep_logits: bool,
}

/// What a request's receiver gets.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A new token, and the text that is now safe to print (possibly empty: a partial
    /// UTF-8 character, or the possible start of a stop string, is held back).
    Token {
        id: u32,
        text: String,
        /// `(vocab)`, with [`Request::keep_logits`].
        logits: Option<Vec<f32>>,
    },
    /// The last event of a request.
    Done(Finished),
}
// ANCHOR_END: request

impl Request {
    /// A greedy request for up to `max_tokens` after `prompt`.
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> Request {
        Request {
            prompt,
            max_tokens,
            sampling: SamplerConfig {
                temperature: 0.0,
                ..SamplerConfig::default()
            },
            stops: Vec::new(),
            ignore_eos: false,
            keep_logits: false,
        }
    }
}

/// Why a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token.
    Eos,
    /// A stop string.
    Stop,
    /// `max_tokens` generated.
    Length,
    /// [`crate::engine::BatchEngine::cancel`], or its receiver was dropped.
    Cancelled,
}

impl FinishReason {
    /// The name chapter 9 (and OpenAI's API) uses.
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Eos => "eos",
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// The summary of a finished request.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub reason: FinishReason,
    /// Text held back until the end (the tail of a possible stop string that was not one).
    pub text: String,
    pub prompt_tokens: usize,
    /// Prompt tokens found in the prefix cache at the first admission.
    pub cached_tokens: usize,
    pub generated: usize,
    /// How often it was preempted (and recomputed).
    pub preemptions: usize,
}
