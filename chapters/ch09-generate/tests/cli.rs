//! The binary on bad input: a clear message and a non-zero exit, never a panic.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch09-generate"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["nosuch"][..],
        &[],
        &["-p", "x", "--temp", "-1"],
        &["-p", "x", "--top-p", "0"],
        &["-p", "x", "--min-p", "2"],
        &["-p", "x", "-n", "0"],
        &["-p", "x", "--threads", "0"],
        &["-p", "x", "--system", "s"],
        &["-p", "x", "--stop", ""],
        &["-p", "x", "--repeat-penalty", "nan"],
        &["perplexity"],
        &["bench", "--text", "f"],
    ] {
        let o = run(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {:?} {}",
            o.status,
            stderr(&o)
        );
        assert!(
            stderr(&o).starts_with("error: "),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn bad_models_and_prompts_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("ch09-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_gguf = dir.join("not.gguf");
    std::fs::write(&not_gguf, b"definitely not a model file, just some text").unwrap();
    let missing = dir.join("missing.gguf");
    for (args, want) in [
        (
            vec!["-m", missing.to_str().unwrap(), "-p", "x"],
            "No such file",
        ),
        (
            vec!["-m", not_gguf.to_str().unwrap(), "-p", "x"],
            "not a GGUF file",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "{args:?}: expected {want:?} in {}",
            stderr(&o)
        );
    }
    std::fs::remove_file(&not_gguf).unwrap();
    std::fs::remove_dir(&dir).unwrap();
    // An empty prompt with a model that adds no BOS (SmolLM2) has no token to start from.
    let model = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let o = run(&["-m", model.to_str().unwrap(), "-p", ""]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("the prompt is empty"), "{}", stderr(&o));
}

#[test]
fn a_three_turn_chat_through_a_pipe() {
    use std::io::Write;
    let model = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ch09-generate"))
        .args([
            "chat",
            "-m",
            model.to_str().unwrap(),
            "--temp",
            "0",
            "-n",
            "16",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is the capital of France?\nAnd of Italy?\n/stats\nThanks!\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // llama.cpp's greedy reply to the first turn, from fixtures/reference/greedy-smollm2-q4_1.json
    assert!(out.starts_with("L'Étoile, la Cité"), "{out:?}");
    assert_eq!(
        out.lines().count(),
        3,
        "three replies, one per line: {out:?}"
    );
    assert!(
        stderr(&o).contains("TurnStats"),
        "/stats printed nothing: {}",
        stderr(&o)
    );
}
