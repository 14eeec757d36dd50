//! The memory roofline as a bar chart: how many GB/s of weights each kernel (and the whole
//! decode step) pulls through, against the machine's measured read bandwidth.

// ANCHOR: roofline
/// An SVG of horizontal bars, one per `(label, GB/s)`, with a vertical line at `ceiling`
/// GB/s. Non-finite or negative values are drawn as 0; the scale is fixed by the largest
/// value, so nothing here loops on the data.
pub fn svg(title: &str, bars: &[(String, f64)], ceiling: f64) -> String {
    let clean = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    let top = bars
        .iter()
        .map(|b| clean(b.1))
        .fold(clean(ceiling), f64::max)
        .max(1e-9)
        * 1.1;
    let (left, width, row) = (210.0f64, 420.0f64, 22.0f64);
    let height = 60.0 + row * bars.len() as f64 + 30.0;
    let x = |v: f64| left + width * clean(v) / top;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\">{title}</text>\n",
        left + width + 100.0 // room for the bandwidth label when the line is at the right end
    );
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = 40.0 + row * i as f64;
        s += &format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\n\
             <rect x=\"{left}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#4a78b0\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{:.1}</text>\n",
            left - 6.0,
            y + 14.0,
            x(*v) - left,
            row - 6.0,
            x(*v) + 4.0,
            y + 14.0,
            clean(*v)
        );
    }
    let (cx, bottom) = (x(ceiling), 40.0 + row * bars.len() as f64);
    s += &format!(
        "<line x1=\"{cx:.1}\" y1=\"32\" x2=\"{cx:.1}\" y2=\"{bottom:.1}\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n\
         <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#c0392b\">read bandwidth {:.1} GB/s</text>\n\
         <text x=\"{left}\" y=\"{:.1}\" fill=\"#555\">GB/s of weights streamed</text>\n</svg>\n",
        bottom + 16.0,
        clean(ceiling),
        bottom + 34.0
    );
    s
}
// ANCHOR_END: roofline

#[cfg(test)]
mod tests {
    #[test]
    fn bad_numbers_draw_as_zero_and_do_not_hang() {
        let s = super::svg(
            "t",
            &[("a".into(), f64::NAN), ("b".into(), 0.0), ("c".into(), 5.0)],
            0.0,
        );
        assert!(s.contains(">0.0<") && s.contains(">5.0<") && s.ends_with("</svg>\n"));
    }
}
