//! Opening files that strangers name: the one place every chapter's binaries do it.
//!
//! A path from a command line or a config may be a FIFO (opening it for reading blocks until
//! someone writes), a device (`/dev/zero` never ends, `/dev/urandom` cannot be mapped), or a
//! 1 GB file where a 2 kB config was expected. [`open_regular`] refuses anything that is not a
//! regular file *before* opening it, and opens without blocking besides; [`read_to_string`]
//! also caps the size of a file read whole.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The largest config or tokenizer a binary reads whole: SmolLM2's `tokenizer.json` is 2 MB,
/// Gemma-3's vocabulary in JSON form about 35 MB.
pub const MAX_TEXT_FILE: u64 = 64 << 20;

// ANCHOR: open_regular
/// Opens `path` for reading if it is a regular file (after following links), with an error
/// that says what it is otherwise.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {kind}", path.display()),
        ));
    }
    // Between the check and the open the path could be swapped for a FIFO; O_NONBLOCK makes
    // that open return at once instead of waiting for a writer, and the check below catches it.
    let file = open_nonblocking(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}
// ANCHOR_END: open_regular

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    const O_NONBLOCK: i32 = 0o4000; // the same value on Linux (x86-64 and ARM64)
    #[cfg(target_os = "macos")]
    const O_NONBLOCK_MACOS: i32 = 0x0004;
    #[cfg(target_os = "macos")]
    let flag = O_NONBLOCK_MACOS;
    #[cfg(not(target_os = "macos"))]
    let flag = O_NONBLOCK;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flag)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// Reads a regular file of at most `max` bytes as UTF-8.
pub fn read_to_string(path: &Path, max: u64) -> io::Result<String> {
    let file = open_regular(path)?;
    let len = file.metadata()?.len();
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is {len} bytes, more than the {max} this program reads whole",
                path.display()
            ),
        ));
    }
    let mut text = String::new();
    // `take` guards against a file that grows after the size check.
    file.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} grew past {max} bytes while being read", path.display()),
        ));
    }
    Ok(text)
}

/// Writes `text` to `path`, a new file or an existing regular one: never through a directory,
/// FIFO or device a stranger named (a FIFO would block the write forever).
pub fn write_output(path: &Path, text: &str) -> io::Result<()> {
    check_output(path)?;
    std::fs::write(path, text)
}

/// The check [`write_output`] makes, on its own: a program that measures for a minute
/// before it writes calls it first, so a bad path fails at once.
pub fn check_output(path: &Path) -> io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !meta.is_file()
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} exists and is not a regular file", path.display()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_directories_devices_and_big_files() {
        let err = read_to_string(Path::new("/"), 10).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        #[cfg(unix)]
        {
            let err = read_to_string(Path::new("/dev/zero"), 10)
                .unwrap_err()
                .to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
        let path = std::env::temp_dir().join(format!("ch01-files-{}.txt", std::process::id()));
        std::fs::write(&path, "0123456789abc").unwrap();
        assert!(
            read_to_string(&path, 10)
                .unwrap_err()
                .to_string()
                .contains("more than the 10")
        );
        assert_eq!(read_to_string(&path, 100).unwrap(), "0123456789abc");
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn output_is_never_written_through_a_directory() {
        let err = write_output(Path::new("/"), "x").unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let path = std::env::temp_dir().join(format!("ch01-fifo-{}", std::process::id()));
        let status = std::process::Command::new("mkfifo").arg(&path).status();
        if !matches!(status, Ok(s) if s.success()) {
            panic!("mkfifo is needed for this test (coreutils)");
        }
        let err = open_regular(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).ok();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
