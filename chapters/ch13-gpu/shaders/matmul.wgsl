// The tiled matrix product `out = X · Wᵀ` for many tokens at once (prefill), shared by every
// weight format. The format's file (q4_0.wgsl, …) brings the same `block_dot` and `term` the
// matrix-vector product uses; `src/matmul.rs` puts it first and adds CHUNK_BYTES, the bytes
// of CHUNK blocks of one row in that format.
//
// Layout: one workgroup takes a tile of TILE_ROWS rows × TILE_TOKENS tokens of the output.
// It walks the rows' blocks CHUNK at a time: all its invocations copy those blocks of its
// TILE_ROWS rows, and the same blocks of its TILE_TOKENS tokens' activations, from storage
// into workgroup memory, once; then each invocation multiplies them for its share of the
// tile's tokens and rows, which the `main` after this file chooses: `tiled_rows.wgsl`'s one
// token and eight rows, or `tiled_tokens.wgsl`'s four tokens and two rows. Every weight byte
// a workgroup reads from memory serves TILE_TOKENS tokens, where the matrix-vector product
// reads every byte once per token.
//
// `block_dot(row, b)` reads its weights through `word_at`, its activations through
// `acts[b]`, and finds a row's blocks `row_blocks()` apart: here those three names stand for
// the tile in workgroup memory (a row of CHUNK blocks) and the invocation's own token.

// ANCHOR: bindings
// The weights as the file holds them, as for the matrix-vector product.
@group(0) @binding(0) var<storage, read> weights: array<u32>;

// The activations of every token, each quantized as the matrix-vector product's input:
// token t's blocks are `tokens[t · dims.blocks ..]`.
struct ActBlock {
    d: f32,
    s: f32,
    qs: array<u32, 8>,
}
@group(0) @binding(1) var<storage, read> tokens: array<ActBlock>;

// (tokens, rows) f32: token t's products are `out[t · dims.rows ..]`. W may be a stack of
// matrices, as for the matrix-vector product: then each matrix's (tokens, its rows) go to
// its own output, `out`, `out1`, `out2` (`store`).
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out1: array<f32>;
@group(0) @binding(5) var<storage, read_write> out2: array<f32>;

struct Dims {
    rows: u32,   // rows of W
    blocks: u32, // blocks of 32 in a row
    tokens: u32, // rows of X
    zero: u32,   // 0, always: the host writes it, the compiler cannot know it (`alone`)
    split1: u32, // the first row of the stack's second matrix (rows: none)
    split2: u32, // the first row of its third (rows: none)
    _pad0: u32,
    _pad1: u32,
}
@group(0) @binding(3) var<uniform> dims: Dims;
// ANCHOR_END: bindings

// Token `token`'s product with row `row` into its matrix's output.
fn store(token: u32, row: u32, v: f32) {
    if row < dims.split1 {
        out[token * dims.split1 + row] = v;
    } else if row < dims.split2 {
        out1[token * (dims.split2 - dims.split1) + row - dims.split1] = v;
    } else {
        out2[token * (dims.rows - dims.split2) + row - dims.split2] = v;
    }
}

// ANCHOR: tile
const TILE_ROWS: u32 = 32u;
const TILE_TOKENS: u32 = 16u;
const CHUNK: u32 = 8u; //     blocks of 32 per step (one K-quant super-block)

// One step's weights: TILE_ROWS rows of CHUNK_BYTES each, every row padded to whole words.
const STRIDE: u32 = (CHUNK_BYTES + 3u) / 4u; // words a row of the tile takes
var<workgroup> tile_weights: array<u32, TILE_ROWS * STRIDE + 1u>; // +1: word_at reads a word on
// One step's activations: CHUNK blocks of each of TILE_TOKENS tokens.
var<workgroup> tile_acts: array<ActBlock, TILE_TOKENS * CHUNK>;

// What `block_dot` sees: rows CHUNK blocks long, and its invocation's token's CHUNK blocks.
fn row_blocks() -> u32 {
    return CHUNK;
}
var<private> acts: array<ActBlock, CHUNK>;
// ANCHOR_END: tile

// ANCHOR: bytes
// The 4 bytes at byte `at` of the tile as `block_dot` counts (row r's blocks from
// r · CHUNK_BYTES), read from workgroup memory, where row r starts at word r · STRIDE.
fn word_at(at: u32) -> u32 {
    let byte = at / CHUNK_BYTES * STRIDE * 4u + at % CHUNK_BYTES;
    let i = byte / 4u;
    let shift = (byte % 4u) * 8u;
    if shift == 0u {
        return tile_weights[i];
    }
    return (tile_weights[i] >> shift) | (tile_weights[i + 1u] << (32u - shift));
}

// The whole word of the tile that holds byte `at`, as `word` of matvec.wgsl. The byte is
// byte `at % 4` of it where CHUNK_BYTES is whole words: every format's that uses `word`
// (Q6_K's 210 is not, and it reads through `word_at`).
fn word(at: u32) -> u32 {
    return tile_weights[(at / CHUNK_BYTES * STRIDE * 4u + at % CHUNK_BYTES) / 4u];
}

fn half_at(at: u32) -> f32 {
    return unpack2x16float(word_at(at)).x;
}
// ANCHOR_END: bytes

// ANCHOR: load
// Copies step `c`'s blocks (blocks c·CHUNK .. c·CHUNK + CHUNK of each row) of the tile's rows
// and tokens into workgroup memory, each of the 64 invocations a share; zeros past the
// matrix's last row, its last token, or a row's last block.
fn load(c: u32, row0: u32, token0: u32, i: u32) {
    let first = c * CHUNK;
    let n = min(CHUNK, dims.blocks - first); //              blocks this step
    let row_bytes = dims.blocks * CHUNK_BYTES / CHUNK; //   (K-quants: whole super-blocks)
    let valid = n * CHUNK_BYTES / CHUNK; //                   bytes of a row this step
    for (var w = i; w < TILE_ROWS * STRIDE; w += 64u) {
        let r = w / STRIDE;
        let o = (w % STRIDE) * 4u;
        var word = 0u;
        if row0 + r < dims.rows && o < valid {
            word = weight_word((row0 + r) * row_bytes + c * CHUNK_BYTES + o);
        }
        tile_weights[w] = word;
    }
    for (var w = i; w < TILE_TOKENS * CHUNK; w += 64u) {
        let t = token0 + w / CHUNK;
        let b = w % CHUNK;
        var block = ActBlock(0.0, 0.0, array<u32, 8>(0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u));
        if t < dims.tokens && b < n {
            block = tokens[t * dims.blocks + first + b];
        }
        tile_acts[w] = block;
    }
}
// ANCHOR_END: load

// ANCHOR: alone
// A term rounded on its own before it joins the sum, as the CPU rounds it. WGSL marks no f32
// operation exact, so a compiler may add `sum + (a + b)` as `(sum + a) + b`, which rounds
// differently. Lavapipe's does so here (not in the matrix-vector product, which stores each
// term in workgroup memory first) for Q4_1 and Q4_K, whose term adds two products (the
// scales' and the minimums'): without this their sums are a few units in the last place
// from the CPU's. An exclusive-or with a word the compiler cannot see is 0 makes the term a
// value of its own at the cost of one integer operation a term; a term of one product (Q4_0,
// Q8_0, Q5_0, Q6_K) passes through unchanged.
fn alone(term: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(term) ^ dims.zero);
}
// ANCHOR_END: alone

