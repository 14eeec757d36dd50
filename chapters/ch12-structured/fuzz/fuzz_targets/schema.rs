//! libFuzzer hands the schema compiler any text. A JSON schema is what a client sends, so
//! whatever the text, `compile_text` must answer a grammar or an error, in bounded time and
//! memory (the limits of `Limits::default()`), and never panic. When it answers a grammar,
//! that grammar must have a document: the matcher's shortest completion from the start must
//! be read whole and leave a complete document.

#![no_main]

use ch12_structured::matcher::Matcher;
use ch12_structured::schema::{Limits, compile_text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(grammar) = compile_text(text, Limits::default()) else {
        return;
    };
    let mut m = Matcher::new(&grammar);
    let way_out = m.completion();
    assert!(
        m.accept(&way_out),
        "the shortest document {:?} of a compiled schema is refused",
        String::from_utf8_lossy(&way_out)
    );
    assert!(
        m.is_complete(),
        "after its shortest document {:?} the matcher is not complete",
        String::from_utf8_lossy(&way_out)
    );
});
