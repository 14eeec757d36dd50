//! What a conversation is, and the template that makes it text: a [`Message`] per turn, the
//! model's [`ChatTemplate`], and the budgets a template from a file renders within. Every
//! other file of the chat module builds on these.

/// The most steps of work (minijinja's fuel: about one per instruction) one rendering may take.
/// SmolLM2's template takes a few dozen per message, so this is thousands of turns, far more than
/// any context holds; two nested `range(100000)` loops would take ten billion.
pub const MAX_TEMPLATE_STEPS: u64 = 1_000_000;

/// How much text a template may add to the messages' own: a template wraps each turn in its
/// markers (tens of bytes), it does not write megabytes.
pub const MAX_TEMPLATE_EXTRA_BYTES: usize = 1 << 20;

/// One turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// How a model's conversation becomes text.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatTemplate {
    /// `tokenizer.chat_template`, a Jinja template.
    Jinja(String),
    /// Gemma's turns, for a file without a template (llama.cpp's built-in `gemma` format).
    Gemma,
}

impl ChatTemplate {
    /// The template in `g`, or the family's built-in one; an error if there is neither.
    pub fn from_gguf(g: &ch08_gguf::Gguf) -> Result<ChatTemplate, String> {
        if let Some(t) = g
            .opt_str("tokenizer.chat_template")
            .map_err(|e| e.to_string())?
        {
            return Ok(ChatTemplate::Jinja(t.to_string()));
        }
        match g
            .opt_str("general.architecture")
            .map_err(|e| e.to_string())?
        {
            Some("gemma3") => Ok(ChatTemplate::Gemma),
            other => Err(format!(
                "the file has no tokenizer.chat_template, and no built-in one is known for {other:?}"
            )),
        }
    }
}
