//! The chat templates of the model families readers bring (Llama 3, Qwen 2.5/3, Mistral,
//! Phi-3, Gemma-2 and their kin, from llama.cpp's `models/templates/`) render through the
//! engine's renderer, in its sandbox as `chat` and the server run it, to the same bytes as
//! the reference Jinja (`jinja2`, set up as Hugging Face's `apply_chat_template` sets it up;
//! `fixtures/chat/families.json`, made by `scripts/make_chat_fixtures.py`). Where jinja2
//! raises (Gemma-2 refuses a system turn), ours must refuse too.

use std::fmt::Write as _;

use ch01_tensors::models;
use ch09_generate::chat::sandbox::Sandbox;
use ch09_generate::chat::{Message, Vars};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Templates the renderer refuses on purpose, each with the reason its error gives. None
/// today: every template in the fixture renders as jinja2 renders it.
const REFUSED: &[(&str, &str)] = &[];

fn fixture() -> Value {
    let path = models::workspace_root().join("fixtures/chat/families.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (make it with scripts/make_chat_fixtures.py)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

fn messages(v: &Value) -> Vec<Message> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect()
}

/// Where two texts first differ, with a little of each around it.
fn first_difference(ours: &str, want: &str) -> String {
    let at = ours
        .char_indices()
        .zip(want.chars())
        .find(|((_, a), b)| a != b)
        .map_or(ours.len().min(want.len()), |((i, _), _)| i);
    let around = |s: &str| {
        let before: String = s[..at]
            .chars()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let after: String = s[at..].chars().take(30).collect();
        format!("{:?}", before + "|" + &after)
    };
    format!(
        "first difference at byte {at}: ours {} / jinja2 {}",
        around(ours),
        around(want)
    )
}

#[test]
fn the_families_templates_render_as_jinja2_renders_them() {
    let fx = fixture();
    let sandbox = Sandbox::program(env!("CARGO_BIN_EXE_ch09-generate"));
    let now = fx["now_unix"].as_i64().unwrap();
    let conversations = fx["conversations"].as_object().unwrap();
    let mut failures = String::new();
    let (mut same, mut refused_alike, mut templates) = (0, 0, 0);
    for t in fx["templates"].as_array().unwrap() {
        let file = t["file"].as_str().unwrap();
        let path = models::require(&models::llamacpp_dir().join("templates").join(file))
            .unwrap_or_else(|e| panic!("{e}"));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            format!("{:x}", Sha256::digest(&bytes)),
            t["sha256"].as_str().unwrap(),
            "{file} is not the template the fixture was rendered from: remake the fixture"
        );
        let source = String::from_utf8(bytes).unwrap();
        let refusal = REFUSED.iter().find(|(f, _)| *f == file).map(|(_, why)| why);
        templates += 1;
        let vars = Vars {
            bos_token: t["bos_token"].as_str().map(String::from),
            eos_token: t["eos_token"].as_str().map(String::from),
            now,
            tools: None,
        };
        for case in t["cases"].as_array().unwrap() {
            let name = case["conversation"].as_str().unwrap();
            let add = case["add_generation_prompt"].as_bool().unwrap();
            let m = messages(&conversations[name]);
            let ours = sandbox.render_with(&source, &m, add, &vars);
            let label = format!("{file}, conversation {name:?}, add_generation_prompt={add}");
            match (ours, case["rendered"].as_str(), refusal) {
                (Err(e), _, Some(why)) if e.contains(why) => refused_alike += 1,
                (ours, _, Some(why)) => {
                    writeln!(failures, "{label}: should be refused ({why}), got {ours:?}").unwrap()
                }
                (Ok(ours), Some(want), None) if ours == want => same += 1,
                (Ok(ours), Some(want), None) => {
                    writeln!(failures, "{label}: {}", first_difference(&ours, want)).unwrap()
                }
                (Err(e), Some(_), None) => {
                    writeln!(failures, "{label}: jinja2 renders it, ours refused: {e}").unwrap()
                }
                // A template's own `raise_exception` message comes through as it is.
                (Err(e), None, None) => match case["error"].as_str().unwrap().split_once(": ") {
                    Some(("TemplateError", why)) if !e.contains(why) => {
                        writeln!(failures, "{label}: refused with {e:?}, not {why:?}").unwrap()
                    }
                    _ => refused_alike += 1,
                },
                (Ok(ours), None, None) => writeln!(
                    failures,
                    "{label}: jinja2 raised {}, ours rendered {ours:?}",
                    case["error"]
                )
                .unwrap(),
            }
        }
    }
    println!(
        "{templates} templates: {same} cases render identically, {refused_alike} refused by both"
    );
    assert!(
        failures.is_empty(),
        "cases that differ from jinja2:\n{failures}"
    );
    assert!(
        templates >= 14 && same >= 150,
        "{templates} templates, {same} cases"
    );
}

/// `tojson` and `strftime_now` by themselves, where the conversations do not reach them:
/// Python's `json.dumps` with Hugging Face's defaults, indents, `ensure_ascii`, separators and
/// sorted keys; Python's float and string escapes; a message's keys in Python's order.
#[test]
fn tojson_and_strftime_now_write_what_python_writes() {
    let fx = fixture();
    let sandbox = Sandbox::program(env!("CARGO_BIN_EXE_ch09-generate"));
    let vars = Vars {
        now: fx["now_unix"].as_i64().unwrap(),
        ..Vars::default()
    };
    let m = messages(&fx["tojson_messages"]);
    let cases = fx["tojson"].as_array().unwrap();
    assert!(cases.len() >= 9, "{} tojson cases", cases.len());
    for case in cases {
        let template = case["template"].as_str().unwrap();
        let want = case["rendered"]
            .as_str()
            .unwrap_or_else(|| panic!("{template}: jinja2 raised {}", case["error"]));
        let ours = sandbox
            .render_with(template, &m, false, &vars)
            .unwrap_or_else(|e| panic!("{template}: {e}"));
        assert_eq!(ours, want, "{template}: {}", first_difference(&ours, want));
    }
}
