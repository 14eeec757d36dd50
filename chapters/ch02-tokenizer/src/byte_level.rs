//! GPT-2's byte <-> unicode table: how a byte-level BPE vocabulary spells raw bytes.
//!
//! A byte-level BPE works on bytes, but its vocabulary is stored as JSON strings. Bytes such
//! as `0x20` (space) or `0x0A` (newline) would make unreadable, whitespace-mangled keys, so
//! GPT-2 gives every byte a *visible* stand-in character: the 188 bytes that already print
//! as themselves in Latin-1 keep their character, and the other 68 (controls, space, DEL,
//! NBSP, soft hyphen ...) are moved, in order, to U+0100, U+0101, ... So a space is stored
//! as `Ġ` (U+0120) and a newline as `Ċ` (U+010A): the token " the" appears in the vocabulary
//! as `Ġthe`.

// ANCHOR: bytes_to_unicode
/// The stand-in character of every byte: `table[b]` is how byte `b` is spelled in the
/// vocabulary.
pub fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next_free = 0x100u32; // stand-ins for unprintable bytes start at U+0100
    for byte in 0..=255u8 {
        let prints_as_itself = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[byte as usize] = if prints_as_itself {
            char::from(byte) // Latin-1: the byte value is the code point
        } else {
            let c = char::from_u32(next_free).expect("U+0100..U+0143 are valid chars");
            next_free += 1;
            c
        };
    }
    table
}
// ANCHOR_END: bytes_to_unicode

/// The table in both directions.
#[derive(Clone, Debug)]
pub struct ByteLevel {
    to_char: [char; 256],
    /// Indexed by code point; every stand-in is below U+0144.
    to_byte: Vec<Option<u8>>,
}

impl Default for ByteLevel {
    fn default() -> Self {
        Self::new()
    }
}

impl ByteLevel {
    pub fn new() -> ByteLevel {
        let to_char = bytes_to_unicode();
        let mut to_byte = vec![None; 0x144];
        for (byte, &c) in to_char.iter().enumerate() {
            to_byte[c as usize] = Some(byte as u8);
        }
        ByteLevel { to_char, to_byte }
    }

    /// The stand-in character of one byte.
    pub fn char_of(&self, byte: u8) -> char {
        self.to_char[byte as usize]
    }

    /// Spells bytes the way the vocabulary does: `b" hi"` -> `"Ġhi"`.
    pub fn encode(&self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.char_of(b)).collect()
    }

    /// The byte a stand-in character stands for, or `None` if `c` is not in the table.
    pub fn byte_of(&self, c: char) -> Option<u8> {
        self.to_byte.get(c as usize).copied().flatten()
    }

    /// Turns a vocabulary string back into the bytes it stands for: `"Ġhi"` -> `b" hi"`.
    /// `None` if some character is not a stand-in.
    pub fn decode(&self, text: &str) -> Option<Vec<u8>> {
        text.chars().map(|c| self.byte_of(c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_stand_ins() {
        let t = bytes_to_unicode();
        assert_eq!(t[b' ' as usize], 'Ġ', "space is spelled Ġ (U+0120)");
        assert_eq!(t[b'\n' as usize], 'Ċ', "newline is spelled Ċ (U+010A)");
        assert_eq!(t[0], 'Ā', "byte 0 is the first stand-in, U+0100");
        assert_eq!(t[b'a' as usize], 'a', "printable ASCII is itself");
        assert_eq!(
            t[0xAD], '\u{0143}',
            "the soft hyphen is the last of the 68 stand-ins"
        );
    }

    #[test]
    fn the_table_is_a_bijection() {
        let bl = ByteLevel::new();
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            assert!(
                seen.insert(bl.char_of(b)),
                "two bytes share the stand-in of {b:#04x}"
            );
            assert_eq!(bl.byte_of(bl.char_of(b)), Some(b));
        }
        assert_eq!(bl.byte_of('€'), None);
        let bytes = "héllo 🦀\n".as_bytes();
        assert_eq!(bl.decode(&bl.encode(bytes)).as_deref(), Some(bytes));
    }
}
