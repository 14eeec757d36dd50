//! safetensors: round trips, F16/BF16 decoding, zero-copy views, and a clear error (never a
//! panic) for every way a file can be broken.

use ch01_tensors::safetensors::{self, Dtype, SafeTensors, TensorInfo};
use ch01_tensors::{Error, Tensor, models};
use std::path::{Path, PathBuf};

/// A file in the temp dir, unique per test and process, deleted when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str) -> TempFile {
        TempFile(
            std::env::temp_dir().join(format!("ch01-{}-{test}.safetensors", std::process::id())),
        )
    }
    fn with_bytes(test: &str, bytes: &[u8]) -> TempFile {
        let f = TempFile::new(test);
        std::fs::write(&f.0, bytes).unwrap();
        f
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A safetensors file from a header string and data bytes: length prefix, header, data.
fn raw_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// Opens `bytes` as a file and returns the error, failing if it opened.
fn open_err(test: &str, bytes: &[u8]) -> Error {
    let f = TempFile::with_bytes(test, bytes);
    match SafeTensors::open(&f.0) {
        Ok(_) => panic!("{test}: a broken file was accepted"),
        Err(e) => e,
    }
}

fn format_msg(e: Error) -> String {
    match e {
        Error::Format(msg) => msg,
        other => panic!("expected a Format error, got {other:?}"),
    }
}

#[test]
fn round_trip_of_written_tensors() {
    let f = TempFile::new("round_trip");
    let m = Tensor::from_vec((0..6).map(|v| v as f32 - 2.5).collect(), &[2, 3]).unwrap();
    let t = m.transpose(0, 1); // a view: written in its logical (3, 2) order
    let s = Tensor::from_vec(vec![42.0], &[]).unwrap(); // 0-d scalar
    safetensors::write(&f.0, &[("m", &m), ("t", &t), ("a.scalar", &s)]).unwrap();

    let st = SafeTensors::open(&f.0).unwrap();
    assert_eq!(
        st.names(),
        vec!["a.scalar", "m", "t"],
        "names come back sorted"
    );
    assert_eq!(
        st.info("t"),
        Some(&TensorInfo {
            dtype: Dtype::F32,
            shape: vec![3, 2],
            data_offsets: (24, 48)
        })
    );
    for (name, want) in [("m", &m), ("t", &t), ("a.scalar", &s)] {
        let got = st.tensor(name).unwrap();
        assert_eq!(got.shape(), want.shape(), "{name}");
        assert_eq!(got.to_vec(), want.to_vec(), "{name}");
        assert!(
            got.is_mapped(),
            "{name}: an aligned F32 tensor should be a view of the mapped file"
        );
    }
    assert!(matches!(
        st.tensor("missing"),
        Err(Error::TensorNotFound(_))
    ));
}

#[test]
fn writer_refuses_duplicate_and_reserved_names() {
    let f = TempFile::new("dup_names");
    let x = Tensor::zeros(&[2]);
    assert!(safetensors::write(&f.0, &[("x", &x), ("x", &x)]).is_err());
    assert!(safetensors::write(&f.0, &[("__metadata__", &x)]).is_err());
}

#[test]
fn f16_and_bf16_tensors_are_decoded() {
    // F16: 1.0 = 0x3c00, -2.0 = 0xc000, 0.5 = 0x3800, 65504 = 0x7bff (the largest f16).
    // BF16: 1.0 = 0x3f80, -2.0 = 0xc000, 0.5 = 0x3f00, 65536 = 0x4780.
    let f16: [u16; 4] = [0x3c00, 0xc000, 0x3800, 0x7bff];
    let bf16: [u16; 4] = [0x3f80, 0xc000, 0x3f00, 0x4780];
    let data: Vec<u8> = f16
        .iter()
        .chain(&bf16)
        .flat_map(|b| b.to_le_bytes())
        .collect();
    let header = r#"{"__metadata__":{"format":"pt"},
        "h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},
        "b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]}}"#;
    let f = TempFile::with_bytes("half", &raw_file(header, &data));
    let st = SafeTensors::open(&f.0).unwrap();
    assert_eq!(st.names(), vec!["b", "h"], "__metadata__ is not a tensor");
    let h = st.tensor("h").unwrap();
    assert_eq!(
        (h.shape(), h.to_vec()),
        (&[2, 2][..], vec![1.0, -2.0, 0.5, 65504.0])
    );
    assert_eq!(
        st.tensor("b").unwrap().to_vec(),
        vec![1.0, -2.0, 0.5, 65536.0]
    );
    assert!(!h.is_mapped(), "decoded tensors live on the heap");
}

#[test]
fn misaligned_f32_data_is_copied_not_misread() {
    // A 10-byte header puts the data section at byte 18: not a multiple of 4, so the
    // floats cannot be viewed in place and must be copied out byte by byte.
    let values = [1.5f32, -0.25, 3.0];
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let header = r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}"#;
    let padded = format!("{header:<58}"); // 58 + 8 = 66 ≡ 2 (mod 4)
    let f = TempFile::with_bytes("misaligned", &raw_file(&padded, &data));
    let t = SafeTensors::open(&f.0).unwrap().tensor("x").unwrap();
    assert!(!t.is_mapped());
    assert_eq!(t.to_vec(), values);
}

