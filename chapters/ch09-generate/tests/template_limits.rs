//! A chat template is code from the model file: rendering it is bounded in work and in output,
//! and a template over either budget is refused with an error that names it, quickly.

use std::process::Command;
use std::time::{Duration, Instant};

use ch01_tensors::models;
use ch09_generate::chat::{ChatTemplate, MAX_TEMPLATE_STEPS, Message, render};

/// Far longer than a refusal takes, far shorter than the hostile templates would run unbounded.
const QUICKLY: Duration = Duration::from_secs(10);

fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "Be brief."),
        Message::new("user", "What is the capital of France?"),
        Message::new("assistant", "Paris."),
        Message::new("user", "And of Italy?"),
    ]
}

/// Renders `source` and returns its error, checking it came quickly.
fn refusal(source: &str) -> String {
    let start = Instant::now();
    let result = render(&ChatTemplate::Jinja(source.into()), &conversation(), true);
    let took = start.elapsed();
    let e = match result {
        Ok(text) => panic!(
            "{source:?} rendered {} bytes instead of being refused",
            text.len()
        ),
        Err(e) => e,
    };
    assert!(took < QUICKLY, "{source:?} took {took:?} to refuse");
    e
}

#[test]
fn nested_loops_run_out_of_steps() {
    let e =
        refusal("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
    assert!(e.contains("tokenizer.chat_template"), "{e}");
    assert!(
        e.contains(&format!("more than {MAX_TEMPLATE_STEPS} steps")),
        "{e}"
    );
}

#[test]
fn huge_output_is_refused() {
    for source in [
        // One value of 100 MB (the most minijinja lets a string repetition make).
        "{{ 'x' * 100000000 }}",
        // Small pieces, many times: 100 MB in fewer steps than the budget.
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        // The template's own text, many times.
        "{% for i in range(100000) %}01234567890123456789{% endfor %}",
    ] {
        let e = refusal(source);
        assert!(e.contains("tokenizer.chat_template"), "{source:?}: {e}");
        assert!(e.contains("bytes besides the messages"), "{source:?}: {e}");
    }
}

#[test]
fn long_messages_are_not_counted_against_the_template() {
    // The output budget is what the template adds: a long message passes through.
    let long = "word ".repeat(400_000);
    let t = ChatTemplate::Jinja("{% for m in messages %}{{ m.content }}{% endfor %}".into());
    let text = render(&t, &[Message::new("user", &long)], true).unwrap();
    assert_eq!(text, long);
}

#[test]
fn the_real_templates_render_within_the_limits() {
    let g = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::load(&g).unwrap();
    let template = ChatTemplate::from_gguf(&file.file.gguf).unwrap();
    assert!(matches!(template, ChatTemplate::Jinja(_)));
    // A conversation far longer than any context: 2000 turns.
    let mut messages = vec![Message::new("system", "Be brief.")];
    for i in 0..1000 {
        messages.push(Message::new("user", &format!("Question {i}?")));
        messages.push(Message::new("assistant", &format!("Answer {i}.")));
    }
    let text = render(&template, &messages, true).unwrap();
    assert!(text.ends_with("<|im_start|>assistant\n"), "{text:?}");
    let g = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let file = ch08_gguf::load(&g).unwrap();
    let template = ChatTemplate::from_gguf(&file.file.gguf).unwrap();
    assert!(render(&template, &messages, true).is_ok());
}

#[test]
fn the_binary_refuses_a_hostile_template_and_exits_non_zero() {
    // SmolLM2's file with its template replaced, in place, by one of the same length.
    let model = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = std::fs::read(&model).unwrap();
    let ChatTemplate::Jinja(original) =
        ChatTemplate::from_gguf(&ch08_gguf::load(&model).unwrap().file.gguf).unwrap()
    else {
        panic!("SmolLM2's file has a template")
    };
    let hostile =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    assert!(hostile.len() <= original.len());
    let at = bytes
        .windows(original.len())
        .position(|w| w == original.as_bytes())
        .expect("the template's bytes are in the file");
    let padded = format!("{hostile:<width$}", width = original.len());
    bytes[at..at + original.len()].copy_from_slice(padded.as_bytes());
    let path = std::env::temp_dir().join(format!("ch09-hostile-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    drop(bytes);
    let start = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_ch09-generate"))
        .args([
            "-m",
            path.to_str().unwrap(),
            "--chat",
            "-p",
            "Hi",
            "-n",
            "4",
        ])
        .output()
        .unwrap();
    let took = start.elapsed();
    std::fs::remove_file(&path).unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: the model's chat template (tokenizer.chat_template)"),
        "{stderr}"
    );
    assert!(took < QUICKLY, "the binary took {took:?} to refuse");
}
