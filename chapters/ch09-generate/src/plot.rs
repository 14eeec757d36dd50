//! Small multiples of horizontal bars as a standalone SVG, written as a string: one panel
//! per stage, the same rows in every panel, one scale for all, so a bar that grows from
//! panel to panel is probability a filter gave back to the survivors.

use std::fmt::Write;

use ch05_kv_cache::plot::esc;

/// One panel: a title, a note under it, a value in [0, 1] per row (0: no bar).
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub note: String,
    pub values: Vec<f64>,
}

const PANEL_W: f64 = 150.0;
const GAP: f64 = 16.0;
const TOP: f64 = 96.0;
const ROW_H: f64 = 22.0;
const BAR_H: f64 = 14.0;
/// Room right of the longest bar for its value.
const VALUE_W: f64 = 40.0;

fn percent(v: f64) -> String {
    if v >= 0.1 {
        format!("{:.0}%", v * 100.0)
    } else {
        format!("{:.1}%", v * 100.0)
    }
}

/// `labels` name the rows down the left side; each panel draws its values as bars on a
/// scale shared by all panels (0 to the largest value). With `rest_row`, the last row is a
/// remainder ("everything else"), drawn in grey.
pub fn bar_panels(
    title: &str,
    subtitle: &str,
    labels: &[String],
    panels: &[Panel],
    rest_row: bool,
) -> String {
    let label_w = 16.0 + 7.5 * labels.iter().map(|l| l.chars().count()).max().unwrap_or(4) as f64;
    let w = label_w + panels.len() as f64 * (PANEL_W + GAP);
    let h = TOP + labels.len() as f64 * ROW_H + 16.0;
    let max = panels
        .iter()
        .flat_map(|p| p.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w:.0} {h:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w:.0}" height="{h:.0}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="12" y="24" font-size="15">{}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<text x="12" y="44" fill="#555">{}</text>"##,
        esc(subtitle)
    );
    for (r, label) in labels.iter().enumerate() {
        let y = TOP + r as f64 * ROW_H;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-family="monospace">{}</text>"#,
            label_w - 8.0,
            y + BAR_H - 3.0,
            esc(label)
        );
    }
    for (i, panel) in panels.iter().enumerate() {
        let x0 = label_w + i as f64 * (PANEL_W + GAP);
        let _ = writeln!(
            s,
            r#"<text x="{x0:.1}" y="70" font-weight="bold">{}</text>"#,
            esc(&panel.title)
        );
        let _ = writeln!(
            s,
            r##"<text x="{x0:.1}" y="86" fill="#555">{}</text>"##,
            esc(&panel.note)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{x0:.1}" x2="{x0:.1}" y1="{:.1}" y2="{:.1}" stroke="#999"/>"##,
            TOP - 4.0,
            TOP + labels.len() as f64 * ROW_H
        );
        for (r, &v) in panel.values.iter().enumerate().take(labels.len()) {
            let y = TOP + r as f64 * ROW_H;
            if !(v.is_finite() && v > 0.0) {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" fill="#aaa">–</text>"##,
                    x0 + 4.0,
                    y + BAR_H - 3.0
                );
                continue;
            }
            let len = v / max * (PANEL_W - VALUE_W);
            let grey = rest_row && r + 1 == labels.len();
            let fill = if grey { "#bbb" } else { "#4c78a8" };
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{y:.1}" width="{len:.1}" height="{BAR_H}" fill="{fill}"/>"#
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                x0 + len + 4.0,
                y + BAR_H - 3.0,
                percent(v)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_filtered_rows_have_no_bar() {
        let svg = bar_panels(
            "a <title>",
            "s & t",
            &["\"<b>\"".to_string(), "x".to_string()],
            &[Panel {
                title: "p".into(),
                note: "1 left".into(),
                values: vec![0.5, 0.0],
            }],
            false,
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("&quot;&lt;b&gt;&quot;") && svg.contains("a &lt;title&gt;"));
        assert!(!svg.contains("<b>"), "a raw label would be markup: {svg}");
        assert_eq!(
            svg.matches("<rect").count(),
            2,
            "the background and one bar"
        );
    }
}
