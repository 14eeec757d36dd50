//! Streaming decode: printing text token by token, never half a character.
//!
//! A byte-level token can end in the middle of a UTF-8 character: "🦀" is four bytes,
//! F0 9F A6 80, and SmolLM2 spells it with more than one token. Printing each token's bytes
//! as they arrive would print a broken character. The stream decoder keeps the bytes of an
//! unfinished character back until the token that completes it arrives.

use crate::error::Result;
use crate::tokenizer::Tokenizer;
use crate::vocab::TokenId;

// ANCHOR: incomplete_tail
/// How many bytes at the end of `bytes` are the beginning of a character that is not
/// complete yet (0 to 3). Bytes that can never become a character do not count: they are
/// invalid, not incomplete.
pub fn incomplete_tail_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        // error_len() is None exactly when the input ends inside a character that more
        // bytes could still complete.
        Err(e) => match e.error_len() {
            None => bytes.len() - e.valid_up_to(),
            Some(bad) => incomplete_tail_len(&bytes[e.valid_up_to() + bad..]),
        },
    }
}
// ANCHOR_END: incomplete_tail

// ANCHOR: stream_decoder
/// Decodes one token at a time.
///
/// A SentencePiece text starts with the space its encoder put in front (`▁The`), and
/// [`Tokenizer::decode`] drops it from the first token. Generated tokens are not the start
/// of a text: they continue the prompt, and `▁Associ` after "is" is " Associ". So a stream
/// made with [`StreamDecoder::new`] prints every token's piece as it is, as llama.cpp's
/// programs do (`common_token_to_piece`, which strips nothing); one made with
/// [`StreamDecoder::from_start`] streams a whole text, and everything its `push` and
/// `finish` return adds up to [`Tokenizer::decode`] of all the ids.
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    pending: Vec<u8>, // bytes of a character still waiting for its other bytes
    count: usize,     // tokens pushed so far
    at_start: bool,   // the first token begins a text (decode's rule)
}

impl<'t> StreamDecoder<'t> {
    /// A stream of generated tokens, continuing a prompt: no piece loses its space.
    pub fn new(tokenizer: &'t Tokenizer) -> StreamDecoder<'t> {
        StreamDecoder {
            tokenizer,
            pending: Vec::new(),
            count: 0,
            at_start: false,
        }
    }

    /// A stream of a whole text's tokens: the first one drops the prefix space, as in
    /// [`Tokenizer::decode`].
    pub fn from_start(tokenizer: &'t Tokenizer) -> StreamDecoder<'t> {
        StreamDecoder {
            at_start: true,
            ..StreamDecoder::new(tokenizer)
        }
    }

    // ANCHOR_END: stream_decoder
    // ANCHOR: stream_push
    /// Adds one token; returns the text that is now complete (possibly empty).
    pub fn push(&mut self, id: TokenId) -> Result<String> {
        let piece = match self.at_start {
            true => self.tokenizer.piece_at(id, self.count)?,
            false => self.tokenizer.piece(id)?,
        };
        self.count += 1;
        self.pending.extend_from_slice(piece);
        let keep = incomplete_tail_len(&self.pending);
        let ready = self.pending.len() - keep;
        // Invalid bytes before the tail can never be completed: U+FFFD, as in decode().
        let text = String::from_utf8_lossy(&self.pending[..ready]).into_owned();
        self.pending.drain(..ready);
        Ok(text)
    }

    /// Bytes held back, waiting for the rest of their character.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The end of the stream: an unfinished character left over becomes U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}
// ANCHOR_END: stream_push

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        let crab = "🦀".as_bytes(); // F0 9F A6 80
        assert_eq!(incomplete_tail_len(b"abc"), 0);
        assert_eq!(incomplete_tail_len(&crab[..1]), 1);
        assert_eq!(incomplete_tail_len(&crab[..3]), 3);
        assert_eq!(incomplete_tail_len(crab), 0);
        assert_eq!(incomplete_tail_len(&[b'a', 0xC3]), 1, "é starts with C3");
        assert_eq!(
            incomplete_tail_len(&[0x80]),
            0,
            "a lone continuation byte is invalid"
        );
        assert_eq!(
            incomplete_tail_len(&[0xFF, 0xE2, 0x82]),
            2,
            "invalid byte, then € begun"
        );
        assert_eq!(
            incomplete_tail_len(&[0xE0, 0x80]),
            0,
            "E0 80 can never be completed"
        );
    }
}
