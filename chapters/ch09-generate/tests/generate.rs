//! The generator on hand-made logits and on both real models.

use std::sync::OnceLock;

use ch01_tensors::models;
use ch09_generate::sampling::{Candidate, probabilities};
use ch09_generate::{Sampler, SamplerConfig, StopReason, generate};

#[test]
fn the_chain_draws_from_exactly_the_distribution_it_describes() {
    // Twelve logits; the chain keeps some, reweighs them, and draws. A chi-square test of
    // 20 000 draws against the survivors' exact probabilities, fixed seed: the statistic must
    // stay below the 0.1% critical value for its degrees of freedom.
    let logits: Vec<f32> = vec![
        2.0, 1.5, 1.4, 0.3, -1.0, 2.2, 0.9, -3.0, 1.0, 0.1, -0.5, 1.8,
    ];
    let cfg = SamplerConfig {
        temperature: 0.9,
        top_k: 8,
        top_p: 0.9,
        min_p: 0.1,
        seed: 42,
        ..Default::default()
    };
    let mut s = Sampler::new(cfg);
    let survivors: Vec<Candidate> = s.survivors(&logits, &[]);
    let exact = probabilities(&survivors);
    let n = 20_000;
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample(&logits, &[]) as usize] += 1;
    }
    let kept: Vec<usize> = survivors.iter().map(|c| c.id as usize).collect();
    for (id, &c) in counts.iter().enumerate() {
        assert!(
            kept.contains(&id) || c == 0,
            "token {id} was filtered out but drawn {c} times"
        );
    }
    let chi2: f64 = survivors
        .iter()
        .zip(&exact)
        .map(|(c, p)| {
            let expected = p * n as f64;
            (counts[c.id as usize] as f64 - expected).powi(2) / expected
        })
        .sum();
    // 0.1% critical values of chi-square for 1..=7 degrees of freedom
    let critical = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32];
    let df = survivors.len() - 1;
    assert!((1..=7).contains(&df), "{} survivors", survivors.len());
    eprintln!(
        "{} survivors, chi-square {chi2:.2} (0.1% critical value {})",
        survivors.len(),
        critical[df - 1]
    );
    assert!(
        chi2 < critical[df - 1],
        "chi-square {chi2:.2} with {df} degrees of freedom"
    );
}

fn smollm2() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::smollm2_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap()
    })
}

fn gemma() -> &'static ch08_gguf::Loaded {
    static M: OnceLock<ch08_gguf::Loaded> = OnceLock::new();
    M.get_or_init(|| {
        let p = models::require(&models::gemma3_gguf()).unwrap_or_else(|e| panic!("{e}"));
        ch08_gguf::load(&p).unwrap()
    })
}

