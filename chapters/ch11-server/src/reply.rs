//! One request's answer in OpenAI's wire format: the chunks of a stream, the whole response,
//! usage and log-probabilities. The same [`Reply`] serves both ways of answering, so a
//! streamed and a whole answer can never disagree.

use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use ch10_batching::{FinishReason, Finished};

use crate::api::{Endpoint, Job};
use crate::metrics::Metrics;
use crate::structure::Shape;
use crate::toolcall::{self, Call};

/// Everything about one accepted request that its answer needs.
pub struct Reply {
    pub job: Job,
    /// `chatcmpl-N` or `cmpl-N`.
    pub id: String,
    pub model: String,
    /// Unix seconds.
    pub created: u64,
    pub tokenizer: &'static ch02_tokenizer::Tokenizer,
    pub metrics: Metrics,
    pub arrived: Instant,
    pub last_token: Option<Instant>,
    /// Its place in the bounded queue, held until the answer ends.
    pub permit: OwnedSemaphorePermit,
    /// How the request ended, for `llm_requests_total` (`None` when dropped: a cancel).
    pub outcome: Option<&'static str>,
}

/// One token's log-probability and the most likely alternatives, from the model's logits.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub id: u32,
    pub logprob: f32,
    /// `(id, logprob)`, most likely first.
    pub top: Vec<(u32, f32)>,
}

// ANCHOR: logprobs
/// `log softmax(logits)[id]`, and the `n` best, computed stably (the largest logit is
/// subtracted before `exp`).
pub fn logprobs(logits: &[f32], id: u32, n: usize) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let log_z = max + sum.ln() as f32;
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    let n = n.min(order.len());
    let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
    if n > 0 && n < order.len() {
        order.select_nth_unstable_by(n - 1, by_logit);
    }
    order.truncate(n);
    order.sort_by(by_logit);
    TokenLogprob {
        id,
        logprob: logits
            .get(id as usize)
            .map_or(f32::NEG_INFINITY, |l| l - log_z),
        top: order
            .iter()
            .map(|&t| (t, logits[t as usize] - log_z))
            .collect(),
    }
}
// ANCHOR_END: logprobs

/// OpenAI's `finish_reason`; `None` for a request the server ended (shutting down).
pub fn finish_reason(r: FinishReason) -> Option<&'static str> {
    match r {
        FinishReason::Eos | FinishReason::Stop => Some("stop"),
        FinishReason::Length => Some("length"),
        FinishReason::Cancelled => None,
    }
}

impl Reply {
    fn piece(&self, id: u32) -> (String, Vec<u8>) {
        let bytes = self.tokenizer.piece(id).unwrap_or_default().to_vec();
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    }

    /// Counts a token and records its latency: the first one's from arrival, the others'
    /// from the last.
    pub fn timed_token(&mut self) {
        self.metrics.generated_tokens.inc();
        let now = Instant::now();
        match self.last_token {
            None => self
                .metrics
                .time_to_first_token
                .observe((now - self.arrived).as_secs_f64()),
            Some(t) => self
                .metrics
                .inter_token_latency
                .observe((now - t).as_secs_f64()),
        }
        self.last_token = Some(now);
    }

    /// Counts a finished request's prompt tokens found in the prefix cache, and its outcome.
    pub fn finished(&mut self, f: &Finished) {
        self.metrics
            .prefix_cache_hit_tokens
            .inc_by(f.cached_tokens as u64);
        self.outcome = finish_reason(f.reason);
    }

    /// Log-probabilities of some tokens, in the endpoint's format; `text_offset` is where
    /// the first of them starts in the reply.
    pub fn logprobs_json(&self, lps: &[TokenLogprob], text_offset: usize) -> Value {
        match self.job.endpoint {
            Endpoint::Chat => {
                let entry = |id: u32, lp: f32| {
                    let (token, bytes) = self.piece(id);
                    json!({"token": token, "logprob": lp, "bytes": bytes})
                };
                let content: Vec<Value> = lps
                    .iter()
                    .map(|t| {
                        let mut e = entry(t.id, t.logprob);
                        e["top_logprobs"] = t.top.iter().map(|&(id, lp)| entry(id, lp)).collect();
                        e
                    })
                    .collect();
                json!({"content": content})
            }
            Endpoint::Completions => {
                let mut offset = text_offset;
                let (mut tokens, mut offsets) = (Vec::new(), Vec::new());
                for t in lps {
                    let (token, _) = self.piece(t.id);
                    offsets.push(offset);
                    offset += token.len();
                    tokens.push(token);
                }
                let top: Vec<Value> = lps
                    .iter()
                    .map(|t| {
                        let m: serde_json::Map<String, Value> = t
                            .top
                            .iter()
                            .map(|&(id, lp)| (self.piece(id).0, json!(lp)))
                            .collect();
                        Value::Object(m)
                    })
                    .collect();
                json!({"tokens": tokens, "token_logprobs": lps.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                       "top_logprobs": top, "text_offset": offsets})
            }
        }
    }

