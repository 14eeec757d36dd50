//! The kernels later chapters' hot loops call, on plain row-major `f32` slices.
//!
//! Shapes are given in comments as `(rows, cols)`; a slice argument `w (rows, cols)` means
//! `w.len() == rows * cols` with element `[r][c]` at `w[r * cols + c]`. Length mismatches
//! are programming errors and panic, like slice indexing does.

mod elementwise;
mod matmul;
mod norm;

pub use elementwise::{add_inplace, mul_inplace, silu, silu_inplace};
pub use matmul::{
    PANEL_K, TILE_COLS, TILE_ROWS, dot, matmul_blocked, matmul_ikj, matmul_naive, matmul_transb,
    matvec,
};
pub use norm::{rmsnorm, softmax_inplace, softmax_rows_with, softmax_with};
