//! A conversation rendered by the model's template into the text it was trained on, within
//! the budgets of [`MAX_TEMPLATE_STEPS`] and [`MAX_TEMPLATE_EXTRA_BYTES`].

use std::io::{self, Write};

use minijinja::ErrorKind;

use super::environment::{self, Vars};
use super::template::{ChatTemplate, MAX_TEMPLATE_EXTRA_BYTES, MAX_TEMPLATE_STEPS, Message};

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
