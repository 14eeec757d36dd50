//! The binary on bad input: a clear message and a non-zero exit, never a panic.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ch10-batching"))
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
        &[][..],
        &["nosuch"],
        &["run"],
        &["bench"],
        &["bench", "--sequences", "0"],
        &["bench", "--sequences", "1", "--prompt", "0"],
        &["run", "--requests", "r.jsonl", "--kv-mb", "0"],
        &["run", "--requests", "r.jsonl", "--kv-mb", "99999999"],
        &["run", "--requests", "r.jsonl", "--max-batch-tokens", "0"],
        &[
            "run",
            "--requests",
            "r.jsonl",
            "--max-batch-tokens",
            "1000000",
        ],
        &["run", "--requests", "r.jsonl", "--threads", "0"],
        &["trace", "--compare"],
        &["run", "--requests", "r.jsonl", "--svg", "x.svg"],
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
fn bad_requests_are_refused_before_anything_runs() {
    let dir = std::env::temp_dir().join(format!("ch10-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, body, kv_mb, want) in [
        (
            "json.jsonl",
            "{\"prompt\": \"hi\"}\nnot json\n",
            "64",
            "line 2: not JSON",
        ),
        (
            "noprompt.jsonl",
            "{\"max_tokens\": 4}\n",
            "64",
            "\"prompt\" (a string) is missing",
        ),
        (
            "temp.jsonl",
            "{\"prompt\": \"hi\", \"temperature\": -1}\n",
            "64",
            "temperature must be",
        ),
        (
            "zero.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 0}\n",
            "64",
            "max_tokens is 0",
        ),
        (
            "frac.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 2.5}\n",
            "64",
            "whole number",
        ),
        (
            "context.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 60000}\n",
            "64",
            "the model has 8192",
        ),
        (
            "pool.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 100}\n",
            "1",
            "needs 7 KV blocks",
        ),
        (
            "tiny.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 8}\n",
            "1",
            "",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        let o = run(&[
            "run",
            "--requests",
            path.to_str().unwrap(),
            "--kv-mb",
            kv_mb,
        ]);
        if want.is_empty() {
            // 1 MB holds one block of 16 positions (737 kB): enough for a short request
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{name}: {}", stderr(&o));
        assert!(
            o.stdout.is_empty(),
            "{name}: nothing runs before every request is accepted"
        );
    }
}
