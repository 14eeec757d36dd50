//! Reference solutions for chapter 8's exercises.

/// Exercise 1: read a metadata string.
pub fn read_string(buf: &[u8], pos: usize) -> Option<(String, usize)> {
    let rest = buf.get(pos..)?;
    let len = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let body = &rest[8..];
    if len > body.len() as u64 {
        return None;
    }
    let len = len as usize;
    let text = std::str::from_utf8(&body[..len]).ok()?;
    Some((text.to_string(), pos + 8 + len))
}

/// Exercise 2: a tensor's size in bytes, with overflow checks.
pub fn tensor_bytes(dims: &[u64], block_values: u64, block_bytes: u64) -> Option<u64> {
    let row = *dims.first()?;
    if block_values == 0 || !row.is_multiple_of(block_values) {
        return None;
    }
    let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    (elements / block_values).checked_mul(block_bytes)
}

/// Exercise 3: where a tensor's data starts.
pub fn tensor_start(header_end: u64, alignment: u64, offset: u64) -> Option<u64> {
    if !alignment.is_power_of_two() || !offset.is_multiple_of(alignment) {
        return None;
    }
    header_end
        .checked_next_multiple_of(alignment)?
        .checked_add(offset)
}

/// Exercise 4: undo llama.cpp's Q/K row order.
pub fn stored_row(r: usize, head_dim: usize) -> usize {
    let half = head_dim / 2;
    let (head, within) = (r / head_dim, r % head_dim);
    let (j, i) = (within / half, within % half);
    head * head_dim + 2 * i + j
}

/// Exercise 5: the vocabulary from metadata.
pub fn vocab_entries(
    tokens: &[String],
    types: &[i32],
) -> Result<Vec<(String, ch02_tokenizer::TokenKind)>, String> {
    if tokens.len() != types.len() {
        return Err(format!(
            "{} tokens but {} token types",
            tokens.len(),
            types.len()
        ));
    }
    tokens
        .iter()
        .zip(types)
        .enumerate()
        .map(|(id, (text, &ty))| {
            if (1..=6).contains(&ty) {
                Ok((text.clone(), ch02_tokenizer::TokenKind::from_gguf(ty)))
            } else {
                Err(format!(
                    "token {id} ({text:?}) has type {ty}, not one of 1..=6"
                ))
            }
        })
        .collect()
}

/// Exercise 6: unpack a Q4_K scale and min.
pub fn q4_k_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Exercise 7: Q5_0's fifth bits in a packed lane.
pub fn packed_q5_0_quants(blk: &[u8], r: usize, c: usize) -> [u8; 8] {
    let qh = u32::from_le_bytes(blk[16 + 4 * r..20 + 4 * r].try_into().expect("4 bytes"));
    let bytes = &blk[48 + 32 * c + 4 * r..][..4];
    let fifth = |j: usize| (((qh >> j) & 1) as u8) << 4;
    std::array::from_fn(|i| {
        let (k, high) = (i % 4, i >= 4);
        let j = 4 * c + k + if high { 16 } else { 0 };
        let nibble = if high { bytes[k] >> 4 } else { bytes[k] & 0x0f };
        nibble | fifth(j)
    })
}

/// Exercise 8: one token's lane of the eight-token Q4_K kernel.
pub fn eights_q4_k_lane(
    block: &ch07_simd_parallel::layout::eights_k::BlockK,
    a: &ch07_simd_parallel::layout::eights_k::EightsK,
    b: usize,
    t: usize,
) -> f32 {
    let (mut sum_q, mut sum_m) = (0i32, 0i32);
    for s in 0..8 {
        let dot: i32 = (32 * s..32 * s + 32)
            .map(|l| i32::from(block.q[l]) * i32::from(a.qs[b][32 * (l / 4) + 4 * t + l % 4]))
            .sum();
        sum_q += i32::from(block.sm[s]) * dot;
        sum_m += i32::from(block.sm[8 + s]) * a.sums[b][s][t];
    }
    let (ad, [dw, dmin]) = (a.d[b][t], block.d);
    dw * ad * sum_q as f32 - dmin * ad * sum_m as f32
}

/// Exercise 9: Qwen3's QK-norm.
pub fn qk_norm(x: &mut [f32], weight: &[f32], eps: f32) {
    for head in x.chunks_exact_mut(weight.len()) {
        let mean = head.iter().map(|v| v * v).sum::<f32>() / head.len() as f32;
        let inv = 1.0 / (mean + eps).sqrt();
        for (v, w) in head.iter_mut().zip(weight) {
            *v = *v * inv * w;
        }
    }
}

/// Exercise 10: Gemma-2's soft-capped attention weights.
pub fn softcapped_weights(scores: &mut [f32], scale: f32, cap: f32) {
    for s in scores.iter_mut() {
        *s = (*s * scale * (1.0 / cap)).tanh() * cap;
    }
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for s in scores.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    scores.iter_mut().for_each(|s| *s /= sum);
}
