//! libFuzzer feeds `Gguf::parse` arbitrary bytes. Whatever they are, the parser must return
//! `Ok` or `Err`; when it returns `Ok`, everything a program reads next (every metadata key
//! through every accessor, every tensor's place, the model configuration, the tokenizer)
//! must also work or fail without a panic, and every tensor must lie inside the input.

#![no_main]

use ch08_gguf::{Gguf, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(g) = Gguf::parse(data) else {
        return;
    };
    for (key, value) in &g.metadata {
        assert!(
            g.get(key).is_some_and(|v| std::ptr::eq(v, value)),
            "metadata key {key:?} cannot be found by name"
        );
        let _ = (value.type_name(), value.as_i128());
        if let Value::Array(a) = value {
            let _ = (a.len(), a.type_name());
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
        let _ = (t.elements(), t.ty.name(), t.ty.block_bytes());
        let start = g.absolute_offset(t);
        let end = start
            .checked_add(t.size)
            .expect("a tensor's end fits in u64");
        assert!(
            end <= data.len() as u64,
            "tensor {:?} at bytes {start}..{end} of a {}-byte input",
            t.name,
            data.len()
        );
    }
    let _ = ch08_gguf::config::config(&g);
    let _ = ch08_gguf::tokenizer(&g);
});
