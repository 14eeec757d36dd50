//! `ch11-server`: chapter 10's engine behind OpenAI's HTTP API, and a load test for it.

use std::path::PathBuf;
use std::process::ExitCode;

use ch01_tensors::models;
use ch11_server::launch::{self, ServeOptions, number};
use ch11_server::loadtest::{self, LoadOptions};

const USAGE: &str = "\
usage: ch11-server [-m FILE] [--host 127.0.0.1] [--port 8080] [--parallel N] [--kv-mb MB]
                   [--ctx N] [--api-key KEY] [-t THREADS] [--queue N] [--body-limit BYTES]
                   [--client-timeout SECS] [--cors]
           serve OpenAI's API (POST /v1/chat/completions, /v1/completions; GET /v1/models,
           /health, /metrics) and a chat page at /
       ch11-server loadtest --url URL --clients C --requests R [--prompt 128] [--reply 128]
                   [--cancel-rate P] [--seed N] [--json]
           C clients send R streamed completions in all to the server at URL (loopback only)
           and report output tok/s, time to first token and inter-token latency
       ch11-server loadtest --compare [-m FILE] [-t THREADS] [--parallel N] --clients C
                   --requests R [...]
           the same load against this server and against llama-server, each started here on
           the same GGUF with the same slots and threads
       ch11-server demo [-m FILE]
           start a server, send it a few requests, and print what a client sees

options (defaults in brackets):
  -m, --model FILE        the GGUF file [SmolLM2-135M-Instruct Q4_1, fetched on first use]
  --host ADDR             the address to listen on [127.0.0.1: this machine only]
  --port N                the port; 0 picks a free one [8080]
  --parallel N            sequences in the engine's batch at most, 1 to 64 [8]
  --queue N               requests waiting beyond those, 0 to 4096; more get a 503 [32]
  --kv-mb MB              the KV pool, in MB of f32 keys and values [256]
  --ctx N                 positions one request may use, prompt and reply [the model's,
                          at most 4096 and at most what the KV pool holds]
  --api-key KEY           require 'Authorization: Bearer KEY' on /v1 (or set LLM_BOOK_API_KEY)
  -t, --threads N         threads for the model [the machine's physical cores]
  --body-limit BYTES      the largest request body [2097152]
  --client-timeout SECS   how long a client may take to send its headers, or the next
                          piece of its body [10]
  --cors                  allow requests from pages of any origin
  --json                  loadtest: one JSON object
  -h, --help              this text";

pub struct Args {
    pub command: String,
    pub serve: ServeOptions,
    pub load: LoadOptions,
    pub compare: bool,
}

fn parse_args() -> Result<Option<Args>, lexopt::Error> {
    use lexopt::prelude::*;
    let mut a = Args {
        command: "serve".into(),
        serve: ServeOptions::default(),
        load: LoadOptions::default(),
        compare: false,
    };
    let mut first = true;
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        // the flag's name, owned, so that the parser can be asked for its value
        let (name, value) = match arg {
            Short(c) => (c.to_string(), None),
            Long(l) => (l.to_string(), None),
            Value(v) => (String::new(), Some(v)),
        };
        if value.is_none() && a.serve.flag(&name, &mut p)? {
            first = false;
            continue;
        }
        match (name.as_str(), value) {
            (_, Some(v)) if first && v == "loadtest" => a.command = "loadtest".into(),
            (_, Some(v)) if first && v == "demo" => a.command = "demo".into(),
            ("url", _) => a.load.url = Some(p.value()?.string()?),
            ("clients", _) => a.load.clients = number(&mut p, "--clients")?,
            ("requests", _) => a.load.requests = number(&mut p, "--requests")?,
            ("prompt", _) => a.load.prompt = number(&mut p, "--prompt")?,
            ("reply", _) => a.load.reply = number(&mut p, "--reply")?,
            ("cancel-rate", _) => a.load.cancel_rate = number(&mut p, "--cancel-rate")?,
            ("seed", _) => a.load.seed = number(&mut p, "--seed")?,
            ("json", _) => a.load.json = true,
            ("compare", _) => a.compare = true,
            ("h" | "help", _) => return Ok(None),
            (_, Some(v)) => {
                return Err(format!(
                    "unexpected argument {:?} (the commands are loadtest and demo)",
                    v.string()?
                )
                .into());
            }
            (flag, None) => {
                let dashes = if flag.len() == 1 { "-" } else { "--" };
                return Err(format!("invalid option '{dashes}{flag}'").into());
            }
        }
        first = false;
    }
    let check = |ok: bool, msg: &str| -> Result<(), lexopt::Error> {
        if ok {
            Ok(())
        } else {
            Err(msg.to_string().into())
        }
    };
    a.serve.check().map_err(lexopt::Error::from)?;
    if a.command == "loadtest" {
        check(
            a.load.url.is_some() != a.compare,
            "loadtest needs --url URL, or --compare (not both)",
        )?;
        a.load.check().map_err(lexopt::Error::from)?;
    } else {
        check(
            !a.compare && a.load.url.is_none(),
            "--url and --compare go with loadtest",
        )?;
    }
    Ok(Some(a))
}

pub fn model_path(a: &Args) -> Result<PathBuf, String> {
    match &a.serve.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = models::smollm2_gguf();
            if !p.exists() {
                models::fetch("smollm2-gguf")?; // the GGUF alone, as chapter 9 fetches it
            }
            models::require(&p)
        }
    }
}

fn main() -> ExitCode {
    // A chat template renders in a child of this program (see chapter 9's `chat::sandbox`).
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
    let result = if args.command == "demo" {
        model_path(&args).and_then(|m| ch11_server::demo::run(&m))
    } else if args.command == "loadtest" {
        if args.compare {
            model_path(&args).and_then(|m| {
                loadtest::compare(&args.load, &m, args.serve.threads, args.serve.parallel)
            })
        } else {
            loadtest::run_and_print(&args.load)
        }
    } else {
        model_path(&args).and_then(|m| launch::serve_main(&args.serve, &m, "ch11-server", None))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
