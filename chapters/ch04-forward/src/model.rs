//! The whole model: token ids in, one row of logits per position out.
//!
//! ```text
//! ids (seq) ──embed──▶ x (seq, dim) ──layer 0──▶ … ──layer 29──▶ x (seq, dim)
//!           ──final RMSNorm──▶ (seq, dim) ──LM head (embedding table, tied)──▶ logits (seq, vocab)
//! ```
//!
//! Row `t` of the logits scores every possible token as the one after position `t`, given
//! positions `0..=t`. Generation needs only the last row; checking against a reference
//! compares them all.

use std::path::Path;

use ch01_tensors::ops;
use ch01_tensors::safetensors::SafeTensors;
use ch03_attention::RopeTable;

use crate::attention::NoCache;
use crate::layer::{layer_forward, rmsnorm_rows};
use crate::linear::linear;
use crate::{Config, Error, Weights};

/// A loaded model: config, weights (mapped from the file), and the RoPE table.
pub struct Model {
    pub config: Config,
    pub weights: Weights,
    /// cos/sin of every (position, pair) angle, for `max_position_embeddings` positions.
    pub rope: RopeTable,
}

impl Model {
    // ANCHOR: load
    /// Loads `config.json` and `model.safetensors` from a Hugging Face model directory.
    pub fn load(dir: &Path) -> Result<Model, Error> {
        let config = Config::load(&dir.join("config.json"))?;
        let st = SafeTensors::open(dir.join("model.safetensors"))?;
        let weights = Weights::load(&st, &config)?;
        Model::new(config, weights)
    }
    // ANCHOR_END: load

    /// Assembles a model from parts (the shapes must already match, as `Weights::load` checks).
    pub fn new(config: Config, weights: Weights) -> Result<Model, Error> {
        let rope = RopeTable::new(
            config.head_dim,
            config.max_position_embeddings,
            config.rope_theta,
        )?;
        Ok(Model {
            config,
            weights,
            rope,
        })
    }

    // ANCHOR: embed
    /// Looks up the embedding row of each id: `(seq, dim)`.
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let (dim, vocab) = (self.config.hidden_size, self.config.vocab_size);
        if ids.is_empty() {
            return Err(Error::Input("the model needs at least one token".into()));
        }
        if ids.len() > self.rope.max_pos {
            return Err(Error::Input(format!(
                "{} tokens is longer than the model's {} positions",
                ids.len(),
                self.rope.max_pos
            )));
        }
        let mut x = Vec::with_capacity(ids.len() * dim); // (seq, dim)
        for &id in ids {
            let id = id as usize;
            if id >= vocab {
                return Err(Error::Input(format!(
                    "token id {id} is outside the vocabulary ({vocab})"
                )));
            }
            x.extend_from_slice(&self.weights.embed[id * dim..(id + 1) * dim]); // row `id`: (dim)
        }
        Ok(x)
    }
    // ANCHOR_END: embed

    // ANCHOR: forward
    /// Runs every layer on `ids` and returns the residual stream after the last one,
    /// `(seq, dim)`, before the final norm. `observe(l, x)` sees the stream after the
    /// embedding (`l = 0`) and after each layer (`l = 1..=num_layers`): the per-layer checker
    /// hooks in there.
    pub fn forward_hidden(
        &self,
        ids: &[u32],
        observe: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<Vec<f32>, Error> {
        let mut x = self.embed(ids)?; // (seq, dim)
        observe(0, &x);
        for (l, layer) in self.weights.layers.iter().enumerate() {
            // No cache: each layer sees the whole sequence, from position 0.
            layer_forward(
                layer,
                &self.config,
                &self.rope,
                &mut x,
                0,
                &mut NoCache::default(),
            );
            observe(l + 1, &x);
        }
        Ok(x)
    }

    /// Logits for every position: `(seq, vocab)`.
    pub fn logits(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let x = self.forward_hidden(ids, &mut |_, _| {})?;
        Ok(self.head(&x))
    }

    /// Logits for the last position only, `(vocab)`: all generation needs. (The layers
    /// still run on every position; only the LM head is spared.)
    pub fn next_token_logits(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let x = self.forward_hidden(ids, &mut |_, _| {})?;
        let dim = self.config.hidden_size;
        Ok(self.head(&x[x.len() - dim..]))
    }
    // ANCHOR_END: forward

    // ANCHOR: head
    /// Final RMSNorm, then the LM head: `(rows, dim)` → `(rows, vocab)`. With tied
    /// embeddings the head is the embedding table itself: the logit of token `t` is the
    /// dot product of the final hidden state with `t`'s own embedding row.
    pub fn head(&self, x: &[f32]) -> Vec<f32> {
        let (dim, vocab) = (self.config.hidden_size, self.config.vocab_size);
        let rows = x.len() / dim;
        let xn = rmsnorm_rows(x, &self.weights.final_norm, self.config.rms_norm_eps); // (rows, dim)
        let mut logits = vec![0.0f32; rows * vocab]; // (rows, vocab)
        linear(&mut logits, &xn, self.weights.lm_head(), rows, dim, vocab);
        logits
    }
    // ANCHOR_END: head
}

