//! The binary on bad flags: a clear message and exit code 2, never a panic.

use std::process::Command;

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        &["--port", "99999"][..],
        &["--parallel", "0"],
        &["--parallel", "1000"],
        &["--queue", "100000"],
        &["--kv-mb", "0"],
        &["--ctx", "1"],
        &["--threads", "0"],
        &["--body-limit", "0"],
        &["--client-timeout", "0"],
        &["--api-key", ""],
        &["--nosuch"],
        &["serve"],
        &["loadtest"],
        &[
            "loadtest",
            "--url",
            "http://127.0.0.1:1",
            "--clients",
            "0",
            "--requests",
            "1",
        ],
        &[
            "loadtest",
            "--url",
            "http://10.1.2.3:8080",
            "--clients",
            "1",
            "--requests",
            "1",
        ],
        &[
            "loadtest",
            "--url",
            "http://127.0.0.1:1",
            "--compare",
            "--clients",
            "1",
            "--requests",
            "1",
        ],
        &[
            "loadtest",
            "--url",
            "http://127.0.0.1:1",
            "--clients",
            "1",
            "--requests",
            "1",
            "--cancel-rate",
            "2",
        ],
        &["--url", "http://127.0.0.1:1"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ch11-server"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {:?} {err}", o.status);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn a_load_test_against_nothing_says_so() {
    let o = Command::new(env!("CARGO_BIN_EXE_ch11-server"))
        .args([
            "loadtest",
            "--url",
            "http://127.0.0.1:1",
            "--clients",
            "1",
            "--requests",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: "));
}
