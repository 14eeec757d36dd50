//! `ch09-generate`: text from a GGUF file, sampled the way people expect, streamed.
//!
//! ```text
//! ch09-generate [-m FILE] -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
//!               [--repeat-penalty R] [--repeat-last-n N] [--seed S] [-t THREADS]
//!               [--stop TEXT]... [--json] [--verbose]
//! ch09-generate stages [-m FILE] -p TEXT [sampling options] [--svg OUT.svg] [--json]
//! ch09-generate scale [FILE|NAME]... [--markdown OUT.md] [--svg OUT.svg]
//! ```
//!
//! `cli.rs` reads and checks the options (`--help` prints them all); `commands.rs` holds
//! the commands that make text (generate, `chat`, `stages`, `perplexity`), and
//! `measure.rs` those that time it (`bench`, `roofline`), and `scale.rs` the table of
//! speed and memory against the model's size.

use std::process::ExitCode;

mod cli;
mod commands;
mod measure;
mod scale;

use cli::{USAGE, parse_args};

fn main() -> ExitCode {
    ch01_tensors::pipe::quiet_when_closed();
    let process_start = std::time::Instant::now();
    // A chat template renders in a child of this program (see `chat::sandbox`).
    if let Some(code) = ch09_generate::chat::sandbox::child_main() {
        return code;
    }
    let args = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match args.command.as_str() {
        "perplexity" => commands::perplexity(&args),
        "bench" => measure::bench(&args, process_start),
        "chat" => commands::chat(&args),
        "stages" => commands::stages(&args),
        "roofline" => measure::roofline(&args),
        "scale" => scale::scale(&args),
        _ => commands::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
