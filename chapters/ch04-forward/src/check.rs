//! The per-layer checker: our numbers next to a reference's, OK or NOT OK, layer by layer.
//!
//! In the spirit of llm.c's `test_gpt2.c`: when a forward pass is wrong, the final logits
//! only say *that* it is wrong. Comparing the residual stream after every layer with an
//! exact reference says *where*: a bug in RoPE or in the residual wiring shows up
//! after layer 0, the first one, and a bad final norm only in the logits.
//!
//! Two references (see [`crate::reference`]):
//! - the residual stream after each layer, from a float64 numpy forward pass;
//! - the top-20 logits at every position of four prompts, from llama.cpp in f32.

use crate::generate::first_divergence;
use crate::model::argmax;
use crate::reference::{self, GreedyFixture, HiddenFixture, LogitsFixture, LogitsPrompt};
use crate::{Error, Model};

// ANCHOR: tolerances
/// Allowed error of the residual stream, relative to the size of the row it sits in:
/// `max |ours − exact| / rms(exact row)`. f32 carries about 7 significant digits and
/// thirty layers of sums lose some of them; a real bug is off by 10% or more.
pub const HIDDEN_TOLERANCE: f64 = 1e-4;

/// Allowed `|ours − llama.cpp|` for a logit (logits here range over about ±30).
pub const LOGIT_TOLERANCE: f64 = 1e-3;
// ANCHOR_END: tolerances

/// How many greedy tokens must agree with the f32 oracle.
pub const GREEDY_CHECKED: usize = 32;

/// The fixtures [`run`] compares with.
pub struct References {
    pub hidden: HiddenFixture,
    pub f32_logits: LogitsFixture,
    pub f32_greedy: Option<GreedyFixture>,
    pub q4_logits: Option<LogitsFixture>,
}

impl References {
    /// Loads them from `fixtures/reference/`; the hidden states and f32 logits are required.
    pub fn load() -> Result<References, Error> {
        Ok(References {
            hidden: reference::load_named("hidden-smollm2-f64.json")?,
            f32_logits: reference::load_named("logits-smollm2-f32.json")?,
            f32_greedy: reference::load_named("greedy-smollm2-f32.json").ok(),
            q4_logits: reference::load_named("logits-smollm2-q4_1.json").ok(),
        })
    }
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub label: String,
    pub max_diff: f64,
    pub tolerance: f64,
    /// Extra facts for the reader (argmax agreement, worst position...).
    pub note: String,
}

impl Line {
    pub fn ok(&self) -> bool {
        self.max_diff <= self.tolerance // false for NaN too
    }

    /// `  after layer  3   max |Δ|   1.23e-6  OK`
    pub fn render(&self) -> String {
        let verdict = if self.ok() { "OK" } else { "NOT OK" };
        let (label, diff, note) = (&self.label, sci(self.max_diff), &self.note);
        format!("  {label:<26} max |Δ| {diff:>9}  {verdict:<6}  {note}")
            .trim_end()
            .to_string()
    }
}

// ANCHOR: hidden
/// Compares the residual stream after the embedding and after every layer with the
/// float64 reference: the first `dims` coordinates of each position, and each row's norm.
pub fn check_hidden(model: &Model, fx: &HiddenFixture) -> Result<Vec<Line>, Error> {
    let dim = model.config.hidden_size;
    if fx.layers.len() != model.config.num_layers + 1 || fx.dims > dim {
        return Err(Error::Fixture(format!(
            "the hidden-state fixture (fixtures/reference/hidden-smollm2-f64.json) is for SmolLM2-135M: \
             the embedding and {} layers, {} dims compared; this model has the embedding and {} layers \
             of {dim} dims, so it is not the model the fixture was made from",
            fx.layers.len().saturating_sub(1),
            fx.dims,
            model.config.num_layers
        )));
    }
    let seq = fx.ids.len();
    if let Some(bad) = fx.layers.iter().find(|layer| {
        layer.norm.len() != seq
            || layer.first.len() != seq
            || layer.first.iter().any(|row| row.len() != fx.dims)
    }) {
        return Err(Error::Fixture(format!(
            "the hidden-state fixture's layer {} does not have {seq} rows of {} numbers and {seq} norms",
            bad.layer, fx.dims
        )));
    }
    let mut lines = Vec::new();
    model.forward_hidden(&fx.ids, &mut |l, x| {
        let exact = &fx.layers[l];
        let mut worst: f64 = 0.0;
        for (t, row) in x.chunks_exact(dim).enumerate() {
            let rms = exact.norm[t] / (dim as f64).sqrt(); // the row's typical coordinate size
            let norm = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>().sqrt();
            worst = worst.max((norm - exact.norm[t]).abs() / exact.norm[t]);
            for (&ours, &want) in row.iter().zip(&exact.first[t]) {
                worst = worst.max((ours as f64 - want).abs() / rms);
            }
        }
        // Entry l of the fixture is the stream after l layers: after model.layers.{l - 1}.
        let label = match l {
            0 => "embedding".to_string(),
            _ => format!("after layer {:2}", l - 1),
        };
        lines.push(Line {
            label,
            max_diff: worst,
            tolerance: HIDDEN_TOLERANCE,
            note: String::new(),
        });
    })?;
    Ok(lines)
}
// ANCHOR_END: hidden

