//! OpenAI's request bodies, read field by field.
//!
//! A body is checked in the order a client's mistakes are most useful to hear about: is it
//! UTF-8, is it JSON, is it an object, does it ask for something this server does not do
//! (`n > 1`, tools), and then each field with its own type and range. Reading the fields one
//! at a time out of a `serde_json::Value` lets every error name the field (`param`), and
//! leaves fields we do not know alone, so a client that sends a field of a newer version of
//! the API still gets an answer.

use serde_json::{Map, Value};

use ch09_generate::SamplerConfig;
use ch09_generate::chat::Message;

use crate::error::ApiError;
use crate::structure::{MakeSteer, Shape, Structurer};

mod fields;
mod messages;

pub use fields::field;
use fields::range;
use messages::{messages, prompt};

/// Which endpoint a body was sent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`: messages, rendered with the model's chat template.
    Chat,
    /// `/v1/completions`: a prompt, continued as it is.
    Completions,
}

/// What the model is asked to continue.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Text(String),
    Chat(Vec<Message>),
}

// ANCHOR: job
/// A checked request: everything the handler needs, in our types.
#[derive(Clone, Debug)]
pub struct Job {
    pub endpoint: Endpoint,
    pub model: Option<String>,
    pub prompt: Prompt,
    /// `None`: as many as the context leaves.
    pub max_tokens: Option<usize>,
    pub sampling: SamplerConfig,
    pub stops: Vec<String>,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the token counts.
    pub include_usage: bool,
    /// `Some(n)`: each token's log-probability and the `n` most likely alternatives.
    pub logprobs: Option<usize>,
    /// Keep going past the end-of-generation token (llama-server's name; load tests).
    pub ignore_eos: bool,
    /// How the answer is returned: text, or a tool call (`tools`, with a [`Structurer`]).
    pub shape: Shape,
    /// The tools, for the chat template to render.
    pub tools: Option<Value>,
}
// ANCHOR_END: job

/// The most stop strings, and alternatives per token, a request may ask for.
pub const MAX_STOPS: usize = 16;
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Reads a request body sent to `endpoint`; `response_format` and `tools` are refused.
pub fn parse(body: &[u8], endpoint: Endpoint) -> Result<Job, ApiError> {
    parse_with(body, endpoint, None, false).map(|(job, _)| job)
}

