//! The scheduler at work, drawn: a fixed workload run through [`crate::scheduler::plan`]
//! alone (no model: the scheduler only sees numbers), one row of the figure per step.
//!
//! The simulation applies each plan the way the engine does, without prefix sharing:
//! preempted sequences lose their blocks and start over, admitted ones start, every row
//! computes one position, and a sequence that has computed all its tokens gains one (the
//! sampled token) until its reply is complete.

use crate::scheduler::{Chunk, Limits, Plan, SeqState, plan};

/// A request of the simulated workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The step at which it is submitted.
    pub step: usize,
    pub prompt: usize,
    pub reply: usize,
}

/// One step of a simulation: the plan, and who finished after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepTrace {
    pub plan: Plan,
    pub finished: Vec<usize>,
    pub free_blocks: usize,
}

/// Runs `arrivals` through the scheduler in a pool of `n_blocks` blocks until all finish
/// (or `max_steps` pass).
pub fn simulate(
    arrivals: &[Arrival],
    limits: Limits,
    n_blocks: usize,
    max_steps: usize,
) -> Vec<StepTrace> {
    let bs = limits.block_size;
    let mut seqs: Vec<(SeqState, usize)> = Vec::new(); // (state, tokens at which it is done)
    let mut out = Vec::new();
    for step in 0..max_steps {
        for (id, a) in arrivals.iter().enumerate().filter(|(_, a)| a.step == step) {
            let s = SeqState {
                id,
                running: false,
                tokens: a.prompt,
                computed: 0,
                blocks: 0,
                freeable: 0,
            };
            seqs.push((s, a.prompt + a.reply));
        }
        if seqs.is_empty() && arrivals.iter().all(|a| a.step < step) {
            break;
        }
        let used: usize = seqs.iter().map(|(s, _)| s.blocks).sum();
        let states: Vec<SeqState> = seqs.iter().map(|(s, _)| s.clone()).collect();
        let p = plan(
            &states,
            Limits {
                free_blocks: n_blocks - used,
                ..limits
            },
        );
        for (s, _) in seqs.iter_mut() {
            if p.preempted.contains(&s.id) {
                (s.running, s.computed, s.blocks, s.freeable) = (false, 0, 0, 0);
            }
            if p.admitted.contains(&s.id) {
                s.running = true;
            }
        }
        let mut finished = Vec::new();
        for c in &p.rows {
            let (s, done) = seqs
                .iter_mut()
                .find(|(s, _)| s.id == c.id)
                .expect("planned");
            s.computed += c.len;
            s.blocks = s.blocks.max(s.computed.div_ceil(bs));
            s.freeable = s.blocks;
            if s.computed == s.tokens {
                s.tokens += 1;
                if s.tokens == *done {
                    finished.push(s.id);
                }
            }
        }
        seqs.retain(|(s, _)| !finished.contains(&s.id));
        let used: usize = seqs.iter().map(|(s, _)| s.blocks).sum();
        out.push(StepTrace {
            plan: p,
            finished,
            free_blocks: n_blocks - used,
        });
    }
    out
}

/// The book's workload: six requests, a token budget of 16 a step, a pool of 10 blocks of
/// 4 positions — small enough that the youngest is preempted once.
pub fn book_workload() -> (Vec<Arrival>, Limits, usize) {
    let a = |step, prompt, reply| Arrival {
        step,
        prompt,
        reply,
    };
    let arrivals = vec![
        a(0, 10, 6),
        a(0, 5, 10),
        a(1, 20, 5),
        a(2, 3, 12),
        a(4, 12, 4),
        a(6, 4, 8),
    ];
    let limits = Limits {
        block_size: 4,
        free_blocks: 0,
        max_batch_tokens: 16,
        max_seqs: 8,
    };
    (arrivals, limits, 10)
}

const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f",
];

fn cell(c: &Chunk, x: f64, w: f64, y: f64, h: f64, prompt: bool) -> String {
    let fill = COLOURS[c.id % COLOURS.len()];
    let opacity = if prompt { "0.45" } else { "1" };
    format!(
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" fill-opacity=\"{opacity}\" stroke=\"white\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n",
        x + w / 2.0,
        y + h - 4.0,
        if w >= 14.0 {
            format!("{}", c.id)
        } else {
            String::new()
        }
    )
}

