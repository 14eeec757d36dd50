//! The engine thread: the one owner of the model, running chapter 10's step loop.
//!
//! HTTP tasks never touch the engine. They send a [`Command`] down a channel and get back a
//! tokio receiver of [`Out`]s for their request. The thread alternates two things, as
//! llama.cpp's server loop does: take the new commands (sleeping when there is nothing to
//! run), then advance every sequence by one [`BatchEngine::step`] and forward the tokens it
//! made. A request whose receiver is gone (the client hung up) is cancelled before the next
//! step, so its KV blocks return at once.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};

use ch08_gguf::Loaded;
use ch10_batching::seq::KvPrecision;
use ch10_batching::steer::Steer;
use ch10_batching::{BatchEngine, Config, Event, Finished, Request};

use crate::metrics::Metrics;

/// How the engine is set up.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Sequences in the batch at most (`--parallel`).
    pub parallel: usize,
    /// The KV pool, in MB (`--kv-mb`).
    pub kv_mb: usize,
    /// Rows in one step at most.
    pub max_batch_tokens: usize,
    /// Threads for the model's kernels (`-t`).
    pub threads: usize,
    /// Tests only: a request with the stop string [`PANIC_STOP`] makes the engine panic,
    /// one with [`STUCK_STOP`] makes it panic and then fail to restart.
    pub fault_injection: bool,
}

/// With [`Settings::fault_injection`], the stop string that makes the engine panic mid-step.
pub const PANIC_STOP: &str = "<<panic in the engine>>";

/// With [`Settings::fault_injection`], the stop string that makes the engine panic mid-step
/// and its restart fail: the server stays up, and says it can no longer serve.
pub const STUCK_STOP: &str = "<<the engine cannot restart>>";

/// [`crate::metrics::Metrics::ready`] once the engine has stopped for good (1: it runs, 0:
/// it is loading).
pub const FAILED: i64 = -1;

// ANCHOR: messages
/// What an HTTP task asks of the engine thread.
pub enum Command {
    /// Queue `req`, under `steer` if given (chapter 12's grammar); the answer is the receiver
    /// of its tokens, or why it was refused.
    Submit {
        req: Request,
        steer: Option<Box<dyn Steer>>,
        reply: oneshot::Sender<Result<mpsc::UnboundedReceiver<Out>, ch10_batching::Error>>,
    },
    /// End every request and stop.
    Shutdown,
}

/// What a request's HTTP task receives.
#[derive(Debug)]
pub enum Out {
    Token {
        id: u32,
        text: String,
        /// `(vocab)`, when the request asked for log-probabilities.
        logits: Option<Vec<f32>>,
    },
    Done(Finished),
    /// The engine failed while this request was in it: its answer is a 500.
    Failed(String),
}
// ANCHOR_END: messages

/// The HTTP side's handle on the engine thread.
#[derive(Clone)]
pub struct Worker {
    tx: Sender<Command>,
}

impl Worker {
    /// Sends `cmd`; `false` when the engine thread has stopped.
    pub fn send(&self, cmd: Command) -> bool {
        self.tx.send(cmd).is_ok()
    }
}

/// A request in flight: its engine id, the engine's receiver, and the HTTP task's sender.
struct Live {
    id: usize,
    events: Receiver<Event>,
    out: mpsc::UnboundedSender<Out>,
}