// ANCHOR: parse
/// Reads a request body sent to `endpoint`. With a `structurer`, a chat's `response_format`
/// and `tools` go to it, and the steer it plans comes back beside the job.
/// `template_takes_tools`: the model's chat template renders tools itself.
pub fn parse_with(
    body: &[u8],
    endpoint: Endpoint,
    structurer: Option<&dyn Structurer>,
    template_takes_tools: bool,
) -> Result<(Job, Option<MakeSteer>), ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::invalid(
            "body",
            format!(
                "the request body is not valid UTF-8 (bad byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ApiError::invalid("body", format!("the request body is not valid JSON: {e}"))
    })?;
    let Value::Object(obj) = value else {
        return Err(ApiError::invalid(
            "body",
            "the request body must be a JSON object",
        ));
    };
    let structurer = structurer.filter(|_| endpoint == Endpoint::Chat);
    unsupported(&obj, endpoint, structurer.is_some())?;
    let mut prompt = match endpoint {
        Endpoint::Chat => Prompt::Chat(messages(&obj)?),
        Endpoint::Completions => Prompt::Text(prompt(&obj)?),
    };
    let plan = match structurer {
        Some(s) => s.plan(text, template_takes_tools)?,
        None => None,
    };
    let (steer, shape, tools) = match plan {
        Some(plan) => {
            if let (Some(extra), Prompt::Chat(turns)) = (plan.system, &mut prompt) {
                with_system(turns, &extra);
            }
            (plan.steer, plan.shape, plan.tools)
        }
        None => (None, Shape::Text, None),
    };
    // ANCHOR_END: parse
    let max_tokens = match field::<u64>(&obj, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => field::<u64>(&obj, "max_tokens")?,
    };
    let max_tokens = max_tokens
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .map(|n| {
            if n == 0 {
                Err(ApiError::invalid(
                    "max_tokens",
                    "max_tokens must be at least 1",
                ))
            } else {
                Ok(n)
            }
        })
        .transpose()?;
    let d = SamplerConfig::default();
    let temperature = range(&obj, "temperature", 0.0, 2.0)?.unwrap_or(d.temperature);
    let top_p = range(&obj, "top_p", 0.0, 1.0)?.unwrap_or(d.top_p);
    if top_p == 0.0 {
        return Err(ApiError::invalid("top_p", "top_p must be above 0"));
    }
    let sampling = SamplerConfig {
        temperature,
        top_p,
        frequency_penalty: range(&obj, "frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        presence_penalty: range(&obj, "presence_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        // no seed: a different draw each time, as OpenAI's API does
        seed: match field::<i64>(&obj, "seed")? {
            Some(s) => s as u64,
            None => fresh_seed(),
        },
        ..d
    };
    let stops = match obj.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(_) => field::<Vec<String>>(&obj, "stop")?.unwrap_or_default(),
    };
    if stops.len() > MAX_STOPS || stops.iter().any(|s| s.is_empty() || s.len() > 256) {
        return Err(ApiError::invalid(
            "stop",
            format!("stop takes at most {MAX_STOPS} strings of 1 to 256 bytes"),
        ));
    }
    let stream = field::<bool>(&obj, "stream")?.unwrap_or(false);
    let include_usage = match obj.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => field::<bool>(o, "include_usage")
            .map_err(|e| e.param("stream_options.include_usage"))?
            .unwrap_or(false),
        Some(_) => {
            return Err(ApiError::invalid(
                "stream_options",
                "stream_options must be an object",
            ));
        }
    };
    let logprobs = logprobs(&obj, endpoint)?;
    let job = Job {
        endpoint,
        model: field::<String>(&obj, "model")?,
        prompt,
        max_tokens,
        sampling,
        stops,
        stream,
        include_usage,
        logprobs,
        ignore_eos: field::<bool>(&obj, "ignore_eos")?.unwrap_or(false),
        shape,
        tools,
    };
    Ok((job, steer))
}

/// Puts `extra` in the conversation's system turn: after the client's own, or as a new first turn.
fn with_system(turns: &mut Vec<Message>, extra: &str) {
    match turns.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{extra}", first.content);
        }
        _ => turns.insert(0, Message::new("system", extra)),
    }
}

// ANCHOR: unsupported
/// Fields that would change the answer in ways this server does not implement: refused by
/// name rather than silently ignored (`structured`: a [`Structurer`] takes the first three).
fn unsupported(
    obj: &Map<String, Value>,
    endpoint: Endpoint,
    structured: bool,
) -> Result<(), ApiError> {
    let set = |k: &str| obj.get(k).is_some_and(|v| !v.is_null());
    let many = |k: &str| set(k) && obj[k].as_u64() != Some(1);
    let mut refused = Vec::new();
    if many("n") {
        refused.push("n (only 1 choice per request)");
    }
    if many("best_of") {
        refused.push("best_of");
    }
    for k in [
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "audio",
        "prediction",
    ] {
        let served = structured && k.starts_with("tool");
        if set(k) && !served && !(k == "tool_choice" && obj[k] == "none") {
            refused.push(k);
        }
    }
    if set("logit_bias") && obj["logit_bias"].as_object().is_none_or(|m| !m.is_empty()) {
        refused.push("logit_bias");
    }
    if set("response_format") && !structured && obj["response_format"]["type"] != "text" {
        refused.push("response_format (only {\"type\": \"text\"})");
    }
    if endpoint == Endpoint::Completions {
        if obj.get("echo").is_some_and(|v| v == true) {
            refused.push("echo");
        }
        if obj
            .get("suffix")
            .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            refused.push("suffix");
        }
    }
    match refused.first() {
        None => Ok(()),
        Some(first) => Err(ApiError::invalid(
            first.split(' ').next().unwrap_or(first),
            format!("this server does not support: {}", refused.join(", ")),
        )
        .code("unsupported_parameter")),
    }
}
// ANCHOR_END: unsupported

