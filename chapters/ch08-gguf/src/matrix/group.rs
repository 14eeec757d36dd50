//! Several products of the same input in one parallel pass, split by rows
//! ([`split_by_rows`], and [`pair_by_rows`] for two whose outputs meet), each task a block
//! of rows against every token.

use ch06_quantization::Kernels;
use rayon::prelude::*;

use super::few::{TokenEights, decode_task_count, task_rows};
use super::types::{ActKind, Acts, Matrix};
use ch07_simd_parallel::kernels::ManyTokens;
use ch07_simd_parallel::layout::packed;
use ch07_simd_parallel::team;

/// A task of a grouped product: a matrix, the first row of its block, and each token's
/// outputs for the block's rows.
type Task<'a> = (&'a Matrix, usize, Vec<&'a mut [f32]>);

/// A task of a paired product: the first row of its block, and each token's outputs for the
/// block's rows of the first matrix and of the second.
type PairTask<'a> = (usize, Vec<&'a mut [f32]>, Vec<&'a mut [f32]>);

// ANCHOR: split_by_rows
/// Several products of the same input `x` (`(seq, cols)`), `out = x · mᵀ` for each `(m,
/// out)` of `few`, with too few tokens a thread for each matrix's prefill kernel (a decode
/// step, or a batch of a few sequences; [`FEW`](super::FEW)), where each product is a few
/// hundred microseconds: the input is quantized once per kind of activation and every
/// matrix's rows go to the threads in *one* parallel pass: one fork-join instead of three,
/// and no thread idles while the smallest matrix finishes. A task is a block of
/// [`GROUP_ROWS`] rows against every token, so the block's weights come from memory once
/// however many tokens there are; a decode step's tasks are cut across the matrices instead
/// ([`decode_tasks`]). Each output is the same `dot` as in a prefill's product, so the
/// numbers are the same bits.
pub(super) fn split_by_rows(
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    few: Vec<(&Matrix, &mut [f32])>,
    x: &[f32],
    seq: usize,
) {
    let acts = SharedActs::new(k, kk, few.iter().map(|(m, _)| *m), x, seq);
    if seq == 1 {
        team::for_each_item(decode_tasks(few), |pieces| {
            for (m, r0, o) in pieces {
                m.block_of_rows(k, kk, acts.of(m, kk), r0, &mut [o]);
            }
        });
        return;
    }
    let mut tasks: Vec<Task> = Vec::new();
    for (m, out) in few {
        let n = task_rows(m, seq);
        for (c, o) in blocks_by_token(out, m.rows(), n, seq)
            .into_iter()
            .enumerate()
        {
            tasks.push((m, c * n, o));
        }
    }
    tasks
        .into_par_iter()
        .for_each(|(m, r0, mut o)| m.block_of_rows(k, kk, acts.of(m, kk), r0, &mut o));
}
// ANCHOR_END: split_by_rows

/// A decode step's tasks of a group: the matrices' rows end to end (Q's, then K's, then V's),
/// cut into [`decode_task_count`] tasks of about the same bytes, whole
/// eights of rows, a task's piece of each matrix it reaches. Cut matrix by matrix into two
/// tasks a thread, SmolLM2's Q, K and V were twelve tasks on two threads, eight of them K's
/// or V's 48 rows (17 kB); one task's pieces are read one after the other, as one long run.
fn decode_tasks<'a>(
    few: Vec<(&'a Matrix, &'a mut [f32])>,
) -> Vec<Vec<(&'a Matrix, usize, &'a mut [f32])>> {
    let bytes: usize = few.iter().map(|(m, _)| m.bytes()).sum();
    let n_tasks = decode_task_count(bytes);
    let share = bytes.div_ceil(n_tasks);
    let mut tasks = vec![Vec::new()];
    let mut filled = 0; // bytes in the last task
    for (m, mut out) in few {
        let row_bytes = m.bytes().div_ceil(m.rows().max(1)).max(1);
        let mut r0 = 0;
        while r0 < m.rows() {
            let want = share.saturating_sub(filled).div_ceil(row_bytes);
            let rows = want.div_ceil(packed::GROUP).max(1) * packed::GROUP;
            let rows = rows.min(m.rows() - r0);
            let (piece, rest) = std::mem::take(&mut out).split_at_mut(rows);
            out = rest;
            tasks
                .last_mut()
                .expect("one task at least")
                .push((m, r0, piece));
            (r0, filled) = (r0 + rows, filled + rows * row_bytes);
            if filled >= share {
                tasks.push(Vec::new());
                filled = 0;
            }
        }
    }
    tasks.retain(|t| !t.is_empty());
    tasks
}