/// How our logits compare with one prompt of a reference fixture.
#[derive(Clone, Debug, PartialEq)]
pub struct LogitsComparison {
    pub positions: usize,
    /// Positions where our argmax is the reference's.
    pub argmax_agree: usize,
    /// Positions where it is not.
    pub argmax_differ: Vec<usize>,
    /// Max `|ours − reference|` over every position and every id of the reference's top-k.
    pub max_diff: f64,
    /// Where that maximum is: (position, token id).
    pub worst: (usize, u32),
}

// ANCHOR: compare
/// Compares our logits `(seq, vocab)` for `p.ids` with the reference's top-k at every
/// position: for each id in the reference's top-k, our logit for that same id.
pub fn compare_logits(ours: &[f32], vocab: usize, p: &LogitsPrompt) -> LogitsComparison {
    let mut c = LogitsComparison {
        positions: p.positions.len(),
        argmax_agree: 0,
        argmax_differ: Vec::new(),
        max_diff: 0.0,
        worst: (0, 0),
    };
    for (t, reference) in p.positions.iter().enumerate() {
        let row = &ours[t * vocab..(t + 1) * vocab]; // (vocab)
        if argmax(row) as u32 == reference.argmax {
            c.argmax_agree += 1;
        } else {
            c.argmax_differ.push(t);
        }
        for &(id, logit) in &reference.top {
            let d = (row[id as usize] as f64 - logit as f64).abs();
            if d > c.max_diff || d.is_nan() {
                (c.max_diff, c.worst) = (d, (t, id));
            }
        }
    }
    c
}
// ANCHOR_END: compare

/// Runs the model on every prompt of a logits fixture and compares.
pub fn check_logits<'f>(
    model: &Model,
    fx: &'f LogitsFixture,
) -> Result<Vec<(LogitsComparison, &'f LogitsPrompt)>, Error> {
    let vocab = model.config.vocab_size;
    let mut out = Vec::new();
    for p in &fx.prompts {
        if p.positions.len() != p.ids.len()
            || p.positions
                .iter()
                .any(|r| r.top.iter().any(|&(id, _)| id as usize >= vocab))
        {
            return Err(Error::Fixture(format!(
                "prompt {:?}: positions do not match ids, or ids out of range",
                p.prompt
            )));
        }
        let ours = model.logits(&p.ids)?; // (seq, vocab)
        out.push((compare_logits(&ours, vocab, p), p));
    }
    Ok(out)
}

/// `1.23e-5`: three significant digits, for columns of differences.
fn sci(x: f64) -> String {
    format!("{x:.2e}")
}

/// How many tokens two runs agree on before they first differ.
pub fn same_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

