//! The binary: bad flags are usage errors (exit 2), bad requests are errors (exit 1),
//! never panics.

use std::process::{Command, Output};

use ch01_tensors::models;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch03-attention"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_exits_zero() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("usage: ch03-attention"));
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["--bogus"][..],
        &["--layer"],
        &["--layer", "two"],
        &["--ids", "1,x,3"],
        &["stray"],
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} should exit 2; stderr: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).starts_with("error: "),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("panicked"), "{args:?} panicked");
    }
}

#[test]
fn impossible_requests_are_errors() {
    // These load the model: fail (not skip, and not fetch) when it is missing.
    models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|m| panic!("{m}"));
    for (args, says) in [
        (&["--layer", "30"][..], "layer 30"),
        (&["--ids", "7"], "between 2 and"),
        (&["--ids", "1,99999"], "99999"),
        (
            &["--ids", "1,2", "--svg", "/nonexistent-dir/x.svg"],
            "/nonexistent-dir/x.svg",
        ),
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?} should exit 1; stderr: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(says),
            "{args:?}: expected {says:?} in {}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("panicked"), "{args:?} panicked");
    }
}

#[test]
fn json_rows_are_probability_distributions() {
    models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|m| panic!("{m}"));
    let out = run(&["--ids", "504,2365,6354,16438", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    let heads = doc["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 9);
    for head in heads {
        for (i, row) in head["weights"].as_array().unwrap().iter().enumerate() {
            let row: Vec<f64> = row
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            // Rounded to 4 decimals, 4 entries: the sum is within 4 · 0.5e-4 of 1.
            assert!(
                (row.iter().sum::<f64>() - 1.0).abs() <= 2e-4,
                "row {i} sums to {}",
                row.iter().sum::<f64>()
            );
            assert!(
                row[i + 1..].iter().all(|&w| w == 0.0),
                "token {i} looks at the future"
            );
        }
    }
    assert_eq!(doc["tokens"][1]["piece"], " quick");
}
