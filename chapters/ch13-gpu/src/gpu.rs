//! The GPU as a program sees it through wgpu: an instance (which APIs to look on: Vulkan,
//! Metal, DX12), the adapters it finds (one per GPU and driver, plus Mesa's lavapipe, a
//! Vulkan driver that runs on the CPU), and the device and queue opened on the one chosen.
//!
//! Everything a shader needs later goes through [`Gpu`]: `device` creates buffers and
//! pipelines, `queue` takes the recorded work and the uploads.

use std::fmt;

/// What can go wrong on the GPU side, in words a reader can act on.
#[derive(Debug)]
pub enum Error {
    /// No adapter at all (or none whose name matches `LLM_BOOK_GPU`).
    NoAdapter(String),
    /// The adapter was found but would not open a device, or a shader or dispatch failed.
    Gpu(String),
    /// The caller's input does not fit: a shape, a format, a size past the adapter's limits.
    Input(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoAdapter(m) | Error::Gpu(m) | Error::Input(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The line to print when there is no adapter: what to install.
pub const HOW_TO_GET_ONE: &str = "install a Vulkan driver; without a GPU, Mesa's lavapipe \
     runs on the CPU: `bash scripts/test-deps.sh` (Debian's mesa-vulkan-drivers and libvulkan1)";

/// The environment variable that picks an adapter by a piece of its name.
pub const ADAPTER_VAR: &str = "LLM_BOOK_GPU";

/// Timestamp queries, and writing them inside a compute pass, between its dispatches.
const TIMESTAMPS: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES);

/// The optional features this chapter looks for, and whether the device has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Subgroup operations (`subgroupAdd`, …): reductions in registers, no workgroup memory.
    pub subgroups: bool,
    /// `f16` arithmetic in shaders.
    pub shader_f16: bool,
    /// `f64` arithmetic in shaders: RMSNorm sums its squares in f64, as the CPU does.
    pub shader_f64: bool,
    /// The GPU's clock read between dispatches (wgpu's timestamp queries inside a pass):
    /// `ch13-gpu bench --profile`.
    pub timestamps: bool,
}

// ANCHOR: gpu
/// One opened GPU: the adapter's description, the device that makes things on it and the
/// queue that runs them.
pub struct Gpu {
    pub info: wgpu::AdapterInfo,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The limits the device was opened with: the adapter's own, not WebGPU's defaults.
    pub limits: wgpu::Limits,
    pub found: Found,
    /// Whether its subgroups are the products' groups of 32 lanes (`matvec.rs`), checked
    /// the first time a product asks.
    pub(crate) whole_subgroups: std::sync::OnceLock<bool>,
}
// ANCHOR_END: gpu

/// Every adapter wgpu sees on the native backends (Vulkan, Metal, DX12; `WGPU_BACKEND`
/// narrows them), in the order the drivers list them.
pub fn adapters() -> Vec<wgpu::Adapter> {
    let desc = wgpu::InstanceDescriptor {
        backends: wgpu::Backends::PRIMARY,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    }
    .with_env();
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

// ANCHOR: choose
/// Which adapter to open: the one whose name contains `wanted` (case-insensitive) if given,
/// else the first discrete GPU, else the first integrated one, else the first of any kind
/// (lavapipe is a `Cpu` adapter). `None` when there is nothing to choose from.
pub fn choose(infos: &[wgpu::AdapterInfo], wanted: Option<&str>) -> Option<usize> {
    use wgpu::DeviceType::{DiscreteGpu, IntegratedGpu};
    if let Some(w) = wanted {
        let w = w.to_lowercase();
        return infos
            .iter()
            .position(|i| i.name.to_lowercase().contains(&w));
    }
    let first = |t| infos.iter().position(|i| i.device_type == t);
    first(DiscreteGpu)
        .or_else(|| first(IntegratedGpu))
        .or(if infos.is_empty() { None } else { Some(0) })
}
// ANCHOR_END: choose

impl Gpu {
    /// Opens the adapter [`choose`] picks, with `LLM_BOOK_GPU` read from the environment.
    pub fn open() -> Result<Gpu> {
        let wanted = std::env::var(ADAPTER_VAR).ok().filter(|s| !s.is_empty());
        let adapters = adapters();
        let infos: Vec<_> = adapters.iter().map(|a| a.get_info()).collect();
        let Some(i) = choose(&infos, wanted.as_deref()) else {
            return Err(Error::NoAdapter(match wanted {
                Some(w) if !infos.is_empty() => format!(
                    "no GPU adapter's name contains {w:?} ({ADAPTER_VAR}); there are: {}",
                    infos
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => format!("no GPU adapter found: {HOW_TO_GET_ONE}"),
            }));
        };
        Gpu::on(&adapters[i])
    }

    /// Opens a device on `adapter` with all of its limits and the optional features it has.
    pub fn on(adapter: &wgpu::Adapter) -> Result<Gpu> {
        let info = adapter.get_info();
        let have = adapter.features();
        let found = Found {
            subgroups: have.contains(wgpu::Features::SUBGROUP),
            shader_f16: have.contains(wgpu::Features::SHADER_F16),
            shader_f64: have.contains(wgpu::Features::SHADER_F64),
            timestamps: have.contains(TIMESTAMPS),
        };
        let mut features = wgpu::Features::empty();
        if found.subgroups {
            features |= wgpu::Features::SUBGROUP;
        }
        if found.shader_f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        if found.shader_f64 {
            features |= wgpu::Features::SHADER_F64;
        }
        if found.timestamps {
            features |= TIMESTAMPS;
        }
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("ch13"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| Error::Gpu(format!("{}: cannot open a device: {e}", info.name)))?;
        Ok(Gpu {
            info,
            device,
            queue,
            limits,
            found,
            whole_subgroups: std::sync::OnceLock::new(),
        })
    }

    /// Waits until everything submitted so far has run.
    pub fn wait(&self) -> Result<()> {
        self.wait_for(None)
    }

    /// Waits until the submission `index` has run (everything so far where `None`); what
    /// was submitted after it may still be running.
    pub fn wait_for(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: index,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))
    }

    /// Runs `make` inside an error scope: a validation error (a shader that does not
    /// compile, a binding that does not fit) comes back as an [`Error`] instead of wgpu's
    /// default, a panic.
    pub fn checked<T>(&self, what: &str, make: impl FnOnce() -> T) -> Result<T> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let made = make();
        match pollster::block_on(scope.pop()) {
            None => Ok(made),
            Some(e) => Err(Error::Gpu(format!("{what}: {e}"))),
        }
    }

