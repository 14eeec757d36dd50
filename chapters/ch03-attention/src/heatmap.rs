//! Attention patterns as an SVG: one small heatmap per head, queries down, keys across.
//!
//! Plain SVG text, no dependencies: a `<rect>` per (query, key) cell. Colour is
//! `√weight` from white (0) to dark blue (1); the square root stretches the small
//! weights so that a head spreading 10 % over several tokens is still visible. Cells the
//! causal mask forbids are grey, so "masked" and "allowed but ignored" look different.

use std::fmt::Write;

use crate::attention::Heads;

const CELL_MAX: f32 = 16.0; // px per cell for short prompts
const PANEL_MAX: f32 = 220.0; // px per panel side for long ones
const GAP: f32 = 18.0; // px between panels
const CHAR_W: f32 = 5.6; // px per character of the 9.5 px label font

/// Escapes the characters XML gives meaning to.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// White → dark blue along `√w`, as an `rgb(...)` colour.
fn colour(w: f32) -> String {
    let t = w.clamp(0.0, 1.0).sqrt();
    let mix = |a: f32, b: f32| (a + (b - a) * t).round() as u8;
    format!(
        "rgb({},{},{})",
        mix(255.0, 8.0),
        mix(255.0, 48.0),
        mix(255.0, 107.0)
    )
}

// ANCHOR: heatmap
/// Draws `weights` (`(n_heads, seq, seq)`, causal) as a grid of per-head heatmaps.
/// `labels` names the `seq` tokens; `title` goes on top.
pub fn heatmap_svg(
    weights: &[f32],
    heads: Heads,
    seq: usize,
    labels: &[String],
    title: &str,
) -> String {
    assert_eq!(
        weights.len(),
        heads.n_heads * seq * seq,
        "weights are not (n_heads, seq, seq)"
    );
    assert_eq!(labels.len(), seq, "one label per token");
    let cell = (PANEL_MAX / seq as f32).min(CELL_MAX);
    let side = cell * seq as f32; // one panel
    let label_w = 8.0 + CHAR_W * labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f32;
    let cols = (heads.n_heads as f32).sqrt().ceil() as usize;
    let rows = heads.n_heads.div_ceil(cols);
    let (left, top) = (label_w + 6.0, 62.0);
    let width = (left + cols as f32 * (side + GAP) + 10.0).max(420.0);
    let height = top + rows as f32 * (side + GAP + 14.0) - GAP + label_w + 8.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        xml(title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="36" font-size="10.5" fill="#444">rows: query token (who looks) · columns: key token (looked at)</text>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="50" font-size="10.5" fill="#444">colour: √weight, white 0 → dark blue 1 · grey: masked (the future)</text>"##
    );
    for h in 0..heads.n_heads {
        let (r, c) = (h / cols, h % cols);
        let x0 = left + c as f32 * (side + GAP);
        let y0 = top + 14.0 + r as f32 * (side + GAP + 14.0);
        let _ = writeln!(
            s,
            r#"<text x="{x0}" y="{:.1}" font-size="11">head {h} (kv {})</text>"#,
            y0 - 4.0,
            heads.kv_head(h)
        );
        for i in 0..seq {
            for j in 0..seq {
                let fill = if j > i {
                    "#ececec".to_string()
                } else {
                    colour(weights[(h * seq + i) * seq + j])
                };
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{cell:.1}" height="{cell:.1}" fill="{fill}"/>"#,
                    x0 + j as f32 * cell,
                    y0 + i as f32 * cell
                );
            }
        }
        let _ = writeln!(
            s,
            r##"<rect x="{x0}" y="{y0}" width="{side}" height="{side}" fill="none" stroke="#888" stroke-width="0.5"/>"##
        );
        if c == 0 {
            // query labels, right-aligned left of the first column
            for (i, l) in labels.iter().enumerate() {
                let y = y0 + (i as f32 + 0.5) * cell + 3.0;
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{y:.1}" font-size="9.5" text-anchor="end">{}</text>"#,
                    x0 - 4.0,
                    xml(l)
                );
            }
        }
        if r == rows - 1 || h + cols >= heads.n_heads {
            // key labels, rotated, under the last panel of each column
            for (j, l) in labels.iter().enumerate() {
                let x = x0 + (j as f32 + 0.5) * cell + 3.0;
                let y = y0 + side + 4.0;
                let _ = writeln!(
                    s,
                    r#"<text x="{x:.1}" y="{y:.1}" font-size="9.5" text-anchor="end" transform="rotate(-90 {x:.1} {y:.1})">{}</text>"#,
                    xml(l)
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}
// ANCHOR_END: heatmap