/// Chat: `logprobs: true` with `top_logprobs: n`; completions: `logprobs: n`.
fn logprobs(obj: &Map<String, Value>, endpoint: Endpoint) -> Result<Option<usize>, ApiError> {
    let n = match endpoint {
        Endpoint::Chat => match field::<bool>(obj, "logprobs")? {
            Some(true) => Some(field::<u64>(obj, "top_logprobs")?.unwrap_or(0)),
            _ => None,
        },
        Endpoint::Completions => field::<u64>(obj, "logprobs")?,
    };
    match n {
        Some(n) if n as usize > MAX_TOP_LOGPROBS => Err(ApiError::invalid(
            "top_logprobs",
            format!("at most {MAX_TOP_LOGPROBS} alternatives per token, not {n}"),
        )),
        n => Ok(n.map(|n| n as usize)),
    }
}

/// A seed for a request that gave none.
fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: &str) -> Result<Job, ApiError> {
        parse(body.as_bytes(), Endpoint::Chat)
    }

    #[test]
    fn a_minimal_chat_request() {
        let j = chat(r#"{"model":"m","messages":[{"role":"user","content":"Hi"}],"whatever":1}"#)
            .unwrap();
        assert_eq!(j.prompt, Prompt::Chat(vec![Message::new("user", "Hi")]));
        assert_eq!((j.stream, j.max_tokens, j.logprobs), (false, None, None));
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = chat(r#"{"messages":[{"role":"user","content":"Hi"}],"temperature":"hot"}"#)
            .unwrap_err();
        assert_eq!(e.param.as_deref(), Some("temperature"));
        let e =
            chat(r#"{"messages":[{"role":"user","content":"Hi"}],"max_tokens":-1}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        let e = chat(r#"{"messages":"Hi"}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
    }

    #[test]
    fn unsupported_fields_are_named() {
        let e =
            chat(r#"{"messages":[{"role":"user","content":"Hi"}],"n":2,"tools":[]}"#).unwrap_err();
        assert!(
            e.message.contains("n (only 1") && e.message.contains("tools"),
            "{}",
            e.message
        );
        assert_eq!(e.param.as_deref(), Some("n"));
        assert!(chat(r#"{"messages":[{"role":"user","content":"Hi"}],"n":1}"#).is_ok());
    }

    /// A structurer that asks for a tool call and lists one tool in the system turn.
    struct OneTool;

    impl Structurer for OneTool {
        fn plan(&self, body: &str, _: bool) -> Result<Option<crate::structure::Plan>, ApiError> {
            if !body.contains("\"tools\"") {
                return Ok(None);
            }
            Ok(Some(crate::structure::Plan {
                system: Some("You can call f.".into()),
                tools: None,
                steer: None,
                shape: Shape::ToolCall {
                    names: vec!["f".into()],
                    required: false,
                },
            }))
        }
    }

    #[test]
    fn a_structurer_takes_what_is_refused_without_one() {
        let body = r#"{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],
            "tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",
            "response_format":{"type":"json_object"}}"#;
        let e = chat(body).unwrap_err();
        assert!(
            e.message.contains("tools") && e.message.contains("response_format"),
            "{}",
            e.message
        );
        let (job, steer) =
            parse_with(body.as_bytes(), Endpoint::Chat, Some(&OneTool), false).unwrap();
        assert!(steer.is_none());
        assert!(matches!(
            job.shape,
            Shape::ToolCall {
                required: false,
                ..
            }
        ));
        let Prompt::Chat(turns) = job.prompt else {
            panic!("a chat")
        };
        assert_eq!(
            turns[0].content, "Be brief.\n\nYou can call f.",
            "the client's system turn first"
        );
        assert_eq!(turns.len(), 2);
        // completions never go to the structurer
        let e = parse_with(
            br#"{"prompt":"Hi","tools":[]}"#,
            Endpoint::Completions,
            Some(&OneTool),
            false,
        );
        assert!(e.is_err());
    }

    #[test]
    fn bad_bytes_and_bad_json() {
        let e = parse(b"{\"prompt\": \"\xff\"}", Endpoint::Completions).unwrap_err();
        assert!(
            e.message.contains("UTF-8") && e.message.contains("offset 12"),
            "{}",
            e.message
        );
        let e = parse(b"{\"prompt\": ", Endpoint::Completions).unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        let e = parse(b"[1]", Endpoint::Completions).unwrap_err();
        assert!(e.message.contains("JSON object"));
    }
}