/// One quantization of the input per kind of activation, shared by the matrices that take
/// it, and every eight of its tokens interleaved once if a matrix of the kind has an
/// eight-token kernel.
struct SharedActs(Vec<(ActKind, Acts, Option<TokenEights>)>);

impl SharedActs {
    fn new<'m>(
        k: &dyn Kernels,
        kk: &dyn ManyTokens,
        mats: impl Iterator<Item = &'m Matrix>,
        x: &[f32],
        seq: usize,
    ) -> SharedActs {
        let mut acts: Vec<(ActKind, Acts, Option<TokenEights>)> = Vec::new();
        for m in mats {
            let kind = m.act_kind().expect("by_rows checked");
            let i = match acts.iter().position(|(k, ..)| *k == kind) {
                Some(i) => i,
                None => {
                    acts.push((kind, m.quantize(k, x), None));
                    acts.len() - 1
                }
            };
            if acts[i].2.is_none() {
                acts[i].2 = m.eights(kk, &acts[i].1, seq);
            }
        }
        SharedActs(acts)
    }

    /// `m`'s activations, and their eights if `m` has an eight-token kernel.
    fn of(&self, m: &Matrix, kk: &dyn ManyTokens) -> (&Acts, Option<&TokenEights>) {
        let kind = m.act_kind().expect("by_rows checked");
        let (_, a, e) = self
            .0
            .iter()
            .find(|(k, ..)| *k == kind)
            .expect("quantized above");
        (a, e.as_ref().filter(|_| m.eight_kernel(kk).is_some()))
    }
}

/// `out` (`(seq, rows)`) cut into blocks of `n` rows: block `c` is every token's rows
/// `c·n..`, one slice a token.
fn blocks_by_token(out: &mut [f32], rows: usize, n: usize, seq: usize) -> Vec<Vec<&mut [f32]>> {
    assert_eq!(
        out.len(),
        seq * rows,
        "a product's output is not (seq, rows)"
    );
    let mut blocks: Vec<Vec<&mut [f32]>> = Vec::new();
    for (t, out_t) in out.chunks_exact_mut(rows).enumerate() {
        for (c, o) in out_t.chunks_mut(n).enumerate() {
            if t == 0 {
                blocks.push(Vec::with_capacity(seq));
            }
            blocks[c].push(o);
        }
    }
    blocks
}

/// Whether two products of the same input can run as one pass that finishes each block of
/// rows of both together ([`pair_by_rows`]): both split by rows, the same shape, the same
/// activations and the same blocks of rows.
pub(super) fn can_pair(kk: &dyn ManyTokens, [a, b]: [&Matrix; 2], seq: usize) -> bool {
    a.by_rows(kk, seq)
        && b.by_rows(kk, seq)
        && (b.rows(), b.cols()) == (a.rows(), a.cols())
        && a.act_kind() == b.act_kind()
        && task_rows(a, seq) == task_rows(b, seq)
}

// ANCHOR: pair_by_rows
/// Two products that [`can_pair`], gate and up, and `then(first, second)` on each token's
/// row of them (`outs[0]` takes `then`'s result): each task computes one block of rows of
/// both matrices and finishes that block itself, on whichever thread ran it, while its
/// outputs are in cache.
pub(super) fn pair_by_rows(
    k: &dyn Kernels,
    kk: &dyn ManyTokens,
    [a, b]: [&Matrix; 2],
    [first, second]: [&mut [f32]; 2],
    (x, seq): (&[f32], usize),
    then: &(dyn Fn(&mut [f32], &[f32]) + Sync),
) {
    let rows = a.rows();
    let acts = SharedActs::new(k, kk, [a, b].into_iter(), x, seq);
    let n = task_rows(a, seq);
    // task c: rows c·n.. of both matrices, each token's slice of each output
    let tasks: Vec<PairTask> = blocks_by_token(first, rows, n, seq)
        .into_iter()
        .zip(blocks_by_token(second, rows, n, seq))
        .enumerate()
        .map(|(c, (f, s))| (c * n, f, s))
        .collect();
    let task = |(r0, mut f, mut s): PairTask| {
        a.block_of_rows(k, kk, acts.of(a, kk), r0, &mut f);
        b.block_of_rows(k, kk, acts.of(b, kk), r0, &mut s);
        for (f, s) in f.iter_mut().zip(&s) {
            then(f, s);
        }
    };
    if seq == 1 {
        team::for_each_item(tasks, task); // a decode step: on the team, as its other regions
    } else {
        tasks.into_par_iter().for_each(task);
    }
}
// ANCHOR_END: pair_by_rows
