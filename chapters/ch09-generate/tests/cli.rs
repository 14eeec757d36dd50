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
        &["stages"],
        &["stages", "-p", "x", "--top-p", "1.5"],
        &["-p", "x", "--svg", "out.svg"],
        &["-p", "x", "--echo"],
        &["bench", "--markdown", "out.md"],
        &["bench", "--rounds", "3"],
        &["scale", "--rounds", "0"],
        &["scale", "--rounds", "many"],
        &["scale", "-m", "x.gguf"],
        &["-p", "x", "extra"],
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

#[test]
fn stages_shows_the_chain_stage_by_stage() {
    let model = ch01_tensors::models::require(&ch01_tensors::models::smollm2_gguf())
        .unwrap_or_else(|e| panic!("{e}"));
    let svg = std::env::temp_dir().join(format!("ch09-stages-{}.svg", std::process::id()));
    let run_stages = |args: &[&str]| {
        let mut all = vec!["stages", "-m", model.to_str().unwrap()];
        all.extend_from_slice(args);
        run(&all)
    };
    let o = run_stages(&[
        "-p",
        "My favourite fruit is",
        "--temp",
        "0.8",
        "--top-k",
        "10",
        "--top-p",
        "0.75",
        "--min-p",
        "0.3",
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stages --json is JSON");
    let stages = v["stages"].as_array().expect("a list of stages");
    let names: Vec<&str> = stages
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["softmax", "top-k 10", "top-p 0.75", "min-p 0.3", "temp 0.8"],
        "the stages in the sampler's order"
    );
    assert_eq!(v["tokens"].as_array().unwrap().len(), 12, "twelve rows");
    let survivors: Vec<u64> = stages
        .iter()
        .map(|s| s["survivors"].as_u64().unwrap())
        .collect();
    assert_eq!(
        survivors[0], 49152,
        "before any filter, the whole vocabulary"
    );
    assert_eq!(survivors[1], 10, "top-k 10 keeps ten");
    assert!(
        survivors.windows(2).all(|w| w[1] <= w[0]),
        "a filter never adds candidates: {survivors:?}"
    );
    let mut gone = [false; 12];
    for s in stages {
        let probs: Vec<f64> = s["probabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_f64().unwrap())
            .collect();
        let sum = probs.iter().sum::<f64>() + s["rest"].as_f64().unwrap();
        assert!(
            (sum - 1.0).abs() < 1e-5,
            "{}: the survivors' probabilities sum to {sum}, not 1",
            s["stage"]
        );
        for (r, &p) in probs.iter().enumerate() {
            assert!(!(gone[r] && p > 0.0), "{}: row {r} came back", s["stage"]);
            gone[r] |= p == 0.0;
        }
    }
    let figure = std::fs::read_to_string(&svg).expect("--svg wrote the figure");
    std::fs::remove_file(&svg).unwrap();
    assert!(
        figure.starts_with("<svg"),
        "{}",
        &figure[..figure.len().min(80)]
    );
    assert!(figure.trim_end().ends_with("</svg>"));
    assert_eq!(
        figure.matches("<text").count(),
        figure.matches("</text>").count()
    );
    // a figure that cannot be written is an error, not a silent success
    let o = run_stages(&["-p", "x", "--svg", "/nonexistent-dir/stages.svg"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write"), "{}", stderr(&o));
}

/// `scale` checks every file and name before it measures anything (or looks for llama.cpp),
/// so a typo fails at once, with the names it knows.
#[test]
fn scale_refuses_unknown_files_and_names_before_measuring() {
    let missing = std::env::temp_dir().join(format!("ch09-scale-{}.gguf", std::process::id()));
    for (arg, want) in [
        (missing.to_str().unwrap(), "no such file"),
        ("llama-2b-q4_0", "llama-SHAPE-MIX"),
        ("llama-7b-q8_0", "llama-SHAPE-MIX"),
        ("--markdown=/no/such/folder/t.md", "folder does not exist"),
    ] {
        let o = run(&["scale", "smollm2", arg]);
        assert_eq!(o.status.code(), Some(1), "{arg}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("error: ") && stderr(&o).contains(want),
            "{arg}: expected {want:?} in {}",
            stderr(&o)
        );
    }
    let help = String::from_utf8_lossy(&run(&["--help"]).stdout).into_owned();
    assert!(
        help.contains("ch09-generate scale"),
        "--help names scale: {help}"
    );
}
