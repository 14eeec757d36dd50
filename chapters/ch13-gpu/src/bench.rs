//! `ch13-gpu kernels`: how fast each product shader reads its weights, beside two ceilings:
//! a shader that only reads a buffer once (`shaders/read.wgsl`, [`read_rate`]), and a
//! device-to-device copy ([`copy_rate`]); and the floor under every dispatch, what one that
//! does almost nothing costs inside a submission ([`dispatch_floor`]). The read probe is the one a product is measured
//! against: a driver's copy need not run at the memory's rate (on an H200 it moved fewer
//! bytes a second than llama.cpp's decode read). Needs no model: the blocks are random
//! ([`crate::random`]).
//!
//! Each product is timed two ways:
//! - **batched**: many products recorded into one submission, then one wait. This is what a
//!   decode step does, and what the shader alone costs.
//! - **one submission each**: submit, wait, repeat. The difference is what a submission and
//!   its round trip cost, paid once per dispatch by an engine that does not batch.
//!
//! Where the adapter has subgroups, every product is timed with both reductions (subgroup,
//! then workgroup memory), on the same uploaded matrices; and with the adapter's own
//! reduction in the other [`Layout`]s (staged with 1 and 2 rows a lane, reading directly
//! with 1, 2 and 4), so that one run on a GPU says which the engine should use there.
//!
//! A matrix read over and over would sit in the GPU's last-level cache (tens of MB on a
//! datacenter GPU), so each shape is uploaded as several copies, [`WORKING_SET`] bytes in
//! all, and the products cycle through them: every product reads its weights from memory.

use std::time::{Duration, Instant};

use ch06_quantization::Format;
use serde_json::{Value, json};

use crate::acts;
use crate::gpu::{Error, Gpu, Result};
use crate::matvec::{FORMATS, GpuMatrix, Layout, MatVec, Product, Reading, Reduction};
use crate::random::{self, Rng};

/// Bytes of weights the products of one shape cycle through: several times any GPU's cache.
pub const WORKING_SET: usize = 256 << 20;

/// The shapes timed, `(rows, cols)`: a 7B's attention and FFN products, and SmolLM2's
/// FFN down-projection.
pub const SHAPES: [(usize, usize); 3] = [(4096, 4096), (11008, 4096), (576, 1536)];

/// The most pieces of work one timed run records: enough for a product of a few µs to run
/// for a fraction of a second, few enough that the recorded commands stay small.
pub(crate) const MOST: usize = 1 << 17;

/// Calls `step(n)`, which records `n` pieces of work, runs them and returns the seconds the
/// running took (not the recording), with `n` growing until one run takes at least `secs`;
/// returns that run's `n` and seconds.
pub(crate) fn time_until(
    secs: f64,
    mut step: impl FnMut(usize) -> Result<f64>,
) -> Result<(usize, f64)> {
    let mut n = 1;
    loop {
        let took = step(n)?;
        if took >= secs || n >= MOST {
            return Ok((n, took));
        }
        // Aim straight for the target once a run is long enough to trust.
        n = if took > 0.01 {
            ((n as f64 * secs / took * 1.1) as usize).max(n + 1)
        } else {
            n * 4
        }
        .min(MOST);
    }
}

/// Submits `buffers` one after another and waits for the last; the seconds that took.
pub(crate) fn submit_timed(
    gpu: &Gpu,
    buffers: Vec<wgpu::CommandBuffer>,
    wait_each: bool,
) -> Result<f64> {
    let t = Instant::now();
    for b in buffers {
        gpu.queue.submit([b]);
        if wait_each {
            gpu.wait()?;
        }
    }
    gpu.wait()?;
    Ok(t.elapsed().as_secs_f64())
}

/// The copy's rate, bytes read plus bytes written per second: the ceiling a shader that
/// reads its weights once can approach.
pub fn copy_rate(gpu: &Gpu, secs: f64) -> Result<(u64, f64)> {
    let size = (WORKING_SET as u64).min(gpu.limits.max_buffer_size) / 4 * 4;
    let make = |usage| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("copy"),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let src = make(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST);
    let dst = make(wgpu::BufferUsages::COPY_DST);
    let run = |n: usize| {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for _ in 0..n {
            encoder.copy_buffer_to_buffer(&src, 0, &dst, 0, size);
        }
        submit_timed(gpu, vec![encoder.finish()], false)
    };
    run(1)?; // first touch: the driver may allocate lazily
    let (n, took) = time_until(secs, run)?;
    Ok((size, 2.0 * size as f64 * n as f64 / took))
}

