//! f16 keys and values, read as f32: before a row (or a part of its heads) attends, the
//! positions it sees are converted into a small contiguous store of its own, and chapter
//! 8's `attend_heads` reads that.
//!
//! ```text
//! k, v    (kv heads, positions, head_dim)    the task's KV heads, positions first..=pos
//! ```
//!
//! Each value is converted exactly (every f16 is an f32), so a row's attention is the same
//! arithmetic as over f32 blocks holding the f16-rounded values; the batch is as invariant
//! as with f32. The cost is the conversion: a read of the row's keys and values, once per
//! row and layer, which attention does anyway.

use ch05_kv_cache::{Error, KvLayout, KvStore};
use ch06_quantization::Kernels;
use ch08_gguf::engine::{LayerAttention, attend_heads};

use crate::seq::{Data, KvBlocks};

/// The keys and values one row sees, in f32.
#[derive(Debug, Default)]
pub struct Gathered {
    layout: Option<KvLayout>,
    /// the first KV head held
    kv0: usize,
    first: usize,
    n: usize,
    /// `(KV heads held, n, head_dim)`
    k: Vec<f32>,
    /// `(KV heads held, n, head_dim)`
    v: Vec<f32>,
}

impl Gathered {
    /// Fills in positions `positions` of `layer`, KV heads `kv_heads`, of the sequence whose
    /// block table is `table`, converting each block's run of positions in one
    /// `f16_to_f32s` call.
    pub fn fill(
        &mut self,
        kernels: &dyn Kernels,
        kv: &KvBlocks,
        table: &[usize],
        layer: usize,
        kv_heads: std::ops::Range<usize>,
        positions: std::ops::Range<usize>,
    ) {
        let l = kv.layout();
        let (d, bs, n) = (l.head_dim, kv.block_size(), positions.len());
        (self.layout, self.kv0) = (Some(l), kv_heads.start);
        (self.first, self.n) = (positions.start, n);
        self.k.resize(kv_heads.len() * n * d, 0.0);
        self.v.resize(kv_heads.len() * n * d, 0.0);
        let Data::F16 { k, v } = &kv.data else {
            unreachable!("only f16 blocks are gathered")
        };
        for h in kv_heads {
            let mut pos = positions.start;
            while pos < positions.end {
                // the positions from `pos` to the end of its block (or of the range)
                let end = ((pos / bs + 1) * bs).min(positions.end);
                let at = kv.offset(table[pos / bs], layer, h, pos % bs);
                let to = self.at(h, pos);
                let src = at..at + (end - pos) * d;
                let dst = to..to + (end - pos) * d;
                kernels.f16_to_f32s(&k[src.clone()], &mut self.k[dst.clone()]);
                kernels.f16_to_f32s(&v[src], &mut self.v[dst]);
                pos = end;
            }
        }
    }

    fn at(&self, kv_head: usize, pos: usize) -> usize {
        let d = self.layout.expect("filled").head_dim;
        ((kv_head - self.kv0) * self.n + pos - self.first) * d
    }
}

/// Attention of the query row `q` for the query heads `hs` over f16 blocks, into `out`
/// (`hs.len()` heads): the keys and values of the KV heads under `hs` converted into
/// `gathered` once, then chapter 8's `attend_heads` for the heads of each KV head. `at`:
/// the layer, its heads, window and scores; `(table, pos)`: the sequence's block table and
/// the row's position.
#[allow(clippy::too_many_arguments)]
pub fn attend_f16(
    at: &LayerAttention,
    out: &mut [f32],
    q: &[f32],
    gathered: &mut Gathered,
    kv: &KvBlocks,
    (table, pos): (&[usize], usize),
    hs: std::ops::Range<usize>,
    scores: &mut Vec<f32>,
) {
    let (d, group) = (at.heads.head_dim, at.heads.group_size());
    let first = at.window.map_or(0, |w| (pos + 1).saturating_sub(w));
    let kvs = hs.start / group..hs.end.div_ceil(group);
    gathered.fill(at.kernels, kv, table, at.layer, kvs.clone(), first..pos + 1);
    for kvh in kvs {
        let part = hs.start.max(kvh * group)..hs.end.min((kvh + 1) * group);
        let o = &mut out[(part.start - hs.start) * d..(part.end - hs.start) * d];
        attend_heads(at, o, q, &*gathered, part, pos, scores);
    }
}

impl KvStore for Gathered {
    fn layout(&self) -> KvLayout {
        self.layout.expect("filled before use")
    }

    fn max_positions(&self) -> usize {
        self.first + self.n
    }

    fn reserve(&mut self, len: usize) -> Result<(), Error> {
        if len > self.first + self.n {
            return Err(Error::ContextFull {
                limit: self.first + self.n,
                needed: len,
            });
        }
        Ok(())
    }

    fn rewind(&mut self, _from: usize, _len: usize) -> Result<(), Error> {
        Ok(())
    }

    /// Panics: a gathered copy is read-only (a caller bug).
    fn write(&mut self, _layer: usize, _pos: usize, _k: &[f32], _v: &[f32]) {
        panic!("a gathered copy is read-only");
    }

    /// `layer` is the one it was filled from.
    fn key(&self, _layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.at(kv_head, pos);
        &self.k[at..at + self.layout().head_dim]
    }

    fn value(&self, _layer: usize, kv_head: usize, pos: usize) -> &[f32] {
        let at = self.at(kv_head, pos);
        &self.v[at..at + self.layout().head_dim]
    }

    fn reserved_bytes(&self) -> usize {
        (self.k.len() + self.v.len()) * size_of::<f32>()
    }

    fn runs(
        &self,
        _layer: usize,
        kv_head: usize,
        positions: std::ops::Range<usize>,
    ) -> Option<(&[f32], &[f32])> {
        let at = self.at(kv_head, positions.start);
        let span = at..at + positions.len() * self.layout().head_dim;
        Some((&self.k[span.clone()], &self.v[span]))
    }
}
