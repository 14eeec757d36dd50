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
//! - [`matmul_blocked`]: a packed panel of `b` that stays in the L1 cache, and a small tile
//!   of `out` that stays in registers.
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
/// `w` (contiguous in memory) with `x`: the order that caches serve best.
///
/// # Panics
/// If `w.len() != out.len() * x.len()`.
pub fn matvec(out: &mut [f32], w: &[f32], x: &[f32]) {
    let cols = x.len();
    assert_eq!(
        w.len(),
        out.len() * cols,
        "matvec: w must be (out.len(), x.len())"
    );
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
/// Why it is slow, twice over:
/// - The inner loop is one running sum. Each addition waits for the previous one to
///   finish (a float add has a latency of several cycles), and the compiler may not split
///   the sum into independent SIMD lanes, because that would change the rounding. So even
///   with every operand in the L1 cache it completes one multiply-add per add latency.
/// - It reads `b[p*n + j]` for p = 0, 1, 2, ...: one float from each row of `b`, `4n`
///   bytes apart. Each read touches a different 64-byte cache line and uses 4 bytes of
///   it. The neighbouring floats are wanted again for columns `j+1, j+2, ...`, but once a
///   column's `k` lines outgrow the L1 cache they have to be fetched again from further
///   away — and when `4n` is a power of two, those lines all compete for the same few
///   sets of the (set-associative) cache, so that happens much sooner.
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

// ANCHOR: tiles
/// Rows of `out` computed together by the micro-kernel.
pub const TILE_ROWS: usize = 4;
/// Columns of `out` computed together by the micro-kernel.
pub const TILE_COLS: usize = 16;
/// Rows of `b` per packed panel. A panel is PANEL_K × TILE_COLS floats = 16 KiB: it fits
/// in a 32–48 KiB L1 data cache with room for the rows of `a` streaming past it.
pub const PANEL_K: usize = 256;
// ANCHOR_END: tiles

// ANCHOR: matmul_blocked
/// `out (m, n) = a (m, k) · b (k, n)`, blocked for the cache and for registers.
///
/// Two levels of reuse, each aimed at one level of the memory hierarchy:
/// 1. **Cache**: copy a `PANEL_K × TILE_COLS` block of `b` (a "panel") into a small
///    contiguous buffer, then run every row of `a` past it. The panel is loaded from
///    memory once and then read `m / TILE_ROWS` times from L1. Packing also turns a
///    column block of `b`, whose rows are `4n` bytes apart, into one dense run of bytes.
/// 2. **Registers**: `micro_kernel` computes a `TILE_ROWS × TILE_COLS` tile of `out` in
///    local accumulators that never leave the CPU registers during the `k` loop. Each
///    value of `b` it loads is used for 4 rows, each value of `a` for 16 columns — where
///    the i-k-j loop loads and stores an element of `out` for every multiply-add.
///
/// Edges: the panel is zero-padded past column `n`, and tile rows past row `m` read a
/// row of zeros, so the micro-kernel always sees a full tile; only the valid part of the
/// tile is added to `out`. Any m, k, n works.
pub fn matmul_blocked(out: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    check_dims(out, a, b, m, k, n);
    out.fill(0.0);
    let zeros = [0.0f32; PANEL_K]; // stands in for rows of a below the last one
    let mut panel = vec![0.0f32; PANEL_K * TILE_COLS]; // (PANEL_K, TILE_COLS)
    for p0 in (0..k).step_by(PANEL_K) {
        let kc = (k - p0).min(PANEL_K); // rows of b in this panel
        for j0 in (0..n).step_by(TILE_COLS) {
            let cols = (n - j0).min(TILE_COLS);
            // Pack b[p0..p0+kc, j0..j0+cols] into the panel, zero-padding to TILE_COLS.
            for (p, dst) in panel.chunks_exact_mut(TILE_COLS).take(kc).enumerate() {
                let src = &b[(p0 + p) * n + j0..][..cols]; // (cols,)
                dst[..cols].copy_from_slice(src);
                dst[cols..].fill(0.0);
            }
            for i0 in (0..m).step_by(TILE_ROWS) {
                let rows = (m - i0).min(TILE_ROWS);
                // a[i0 + r, p0..p0+kc] for each tile row: (kc,) each
                let a_rows: [&[f32]; TILE_ROWS] = std::array::from_fn(|r| {
                    if r < rows {
                        &a[(i0 + r) * k + p0..][..kc]
                    } else {
                        &zeros[..kc]
                    }
                });
                let tile = micro_kernel(&a_rows, &panel[..kc * TILE_COLS]); // (TILE_ROWS, TILE_COLS)
                for (r, tile_row) in tile.iter().enumerate().take(rows) {
                    let out_seg = &mut out[(i0 + r) * n + j0..][..cols]; // (cols,)
                    for (o, t) in out_seg.iter_mut().zip(tile_row) {
                        *o += t;
                    }
                }
            }
        }
    }
}
// ANCHOR_END: matmul_blocked

// ANCHOR: micro_kernel
/// One register tile: `Σ_p a_rows[r][p] · panel[p][c]` for r < TILE_ROWS, c < TILE_COLS.
/// `panel` is `(kc, TILE_COLS)` and each `a_rows[r]` is `(kc,)`. The fixed-size arrays let
/// the compiler keep `acc` in SIMD registers and unroll the `r` and `c` loops.
fn micro_kernel(a_rows: &[&[f32]; TILE_ROWS], panel: &[f32]) -> [[f32; TILE_COLS]; TILE_ROWS] {
    let mut acc = [[0.0f32; TILE_COLS]; TILE_ROWS]; // (TILE_ROWS, TILE_COLS)
    for (p, b_row) in panel.chunks_exact(TILE_COLS).enumerate() {
        for (acc_row, a_row) in acc.iter_mut().zip(a_rows) {
            let a_rp = a_row[p];
            for (acc_rc, &b_pc) in acc_row.iter_mut().zip(b_row) {
                *acc_rc += a_rp * b_pc;
            }
        }
    }
    acc
}
// ANCHOR_END: micro_kernel

// ANCHOR: matmul_transb
/// `out (m, n) = a (m, k) · wᵀ` where `w` is `(n, k)`: the layout of a PyTorch
/// `nn.Linear` weight (one row per output feature). Output `[i][j]` is the dot product
/// of row `i` of `a` with row `j` of `w` — both contiguous, so no transpose is needed.
///
/// # Panics
/// If a slice length does not match its dimensions.
pub fn matmul_transb(out: &mut [f32], a: &[f32], w: &[f32], m: usize, k: usize, n: usize) {
    assert_eq!(
        a.len(),
        m * k,
        "matmul_transb: a must be (m, k) = ({m}, {k})"
    );
    assert_eq!(
        w.len(),
        n * k,
        "matmul_transb: w must be (n, k) = ({n}, {k})"
    );
    assert_eq!(
        out.len(),
        m * n,
        "matmul_transb: out must be (m, n) = ({m}, {n})"
    );
    for i in 0..m {
        let a_row = &a[i * k..(i + 1) * k]; // (k,)
        matvec(&mut out[i * n..(i + 1) * n], w, a_row);
    }
}
// ANCHOR_END: matmul_transb
