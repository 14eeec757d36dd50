//! `synth`: a small model file of one architecture with random weights (see
//! [`ch08_gguf::synth`]). Its own flags, parsed here:
//!
//! ```text
//! ch08-gguf synth --arch A --seed N --weights f32|q8_0|q4_0 [--shape small|wide|0.5b] [--vocab V] --out FILE
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use ch08_gguf::synth::{self, Arch, SHAPES, Shape, Spec, VOCABS, Weights};

pub const USAGE: &str = "\
usage: ch08-gguf synth --arch A --seed N --weights W [--shape S] [--vocab V] --out FILE

Writes a model file of architecture A with llama.cpp's tensor names and metadata, a real
vocabulary and random weights from seed N: the same arguments, the same bytes. FILE must
not exist.

  --arch A      llama3, mistral, qwen2, qwen3, phi3 or gemma2
  --seed N      the weights' seed (0 to 2^64 - 1)
  --weights W   f32, q8_0, or q4_0 (Q4_0 matrices, a Q8_0 embedding)
  --shape S     small (the default), wide, or 0.5b (Qwen2.5-0.5B's size, for bench)
  --vocab V     another vocabulary than the architecture's own: llama-bpe, llama-spm,
                qwen2, phi-3 or gemma3 (a Llama file the size of a Qwen one, for bench)
  --out FILE    where to write it";

fn parse() -> Result<Option<(Spec, PathBuf)>, String> {
    use lexopt::prelude::*;
    let (mut arch, mut seed, mut weights, mut shape, mut out) = (None, None, None, SHAPES[0], None);
    let mut vocab = None;
    let mut p = lexopt::Parser::from_args(std::env::args_os().skip(2));
    let e = |e: lexopt::Error| e.to_string();
    while let Some(arg) = p.next().map_err(e)? {
        match arg {
            Long("arch") => {
                let v = p.value().map_err(e)?.string().map_err(e)?;
                arch = Some(Arch::parse(&v).ok_or_else(|| format!("--arch: unknown {v:?}"))?);
            }
            Long("seed") => seed = Some(p.value().map_err(e)?.parse::<u64>().map_err(e)?),
            Long("weights") => {
                let v = p.value().map_err(e)?.string().map_err(e)?;
                weights =
                    Some(Weights::parse(&v).ok_or_else(|| format!("--weights: unknown {v:?}"))?);
            }
            Long("shape") => {
                let v = p.value().map_err(e)?.string().map_err(e)?;
                shape = Shape::parse(&v).ok_or_else(|| format!("--shape: unknown {v:?}"))?;
            }
            Long("vocab") => {
                let v = p.value().map_err(e)?.string().map_err(e)?;
                vocab = Some(
                    *VOCABS
                        .iter()
                        .find(|x| **x == v)
                        .ok_or_else(|| format!("--vocab: unknown {v:?}"))?,
                );
            }
            Long("out") => out = Some(PathBuf::from(p.value().map_err(e)?)),
            Short('h') | Long("help") => return Ok(None),
            other => return Err(other.unexpected().to_string()),
        }
    }
    let spec = Spec {
        arch: arch.ok_or("--arch is required")?,
        seed: seed.ok_or("--seed is required")?,
        weights: weights.ok_or("--weights is required")?,
        shape,
        vocab,
    };
    Ok(Some((spec, out.ok_or("--out FILE is required")?)))
}

pub fn main() -> ExitCode {
    let (spec, out) = match parse() {
        Ok(Some(x)) => x,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let written = synth::build(&spec).and_then(|w| w.write_new(&out));
    match written {
        Ok(()) => {
            println!("wrote {} ({})", out.display(), spec.args());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
