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
        &["bench", "--short", "4"],
        &["bench", "--short", "513"],
        &["logits", "--ids", "1", "--short", "64"],
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

/// A misspelt policy variable stops the program with a message naming the good values; it
/// is not quietly the default (a race of policies would race the default against itself).
#[test]
fn bad_policy_variables_are_clear_errors() {
    use ch01_tensors::models;
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let model = path.to_str().expect("a UTF-8 path");
    for (var, value, names) in [
        ("LLM_BOOK_IDLE", "sleep", "spin or park"),
        ("LLM_BOOK_DECODE_THREADS", "0", "from 1 to 4095"),
        ("LLM_BOOK_TASK_BYTES", "64k", "from 1024 to 67108864"),
        ("LLM_BOOK_PREFILL_BAND", "4", "from 8 to 4096"),
        ("LLM_BOOK_FEW_PER", "threads", "band or thread"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ch08-gguf"))
            .args(["logits", "-m", model, "--ids", "1"])
            .env(var, value)
            .output()
            .expect("the binary runs");
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{var}={value}: {:?}: {err}",
            o.status
        );
        assert!(
            err.starts_with("error: ") && err.contains(var) && err.contains(names),
            "{var}={value} should be an error naming the good values ({names}): {err}"
        );
    }
}

/// A prefill cut into bands of tokens in other ways, each band's rows shared by the threads
/// (`LLM_BOOK_PREFILL_BAND`), gives the logits of the default cut (on 8 threads, four bands
/// of two runs of rows for 200 tokens, two of four for 100) to the bit: the same kernels on
/// the same tokens and rows, whichever thread runs them. So does a shorter prefill split by
/// rows where it would be cut into bands (`LLM_BOOK_FEW_PER=thread`: fewer than 16 tokens a
/// thread, not a band).
#[test]
fn a_prefill_cut_by_rows_gives_the_same_logits() {
    use ch01_tensors::models;
    let path = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
    let model = path.to_str().expect("a UTF-8 path");
    let logits = |tokens: u32, env: Option<(&str, &str)>| {
        let ids: Vec<String> = (100..100 + tokens).map(|i| i.to_string()).collect();
        let mut c = Command::new(env!("CARGO_BIN_EXE_ch08-gguf"));
        c.args([
            "logits",
            "-m",
            model,
            "--ids",
            &ids.join(","),
            "--threads",
            "8",
            "--top",
            "8",
            "--json",
        ]);
        if let Some((var, value)) = env {
            c.env(var, value);
        }
        let o = c.output().expect("the binary runs");
        assert!(o.status.success(), "logits failed: {}", stderr(&o));
        String::from_utf8(o.stdout).expect("UTF-8 JSON")
    };
    // 200 tokens: a band a thread; one band of eight runs of rows; three bands of two runs
    // each; 36, which would cut the 192 tokens of whole eights into five bands of 39.
    // 100 tokens: two bands of 50 (16 or more a band), or by rows (under 16 a thread).
    for (tokens, vars) in [
        (
            200,
            &[
                ("LLM_BOOK_PREFILL_BAND", "8"),
                ("LLM_BOOK_PREFILL_BAND", "128"),
                ("LLM_BOOK_PREFILL_BAND", "64"),
                ("LLM_BOOK_PREFILL_BAND", "36"),
            ][..],
        ),
        (100, &[("LLM_BOOK_FEW_PER", "thread")][..]),
    ] {
        let default = logits(tokens, None);
        for &(var, value) in vars {
            assert_eq!(
                logits(tokens, Some((var, value))),
                default,
                "{var}={value} changed the logits of a {tokens}-token prefill"
            );
        }
    }
}
