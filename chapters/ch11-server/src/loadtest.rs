//! The load test: C clients, R streamed completions in all, against any server that speaks
//! OpenAI's API on this machine.
//!
//! Every request is drawn from one seeded generator, so two runs (or two servers) get the
//! same prompts, reply lengths and cancellations: prompt and reply lengths each uniform in
//! [n/2, 3n/2] around `--prompt` and `--reply` (the prompt in common one-token words), and
//! with `--cancel-rate P` a fraction P of the requests hang up after a random number of
//! tokens. Replies ignore the end-of-text token (`ignore_eos`, which llama-server reads too),
//! so a request's length is what was asked. The client is hyper's own HTTP/1.1 connection,
//! one per request, on a single-threaded runtime that leaves the cores to the server.
//! The options are in `loadtest/options.rs`, the mix is drawn in `loadtest/mix.rs`, one
//! request is sent and timed in `loadtest/client.rs`, the clients run in `loadtest/load.rs`,
//! and `--compare` starts both servers in `loadtest/llama_server.rs`.

mod alone;
mod client;
mod llama_server;
mod load;
mod mix;
mod options;

pub(crate) use client::{runtime, send};
pub use llama_server::compare;
pub(crate) use llama_server::{Started, free_port, wait_healthy};
pub use load::{Report, run};
pub use options::{LoadOptions, MAX_SECONDS, REQUEST_TIMEOUT, loopback};

/// `loadtest --url URL`.
pub fn run_and_print(o: &LoadOptions) -> Result<(), String> {
    let addr = loopback(o.url.as_deref().ok_or("loadtest needs --url")?)?;
    let report = runtime()?.block_on(run(addr, o))?;
    if o.json {
        println!("{}", report.json());
    } else {
        println!("{}", report.text());
    }
    Ok(())
}
