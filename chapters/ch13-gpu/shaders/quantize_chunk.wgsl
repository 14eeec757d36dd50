// Quantizing CHUNK values at once, one an invocation of a workgroup of CHUNK, into the
// blocks `matvec.wgsl` reads (its `ActBlock`), by the CPU's rules: chapter 6's
// quantize_q8_0 and quantize_q8_1 for each block of 32, chapter 7's quantize_q8_k for a
// super-block of 256 (only where CHUNK is 256). The shader that includes this file declares
// CHUNK and `acts` (its blocks) and calls `quantize_chunk` from every invocation, in uniform
// control flow (it waits at barriers): the standalone quantizer (`quantize.wgsl`), RMSNorm,
// which quantizes the row it has just normalised without a dispatch of its own, and
// attention, its heads' output (CHUNK 64).

struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}

const Q8_0: u32 = 0u;
const Q8_1: u32 = 1u;
const Q8_K: u32 = 2u;

var<workgroup> chunk_amax: array<f32, CHUNK>;
var<workgroup> chunk_at: array<u32, CHUNK>;
var<workgroup> chunk_quants: array<i32, CHUNK>;

// ANCHOR: round
// Rounds halves away from zero, as Rust's f32::round does (WGSL's round() goes to even).
fn round_away(v: f32) -> f32 {
    let t = trunc(v);
    if abs(v - t) >= 0.5 {
        return t + sign(v);
    }
    return t;
}
// ANCHOR_END: round

// The f32 nearest to `v` that an f16 can hold.
fn to_half(v: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x;
}

// Invocation `j` holds value `j` of the chunk, `v` (0 past the data's end); the chunk's
// blocks of 32 are `first`, `first + 1`, …, of which the first `blocks` are written.
// Q8_0 / Q8_1: each block of 32 on its own, d = max|x| / 127, q = round(x / d) (halves
// away from zero), d kept as an f16; for Q8_1 s = d · Σq as an f16, for Q8_0 s = Σq (the
// CPU's Q8_0 block has no sum: the products read it from `s`, added here once).
// Q8_K: the value of largest magnitude (the first, on a tie) maps to −127, so
// iscale = −127 / max, q = round(iscale · x) (ties to even) capped at 127, d = 1 / iscale,
// written into each of the eight blocks with s = the block's Σq.
fn quantize_chunk(j: u32, v: f32, first: u32, blocks: u32, format: u32) {
    chunk_amax[j] = abs(v);
    chunk_at[j] = j;
    workgroupBarrier();
    var q = 0;
    var d = 0.0;
    if format == Q8_K {
        // where |x| is largest, the first such place on a tie: a tree over (|x|, index)
        for (var width = CHUNK / 2u; width > 0u; width /= 2u) {
            if j < width {
                let o = j + width;
                if chunk_amax[o] > chunk_amax[j]
                    || (chunk_amax[o] == chunk_amax[j] && chunk_at[o] < chunk_at[j]) {
                    chunk_amax[j] = chunk_amax[o];
                    chunk_at[j] = chunk_at[o];
                }
            }
            workgroupBarrier();
        }
        chunk_quants[j] = bitcast<i32>(v); // lend the quants' slots: the value at the chunk's largest
        workgroupBarrier();
        if chunk_amax[0] != 0.0 {
            let iscale = -127.0 / bitcast<f32>(chunk_quants[chunk_at[0]]);
            q = min(i32(round(iscale * v)), 127); // WGSL's round() is ties to even
            d = 1.0 / iscale;
        }
        workgroupBarrier();
    } else {
        // max|x| over each block of 32: a tree inside each, 32 → 16 → … → 1
        let lane = j % 32u;
        for (var width = 16u; width > 0u; width /= 2u) {
            if lane < width {
                chunk_amax[j] = max(chunk_amax[j], chunk_amax[j + width]);
            }
            workgroupBarrier();
        }
        d = chunk_amax[j - lane] / 127.0;
        var id = 0.0;
        if d != 0.0 {
            id = 1.0 / d;
        }
        q = i32(round_away(v * id));
    }
    chunk_quants[j] = q;
    workgroupBarrier();
    // Invocations 0..CHUNK/4 pack four quants each; 0..CHUNK/32 add their block's 32 for s.
    if j < CHUNK / 4u && j / 8u < blocks {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            word |= (u32(chunk_quants[4u * j + k]) & 0xffu) << (8u * k);
        }
        acts[first + j / 8u].qs[j % 8u] = word;
    }
    if j < blocks {
        var sum = 0;
        for (var k = 0u; k < 32u; k++) {
            // the byte as stored, an i8: what a NaN's quant became, whatever the driver made
            // of its conversion to an integer (the CPU's is 0)
            sum += (chunk_quants[32u * j + k] << 24u) >> 24u;
        }
        if format == Q8_K {
            acts[first + j].d = d; // an f32 already: every invocation holds the same
            acts[first + j].s = f32(sum);
        } else {
            let block_d = chunk_amax[32u * j] / 127.0;
            acts[first + j].d = to_half(block_d);
            acts[first + j].s = select(f32(sum), to_half(f32(sum) * block_d), format == Q8_1);
        }
    }
    workgroupBarrier(); // the chunk's arrays are free for the next
}
