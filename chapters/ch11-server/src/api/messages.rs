//! What a request asks the model to continue: a chat's `messages`, or a completion's
//! `prompt`.

use serde::Deserialize;
use serde_json::{Map, Value};

use ch09_generate::chat::Message;

use super::fields::field;
use crate::error::ApiError;

/// A chat message as clients send it: `content` a string, or a list of parts.
#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

pub(super) fn messages(obj: &Map<String, Value>) -> Result<Vec<Message>, ApiError> {
    let wire = field::<Vec<WireMessage>>(obj, "messages")?
        .ok_or_else(|| ApiError::invalid("messages", "'messages' is required"))?;
    if wire.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "'messages' must not be empty",
        ));
    }
    let mut out = Vec::with_capacity(wire.len());
    for (i, m) in wire.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return Err(ApiError::invalid(
                    "messages",
                    format!(
                        "messages[{i}]: role {other:?} is not supported (system, developer, user, assistant)"
                    ),
                ));
            }
        };
        let content = match m.content {
            None => String::new(),
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut text = String::new();
                for p in parts {
                    match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(ApiError::invalid(
                                "messages",
                                format!(
                                    "messages[{i}]: content parts of type {kind:?} are not supported (text only)"
                                ),
                            ));
                        }
                    }
                }
                text
            }
        };
        out.push(Message::new(role, &content));
    }
    Ok(out)
}

pub(super) fn prompt(obj: &Map<String, Value>) -> Result<String, ApiError> {
    match obj.get("prompt") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            Ok(a[0].as_str().unwrap_or_default().to_string())
        }
        Some(Value::Array(_)) => Err(ApiError::invalid(
            "prompt",
            "'prompt' must be one string (a list of prompts or of token ids is not supported)",
        )),
        None | Some(Value::Null) => Err(ApiError::invalid("prompt", "'prompt' is required")),
        Some(_) => Err(ApiError::invalid("prompt", "'prompt' must be a string")),
    }
}
