//! The command line: the usage text, the options, and the checks on them before any
//! command runs.

use std::path::PathBuf;

use ch09_generate::SamplerConfig;
use ch09_generate::sampling::SAMPLING_FLAGS;

pub const USAGE: &str = "\
usage: ch09-generate [-m FILE] -p TEXT [options]
       ch09-generate perplexity [-m FILE] --text FILE [--json]
       ch09-generate bench [-m FILE] [-t THREADS] [--compare] [--json]
       ch09-generate chat [-m FILE] [--system TEXT] [sampling options]
           one user turn per line of standard input; /reset forgets the conversation,
           /stats shows the last turn's cost, Ctrl-C stops a reply, end of input (Ctrl-D) exits
       ch09-generate stages [-m FILE] -p TEXT [sampling options] [--svg OUT.svg] [--json]
           the next token's distribution after each stage of the sampling chain
       ch09-generate roofline [-t THREADS] [--svg OUT.svg] [--json]
           both models' decode against the memory's read bandwidth: GB/s of weights
           streamed by a whole step, by the layers' products, by the LM head
       ch09-generate scale [-t THREADS] [--rounds R] [--markdown OUT.md] [--svg OUT.svg]
                           [--json] [FILE|NAME]...
           speed and memory against size, ours and llama.cpp: pp512, tg128, the decode
           ceiling, peak RSS. NAME: smollm2, gemma3, or llama-SHAPE-MIX (SHAPE 1b, 3b,
           7b or 9b; MIX q4_0 or q4_k_m), a synthetic file made on first use by
           scripts/make_synthetic_gguf.py [smollm2 gemma3 llama-1b-q4_0 llama-3b-q4_0
           llama-7b-q4_0 llama-7b-q4_k_m llama-9b-q4_0]

