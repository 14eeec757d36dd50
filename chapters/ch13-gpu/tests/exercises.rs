#![cfg(feature = "exercises")]
//! One test per exercise. Exercise 3 runs on the GPU (lavapipe will do).

use ch06_quantization::blocks::BlockQ4_0;
use ch13_gpu::Gpu;
use ch13_gpu::exercises::*;
use ch13_gpu::random::Rng;

#[test]
fn ex1_grid() {
    for (total, max) in [
        (0, 65535),
        (1, 65535),
        (576, 65535),
        (65535, 65535),
        (65536, 65535),
        (262_144, 65535),
        (10, 3),
        (9, 3),
        (7, 1),
    ] {
        let (x, y) = grid(total, max);
        let what = format!("grid({total}, {max}) = ({x}, {y})");
        assert!(
            x >= 1 && y >= 1,
            "{what}: a dispatch needs at least one group each way"
        );
        assert!(x <= max, "{what}: x may not pass the limit");
        let cells = u64::from(x) * u64::from(y);
        assert!(
            cells >= u64::from(total),
            "{what}: {cells} groups cannot cover {total}"
        );
        assert!(
            cells - u64::from(total) < u64::from(x) || total == 0,
            "{what}: a whole row of the grid would do nothing"
        );
    }
}

#[test]
fn ex2_q4_0_weight() {
    // Blocks packed back to back from byte 2 on, so they start at every offset in a word.
    let mut rng = Rng::new(13);
    let blocks = 9;
    let mut bytes = vec![0u8; 2 + blocks * BlockQ4_0::BYTES];
    for b in bytes.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    bytes.resize(bytes.len().next_multiple_of(4), 0);
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    for k in 0..blocks {
        let start = 2 + k * BlockQ4_0::BYTES;
        let block = BlockQ4_0(bytes[start..start + BlockQ4_0::BYTES].try_into().unwrap());
        for i in 0..32 {
            let want = i32::from(block.quant(i)) - 8;
            let got = q4_0_weight(&words, start, i);
            assert_eq!(
                got,
                want,
                "element {i} of the block at byte {start} (byte {} of its word): chapter 6 reads \
                 {want}; element j lives in byte 2 + j % 16, low nibble for j < 16",
                start % 4
            );
        }
    }
}

#[test]
fn ex3_workgroup_sum() {
    let gpu = Gpu::open().unwrap_or_else(|e| {
        panic!("{e}\nexercise 3 runs on a GPU adapter; run: bash scripts/test-deps.sh")
    });
    let shader = format!(
        "@group(0) @binding(0) var<storage, read> x: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> out: array<f32>;\n\
         var<workgroup> partial: array<f32, 256>;\n\
         {}\n\
         @compute @workgroup_size(256)\n\
         fn main(@builtin(local_invocation_id) me: vec3<u32>) {{\n\
             let lane = me.x;\n\
             var v = 0.0;\n\
             for (var i = lane; i < arrayLength(&x); i += 256u) {{ v += x[i] * x[i]; }}\n\
             out[lane] = workgroup_sum(lane, v);\n\
         }}\n",
        workgroup_sum_wgsl()
    );
    let pipeline = gpu
        .pipeline("exercise 3", &shader)
        .unwrap_or_else(|e| panic!("your WGSL does not compile into the test's shader: {e}"));
    let mut rng = Rng::new(3);
    for n in [1usize, 200, 256, 1000, 4096] {
        let x: Vec<f32> = (0..n).map(|_| rng.signed()).collect();
        let input = gpu.upload_f32("x", &x, wgpu::BufferUsages::empty());
        let out = gpu.storage("out", 256 * 4, wgpu::BufferUsages::COPY_SRC);
        let group = gpu.bind(&pipeline, &[&input, &out]).expect("bindings");
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        gpu.queue.submit([encoder.finish()]);
        let got = gpu.read_f32(&out, 256).expect("read back");
        let exact: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        // Squares and sums in f32 in any order: within γ(n + 1) of the exact sum.
        let u = f64::from(f32::EPSILON) / 2.0;
        let k = (n + 1) as f64 * u;
        let allowed = k / (1.0 - k) * exact;
        for (lane, &v) in got.iter().enumerate() {
            assert!(
                (f64::from(v) - exact).abs() <= allowed,
                "n = {n}: invocation {lane} got {v}, the sum is {exact}: every invocation \
                 must get the whole sum (a barrier after the last step, before reading \
                 partial[0]?)"
            );
        }
    }
}

#[test]
fn ex4_order_bound() {
    let u = 2f64.powi(-24);
    assert_eq!(order_bound(0, 5.0), 0.0, "no terms, no additions");
    assert_eq!(order_bound(1, 5.0), 0.0, "one term, no additions");
    let want = 2.0 * (u / (1.0 - u)) * 3.0;
    let got = order_bound(2, 3.0);
    assert!(
        (got - want).abs() <= want * 1e-12,
        "order_bound(2, 3.0) = {got}, expected 2·γ(1)·3 = {want}"
    );
    // And it holds: the same terms summed forwards and backwards never land further apart.
    let mut rng = Rng::new(4);
    for n in [2usize, 10, 128, 5000] {
        let t: Vec<f32> = (0..n).map(|_| rng.signed() * 1000.0).collect();
        let forwards: f32 = t.iter().sum();
        let backwards: f32 = t.iter().rev().sum();
        let sum_abs: f64 = t.iter().map(|v| f64::from(v.abs())).sum();
        let bound = order_bound(n, sum_abs);
        let k = (n - 1) as f64 * u;
        let want = 2.0 * k / (1.0 - k) * sum_abs;
        assert!(
            (bound - want).abs() <= want * 1e-12,
            "order_bound({n}, {sum_abs}) = {bound}, expected {want}"
        );
        assert!(
            f64::from((forwards - backwards).abs()) <= bound,
            "{n} terms: the two orders differ by more than the bound"
        );
    }
}
