//! The binary's contract: usage errors exit 2, runtime errors exit 1 with `error: ...`,
//! `--json` prints JSON. (The model-free cases first; the last one needs SmolLM2.)

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch04-forward"))
        .args(args)
        .output()
        .expect("run ch04-forward")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["--frobnicate"][..],
        &["generate", "-n", "many"],
        &["bench", "--lengths", "16,x"],
        &["fly"],
        &["bench", "--lengths", "0"],
    ] {
        let o = run(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?} must exit 2 (usage), stderr: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).starts_with("error: "),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("usage: ch04-forward"),
            "{args:?} must print the usage"
        );
    }
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("logits"));
}

#[test]
fn missing_model_dir_is_an_error_not_a_panic() {
    let o = run(&["generate", "--model", "/nonexistent/model-dir", "-n", "1"]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: ") && err.contains("/nonexistent/model-dir/config.json"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn logits_json_on_smollm2() {
    let dir = ch01_tensors::models::smollm2_hf_dir();
    ch01_tensors::models::require(&dir.join("model.safetensors")).unwrap_or_else(|e| panic!("{e}"));
    let o = run(&[
        "logits",
        "--model",
        dir.to_str().unwrap(),
        "--ids",
        "504,3575,282,4649,314",
        "--top",
        "3",
        "--json",
    ]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    let positions = v["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 5, "one entry per position");
    assert_eq!(
        positions[4]["argmax"], 7042,
        "after \"The capital of France is\" comes \" Paris\""
    );
    assert_eq!(
        positions[4]["top"].as_array().unwrap().len(),
        3,
        "--top 3 gives three (id, logit) pairs"
    );
    let bad = run(&["logits", "--model", dir.to_str().unwrap(), "--ids", "49152"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("token id 49152 is outside the vocabulary"),
        "{}",
        stderr(&bad)
    );
}

/// The data-loss case from the bad-input probe: a models folder whose `hf/model.safetensors`
/// is a dangling link. The binary must not fetch (the fetch script used to delete the whole
/// `hf/` folder and replace it); it must fail, name the file, and leave the folder alone.
#[cfg(unix)]
#[test]
fn an_unreadable_model_file_is_an_error_and_nothing_is_deleted() {
    let root = std::env::temp_dir().join(format!("ch04-dangling-{}", std::process::id()));
    let hf = root.join("smollm2-135m-instruct/hf");
    std::fs::create_dir_all(&hf).unwrap();
    std::fs::write(hf.join("config.json"), "{\"mine\": true}").unwrap();
    std::os::unix::fs::symlink(root.join("nowhere"), hf.join("model.safetensors")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ch04-forward"))
        .args(["generate", "-n", "1"])
        .env("LLM_BOOK_MODELS", &root)
        .output()
        .expect("run ch04-forward");
    let kept = std::fs::read_to_string(hf.join("config.json"));
    std::fs::remove_dir_all(&root).ok();
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    assert!(
        stderr(&o).contains("model.safetensors cannot be read"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        kept.ok().as_deref(),
        Some("{\"mine\": true}"),
        "the user's config.json must survive"
    );
}

#[test]
fn n_of_zero_is_a_usage_error() {
    let o = run(&["generate", "-n", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
