//! The cursor every read of a GGUF header goes through: it never reads past the end, and a
//! count from the file is checked against the bytes left before it sizes anything.

use crate::error::{Error, Result, format_error};

// ANCHOR: reader
/// A cursor over the file's bytes that never reads past the end: every read checks first,
/// and an error names what was being read and where.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Where the next read starts.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// The next `n` bytes, or an error if the file ends first. `n` comes from the file, so
    /// it is compared with what remains before it is used for anything.
    pub fn bytes(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what: what.to_string(),
                offset: self.offset(),
                need: n,
                have: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(out)
    }
    // ANCHOR_END: reader

    // ANCHOR: reader_reads
    /// The next `N` bytes as an array (a fixed-size number's bytes).
    pub(super) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self
            .bytes(N as u64, what)?
            .try_into()
            .expect("bytes returned N bytes"))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: a u64 length, then that many bytes of UTF-8.
    pub fn string(&mut self, what: &str) -> Result<&'a str> {
        let len = self.u64(&format!("the length of {what}"))?;
        let at = self.offset();
        let bytes = self.bytes(len, what)?;
        std::str::from_utf8(bytes).map_err(|e| {
            format_error(
                what,
                format!(
                    "not UTF-8 (invalid byte at file offset {})",
                    at + e.valid_up_to() as u64
                ),
            )
        })
    }

    /// A count of items that each take at least `min_bytes` bytes: more items than the
    /// remaining bytes could hold is an error here, so the count can size an allocation.
    pub fn count(&mut self, min_bytes: u64, what: &str) -> Result<usize> {
        let at = self.offset();
        let n = self.u64(what)?;
        if n > self.remaining() / min_bytes.max(1) {
            return Err(Error::Truncated {
                what: format!("{what} ({n} items of at least {min_bytes} bytes each)"),
                offset: at,
                need: n.saturating_mul(min_bytes),
                have: self.remaining(),
            });
        }
        Ok(n as usize)
    }
}
// ANCHOR_END: reader_reads
