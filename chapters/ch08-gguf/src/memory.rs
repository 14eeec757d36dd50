//! What a load costs in memory: the process's resident set, and how much of the model
//! file sits in the page cache.
//!
//! Linux only (`/proc/self/status`, `mincore`, `posix_fadvise`); elsewhere the numbers are
//! zero and eviction is refused.

use std::path::Path;

use crate::file::GgufFile;

/// Resident memory, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// The whole resident set (`VmRSS`).
    pub rss: u64,
    /// Resident pages backed by files, the mapped model among them (`RssFile`).
    pub rss_file: u64,
    /// Resident pages of the heap and stacks (`RssAnon`).
    pub rss_anon: u64,
    /// Bytes of the model file in the page cache, whoever touched them (`mincore`).
    pub file_cached: Option<u64>,
}

/// The process's memory now, and the page-cache residency of `file` if given.
pub fn usage(file: Option<&GgufFile>) -> Usage {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .map_or(0, |n| n * 1024)
    };
    Usage {
        rss: kb("VmRSS:"),
        rss_file: kb("RssFile:"),
        rss_anon: kb("RssAnon:"),
        file_cached: file.and_then(|f| cached_bytes(f.bytes())),
    }
}

// ANCHOR: mincore
/// Bytes of `map` (a whole mapping, page-aligned) that are in the page cache.
#[cfg(target_os = "linux")]
pub fn cached_bytes(map: &[u8]) -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    let pages = map.len().div_ceil(page);
    let mut v = vec![0u8; pages];
    // SAFETY: `map` is a live mapping starting on a page boundary (mmap returns one), and
    // `v` has one byte per page of it, as mincore requires.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, map.len(), v.as_mut_ptr()) };
    (rc == 0).then(|| v.iter().filter(|&&b| b & 1 != 0).count() as u64 * page as u64)
}

#[cfg(not(target_os = "linux"))]
pub fn cached_bytes(_map: &[u8]) -> Option<u64> {
    None
}
// ANCHOR_END: mincore

/// Asks the kernel to drop `path`'s pages from the page cache (they are clean, so it can),
/// so the next open reads from disk. Needs no privileges; pages some other process has
/// mapped may stay.
#[cfg(target_os = "linux")]
pub fn evict(path: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = ch01_tensors::files::open_regular(path)?;
    // SAFETY: a valid descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// [`evict`], then a check that it worked: the bytes of `path` still in the page cache (by
/// [`cached_bytes`] on a fresh mapping of it). A "cold" measurement must look at this: the
/// kernel keeps the pages of a file any process has mapped, this one included, so a
/// program that still holds a model mapped cannot make that file cold for another.
pub fn evict_checked(path: &Path) -> std::io::Result<u64> {
    evict(path)?;
    let f = ch01_tensors::files::open_regular(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(0);
    }
    // SAFETY: a read-only mapping of a regular file, read only by mincore (never its bytes)
    // and dropped before this returns.
    let map = unsafe { memmap2::Mmap::map(&f)? };
    Ok(cached_bytes(&map).unwrap_or(0))
}

#[cfg(not(target_os = "linux"))]
pub fn evict(_path: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "evicting a file from the page cache needs Linux",
    ))
}