/// Words of the read probe's buffer each invocation adds; the grid's other invocations
/// read the words between them.
const READ_WORDS_PER_INVOCATION: u32 = 64;

// ANCHOR: read_probe
/// The read probe bound to one buffer: `shaders/read.wgsl` reads each of its words once a
/// dispatch and writes one wrapping sum a workgroup into `totals`.
pub struct ReadProbe {
    pub totals: wgpu::Buffer, // (workgroups) u32
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    grid: (u32, u32),
}

impl ReadProbe {
    /// Binds `data` (a storage buffer of whole words).
    pub fn new(gpu: &Gpu, data: &wgpu::Buffer) -> Result<ReadProbe> {
        let words = u32::try_from(data.size() / 4)
            .map_err(|_| Error::Input(format!("a read probe of {} bytes", data.size())))?;
        let groups = words.div_ceil(256 * READ_WORDS_PER_INVOCATION).max(1);
        let grid = gpu.grid(groups);
        let pipeline = gpu.pipeline("read probe", include_str!("../shaders/read.wgsl"))?;
        let totals = gpu.storage(
            "read totals",
            groups as usize * 4,
            wgpu::BufferUsages::COPY_SRC,
        );
        let params = gpu.uniform(&[words, grid.0, groups, 0]);
        let bind_group = gpu.bind(&pipeline, &[data, &totals, &params])?;
        Ok(ReadProbe {
            totals,
            pipeline,
            bind_group,
            grid,
        })
    }

    /// Records `n` reads of the whole buffer into `pass`.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n: usize) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        for _ in 0..n {
            pass.dispatch_workgroups(self.grid.0, self.grid.1, 1);
        }
    }
}

// ANCHOR_END: read_probe

/// The empty dispatch (`shaders/tick.wgsl`: 64 invocations, each adding 1 to its word)
/// bound to its counts, `(64)` u32.
pub struct Tick {
    pub counts: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
}

impl Tick {
    pub fn new(gpu: &Gpu) -> Result<Tick> {
        let pipeline = gpu.pipeline("tick", include_str!("../shaders/tick.wgsl"))?;
        let counts = gpu.storage("counts", 256, wgpu::BufferUsages::COPY_SRC);
        let bind_group = gpu.bind(&pipeline, &[&counts])?;
        Ok(Tick {
            counts,
            pipeline,
            bind_group,
        })
    }

    /// Records `n` dispatches, each after the one before.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n: usize) {
        for _ in 0..n {
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
    }
}

/// Seconds one empty dispatch costs, thousands recorded into one submission: the floor
/// under every dispatch of a decode step, whatever it reads.
pub fn dispatch_floor(gpu: &Gpu, secs: f64) -> Result<f64> {
    let tick = Tick::new(gpu)?;
    let run = |n: usize| {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            tick.record(&mut pass, n);
        }
        submit_timed(gpu, vec![encoder.finish()], false)
    };
    run(1)?;
    let (n, took) = time_until(secs, run)?;
    Ok(took / n as f64)
}

// ANCHOR: read_rate
/// The read probe's rate, bytes read per second, over one buffer as large as a binding may
/// be (up to [`WORKING_SET`]): the ceiling a product that reads its weights once can
/// approach.
pub fn read_rate(gpu: &Gpu, secs: f64) -> Result<(u64, f64)> {
    let limit = gpu.largest_binding();
    let size = (WORKING_SET as u64).min(limit) / 1024 * 1024;
    let data = gpu.storage("read probe", size as usize, wgpu::BufferUsages::empty());
    let probe = ReadProbe::new(gpu, &data)?;
    let run = |n: usize| {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            probe.record(&mut pass, n);
        }
        submit_timed(gpu, vec![encoder.finish()], false)
    };
    gpu.checked("the read probe", || run(1))??; // first touch: wgpu zeroes the buffer
    let (n, took) = time_until(secs, run)?;
    Ok((size, size as f64 * n as f64 / took))
}
// ANCHOR_END: read_rate

