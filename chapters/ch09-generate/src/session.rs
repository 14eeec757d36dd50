//! A conversation that keeps its KV cache between turns.
//!
//! Each turn re-renders the whole conversation with the chat template, tokenizes it, and
//! compares it with the tokens already in the cache: only the new tail is run through the
//! model. The second turn of a chat therefore costs its own tokens, not the whole history.
//! When the context would overflow, the policy is to start over: the cache is cleared and
//! the conversation keeps only the system message and the newest user turn.

use std::time::Instant;

use ch05_kv_cache::RingCache;
use ch08_gguf::Loaded;
use ch08_gguf::engine::Engine;

use crate::chat::sandbox::Sandbox;
use crate::chat::{Chat, Message};
use crate::generate::StopReason;
use crate::sampling::Sampler;
use crate::stop::StopMatcher;

/// What one turn cost.
#[derive(Clone, Debug)]
pub struct TurnStats {
    /// Tokens run through the model before the reply (the part not already cached).
    pub prefilled: usize,
    /// Tokens of the whole conversation so far, reply included.
    pub context: usize,
    pub time_to_first_token_ms: f64,
    pub reply_tokens: usize,
    pub stop: StopReason,
    /// Whether the history was cut to fit the context.
    pub truncated: bool,
}

// ANCHOR: session
/// A chat with one model.
pub struct ChatSession<'m> {
    model: &'m Loaded,
    engine: Engine<'m>,
    chat: Chat,
    pub messages: Vec<Message>,
    cache: RingCache,
    /// The tokens whose keys and values are in `cache`, in order.
    cached: Vec<u32>,
    max_context: usize,
}

impl<'m> ChatSession<'m> {
    /// A chat with `model`, its template run in `sandbox` (see [`Chat`]).
    pub fn new(
        model: &'m Loaded,
        system: Option<&str>,
        max_context: usize,
        sandbox: Option<Sandbox>,
    ) -> Result<ChatSession<'m>, String> {
        let engine = model.engine()?;
        let max_context = max_context.min(engine.model.max_positions());
        let chat = Chat::of_model(model, sandbox)?;
        let cache = engine.new_cache(max_context).map_err(|e| e.to_string())?;
        let messages = system
            .map(|s| vec![Message::new("system", s)])
            .unwrap_or_default();
        Ok(ChatSession {
            model,
            engine,
            chat,
            messages,
            cache,
            cached: Vec::new(),
            max_context,
        })
    }

    /// Forgets the conversation (the system message stays).
    pub fn reset(&mut self) {
        self.messages.retain(|m| m.role == "system");
        self.cached.clear();
    }

    fn prompt_ids(&self) -> Result<Vec<u32>, String> {
        self.chat.prompt_ids(&self.model.tokenizer, &self.messages)
    }
    // ANCHOR_END: session

    // ANCHOR: session_turn
    /// Adds the user's turn, streams the reply through `on_text`, and adds it too.
    /// `interrupted` is asked before each new token: when it says yes, the reply ends there
    /// and is kept as far as it got.
    pub fn turn(
        &mut self,
        user: &str,
        sampler: &mut Sampler,
        max_reply: usize,
        interrupted: &dyn Fn() -> bool,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<TurnStats, String> {
        let start = Instant::now();
        self.messages.push(Message::new("user", user));
        let mut ids = self.prompt_ids()?;
        let mut truncated = false;
        if ids.len() + max_reply.min(64) >= self.max_context {
            // Context full: keep the system message and this turn only, from an empty cache.
            self.messages.retain(|m| m.role == "system");
            self.messages.push(Message::new("user", user));
            self.cached.clear();
            ids = self.prompt_ids()?;
            truncated = true;
            if ids.len() >= self.max_context {
                self.messages.pop();
                return Err(format!(
                    "this turn alone is {} tokens; the context holds {}",
                    ids.len(),
                    self.max_context
                ));
            }
        }
        // Reuse the cache for the longest common prefix; run the rest.
        let mut common = self
            .cached
            .iter()
            .zip(&ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len() - 1);
        // A sliding layer's ring keeps its window plus one chunk of slots: going back more
        // than a chunk could read keys the ring has since overwritten. Start over instead.
        if self.cached.len() - common > self.engine.chunk {
            common = 0;
        }
        self.cached.truncate(common);
        let new = &ids[common..];
        let mut logits = self
            .engine
            .forward(&mut self.cache, new, common)
            .map_err(|e| e.to_string())?;
        self.cached.extend_from_slice(new);
        let ttft = start.elapsed().as_secs_f64() * 1e3;
        // ANCHOR_END: session_turn
        // ANCHOR: session_reply
        let end_ids = &self.engine.model.config.eos_token_ids;
        let mut decoder = ch02_tokenizer::StreamDecoder::new(&self.model.tokenizer.tokenizer);
        let mut matcher = StopMatcher::new(&[]);
        let mut reply_ids = Vec::new();
        let mut reply = String::new();
        let stop = loop {
            if interrupted() {
                break StopReason::Interrupted;
            }
            let next = sampler.sample(&logits, &self.cached);
            if end_ids.contains(&next) {
                break StopReason::EndOfText;
            }
            reply_ids.push(next);
            let piece = decoder.push(next).map_err(|e| e.to_string())?;
            let step = matcher.push(&piece);
            on_text(&step.text);
            reply.push_str(&step.text);
            if reply_ids.len() >= max_reply {
                break StopReason::Length;
            }
            if self.cached.len() + 1 >= self.max_context {
                break StopReason::Context;
            }
            logits = self
                .engine
                .forward(&mut self.cache, &[next], self.cached.len())
                .map_err(|e| e.to_string())?;
            self.cached.push(next);
        };
        self.messages.push(Message::new("assistant", reply.trim()));
        Ok(TurnStats {
            prefilled: new.len(),
            context: self.cached.len(),
            time_to_first_token_ms: ttft,
            reply_tokens: reply_ids.len(),
            stop,
            truncated,
        })
    }
}
// ANCHOR_END: session_reply