/// A prompt shortened for one line of output.
pub fn short(prompt: &str) -> String {
    let flat: String = prompt
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    let cut: String = flat.chars().take(22).collect();
    if cut.len() < flat.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// Lines for a logits comparison, with the given tolerance (`f64::INFINITY` for a
/// comparison that is only reported, never failed).
pub fn logits_lines(results: &[(LogitsComparison, &LogitsPrompt)], tolerance: f64) -> Vec<Line> {
    results
        .iter()
        .map(|(c, p)| Line {
            label: short(&p.prompt),
            max_diff: c.max_diff,
            tolerance,
            note: format!(
                "argmax {}/{} positions, worst at position {} id {}",
                c.argmax_agree, c.positions, c.worst.0, c.worst.1
            ),
        })
        .collect()
}

// ANCHOR: report
/// The whole check as lines of text: per-layer hidden states, logits against llama.cpp f32
/// (pass/fail) and Q4_1 (for information), greedy continuations against llama.cpp f32.
/// The `bool` says whether everything passed.
pub fn run(model: &Model, refs: &References) -> Result<(Vec<String>, bool), Error> {
    let mut r = Vec::new(); // the report, line by line
    let mut all_ok = true;
    let h = &refs.hidden;
    let (prompt, n, dims) = (short(&h.prompt), h.ids.len(), h.dims);
    r.push(format!(
        "residual stream vs float64 numpy, prompt {prompt} ({n} tokens)"
    ));
    r.push(format!(
        "  (|Δ| relative to the row's RMS, first {dims} dims and the norms)"
    ));
    let lines = check_hidden(model, h)?;
    r.extend(lines.iter().map(Line::render));
    if let Some(bad) = lines.iter().find(|line| !line.ok()) {
        all_ok = false;
        r.push(format!(
            "  first divergence: {}. Look at that layer first.",
            bad.label
        ));
    }

    let top_k = refs.f32_logits.top_k;
    r.push(format!(
        "\nlogits vs llama.cpp f32 (top-{top_k} ids at every position)"
    ));
    let results = check_logits(model, &refs.f32_logits)?;
    for (line, (c, _)) in logits_lines(&results, LOGIT_TOLERANCE).iter().zip(&results) {
        all_ok &= line.ok() && c.argmax_differ.is_empty(); // the argmax must agree everywhere
        r.push(line.render());
    }
    if let Some(q4) = &refs.q4_logits {
        r.push(
            "\nlogits vs llama.cpp Q4_1 (not an oracle: it rounds activations to 8 bits)".into(),
        );
        for line in logits_lines(&check_logits(model, q4)?, f64::INFINITY) {
            r.push(line.render().replacen(" OK ", "    ", 1)); // no verdict to give
        }
    }

    if let Some(greedy) = &refs.f32_greedy {
        r.push(format!(
            "\ngreedy continuations vs llama.cpp f32 (the first {GREEDY_CHECKED} must agree)"
        ));
        for p in &greedy.prompts {
            let verdict = match first_divergence(model, &p.prompt_ids, &p.ids)? {
                None => format!("all {} tokens identical  OK", p.ids.len()),
                Some(i) if i >= GREEDY_CHECKED => format!("first divergence at token {i}  OK"),
                Some(i) => {
                    all_ok = false;
                    format!("first divergence at token {i}  NOT OK")
                }
            };
            r.push(format!("  {:<26} {verdict}", short(&p.prompt)));
        }
    }
    r.push(format!(
        "\n{}",
        if all_ok {
            "all OK"
        } else {
            "NOT OK: see above"
        }
    ));
    Ok((r, all_ok))
}
// ANCHOR_END: report

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Weights;
    use crate::reference::HiddenLayer;
    use crate::weights::tests::tiny_model;
    use ch01_tensors::safetensors::SafeTensors;

    /// A fixture with a missing row must be refused, not indexed out of bounds.
    #[test]
    fn short_hidden_fixture_is_an_error() {
        let (cfg, path) = tiny_model("check", true);
        let st = SafeTensors::open(&path).unwrap();
        let model = Model::new(cfg.clone(), Weights::load(&st, &cfg).unwrap()).unwrap();
        std::fs::remove_file(path).ok();
        let layer = |l: usize, rows: usize| HiddenLayer {
            layer: l,
            first: vec![vec![0.0; 2]; rows],
            norm: vec![1.0; rows],
        };
        let fx = |rows_of_last: usize| HiddenFixture {
            prompt: "x".into(),
            ids: vec![1, 2, 3],
            dims: 2,
            layers: (0..=cfg.num_layers)
                .map(|l| layer(l, if l == cfg.num_layers { rows_of_last } else { 3 }))
                .collect(),
            last_top: Vec::new(),
        };
        assert!(check_hidden(&model, &fx(3)).is_ok());
        let err = check_hidden(&model, &fx(2)).unwrap_err().to_string();
        assert!(err.contains("does not have 3 rows"), "{err}");
    }
}