fn run(
    m: &ch08_gguf::Loaded,
    prompt: &str,
    n: usize,
    cfg: SamplerConfig,
    stops: &[String],
) -> ch09_generate::Generation {
    let e = m.engine().unwrap();
    let ids = m.tokenizer.encode_prompt(prompt, true);
    let mut s = Sampler::new(cfg);
    generate(
        &e,
        &m.tokenizer.tokenizer,
        &m.model.config.eos_token_ids,
        &ids,
        n,
        &mut s,
        stops,
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn temperature_zero_is_chapter_8_s_greedy_on_both_models() {
    for m in [smollm2(), gemma()] {
        let prompt = m.tokenizer.encode_prompt("The capital of France is", true);
        let e = m.engine().unwrap();
        let want = e.greedy(&prompt, 32, true, &mut |_| {}).unwrap().ids;
        let cfg = SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        };
        let got = run(m, "The capital of France is", 32, cfg, &[]).ids;
        assert_eq!(
            got, want,
            "{}: --temp 0 differs from chapter 8's greedy",
            m.model.family.name
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_text() {
    let cfg = SamplerConfig {
        seed: 1234,
        ..Default::default()
    };
    let a = run(smollm2(), "Once upon a time", 40, cfg.clone(), &[]);
    let b = run(smollm2(), "Once upon a time", 40, cfg, &[]);
    assert_eq!(a.ids, b.ids);
    let c = run(
        smollm2(),
        "Once upon a time",
        40,
        SamplerConfig {
            seed: 1235,
            ..Default::default()
        },
        &[],
    );
    assert_ne!(a.ids, c.ids, "two seeds gave the same 40 tokens");
}

#[test]
fn a_stop_string_ends_the_text_before_it() {
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let full = run(
        smollm2(),
        "The capital of France is",
        24,
        greedy.clone(),
        &[],
    );
    assert!(full.text.contains("\n\n"), "{:?}", full.text);
    let cut = run(
        smollm2(),
        "The capital of France is",
        24,
        greedy,
        &["\n\n".to_string()],
    );
    assert_eq!(cut.stop, StopReason::StopString);
    assert_eq!(cut.text, full.text[..full.text.find("\n\n").unwrap()]);
}

#[test]
fn the_chat_template_renders_as_jinja2_does() {
    use ch09_generate::chat::{ChatTemplate, Message, render};
    let path = models::workspace_root().join("fixtures/chat/templates.json");
    let fx: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = smollm2();
    let template = ChatTemplate::from_gguf(&m.file.gguf).unwrap();
    let want_template = fx["models"]["smollm2"]["template"].as_str().unwrap();
    assert_eq!(template, ChatTemplate::Jinja(want_template.to_string()));
    for case in fx["models"]["smollm2"]["cases"].as_array().unwrap() {
        let messages: Vec<Message> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let got = render(&template, &messages, true).unwrap();
        assert_eq!(
            got,
            case["rendered"].as_str().unwrap(),
            "{} messages",
            messages.len()
        );
    }
    // Gemma-3-270M's file has no template: the built-in Gemma format.
    assert!(fx["models"]["gemma3"]["template"].is_null());
    assert_eq!(
        ChatTemplate::from_gguf(&gemma().file.gguf).unwrap(),
        ChatTemplate::Gemma
    );
}

#[test]
fn a_chat_keeps_its_cache_and_equals_a_fresh_run() {
    use ch09_generate::session::ChatSession;
    let m = smollm2();
    let greedy = || {
        Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        })
    };
    let mut chat = ChatSession::new(m, None, 4096, None).unwrap();
    let first = chat
        .turn(
            "What is the capital of France?",
            &mut greedy(),
            24,
            &|| false,
            &mut |_| {},
        )
        .unwrap();
    let second = chat
        .turn("And of Italy?", &mut greedy(), 24, &|| false, &mut |_| {})
        .unwrap();
    let third = chat
        .turn(
            "Thanks. One more: Spain?",
            &mut greedy(),
            24,
            &|| false,
            &mut |_| {},
        )
        .unwrap();
    eprintln!(
        "prefilled {} / {} / {} tokens; contexts {} / {} / {}",
        first.prefilled,
        second.prefilled,
        third.prefilled,
        first.context,
        second.context,
        third.context
    );
    assert!(
        second.prefilled < second.context / 2,
        "turn 2 ran {} of {} tokens again",
        second.prefilled,
        second.context
    );
    // The third reply equals a fresh session fed the same history at once.
    let reply3 = chat.messages.last().unwrap().content.clone();
    let mut fresh = ChatSession::new(m, None, 4096, None).unwrap();
    fresh.messages = chat.messages[..chat.messages.len() - 2].to_vec();
    let mut text = String::new();
    fresh
        .turn(
            "Thanks. One more: Spain?",
            &mut greedy(),
            24,
            &|| false,
            &mut |t| text.push_str(t),
        )
        .unwrap();
    assert_eq!(
        text.trim(),
        reply3,
        "the cached third turn differs from recomputing the conversation"
    );
}

#[test]
fn an_interrupted_reply_ends_where_it_was_stopped_and_the_chat_goes_on() {
    use ch09_generate::session::ChatSession;
    let m = smollm2();
    let greedy = || {
        Sampler::new(SamplerConfig {
            temperature: 0.0,
            ..Default::default()
        })
    };
    let mut chat = ChatSession::new(m, None, 4096, None).unwrap();
    let tokens = std::cell::Cell::new(0);
    let stats = chat
        .turn(
            "Tell me a story.",
            &mut greedy(),
            64,
            &|| tokens.get() >= 3,
            &mut |_| tokens.set(tokens.get() + 1),
        )
        .unwrap();
    assert_eq!(stats.stop, StopReason::Interrupted);
    assert_eq!(stats.reply_tokens, 3);
    let next = chat
        .turn("Shorter, please.", &mut greedy(), 8, &|| false, &mut |_| {})
        .unwrap();
    assert_eq!(next.stop, StopReason::Length);
}

#[test]
fn the_race_prompt_is_32_tokens_for_both_models() {
    for m in [smollm2(), gemma()] {
        let ids = m
            .tokenizer
            .tokenizer
            .encode(ch09_generate::race::PROMPT, false);
        assert_eq!(
            ids.len(),
            32,
            "bench --compare promises a 32-token prompt; {} makes it {} tokens",
            m.model.family.name,
            ids.len()
        );
    }
}
