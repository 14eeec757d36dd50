//! The first bytes of a GGUF file, with what each run of them means.

use crate::error::Result;
use crate::gguf::Reader;

/// One annotated field: where it starts, its bytes, and what they say.
pub struct Field {
    pub offset: u64,
    pub bytes: Vec<u8>,
    pub meaning: String,
}

// ANCHOR: walk
/// Walks the fixed header and the first `keys` metadata entries of `file`, field by field
/// (stopping at the first array: `inspect` summarises those).
pub fn walk(file: &[u8], keys: usize) -> Result<Vec<Field>> {
    let mut r = Reader::new(file);
    let mut out = Vec::new();
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    let b = take(&mut r, &mut out, 4)?;
    say(&mut out, format!("magic {:?}", String::from_utf8_lossy(b)));
    let b = take(&mut r, &mut out, 4)?;
    say(&mut out, format!("version {}", u32_of(b)));
    let b = take(&mut r, &mut out, 8)?;
    say(&mut out, format!("tensor count {}", u64_of(b)));
    let b = take(&mut r, &mut out, 8)?;
    say(&mut out, format!("metadata count {}", u64_of(b)));
    for _ in 0..keys {
        let n = u64_of(take(&mut r, &mut out, 8)?);
        say(&mut out, format!("key length {n}"));
        let b = take(&mut r, &mut out, n)?;
        say(&mut out, format!("key {:?}", String::from_utf8_lossy(b)));
        let ty = u32_of(take(&mut r, &mut out, 4)?);
        say(&mut out, format!("value type {ty}"));
        match ty {
            4 => {
                let b = take(&mut r, &mut out, 4)?;
                say(&mut out, format!("value {} (u32)", u32_of(b)));
            }
            6 => {
                let b = take(&mut r, &mut out, 4)?;
                let x = f32::from_le_bytes(b.try_into().expect("4 bytes"));
                say(&mut out, format!("value {x} (f32)"));
            }
            7 => {
                let b = take(&mut r, &mut out, 1)?;
                say(&mut out, format!("value {} (bool)", b[0] != 0));
            }
            8 => {
                let n = u64_of(take(&mut r, &mut out, 8)?);
                say(&mut out, format!("string length {n}"));
                let b = take(&mut r, &mut out, n)?;
                say(&mut out, format!("value {:?}", String::from_utf8_lossy(b)));
            }
            _ => break,
        }
    }
    Ok(out)
}

/// Reads `n` bytes as the next field (its meaning filled in by [`say`]).
fn take<'a>(r: &mut Reader<'a>, out: &mut Vec<Field>, n: u64) -> Result<&'a [u8]> {
    let offset = r.offset();
    let bytes = r.bytes(n, "the header")?;
    out.push(Field {
        offset,
        bytes: bytes.to_vec(),
        meaning: String::new(),
    });
    Ok(bytes)
}

fn say(out: &mut [Field], meaning: String) {
    if let Some(f) = out.last_mut() {
        f.meaning = meaning;
    }
}
// ANCHOR_END: walk

/// The walk as text: offset, hex bytes (long runs elided), meaning.
pub fn render(fields: &[Field]) -> String {
    let mut s = String::new();
    for f in fields {
        let shown: Vec<String> = f
            .bytes
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect();
        let more = if f.bytes.len() > 12 { " …" } else { "" };
        s.push_str(&format!(
            "{:08x}  {:<38} {}\n",
            f.offset,
            format!("{}{more}", shown.join(" ")),
            f.meaning
        ));
    }
    s
}