#[test]
fn missing_file_is_an_io_error() {
    let err = SafeTensors::open("/nonexistent/ch01/model.safetensors").unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("/nonexistent/ch01/model.safetensors"),
        "the error names the file"
    );
}

#[test]
fn truncated_files_are_refused() {
    let msg = format_msg(open_err("empty", &[]));
    assert!(msg.contains("too short"), "{msg}");
    let msg = format_msg(open_err("five_bytes", &[1, 0, 0, 0, 0]));
    assert!(msg.contains("too short"), "{msg}");
    // A valid file cut off in the middle of its data: the offsets now point past the end.
    let header = r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#;
    let whole = raw_file(header, &[0; 16]);
    let msg = format_msg(open_err("cut_data", &whole[..whole.len() - 1]));
    assert!(msg.contains("outside the 15-byte data section"), "{msg}");
    // Cut off inside the header.
    let msg = format_msg(open_err("cut_header", &whole[..20]));
    assert!(msg.contains("runs past the end"), "{msg}");
}

#[test]
fn absurd_header_length_is_refused_without_allocating() {
    let mut bytes = (1u64 << 60).to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    let msg = format_msg(open_err("huge_header", &bytes));
    assert!(
        msg.contains("header length 1152921504606846976 runs past the end"),
        "{msg}"
    );
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    format_msg(open_err("max_header", &bytes));
}

#[test]
fn invalid_json_is_refused() {
    let msg = format_msg(open_err(
        "bad_json",
        &raw_file(r#"{"x": {"dtype": "F32", "#, &[]),
    ));
    assert!(msg.contains("not a JSON object"), "{msg}");
    let msg = format_msg(open_err("json_array", &raw_file("[1, 2, 3]", &[])));
    assert!(msg.contains("not a JSON object"), "{msg}");
    let mut not_utf8 = 2u64.to_le_bytes().to_vec();
    not_utf8.extend_from_slice(&[0xff, 0xfe]);
    let msg = format_msg(open_err("not_utf8", &not_utf8));
    assert!(msg.contains("not a JSON object"), "{msg}");
    let missing_shape = r#"{"x":{"dtype":"F32","data_offsets":[0,4]}}"#;
    let msg = format_msg(open_err("no_shape", &raw_file(missing_shape, &[0; 4])));
    assert!(
        msg.contains("tensor x: bad header entry") && msg.contains("shape"),
        "{msg}"
    );
}

#[test]
fn unknown_dtype_is_named_in_the_error() {
    let header = r#"{"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}"#;
    let err = open_err("i64", &raw_file(header, &[0; 16]));
    assert!(
        matches!(&err, Error::UnsupportedDtype { dtype, tensor } if dtype == "I64" && tensor == "ids")
    );
    assert!(
        err.to_string()
            .contains("unsupported dtype I64 for tensor ids"),
        "{err}"
    );
}

#[test]
fn offsets_must_match_the_shape_and_stay_inside() {
    let cases = [
        // (test, header, data length, expected message fragment)
        (
            "too_few_bytes",
            r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            8,
            "needs 12 bytes",
        ),
        (
            "f16_size",
            r#"{"x":{"dtype":"F16","shape":[3],"data_offsets":[0,12]}}"#,
            12,
            "needs 6 bytes",
        ),
        (
            "past_end",
            r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}}"#,
            12,
            "outside",
        ),
        (
            "reversed",
            r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}"#,
            12,
            "outside",
        ),
        (
            "overflow",
            r#"{"x":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}}"#,
            4,
            "too many",
        ),
        (
            "overlap",
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
            12,
            "tensors a and b overlap",
        ),
    ];
    for (test, header, len, fragment) in cases {
        let msg = format_msg(open_err(test, &raw_file(header, &vec![0; len])));
        assert!(
            msg.contains(fragment),
            "{test}: message {msg:?} should mention {fragment:?}"
        );
    }
}

