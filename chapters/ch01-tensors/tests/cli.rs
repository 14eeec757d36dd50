//! The demo binary on spec-valid but unusual files: no panic.

use ch01_tensors::{Tensor, safetensors};
use std::process::Command;

/// A file whose first tensor has shape [0, 4] (valid: zero elements) once made the demo
/// panic taking row 0 of it.
#[test]
fn a_tensor_with_zero_rows_does_not_panic_the_demo() {
    let path =
        std::env::temp_dir().join(format!("ch01-zero-rows-{}.safetensors", std::process::id()));
    let empty = Tensor::from_vec(Vec::new(), &[0, 4]).unwrap();
    let one = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]).unwrap();
    safetensors::write(&path, &[("a.empty", &empty), ("b.one", &one)]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ch01-tensors"))
        .args(["--size", "8", "--model"])
        .arg(&path)
        .output()
        .expect("run ch01-tensors");
    std::fs::remove_file(&path).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the demo failed on a [0, 4] tensor: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `ch01-tensors --help | head -0`: the reader of the pipe is gone before the first line is
/// written. The program must stop quietly, killed by `SIGPIPE` as `cat` would be, not panic
/// with "failed printing to stdout".
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_the_binary_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_ch01-tensors"))
        .arg("--help")
        .stdout(writer)
        .output()
        .expect("run ch01-tensors");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "it panicked: {stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "expected SIGPIPE to end it, got {:?}: {stderr}",
        out.status
    );
}
