//! The requests of one load test, all drawn from one seed: prompts of common one-token
//! words, reply lengths, and which requests hang up early.

use ch09_generate::rng::Rng;

use super::options::LoadOptions;

/// One request of the mix.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) prompt: String,
    pub(super) reply: usize,
    /// Hang up after this many tokens.
    pub(super) cancel_after: Option<usize>,
    pub(super) seed: u64,
}

const WORDS: &[&str] = &[
    "the", "time", "people", "way", "water", "day", "world", "life", "hand", "part", "place",
    "work", "week", "case", "point", "number", "group", "fact", "house", "city", "river", "night",
    "light", "story", "road", "book", "school", "family", "money", "music", "market", "garden",
    "window", "table", "paper", "morning", "summer", "winter", "friend", "mother",
];

pub(super) fn plan(o: &LoadOptions) -> Vec<Planned> {
    let mut rng = Rng::new(o.seed);
    let around = |n: usize, rng: &mut Rng| n / 2 + (rng.next_u64() % (n as u64 + 1)) as usize;
    (0..o.requests)
        .map(|i| {
            let words = around(o.prompt, &mut rng).max(1);
            let prompt: Vec<&str> = (0..words)
                .map(|_| WORDS[(rng.next_u64() % WORDS.len() as u64) as usize])
                .collect();
            let reply = around(o.reply, &mut rng).max(2);
            let cancel_after = (rng.next_f64() < o.cancel_rate)
                .then(|| 1 + (rng.next_u64() % (reply as u64 - 1)) as usize);
            Planned {
                prompt: prompt.join(" "),
                reply,
                cancel_after,
                seed: o.seed.wrapping_mul(1_000_003).wrapping_add(i as u64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_fixed_by_its_seed() {
        let o = LoadOptions {
            requests: 20,
            cancel_rate: 0.5,
            ..LoadOptions::default()
        };
        let (a, b) = (plan(&o), plan(&o));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (&x.prompt, x.reply, x.cancel_after),
                (&y.prompt, y.reply, y.cancel_after)
            );
            assert!((64..=192).contains(&x.reply));
            assert!(x.cancel_after.is_none_or(|n| n < x.reply));
        }
        assert!(a.iter().any(|p| p.cancel_after.is_some()));
    }
}
