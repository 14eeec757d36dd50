//! Bad command lines and bad reports: clear errors, non-zero exits, in bounded time.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_ch05-kv-cache"))
        .args(args)
        .output()
        .expect("run ch05-kv-cache");
    (o, start.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `-n` used to size a `Vec::with_capacity` directly: 2^64 − 1 panicked with "capacity
/// overflow", 10^10 aborted allocating 40 GB. Now anything beyond the cache is refused first.
#[test]
fn huge_n_is_refused_before_anything_is_allocated() {
    for n in [
        "18446744073709551615",
        "4611686018427387904",
        "10000000000",
        "2049",
    ] {
        let (o, _) = run(&["generate", "-n", n]);
        assert_eq!(o.status.code(), Some(2), "-n {n}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("more tokens than the cache holds"),
            "-n {n}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "-n {n}: {}", stderr(&o));
    }
}

/// A report with a decode rate of 0 (or a subnormal) made the chart's axis loop forever.
#[test]
fn a_report_with_zero_rates_is_drawn_in_bounded_time() {
    let dir = std::env::temp_dir().join(format!("ch05-zero-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/bench-results.json"))
            .unwrap();
    let mut report: serde_json::Value = serde_json::from_str(&committed).unwrap();
    for p in report["decode"].as_array_mut().unwrap() {
        for (_, v) in p
            .as_object_mut()
            .unwrap()
            .iter_mut()
            .filter(|(k, _)| k.contains("per_s"))
        {
            *v = 0.0.into();
        }
    }
    let (from, svg) = (dir.join("report.json"), dir.join("chart.svg"));
    std::fs::write(&from, report.to_string()).unwrap();
    let (o, took) = run(&[
        "bench",
        "--from",
        from.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let drawn = std::fs::read_to_string(&svg).unwrap_or_default();
    std::fs::remove_dir_all(&dir).ok();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(took < Duration::from_secs(20), "drawing took {took:?}");
    assert!(drawn.ends_with("</svg>\n"), "the chart was not written");
}

/// `ch05-kv-cache --help | head -1` panicked ("failed printing to stdout: Broken pipe") when
/// `head` had gone before the usage was written. Now a closed pipe ends it as it ends `cat`.
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_the_binary_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_ch05-kv-cache"))
        .arg("--help")
        .stdout(writer)
        .output()
        .expect("run ch05-kv-cache");
    assert!(
        !stderr(&o).contains("panicked"),
        "it panicked: {}",
        stderr(&o)
    );
    assert_eq!(
        o.status.signal(),
        Some(13),
        "expected SIGPIPE (13): {:?}",
        o.status
    );
}
