//! A tool call read out of the model's text, `{"name": "f", "arguments": {…}}`, and returned
//! in OpenAI's shape: whole (`message.tool_calls`) or streamed (`delta.tool_calls`, the name
//! in the first chunk, then pieces of the arguments).
//!
//! The arguments go back as the model wrote them (a JSON string of its own text), so a
//! streamed call and a whole one are the same bytes. Names are plain (`[A-Za-z0-9_.-]`, as
//! OpenAI requires), which lets the head of a call be read with a few lines, not a parser.

use serde_json::Value;

/// Where the text is, read as the start of a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Head {
    /// Not yet known: the text so far could start a call.
    Partial,
    /// The name, and where the arguments' text starts.
    Call {
        name: String,
        args_at: usize,
    },
    NotACall,
}

// ANCHOR: head
/// Reads `{ "name" : "NAME" , "arguments" :` (spaces anywhere between) at the start of `text`.
pub fn head(text: &str) -> Head {
    let b = text.as_bytes();
    let mut i = 0;
    let mut name = String::new();
    for part in ["{", "\"name\"", ":", "NAME", ",", "\"arguments\"", ":"] {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if part == "NAME" {
            // "NAME": a quote, plain characters, a quote
            let plain = |c: u8| c.is_ascii_alphanumeric() || b"_.-".contains(&c);
            let len = b[i.min(b.len())..]
                .iter()
                .skip(1)
                .take_while(|&&c| plain(c))
                .count();
            match (b.get(i), b.get(i + 1 + len)) {
                (None, _) | (Some(b'"'), None) => return Head::Partial,
                (Some(b'"'), Some(b'"')) if len > 0 => {
                    name = text[i + 1..i + 1 + len].to_string();
                    i += len + 2;
                    continue;
                }
                _ => return Head::NotACall,
            }
        }
        let (want, have) = (part.as_bytes(), &b[i..]);
        if have.len() < want.len() {
            return if want.starts_with(have) {
                Head::Partial
            } else {
                Head::NotACall
            };
        }
        if !have.starts_with(want) {
            return Head::NotACall;
        }
        i += want.len();
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i == b.len() {
        return Head::Partial;
    }
    Head::Call { name, args_at: i }
}
// ANCHOR_END: head

/// A whole call: the function's name and its arguments as JSON text.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// `text` as a call to one of `names`, if it is one: a JSON object of exactly `name` and
/// `arguments` (an object).
pub fn parse(text: &str, names: &[String]) -> Option<Call> {
    let value: Value = serde_json::from_str(text).ok()?;
    let obj = value.as_object()?;
    let name = obj.get("name")?.as_str()?;
    let args = obj.get("arguments")?;
    if obj.len() != 2 || !args.is_object() || !names.iter().any(|n| n == name) {
        return None;
    }
    let arguments = match head(text) {
        // the model's own bytes: the text from the arguments to the object's last `}`
        Head::Call { args_at, .. } => arguments_text(&text[args_at..]).to_string(),
        _ => args.to_string(),
    };
    Some(Call {
        name: name.to_string(),
        arguments,
    })
}

/// The arguments' text in the rest of a whole call: without the call's closing `}`.
fn arguments_text(rest: &str) -> &str {
    let rest = rest.trim_end();
    rest.strip_suffix('}').unwrap_or(rest).trim_end()
}

/// How much of the arguments' text is safe to send while the call is still being written:
/// all but a tail of spaces and `}`, one of which may be the call's own end.
pub fn arguments_so_far(rest: &str) -> &str {
    rest.trim_end_matches(|c: char| c.is_whitespace() || c == '}')
}

/// The arguments' text once the call is complete.
pub fn arguments_at_end(rest: &str) -> &str {
    arguments_text(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_of_a_call_is_read_as_it_grows() {
        let text = r#"{ "name": "get_weather", "arguments": {"city": "Paris"} }"#;
        let at = text.find("{\"city").unwrap();
        for end in 0..text.len() {
            let h = head(&text[..end]);
            if end <= at {
                assert_eq!(h, Head::Partial, "after {:?}", &text[..end]);
            } else {
                assert_eq!(
                    h,
                    Head::Call {
                        name: "get_weather".into(),
                        args_at: at
                    }
                );
            }
        }
        assert_eq!(head("Hello"), Head::NotACall);
        assert_eq!(head(r#"{"city": 1}"#), Head::NotACall);
        assert_eq!(head(r#"{"name": "", "arguments": {}}"#), Head::NotACall);
    }

    #[test]
    fn a_whole_call_and_its_streamed_pieces_agree() {
        let names = vec!["get_weather".to_string()];
        let text = r#"{"name": "get_weather", "arguments": {"city": {"name": "Paris"}}}"#;
        let call = parse(text, &names).unwrap();
        assert_eq!(call.arguments, r#"{"city": {"name": "Paris"}}"#);
        let Head::Call { args_at, .. } = head(text) else {
            panic!()
        };
        // every prefix's safe part is a prefix of the final arguments
        for end in args_at..=text.len() {
            let so_far = arguments_so_far(&text[args_at..end]);
            assert!(call.arguments.starts_with(so_far), "{so_far:?}");
        }
        assert_eq!(arguments_at_end(&text[args_at..]), call.arguments);
        assert!(parse(text, &["other".to_string()]).is_none());
        assert!(parse(r#"{"name": "get_weather"}"#, &names).is_none());
        assert!(parse("The weather is fine.", &names).is_none());
    }
}
