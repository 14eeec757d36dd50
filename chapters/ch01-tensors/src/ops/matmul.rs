//! Dot products, matrix-vector and matrix-matrix products on row-major slices.
//!
//! Everything here takes plain `&[f32]` slices plus dimensions, so the hot loops of later
//! chapters can call them on any buffer (a tensor's `as_slice()`, a scratch `Vec`, a
//! mapped weight). A matrix `(rows, cols)` is stored row-major: element `[r][c]` is at
//! `r * cols + c`, so walking along a row is walking through memory, and walking down
//! a column jumps `cols` floats at a time.
//!
//! Three matmuls, from obvious to fast, all computing `out = a · b`:
//! - [`matmul_naive`]: the textbook i-j-k loop; its inner loop walks down a column of `b`.
//! - [`matmul_ikj`]: the same arithmetic with the two inner loops swapped, so the inner
//!   loop walks along rows only.
//! - [`matmul_blocked`]: i-k-j order inside tiles small enough to stay in the L1 cache.
//!
//! The tests check that all three agree; the benchmark `benches/ch01_matmul.rs` measures them.

// ANCHOR: dot
/// `Σ a[i]·b[i]`.
///
/// One accumulator, added to in order: the obvious loop. (The compiler will not split it
/// into SIMD lanes, because that would change the order of the float additions and so the
/// rounding; a later chapter does that split by hand.)
///
/// # Panics
/// If the lengths differ.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot of slices with different lengths");
    let mut sum = 0.0;
    for (x, y) in a.iter().zip(b) {
        sum += x * y;
    }
    sum
}
// ANCHOR_END: dot

// ANCHOR: matvec
/// `out = w · x`: `w` is `(rows, cols)`, `x` is `(cols)`, `out` is `(rows)`, with
/// `rows = out.len()` and `cols = x.len()`. Each output is the dot product of one row of
/// `w` (contiguous in memory) with `x`: the access pattern caches like best.
///
/// # Panics
/// If `w.len() != out.len() * x.len()`.
pub fn matvec(out: &mut [f32], w: &[f32], x: &[f32]) {
    let cols = x.len();
    assert_eq!(w.len(), out.len() * cols, "matvec: w must be (out.len(), x.len())");
    for (r, o) in out.iter_mut().enumerate() {
        *o = dot(&w[r * cols..(r + 1) * cols], x); // row r of w: (cols,)
    }
}
// ANCHOR_END: matvec

