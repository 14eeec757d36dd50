// Attention, one workgroup per query head and token, over the KV cache kept in GPU buffers:
// the scores of a token's query against the keys of positions 0..=its own, scaled,
// softmaxed, and the weighted sum of the values. A decode step runs one token; a prefill
// runs a piece of the prompt, each token at its own position (causal: a token sees itself
// and what came before). Query heads share a KV head in groups (GQA): head h reads KV head
// h / (n_heads / n_kv_heads).
//
// The keys and values of this submission's tokens are read from the step's `k` and `v`, not
// from the cache: the first head of each group also writes its token's into the cache, for
// the submissions after this one. No workgroup reads the cache at this submission's
// positions, so the writes need no barrier between workgroups, and no dispatch of their own.
// A prefill's queries and keys come rotated by `rope.wgsl`; a decode step's (`params.rotate`)
// are rotated here, as they are read, by the same arithmetic: one dispatch a layer fewer.
// So are Gemma-3's and Qwen3's norms on each head of Q and K (`params.qk_norm`): a decode
// step's are computed here by `rmsnorm.wgsl`'s arithmetic, two dispatches a layer fewer.

// ANCHOR: bindings
struct Step {
    pos: u32,    // the first token's position
    tokens: u32, // tokens in this submission
    tables: u32,
    _pad: u32,
    trig: array<f32>,
}
@group(0) @binding(0) var<storage, read> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>; //  (tokens, n_heads, head_dim), rotated
@group(0) @binding(2) var<storage, read> k: array<f32>; //  (tokens, n_kv_heads, head_dim), rotated
@group(0) @binding(3) var<storage, read> v: array<f32>; //  (tokens, n_kv_heads, head_dim)
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>; // (max_pos, n_kv_heads, head_dim)
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>; // (max_pos, n_kv_heads, head_dim)
@group(0) @binding(6) var<storage, read_write> out: array<f32>; //    (tokens, n_heads, head_dim)
@group(0) @binding(7) var<storage, read_write> scores: array<f32>; // (tokens, n_heads, max_pos)
// `out` quantized for the output product, where `quant` asks (quantize_chunk.wgsl)
@group(0) @binding(8) var<storage, read_write> acts: array<ActBlock>;

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_pos: u32,
    scale: f32, // 1/√head_dim, or the family's, computed on the host as the CPU does
    window: u32, // positions a query sees, counting itself (0: all)
    softcap: f32, // Gemma-2: scores become cap · tanh(score / cap) (0: none)
    inv_cap: f32, // 1/cap, rounded on the host as the CPU rounds it
    quant: u32, // 0: `out` only; 1, 2, 3: also quantized, as Q8_0, Q8_1 or Q8_K (quantize_chunk.wgsl)
    rotate: u32, // 1: q and k as the products gave them, turned here (rope.wgsl's `halves`
    halves: u32, //   and `table` below); 0: turned already
    table: u32,
    qk_norm: u32, // 1 (with rotate): q and k each head normed here first, with q_norm, k_norm
    eps: f32,     //   and eps
    _pad0: u32,
    _pad1: u32,
}
// (head_dim) each: the norms' weights, read when qk_norm is 1
@group(0) @binding(9) var<storage, read> q_norm: array<f32>;
@group(0) @binding(10) var<storage, read> k_norm: array<f32>;
@group(0) @binding(11) var<uniform> params: Params;
// ANCHOR_END: bindings

// LANES, the workgroup's width, comes before this file (`ops.rs`): 64, or 256 for heads of
// 256 (Gemma-3's), whose output is then one Q8_K super-block a head, quantized here too.
const CHUNK: u32 = LANES; // values quantized at once (quantize_chunk.wgsl)
var<workgroup> partial: array<f32, LANES>;

// This head's query, turned where the step asks: what `dot` reads, once a workgroup.
const MOST_HEAD_DIM: u32 = 256u; // the host refuses wider heads
var<workgroup> query: array<f32, MOST_HEAD_DIM>;

// A head's RMSNorm scale, 1 / sqrt(mean(x²) + eps), as `rmsnorm.wgsl` computes a row's with
// its 256 lanes: slot i of `squares` is what its lane i sums (elements i, i + 256, …), and
// the same tree adds the slots, in `Sum` (f64 where the device has it): the same bits
// whatever this workgroup's width. `of_k`: the head of k at `at`, else of q.
const NORM_LANES: u32 = 256u;
var<workgroup> squares: array<Sum, NORM_LANES>;

fn raw(of_k: bool, i: u32) -> f32 {
    if of_k {
        return k[i];
    }
    return q[i];
}

