//! `tojson` as Hugging Face defines it: Python's `json.dumps`, byte for byte.
//!
//! Jinja2's own `tojson` escapes `<`, `>`, `&` and `'` for HTML, and minijinja's writes compact
//! JSON; Hugging Face replaces the filter with `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`, and templates write tool schemas with it (`tojson(indent=4)`
//! in Llama 3's). So this writes what Python writes: `", "` and `": "` between items (`","`
//! once indented), floats as Python's `repr`, non-ASCII text as it is unless `ensure_ascii`.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

/// How deep a value may nest: a template can build a list inside a list a million times
/// over within its fuel, and this writer recurses once per level.
const MAX_DEPTH: usize = 256;

/// The longest indent or separator: templates use four spaces, or `", "`.
const MAX_INDENT: usize = 64;

/// The filter: `value | tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
pub fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let indent: Option<Value> = kwargs.get("indent")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    // Python: an integer indent is that many spaces, a string is itself. Up to
    // MAX_INDENT bytes: each line repeats it once per level.
    let too_long = || bad("tojson: indent must be a string or a count of spaces, up to 64 bytes");
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) if s.len() <= MAX_INDENT => s.to_string(),
            Some(_) => return Err(too_long()),
            None => " ".repeat(
                v.as_usize()
                    .filter(|&n| n <= MAX_INDENT)
                    .ok_or_else(too_long)?,
            ),
        }),
    };
    let (item_sep, key_sep) = match separators {
        Some(v) if !v.is_none() => {
            let (a, b) = (v.get_item_by_index(0)?, v.get_item_by_index(1)?);
            match (a.as_str(), b.as_str(), v.len()) {
                (Some(a), Some(b), Some(2)) if a.len().max(b.len()) <= MAX_INDENT => {
                    (a.to_string(), b.to_string())
                }
                _ => {
                    return Err(bad(
                        "tojson: separators must be two strings of up to 64 bytes",
                    ));
                }
            }
        }
        _ if indent.is_some() => (",".to_string(), ": ".to_string()),
        _ => (", ".to_string(), ": ".to_string()),
    };
    let mut w = Writer {
        out: String::new(),
        ensure_ascii: ensure_ascii.unwrap_or(false),
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
    };
    w.value(value, 0)?;
    Ok(Value::from(w.out))
}

fn bad(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.to_string())
}

struct Writer {
    out: String,
    ensure_ascii: bool,
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

impl Writer {
    fn value(&mut self, v: &Value, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(bad("tojson: the value nests too deeply"));
        }
        match v.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number if v.is_integer() => self.out.push_str(&v.to_string()),
            ValueKind::Number => self.out.push_str(&python_float(f64::try_from(v.clone())?)),
            ValueKind::String => self.string(v.as_str().unwrap_or_default()),
            ValueKind::Seq => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.container('[', ']', items.len(), depth, |w, i, depth| {
                    w.value(&items[i], depth)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<(String, Value)> = v
                    .try_iter()?
                    .map(|k| Ok((python_key(&k)?, k)))
                    .collect::<Result<_, Error>>()?;
                if self.sort_keys {
                    keys.sort_by(|a, b| a.0.cmp(&b.0));
                }
                self.container('{', '}', keys.len(), depth, |w, i, depth| {
                    w.string(&keys[i].0);
                    w.out.push_str(&w.key_sep.clone());
                    w.value(&v.get_item(&keys[i].1)?, depth)
                })?;
            }
            other => {
                return Err(bad(&format!(
                    "tojson: a value of kind {other} is not JSON serializable"
                )));
            }
        }
        Ok(())
    }

    /// `open`, the `n` items each written by `item`, `close`; on their own lines when indenting.
    fn container(
        &mut self,
        open: char,
        close: char,
        n: usize,
        depth: usize,
        mut item: impl FnMut(&mut Writer, usize, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.out.push(open);
        if n == 0 {
            self.out.push(close);
            return Ok(());
        }
        let newline = |w: &mut Writer, level: usize| {
            if let Some(indent) = &w.indent {
                let line = format!("\n{}", indent.repeat(level));
                w.out.push_str(&line);
            }
        };
        for i in 0..n {
            if i > 0 {
                let sep = self.item_sep.clone();
                self.out.push_str(&sep);
            }
            newline(self, depth + 1);
            item(self, i, depth + 1)?;
        }
        newline(self, depth);
        self.out.push(close);
        Ok(())
    }

    /// A JSON string as Python escapes it.
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && (c as u32) > 0x7e) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

/// A dict key as Python's `json.dumps` writes it: strings as they are, numbers, booleans
/// and `None` as their JSON text.
fn python_key(k: &Value) -> Result<String, Error> {
    match k.kind() {
        ValueKind::String => Ok(k.as_str().unwrap_or_default().to_string()),
        ValueKind::None => Ok("null".into()),
        ValueKind::Bool => Ok(if k.is_true() { "true" } else { "false" }.into()),
        ValueKind::Number if k.is_integer() => Ok(k.to_string()),
        ValueKind::Number => Ok(python_float(f64::try_from(k.clone())?)),
        other => Err(bad(&format!(
            "tojson: keys must be str, int, float, bool or None, not {other}"
        ))),
    }
}

/// `repr(x)` of a Python float: the shortest digits that read back as `x`, positional from
/// 1e-4 up to 1e16, else with an exponent of at least two digits (`1e+16`, `1e-05`).
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddd` `e` exponent.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let text = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{text}")
    } else {
        let rest = if digits.len() > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{}{rest}e{esign}{:02}", &digits[..1], exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_would_grow_without_bound_is_refused() {
        let env = crate::chat::environment::environment(0);
        for (source, want) in [
            ("{{ [1, 2] | tojson(indent=100000000) }}", "up to 64 bytes"),
            ("{{ [1, 2] | tojson(indent='x' * 1000) }}", "up to 64 bytes"),
            (
                "{{ [1, 2] | tojson(separators=('x' * 1000, ':')) }}",
                "up to 64 bytes",
            ),
            (
                "{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}\
                 {% endfor %}{{ ns.v | tojson }}",
                "nests too deeply",
            ),
        ] {
            let e = env.render_str(source, ()).unwrap_err();
            assert!(format!("{e:#}").contains(want), "{source}: {e:#}");
        }
    }

    #[test]
    fn floats_read_as_python_writes_them() {
        // Each pair: the value, and `repr()` of it in Python 3.
        for (x, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456789.0, "123456789.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (9999999999999998.0, "9999999999999998.0"),
            (1.0 / 3.0, "0.3333333333333333"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(python_float(x), want, "repr({x:?})");
        }
    }
}