Generates text from a GGUF model (any family chapter 8 runs), streamed as it is made.

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  -p, --prompt TEXT       the prompt (special tokens such as <|im_start|> are parsed)
  -n, --n-predict N       tokens to generate at most [128]
  --temp T                temperature; 0 is greedy [0.8]
  --top-k K               keep the K most likely tokens; 0 is off [40]
  --top-p P               keep the fewest tokens whose probabilities reach P; 1 is off [0.95]
  --min-p P               keep tokens at least P times as likely as the best; 0 is off [0.05]
  --repeat-penalty R      divide (multiply, if negative) recent tokens' logits; 1 is off [1.0]
  --repeat-last-n N       how many recent tokens the penalties see [64]
  --frequency-penalty F   subtract F per occurrence in the recent tokens [0]
  --presence-penalty P    subtract P once from every recent token [0]
  --seed S                the random seed; the same seed gives the same text [0]
  --stop TEXT             stop when TEXT appears (may be given up to 16 times)
  -t, --threads N         threads [the machine's physical cores]
  --chat                  treat the prompt as a user turn, in the model's chat template
  --system TEXT           with --chat: a system message first
  --echo                  chat: print each turn, after `> `, before its reply (a transcript)
  --json                  print one JSON object: prompt_ids, generated_ids, text, stop_reason,
                          timings
  --verbose               print the sampling chain and the settings first (to stderr)
  --text FILE             perplexity: the text to score
  --compare               bench: also race llama.cpp: llama-bench's pp512/tg128, and llama-completion
                          as a whole process (cold, 32-token prompt, 1 token: time and peak memory);
                          build them first with bash scripts/llamacpp.sh
  --svg FILE              stages, roofline, scale: also draw the figure as SVG
  --markdown FILE         scale: also write the table as Markdown
  --rounds R              scale: alternating rounds per file (medians) [1]
  -h, --help              this text";

/// The parsed command line: which command, and every option (defaults filled in).
pub struct Args {
    pub command: String,
    pub text_file: Option<PathBuf>,
    pub compare: bool,
    pub svg: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub rounds: usize,
    /// `scale`'s files and names.
    pub files: Vec<String>,
    pub model: Option<PathBuf>,
    pub prompt: Option<String>,
    pub n: usize,
    pub threads: usize,
    pub stops: Vec<String>,
    pub json: bool,
    pub verbose: bool,
    pub chat: bool,
    pub echo: bool,
    pub system: Option<String>,
    pub sampling: SamplerConfig,
}

const MAX_NEW_TOKENS: usize = 1 << 16;
const MAX_THREADS: usize = 256;
const MAX_STOPS: usize = 16;
const MAX_STOP_BYTES: usize = 256;
/// The longest line `chat` reads as one turn.
pub const MAX_TURN_BYTES: u64 = 1 << 20;

fn number<T: std::str::FromStr>(p: &mut lexopt::Parser, flag: &str) -> Result<T, lexopt::Error> {
    use lexopt::ValueExt;
    let v = p.value()?.string()?;
    v.parse()
        .map_err(|_| format!("{flag}: {v:?} is not a valid number").into())
}

pub fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: "generate".into(),
        text_file: None,
        compare: false,
        svg: None,
        markdown: None,
        rounds: 1,
        files: Vec::new(),
        model: None,
        prompt: None,
        n: 128,
        threads: ch07_simd_parallel::cores::physical_cores(),
        stops: Vec::new(),
        json: false,
        verbose: false,
        chat: false,
        echo: false,
        system: None,
        sampling: SamplerConfig::default(),
    };
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Short('m') | Long("model") => a.model = Some(p.value()?.into()),
            Short('p') | Long("prompt") => a.prompt = Some(p.value()?.string()?),
            Short('n') | Long("n-predict") => a.n = number(&mut p, "-n")?,
            Short('t') | Long("threads") => a.threads = number(&mut p, "--threads")?,
            Long(flag) if SAMPLING_FLAGS.contains(&flag) => {
                let flag = flag.to_owned();
                a.sampling.set_flag(&flag, p.value()?)?
            }
            Long("stop") => a.stops.push(p.value()?.string()?),
            Long("json") => a.json = true,
            Long("verbose") => a.verbose = true,
            Long("chat") => a.chat = true,
            Long("echo") => a.echo = true,
            Long("system") => a.system = Some(p.value()?.string()?),
            Long("text") => a.text_file = Some(p.value()?.into()),
            Long("compare") => a.compare = true,
            Long("svg") => a.svg = Some(p.value()?.into()),
            Long("markdown") => a.markdown = Some(p.value()?.into()),
            Long("rounds") => a.rounds = number(&mut p, "--rounds")?,
            Value(v) if a.command == "scale" => a.files.push(v.string()?),
            Value(v) if a.command == "generate" && a.prompt.is_none() => {
                let v = v.string()?;
                match v.as_str() {
                    "perplexity" | "bench" | "chat" | "stages" | "roofline" | "scale" => {
                        a.command = v
                    }
                    other => return Err(format!(
                        "unknown command {other:?} (chat, stages, perplexity, bench, roofline or scale; generating needs -p TEXT)"
                    )
                    .into()),
                }
            }
            Short('h') | Long("help") => return Ok(None),
            _ => return Err(arg.unexpected()),
        }
    }
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    check(
        !matches!(a.command.as_str(), "generate" | "stages") || a.prompt.is_some(),
        "a prompt is needed: -p TEXT",
    )?;
    check(
        a.svg.is_none() || matches!(a.command.as_str(), "stages" | "roofline" | "scale"),
        "--svg goes with stages, roofline or scale",
    )?;
    let scale = a.command == "scale";
    check(a.markdown.is_none() || scale, "--markdown goes with scale")?;
    check(a.rounds == 1 || scale, "--rounds goes with scale")?;
    check(
        (1..=20).contains(&a.rounds),
        "--rounds must be between 1 and 20",
    )?;
    check(
        a.model.is_none() || !scale,
        "scale takes its files as arguments (scale FILE...), not -m",
    )?;
    check(!a.echo || a.command == "chat", "--echo goes with chat")?;
    check(
        a.command != "perplexity" || a.text_file.is_some(),
        "perplexity needs --text FILE",
    )?;
    check(
        a.text_file.is_none() || a.command == "perplexity",
        "--text goes with perplexity",
    )?;
    check(
        !a.compare || a.command == "bench",
        "--compare goes with bench",
    )?;
    check(
        (1..=MAX_NEW_TOKENS).contains(&a.n),
        "-n must be between 1 and 65536",
    )?;
    check(
        (1..=MAX_THREADS).contains(&a.threads),
        "--threads must be between 1 and 256",
    )?;
    a.sampling.check()?;
    check(
        a.system.is_none() || a.chat || a.command == "chat",
        "--system goes with --chat or chat",
    )?;
    check(a.stops.len() <= MAX_STOPS, "at most 16 --stop strings")?;
    check(
        a.stops
            .iter()
            .all(|s| !s.is_empty() && s.len() <= MAX_STOP_BYTES),
        "a --stop string must be 1 to 256 bytes",
    )?;
    Ok(Some(a))
}