/// One shape of one format, timed both ways with each of `all`'s reductions; a JSON object
/// for each. `progress` is told each reduction as it starts.
pub fn product(
    gpu: &Gpu,
    all: &[MatVec],
    format: Format,
    shape: (usize, usize),
    secs: f64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Value>> {
    let (rows, cols) = shape;
    let mut rng = Rng::new(0x13 + rows as u64 * 7 + cols as u64);
    let blocks = random::blocks(format, rows, cols, &mut rng);
    let copies = WORKING_SET.div_ceil(blocks.len()).clamp(1, 512);
    let matrices = (0..copies)
        .map(|_| GpuMatrix::from_blocks(gpu, format, rows, cols, &blocks))
        .collect::<Result<Vec<_>>>()?;
    let x: Vec<f32> = (0..cols).map(|_| rng.signed()).collect();
    let words = acts::quantize(format.activation().expect("a block format"), &x)?;
    let mut out = Vec::new();
    for (i, shaders) in all.iter().enumerate() {
        let r = shaders.reduction_name();
        let layout = shaders.layout.name();
        progress(&format!("{} {rows}x{cols} ({r}, {layout})", format.name()));
        let products = matrices
            .iter()
            .map(|m| Product::new(gpu, shaders, m))
            .collect::<Result<Vec<_>>>()?;
        for p in &products {
            p.write_input(gpu, &words)?;
        }
        let mut k = timed(gpu, &products, i == 0, blocks.len() as f64, secs)?;
        k["format"] = json!(format.name());
        k["rows"] = json!(rows);
        k["cols"] = json!(cols);
        k["weight_bytes"] = json!(blocks.len());
        k["copies"] = json!(copies);
        k["reduction"] = json!(r);
        k["layout"] = json!(layout);
        out.push(k);
    }
    Ok(out)
}

/// `products`, each reading `bytes` of weights, timed in one submission; and if they are
/// the `first` of their shape (the engine's own layout), run once before (the first touch
/// of their matrices) and timed a submission each too. A JSON object.
fn timed(gpu: &Gpu, products: &[Product], first: bool, bytes: f64, secs: f64) -> Result<Value> {
    let copies = products.len();
    // `n` products recorded into one pass, or into one command buffer each.
    let record = |products: &mut dyn Iterator<Item = &Product>| {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for p in products {
                p.record(&mut pass);
            }
        }
        encoder.finish()
    };
    let batched = |n: usize| {
        let one = record(&mut products.iter().cycle().take(n));
        submit_timed(gpu, vec![one], false)
    };
    let each = |n: usize| {
        let buffers = products
            .iter()
            .cycle()
            .take(n)
            .map(|p| record(&mut std::iter::once(p)))
            .collect();
        submit_timed(gpu, buffers, true)
    };
    if first {
        gpu.checked("the warm-up products", || batched(copies))??;
    }
    let (n_batched, t_batched) = time_until(secs, batched)?;
    let per = |n: usize, t: f64| {
        json!({
            "products": n,
            "us_per_product": t / n as f64 * 1e6,
            "gbps": bytes * n as f64 / t / 1e9,
        })
    };
    let mut k = json!({ "batched": per(n_batched, t_batched) });
    if first {
        let (n_each, t_each) = time_until(secs, each)?;
        k["one_submission_each"] = per(n_each, t_each);
    }
    Ok(k)
}

