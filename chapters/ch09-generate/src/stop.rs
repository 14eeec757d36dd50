//! Stop strings, matched on text across token boundaries.
//!
//! A stop string such as `"\nUser:"` may arrive split over several tokens (`"\n"`, `"User"`,
//! `":"`). Printing each token as it comes would print the start of the stop string before
//! knowing it is one; so the matcher holds back the longest tail of the text that could
//! still grow into a stop string, and prints it only once it cannot.

// ANCHOR: held_back
/// How many bytes at the end of `text` could be the start of one of `stops` (and so must
/// not be printed yet). Only whole characters are counted.
pub fn held_back(text: &str, stops: &[String]) -> usize {
    let mut hold = 0;
    for s in stops {
        // the longest proper prefix of `s` that `text` ends with
        for (k, _) in s.char_indices().skip(1) {
            if k > hold && text.ends_with(&s[..k]) {
                hold = k;
            }
        }
    }
    hold
}
// ANCHOR_END: held_back

/// What to print after a piece of text.
#[derive(Debug, PartialEq)]
pub struct Step {
    /// Text that is safe to print now.
    pub text: String,
    /// A stop string was found: `text` ends just before it.
    pub stopped: bool,
}

// ANCHOR: matcher
/// Feeds text pieces, prints what cannot be part of a stop string.
#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
}

impl StopMatcher {
    /// Empty stop strings are ignored.
    pub fn new(stops: &[String]) -> StopMatcher {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
        }
    }

    pub fn push(&mut self, piece: &str) -> Step {
        self.pending.push_str(piece);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min();
        if let Some(at) = first {
            let text = self.pending[..at].to_string();
            self.pending.clear();
            return Step {
                text,
                stopped: true,
            };
        }
        let keep = held_back(&self.pending, &self.stops);
        let cut = self.pending.len() - keep;
        let text = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        Step {
            text,
            stopped: false,
        }
    }

    /// The text still held back, at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}
// ANCHOR_END: matcher

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_string_split_over_pieces_is_never_printed() {
        let mut m = StopMatcher::new(&["\nUser:".to_string()]);
        let mut out = String::new();
        for piece in ["Hello", " there", "\n", "Us", "er", ":", " more"] {
            let s = m.push(piece);
            out.push_str(&s.text);
            if s.stopped {
                break;
            }
        }
        assert_eq!(out, "Hello there");
    }

    #[test]
    fn a_false_start_is_printed_once_it_cannot_match() {
        let mut m = StopMatcher::new(&["###".to_string()]);
        assert_eq!(m.push("a#").text, "a");
        assert_eq!(m.push("#b").text, "##b");
        assert_eq!(m.finish(), "");
    }
}
