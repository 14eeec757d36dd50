//! How weights sit inside their blocks: the picture behind block quantization.
//!
//! [`block_histogram`] divides every weight by the largest magnitude in its block of 32, so
//! each value lands in [−1, 1], and counts them in bins. A block format spends its levels
//! evenly over that interval; the histogram shows how unevenly the weights use it.

// ANCHOR: histogram
/// Counts of `x / max|block|` for every weight of `w` (whole blocks of 32), in `bins` equal
/// bins over [−1, 1]. Blocks that are all zero are skipped.
pub fn block_histogram(w: &[f32], bins: usize) -> Vec<u64> {
    let mut counts = vec![0u64; bins.max(1)];
    let last = counts.len() - 1;
    for block in w.chunks_exact(32) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 || !amax.is_finite() {
            continue;
        }
        for &v in block {
            let u = (v / amax + 1.0) / 2.0; // 0..=1
            counts[((u * (last + 1) as f32) as usize).min(last)] += 1;
        }
    }
    counts
}
// ANCHOR_END: histogram

/// The most distinct values found in any whole block of 32 of `w` (values compared by their
/// bits, so `-0.0` and `0.0` count as two). Weights dequantized from a 4-bit format have at
/// most 16.
pub fn most_distinct_per_block(w: &[f32]) -> usize {
    let mut most = 0;
    for block in w.chunks_exact(32) {
        let mut bits: Vec<u32> = block.iter().map(|v| v.to_bits()).collect();
        bits.sort_unstable();
        bits.dedup();
        most = most.max(bits.len());
    }
    most
}

/// The histogram as an SVG bar chart (`counts` over [−1, 1]), with the sixteen levels a
/// Q4_0 block could use marked below the axis.
pub fn svg(counts: &[u64], title: &str) -> String {
    let (w, h, left, bottom, top) = (640.0f64, 300.0f64, 50.0f64, 40.0f64, 30.0f64);
    let max = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let bar = (w - left - 10.0) / counts.len().max(1) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"18\">{title}</text>\n"
    );
    for (i, &c) in counts.iter().enumerate() {
        let bh = (h - top - bottom) * c as f64 / max;
        s += &format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4a78b0\"/>\n",
            left + bar * i as f64,
            h - bottom - bh,
            (bar - 0.5).max(0.5)
        );
    }
    let axis = h - bottom;
    s += &format!(
        "<line x1=\"{left}\" y1=\"{axis}\" x2=\"{}\" y2=\"{axis}\" stroke=\"black\"/>\n",
        w - 10.0
    );
    for level in -8..=7 {
        // Q4_0's levels d·(q − 8) for a block whose largest magnitude sits at level −8
        let x = left + (w - left - 10.0) * ((f64::from(level) / 8.0) + 1.0) / 2.0;
        s += &format!(
            "<line x1=\"{x:.1}\" y1=\"{axis}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#c0392b\"/>\n",
            axis + 8.0
        );
    }
    for (label, u) in [("−1", 0.0), ("0", 0.5), ("+1", 1.0)] {
        let x = left + (w - left - 10.0) * u;
        s += &format!(
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\n",
            axis + 22.0
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#c0392b\">red ticks: the 16 levels of a Q4_0 block</text>\n</svg>\n",
        w - 10.0,
        h - 4.0
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_maximum_lands_in_the_last_bin() {
        let mut w = vec![0.25f32; 32];
        w[3] = -1.0;
        w[4] = 1.0;
        let c = block_histogram(&w, 8);
        assert_eq!(c.iter().sum::<u64>(), 32);
        assert_eq!((c[0], c[7]), (1, 1), "-1 in the first bin, +1 in the last");
        assert_eq!(c[5], 30, "0.25 maps to (0.25 + 1) / 2 = 0.625: bin 5 of 8");
        assert_eq!(
            block_histogram(&[0.0; 32], 4),
            vec![0; 4],
            "an all-zero block is skipped"
        );
    }

    #[test]
    fn distinct_values_are_counted_per_block() {
        let mut w: Vec<f32> = (0..32).map(|i| (i % 4) as f32).collect();
        w.extend((0..32).map(|i| i as f32 * 0.5));
        assert_eq!(
            most_distinct_per_block(&w),
            32,
            "the second block has 32 values"
        );
        assert_eq!(
            most_distinct_per_block(&w[..32]),
            4,
            "the first block has 4"
        );
        assert_eq!(
            most_distinct_per_block(&w[..31]),
            0,
            "no whole block, nothing counted"
        );
    }
}
