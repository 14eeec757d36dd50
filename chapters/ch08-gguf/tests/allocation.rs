//! The GGUF parser never reserves memory in proportion to a count it has not yet seen the
//! items of: a counting allocator watches a parse of a 64 MiB file whose header claims as
//! many entries as its size allows. (Its own test binary, because the allocator it installs
//! serves every test in the binary.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ch08_gguf::{Error, Gguf};

/// The system allocator, noting the largest single allocation each thread makes, so a test
/// can see what a parse reserves.
struct Measured;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: an allocation while the thread is being torn down is not noted.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed unchanged to the system allocator; noting a size allocates
// nothing (the thread-local is a const-initialised Cell with no destructor).
unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

/// The largest single allocation `Gguf::parse(bytes)` makes, and its result.
fn largest_allocation(bytes: &[u8]) -> (usize, Result<Gguf, Error>) {
    LARGEST.set(0);
    let result = Gguf::parse(bytes);
    (LARGEST.get(), result)
}

#[test]
fn a_count_that_a_large_file_could_hold_reserves_no_memory_before_its_items_are_read() {
    // 64 MiB of zeros behind a header whose count is as large as the check against the
    // file's size allows: one metadata entry per 13 bytes, or one tensor per 32. The zeros
    // then read as an entry with an empty key (twice, an error), or a tensor with no
    // dimensions (an error). Only the header's few bytes should be read before that, and
    // nothing allocated in proportion to the count.
    let len: usize = 64 << 20;
    for (what, count_at, count) in [
        ("metadata entries", 16, (len as u64 - 24) / 13),
        ("tensors", 8, (len as u64 - 24) / 32),
    ] {
        let mut bytes = vec![0u8; len];
        bytes[..8].copy_from_slice(b"GGUF\x03\0\0\0");
        bytes[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        let (largest, result) = largest_allocation(&bytes);
        assert!(
            result.is_err(),
            "a 64 MiB file of zeros claiming {count} {what} was accepted"
        );
        assert!(
            largest <= 1 << 20,
            "a header claiming {count} {what} (in a 64 MiB file) made the parser allocate {largest} bytes \
             at once, before reading more than the first of them"
        );
    }
}