#[test]
fn empty_header_is_an_empty_file_of_tensors() {
    let f = TempFile::with_bytes("no_tensors", &raw_file("{}", &[]));
    let st = SafeTensors::open(&f.0).unwrap();
    assert!(st.is_empty() && st.names().is_empty());
}

/// `len` bytes at byte `pos` of the file, read with plain file I/O — an independent path
/// to the same bytes the mmap view shows.
fn read_bytes(path: &Path, pos: u64, len: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).unwrap();
    file.seek(SeekFrom::Start(pos)).unwrap();
    let mut buf = vec![0u8; len];
    file.read_exact(&mut buf).unwrap();
    buf
}

#[test]
fn smollm2_weights_are_zero_copy_views_of_the_file() {
    let path = models::require(&models::smollm2_hf_dir().join("model.safetensors"))
        .unwrap_or_else(|m| panic!("{m}"));
    let st = SafeTensors::open(&path).unwrap();
    let header_len = u64::from_le_bytes(read_bytes(&path, 0, 8).try_into().unwrap());
    for name in [
        "model.embed_tokens.weight",
        "model.layers.0.self_attn.q_proj.weight",
        "model.norm.weight",
    ] {
        let info = st
            .info(name)
            .unwrap_or_else(|| panic!("SmolLM2 has no tensor {name}"));
        assert_eq!(info.dtype, Dtype::F32, "{name}");
        let t = st.tensor(name).unwrap();
        assert!(
            t.is_mapped(),
            "{name} should be a view of the mapped file, not a copy"
        );
        // The last row of the tensor, as seen through the view, equals the bytes on disk.
        let last = if t.shape().len() == 2 {
            t.row(t.shape()[0] - 1)
        } else {
            t.clone()
        };
        let n = last.numel();
        let pos = 8 + header_len + info.data_offsets.1 as u64 - 4 * n as u64;
        let on_disk: Vec<f32> = read_bytes(&path, pos, 4 * n)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(last.to_vec(), on_disk, "{name}: view and file disagree");
    }
}

#[test]
fn a_directory_is_refused_by_name() {
    let dir = std::env::temp_dir();
    let err = SafeTensors::open(&dir).unwrap_err();
    assert!(
        err.to_string().contains("is a directory"),
        "opening a directory should say so, got: {err}"
    );
}

/// serde_json alone keeps the last of two equal keys: a file naming one tensor twice would
/// be read as one tensor. The reader refuses it.
#[test]
fn a_tensor_named_twice_is_refused() {
    let header = r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
    let msg = format_msg(open_err("duplicate_key", &raw_file(header, &[0; 8])));
    assert!(msg.contains("appears twice"), "{msg}");
}

/// A header past 16 MiB (millions of tiny entries would cost many times that to parse) is
/// refused before parsing.
#[test]
fn an_oversized_header_is_refused_before_parsing() {
    let n = (safetensors::MAX_HEADER_BYTES + 1) as usize;
    let mut header = String::with_capacity(n);
    header.push('{');
    while header.len() < n - 1 {
        header.push(' ');
    }
    header.push('}');
    let msg = format_msg(open_err("big_header", &raw_file(&header, &[])));
    assert!(msg.contains("more than the"), "{msg}");
}

/// A FIFO or a device as the model file is refused at once, never opened for a blocking read.
#[cfg(unix)]
#[test]
fn special_files_are_refused() {
    let Err(err) = SafeTensors::open("/dev/zero") else {
        panic!("a device was accepted as a model file");
    };
    let err = err.to_string();
    assert!(err.contains("not a regular file"), "{err}");
}
