//! The bytes behind a matrix, owned or borrowed from a mapped file.

use std::sync::Arc;

/// Bytes that may belong to something else: a `Vec` this program filled, or (chapter 8) a
/// memory-mapped file. Cloning shares them.
#[derive(Clone)]
pub struct Bytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    pub(super) len: usize,
}

impl Bytes {
    /// Bytes this program owns.
    pub fn from_vec(v: Vec<u8>) -> Bytes {
        let len = v.len();
        Bytes {
            owner: Arc::new(v),
            start: 0,
            len,
        }
    }

    /// `len` bytes from `start` of `owner`, or `None` if that is past its end.
    pub fn slice_of(
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        start: usize,
        len: usize,
    ) -> Option<Bytes> {
        let end = start.checked_add(len)?;
        ((*owner).as_ref().len() >= end).then_some(Bytes { owner, start, len })
    }

    /// The bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}