    /// Compiles `wgsl` and makes a compute pipeline of its `main`, its bindings taken from
    /// the shader itself.
    pub fn pipeline(&self, label: &str, wgsl: &str) -> Result<wgpu::ComputePipeline> {
        self.checked(&format!("the {label} shader"), || {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(label),
                    source: wgpu::ShaderSource::Wgsl(wgsl.into()),
                });
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
        })
    }

    /// The largest buffer a shader can bind on this GPU, in bytes.
    pub fn largest_binding(&self) -> u64 {
        let l = &self.limits;
        l.max_storage_buffer_binding_size.min(l.max_buffer_size)
    }

    /// A storage buffer of `bytes` bytes, with `extra` usages (copies in or out).
    pub fn storage(&self, label: &str, bytes: usize, extra: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes as u64,
            usage: wgpu::BufferUsages::STORAGE | extra,
            mapped_at_creation: false,
        })
    }

    /// A uniform buffer holding `words` (a shader's `Params`).
    pub fn uniform(&self, words: &[u32]) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: &bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// A bind group for `pipeline`'s group 0: `buffers[i]` at binding `i`.
    pub fn bind(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> Result<wgpu::BindGroup> {
        let entries: Vec<_> = (0u32..)
            .zip(buffers)
            .map(|(binding, b)| wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.checked("binding buffers to a shader", || {
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            })
        })
    }

    /// Records what `record` dispatches into one compute pass and submits it, with a
    /// validation error (named by `what`) as an [`Error`].
    pub fn submit_pass(
        &self,
        what: &str,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>),
    ) -> Result<()> {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            record(&mut pass);
        }
        self.checked(what, || self.queue.submit([encoder.finish()]))?;
        Ok(())
    }

    /// Copies `n` f32 from `buffer` (made with `COPY_SRC`) back to the host.
    pub fn read_f32(&self, buffer: &wgpu::Buffer, n: usize) -> Result<Vec<f32>> {
        let size = (n * 4) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, size);
        self.queue.submit([encoder.finish()]);
        Ok(self
            .map_words(&staging)?
            .into_iter()
            .map(f32::from_bits)
            .collect())
    }

    /// Maps `buffer` (made with `MAP_READ`) once the GPU is done with it, and reads its
    /// words.
    pub fn map_words(&self, buffer: &wgpu::Buffer) -> Result<Vec<u32>> {
        self.map_words_after(buffer, None)
    }

    /// [`Gpu::map_words`] for a buffer the submission `index` wrote last: waits for that
    /// submission only, not for those queued after it.
    pub fn map_words_after(
        &self,
        buffer: &wgpu::Buffer,
        index: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u32>> {
        let (tx, rx) = std::sync::mpsc::channel();
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| drop(tx.send(r)));
        self.wait_for(index)?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Gpu(format!("reading back: {e}"))),
            Err(_) => return Err(Error::Gpu("reading back: the map never finished".into())),
        }
        let view = buffer
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading back: {e}")))?;
        let words = view
            .as_chunks::<4>()
            .0
            .iter()
            .map(|b| u32::from_le_bytes(*b))
            .collect();
        drop(view);
        buffer.unmap();
        Ok(words)
    }

    /// A buffer holding `data`, for shaders to read (and copies, with `extra`).
    pub fn upload_f32(&self, label: &str, data: &[f32], extra: wgpu::BufferUsages) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &bytes,
                usage: wgpu::BufferUsages::STORAGE | extra,
            })
    }

    /// `total` workgroups as a grid `(x, y)` whose x stays within the device's limit per
    /// dimension; a shader numbers its group `y · x_count + x` and skips those past `total`.
    pub fn grid(&self, total: u32) -> (u32, u32) {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1);
        (total.min(max), total.div_ceil(max))
    }
}

