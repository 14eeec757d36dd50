//! What the GGUF parser's hostile-input tests share: the corpus files, and a reader that
//! touches everything a parsed file offers.

#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};

use ch08_gguf::{Gguf, Value};

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gguf-corpus")
}

pub fn read(name: &str) -> Vec<u8> {
    let path = corpus_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate the corpus with `python3 scripts/make_gguf_corpus.py`",
            path.display()
        )
    })
}

pub fn valid_bytes() -> Vec<u8> {
    read("valid.gguf")
}

/// The text of a caught panic.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// Everything a program might read from a parsed file: every metadata key through every
/// typed accessor, every tensor's description and bytes, and the model configuration and
/// tokenizer built from the metadata. Errors are fine; a panic or a tensor outside the file
/// is not.
pub fn touch_everything(g: &Gguf, file: &[u8]) {
    for (key, value) in &g.metadata {
        // By address, not by value: a damaged f32 may be NaN, which equals nothing.
        assert!(
            g.get(key).is_some_and(|v| std::ptr::eq(v, value)),
            "metadata key {key:?} cannot be found by name"
        );
        let _ = (value.type_name(), value.as_i128());
        if let Value::Array(a) = value {
            let _ = (a.len(), a.is_empty(), a.type_name());
        }
        let _ = g.opt_u64(key);
        let _ = g.opt_f64(key);
        let _ = g.opt_str(key);
        let _ = g.opt_bool(key);
        let _ = g.opt_array(key);
        let _ = g.strings(key);
        let _ = g.opt_ints(key);
        let _ = g.opt_f32s(key);
    }
    for t in &g.tensors {
        assert!(
            g.tensor(&t.name).is_some_and(|u| std::ptr::eq(u, t)),
            "tensor {:?} cannot be found by name",
            t.name
        );
        let _ = (
            t.elements(),
            t.ty.name(),
            t.ty.block_values(),
            t.ty.block_bytes(),
        );
        let start = g.absolute_offset(t);
        let end = start.checked_add(t.size);
        assert!(
            end.is_some_and(|end| end <= file.len() as u64),
            "the parser accepted tensor {:?} at bytes {start}..{end:?} of a {}-byte file",
            t.name,
            file.len()
        );
        let _ = &file[start as usize..end.unwrap() as usize];
    }
    let _ = ch08_gguf::config::config(g);
    let _ = ch08_gguf::tokenizer(g);
}
