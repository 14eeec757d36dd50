//! The seam where a later chapter answers `response_format` and `tools`.
//!
//! This chapter's server cannot make an answer follow a schema, so it refuses both fields
//! by name ([`crate::api`]). A [`Structurer`] given to the server in [`crate::routes::Shared`]
//! reads them instead: it turns a chat request into a [`Plan`], a system prompt to add, a
//! steer for chapter 10's engine (built once the reply's budget is known), and the shape
//! the answer is read back in. Chapter 12 plugs its grammar in here.

use ch10_batching::steer::Steer;

use crate::error::ApiError;

// ANCHOR: structurer
/// Reads what a chat request asks of its answer's form.
pub trait Structurer: Send + Sync {
    /// `body` is the whole request (a JSON object, its member order kept as sent);
    /// `template_takes_tools`: the model's chat template renders `tools` itself.
    /// `Ok(None)`: plain text was asked for; an error is the request's 400.
    fn plan(&self, body: &str, template_takes_tools: bool) -> Result<Option<Plan>, ApiError>;
}

/// A steer for a reply of at most the given number of tokens, or why that is too few.
pub type MakeSteer = Box<dyn FnOnce(usize) -> Result<Box<dyn Steer>, String> + Send>;

/// What a request's `response_format` and `tools` come to.
pub struct Plan {
    /// Text for the system turn (the tools, listed), after any the client sent.
    pub system: Option<String>,
    /// The tools, for a chat template that renders them.
    pub tools: Option<serde_json::Value>,
    /// `None`: the model decodes freely.
    pub steer: Option<MakeSteer>,
    pub shape: Shape,
}

/// How the generated text is returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Shape {
    /// As `content`.
    #[default]
    Text,
    /// As `tool_calls` when it is `{"name": …, "arguments": {…}}` naming one of `names`;
    /// with `required` it always is (the grammar saw to it), else it may be text.
    ToolCall { names: Vec<String>, required: bool },
}
// ANCHOR_END: structurer