/// The whole bench: the adapter, the copy ceiling, every format at every shape. `secs` is
/// the time each measurement runs for.
pub fn run(gpu: &Gpu, secs: f64, mut progress: impl FnMut(&str)) -> Result<Value> {
    let started = Instant::now();
    // The reduction and layout this adapter gets, the workgroup reduction beside it when
    // that is not it, then the adapter's own reduction in the other layouts.
    let shaders = MatVec::new(gpu)?;
    let (own, layout) = (shaders.reduction, shaders.layout);
    let mut all = vec![shaders];
    if own != Reduction::Workgroup {
        all.push(MatVec::with_layout(gpu, Reduction::Workgroup, layout)?);
    }
    let others = [
        (Reading::Staged, 1),
        (Reading::Staged, 2),
        (Reading::Direct, 1),
        (Reading::Direct, 2),
        (Reading::Direct, 4),
    ];
    for (reading, rows_each) in others {
        let other = Layout { reading, rows_each };
        if other != layout {
            all.push(MatVec::with_layout(gpu, own, other)?);
        }
    }
    progress("read");
    let (read_bytes, read_bps) = read_rate(gpu, secs)?;
    progress("copy");
    let (copy_bytes, copy_bps) = copy_rate(gpu, secs)?;
    progress("an empty dispatch");
    let floor = dispatch_floor(gpu, secs)?;
    let mut kernels = Vec::new();
    for format in FORMATS {
        for shape in SHAPES {
            for mut k in product(gpu, &all, format, shape, secs, &mut progress)? {
                let gbps = k["batched"]["gbps"].as_f64().unwrap_or(0.0);
                k["fraction_of_read"] = json!(gbps * 1e9 / read_bps);
                k["fraction_of_copy"] = json!(gbps * 1e9 / copy_bps);
                kernels.push(k);
            }
        }
    }
    let shaders = &all[0];
    Ok(json!({
        "adapter": {
            "name": gpu.info.name,
            "backend": gpu.info.backend.to_str(),
            "device_type": format!("{:?}", gpu.info.device_type),
            "driver": gpu.info.driver,
            "driver_info": gpu.info.driver_info,
        },
        "reduction": shaders.reduction_name(),
        "layout": shaders.layout.name(),
        "secs_per_measurement": secs,
        "read": { "bytes": read_bytes, "gbps": read_bps / 1e9 },
        "copy": { "bytes": copy_bytes, "gbps_read_plus_write": copy_bps / 1e9 },
        "dispatch_us": floor * 1e6,
        "kernels": kernels,
        "wall_secs": started.elapsed().as_secs_f64(),
    }))
}

/// The bench's JSON as a table.
pub fn text(r: &Value) -> String {
    let a = &r["adapter"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let mut out = format!(
        "adapter: {} ({}, {}; driver {} {})\n",
        s(&a["name"]),
        s(&a["backend"]),
        s(&a["device_type"]),
        s(&a["driver"]),
        s(&a["driver_info"])
    );
    out += &format!(
        "the reduction here: {} ({}=workgroup, subgroup or in-order picks one), the layout \
         {} ({}=staged-2, direct-1, … picks one)\n",
        s(&r["reduction"]),
        crate::matvec::REDUCTION_VAR,
        s(&r["layout"]),
        crate::matvec::LAYOUT_VAR
    );
    out += &format!(
        "a shader reading {} MiB once: {:.1} GB/s read (the ceiling)\n",
        r["read"]["bytes"].as_u64().unwrap_or(0) >> 20,
        f(&r["read"]["gbps"])
    );
    out += &format!(
        "copy_buffer_to_buffer of {} MiB: {:.1} GB/s read + written\n",
        r["copy"]["bytes"].as_u64().unwrap_or(0) >> 20,
        f(&r["copy"]["gbps_read_plus_write"])
    );
    out += &format!(
        "an empty dispatch, thousands in one submission: {:.2} µs each (the floor)\n\n",
        f(&r["dispatch_us"])
    );
    out += "format  rows x cols    reduction  layout    weights MB   batched µs    GB/s  of read   one submission each µs    GB/s\n";
    for k in r["kernels"].as_array().into_iter().flatten() {
        // a submission each: the engine's own layout only
        let each = &k["one_submission_each"];
        let (each_us, each_gbps) = match each.is_null() {
            true => ("-".to_string(), "-".to_string()),
            false => (
                format!("{:.1}", f(&each["us_per_product"])),
                format!("{:.1}", f(&each["gbps"])),
            ),
        };
        out += &format!(
            "{:<6}  {:>5} x {:<5}  {:<9}  {:<8}  {:>10.2}  {:>11.1}  {:>6.1}  {:>6.1}%  {:>22}  {:>6}\n",
            s(&k["format"]),
            k["rows"].as_u64().unwrap_or(0),
            k["cols"].as_u64().unwrap_or(0),
            s(&k["reduction"]),
            s(&k["layout"]),
            f(&k["weight_bytes"]) / 1e6,
            f(&k["batched"]["us_per_product"]),
            f(&k["batched"]["gbps"]),
            100.0 * f(&k["fraction_of_read"]),
            each_us,
            each_gbps,
        );
    }
    out += &format!("\n{:.1} s in all\n", f(&r["wall_secs"]));
    out
}

/// Checks `--secs`: a measurement long enough to mean something, short enough to finish.
pub fn check_secs(secs: f64) -> Result<Duration> {
    if !(0.01..=10.0).contains(&secs) {
        return Err(Error::Input(format!("--secs {secs}: give 0.01 to 10")));
    }
    Ok(Duration::from_secs_f64(secs))
}
