//! A tiny SVG line chart, enough to draw the benchmark's curves for the book without a
//! plotting library: both axes logarithmic, one polyline and a dot per point, a legend.

use std::fmt::Write;

/// One line on the chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// A CSS colour.
    pub color: &'static str,
    /// `(x, y)` points, both > 0.
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;

/// Maps `v` in `[lo, hi]` (log scale) to `[a, b]`.
fn scale(v: f64, lo: f64, hi: f64, a: f64, b: f64) -> f64 {
    a + (v.log10() - lo.log10()) / (hi.log10() - lo.log10()) * (b - a)
}

/// Escapes text for an SVG text node or attribute.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number as a tick label: `0.1`, `1`, `10`, `1000`.
fn tick_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

// ANCHOR: chart
/// A log-log line chart as a standalone SVG document. `x_ticks` are labelled as given;
/// the y axis gets a line at every power of ten in range.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    x_ticks: &[f64],
    series: &[Series],
) -> String {
    // A log scale shows only finite positive numbers; anything else (a rate of 0 from a
    // hand-edited report, a subnormal, NaN) is left out rather than trusted: the grid below
    // is one line per power of ten between the extremes, which a 0 would make endless.
    let drawable = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && x >= f64::MIN_POSITIVE && y >= f64::MIN_POSITIVE
    };
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(drawable)
            .chain(
                std::iter::once((1.0, 1.0))
                    .filter(|_| !series.iter().flat_map(|s| s.points.iter()).any(drawable)),
            )
    };
    let (x_lo, x_hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), (x, _)| {
        (lo.min(x), hi.max(x))
    });
    let (y_min, y_max) = all().fold((f64::MAX, f64::MIN), |(lo, hi), (_, y)| {
        (lo.min(y), hi.max(y))
    });
    let (x_lo, x_hi) = (x_lo / 1.25, x_hi * 1.25);
    let y_lo = 10f64.powf(y_min.log10().floor());
    let y_hi = 10f64.powf(y_max.log10().ceil());
    let px = |x: f64| scale(x, x_lo, x_hi, LEFT, W - RIGHT);
    let py = |y: f64| scale(y, y_lo, y_hi, H - BOTTOM, TOP);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    // Grid and y labels: one line per decade (at most ~620: the range of an f64).
    for e in (y_lo.log10().round() as i32)..=(y_hi.log10().round() as i32) {
        let y = 10f64.powi(e);
        let yy = py(y);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/>"##,
            W - RIGHT
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            yy + 4.0,
            tick_label(y)
        );
    }
    for &x in x_ticks {
        let xx = px(x);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{}" stroke="#eee"/>"##,
            H - BOTTOM
        );
        let _ = writeln!(
            s,
            r#"<text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            H - BOTTOM + 18.0,
            tick_label(x)
        );
    }
    // Axes and their labels.
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT} {TOP} V{} H{}" fill="none" stroke="black"/>"#,
        H - BOTTOM,
        W - RIGHT
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 12.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    );
    // The series, and a legend entry for each (on a white box).
    let box_h = 20.0 * series.len() as f64 + 8.0;
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="220" height="{box_h}" fill="white" stroke="#ccc"/>"##,
        LEFT + 6.0,
        H - BOTTOM - box_h - 2.0
    );
    for (i, ser) in series.iter().enumerate() {
        let pts: Vec<String> = ser
            .points
            .iter()
            .filter(|p| drawable(p))
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2.5"/>"#,
            pts.join(" "),
            ser.color
        );
        for &(x, y) in ser.points.iter().filter(|p| drawable(p)) {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{}"/>"#,
                px(x),
                py(y),
                ser.color
            );
        }
        // Legend in the lower left corner, where falling curves leave room.
        let ly = H - BOTTOM - 14.0 - 20.0 * (series.len() - 1 - i) as f64;
        let lx = LEFT + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="2.5"/>"#,
            lx + 24.0,
            ser.color
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 30.0,
            ly + 4.0,
            esc(&ser.name)
        );
    }
    s.push_str("</svg>\n");
    s
}
// ANCHOR_END: chart

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_point_and_a_legend() {
        let series = [
            Series {
                name: "cached".into(),
                color: "#1f77b4",
                points: vec![(16.0, 30.0), (512.0, 25.0)],
            },
            Series {
                name: "no <cache>".into(),
                color: "#d62728",
                points: vec![(16.0, 5.0), (512.0, 0.2)],
            },
        ];
        let svg = line_chart("t", "positions", "tokens/s", &[16.0, 512.0], &series);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("no &lt;cache&gt;"), "legend text is escaped");
        // y from 0.1 to 100: four decades of grid lines.
        for label in [">0.1<", ">1<", ">10<", ">100<"] {
            assert!(svg.contains(label), "missing y tick {label}");
        }
    }

    /// A rate of 0, a subnormal or NaN (from a hand-edited `--from` report) once made the
    /// decade loop run until memory ran out; such points are now left out, in bounded time.
    #[test]
    fn zero_subnormal_and_nan_rates_are_left_out() {
        for bad in [0.0, 1e-310, f64::NAN, f64::INFINITY, -3.0] {
            let series = [Series {
                name: "x".into(),
                color: "#000",
                points: vec![(16.0, bad), (64.0, 20.0)],
            }];
            let svg = line_chart("t", "positions", "tokens/s", &[16.0, 64.0], &series);
            assert_eq!(
                svg.matches("<circle").count(),
                1,
                "only the drawable point, for {bad}"
            );
        }
        let all_bad = [Series {
            name: "x".into(),
            color: "#000",
            points: vec![(16.0, 0.0)],
        }];
        assert!(line_chart("t", "x", "y", &[16.0], &all_bad).ends_with("</svg>\n"));
    }
}
