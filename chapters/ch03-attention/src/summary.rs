//! Numbers that describe an attention pattern, head by head.
//!
//! Three shares summarise where a head's weight goes, each averaged over the queries
//! `1..seq` (query 0 can only look at itself, so it says nothing):
//! - **sink**: weight on token 0. Many heads park most of their weight on the first
//!   token when they have nothing better to do: the "attention sink".
//! - **self**: weight on the query's own token (the diagonal).
//! - **prev**: weight on the token just before (the sub-diagonal): a previous-token head.

// ANCHOR: stats
/// The summary of one head's `(seq, seq)` pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadStats {
    /// Mean weight on token 0, over queries `1..seq`.
    pub sink: f32,
    /// Mean weight on the query itself, over queries `1..seq`.
    pub self_share: f32,
    /// Mean weight on the previous token, over queries `1..seq`.
    pub prev: f32,
    /// For every query, the key it weights most.
    pub argmax: Vec<usize>,
}

impl HeadStats {
    /// Summarises `w` (`(seq, seq)`, rows summing to 1); `seq` must be at least 2.
    pub fn of(w: &[f32], seq: usize) -> HeadStats {
        assert!(
            seq >= 2 && w.len() == seq * seq,
            "need a (seq, seq) pattern with seq >= 2"
        );
        let row = |i: usize| &w[i * seq..(i + 1) * seq];
        let mean = |f: &dyn Fn(usize) -> f32| (1..seq).map(f).sum::<f32>() / (seq - 1) as f32;
        let argmax = (0..seq)
            .map(|i| {
                let r = row(i);
                (0..seq).fold(0, |best, j| if r[j] > r[best] { j } else { best })
            })
            .collect();
        HeadStats {
            sink: mean(&|i| row(i)[0]),
            self_share: mean(&|i| row(i)[i]),
            prev: mean(&|i| row(i)[i - 1]),
            argmax,
        }
    }

    /// A one-word reading of the shares: the behaviour holding more than half the weight.
    pub fn kind(&self) -> &'static str {
        if self.sink > 0.5 {
            "sink"
        } else if self.prev > 0.5 {
            "previous-token"
        } else if self.self_share > 0.5 {
            "self"
        } else {
            "mixed"
        }
    }
}
// ANCHOR_END: stats

/// The text report of a layer's pattern: the per-head shares, then, for every query,
/// the key each head weights most. `tokens` are the token pieces, `seq` of them.
pub fn report(stats: &[HeadStats], kv_of: impl Fn(usize) -> usize, tokens: &[String]) -> String {
    use std::fmt::Write;
    let seq = tokens.len();
    let mut s = String::new();
    let _ = writeln!(s, "head  kv   sink   self   prev  reading");
    for (h, st) in stats.iter().enumerate() {
        let _ = writeln!(
            s,
            "{h:>4} {:>3}  {:.3}  {:.3}  {:.3}  {}",
            kv_of(h),
            st.sink,
            st.self_share,
            st.prev,
            st.kind()
        );
    }
    let _ = writeln!(
        s,
        "(mean weight that queries 1..{} put on token 0 / on themselves / on the token before)\n",
        seq - 1
    );
    let width = 14;
    let _ = write!(
        s,
        "strongest key of each query, per head:\n  {:<w$}",
        "query",
        w = width + 3
    );
    for h in 0..stats.len() {
        let _ = write!(s, " {:>3}", format!("h{h}"));
    }
    s.push('\n');
    for (i, t) in tokens.iter().enumerate() {
        let label: String = format!("{t:?}").chars().take(width - 2).collect();
        let _ = write!(s, "  {i:>2} {label:<width$}");
        for st in stats {
            let _ = write!(s, " {:>3}", st.argmax[i]);
        }
        s.push('\n');
    }
    s
}
