//! Demo 1: views that share one tensor's storage.

use ch01_tensors::Tensor;
use serde_json::{Value, json};

/// Prints one view: its layout, whether it shares `base`'s storage, and its elements.
fn show(label: &str, t: &Tensor, base: &Tensor, text: bool) -> Value {
    let shares = t.shares_storage(base);
    if text {
        println!("{label}");
        println!(
            "  shape {:?}  strides {:?}  offset {}  contiguous: {}  shares t's storage: {}",
            t.shape(),
            t.strides(),
            t.offset(),
            t.is_contiguous(),
            if shares { "yes" } else { "no (copied)" }
        );
        for line in t.to_string().lines() {
            println!("  {line}");
        }
    }
    json!({ "view": label, "shape": t.shape(), "strides": t.strides(), "offset": t.offset(),
            "contiguous": t.is_contiguous(), "shares_storage": shares, "values": t.to_vec() })
}

pub fn demo_views(text: bool) -> Result<Value, ch01_tensors::Error> {
    if text {
        println!("== 1. Views: one buffer, many tensors ==");
    }
    let t = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3])?; // (2, 3)
    let shown = vec![
        show(
            "t = Tensor::from_vec([0, 1, 2, 3, 4, 5], &[2, 3])",
            &t,
            &t,
            text,
        ),
        show("t.transpose(0, 1)", &t.transpose(0, 1), &t, text),
        show(
            "t.narrow(1, 1, 2)   (columns 1..3)",
            &t.narrow(1, 1, 2)?,
            &t,
            text,
        ),
        show("t.row(1)", &t.row(1), &t, text),
        show(
            "t.transpose(0, 1).contiguous()",
            &t.transpose(0, 1).contiguous(),
            &t,
            text,
        ),
    ];
    Ok(Value::Array(shown))
}
