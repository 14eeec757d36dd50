//! A GGUF file on disk, mapped into memory and parsed.
//!
//! Mapping costs no reading: the kernel sets up page tables, and a page of the file is
//! read from disk (or found in the page cache) the first time something touches it. The
//! parser touches the header; a tensor's pages are touched when a kernel first streams
//! it. So opening a model reads a few hundred kilobytes, whatever the file's size.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ch06_quantization::Bytes;
use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::gguf::{Gguf, TensorInfo};
use crate::types::GgmlType;

/// An open GGUF file: the mapping and its parsed header.
pub struct GgufFile {
    pub path: PathBuf,
    pub gguf: Gguf,
    map: Arc<Mmap>,
}

impl GgufFile {
    /// Opens, maps and parses `path`, leaving the kernel's read-ahead as it is.
    pub fn open(path: &Path) -> Result<GgufFile> {
        GgufFile::open_with(path, Access::Normal)
    }

    // ANCHOR: open
    /// Opens, maps and parses `path`, telling the kernel how the mapping will be read.
    pub fn open_with(path: &Path, access: Access) -> Result<GgufFile> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = ch01_tensors::files::open_regular(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < 24 {
            return Err(Error::Truncated {
                what: "the header (magic, version, two counts)".into(),
                offset: 0,
                need: 24,
                have: len,
            });
        }
        // SAFETY: the mapping is read-only. As with every mmap-based loader (chapter 1's
        // safetensors reader included), another process truncating or rewriting the file
        // while it is mapped could make a read fault or change under us; we accept that for
        // a file we were asked to load.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        access.advise(&map);
        let gguf = Gguf::parse(&map)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            gguf,
            map: Arc::new(map),
        })
    }
    // ANCHOR_END: open

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Tensor `name`'s description, or an error naming it.
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.gguf.tensor(name).ok_or_else(|| Error::Tensor {
            name: name.to_string(),
            message: "not in the file".into(),
        })
    }

    /// A tensor's bytes, in place in the mapping.
    pub fn data(&self, t: &TensorInfo) -> &[u8] {
        let start = self.gguf.absolute_offset(t) as usize; // checked by Gguf::parse
        &self.map[start..start + t.size as usize]
    }

    /// Tells the kernel that this program will not read tensor `t` from the mapping again
    /// (it made its own copy, [`crate::matrix::Packed`]): the pages inside it leave the
    /// process's resident memory. The file's page cache keeps them, and a later read would
    /// only fault them back in, so nothing is lost.
    pub fn release(&self, t: &TensorInfo) {
        self.release_part(t, 0..t.size as usize);
    }

    /// [`GgufFile::release`] for the bytes `part` of tensor `t` only (the pages wholly
    /// inside them): a large tensor copied a slice at a time gives each slice back as it
    /// goes, so the copy never holds both whole.
    pub fn release_part(&self, t: &TensorInfo, part: std::ops::Range<usize>) {
        // x86-64's page; where pages are larger the advice fails, and they stay resident
        const ALIGN: usize = 4096;
        let start = self.gguf.absolute_offset(t) as usize;
        let end = part.end.min(t.size as usize);
        let (first, end) = (
            (start + part.start.min(end)).next_multiple_of(ALIGN),
            (start + end) / ALIGN * ALIGN,
        );
        if end > first {
            // SAFETY: the mapping is a read-only view of a file: dropping its pages cannot
            // lose data, and nothing holds a reference into them that a refault would not
            // serve. An error (an unsupported advice) only leaves the pages resident.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    first,
                    end - first,
                )
            };
        }
    }

    // ANCHOR: shared
    /// A tensor's bytes as chapter 6's [`Bytes`]: a window on the mapping that keeps it
    /// alive, so a `QMatrix` can use the weights where they lie.
    pub fn shared(&self, t: &TensorInfo) -> Bytes {
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = self.map.clone();
        Bytes::slice_of(
            owner,
            self.gguf.absolute_offset(t) as usize,
            t.size as usize,
        )
        .expect("Gguf::parse checked that every tensor lies inside the file")
    }
    // ANCHOR_END: shared

    /// An F32 tensor's values (copied: the data section only promises the alignment the
    /// file declares, and these are small).
    pub fn f32s(&self, t: &TensorInfo) -> Result<Vec<f32>> {
        if t.ty != GgmlType::F32 {
            return Err(Error::Tensor {
                name: t.name.clone(),
                message: format!("expected F32, found {}", t.ty),
            });
        }
        Ok(self
            .data(t)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }
}

// ANCHOR: advise
/// How the program is going to touch the mapping, passed to the kernel with `madvise`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The default: on a page fault the kernel also reads the pages around it.
    Normal,
    /// No read-around: a fault reads its own page and no more, so what is in memory is what
    /// was touched. (The header, which the parser walks from the start, is still asked for
    /// ahead: its first 4 MiB.)
    Random,
    /// Start reading the whole file in the background now.
    WillNeed,
}

impl Access {
    pub fn parse(name: &str) -> Option<Access> {
        match name {
            "normal" => Some(Access::Normal),
            "random" => Some(Access::Random),
            "willneed" => Some(Access::WillNeed),
            _ => None,
        }
    }

    fn advise(self, map: &Mmap) {
        // Advice only: if the kernel refuses, reads are slower or faster, never different.
        #[cfg(unix)]
        {
            use memmap2::Advice;
            match self {
                Access::Normal => {}
                Access::Random => {
                    let _ = map.advise(Advice::Random);
                    let _ = map.advise_range(Advice::WillNeed, 0, map.len().min(4 << 20));
                }
                Access::WillNeed => {
                    let _ = map.advise(Advice::WillNeed);
                }
            }
        }
    }
}
// ANCHOR_END: advise
