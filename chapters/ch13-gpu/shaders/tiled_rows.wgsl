// The tiled product's invocations (after `matmul.wgsl`) for every format: each takes one
// token and ROWS_EACH rows of the tile, and adds each row's terms with the format's `term`,
// the in-order reduction's (a block of 32, or a K-quant's whole super-block).

const ROWS_EACH: u32 = 8u; // rows per invocation: TILE_TOKENS × TILE_ROWS / ROWS_EACH = 64

// ANCHOR: main
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) i: u32) {
    let row0 = group.x * TILE_ROWS;
    let token0 = group.y * TILE_TOKENS;
    let t = i % TILE_TOKENS; //                 this invocation's token in the tile,
    let mine = (i / TILE_TOKENS) * ROWS_EACH; // and the first of its rows
    var sums = array<f32, ROWS_EACH>();
    for (var c = 0u; c * CHUNK < dims.blocks; c++) {
        load(c, row0, token0, i);
        workgroupBarrier();
        for (var b = 0u; b < CHUNK; b++) {
            acts[b] = tile_acts[t * CHUNK + b];
        }
        let n = min(CHUNK, dims.blocks - c * CHUNK);
        // each row's terms added in order, left to right, as the CPU adds them: a block of
        // 32, or a K-quant's whole super-block (the format's `term`, TERM_BLOCKS blocks).
        // Counted to CHUNK, not to `n`: loops of a known length can be unrolled, and then
        // every index into `acts` is a constant, so it can live in registers (indexed by a
        // variable, a GPU compiler keeps a private array in memory)
        for (var k = 0u; k < CHUNK / TERM_BLOCKS; k++) { // the step's k-th term of each row
            if k < n / TERM_BLOCKS {
                for (var r = 0u; r < ROWS_EACH; r++) {
                    sums[r] += alone(term(mine + r, k));
                }
            }
        }
        workgroupBarrier(); // before the next step overwrites the tile
    }
    let token = token0 + t;
    for (var r = 0u; r < ROWS_EACH; r++) {
        let row = row0 + mine + r;
        if token < dims.tokens && row < dims.rows {
            store(token, row, sums[r]);
        }
    }
}
// ANCHOR_END: main
