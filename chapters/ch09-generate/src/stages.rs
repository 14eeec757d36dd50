//! What each stage of the sampling chain does to one real next-token distribution.
//!
//! `ch09-generate stages -p TEXT` runs the prompt, takes the logits of the next token, and
//! asks the sampler for its candidates after every stage ([`Sampler::survivors_traced`]):
//! the same functions that choose every generated token, stopped at each step to be looked
//! at. Each stage's probabilities are the softmax of its survivors, so they sum to 1 again
//! after every filter.

use crate::sampling::{Candidate, Sampler, Stage, probabilities, top_k};

/// One stage of the chain, seen through a fixed set of tokens (the rows).
#[derive(Clone, Debug, PartialEq)]
pub struct StageView {
    /// `softmax`, `top-k 40`, `top-p 0.9`, `min-p 0.05`, `temperature 0.8`.
    pub label: String,
    /// How many candidates are left after this stage.
    pub survivors: usize,
    /// The probability of each row's token after this stage; 0 if it was filtered out.
    pub probs: Vec<f64>,
    /// The probability of the survivors that are not rows.
    pub rest: f64,
}

/// The chain's effect on one distribution: the rows are the most likely tokens of the
/// model's own distribution (after penalties, before any filter), highest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Stages {
    pub rows: Vec<u32>,
    pub stages: Vec<StageView>,
}

fn label(stage: Stage, sampler: &Sampler) -> String {
    let c = &sampler.config;
    let penalties_on =
        c.repeat_penalty != 1.0 || c.frequency_penalty != 0.0 || c.presence_penalty != 0.0;
    let off = |is_off: bool, on: String| {
        if is_off {
            format!("{} off", stage.name())
        } else {
            on
        }
    };
    match stage {
        Stage::Penalties if penalties_on => "penalties".into(),
        Stage::Penalties => "softmax".into(),
        Stage::TopK => off(c.top_k == 0, format!("top-k {}", c.top_k)),
        Stage::TopP => off(c.top_p >= 1.0, format!("top-p {}", c.top_p)),
        Stage::MinP => off(c.min_p <= 0.0, format!("min-p {}", c.min_p)),
        Stage::Temperature if c.temperature <= 0.0 => "greedy (temp 0)".into(),
        Stage::Temperature => format!("temp {}", c.temperature),
    }
}

// ANCHOR: stages
/// Runs the sampler's chain on `logits` and keeps, after each stage, the probabilities of
/// the `rows` most likely tokens and how many candidates survive.
pub fn stages(sampler: &Sampler, logits: &[f32], history: &[u32], rows: usize) -> Stages {
    let mut seen: Vec<(Stage, Vec<Candidate>)> = Vec::new();
    sampler.survivors_traced(logits, history, &mut |stage, c| {
        seen.push((stage, c.to_vec()))
    });
    // At temperature 0 the sampler takes the first survivor without a draw.
    if sampler.config.temperature <= 0.0
        && let Some((_, last)) = seen.last_mut()
    {
        last.truncate(1);
    }
    let mut top = seen.first().map(|(_, c)| c.clone()).unwrap_or_default();
    top_k(&mut top, rows); // the same order the chain sorts by
    top.truncate(rows);
    let rows: Vec<u32> = top.iter().map(|c| c.id).collect();
    let stages = seen
        .iter()
        .map(|(stage, c)| {
            let p = probabilities(c);
            let mut probs = vec![0.0; rows.len()];
            let mut rest = 0.0;
            for (cand, q) in c.iter().zip(&p) {
                match rows.iter().position(|&id| id == cand.id) {
                    Some(r) => probs[r] = *q,
                    None => rest += q,
                }
            }
            StageView {
                label: label(*stage, sampler),
                survivors: c.len(),
                probs,
                rest,
            }
        })
        .collect();
    Stages { rows, stages }
}
// ANCHOR_END: stages

