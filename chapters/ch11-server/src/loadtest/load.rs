//! The load: C clients taking the mix's requests in turn until none is left, and the
//! [`Report`] of what they saw.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use ch07_simd_parallel::stats::percentile;

use super::client::{Seen, get_json, one, streamed_tok_s};
use super::mix::plan;
use super::options::{LoadOptions, MAX_SECONDS, REQUEST_TIMEOUT};

/// The numbers of one load test.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub target: String,
    pub clients: usize,
    pub seconds: f64,
    pub output_tokens: usize,
    pub output_tok_s: f64,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p99: f64,
    pub itl_ms_p50: f64,
    pub itl_ms_p99: f64,
    /// One stream's pace: the gaps between tokens, counted over the seconds they took
    /// (every request's tokens after its first; a client's decode tok/s).
    pub streamed_tok_s: f64,
    pub completed: usize,
    pub cancelled: usize,
    pub errors: BTreeMap<String, usize>,
}

impl Report {
    pub fn json(&self) -> Value {
        json!({"target": self.target, "clients": self.clients, "seconds": self.seconds,
               "output_tokens": self.output_tokens, "output_tok_s": self.output_tok_s,
               "ttft_ms_p50": self.ttft_ms_p50, "ttft_ms_p99": self.ttft_ms_p99,
               "itl_ms_p50": self.itl_ms_p50, "itl_ms_p99": self.itl_ms_p99,
               "streamed_tok_s": self.streamed_tok_s,
               "completed": self.completed, "cancelled": self.cancelled,
               "errors": self.errors.values().sum::<usize>(), "errors_by_kind": self.errors})
    }

    pub fn text(&self) -> String {
        let errors = if self.errors.is_empty() {
            "none".to_string()
        } else {
            self.errors
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{}: {} clients, {} completed, {} cancelled, errors: {errors}\n  output {:.1} tok/s ({} tokens in {:.1} s)\n  time to first token  p50 {:.1} ms  p99 {:.1} ms\n  inter-token latency  p50 {:.1} ms  p99 {:.1} ms",
            self.target,
            self.clients,
            self.completed,
            self.cancelled,
            self.output_tok_s,
            self.output_tokens,
            self.seconds,
            self.ttft_ms_p50,
            self.ttft_ms_p99,
            self.itl_ms_p50,
            self.itl_ms_p99
        )
    }
}

/// Runs the load against `addr`.
pub async fn run(addr: SocketAddr, o: &LoadOptions) -> Result<Report, String> {
    let models = get_json(addr, "/v1/models").await?;
    let model = models["data"][0]["id"]
        .as_str()
        .ok_or("GET /v1/models listed no model")?
        .to_string();
    let planned = Arc::new(plan(o));
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(MAX_SECONDS);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..o.clients {
        let (planned, next, model) = (planned.clone(), next.clone(), model.clone());
        tasks.push(tokio::spawn(async move {
            let mut all = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= planned.len() || Instant::now() > deadline {
                    return all;
                }
                let seen = tokio::time::timeout(REQUEST_TIMEOUT, one(addr, &model, &planned[i]))
                    .await
                    .unwrap_or_else(|_| Seen {
                        error: Some("timeout".into()),
                        ..Seen::default()
                    });
                all.push(seen);
            }
        }));
    }
    let mut seen = Vec::new();
    for t in tasks {
        seen.extend(t.await.map_err(|e| format!("a client failed: {e}"))?);
    }
    let seconds = start.elapsed().as_secs_f64();
    let ttft: Vec<f64> = seen.iter().filter_map(|s| s.ttft_ms).collect();
    let gaps: Vec<f64> = seen
        .iter()
        .flat_map(|s| s.gaps_ms.iter().copied())
        .collect();
    let mut errors = BTreeMap::new();
    for e in seen.iter().filter_map(|s| s.error.clone()) {
        *errors.entry(e).or_insert(0) += 1;
    }
    let output_tokens = seen.iter().map(|s| s.tokens).sum();
    Ok(Report {
        target: model,
        clients: o.clients,
        seconds,
        output_tokens,
        output_tok_s: output_tokens as f64 / seconds,
        ttft_ms_p50: percentile(&ttft, 0.5),
        ttft_ms_p99: percentile(&ttft, 0.99),
        itl_ms_p50: percentile(&gaps, 0.5),
        itl_ms_p99: percentile(&gaps, 0.99),
        streamed_tok_s: streamed_tok_s(&gaps),
        completed: seen
            .iter()
            .filter(|s| s.error.is_none() && !s.cancelled)
            .count(),
        cancelled: seen.iter().filter(|s| s.cancelled).count(),
        errors,
    })
}
