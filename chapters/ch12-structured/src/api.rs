//! `response_format` and `tools` for chapter 11's server: this chapter's grammar behind its
//! [`Structurer`] seam.
//!
//! - `response_format: {"type": "json_object"}` decodes under the grammar of any object;
//!   `{"type": "json_schema", "json_schema": {"schema": …}}` under the schema's, compiled per
//!   request. A schema outside the subset is a 400 naming the keyword and where it stands.
//! - `tools` are listed in a system prompt of our own words (the "generic" format of
//!   llama.cpp's server, for templates that do not render tools). With `tool_choice`
//!   `"required"` or a named function the answer is decoded under the grammar of a call,
//!   `{"name": <a tool's name>, "arguments": <that tool's parameters>}`; with `"auto"` it is
//!   decoded freely and returned as a call only if the text is one; `"none"` ignores the tools.

use std::sync::Arc;

use ch10_batching::steer::Steer;
use ch11_server::error::ApiError;
use ch11_server::structure::{MakeSteer, Plan, Shape, Structurer};

use crate::constrain::Constraint;
use crate::grammar::Grammar;
use crate::json::Json;
use crate::mask::TokenIndex;
use crate::schema::{Limits, compile};
use crate::tools::{Choice, Tool, call_schema, choice, instruction, tools, tools_prompt};

/// The grammar's side of the server: the vocabulary's index, built once, and the limits
/// every schema is compiled under.
pub struct Structured {
    pub index: Arc<TokenIndex>,
    pub limits: Limits,
}

// ANCHOR: plan
impl Structurer for Structured {
    fn plan(&self, body: &str, template_takes_tools: bool) -> Result<Option<Plan>, ApiError> {
        // the body again, with each object's members in the order they were sent
        let request = Json::parse(body)
            .map_err(|e| ApiError::invalid("body", format!("not valid JSON: {e}")))?;
        let tools = tools(&request, self.limits)?;
        let choice = choice(&request, &tools)?;
        let format = response_format(&request, self.limits)?;
        if tools.is_empty() || choice == Choice::None {
            return Ok(format.map(|grammar| self.plan_for(grammar, Shape::Text, None, None)));
        }
        if format.is_some() {
            return Err(ApiError::invalid(
                "response_format",
                "response_format and tools in one request are not supported: the answer is a call or a document",
            ));
        }
        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        // A template that renders tools gets them (in its own words, the model's training);
        // any other gets them listed in the system turn.
        let (system, template_tools) = if template_takes_tools {
            let listed = serde_json::from_str::<serde_json::Value>(body)
                .map_err(|e| ApiError::invalid("body", format!("not valid JSON: {e}")))?;
            (instruction(&choice), Some(listed["tools"].clone()))
        } else {
            (Some(tools_prompt(&tools, &choice)), None)
        };
        let chosen: Vec<&Tool> = match &choice {
            Choice::Named(n) => tools.iter().filter(|t| &t.name == n).collect(),
            _ => tools.iter().collect(),
        };
        if choice == Choice::Auto {
            let shape = Shape::ToolCall {
                names,
                required: false,
            };
            return Ok(Some(Plan {
                system,
                tools: template_tools,
                steer: None,
                shape,
            }));
        }
        let grammar = compile(&call_schema(&chosen), self.limits).map_err(|e| {
            ApiError::invalid(
                "tools",
                format!("the tools' parameters, at {}: {}", e.path, e.message),
            )
        })?;
        let shape = Shape::ToolCall {
            names,
            required: true,
        };
        Ok(Some(self.plan_for(grammar, shape, system, template_tools)))
    }
}
// ANCHOR_END: plan

impl Structured {
    /// The index of `tok`'s vocabulary, with the default limits.
    pub fn new(tok: &ch08_gguf::GgufTokenizer) -> Structured {
        Structured {
            index: Arc::new(TokenIndex::from_tokenizer(
                &tok.tokenizer,
                tok.end_ids.clone(),
            )),
            limits: Limits::default(),
        }
    }

    fn plan_for(
        &self,
        grammar: Grammar,
        shape: Shape,
        system: Option<String>,
        tools: Option<serde_json::Value>,
    ) -> Plan {
        let index = self.index.clone();
        // Built once the budget is known: the document must close within it.
        let steer: MakeSteer = Box::new(move |budget| {
            Constraint::new(&grammar, index, Some(budget))
                .map(|c| Box::new(c) as Box<dyn Steer>)
                .map_err(|e| e.to_string())
        });
        Plan {
            system,
            tools,
            steer: Some(steer),
            shape,
        }
    }
}

// ANCHOR: response_format
/// The grammar `response_format` asks for; `None` for text.
fn response_format(request: &Json, limits: Limits) -> Result<Option<Grammar>, ApiError> {
    let bad = |m: &str| ApiError::invalid("response_format", m.to_string());
    let format = match request.get("response_format") {
        None | Some(Json::Null) => return Ok(None),
        Some(f @ Json::Object(_)) => f,
        Some(_) => return Err(bad("response_format must be an object")),
    };
    match format.get("type") {
        Some(Json::String(t)) if t == "text" => Ok(None),
        Some(Json::String(t)) if t == "json_object" => Ok(Some(Grammar::any_object())),
        Some(Json::String(t)) if t == "json_schema" => {
            let spec = format.get("json_schema").ok_or_else(|| {
                bad("json_schema needs its \"json_schema\": {\"name\", \"schema\"}")
            })?;
            if !matches!(spec.get("strict"), None | Some(Json::Null | Json::Bool(_))) {
                return Err(bad("json_schema.strict must be true or false"));
            }
            // `strict: false` is a request, `true` a promise: both get the promise.
            let schema = spec
                .get("schema")
                .ok_or_else(|| bad("json_schema.schema is missing"))?;
            compile(schema, limits).map(Some).map_err(|e| {
                ApiError::invalid(
                    "response_format.json_schema.schema",
                    format!("the schema at {}: {}", e.path, e.message),
                )
                .code("unsupported_schema")
            })
        }
        _ => Err(bad(
            "response_format.type must be \"text\", \"json_object\" or \"json_schema\"",
        )),
    }
}
// ANCHOR_END: response_format

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsupported_keyword_is_named_with_its_place() {
        let r = Json::parse(r#"{"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"age":{"type":"integer","minimum":0}}}}}}"#).unwrap();
        let e = response_format(&r, Limits::default()).unwrap_err();
        assert!(
            e.message.contains("minimum") && e.message.contains("/properties/age"),
            "{}",
            e.message
        );
    }
}