impl Stages {
    /// A table: one row per token (`text` gives its printable form), one column per stage,
    /// probabilities in percent, `-` where the token was filtered out.
    pub fn table(&self, text: &dyn Fn(u32) -> String) -> String {
        use std::fmt::Write;
        let names: Vec<String> = self.rows.iter().map(|&id| text(id)).collect();
        let w = names
            .iter()
            .map(|n| n.chars().count())
            .chain([9])
            .max()
            .unwrap_or(9)
            + 2;
        let cols: Vec<usize> = self
            .stages
            .iter()
            .map(|s| s.label.chars().count().max(7) + 2)
            .collect();
        let mut out = String::new();
        let pad = |s: &str, width: usize| format!("{s:>width$}");
        let _ = write!(out, "{:<w$}", "token");
        for (s, &cw) in self.stages.iter().zip(&cols) {
            out.push_str(&pad(&s.label, cw));
        }
        out.push('\n');
        let cell = |p: f64| {
            if p > 0.0 {
                format!("{:.1}%", p * 100.0)
            } else {
                "-".into()
            }
        };
        for (r, name) in names.iter().enumerate() {
            let _ = write!(out, "{name:<w$}");
            for (s, &cw) in self.stages.iter().zip(&cols) {
                out.push_str(&pad(&cell(s.probs[r]), cw));
            }
            out.push('\n');
        }
        let _ = write!(out, "{:<w$}", "the rest");
        for (s, &cw) in self.stages.iter().zip(&cols) {
            out.push_str(&pad(&cell(s.rest), cw));
        }
        out.push('\n');
        let _ = write!(out, "{:<w$}", "survivors");
        for (s, &cw) in self.stages.iter().zip(&cols) {
            out.push_str(&pad(&s.survivors.to_string(), cw));
        }
        out.push('\n');
        out
    }

    /// The stages as small multiples: one bar panel per stage, the rows' tokens down the
    /// side and the rest of the survivors in grey (see [`crate::plot::bar_panels`]).
    pub fn svg(&self, title: &str, subtitle: &str, text: &dyn Fn(u32) -> String) -> String {
        let mut labels: Vec<String> = self.rows.iter().map(|&id| text(id)).collect();
        labels.push("the rest".into());
        let panels: Vec<crate::plot::Panel> = self
            .stages
            .iter()
            .map(|s| crate::plot::Panel {
                title: s.label.clone(),
                note: format!("{} left", s.survivors),
                values: s.probs.iter().copied().chain([s.rest]).collect(),
            })
            .collect();
        crate::plot::bar_panels(title, subtitle, &labels, &panels, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SamplerConfig;

    #[test]
    fn each_stage_renormalises_and_keeps_fewer() {
        // probabilities 0.4, 0.3, 0.2, 0.1 before any filter
        let logits = [3f32.ln(), 4f32.ln(), 1f32.ln(), 2f32.ln()];
        let s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 3,
            top_p: 0.6,
            min_p: 0.0,
            ..Default::default()
        });
        let st = stages(&s, &logits, &[], 2);
        assert_eq!(
            st.rows,
            [1, 0],
            "rows are the two most likely, highest first"
        );
        let survivors: Vec<usize> = st.stages.iter().map(|s| s.survivors).collect();
        assert_eq!(survivors, [4, 3, 2, 2, 2]);
        let first = &st.stages[0];
        assert!((first.probs[0] - 0.4).abs() < 1e-6 && (first.rest - 0.3).abs() < 1e-6);
        // after top-k 3: 0.4, 0.3, 0.2 renormalised over 0.9
        assert!((st.stages[1].probs[0] - 0.4 / 0.9).abs() < 1e-6);
        // after top-p 0.6: 0.4 and 0.3, renormalised over 0.7
        assert!((st.stages[2].probs[1] - 0.3 / 0.7).abs() < 1e-6);
        assert_eq!(st.stages[2].rest, 0.0);
        assert_eq!(st.stages[3].label, "min-p off");
    }

    #[test]
    fn temperature_zero_leaves_the_greedy_token_alone() {
        let s = Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        });
        let st = stages(&s, &[0.0, 2.0, 1.0], &[], 3);
        let last = st.stages.last().unwrap();
        assert_eq!(last.survivors, 1);
        assert_eq!(last.probs, [1.0, 0.0, 0.0]);
        assert_eq!(last.label, "greedy (temp 0)");
    }
}
