//! Where batching stops paying: aggregate decode speed against the batch size, with the two
//! ceilings of chapter 7's roofline — the memory's (B sequences share one read of the
//! weights: `B × bandwidth / bytes per token`) and the arithmetic's (what a long prefill
//! reaches, this engine's own pp512).

/// One batch size's measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub sequences: usize,
    pub ours_tok_s: f64,
    /// llama-batched-bench's S_TG, when it was run.
    pub llamacpp_tok_s: Option<f64>,
}

/// The memory ceiling of decode at `sequences` sequences: each step reads the weights once.
pub fn memory_ceiling(sequences: usize, bandwidth_gb_s: f64, bytes_per_token: usize) -> f64 {
    sequences as f64 * bandwidth_gb_s * 1e9 / bytes_per_token as f64
}

/// The curve as SVG: x is the batch size (1…16, log scale), y is aggregate decode tok/s.
pub fn svg(
    title: &str,
    points: &[Point],
    bandwidth_gb_s: f64,
    bytes_per_token: usize,
    compute_tok_s: f64,
) -> String {
    let (w, h, left, top, right, bottom) = (760.0, 380.0, 70.0, 50.0, 280.0, 50.0);
    let max_n = points.iter().map(|p| p.sequences).max().unwrap_or(1).max(2) as f64;
    let highest = points
        .iter()
        .flat_map(|p| [p.ours_tok_s, p.llamacpp_tok_s.unwrap_or(0.0)])
        .fold(
            compute_tok_s.max(memory_ceiling(1, bandwidth_gb_s, bytes_per_token)),
            f64::max,
        )
        * 1.15;
    let x = |n: f64| left + (w - left - right) * n.log2() / max_n.log2();
    let y = |v: f64| top + (h - top - bottom) * (1.0 - (v / highest).min(1.0));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"22\" font-size=\"14\">{}</text>\n",
        ch05_kv_cache::plot::esc(title)
    );
    // axes and ticks
    let (x0, x1, y0, y1) = (x(1.0), x(max_n), y(0.0), y(highest));
    s += &format!(
        "<path d=\"M{x0:.1} {y1:.1} L{x0:.1} {y0:.1} L{x1:.1} {y0:.1}\" stroke=\"#333\" fill=\"none\"/>\n"
    );
    for p in points {
        let px = x(p.sequences as f64);
        s += &format!(
            "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            y0 + 16.0,
            p.sequences
        );
    }
    s += &format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">sequences decoded together</text>\n",
        (x0 + x1) / 2.0,
        h - 12.0
    );
    let step = (highest / 5.0 / 50.0).ceil() * 50.0;
    let mut v = 0.0;
    while v <= highest {
        s += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>\n",
            x0 - 6.0,
            y(v) + 4.0
        );
        v += step;
    }
    s += &format!(
        "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">decode tok/s, all sequences</text>\n",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
    // ceilings
    let mem: Vec<String> = (0..=40)
        .map(|i| {
            let n = (max_n.log2() * i as f64 / 40.0).exp2();
            format!(
                "{:.1} {:.1}",
                x(n),
                y(memory_ceiling(1, bandwidth_gb_s, bytes_per_token) * n)
            )
        })
        .collect();
    s += &format!(
        "<path d=\"M{}\" stroke=\"#999\" stroke-dasharray=\"4 3\" fill=\"none\"/>\n",
        mem.join(" L")
    );
    s += &format!(
        "<path d=\"M{x0:.1} {0:.1} L{x1:.1} {0:.1}\" stroke=\"#e15759\" stroke-dasharray=\"4 3\"/>\n",
        y(compute_tok_s)
    );
    let mut legend = vec![
        (
            "#999",
            format!(
                "memory: B × {bandwidth_gb_s:.1} GB/s ÷ {:.1} MB",
                bytes_per_token as f64 / 1e6
            ),
        ),
        (
            "#e15759",
            format!("arithmetic: pp512, {compute_tok_s:.0} tok/s"),
        ),
    ];
    // the measured lines
    let mut line = |vals: Vec<(f64, f64)>, colour: &str| {
        let d: Vec<String> = vals
            .iter()
            .map(|(n, v)| format!("{:.1} {:.1}", x(*n), y(*v)))
            .collect();
        s += &format!(
            "<path d=\"M{}\" stroke=\"{colour}\" stroke-width=\"2\" fill=\"none\"/>\n",
            d.join(" L")
        );
        for (n, v) in vals {
            s += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>\n",
                x(n),
                y(v)
            );
        }
    };
    line(
        points
            .iter()
            .map(|p| (p.sequences as f64, p.ours_tok_s))
            .collect(),
        "#4e79a7",
    );
    legend.push(("#4e79a7", "this engine".into()));
    let theirs: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.sequences as f64, p.llamacpp_tok_s?)))
        .collect();
    if !theirs.is_empty() {
        line(theirs, "#f28e2b");
        legend.push(("#f28e2b", "llama-batched-bench".into()));
    }
    for (i, (colour, text)) in legend.iter().enumerate() {
        let ly = top + 16.0 * i as f64;
        s += &format!(
            "<rect x=\"{:.0}\" y=\"{:.0}\" width=\"12\" height=\"3\" fill=\"{colour}\"/><text x=\"{:.0}\" y=\"{:.0}\">{}</text>\n",
            x1 + 10.0,
            ly,
            x1 + 26.0,
            ly + 4.0,
            ch05_kv_cache::plot::esc(text)
        );
    }
    s += "</svg>\n";
    s
}