// ANCHOR: argmax
/// The index of the largest value (the first one, on a tie), as `>` orders them: the same
/// answer as a loop that keeps the first value greater than every one before it, so a NaN
/// is never chosen unless it comes first, and −0 ties with +0.
///
/// That loop compares each value with the best so far, one at a time; on Gemma-3's 262 144
/// logits it took about 130 µs, 2% of a decode step. Here sixteen running maxima, one a
/// lane, let the compiler compare sixteen values at once; their largest is found next, and
/// then where it first occurs ([`first_where`]).
pub fn argmax(x: &[f32]) -> usize {
    const LANES: usize = 16;
    let Some(&first) = x.first() else {
        return 0;
    };
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            if v > *m {
                *m = v;
            }
        }
    }
    let mut best = first; // a NaN first stays the best: nothing is greater
    for &v in lanes.iter().chain(rest) {
        if v > best {
            best = v;
        }
    }
    first_where(x, |v| v == best) // no value equals a NaN: index 0 then
}

/// The index of the first value of `x` for which `hit` holds (0 if none does): a block of
/// 64 values at a time is asked whether any holds, with no early exit inside it (so the
/// compiler can vectorise the question), and only the block that answers yes is searched.
pub fn first_where(x: &[f32], hit: impl Fn(f32) -> bool) -> usize {
    const BLOCK: usize = 64;
    for (b, block) in x.chunks(BLOCK).enumerate() {
        if block.iter().fold(false, |any, &v| any | hit(v)) {
            return b * BLOCK + block.iter().position(|&v| hit(v)).unwrap_or(0);
        }
    }
    0
}
// ANCHOR_END: argmax

/// The `k` highest values of `row` with their indices, highest first, equal values lower
/// index first (by `total_cmp`): what the `logits` commands of chapters 4, 8 and 13 print
/// at each position. The `k` are picked out first and only they are sorted, so a large
/// vocabulary is not sorted whole for a few of its logits.
pub fn highest(row: &[f32], k: usize) -> Vec<(usize, f32)> {
    let by = |i: &usize, j: &usize| row[*j].total_cmp(&row[*i]).then(i.cmp(j));
    let mut order: Vec<usize> = (0..row.len()).collect();
    let k = k.min(row.len());
    if k > 0 && k < row.len() {
        order.select_nth_unstable_by(k - 1, by); // the k highest first, in some order
    }
    order.truncate(k);
    order.sort_by(by);
    order.into_iter().map(|i| (i, row[i])).collect()
}

/// What the `logits` commands report after one position: its argmax and its [`highest`].
pub type AtPosition = (usize, Vec<(usize, f32)>);

/// The `logits` commands' JSON for `positions`, one `{"argmax", "top"}` each.
pub fn positions_json(positions: &[AtPosition]) -> serde_json::Value {
    positions
        .iter()
        .map(|(am, top)| serde_json::json!({"argmax": am, "top": top}))
        .collect()
}

/// The `logits` commands' text for `positions`, a line each, after the token `ids[t]`.
pub fn position_lines(ids: &[u32], positions: &[AtPosition]) -> Vec<String> {
    let at = ids.iter().zip(positions).enumerate();
    at.map(|(t, (id, (am, top)))| {
        let top: Vec<String> = top.iter().map(|(i, l)| format!("{i}:{l:.3}")).collect();
        format!(
            "position {t:3} (id {id:6}): argmax {am:6}   top {}",
            top.join(" ")
        )
    })
    .collect()
}