fn head_scale(lane: u32, of_k: bool, at: u32) -> Sum {
    for (var i = lane; i < NORM_LANES; i += LANES) {
        var sum = Sum(0.0);
        for (var j = i; j < params.head_dim; j += NORM_LANES) {
            let v = raw(of_k, at + j);
            sum += widen(v) * widen(v);
        }
        squares[i] = sum;
    }
    workgroupBarrier();
    for (var width = NORM_LANES / 2u; width > 0u; width /= 2u) {
        for (var i = lane; i < width; i += LANES) {
            squares[i] += squares[i + width];
        }
        workgroupBarrier();
    }
    let scale = inverse_root(squares[0] / Sum(params.head_dim) + widen(params.eps));
    workgroupBarrier(); // every lane has read it before a second head's sums are written
    return scale;
}

// The scales of this workgroup's head of q and of its token's head of k (set and read only
// where the step norms them).
var<private> q_scale: Sum;
var<private> k_scale: Sum;

// Element d of the head at `at`, normed where the step asks, as `rmsnorm.wgsl` writes it.
fn normed(of_k: bool, at: u32, d: u32) -> f32 {
    let v = raw(of_k, at + d);
    if params.qk_norm == 0u {
        return v;
    }
    if of_k {
        return narrow(widen(v) * k_scale) * k_norm[d];
    }
    return narrow(widen(v) * q_scale) * q_norm[d];
}

// ANCHOR: turn
// Element d of a head of token t, turned by t's angles as `rope.wgsl` turns it: its pair's
// two elements a and b (`pair_of`) become a·c − b·s and a·s + b·c.
fn turned(a: f32, b: f32, t: u32, d: u32) -> f32 {
    let half = params.head_dim / 2u;
    var i = d % half; //     the pair d is in, and whether d is its first element
    var lead = d < half;
    if params.halves == 0u {
        i = d / 2u;
        lead = d % 2u == 0u;
    }
    let angles = (t * step.tables + params.table) * params.head_dim; // (2, head_dim / 2)
    let c = step.trig[angles + i];
    let s = step.trig[angles + half + i];
    if lead {
        return a * c - b * s;
    }
    return a * s + b * c;
}

// The positions, in a head, of the pair element d is in.
fn pair_of(d: u32) -> vec2<u32> {
    let half = params.head_dim / 2u;
    if params.halves == 0u {
        return vec2<u32>(d / 2u * 2u, d / 2u * 2u + 1u);
    }
    return vec2<u32>(d % half, d % half + half);
}
// ANCHOR_END: turn

// Element d of the key of this submission's token t for KV head `kv`, turned if it is not.
fn new_key(t: u32, kv: u32, d: u32) -> f32 {
    let at = (t * params.n_kv_heads + kv) * params.head_dim;
    if params.rotate == 0u {
        return k[at + d];
    }
    let p = pair_of(d);
    return turned(normed(true, at, p.x), normed(true, at, p.y), t, d);
}

// Element d of position j's key (or value) for KV head `kv`: this submission's tokens' from
// `k` (`v`), earlier positions' from the cache.
fn key(j: u32, kv: u32, d: u32) -> f32 {
    let at = kv * params.head_dim + d;
    let row = params.n_kv_heads * params.head_dim;
    if j >= step.pos {
        return new_key(j - step.pos, kv, d);
    }
    return k_cache[j * row + at];
}

fn value(j: u32, kv: u32, d: u32) -> f32 {
    let at = kv * params.head_dim + d;
    let row = params.n_kv_heads * params.head_dim;
    if j >= step.pos {
        return v[(j - step.pos) * row + at];
    }
    return v_cache[j * row + at];
}

// ANCHOR: dot
// q·k for the workgroup's query head (`query`) and position j in the CPU's order (chapter 6's `dot_f32_lanes`): eight
// running sums, sum l taking the elements i ≡ l (mod 8), each a multiply then an add,
// added as ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)), then any tail past the last 8.
// The same order gives the same bits, so a score never differs from the CPU's by the last
// place that would move a quantized activation across a rounding boundary later on.
fn dot(j: u32, kv: u32) -> f32 {
    var acc = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let hd = params.head_dim;
    let whole = hd / 8u * 8u;
    for (var i = 0u; i < whole; i += 8u) {
        for (var l = 0u; l < 8u; l++) {
            acc[l] = acc[l] + query[i + l] * key(j, kv, i + l);
        }
    }
    var sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (var i = whole; i < hd; i++) {
        sum = sum + query[i] * key(j, kv, i);
    }
    return sum;
}
// ANCHOR_END: dot