#[cfg(test)]
mod tests {
    use super::choose;
    use wgpu::{AdapterInfo, Backend, DeviceType};

    fn adapter(name: &str, t: DeviceType) -> AdapterInfo {
        AdapterInfo {
            name: name.into(),
            ..AdapterInfo::new(t, Backend::Vulkan)
        }
    }

    #[test]
    fn a_discrete_gpu_comes_first_then_integrated_then_the_cpu() {
        let lvp = adapter("llvmpipe (LLVM 15.0.6, 256 bits)", DeviceType::Cpu);
        let igpu = adapter("Intel(R) UHD Graphics", DeviceType::IntegratedGpu);
        let dgpu = adapter("NVIDIA H200", DeviceType::DiscreteGpu);
        let all = [lvp.clone(), igpu.clone(), dgpu.clone()];
        assert_eq!(choose(&all, None), Some(2), "the discrete GPU");
        assert_eq!(choose(&all[..2], None), Some(1), "the integrated GPU");
        assert_eq!(
            choose(&all[..1], None),
            Some(0),
            "lavapipe, when it is all there is"
        );
        assert_eq!(choose(&[], None), None, "nothing to choose from");
        assert_eq!(choose(&all, Some("LLVMPIPE")), Some(0), "by name, any case");
        assert_eq!(choose(&all, Some("radeon")), None, "a name nothing has");
    }
}
