//! f16 keys and values, read as f32: before a row attends, the positions it sees are
//! converted into a small contiguous store of its own, and chapter 8's `attend` reads that.
//!
//! ```text
//! k, v    (n_kv_heads, positions, head_dim)    positions first..=pos of one layer
//! ```
//!
//! Each value is converted exactly (every f16 is an f32), so a row's attention is the same
//! arithmetic as over f32 blocks holding the f16-rounded values; the batch is as invariant
//! as with f32. The cost is the conversion: a read of the row's keys and values, once per
//! row and layer, which attention does anyway.

use ch05_kv_cache::{Error, KvLayout, KvStore};
use ch06_quantization::f16::f16_to_f32_fast;

use crate::seq::{Data, KvBlocks};

/// The keys and values one row sees, in f32.
#[derive(Debug, Default)]
pub struct Gathered {
    layout: Option<KvLayout>,
    first: usize,
    n: usize,
    /// `(n_kv_heads, n, head_dim)`
    k: Vec<f32>,
    /// `(n_kv_heads, n, head_dim)`
    v: Vec<f32>,
}

impl Gathered {
    /// Fills in positions `positions` of `layer` of the sequence whose block table is `table`.
    pub fn fill(
        &mut self,
        kv: &KvBlocks,
        table: &[usize],
        layer: usize,
        positions: std::ops::Range<usize>,
    ) {
        let l = kv.layout();
        let (d, bs, n) = (l.head_dim, kv.block_size(), positions.len());
        (self.layout, self.first, self.n) = (Some(l), positions.start, n);
        self.k.resize(l.n_kv_heads * n * d, 0.0);
        self.v.resize(l.n_kv_heads * n * d, 0.0);
        let Data::F16 { k, v } = &kv.data else {
            unreachable!("only f16 blocks are gathered")
        };
        for h in 0..l.n_kv_heads {
            for (i, pos) in positions.clone().enumerate() {
                let at = kv.offset(table[pos / bs], layer, h, pos % bs);
                let to = (h * n + i) * d;
                for j in 0..d {
                    self.k[to + j] = f16_to_f32_fast(k[at + j]);
                    self.v[to + j] = f16_to_f32_fast(v[at + j]);
                }
            }
        }
    }

    fn at(&self, kv_head: usize, pos: usize) -> usize {
        let d = self.layout.expect("filled").head_dim;
        (kv_head * self.n + pos - self.first) * d
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
