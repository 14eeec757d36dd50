//! What the server counts, in Prometheus' text format at `GET /metrics`.
//!
//! Counters only grow (requests, tokens); gauges are set by the engine thread after every
//! step (the queue, the running sequences, the KV blocks); histograms collect latencies as
//! the tokens reach their HTTP task. All of them are atomics: the engine thread and every
//! HTTP task update them without a lock.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `llm_requests_total`: `endpoint` and `outcome`.
type Labels = Vec<(&'static str, String)>;

// ANCHOR: metrics
#[derive(Clone)]
pub struct Metrics {
    /// By endpoint and outcome (`stop`, `length`, `cancelled`, `error`, or an HTTP status).
    pub requests: Family<Labels, Counter>,
    pub prompt_tokens: Counter,
    pub generated_tokens: Counter,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub prefix_cache_hit_tokens: Counter,
    pub time_to_first_token: Histogram,
    pub inter_token_latency: Histogram,
    /// Requests accepted and not yet running.
    pub queue_length: Gauge,
    pub running_sequences: Gauge,
    pub kv_blocks_used: Gauge,
    pub kv_blocks_free: Gauge,
    /// 1 once the engine thread has its model and its KV pool.
    pub ready: Gauge,
}
// ANCHOR_END: metrics

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            requests: Family::default(),
            prompt_tokens: Counter::default(),
            generated_tokens: Counter::default(),
            prefix_cache_hit_tokens: Counter::default(),
            // 1 ms to about 33 s
            time_to_first_token: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            // 0.25 ms to about 2 s
            inter_token_latency: Histogram::new(exponential_buckets(0.00025, 2.0, 14)),
            queue_length: Gauge::default(),
            running_sequences: Gauge::default(),
            kv_blocks_used: Gauge::default(),
            kv_blocks_free: Gauge::default(),
            ready: Gauge::default(),
        }
    }

    pub fn count_request(&self, endpoint: &str, outcome: &str) {
        self.requests
            .get_or_create(&vec![
                ("endpoint", endpoint.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    /// The text `GET /metrics` answers.
    pub fn render(&self) -> String {
        let mut r = Registry::with_prefix("llm");
        r.register(
            "requests",
            "Requests by endpoint and outcome",
            self.requests.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens of accepted requests",
            self.prompt_tokens.clone(),
        );
        r.register(
            "generated_tokens",
            "Tokens generated and sent (cancelled requests' too)",
            self.generated_tokens.clone(),
        );
        r.register(
            "prefix_cache_hit_tokens",
            "Prompt tokens found in the prefix cache",
            self.prefix_cache_hit_tokens.clone(),
        );
        r.register(
            "time_to_first_token_seconds",
            "From the request's body read to its first token",
            self.time_to_first_token.clone(),
        );
        r.register(
            "inter_token_latency_seconds",
            "Between two tokens of one request",
            self.inter_token_latency.clone(),
        );
        r.register(
            "queue_length",
            "Requests waiting for the engine",
            self.queue_length.clone(),
        );
        r.register(
            "running_sequences",
            "Sequences in the engine's batch",
            self.running_sequences.clone(),
        );
        r.register(
            "kv_blocks_used",
            "KV blocks held by sequences",
            self.kv_blocks_used.clone(),
        );
        r.register(
            "kv_blocks_free",
            "KV blocks free (cached prefixes nobody holds count as free)",
            self.kv_blocks_free.clone(),
        );
        r.register(
            "ready",
            "1 when the engine runs, 0 while the model loads, -1 once the engine has stopped after a failure it could not recover from",
            self.ready.clone(),
        );
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = encode(&mut out, &r);
        out
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