/// Softmax probabilities of one row of logits (a copy).
pub fn probabilities(logits: &[f32]) -> Vec<f32> {
    let mut p = logits.to_vec();
    ops::softmax_inplace(&mut p);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::tests::tiny_model;

    fn tiny(tag: &str) -> Model {
        let (cfg, path) = tiny_model(tag, true);
        let st = SafeTensors::open(&path).unwrap();
        let model = Model::new(cfg.clone(), Weights::load(&st, &cfg).unwrap()).unwrap();
        std::fs::remove_file(path).ok();
        model
    }

    #[test]
    fn causal_prefix_does_not_change() {
        // Position t's logits depend only on tokens 0..=t: appending tokens must leave
        // the earlier rows as they were. A mask bug breaks exactly this.
        let m = tiny("prefix");
        let long = m.logits(&[1, 5, 9, 3, 14, 7]).unwrap();
        let short = m.logits(&[1, 5, 9]).unwrap();
        let vocab = m.config.vocab_size;
        for (i, (a, b)) in short.iter().zip(&long[..3 * vocab]).enumerate() {
            assert!(
                (a - b).abs() < 1e-5,
                "logit {i} of the 3-token prefix changed when tokens were appended"
            );
        }
        let last = m.next_token_logits(&[1, 5, 9]).unwrap();
        assert_eq!(last, short[2 * vocab..].to_vec());
    }

    #[test]
    fn observer_sees_every_layer() {
        let m = tiny("observe");
        let mut seen = Vec::new();
        let out = m
            .forward_hidden(&[1, 2], &mut |l, x| seen.push((l, x.len())))
            .unwrap();
        assert_eq!(seen, vec![(0, 16), (1, 16), (2, 16)]);
        assert_eq!(out.len(), 16);
    }

    #[test]
    fn bad_ids_are_errors() {
        let m = tiny("bad");
        assert!(matches!(m.logits(&[]), Err(Error::Input(_))));
        let err = m.logits(&[1, 16]).unwrap_err().to_string();
        assert_eq!(err, "token id 16 is outside the vocabulary (16)");
        assert!(
            m.logits(&[0; 65])
                .unwrap_err()
                .to_string()
                .contains("longer than the model's 64 positions")
        );
    }

    #[test]
    fn highest_is_the_head_of_the_whole_sort() {
        // values from a few levels, so that many tie; the whole row sorted is the reference
        let row: Vec<f32> = (0..1000u32)
            .map(|i| ((i * 7919) % 13) as f32 - 6.0)
            .collect();
        let mut all: Vec<usize> = (0..row.len()).collect();
        all.sort_by(|&i, &j| row[j].total_cmp(&row[i]).then(i.cmp(&j)));
        for k in [0, 1, 5, 77, 999, 1000, 5000] {
            let want: Vec<(usize, f32)> = all.iter().take(k).map(|&i| (i, row[i])).collect();
            assert_eq!(highest(&row, k), want, "the {k} highest");
        }
        assert_eq!(highest(&[], 3), Vec::new(), "an empty row has none");
    }

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.5, 2.0, -1.0, 2.0]), 1);
        let p = probabilities(&[0.0, 0.0]);
        assert_eq!(p, vec![0.5, 0.5]);
    }

    /// The lanes' argmax against the one-value-at-a-time loop it replaced, on lengths
    /// around the lanes and blocks, ties, signed zeros, infinities and NaN anywhere.
    #[test]
    fn argmax_is_the_loop_it_replaced() {
        let one_at_a_time = |x: &[f32]| {
            let mut best = 0;
            for (i, &v) in x.iter().enumerate() {
                if v > x[best] {
                    best = i;
                }
            }
            best
        };
        let specials = [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-45];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..3000 {
            let n = (next() % 300) as usize;
            let levels = 1 + next() % 12;
            let mut x: Vec<f32> = (0..n).map(|_| (next() % levels) as f32 - 6.0).collect();
            if case % 2 == 0 && n > 0 {
                for _ in 0..1 + next() % 4 {
                    let at = (next() % n as u64) as usize;
                    x[at] = specials[(next() % specials.len() as u64) as usize];
                }
            }
            assert_eq!(
                argmax(&x),
                one_at_a_time(&x),
                "case {case}: argmax picks a different index in {x:?}"
            );
        }
        assert_eq!(argmax(&[]), 0, "no values: index 0");
        assert_eq!(
            argmax(&[f32::NAN, 1.0]),
            0,
            "nothing is greater than a first NaN"
        );
        assert_eq!(argmax(&[-0.0, 0.0]), 0, "-0 and +0 tie: the first");
    }
}
