//! Where a tensor's numbers actually live.
//!
//! A [`Tensor`](crate::Tensor) is a *view*: shape, strides and an offset that say how to
//! find element `[i, j, ...]` in a flat buffer of `f32`s. The buffer itself is a
//! `Storage`, shared behind an `Arc` by every view made from it. There are two kinds:
//! floats we own on the heap, and floats that sit in a memory-mapped file and are
//! never copied at all.

use memmap2::Mmap;
use std::sync::Arc;

// ANCHOR: storage
/// A flat buffer of `f32`s that one or more tensors view.
pub(crate) enum Storage {
    /// Heap memory: made by `from_vec`, `zeros`, `contiguous`, or converted from f16/bf16.
    Owned(Vec<f32>),
    /// `len` little-endian f32s that start `byte_offset` bytes into a memory-mapped file.
    /// The `Arc<Mmap>` keeps the mapping alive as long as any tensor still looks at it.
    Mapped {
        mmap: Arc<Mmap>,
        byte_offset: usize,
        len: usize,
    },
}
// ANCHOR_END: storage

impl Storage {
    // ANCHOR: mapped
    /// A mapped storage, or `None` when the bytes cannot be reinterpreted as `f32`s in
    /// place: they are not 4-byte aligned in memory, they run past the end of the map,
    /// or this machine is big-endian (the file is little-endian). The caller then copies.
    pub(crate) fn mapped(mmap: Arc<Mmap>, byte_offset: usize, len: usize) -> Option<Storage> {
        let end = len.checked_mul(4)?.checked_add(byte_offset)?;
        if end > mmap.len() || cfg!(target_endian = "big") {
            return None;
        }
        let ptr = mmap[byte_offset..].as_ptr();
        if !ptr.cast::<f32>().is_aligned() {
            return None;
        }
        Some(Storage::Mapped {
            mmap,
            byte_offset,
            len,
        })
    }

    /// The floats, wherever they live.
    pub(crate) fn as_slice(&self) -> &[f32] {
        match self {
            Storage::Owned(v) => v,
            Storage::Mapped {
                mmap,
                byte_offset,
                len,
            } => {
                let bytes = &mmap[*byte_offset..*byte_offset + *len * 4];
                // SAFETY: `Storage::mapped` checked that these `len * 4` bytes are inside
                // the map, start 4-byte aligned, and that the machine is little-endian like
                // the file. Every bit pattern is a valid f32. The slice borrows `self`, which
                // holds the `Arc<Mmap>`, so the mapping outlives the slice.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), *len) }
            }
        }
    }
    // ANCHOR_END: mapped

    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Storage::Mapped { .. })
    }
}
