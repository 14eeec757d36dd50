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
pub mod sandbox;
pub mod strftime;

use std::io::{self, Write};

use ch02_tokenizer::special::SpecialToken;
use ch08_gguf::{GgufTokenizer, Loaded};
use minijinja::ErrorKind;

pub use environment::Vars;
use sandbox::Sandbox;

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

/// [`render_with`] without special tokens, the clock at this moment.
pub fn render(
    template: &ChatTemplate,
    messages: &[Message],
    add_generation_prompt: bool,
) -> Result<String, String> {
    render_with(template, messages, add_generation_prompt, &Vars::now())
}

// ANCHOR: render
/// The text of `messages` in the model's format, ending with the start of the assistant's
/// turn when `add_generation_prompt`.
pub fn render_with(
    template: &ChatTemplate,
    messages: &[Message],
    add_generation_prompt: bool,
    vars: &Vars,
) -> Result<String, String> {
    match template {
        ChatTemplate::Jinja(source) => {
            // The template comes from the file: a budget of work (the environment's fuel),
            // and of output below.
            let env = environment::environment(vars.now);
            let t = env
                .template_from_str(source)
                .map_err(|e| format!("the chat template does not parse: {e}"))?;
            let tools_bytes = vars.tools.as_ref().map_or(0, |t| t.to_string().len());
            let text_bytes = tools_bytes + messages.iter().map(|m| m.content.len()).sum::<usize>();
            let mut out = BoundedText::new(text_bytes + MAX_TEMPLATE_EXTRA_BYTES);
            let ctx = environment::variables(messages, add_generation_prompt, vars);
            match t.render_captured_to(ctx, &mut out) {
                Ok(_) => String::from_utf8(out.bytes)
                    .map_err(|_| "the chat template wrote text that is not UTF-8".to_string()),
                Err(_) if out.overflowed => Err(format!(
                    "the model's chat template (tokenizer.chat_template) wrote more than \
                     {MAX_TEMPLATE_EXTRA_BYTES} bytes besides the messages: refusing it"
                )),
                Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(format!(
                    "the model's chat template (tokenizer.chat_template) used more than \
                     {MAX_TEMPLATE_STEPS} steps of work: refusing it"
                )),
                Err(e) => Err(format!("the chat template refused the conversation: {e}")),
            }
        }
        ChatTemplate::Gemma => Ok(render_gemma(messages, add_generation_prompt)),
    }
}
// ANCHOR_END: render

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

/// The rendered text, refusing to grow past a limit.
struct BoundedText {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl BoundedText {
    fn new(limit: usize) -> BoundedText {
        BoundedText {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl Write for BoundedText {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(io::Error::other("the rendered text is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Gemma's turns: `model` for the assistant, a system message merged into the next user
/// turn (Gemma has no system role), contents trimmed.
fn render_gemma(messages: &[Message], add_generation_prompt: bool) -> String {
    let mut out = String::new();
    let mut system = String::new();
    for m in messages {
        if m.role == "system" {
            system.push_str(m.content.trim());
            continue;
        }
        let role = if m.role == "assistant" {
            "model"
        } else {
            m.role.as_str()
        };
        out.push_str(&format!("<start_of_turn>{role}\n"));
        if !system.is_empty() && role != "model" {
            out.push_str(&system);
            out.push_str("\n\n");
            system.clear();
        }
        out.push_str(m.content.trim());
        out.push_str("<end_of_turn>\n");
    }
    if add_generation_prompt {
        out.push_str("<start_of_turn>model\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemma_turns() {
        let m = [
            Message::new("system", "Be brief."),
            Message::new("user", "Hi"),
            Message::new("assistant", "Hello."),
            Message::new("user", "Bye"),
        ];
        assert_eq!(
            render(&ChatTemplate::Gemma, &m, true).unwrap(),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn raise_exception_is_an_error() {
        let t = ChatTemplate::Jinja("{{ raise_exception('no system role') }}".into());
        let e = render(&t, &[], true).unwrap_err();
        assert!(e.contains("no system role"), "{e}");
    }
}
