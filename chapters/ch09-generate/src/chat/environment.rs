//! The world a chat template runs in: Hugging Face's, rebuilt in minijinja.
//!
//! Templates are written against what `apply_chat_template` gives them (transformers'
//! `chat_template_utils.py`): Jinja2 with `trim_blocks` and `lstrip_blocks`, `break` and
//! `continue`, the functions `raise_exception` and `strftime_now`, a `tojson` that is Python's
//! `json.dumps`, and the variables `messages`, `tools`, `documents`, `add_generation_prompt`
//! and the tokenizer's special tokens. Python's string and dict methods (`.strip()`,
//! `.split()`, `.get()`) work because Jinja2 evaluates Python; here `minijinja-contrib`'s
//! `pycompat` supplies them. Everything else a template could reach stays out.

use minijinja::value::ValueKind;
use std::sync::Arc;

use minijinja::value::{Enumerator, Object};
use minijinja::{Environment, Error, ErrorKind, Value};

use super::template::{MAX_TEMPLATE_STEPS, Message};
use super::{pyjson, strftime};

/// What a template is given besides the conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Vars {
    /// The text of the tokenizer's BOS token (`<|begin_of_text|>`), if it has one.
    pub bos_token: Option<String>,
    /// The text of its EOS token (`</s>`), if it has one.
    pub eos_token: Option<String>,
    /// The clock `strftime_now` reads, in Unix seconds (UTC).
    pub now: i64,
    /// The request's `tools` (OpenAI's list of functions), for a template that renders them.
    pub tools: Option<serde_json::Value>,
}

impl Vars {
    /// No special tokens, the clock at this moment.
    pub fn now() -> Vars {
        Vars::default().at_current_time()
    }

    /// These variables with the clock set to this moment.
    pub fn at_current_time(mut self) -> Vars {
        self.now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self
    }
}

// ANCHOR: environment
/// An environment configured as Hugging Face configures Jinja2 for chat templates, with a
/// budget of [`MAX_TEMPLATE_STEPS`].
pub fn environment(now: i64) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_fuel(Some(MAX_TEMPLATE_STEPS));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_function("strftime_now", move |format: String| {
        strftime::strftime(&format, now)
    });
    env.add_filter("tojson", pyjson::tojson);
    // Two tests where minijinja's answer is not Python's: `none` iterates (as nothing) in
    // minijinja but not in Python, so `tools is iterable and tools | length > 0` fails on
    // `tools=None`; and Jinja2 calls anything with a length and items a sequence, strings
    // and dicts included. (Jinja2's undefined value is both.)
    env.add_test("iterable", |v: Value| !v.is_none() && v.try_iter().is_ok());
    env.add_test("sequence", |v: Value| {
        v.is_undefined()
            || matches!(
                v.kind(),
                ValueKind::String | ValueKind::Seq | ValueKind::Map
            )
    });
    env
}
// ANCHOR_END: environment

/// The variables of one rendering: the conversation, the tools if a request gave them (no
/// documents: this engine takes none), and the special tokens the tokenizer has.
pub fn variables(messages: &[Message], add_generation_prompt: bool, vars: &Vars) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| Value::from_object(Turn(m.clone())))
        .collect();
    let mut vars_map = std::collections::BTreeMap::from([
        ("messages", Value::from(messages)),
        (
            "tools",
            vars.tools
                .as_ref()
                .map_or(Value::from(()), Value::from_serialize),
        ),
        ("documents", Value::from(())),
        ("add_generation_prompt", Value::from(add_generation_prompt)),
    ]);
    for (name, token) in [
        ("bos_token", &vars.bos_token),
        ("eos_token", &vars.eos_token),
    ] {
        if let Some(token) = token {
            vars_map.insert(name, Value::from(token.as_str()));
        }
    }
    Value::from(vars_map)
}

/// A message as a template sees it: a dict whose keys come in Python's order, `role` then
/// `content` (a plain minijinja map would sort them, and `messages | tojson` would differ).
#[derive(Debug)]
struct Turn(Message);

impl Object for Turn {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(Value::from(self.0.role.as_str())),
            "content" => Some(Value::from(self.0.content.as_str())),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}
