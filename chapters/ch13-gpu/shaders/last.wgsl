// A prefill's last token's row, copied out of the rows of every token: the logits are the
// last token's only, so the final norm and the LM head run on one row, as in a decode step.

// ANCHOR: last
struct Step {
    pos: u32,
    tokens: u32, // tokens in this submission: the last is row tokens − 1
    tables: u32,
    _pad: u32,
    trig: array<f32>,
}
@group(0) @binding(0) var<storage, read> step: Step;
@group(0) @binding(1) var<storage, read> rows: array<f32>; //       (tokens, n)
@group(0) @binding(2) var<storage, read_write> row: array<f32>; //  (n)

struct Params {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let j = id.x;
    if j < params.n {
        row[j] = rows[(step.tokens - 1u) * params.n + j];
    }
}
// ANCHOR_END: last
