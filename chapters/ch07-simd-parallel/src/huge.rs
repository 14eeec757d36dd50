//! Memory on 2 MiB pages, where the kernel gives them: for the bytes a program streams again
//! and again, [`crate::bench::read_bandwidth`]'s buffer here and chapter 8's packed weights.
//!
//! A decode step streams every weight once. On 4 KiB pages that is one translation (TLB)
//! entry per 4 KiB: SmolLM2's 96 MB are 24 000 pages, far more than a core's TLB holds, so
//! every page a product enters costs a walk of the page tables. On 2 MiB pages the same bytes
//! are 48 entries. Linux gives an anonymous mapping huge pages when it asks for them with
//! `madvise(MADV_HUGEPAGE)` (or always, if the machine is set so); a file's mapping keeps the
//! page cache's pages. So a program's copies go into one [`Arena`]: an anonymous mapping,
//! aligned to 2 MiB, that hands out [`Piece`]s one after another, so that many small
//! matrices share each huge page.
//!
//! Elsewhere than on Linux, or where the mapping fails, there is no arena and the caller
//! keeps its bytes in an ordinary `Vec`: the same bytes, on ordinary pages.
//! `LLM_BOOK_HUGE=0` turns the arena off, to compare the two on one machine.

use std::sync::{Arc, Mutex};

/// A huge page's size on x86-64 (and the alignment the arena's start is given).
pub const HUGE_PAGE: usize = 2 << 20;

/// Whether [`Arena::new`] maps an arena: yes unless `LLM_BOOK_HUGE=0`. Read once.
pub fn wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| match std::env::var("LLM_BOOK_HUGE").as_deref() {
        Ok("0") => false,
        Ok("1") | Err(_) => true,
        Ok(v) => {
            eprintln!("warning: LLM_BOOK_HUGE={v:?} is neither 1 nor 0; using huge pages");
            true
        }
    })
}

/// Address space reserved for copies of weights, handed out front to back. Nothing is
/// resident until a piece is written; a huge page is taken when its first byte is.
pub struct Arena {
    base: *mut u8,
    /// Bytes reserved (a multiple of [`HUGE_PAGE`]).
    cap: usize,
    /// The first byte no piece has.
    next: Mutex<usize>,
}

// SAFETY: the arena's bytes are reached only through pieces, which never overlap: a piece's
// bytes are written through `&mut Piece` and read through `&Piece`, as a Vec's would be.
unsafe impl Send for Arena {}
// SAFETY: as above; `next` is behind a mutex.
unsafe impl Sync for Arena {}

impl Arena {
    /// Reserves room for `bytes` of copies (rounded up to whole huge pages), or `None` where
    /// there is no arena: not Linux, `LLM_BOOK_HUGE=0`, or a mapping the kernel refused.
    pub fn new(bytes: usize) -> Option<Arc<Arena>> {
        if bytes == 0 || !wanted() {
            return None;
        }
        Self::map(bytes.checked_next_multiple_of(HUGE_PAGE)?)
    }

    // ANCHOR: arena_map
    #[cfg(target_os = "linux")]
    fn map(cap: usize) -> Option<Arc<Arena>> {
        // One huge page more than asked for, so that the start can be moved to a boundary.
        let len = cap.checked_add(HUGE_PAGE)?;
        // SAFETY: a new private anonymous mapping; nothing else refers to its range.
        // NORESERVE: address space only, the memory comes when a page is first written.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let skip = (p as usize).next_multiple_of(HUGE_PAGE) - p as usize;
        // SAFETY: the part of our own mapping before the boundary and after `cap`; unmapping
        // it leaves [p + skip, p + skip + cap) mapped.
        unsafe {
            if skip > 0 {
                libc::munmap(p, skip);
            }
            libc::munmap(p.cast::<u8>().add(skip + cap).cast(), HUGE_PAGE - skip);
        }
        // SAFETY: `base` is the start of the mapping that remains, `cap` bytes long.
        let base = unsafe { p.cast::<u8>().add(skip) };
        // Advice only: refused (a kernel without transparent huge pages), the pages are 4 KiB.
        // SAFETY: our mapping.
        let _ = unsafe { libc::madvise(base.cast(), cap, libc::MADV_HUGEPAGE) };
        Some(Arc::new(Arena {
            base,
            cap,
            next: Mutex::new(0),
        }))
    }
    // ANCHOR_END: arena_map

    #[cfg(not(target_os = "linux"))]
    fn map(_cap: usize) -> Option<Arc<Arena>> {
        None
    }

    // ANCHOR: arena_take
    /// The next `len` bytes (zeroed, 64-byte aligned), or `None` if the arena has no room
    /// left for them.
    pub fn take(self: &Arc<Self>, len: usize) -> Option<Piece> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let start = *next;
        let end = start.checked_add(len)?;
        if end > self.cap {
            return None;
        }
        *next = end.next_multiple_of(64).min(self.cap);
        Some(Piece {
            arena: Arc::clone(self),
            start,
            len,
        })
    }
    // ANCHOR_END: arena_take
}

impl Drop for Arena {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: every piece holds the arena alive, so none is left to read these bytes.
        unsafe {
            libc::munmap(self.base.cast(), self.cap);
        }
    }
}

/// Bytes of an [`Arena`] that belong to one copy: written through `&mut`, then read.
pub struct Piece {
    arena: Arc<Arena>,
    start: usize,
    len: usize,
}

impl Piece {
    /// The bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: [start, start + len) lies inside the mapping (`take` checked) and belongs
        // to this piece alone; a fresh anonymous mapping reads as zeros.
        unsafe { std::slice::from_raw_parts_mut(self.arena.base.add(self.start), self.len) }
    }
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`; `&self` excludes a writer.
        unsafe { std::slice::from_raw_parts(self.arena.base.add(self.start), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces do not overlap, keep what was written to them, and the arena refuses what it
    /// has no room for.
    #[test]
    fn pieces_are_separate_and_bounded() {
        let Some(arena) = Arena::new(3 * HUGE_PAGE) else {
            assert!(
                !cfg!(target_os = "linux") || !wanted(),
                "Linux maps an arena"
            );
            return;
        };
        let mut a = arena.take(100).expect("room");
        let mut b = arena.take(HUGE_PAGE).expect("room");
        assert!(
            a.as_ref().iter().all(|&x| x == 0),
            "a fresh piece reads as zeros"
        );
        a.as_mut_slice().fill(1);
        b.as_mut_slice().fill(2);
        assert!(a.as_ref().iter().all(|&x| x == 1));
        assert!(b.as_ref().iter().all(|&x| x == 2));
        assert_eq!(b.start % 64, 0, "pieces start on a cache line");
        assert_eq!(
            arena.base as usize % HUGE_PAGE,
            0,
            "the arena starts on a huge page"
        );
        assert!(arena.take(2 * HUGE_PAGE).is_none(), "past the end");
        assert!(arena.take(usize::MAX).is_none(), "an overflowing length");
        assert!(
            arena.take(HUGE_PAGE / 2).is_some(),
            "what is left still fits"
        );
    }
}
