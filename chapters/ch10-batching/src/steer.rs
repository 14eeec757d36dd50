//! A hook that narrows what a sequence may say next. The engine knows nothing of grammars;
//! chapter 12's JSON grammar plugs in here, one [`Steer`] per request
//! ([`crate::BatchEngine::submit_steered`]).

// ANCHOR: steer
/// Something that decides, around each sampling, which tokens a sequence may take.
pub trait Steer: Send {
    /// Whether token `id` may come next: the quick question, asked of one token.
    fn allows(&mut self, id: u32) -> bool;
    /// Sets the logit of every token that may not come next to minus infinity.
    fn mask(&mut self, logits: &mut [f32]);
    /// The token to take, given the one the sampler chose: that one, or a replacement
    /// the steer must insist on (to finish in time, say).
    fn choose(&mut self, sampled: u32, logits: &[f32]) -> u32;
    /// Token `id` was taken.
    fn accept(&mut self, id: u32);
}
// ANCHOR_END: steer