    pub fn usage(f: &Finished) -> Value {
        json!({"prompt_tokens": f.prompt_tokens, "completion_tokens": f.generated,
               "total_tokens": f.prompt_tokens + f.generated,
               "prompt_tokens_details": {"cached_tokens": f.cached_tokens}})
    }

    // ANCHOR: chunk
    /// One streamed chunk: new text (`None` for the role-only first chunk of a chat), its
    /// log-probabilities, and the finish reason on the last one.
    pub fn chunk(
        &self,
        text: Option<&str>,
        logprobs: Option<Value>,
        finish: Option<&str>,
    ) -> Value {
        let choice = match self.job.endpoint {
            Endpoint::Chat => {
                let delta = match (text, finish) {
                    (_, Some(_)) => json!({}),
                    (None, None) => json!({"role": "assistant", "content": ""}),
                    (Some(t), None) => json!({"content": t}),
                };
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
            }
            Endpoint::Completions => {
                json!({"index": 0, "text": text.unwrap_or(""), "logprobs": logprobs, "finish_reason": finish})
            }
        };
        let mut c = self.envelope(true);
        c["choices"] = json!([choice]);
        if self.job.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }
    // ANCHOR_END: chunk

    /// The chunk after the last, with `stream_options.include_usage`: no choices, the usage.
    pub fn usage_chunk(&self, f: &Finished) -> Value {
        let mut c = self.envelope(true);
        c["choices"] = json!([]);
        c["usage"] = Reply::usage(f);
        c
    }

    // ANCHOR: tool_call
    /// The tool call `text` makes, when the request gave tools and the text is one.
    pub fn tool_call(&self, text: &str) -> Option<Call> {
        match &self.job.shape {
            Shape::ToolCall { names, .. } => toolcall::parse(text, names),
            Shape::Text => None,
        }
    }

    /// A call as OpenAI writes it; streamed, `index` first and the id and name only once.
    pub fn call_json(&self, name: Option<&str>, arguments: &str, stream: bool) -> Value {
        let mut call = json!({"function": {"arguments": arguments}});
        if let Some(name) = name {
            call["id"] = json!(format!("call_{}", self.id));
            call["type"] = json!("function");
            call["function"]["name"] = json!(name);
        }
        if stream {
            call["index"] = json!(0);
        }
        call
    }

    /// A streamed chunk carrying (part of) a tool call.
    pub fn tool_chunk(&self, call: Value) -> Value {
        let mut c = self.envelope(true);
        c["choices"] = json!([{"index": 0, "delta": {"tool_calls": [call]}, "logprobs": null,
                               "finish_reason": null}]);
        if self.job.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }
    // ANCHOR_END: tool_call

    /// A whole (not streamed) answer.
    pub fn whole(&self, text: &str, logprobs: Option<Value>, f: &Finished) -> Value {
        let mut finish = finish_reason(f.reason);
        let call = self.tool_call(text);
        let message = match &call {
            Some(call) => {
                finish = finish.map(|r| if r == "stop" { "tool_calls" } else { r });
                json!({"role": "assistant", "content": null, "refusal": null,
                       "tool_calls": [self.call_json(Some(&call.name), &call.arguments, false)]})
            }
            None => json!({"role": "assistant", "content": text, "refusal": null}),
        };
        let choice = match self.job.endpoint {
            Endpoint::Chat => json!({"index": 0, "message": message,
                "logprobs": logprobs, "finish_reason": finish}),
            Endpoint::Completions => {
                json!({"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish})
            }
        };
        let mut c = self.envelope(false);
        c["choices"] = json!([choice]);
        c["usage"] = Reply::usage(f);
        c
    }

    fn envelope(&self, chunk: bool) -> Value {
        let object = match (self.job.endpoint, chunk) {
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Completions, _) => "text_completion",
        };
        json!({"id": self.id, "object": object, "created": self.created, "model": self.model,
               "system_fingerprint": null})
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        let endpoint = match self.job.endpoint {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        };
        self.metrics
            .count_request(endpoint, self.outcome.unwrap_or("cancelled"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_are_a_log_softmax() {
        let t = logprobs(&[1.0, 3.0, 2.0, 0.0], 2, 2);
        let z = (1f32.exp() + 3f32.exp() + 2f32.exp() + 1.0).ln();
        assert!((t.logprob - (2.0 - z)).abs() < 1e-5);
        assert_eq!(t.top.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
        let total: f32 = (0..4)
            .map(|i| logprobs(&[1.0, 3.0, 2.0, 0.0], i, 0).logprob.exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-5, "probabilities sum to {total}");
    }
}
