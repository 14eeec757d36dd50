// The embedding lookup: each token's row of the embedding matrix, dequantized on the GPU from
// the file's blocks, as chapter 6's `dequantize_row` does on the CPU (the f16 scale widened,
// times the quant: the same f32 products). The token ids are read from `ids`, which the host
// writes before each submission: one for a decode step, a prompt's piece for a prefill.
// One invocation per value of a row, a row of workgroups per token.
// A table larger than one binding (Gemma-3's) is split by rows (`split.rs`): one dispatch
// per part, and only the part that holds the token writes the row. Gemma then scales it by
// √dim, the f32 product chapter 8 takes after dequantizing.

// ANCHOR: embed
@group(0) @binding(0) var<storage, read> table: array<u32>; // (rows, cols) as blocks, padded

// What the host writes before each submission: the first token's position, how many tokens
// run, and RoPE's cos and sin at each of their positions (`rope.wgsl`).
struct Step {
    pos: u32,
    tokens: u32,
    tables: u32,
    _pad: u32,
    trig: array<f32>, // (tokens, tables, 2, head_dim / 2)
}
@group(0) @binding(1) var<storage, read> step: Step;
@group(0) @binding(2) var<storage, read> ids: array<u32>; //     (tokens)
@group(0) @binding(3) var<storage, read_write> x: array<f32>; // (tokens, cols)

struct Params {
    rows: u32,   // rows in this part of the table (the vocabulary, unsplit)
    cols: u32,   // the model's width
    format: u32, // 0 Q8_0, 1 Q4_0, 2 Q4_1, 3 Q5_0
    scale: f32,  // the family's embedding scale (1: none)
    first: u32,  // the token id of this part's first row
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(4) var<uniform> params: Params;

fn word_at(at: u32) -> u32 {
    let i = at / 4u;
    let shift = (at % 4u) * 8u;
    if shift == 0u {
        return table[i];
    }
    return (table[i] >> shift) | (table[i + 1u] << (32u - shift));
}

fn half_at(at: u32) -> f32 {
    return unpack2x16float(word_at(at)).x;
}

fn byte_at(at: u32) -> u32 {
    return extractBits(table[at / 4u], 8u * (at % 4u), 8u);
}

// Value j of `row`.
fn value(row: u32, j: u32) -> f32 {
    let b = row * (params.cols / 32u) + j / 32u; // the block, counted from the matrix's start
    let i = j % 32u; //                            the value within it
    switch params.format {
        case 0u: { // Q8_0: d, 32 × i8
            let at = b * 34u;
            let q = extractBits(i32(byte_at(at + 2u + i)), 0u, 8u);
            return half_at(at) * f32(q);
        }
        case 1u: { // Q4_0: d, 16 bytes: value i in byte i % 16, low nibble for i < 16
            let at = b * 18u;
            let q = i32(extractBits(byte_at(at + 2u + i % 16u), 4u * (i / 16u), 4u)) - 8;
            return half_at(at) * f32(q);
        }
        case 2u: { // Q4_1: d, m, nibbles as Q4_0's, unsigned
            let at = b * 20u;
            let q = extractBits(byte_at(at + 4u + i % 16u), 4u * (i / 16u), 4u);
            return half_at(at) * f32(q) + half_at(at + 2u);
        }
        default: { // Q5_0: d, 32 fifth bits, nibbles as Q4_0's
            let at = b * 22u;
            let high = extractBits(word_at(at + 2u), i, 1u);
            let low = extractBits(byte_at(at + 6u + i % 16u), 4u * (i / 16u), 4u);
            return half_at(at) * f32(i32(low | (high << 4u)) - 16);
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let j = id.x;
    let t = id.y;
    if j >= params.cols || t >= step.tokens {
        return;
    }
    // Another part's row (the host checks the id against the whole table before writing it).
    let token = ids[t];
    if token < params.first || token - params.first >= params.rows {
        return;
    }
    x[t * params.cols + j] = value(token - params.first, j) * params.scale;
}
// ANCHOR_END: embed
