//! A chat template is code from the model file: rendering it is bounded in work and in output,
//! in a child process bounded in memory, and a template over any budget is refused with an
//! error that names it, quickly.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ch01_tensors::models;
use ch09_generate::chat::sandbox::Sandbox;
use ch09_generate::chat::{ChatTemplate, MAX_TEMPLATE_STEPS, Message, render};

/// Doubles a string forty times: 160 steps, and two terabytes if nothing stops it.
const BYTE_BOMB: &str = r#"{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"#;

fn sandbox() -> Sandbox {
    Sandbox::program(env!("CARGO_BIN_EXE_ch09-generate"))
}

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

/// A copy of SmolLM2's file with its template replaced by `hostile`, in the temporary
/// directory; the caller removes it.
fn smollm2_with_template(hostile: &str, name: &str) -> PathBuf {
    let model = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let path = std::env::temp_dir().join(format!("ch09-{name}-{}.gguf", std::process::id()));
    ch09_generate::chat::copy_with_template(&model, hostile, &path).unwrap();
    path
}

/// Runs the binary with `args` and `stdin`; its exit code, standard error, wall time and peak
/// resident memory in MiB (its own, not its children's).
#[allow(clippy::zombie_processes)] // waited for with wait4, which also gives its rusage
fn run_binary(args: &[&str], stdin: &str) -> (Option<i32>, String, Duration, f64) {
    use std::io::Write;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ch09-generate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our child's, not yet waited for; both pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4 failed");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (
        code,
        stderr,
        start.elapsed(),
        usage.ru_maxrss as f64 / 1024.0,
    )
}

#[test]
fn the_binary_refuses_a_hostile_template_and_exits_non_zero() {
    let hostile =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    let path = smollm2_with_template(hostile, "loops");
    let file = path.to_str().unwrap();
    let (code, stderr, took, _) = run_binary(&["-m", file, "--chat", "-p", "Hi", "-n", "4"], "");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: the model's chat template (tokenizer.chat_template)"),
        "{stderr}"
    );
    assert!(took < QUICKLY, "the binary took {took:?} to refuse");
}

#[test]
fn a_template_that_builds_gigabytes_is_refused_with_memory_flat() {
    let e = sandbox()
        .render(BYTE_BOMB, &conversation(), true)
        .expect_err("the byte bomb rendered");
    assert!(
        e.contains("tokenizer.chat_template") && e.contains("MiB of memory"),
        "{e}"
    );
    // Through the binary, in both chat modes: refused (in bounded time, as every hostile
    // template here), its own memory that of the model file, not of the string.
    let path = smollm2_with_template(BYTE_BOMB, "bytes");
    let file = path.to_str().unwrap();
    let one_turn = run_binary(&["-m", file, "--chat", "-p", "Hi", "-n", "4"], "");
    let chat = run_binary(&["chat", "-m", file, "-n", "4"], "Hi\n");
    std::fs::remove_file(&path).unwrap();
    for (mode, (code, stderr, took, peak_mib)) in [("--chat", one_turn), ("chat", chat)] {
        assert_eq!(code, Some(1), "{mode}: {stderr}");
        assert!(
            stderr.contains("needed more than") && stderr.contains("MiB of memory"),
            "{mode}: {stderr}"
        );
        assert!(took < QUICKLY, "{mode} took {took:?} to refuse");
        assert!(
            peak_mib < 400.0,
            "{mode}: the binary grew to {peak_mib:.0} MiB while refusing the template"
        );
    }
}

#[test]
fn the_sandbox_renders_what_this_process_renders() {
    let g = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let ChatTemplate::Jinja(source) =
        ChatTemplate::from_gguf(&ch08_gguf::load(&g).unwrap().file.gguf).unwrap()
    else {
        panic!("SmolLM2's file has a template")
    };
    // A conversation that fills more than SmolLM2's 8192-token context.
    let mut messages = vec![Message::new("system", "Be brief.")];
    for i in 0..400 {
        messages.push(Message::new(
            "user",
            &format!("Question {i}: {}?", "why ".repeat(20)),
        ));
        messages.push(Message::new("assistant", &format!("Answer {i}.")));
    }
    let here = render(&ChatTemplate::Jinja(source.clone()), &messages, true).unwrap();
    assert!(here.len() > 8192 * 4, "{} bytes", here.len());
    assert_eq!(sandbox().render(&source, &messages, true).unwrap(), here);
    // The template's own refusals come back as they are.
    let e = sandbox()
        .render("{{ raise_exception('no system role') }}", &messages, true)
        .unwrap_err();
    assert!(e.contains("no system role"), "{e}");
}
