//! The binary on bad input: a clear message and a non-zero exit, never a panic.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch08-gguf"))
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
        &["inspect", "--threads", "0"],
        &["logits", "--ids", "1,x"],
        &["logits", "--ids", "1", "--top", "0"],
        &["generate", "-n", "0"],
        &["generate", "--prompt", "a", "--ids", "1"],
        &["tokenize", "--cold"],
        &["hex", "--keys", "1000"],
        &["load", "--access", "sideways"],
        &["depth", "--depth", "999999999"],
        &["depth", "--depth", "-1"],
        &["bench", "--depth", "16"],
    ] {
        let o = run(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?} should be a usage error, got {:?}: {}",
            o.status,
            stderr(&o)
        );
        assert!(
            stderr(&o).starts_with("error: "),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            !stderr(&o).contains("panicked"),
            "{args:?} panicked: {}",
            stderr(&o)
        );
    }
}

#[test]
fn bad_files_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("ch08-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_gguf = dir.join("not.gguf");
    std::fs::write(&not_gguf, b"this is not a model file, only some text in it").unwrap();
    let truncated = dir.join("truncated.gguf");
    std::fs::write(
        &truncated,
        b"GGUF\x03\x00\x00\x00\x10\x01\x00\x00\x00\x00\x00\x00\x21\x00",
    )
    .unwrap();
    let cases: [(&str, &str); 4] = [
        (dir.join("missing.gguf").to_str().unwrap(), "No such file"),
        (not_gguf.to_str().unwrap(), "not a GGUF file"),
        (truncated.to_str().unwrap(), "truncated"),
        (dir.to_str().unwrap(), "is a directory"),
    ]
    .map(|(p, m)| (Box::leak(p.to_string().into_boxed_str()) as &str, m));
    for (path, want) in cases {
        for args in [
            vec!["inspect", path],
            vec!["generate", "--model", path, "-n", "1"],
        ] {
            let o = run(&args);
            assert_eq!(
                o.status.code(),
                Some(1),
                "{args:?}: {:?} {}",
                o.status,
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(want),
                "{args:?}: expected {want:?} in {:?}",
                stderr(&o)
            );
        }
    }
    std::fs::remove_file(&not_gguf).unwrap();
    std::fs::remove_file(&truncated).unwrap();
    std::fs::remove_dir(&dir).unwrap();
}