fn check_dims(out: &[f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert_eq!(a.len(), m * k, "matmul: a must be (m, k) = ({m}, {k})");
    assert_eq!(b.len(), k * n, "matmul: b must be (k, n) = ({k}, {n})");
    assert_eq!(out.len(), m * n, "matmul: out must be (m, n) = ({m}, {n})");
}

// ANCHOR: matmul_naive
/// `out (m, n) = a (m, k) · b (k, n)`, the textbook way: for each output element, a dot
/// product of row `i` of `a` with column `j` of `b`.
///
/// Why it is slow: the inner loop reads `b[p*n + j]` for p = 0, 1, 2, ... — one float
/// from each row of `b`, `n` floats (4n bytes) apart. Every read touches a different
/// 64-byte cache line and uses 4 bytes of it; by the time the next column `j+1` wants the
/// neighbouring float of that line, a large `b` has pushed it out of the cache. And the
/// inner loop is a single running sum, which the compiler may not vectorize.
///
/// # Panics
/// If a slice length does not match its dimensions.
pub fn matmul_naive(out: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    check_dims(out, a, b, m, k, n);
    for i in 0..m {
        for j in 0..n {
            let mut sum = 0.0;
            for p in 0..k {
                sum += a[i * k + p] * b[p * n + j]; // b walks down column j: stride n
            }
            out[i * n + j] = sum;
        }
    }
}
// ANCHOR_END: matmul_naive

// ANCHOR: matmul_ikj
/// The same product with the loops in i-k-j order: for each row `i` of the output and
/// each `p`, add `a[i][p] × (row p of b)` to the output row.
///
/// Every inner-loop access is now sequential: row `p` of `b` and row `i` of `out`, both
/// contiguous. Each cache line fetched is used completely, and the inner loop is an
/// independent multiply-add per element (no running sum), which the compiler turns into
/// SIMD instructions. It still streams all of `b` (k×n floats) once per output row, so
/// once `b` outgrows the cache, every row pays for fetching it again.
pub fn matmul_ikj(out: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    check_dims(out, a, b, m, k, n);
    out.fill(0.0);
    for i in 0..m {
        let out_row = &mut out[i * n..(i + 1) * n]; // (n,)
        for p in 0..k {
            let a_ip = a[i * k + p];
            let b_row = &b[p * n..(p + 1) * n]; // (n,)
            for (o, &b_pj) in out_row.iter_mut().zip(b_row) {
                *o += a_ip * b_pj;
            }
        }
    }
}
// ANCHOR_END: matmul_ikj

// ANCHOR: matmul_blocked
/// Rows of `out` handled per tile.
pub const BLOCK_M: usize = 64;
/// Rows of `b` (and columns of `a`) per tile.
pub const BLOCK_K: usize = 128;
/// Columns of `b` and `out` per tile. A `b` tile is BLOCK_K × BLOCK_N floats = 32 KiB,
/// which fits in a 48 KiB L1 data cache beside the output row it updates.
pub const BLOCK_N: usize = 64;

/// `out (m, n) = a (m, k) · b (k, n)`, cache-blocked.
///
/// Cut the three loops into tiles: a `BLOCK_K × BLOCK_N` tile of `b` is loaded into the
/// L1 cache once and then used by `BLOCK_M` rows of `a` before moving on, instead of
/// being re-fetched from further away for every row. Inside a tile the loops run in
/// i-k-j order (see [`matmul_ikj`]), so the inner loop is a contiguous, vectorizable
/// multiply-add over a row segment of `b` and `out`. Edge tiles are simply shorter,
/// so any m, k, n works.
pub fn matmul_blocked(out: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    check_dims(out, a, b, m, k, n);
    out.fill(0.0);
    for i0 in (0..m).step_by(BLOCK_M) {
        let i1 = (i0 + BLOCK_M).min(m);
        for p0 in (0..k).step_by(BLOCK_K) {
            let p1 = (p0 + BLOCK_K).min(k);
            for j0 in (0..n).step_by(BLOCK_N) {
                let j1 = (j0 + BLOCK_N).min(n);
                // One tile: out[i0..i1, j0..j1] += a[i0..i1, p0..p1] · b[p0..p1, j0..j1]
                for i in i0..i1 {
                    let out_seg = &mut out[i * n + j0..i * n + j1]; // (j1 - j0,)
                    for p in p0..p1 {
                        let a_ip = a[i * k + p];
                        let b_seg = &b[p * n + j0..p * n + j1]; // (j1 - j0,)
                        for (o, &b_pj) in out_seg.iter_mut().zip(b_seg) {
                            *o += a_ip * b_pj;
                        }
                    }
                }
            }
        }
    }
}
// ANCHOR_END: matmul_blocked

// ANCHOR: matmul_transb
/// `out (m, n) = a (m, k) · wᵀ` where `w` is `(n, k)`: the layout of a PyTorch
/// `nn.Linear` weight (one row per output feature). Output `[i][j]` is the dot product
/// of row `i` of `a` with row `j` of `w` — both contiguous, so no transpose is needed.
///
/// # Panics
/// If a slice length does not match its dimensions.
pub fn matmul_transb(out: &mut [f32], a: &[f32], w: &[f32], m: usize, k: usize, n: usize) {
    assert_eq!(a.len(), m * k, "matmul_transb: a must be (m, k) = ({m}, {k})");
    assert_eq!(w.len(), n * k, "matmul_transb: w must be (n, k) = ({n}, {k})");
    assert_eq!(out.len(), m * n, "matmul_transb: out must be (m, n) = ({m}, {n})");
    for i in 0..m {
        let a_row = &a[i * k..(i + 1) * k]; // (k,)
        matvec(&mut out[i * n..(i + 1) * n], w, a_row);
    }
}
// ANCHOR_END: matmul_transb