/// Starts the engine thread on `model`. `ready` gets `Ok` once the KV pool is allocated, or
/// the reason the engine could not start.
pub fn spawn(
    model: &'static Loaded,
    settings: Settings,
    metrics: Metrics,
    ready: oneshot::Sender<Result<(), String>>,
) -> (Worker, JoinHandle<()>) {
    let (tx, rx) = channel();
    let handle = std::thread::Builder::new()
        .name("engine".into())
        .spawn(move || {
            let body = move || match new_engine(model, &settings) {
                Ok(mut engine) => {
                    metrics.ready.set(1);
                    let _ = ready.send(Ok(()));
                    run(&mut engine, model, &settings, &rx, &metrics);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            };
            if let Err(e) = ch07_simd_parallel::pool::in_pool(settings.threads, body) {
                eprintln!("error: the engine could not start: {e}");
            }
        })
        .expect("the OS starts a thread");
    (Worker { tx }, handle)
}

/// The batched engine over `model`, sized by `settings`.
pub fn new_engine(model: &'static Loaded, s: &Settings) -> Result<BatchEngine<'static>, String> {
    let engine = model.engine()?;
    let mut cfg = Config::with_kv(&engine, s.kv_mb, KvPrecision::F32, s.max_batch_tokens)
        .map_err(|e| e.to_string())?;
    cfg.max_seqs = s.parallel.min(cfg.max_batch_tokens);
    BatchEngine::new(engine, &model.tokenizer.tokenizer, cfg).map_err(|e| e.to_string())
}

// ANCHOR: run
/// The loop: new commands, drop the abandoned, one step, forward its tokens.
fn run(
    be: &mut BatchEngine<'static>,
    model: &'static Loaded,
    settings: &Settings,
    rx: &Receiver<Command>,
    metrics: &Metrics,
) {
    let mut live: Vec<Live> = Vec::new();
    let mut poisoned: Option<(usize, bool)> = None; // (request, and its restart fails too)
    loop {
        // Nothing to run: sleep until a command comes (or every sender is gone).
        let mut next = if be.pending() == 0 {
            rx.recv().map_err(|_| TryRecvError::Disconnected)
        } else {
            rx.try_recv()
        };
        loop {
            match next {
                Ok(Command::Submit { req, steer, reply }) => {
                    let fault = |stop: &str| {
                        settings.fault_injection && req.stops.iter().any(|s| s == stop)
                    };
                    let stuck = fault(STUCK_STOP);
                    let poison = stuck || fault(PANIC_STOP);
                    match be.submit_steered(req, steer) {
                        Ok((id, events)) => {
                            let (out, receiver) = mpsc::unbounded_channel();
                            if reply.send(Ok(receiver)).is_ok() {
                                live.push(Live { id, events, out });
                                poisoned = poisoned.or(poison.then_some((id, stuck)));
                            } else {
                                let _ = be.cancel(id); // the client left while we queued it
                            }
                        }
                        Err(e) => {
                            let _ = reply.send(Err(e));
                        }
                    }
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => {
                    for l in &live {
                        let _ = be.cancel(l.id);
                    }
                    forward(&mut live);
                    publish(be, metrics);
                    return;
                }
                Err(TryRecvError::Empty) => break,
            }
            next = rx.try_recv();
        }
        // ANCHOR_END: run
        // ANCHOR: step
        // A client that hung up: cancel its sequence now, its blocks go back to the pool.
        live.retain(|l| {
            let gone = l.out.is_closed();
            if gone {
                let _ = be.cancel(l.id);
            }
            !gone
        });
        if be.pending() > 0 {
            let stepped = catch_unwind(AssertUnwindSafe(|| {
                let plan = be.step();
                if let Some((id, _)) = poisoned
                    && live.iter().any(|l| l.id == id)
                {
                    panic!("injected fault: the engine panics while running request {id}");
                }
                plan
            }));
            let failure = match stepped {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(panic) => Some(panic_message(&*panic)),
            };
            if let Some(why) = failure {
                // Every request the engine holds, running or queued, fails with a 500; a fresh
                // engine serves the requests that come after. The restart comes first, so
                // that a client told of the failure finds /health already saying how it went.
                eprintln!("error: the engine failed: {why}; its requests get a 500, restarting it");
                let stuck = poisoned.take().is_some_and(|(_, stuck)| stuck);
                let fresh = if stuck {
                    Err("injected fault: the engine cannot restart".to_string())
                } else {
                    new_engine(model, settings)
                };
                let restarted = match fresh {
                    Ok(fresh) => {
                        *be = fresh;
                        true
                    }
                    Err(e) => {
                        // The server stays up to say so: /health and every request answer 503.
                        eprintln!("error: the engine could not restart: {e}");
                        metrics.ready.set(FAILED);
                        false
                    }
                };
                for l in live.drain(..) {
                    let _ = l.out.send(Out::Failed(why.clone()));
                }
                if !restarted {
                    return;
                }
            }
        }
        // the gauges first: a client that reads /metrics after its token sees this step
        publish(be, metrics);
        forward(&mut live);
        // ANCHOR_END: step
    }
}

/// Moves every event the last step made to its HTTP task; a finished request leaves `live`.
fn forward(live: &mut Vec<Live>) {
    live.retain(|l| {
        for ev in l.events.try_iter() {
            match ev {
                Event::Token { id, text, logits } => {
                    let _ = l.out.send(Out::Token { id, text, logits });
                }
                Event::Done(f) => {
                    let _ = l.out.send(Out::Done(f));
                    return false;
                }
            }
        }
        true
    });
}

/// The engine's gauges, after every step.
fn publish(be: &BatchEngine, m: &Metrics) {
    let (pending, running) = (be.pending(), be.running());
    let free = be.free_blocks();
    m.queue_length.set((pending - running) as i64);
    m.running_sequences.set(running as i64);
    m.kv_blocks_free.set(free as i64);
    m.kv_blocks_used.set((be.config().n_blocks - free) as i64);
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}