// The largest of the lanes' `x`, through workgroup memory.
fn reduce_max(lane: u32, x: f32) -> f32 {
    partial[lane] = x;
    workgroupBarrier();
    for (var width = LANES / 2u; width > 0u; width /= 2u) {
        if lane < width {
            partial[lane] = max(partial[lane], partial[lane + width]);
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier(); // everyone has read it before `partial` is used again
    return total;
}

// Gemma-2's soft-cap of a score, cap · tanh(s / cap), as `softcap.wgsl` caps the logits.
fn capped(s: f32) -> f32 {
    if params.softcap == 0.0 {
        return s;
    }
    return tanh(clamp(s * params.inv_cap, -10.0, 10.0)) * params.softcap;
}

// Every lane waits here until the others' writes to storage are done and seen.
fn all_written() {
    storageBarrier();
    workgroupBarrier();
}

// ANCHOR: attend
@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let t = group.y; // this submission's token, at position step.pos + t
    if t >= step.tokens { return; } // a prefill's last piece, shorter than the buffers
    let hd = params.head_dim;
    let kv = group.x / (params.n_heads / params.n_kv_heads);
    let h = t * params.n_heads + group.x; // the query head, counted over all tokens
    let pos = step.pos + t;
    let row = h * params.max_pos; // this head's scores
    // ANCHOR: window
    // A sliding layer sees the last `window` positions, pos + 1 − window ..= pos
    // (chapter 8's `attend_heads`); every loop over keys below starts here.
    var first = 0u;
    if params.window != 0u && pos + 1u > params.window {
        first = pos + 1u - params.window;
    }
    // ANCHOR_END: window
    // This head's query, normed and turned where it is not yet.
    if params.qk_norm != 0u {
        q_scale = head_scale(lane, false, h * hd);
        k_scale = head_scale(lane, true, (t * params.n_kv_heads + kv) * hd);
    }
    for (var d = lane; d < hd; d += LANES) {
        if params.rotate == 0u {
            query[d] = q[h * hd + d];
        } else {
            let p = pair_of(d);
            query[d] = turned(normed(false, h * hd, p.x), normed(false, h * hd, p.y), t, d);
        }
    }
    // Append: the group's first head stores this token's key and value.
    if group.x % (params.n_heads / params.n_kv_heads) == 0u {
        for (var d = lane; d < hd; d += LANES) {
            let at = (pos * params.n_kv_heads + kv) * hd + d;
            k_cache[at] = new_key(t, kv, d);
            v_cache[at] = v[(t * params.n_kv_heads + kv) * hd + d];
        }
    }
    workgroupBarrier(); // the query is whole before any lane's dot reads it
    // ANCHOR_END: attend
    // ANCHOR: scores
    // Scores: lane l takes positions l, l + LANES, …; each a whole dot product of head_dim.
    var most = -3.4028235e38;
    for (var j = first + lane; j <= pos; j += LANES) {
        let s = capped(dot(j, kv) * params.scale);
        scores[row + j] = s;
        most = max(most, s);
    }
    most = reduce_max(lane, most);
    // Softmax as chapter 1's: e^(s − max), their sum, each divided by it.
    for (var j = first + lane; j <= pos; j += LANES) {
        scores[row + j] = exp_cpu(scores[row + j] - most);
    }
    all_written();
    // The sum in order, as the CPU adds it: every lane adds them all, none waits for another.
    var sum = 0.0;
    for (var j = first; j <= pos; j++) {
        sum += scores[row + j];
    }
    all_written(); // every lane has added them all before any lane divides its own
    for (var j = first + lane; j <= pos; j += LANES) { // below f32's least normal: 0, as on the CPU
        let w = scores[row + j] / sum;
        scores[row + j] = select(w, 0.0, w < 1.17549435e-38);
    }
    all_written(); // every lane's weights written before any lane reads them all
    // The weighted sum of the values: lane l takes coordinates l, l + LANES, …, key by key.
    for (var d = lane; d < hd; d += LANES) {
        var acc = 0.0;
        for (var j = first; j <= pos; j++) {
            acc += scores[row + j] * value(j, kv, d);
        }
        out[h * hd + d] = acc;
    }
    quantize_head(h, lane); // the output product's input, without a dispatch of its own
}
// ANCHOR_END: scores

// ANCHOR: quantize_head
// Head `h`'s output quantized for the output product: its blocks of 32, LANES values at a time,
// each value the one this lane has just written.
// (Where `quant` asks: the whole workgroup or none of it, as its barriers need.)
fn quantize_head(h: u32, lane: u32) {
    let hd = params.head_dim;
    for (var c = 0u; c < hd && params.quant != 0u; c += LANES) {
        var v = 0.0;
        if c + lane < hd {
            v = out[h * hd + c + lane];
        }
        let blocks = min((hd - c) / 32u, LANES / 32u);
        quantize_chunk(lane, v, (h * hd + c) / 32u, blocks, params.quant - 1u);
    }
}
// ANCHOR_END: quantize_head
