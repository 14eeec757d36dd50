// The tiled product's invocations (after `matmul.wgsl`) for a format whose file unpacks a
// block once for many activation blocks (`unpack`, `unpacked_dot`: Q4_0, Q4_1, Q5_0, Q8_0).
// Each invocation takes TOKENS_EACH tokens and ROWS_EACH rows of the tile, so a block it
// unpacks serves four tokens and an activation block it loads serves two rows, where
// `tiled_rows.wgsl`'s invocation unpacks every block again for its one token. Each output's
// terms are the same blocks added in the same order, each `alone`: the same bits.
// Its tokens are t, t + 4, t + 8, t + 12 and its rows r, r + 16: neighbouring invocations
// read neighbouring tokens' activation blocks and neighbouring rows of the tile, which lie
// in different banks of workgroup memory.

// ANCHOR: tokens
const TOKENS_EACH: u32 = 4u;
const ROWS_EACH: u32 = 2u; // TILE_TOKENS × TILE_ROWS / (TOKENS_EACH × ROWS_EACH) = 64
const TOKEN_STRIDE: u32 = TILE_TOKENS / TOKENS_EACH;
const ROW_STRIDE: u32 = TILE_ROWS / ROWS_EACH;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) i: u32) {
    let row0 = group.x * TILE_ROWS;
    let token0 = group.y * TILE_TOKENS;
    let t = i % TOKEN_STRIDE; //  this invocation's first token in the tile,
    let r0 = i / TOKEN_STRIDE; // and its first row
    var sums = array<f32, TOKENS_EACH * ROWS_EACH>();
    for (var c = 0u; c * CHUNK < dims.blocks; c++) {
        load(c, row0, token0, i);
        workgroupBarrier();
        let n = min(CHUNK, dims.blocks - c * CHUNK);
        for (var b = 0u; b < CHUNK; b++) { // counted to CHUNK, as in tiled_rows.wgsl
            if b < n {
                var a: array<ActBlock, TOKENS_EACH>;
                for (var j = 0u; j < TOKENS_EACH; j++) {
                    a[j] = tile_acts[(t + j * TOKEN_STRIDE) * CHUNK + b];
                }
                for (var r = 0u; r < ROWS_EACH; r++) {
                    let u = unpack(r0 + r * ROW_STRIDE, b); // once for the four tokens
                    for (var j = 0u; j < TOKENS_EACH; j++) {
                        sums[r * TOKENS_EACH + j] += alone(unpacked_dot(u, a[j]));
                    }
                }
            }
        }
        workgroupBarrier(); // before the next step overwrites the tile
    }
    for (var r = 0u; r < ROWS_EACH; r++) {
        let row = row0 + r0 + r * ROW_STRIDE;
        for (var j = 0u; j < TOKENS_EACH; j++) {
            let token = token0 + t + j * TOKEN_STRIDE;
            if token < dims.tokens && row < dims.rows {
                store(token, row, sums[r * TOKENS_EACH + j]);
            }
        }
    }
}
// ANCHOR_END: tokens