/// The timeline as SVG: one row per step, one cell per row of the batch, coloured by
/// request (pale: prompt rows, solid: decode rows), and on the right who was admitted (+),
/// preempted (−) and finished (✓).
pub fn svg(trace: &[StepTrace], limits: Limits, prompts: &[usize]) -> String {
    let (left, top, cw, rh) = (60.0, 50.0, 22.0, 18.0);
    let width = left + cw * limits.max_batch_tokens as f64 + 220.0;
    let height = top + rh * trace.len() as f64 + 40.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"20\" font-size=\"14\">The scheduler, step by step: {} rows a step, {} requests</text>\n\
         <text x=\"{left}\" y=\"38\" font-size=\"11\">one cell per row of the batch, coloured by request (pale: prompt rows; solid: decode rows)</text>\n",
        limits.max_batch_tokens,
        prompts.len()
    );
    for (i, st) in trace.iter().enumerate() {
        let y = top + rh * i as f64;
        s += &format!(
            "<text x=\"{:.0}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">step {i}</text>\n",
            left - 6.0,
            y + rh - 5.0
        );
        let mut x = left;
        for c in &st.plan.rows {
            let w = cw * c.len as f64;
            s += &cell(c, x, w, y, rh, c.start < prompts[c.id]);
            x += w;
        }
        let mut notes = Vec::new();
        notes.extend(st.plan.admitted.iter().map(|id| format!("+{id}")));
        notes.extend(st.plan.preempted.iter().map(|id| format!("−{id}")));
        notes.extend(st.finished.iter().map(|id| format!("✓{id}")));
        let note = format!("{}  free blocks {}", notes.join(" "), st.free_blocks);
        let nx = left + cw * limits.max_batch_tokens as f64 + 8.0;
        s += &format!(
            "<text x=\"{nx:.0}\" y=\"{:.1}\" font-size=\"11\">{note}</text>\n",
            y + rh - 5.0
        );
    }
    s += "</svg>\n";
    s
}

/// The timeline as text, one line per step.
pub fn table(trace: &[StepTrace], prompts: &[usize]) -> String {
    let mut out = String::new();
    for (i, st) in trace.iter().enumerate() {
        let rows: Vec<String> = st
            .plan
            .rows
            .iter()
            .map(|c| {
                let kind = if c.start < prompts[c.id] {
                    "prompt"
                } else {
                    "decode"
                };
                format!(
                    "{}:{kind}{}",
                    c.id,
                    if c.len > 1 {
                        format!("×{}", c.len)
                    } else {
                        String::new()
                    }
                )
            })
            .collect();
        let mut notes = Vec::new();
        notes.extend(st.plan.admitted.iter().map(|id| format!("admit {id}")));
        notes.extend(st.plan.preempted.iter().map(|id| format!("preempt {id}")));
        notes.extend(st.finished.iter().map(|id| format!("finish {id}")));
        out += &format!(
            "step {i:>2} [{:>2} rows] {}",
            st.plan.tokens(),
            rows.join(" ")
        );
        if !notes.is_empty() {
            out += &format!("   ({})", notes.join(", "));
        }
        out += &format!("   free {}\n", st.free_blocks);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_workload_finishes_everyone_within_the_pool_and_preempts_once_at_least() {
        let (arrivals, limits, n_blocks) = book_workload();
        let t = simulate(&arrivals, limits, n_blocks, 200);
        assert!(t.len() < 200, "someone starved");
        let finished: usize = t.iter().map(|s| s.finished.len()).sum();
        assert_eq!(finished, arrivals.len());
        assert!(
            t.iter().any(|s| !s.plan.preempted.is_empty()),
            "the pool was meant to be too small"
        );
        assert!(t.iter().all(|s| s.plan.tokens() <= limits.max_batch_tokens));
        assert_eq!(t.last().unwrap().free_blocks, n_blocks);
    }

    #[test]
    fn many_random_workloads_all_finish() {
        let mut rng = ch09_generate::rng::Rng::new(7);
        for _ in 0..200 {
            let n_blocks = 4 + (rng.next_u64() % 12) as usize;
            let arrivals: Vec<Arrival> = (0..8)
                .map(|_| {
                    let prompt = 1 + (rng.next_u64() % 12) as usize;
                    let reply =
                        1 + (rng.next_u64() % (4 * n_blocks - prompt).min(12) as u64) as usize;
                    Arrival {
                        step: (rng.next_u64() % 10) as usize,
                        prompt,
                        reply,
                    }
                })
                .collect();
            let limits = Limits {
                block_size: 4,
                free_blocks: 0,
                max_batch_tokens: 1 + (rng.next_u64() % 16) as usize,
                max_seqs: 1,
            };
            let limits = Limits {
                max_seqs: limits.max_batch_tokens.min(4),
                ..limits
            };
            let t = simulate(&arrivals, limits, n_blocks, 5000);
            let finished: usize = t.iter().map(|s| s.finished.len()).sum();
            assert_eq!(
                finished, 8,
                "{arrivals:?} in {n_blocks} blocks, {limits:?}: a request starved"
            );
        }
    }
}
