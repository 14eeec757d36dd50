//! One request through chapter 10's engine, steered by a grammar or left alone, timed: what
//! `generate --schema` prints, what the tests parse and what `bench` measures.

use ch02_tokenizer::Tokenizer;
use ch08_gguf::engine::Engine;
use ch10_batching::bench::closed_loop_config;
use ch10_batching::seq::KvPrecision;
use ch10_batching::{BatchEngine, Event, Request};

use crate::constrain::Constraint;

/// What came back, and how long its decode steps took.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The generated text (without the end token).
    pub text: String,
    /// Why it stopped: `eos`, `length` or `stop`.
    pub reason: String,
    /// The tokens generated, the end token included.
    pub ids: Vec<u32>,
    /// Tokens made by steps that ran no prompt rows, and those steps' seconds.
    pub decode_tokens: usize,
    pub decode_s: f64,
}

impl Answer {
    /// Decode speed: tokens a second over the steps after the prompt's.
    pub fn decode_tok_s(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_s.max(1e-9)
    }
}

// ANCHOR: run
/// Runs `request` alone through a fresh engine, under `steer` if it is given. The calling
/// thread's pool runs the model.
pub fn run(
    engine: Engine,
    tokenizer: &Tokenizer,
    request: Request,
    steer: Option<Constraint>,
) -> Result<Answer, String> {
    let prompt = request.prompt.len();
    let cfg = closed_loop_config(
        &engine,
        1,
        prompt,
        request.max_tokens,
        None,
        None,
        KvPrecision::F32,
    )?;
    let mut be = BatchEngine::new(engine, tokenizer, cfg).map_err(|e| e.to_string())?;
    let steer = steer.map(|s| Box::new(s) as Box<dyn ch10_batching::steer::Steer>);
    let (_, rx) = be
        .submit_steered(request, steer)
        .map_err(|e| e.to_string())?;
    let mut answer = Answer {
        text: String::new(),
        reason: String::new(),
        ids: Vec::new(),
        decode_tokens: 0,
        decode_s: 0.0,
    };
    while be.pending() > 0 {
        let t = std::time::Instant::now();
        let plan = be.step().map_err(|e| e.to_string())?;
        let seconds = t.elapsed().as_secs_f64();
        if plan.rows.iter().all(|c| c.start >= prompt) {
            answer.decode_tokens += plan.tokens();
            answer.decode_s += seconds;
        }
    }
    for event in rx.try_iter() {
        match event {
            Event::Token { id, text, .. } => {
                answer.text += &text;
                answer.ids.push(id);
            }
            Event::Done(f) => {
                answer.text += &f.text;
                answer.reason = f.reason.name().to_string();
            }
        }
    }
    Ok(answer)
}
// ANCHOR_END: run
