//! How long chapter 9's sampler takes on one row of SmolLM2's 49 152 logits.
fn main() {
    let logits: Vec<f32> = (0..49152u32)
        .map(|i| ((i.wrapping_mul(2654435761) >> 8) % 1000) as f32 / 100.0)
        .collect();
    for temp in [0.0f32, 0.8] {
        let mut s = ch09_generate::Sampler::new(ch09_generate::SamplerConfig {
            temperature: temp,
            ..Default::default()
        });
        let t = std::time::Instant::now();
        for _ in 0..50 {
            std::hint::black_box(s.sample(&logits, &[1, 2, 3]));
        }
        println!(
            "temperature {temp}: {:.2} ms a token",
            t.elapsed().as_secs_f64() * 1e3 / 50.0
        );
    }
}
