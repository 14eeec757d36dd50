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
