//! Chat prompts: a conversation rendered into the text the model was trained on, and that
//! text into tokens.
//!
//! Instruction-tuned models expect their turns wrapped in markers (`<|im_start|>user …
//! <|im_end|>` for SmolLM2). The rule is a Jinja template stored in the GGUF as
//! `tokenizer.chat_template`, the one Hugging Face's `apply_chat_template` runs; this module
//! renders it with `minijinja`, set up as Hugging Face sets up Jinja2 ([`environment`]). A file
//! without a template (Gemma-3-270M's has none) gets the family's format as llama.cpp writes it.
//!
//! Two things come from strangers here, and neither may take control:
//! - the template is code from the model file: rendering it is given a budget of steps
//!   ([`MAX_TEMPLATE_STEPS`]) and of output ([`MAX_TEMPLATE_EXTRA_BYTES`]), and [`Chat`] runs it
//!   in a child process whose memory the kernel bounds ([`sandbox`]);
//! - the messages are text from users: their characters never become control tokens
//!   ([`guard`]).

pub mod environment;
pub mod guard;
pub mod pyjson;
pub mod render;
pub mod sandbox;
pub mod strftime;
pub mod template;

use ch02_tokenizer::special::SpecialToken;
use ch08_gguf::{GgufTokenizer, Loaded};

pub use environment::Vars;
pub use render::{render, render_with};
use sandbox::Sandbox;
pub use template::{ChatTemplate, MAX_TEMPLATE_EXTRA_BYTES, MAX_TEMPLATE_STEPS, Message};

// ANCHOR: chat
/// What turns a conversation into a prompt: the model's template, where it runs, and its
/// tokenizer's control tokens, which a message may write only as text.
pub struct Chat {
    pub template: ChatTemplate,
    /// `None`: the template runs in this process (one you trust: a test's, your own).
    sandbox: Option<Sandbox>,
    controls: Vec<SpecialToken>,
    /// The tokenizer's BOS and EOS texts, which the template is given.
    vars: Vars,
    /// The tokenizer puts BOS in front of the prompt itself.
    add_bos: bool,
}

impl Chat {
    /// `eos` is the file's `tokenizer.ggml.eos_token_id`.
    pub fn new(
        template: ChatTemplate,
        tokenizer: &GgufTokenizer,
        eos: Option<u32>,
        sandbox: Option<Sandbox>,
    ) -> Chat {
        let controls = guard::control_tokens(&tokenizer.tokenizer);
        let text = |id: Option<u32>| {
            let t = tokenizer.tokenizer.vocab().text(id?).ok()?;
            Some(t.to_string())
        };
        let vars = Vars {
            bos_token: text(tokenizer.bos),
            eos_token: text(eos),
            now: 0,
            tools: None,
        };
        let add_bos = tokenizer.add_bos && vars.bos_token.is_some();
        Chat {
            template,
            sandbox,
            controls,
            vars,
            add_bos,
        }
    }

    /// The template of the model's file (or its family's), run in `sandbox`.
    pub fn of_model(model: &Loaded, sandbox: Option<Sandbox>) -> Result<Chat, String> {
        Chat::of_gguf(&model.file.gguf, &model.tokenizer, sandbox)
    }

    /// The template of `g` (or its family's), with its tokenizer, run in `sandbox`.
    pub fn of_gguf(
        g: &ch08_gguf::Gguf,
        tokenizer: &GgufTokenizer,
        sandbox: Option<Sandbox>,
    ) -> Result<Chat, String> {
        let template = ChatTemplate::from_gguf(g)?;
        Chat::with_template(g, tokenizer, template, sandbox)
    }

    /// `template` for the tokenizer of `g` (a vocabulary file, say, which has none of its own).
    pub fn with_template(
        g: &ch08_gguf::Gguf,
        tokenizer: &GgufTokenizer,
        template: ChatTemplate,
        sandbox: Option<Sandbox>,
    ) -> Result<Chat, String> {
        let eos = g
            .opt_u64("tokenizer.ggml.eos_token_id")
            .map_err(|e| e.to_string())?
            .and_then(|id| u32::try_from(id).ok());
        Ok(Chat::new(template, tokenizer, eos, sandbox))
    }

    /// The prompt's token ids: the template's markers as control tokens, the messages as text.
    pub fn prompt_ids(
        &self,
        tokenizer: &GgufTokenizer,
        messages: &[Message],
    ) -> Result<Vec<u32>, String> {
        self.prompt_ids_with_tools(tokenizer, messages, None)
    }

    /// Whether the template renders a request's `tools` (it reads the variable).
    pub fn takes_tools(&self) -> bool {
        matches!(&self.template, ChatTemplate::Jinja(s) if s.contains("tools"))
    }

    /// [`Chat::prompt_ids`], the template given `tools` (OpenAI's list of functions).
    pub fn prompt_ids_with_tools(
        &self,
        tokenizer: &GgufTokenizer,
        messages: &[Message],
        tools: Option<&serde_json::Value>,
    ) -> Result<Vec<u32>, String> {
        let source = match &self.template {
            ChatTemplate::Jinja(source) => source.as_str(),
            ChatTemplate::Gemma => "",
        };
        let (messages, guard) = guard::guard_messages(messages, &self.controls, source)?;
        let mut vars = self.vars.clone().at_current_time();
        vars.tools = tools.cloned();
        let text = match (&self.template, &self.sandbox) {
            (ChatTemplate::Jinja(source), Some(sandbox)) => {
                sandbox.render_with(source, &messages, true, &vars)?
            }
            (template, _) => render_with(template, &messages, true, &vars)?,
        };
        // A template that writes BOS itself (Llama 3's) would get a second one from the
        // tokenizer: drop the template's, as llama.cpp does.
        let text = match &vars.bos_token {
            Some(bos) if self.add_bos => text.strip_prefix(bos.as_str()).unwrap_or(&text),
            _ => &text,
        };
        Ok(guard::encode_guarded(tokenizer, text, guard))
    }
}
// ANCHOR_END: chat

/// Writes to `out` a copy of the model file `model` whose chat template is `template`, put
/// in place of the file's own and padded with spaces to its length, so nothing else in the
/// file moves: how the tests make a hostile model file. `template` must not be longer.
pub fn copy_with_template(
    model: &std::path::Path,
    template: &str,
    out: &std::path::Path,
) -> Result<(), String> {
    let file = ch08_gguf::load(model).map_err(|e| e.to_string())?;
    let ChatTemplate::Jinja(original) = ChatTemplate::from_gguf(&file.file.gguf)? else {
        return Err(format!(
            "{} has no chat template to replace",
            model.display()
        ));
    };
    drop(file);
    if template.len() > original.len() {
        return Err(format!(
            "the new template ({} bytes) is longer than the file's ({} bytes)",
            template.len(),
            original.len()
        ));
    }
    let mut bytes = std::fs::read(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let at = bytes
        .windows(original.len())
        .position(|w| w == original.as_bytes())
        .ok_or("the template's bytes are not in the file")?;
    let padded = format!("{template:<width$}", width = original.len());
    bytes[at..at + original.len()].copy_from_slice(padded.as_bytes());
    std::fs::write(out, &bytes).map_err(|e| format!("{}: {e}", out.display()))
}
