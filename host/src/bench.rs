//! Benchmarks (`moe4 bench ...`, `cargo xtask bench ...`): every number is
//! a ratio against a ceiling measured in the same run (DESIGN.md §5).
//!
//! - **copy**: device-to-device copy of 2 GiB, bytes read + written / time.
//! - **decode**: the NVFP4 layer at M = 1..64 for the model shapes of
//!   DESIGN.md §4, timed by CUDA graph replay; each graph holds R forward
//!   calls whose routings rotate over disjoint expert pools where the layer
//!   has enough experts, so the touched weights are not in L2; bytes =
//!   weights + scales of the experts each call touches. Beside each point,
//!   its floor ([`read_floor_us`]): one kernel per call that only reads
//!   those bytes, launched and timed the same way.
//! - **peak**: `mma.sync` s8 / s4 / f16 rates on register operands.
//! - **route**: the routing alone, one block vs many, by M (what
//!   [`crate::ROUTE_BLOCKS_FROM`] is chosen from).
//! - **w4a4**: the fused grouped GEMM vs the two-kernel baseline (GEMM to
//!   i32 + dequant kernel) for FC1 and FC2 of each shape, rows = M x top-k
//!   in 128, 1024, 8192; TOPS count 2 ops per multiply-add.

use crate::error::Result;
use crate::gpu::Gpu;
use crate::moe::Tuning;
use crate::reference::Activation;
use crate::weights::MoeWeights;
use crate::{GemmArgs, Workspace, W4A4};
use cudarc::driver::sys::CUstreamCaptureMode;
use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut};
use half::bf16;
use moe4_kernels::params::ReadFloorParams;
use std::fmt::Write as _;
use std::sync::Arc;

/// A model's MoE shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Name.
    pub name: &'static str,
    /// Hidden size.
    pub h: usize,
    /// Intermediate size.
    pub i: usize,
    /// Experts.
    pub e: usize,
    /// Experts per token.
    pub topk: usize,
}

/// The shapes of DESIGN.md §4.
pub const SHAPES: &[Shape] = &[
    Shape { name: "Qwen3-30B-A3B", h: 2048, i: 768, e: 128, topk: 8 },
    Shape { name: "DeepSeek-V3", h: 7168, i: 2048, e: 256, topk: 8 },
    Shape { name: "DeepSeek-V4-Pro", h: 7168, i: 3072, e: 384, topk: 6 },
    Shape { name: "DeepSeek-V4-Flash", h: 4096, i: 2048, e: 256, topk: 6 },
    Shape { name: "GPT-OSS-120B", h: 2880, i: 2880, e: 128, topk: 4 },
    Shape { name: "Mixtral-8x7B", h: 4096, i: 14336, e: 8, topk: 2 },
];

/// Fills a device buffer with hashed words `(h & and_mask) | or_mask`.
pub fn fill<T>(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    seed: u32,
    and_mask: u32,
    or_mask: u32,
) -> Result<()> {
    let words = (buf.len() * std::mem::size_of::<T>() / 4) as u64;
    let p = buf.device_ptr_mut(stream).0;
    let args: [&dyn crate::gpu::ArgRef; 5] = [&p, &words, &seed, &and_mask, &or_mask];
    // SAFETY: the kernel writes `words` u32 inside `buf`.
    unsafe { gpu.launch_args(stream, "moe4_fill", (gpu.sm_count() * 8).max(1), 256, &args) }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Times `f` with CUDA events: `warm` runs, then `reps` timed runs; returns
/// the median milliseconds per run.
pub fn time_ms(stream: &Arc<CudaStream>, warm: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warm {
        f()?;
    }
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let b = stream.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        b.synchronize()?;
        t.push(a.elapsed_ms(&b)? as f64);
    }
    Ok(median(t))
}

/// Device-to-device copy bandwidth (read + write bytes per second, GB/s).
pub fn copy_bandwidth(stream: &Arc<CudaStream>) -> Result<f64> {
    let n = 1usize << 29; // 2 GiB of u32
    let src = stream.alloc_zeros::<u32>(n)?;
    let mut dst = stream.alloc_zeros::<u32>(n)?;
    let ms = time_ms(stream, 2, 10, || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    Ok(2.0 * (4 * n) as f64 / (ms * 1e-3) / 1e9)
}

pub(crate) struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Random routing for `m` tokens: each token gets `topk` distinct experts
/// from `pool`.
fn routing(rng: &mut Lcg, pool: &[i32], m: usize, topk: usize) -> (Vec<i32>, Vec<f32>) {
    let mut ids = Vec::with_capacity(m * topk);
    let mut w = Vec::with_capacity(m * topk);
    for _ in 0..m {
        let mut chosen: Vec<i32> = Vec::with_capacity(topk);
        while chosen.len() < topk.min(pool.len()) {
            let e = pool[(rng.next() as usize) % pool.len()];
            if !chosen.contains(&e) {
                chosen.push(e);
            }
        }
        while chosen.len() < topk {
            chosen.push(-1);
        }
        for e in chosen {
            ids.push(e);
            w.push(1.0 / topk as f32);
        }
    }
    (ids, w)
}

/// Balanced routing for `m` tokens over `e` experts: pair `p` (token
/// `p / topk`, choice `p % topk`) goes to expert `p % e`, so every expert
/// gets `m * topk / e` pairs, give or take one, and a token's `topk <= e`
/// experts are distinct (consecutive numbers modulo `e`). The prefill
/// bench times it beside the random routing: where `m * topk / e` is a
/// multiple of the tile's pairs, no expert has a partial or narrow tile,
/// so the difference is what the experts' uneven counts cost.
fn balanced_routing(m: usize, topk: usize, e: usize) -> (Vec<i32>, Vec<f32>) {
    let ids = (0..m * topk).map(|p| if topk <= e { (p % e) as i32 } else { -1 }).collect();
    (ids, vec![1.0 / topk as f32; m * topk])
}

/// One decode measurement.
#[derive(Clone, Debug)]
pub struct DecodeResult {
    /// Shape name.
    pub shape: &'static str,
    /// Tokens.
    pub m: usize,
    /// Microseconds per layer call.
    pub us: f64,
    /// Touched expert bytes per call (average).
    pub bytes: f64,
    /// Achieved GB/s.
    pub gbps: f64,
    /// Over the same-run copy bandwidth.
    pub of_copy: f64,
    /// Microseconds per call of the floor at this point: one kernel per
    /// call that only reads `bytes` after a dependent launch and a
    /// dependent load ([`read_floor_us`]), timed the same way.
    pub floor_us: f64,
}

impl DecodeResult {
    /// The floor's bytes over its time, over the copy bandwidth: the most
    /// any decode kernel could reach at this point on this bench.
    pub fn floor_of_copy(&self) -> f64 {
        self.of_copy * self.us / self.floor_us
    }
}

/// A decode layer with random weights for `shape`, its workspace for up to
/// `max_m` tokens, an input and an output of `max_m` rows, and the random
/// source of its routings.
pub(crate) struct DecodeLayer {
    pub w: MoeWeights,
    pub ws: Workspace,
    pub x: CudaSlice<bf16>,
    pub out: CudaSlice<bf16>,
    pub rng: Lcg,
}

/// The layer the decode benches time (the same weights and inputs for the
/// same shape and `max_m`).
pub(crate) fn decode_layer(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    max_m: usize,
) -> Result<DecodeLayer> {
    let act = if shape.name.starts_with("GPT-OSS") { Activation::GPT_OSS } else { Activation::Silu };
    let w = MoeWeights::random(gpu, stream, shape.e, shape.h, shape.i, act, 1.0 / 256.0, 7)?;
    let ws = Workspace::new(&w, stream, max_m, shape.topk)?;
    let mut rng = Lcg(12345);
    let x_host: Vec<bf16> =
        (0..max_m * shape.h).map(|_| bf16::from_f32((rng.next() % 2000) as f32 / 1000.0 - 1.0)).collect();
    let x = stream.clone_htod(&x_host)?;
    let out = stream.alloc_zeros::<bf16>(max_m * shape.h)?;
    Ok(DecodeLayer { w, ws, x, out, rng })
}

/// The routings of one decode point: `calls` of them (ids, routing
/// weights), each over an expert pool disjoint from the next one's where
/// the layer has enough experts, so that a graph of `calls` forward calls
/// streams at least 4 x `l2` bytes and the touched weights are not in L2;
/// `bytes`: the touched experts' weight and scale bytes per call
/// (average).
pub(crate) struct DecodeCalls {
    pub bufs: Vec<(CudaSlice<i32>, CudaSlice<f32>)>,
    pub bytes: f64,
    pub calls: usize,
}

/// [`DecodeCalls`] for `m` tokens of `layer`'s shape.
pub(crate) fn decode_calls(
    stream: &Arc<CudaStream>,
    w: &MoeWeights,
    shape: Shape,
    m: usize,
    l2: f64,
    rng: &mut Lcg,
) -> Result<DecodeCalls> {
    // Experts per pool and how many disjoint pools to rotate over.
    let pool_size = (2 * m * shape.topk).clamp(shape.topk, shape.e);
    let pools = (shape.e / pool_size).max(1);
    let touched_guess = (m * shape.topk).min(shape.e) as f64 * w.expert_bytes() as f64;
    let calls = ((4.0 * l2 / touched_guess).ceil() as usize).clamp(2, 64).max(pools.min(16));
    let mut perm: Vec<i32> = (0..shape.e as i32).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, (rng.next() as usize) % (i + 1));
    }
    let mut bufs = Vec::new();
    let mut bytes = 0f64;
    for c in 0..calls {
        let p = c % pools;
        let pool = &perm[p * pool_size..(p + 1) * pool_size];
        let (ids, tw) = routing(rng, pool, m, shape.topk);
        let mut seen = vec![false; shape.e];
        for &e in &ids {
            if e >= 0 {
                seen[e as usize] = true;
            }
        }
        bytes += seen.iter().filter(|&&s| s).count() as f64 * w.expert_bytes() as f64;
        bufs.push((stream.clone_htod(&ids)?, stream.clone_htod(&tw)?));
    }
    Ok(DecodeCalls { bufs, bytes: bytes / calls as f64, calls })
}

/// What `record` queues on `stream` (this program's one stream), captured
/// as a CUDA graph (`None`: nothing was queued).
pub(crate) fn capture(stream: &Arc<CudaStream>, record: impl FnOnce() -> Result<()>) -> Result<Option<CudaGraph>> {
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    record()?;
    Ok(stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))?)
}

/// One forward call of `w` per routing of `bufs`, on the rows of `x`
/// (into as many rows of `out`), on `stream` (captured or not).
pub(crate) fn forward_calls(
    w: &MoeWeights,
    ws: &mut Workspace,
    stream: &Arc<CudaStream>,
    x: &CudaView<bf16>,
    out: &mut CudaSlice<bf16>,
    bufs: &[(CudaSlice<i32>, CudaSlice<f32>)],
) -> Result<()> {
    for (ids, tw) in bufs {
        let mut ov = out.slice_mut(..x.len());
        w.forward(ws, stream, x, &ids.as_view(), &tw.as_view(), &mut ov)?;
    }
    Ok(())
}

/// Times the decode layer for `shape` at each `m`, under `tuning` (`moe4
/// bench decode --tuning ...`; a point it cannot run is an error) or the
/// defaults (`None`). Either way the same layer, routings and timing.
pub fn decode(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    ms: &[usize],
    copy_gbps: f64,
    tuning: Option<Tuning>,
) -> Result<Vec<DecodeResult>> {
    let r = decode_variants(gpu, stream, shape, ms, copy_gbps, &[("decode", tuning)])?;
    r.into_iter()
        .zip(ms)
        .map(|((_, x), m)| {
            x.ok_or_else(|| {
                crate::error::unsupported(
                    "the tuning",
                    format!("{tuning:?}"),
                    format!("cannot run {} at M = {m}", shape.name),
                )
            })
        })
        .collect()
}

/// Times the decode layer for `shape` at each `m` under each tuning
/// (`None` = the defaults); a variant that does not exist for a point
/// (e.g. a pipeline depth built only for one column tile) gives `None`.
pub fn decode_variants(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    ms: &[usize],
    copy_gbps: f64,
    tunings: &[(&'static str, Option<Tuning>)],
) -> Result<Vec<(&'static str, Option<DecodeResult>)>> {
    let max_m = *ms.iter().max().unwrap_or(&1);
    let DecodeLayer { w, mut ws, x, mut out, mut rng } = decode_layer(gpu, stream, shape, max_m)?;
    let defaults = *ws.tuning_mut();
    let l2 = 64e6;
    let mut results = Vec::new();
    for &m in ms {
        let DecodeCalls { bufs, bytes, calls } = decode_calls(stream, &w, shape, m, l2, &mut rng)?;
        let xv = x.slice(..m * shape.h);
        // One graph per variant (None where the variant has no kernels for
        // this point), then the timings interleaved over three passes and
        // the median taken: the card drifts by several per cent over a run.
        let mut graphs = Vec::new();
        for &(_, tuning) in tunings {
            *ws.tuning_mut() = tuning.unwrap_or(defaults);
            // Eager run first (loads the kernels, checks for errors).
            let eager =
                forward_calls(&w, &mut ws, stream, &xv, &mut out, &bufs).and_then(|()| Ok(stream.synchronize()?));
            match eager {
                Ok(()) => {}
                // A variant without kernels for this point is skipped; the
                // defaults must run.
                Err(_) if tuning.is_some() => {
                    graphs.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            }
            graphs.push(capture(stream, || forward_calls(&w, &mut ws, stream, &xv, &mut out, &bufs))?);
        }
        let passes = if tunings.len() > 1 { 3 } else { 1 };
        let reps = (2000.0 / calls as f64).ceil().clamp(3.0, 50.0) as usize;
        let floor_us = read_floor_us(gpu, stream, bytes, calls, l2, reps)?;
        let mut times = vec![Vec::new(); tunings.len()];
        for pass in 0..passes {
            // Every other pass in reverse order: in a fixed order the first
            // variant read up to 16 % slow on large layers (run 42).
            for j in 0..graphs.len() {
                let i = if pass % 2 == 0 { j } else { graphs.len() - 1 - j };
                if let Some(g) = &graphs[i] {
                    times[i].push(time_ms(stream, 2, reps, || Ok(g.launch()?))?);
                }
            }
        }
        for (i, &(label, _)) in tunings.iter().enumerate() {
            if times[i].is_empty() {
                results.push((label, None));
                continue;
            }
            let us = median(std::mem::take(&mut times[i])) * 1e3 / calls as f64;
            let gbps = bytes / (us * 1e-6) / 1e9;
            let of_copy = gbps / copy_gbps;
            results.push((label, Some(DecodeResult { shape: shape.name, m, us, bytes, gbps, of_copy, floor_us })));
        }
        *ws.tuning_mut() = defaults;
    }
    Ok(results)
}

/// The decode bench's floor for a point: microseconds per call of
/// `moe4_read_floor` reading `bytes` (rounded up to 16-byte words) per
/// call, `calls` calls per CUDA graph, each launched as the layer's
/// kernels are (programmatic dependent launch: it waits for the one
/// before), each reading its own slice of a buffer of at least 4 x `l2`
/// bytes (as the decode graphs rotate over expert pools, so the bytes come
/// from DRAM); the median of three timings of `reps` replays. A layer call
/// needs at least one such kernel (its reads depend on the routing, which
/// the kernel before it writes), so this is what no decode kernel can beat
/// on this bench.
pub fn read_floor_us(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    bytes: f64,
    calls: usize,
    l2: f64,
    reps: usize,
) -> Result<f64> {
    let n16 = ((bytes / 16.0).ceil() as usize).max(1);
    let slices = ((4.0 * l2 / 16.0).ceil() as usize).div_ceil(n16).max(1);
    let buf = stream.alloc_zeros::<u32>(4 * n16 * slices)?;
    let dep = stream.alloc_zeros::<u32>(1)?;
    let mut out = stream.alloc_zeros::<u32>(1)?;
    let (base, _b) = buf.device_ptr(stream);
    let (dep_ptr, _d) = dep.device_ptr(stream);
    let (out_ptr, _o) = out.device_ptr_mut(stream);
    // Every block the GPU holds at once (one wave).
    let grid = gpu.resident_blocks("moe4_read_floor", 256, 0)?;
    let launch = |c: usize| -> Result<()> {
        let p = ReadFloorParams {
            src: base + (16 * n16 * (c % slices)) as u64,
            n16: n16 as u64,
            dep: dep_ptr,
            out: out_ptr,
        };
        // SAFETY: slice `c % slices` of `buf` holds n16 16-byte words;
        // `dep` and `out` hold one word each.
        unsafe { gpu.launch_dependent(stream, "moe4_read_floor", grid, 256, 0, p, true) }
    };
    for c in 0..calls {
        launch(c)?;
    }
    stream.synchronize()?;
    let Some(g) = capture(stream, || (0..calls).try_for_each(launch))? else { return Ok(f64::NAN) };
    let mut t = Vec::new();
    for _ in 0..3 {
        t.push(time_ms(stream, 2, reps, || Ok(g.launch()?))?);
    }
    Ok(median(t) * 1e3 / calls as f64)
}

/// The decode variants `moe4 bench tune` compares, against the defaults
/// `d`: without programmatic launch, the 4- and 8-warp kernels, loads only,
/// the first 1/2/3 launches alone (route, + FC1, + FC2; where the FC
/// kernels route the pairs themselves, "route" launches nothing), one, two
/// and four column tiles, two or four with 32- and 64-row tasks, and the
/// routing kernel instead of the FC kernels' own routing (whole layer, and
/// route + FC1), the FC kernels' routing wherever it can run (up to
/// `FC_ROUTE_MAX_PAIRS` pairs, whatever the layer's size), and the
/// experimental builds' sliced FC2, 6-warp FC1 and FC2 per-group waits
/// turned off and forced.
pub fn tune_variants(d: Tuning) -> Vec<(&'static str, Option<Tuning>)> {
    vec![
        ("default", None),
        ("no PDL", Some(Tuning { pdl: false, ..d })),
        ("4 warps", Some(Tuning { wide: Some(false), ..d })),
        ("8 warps", Some(Tuning { wide: Some(true), ..d })),
        ("loads only", Some(Tuning { load_only: true, ..d })),
        ("route", Some(Tuning { launches: 1, ..d })),
        ("route+FC1", Some(Tuning { launches: 2, ..d })),
        ("route+FC1+FC2", Some(Tuning { launches: 3, ..d })),
        ("NT=1", Some(Tuning { nt: Some(1), ..d })),
        ("NT=2", Some(Tuning { nt: Some(2), ..d })),
        ("NT=4", Some(Tuning { nt: Some(4), ..d })),
        ("NT=2 r32", Some(Tuning { nt: Some(2), task_rows: Some(32), ..d })),
        ("NT=2 r64", Some(Tuning { nt: Some(2), task_rows: Some(64), ..d })),
        ("NT=4 r32", Some(Tuning { nt: Some(4), task_rows: Some(32), ..d })),
        ("NT=4 r64", Some(Tuning { nt: Some(4), task_rows: Some(64), ..d })),
        ("route kernel", Some(Tuning { fc_route_pairs: Some(0), ..d })),
        ("FC routing", Some(Tuning { fc_route_pairs: Some(moe4_kernels::launch::FC_ROUTE_MAX_PAIRS), ..d })),
        ("route kernel+FC1", Some(Tuning { fc_route_pairs: Some(0), launches: 2, ..d })),
        // The experimental builds' decode kernels (`moe4_exp = "fc2sl"`,
        // `"w6"`): what each buys where the defaults take it ("-" where the
        // build has no such kernels).
        ("no FC2 slices", Some(Tuning { fc2_slices: Some(1), ..d })),
        ("no 6-warp FC1", Some(Tuning { w6: Some(false), ..d })),
        ("6-warp FC1", Some(Tuning { w6: Some(true), ..d })),
        ("no FC deps", Some(Tuning { deps: Some(false), ..d })),
        ("FC deps", Some(Tuning { deps: Some(true), ..d })),
    ]
}

/// Formats `moe4 bench tune` results: one row per (shape, M), one column
/// per variant (µs, and the fraction of copy bandwidth).
pub fn tune_table(r: &[(&'static str, Option<DecodeResult>)], labels: &[&str]) -> String {
    let mut s = String::from("| shape | M |");
    for l in labels {
        let _ = write!(s, " {l} |");
    }
    s.push_str("\n|---|---:|");
    for _ in labels {
        s.push_str("---:|");
    }
    s.push('\n');
    let mut i = 0;
    while i < r.len() {
        let first = r[i..].iter().find_map(|(_, x)| x.as_ref());
        let (name, m) = first.map(|x| (x.shape, x.m)).unwrap_or(("?", 0));
        let _ = write!(s, "| {name} | {m} |");
        for (_, x) in r[i..].iter().take(labels.len()) {
            match x {
                Some(x) => {
                    let _ = write!(s, " {:.1} ({:.2}) |", x.us, x.of_copy);
                }
                None => s.push_str(" - |"),
            }
        }
        s.push('\n');
        i += labels.len();
    }
    s
}

/// JSON of `moe4 bench tune` results.
pub fn tune_json(r: &[(&'static str, Option<DecodeResult>)], copy_gbps: f64) -> String {
    let rows: Vec<String> = r
        .iter()
        .filter_map(|(l, x)| {
            x.as_ref().map(|x| {
                format!(
                    "{{\"variant\":\"{l}\",\"shape\":\"{}\",\"m\":{},\"us\":{:.3},\"of_copy\":{:.4}}}",
                    x.shape, x.m, x.us, x.of_copy
                )
            })
        })
        .collect();
    format!("{{\"copy_gbps\":{copy_gbps:.1},\"tune\":[{}]}}", rows.join(","))
}

/// Tensor-core peaks in TOPS: (s8 m16n8k32, s4 m16n8k64, f16 m16n8k16).
pub fn peaks(gpu: &Arc<Gpu>, stream: &Arc<CudaStream>) -> Result<(f64, f64, f64)> {
    let blocks = gpu.sm_count() * 4;
    let threads = 256u32;
    let mut out = stream.alloc_zeros::<u32>((blocks * threads) as usize)?;
    let optr = out.device_ptr_mut(stream).0;
    let run = |name: &str, iters: u32, ops_per_mma: f64| -> Result<f64> {
        let seed = 0x1234_5678u32;
        let args: [&dyn crate::gpu::ArgRef; 3] = [&seed, &iters, &optr];
        // SAFETY: `out` has one word per thread.
        let ms = time_ms(stream, 1, 5, || unsafe { gpu.launch_args(stream, name, blocks, threads, &args) })?;
        let mmas = (blocks * threads / 32) as f64 * iters as f64 * 8.0;
        Ok(mmas * ops_per_mma / (ms * 1e-3) / 1e12)
    };
    let s8 = run("peak_mma_s8", 4096, 2.0 * 16.0 * 8.0 * 32.0)?;
    let s4 = run("peak_mma_s4", 512, 2.0 * 16.0 * 8.0 * 64.0)?;
    let f16 = run("peak_mma_f16", 4096, 2.0 * 16.0 * 8.0 * 16.0)?;
    Ok((s8, s4, f16))
}

/// One W4A4 measurement.
#[derive(Clone, Debug)]
pub struct W4A4Result {
    /// Shape name.
    pub shape: &'static str,
    /// "FC1" or "FC2".
    pub gemm: &'static str,
    /// Rows (M x top-k).
    pub rows: usize,
    /// N.
    pub n: usize,
    /// K.
    pub k: usize,
    /// Fused GEMM microseconds.
    pub fused_us: f64,
    /// Baseline (GEMM to i32 + dequant) microseconds.
    pub baseline_us: f64,
    /// The seed's full design: the baseline plus its blocking copy of the
    /// expert offsets to the host before each call.
    pub seed_us: f64,
    /// The fused GEMM on the `mma.sync` kernels, where `fused_us` ran the
    /// `wgmma` ones (sm_90a).
    pub mma_sync_us: Option<f64>,
    /// Fused TOPS.
    pub tops: f64,
    /// Fused over the same-run s8 peak.
    pub of_peak: f64,
}

/// Times the W4A4 GEMMs of `shape` for each total row count.
pub fn w4a4(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    rows_list: &[usize],
    s8_peak: f64,
) -> Result<Vec<W4A4Result>> {
    let mut api = W4A4::new(gpu, stream)?;
    let mut res = Vec::new();
    for (gemm, n, k) in [("FC1", 2 * shape.i, shape.h), ("FC2", shape.h, shape.i)] {
        let e = shape.e;
        let mut b = stream.alloc_zeros::<u8>(e * n * k / 2)?;
        fill(gpu, stream, &mut b, 3, u32::MAX, 0)?;
        let s_w = stream.clone_htod(&vec![0.01f32; e * n])?;
        for &rows in rows_list {
            let mut a = stream.alloc_zeros::<u8>(rows * k / 2)?;
            fill(gpu, stream, &mut a, 5, u32::MAX, 0)?;
            let s_a = stream.clone_htod(&vec![0.02f32; rows])?;
            let mut rng = Lcg(rows as u64);
            let mut counts = vec![0i64; e];
            for _ in 0..rows {
                counts[(rng.next() as usize) % e] += 1;
            }
            let mut offsets = vec![0i64; e + 1];
            for i in 0..e {
                offsets[i + 1] = offsets[i] + counts[i];
            }
            let off = stream.clone_htod(&offsets)?;
            let mut out = stream.alloc_zeros::<bf16>(rows * n)?;
            let mut acc = stream.alloc_zeros::<i32>(rows * n)?;
            let (av, bv, sav, swv, ov) = (a.as_view(), b.as_view(), s_a.as_view(), s_w.as_view(), off.as_view());
            let args = GemmArgs { a: &av, b: &bv, s_a: &sav, s_w: &swv, offsets: &ov, row_scale: None, n, k };
            let fused = time_ms(stream, 2, 10, || api.gemm(stream, &args, &mut out.as_view_mut()))?;
            let base = time_ms(stream, 2, 10, || {
                api.gemm_i32(stream, &args, &mut acc.as_view_mut())?;
                api.dequant_baseline(stream, &acc.as_view(), &sav, &swv, &ov, n, &mut out.as_view_mut())
            })?;
            let seed = time_ms(stream, 2, 10, || {
                let host_offsets = stream.clone_dtoh(&off)?; // blocks, as the seed does
                std::hint::black_box(host_offsets);
                api.gemm_i32(stream, &args, &mut acc.as_view_mut())?;
                api.dequant_baseline(stream, &acc.as_view(), &sav, &swv, &ov, n, &mut out.as_view_mut())
            })?;
            // The mma.sync kernels' time where 128-row tiles ran on wgmma.
            let mma_sync = if gpu.arch().has_wgmma() {
                api.set_wgmma(false);
                let t = time_ms(stream, 2, 10, || api.gemm(stream, &args, &mut out.as_view_mut()));
                api.set_wgmma(true);
                Some(t? * 1e3)
            } else {
                None
            };
            let tops = 2.0 * rows as f64 * n as f64 * k as f64 / (fused * 1e-3) / 1e12;
            res.push(W4A4Result {
                shape: shape.name,
                gemm,
                rows,
                n,
                k,
                fused_us: fused * 1e3,
                baseline_us: base * 1e3,
                seed_us: seed * 1e3,
                mma_sync_us: mma_sync,
                tops,
                of_peak: tops / s8_peak,
            });
        }
    }
    Ok(res)
}

/// Formats decode results as a Markdown table.
pub fn decode_table(r: &[DecodeResult], copy_gbps: f64) -> String {
    let mut s = format!("copy bandwidth (same run): {copy_gbps:.0} GB/s; floor: one kernel per call that only reads the touched bytes (after a dependent launch and load)\n\n| shape | M | µs | touched MB | GB/s | of copy BW | floor µs | floor of copy BW | of floor |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for x in r {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.0} | {:.2} | {:.1} | {:.2} | {:.2} |",
            x.shape,
            x.m,
            x.us,
            x.bytes / 1e6,
            x.gbps,
            x.of_copy,
            x.floor_us,
            x.floor_of_copy(),
            x.floor_us / x.us
        );
    }
    s
}

/// Formats W4A4 results as a Markdown table.
pub fn w4a4_table(r: &[W4A4Result], peaks: (f64, f64, f64)) -> String {
    let mut s = format!(
        "mma.sync peaks (same run): s8 {:.0} TOPS, s4 {:.0} TOPS, f16 {:.0} TFLOP/s\n\n| shape | GEMM | rows | N | K | fused µs | 2-kernel µs | speedup | + D2H offsets µs | speedup | TOPS | of s8 peak | fused on mma.sync µs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        peaks.0, peaks.1, peaks.2
    );
    for x in r {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.0} | {:.2} | {} |",
            x.shape,
            x.gemm,
            x.rows,
            x.n,
            x.k,
            x.fused_us,
            x.baseline_us,
            x.baseline_us / x.fused_us,
            x.seed_us,
            x.seed_us / x.fused_us,
            x.tops,
            x.of_peak,
            x.mma_sync_us.map_or("-".into(), |t| format!("{t:.1}"))
        );
    }
    s
}

/// JSON of decode results (no serde dependency: a flat array of objects).
pub fn decode_json(r: &[DecodeResult], copy_gbps: f64) -> String {
    let rows: Vec<String> = r
        .iter()
        .map(|x| {
            format!(
                "{{\"shape\":\"{}\",\"m\":{},\"us\":{:.3},\"touched_bytes\":{:.0},\"gbps\":{:.1},\"of_copy\":{:.4},\"floor_us\":{:.3},\"floor_of_copy\":{:.4}}}",
                x.shape, x.m, x.us, x.bytes, x.gbps, x.of_copy, x.floor_us, x.floor_of_copy()
            )
        })
        .collect();
    format!("{{\"copy_gbps\":{copy_gbps:.1},\"decode\":[{}]}}", rows.join(","))
}

/// JSON of W4A4 results.
pub fn w4a4_json(r: &[W4A4Result], peaks: (f64, f64, f64)) -> String {
    let rows: Vec<String> = r
        .iter()
        .map(|x| {
            format!(
                "{{\"shape\":\"{}\",\"gemm\":\"{}\",\"rows\":{},\"n\":{},\"k\":{},\"fused_us\":{:.3},\"baseline_us\":{:.3},\"seed_us\":{:.3},\"mma_sync_us\":{},\"tops\":{:.1},\"of_s8_peak\":{:.4}}}",
                x.shape,
                x.gemm,
                x.rows,
                x.n,
                x.k,
                x.fused_us,
                x.baseline_us,
                x.seed_us,
                x.mma_sync_us.map_or("null".into(), |t| format!("{t:.3}")),
                x.tops,
                x.of_peak
            )
        })
        .collect();
    format!(
        "{{\"peak_s8_tops\":{:.1},\"peak_s4_tops\":{:.1},\"peak_f16_tflops\":{:.1},\"w4a4\":[{}]}}",
        peaks.0,
        peaks.1,
        peaks.2,
        rows.join(",")
    )
}

/// One routing measurement: the routing launches alone (`Tuning::launches
/// = 1`), one block vs many.
#[derive(Clone, Debug)]
pub struct RouteResult {
    /// Shape name.
    pub shape: &'static str,
    /// Tokens.
    pub m: usize,
    /// M x top-k.
    pub pairs: usize,
    /// Microseconds per call, `moe_route` (one block).
    pub one_block_us: f64,
    /// Microseconds per call, `moe_route_count` + `_scan` + `_scatter`.
    pub many_blocks_us: f64,
}

/// Times the routing alone for `shape`'s experts and top-k at each M, both
/// ways: what [`crate::ROUTE_BLOCKS_FROM`] is chosen from. Each sample is
/// 20 calls between two events (one call is a few µs).
pub fn route(gpu: &Arc<Gpu>, stream: &Arc<CudaStream>, shape: Shape, ms: &[usize]) -> Result<Vec<RouteResult>> {
    // The weights do not matter to the routing: the smallest layer.
    let w = MoeWeights::random(gpu, stream, shape.e, 64, 64, Activation::Silu, 1.0 / 256.0, 3)?;
    let max_m = *ms.iter().max().unwrap_or(&1);
    let mut ws = Workspace::new(&w, stream, max_m, shape.topk)?;
    let mut rng = Lcg(4711);
    let pool: Vec<i32> = (0..shape.e as i32).collect();
    let mut res = Vec::new();
    for &m in ms {
        let x = stream.alloc_zeros::<bf16>(m * 64)?;
        let (ids, tw) = routing(&mut rng, &pool, m, shape.topk);
        let (ids, tw) = (stream.clone_htod(&ids)?, stream.clone_htod(&tw)?);
        let mut out = stream.alloc_zeros::<bf16>(m * 64)?;
        let mut time = |from: usize, ws: &mut Workspace| -> Result<f64> {
            let t = ws.tuning_mut();
            (t.launches, t.route_blocks_from, t.fc_route_pairs) = (1, Some(from), Some(0));
            let ms = time_ms(stream, 2, 9, || {
                for _ in 0..20 {
                    w.forward(ws, stream, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut())?;
                }
                Ok(())
            })?;
            Ok(ms * 1e3 / 20.0)
        };
        let one = time(usize::MAX, &mut ws)?;
        let many = time(0, &mut ws)?;
        *ws.tuning_mut() = Tuning::defaults(gpu);
        res.push(RouteResult { shape: shape.name, m, pairs: m * shape.topk, one_block_us: one, many_blocks_us: many });
    }
    Ok(res)
}

/// Formats routing results as a Markdown table.
pub fn route_table(r: &[RouteResult]) -> String {
    let mut s = String::from("| shape | M | pairs | one block µs | many blocks µs |\n|---|---:|---:|---:|---:|\n");
    for x in r {
        let _ =
            writeln!(s, "| {} | {} | {} | {:.1} | {:.1} |", x.shape, x.m, x.pairs, x.one_block_us, x.many_blocks_us);
    }
    s
}

/// JSON of routing results.
pub fn route_json(r: &[RouteResult]) -> String {
    let rows: Vec<String> = r
        .iter()
        .map(|x| {
            format!(
                "{{\"shape\":\"{}\",\"m\":{},\"pairs\":{},\"one_block_us\":{:.3},\"many_blocks_us\":{:.3}}}",
                x.shape, x.m, x.pairs, x.one_block_us, x.many_blocks_us
            )
        })
        .collect();
    format!("{{\"route\":[{}]}}", rows.join(","))
}

/// One prefill measurement.
#[derive(Clone, Debug)]
pub struct PrefillResult {
    /// Shape name.
    pub shape: &'static str,
    /// Tokens.
    pub m: usize,
    /// Layer microseconds (route + FC1 + FC2 + combine), prefill kernels.
    pub us: f64,
    /// Layer microseconds with the decode kernels forced (at small M).
    pub decode_us: Option<f64>,
    /// Layer microseconds on the `mma.sync` prefill kernels, where `us`
    /// ran the `wgmma` ones (sm_90a).
    pub mma_sync_us: Option<f64>,
    /// Layer microseconds on the `wgmma` kernels with 64 and 128 pairs per
    /// tile forced, and 256 in builds with the 128-row kernels (sm_90a; an
    /// A/B of the tile shapes in one run).
    pub by_width: Vec<(u32, f64)>,
    /// Layer microseconds with y in f32 on the prefill path
    /// ([`Tuning::y16`] off), where `us` ran with it on.
    pub y32_us: Option<f64>,
    /// Prefill microseconds of the first launches alone: route; route +
    /// FC1 (with `moe_permute_x` on the `wgmma` path); route + FC1 + FC2.
    pub stages_us: [f64; 3],
    /// Layer microseconds (prefill path) with every expert given the same
    /// number of pairs (pair `p` on expert `p % E`) instead of the random routing:
    /// what the experts' uneven counts (their partial and narrow tiles)
    /// cost is `us - balanced_us`.
    pub balanced_us: f64,
    /// Layer TFLOP/s (2 x pairs x 3 x H x I).
    pub tflops: f64,
    /// cuBLAS bf16 TFLOP/s on dense GEMMs of the same FLOPs, same run.
    pub cublas_tflops: f64,
}

/// The cuBLAS reference of a prefill point: bf16 dense GEMMs
/// `[rows x H] x [H x 2I]` then `[rows x I] x [I x H]` (the layer's two
/// GEMMs as dense ones), its buffers allocated once so that it can be timed
/// in every round beside the layer (a fair "same run": it meets the same
/// clocks and heat, and gets the same best-of-rounds).
struct CublasRef {
    blas: cudarc::cublas::CudaBlas,
    x: CudaSlice<bf16>,
    w1: CudaSlice<bf16>,
    w2: CudaSlice<bf16>,
    y1: CudaSlice<bf16>,
    y2: CudaSlice<bf16>,
    hbuf: CudaSlice<bf16>,
    rows: usize,
    h: usize,
    i: usize,
}

impl CublasRef {
    fn new(gpu: &Arc<Gpu>, stream: &Arc<CudaStream>, rows: usize, h: usize, i: usize) -> Result<Self> {
        let blas = cudarc::cublas::CudaBlas::new(stream.clone())
            .map_err(|e| crate::error::unsupported("cuBLAS", format!("{e:?}"), "could not be loaded"))?;
        // Random bf16 in ±[0.5, 1), filled on the device (no multi-GB upload).
        let fill_bf16 = |n: usize| -> Result<CudaSlice<bf16>> {
            let mut b = stream.alloc_zeros::<bf16>(n + n % 2)?;
            fill(gpu, stream, &mut b, n as u32, 0x807F_807F, 0x3F00_3F00)?;
            Ok(b)
        };
        Ok(CublasRef {
            blas,
            x: fill_bf16(rows * h)?,
            w1: fill_bf16(h * 2 * i)?,
            w2: fill_bf16(i * h)?,
            y1: stream.alloc_zeros::<bf16>(rows * 2 * i)?,
            y2: stream.alloc_zeros::<bf16>(rows * h)?,
            hbuf: fill_bf16(rows * i)?,
            rows,
            h,
            i,
        })
    }

    /// Milliseconds of the two GEMMs: the median of 5 calls after 2 warm-up
    /// calls, as each layer variant is timed.
    fn time_ms(&mut self, stream: &Arc<CudaStream>) -> Result<f64> {
        use cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        use cudarc::cublas::{Gemm, GemmConfig};
        let cfg = |m: usize, n: usize, k: usize| GemmConfig {
            transa: CUBLAS_OP_N,
            transb: CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha: bf16::ONE,
            lda: n as i32,
            ldb: k as i32,
            beta: bf16::ZERO,
            ldc: n as i32,
        };
        let e = |e: cudarc::cublas::result::CublasError| {
            crate::error::unsupported("cuBLAS gemm", format!("{e:?}"), "failed")
        };
        let (rows, h, i) = (self.rows, self.h, self.i);
        let CublasRef { blas, x, w1, w2, y1, y2, hbuf, .. } = self;
        time_ms(stream, 2, 5, || {
            // Row-major C[m x n] = A[m x k] B[k x n] as column-major C^T = B^T A^T.
            // SAFETY: the buffers hold the sizes the configs name.
            unsafe {
                blas.gemm(cfg(rows, 2 * i, h), &*w1, &*x, &mut *y1).map_err(e)?;
                blas.gemm(cfg(rows, h, i), &*w2, &*hbuf, &mut *y2).map_err(e)?;
            }
            Ok(())
        })
    }
}

/// A prefill bench variant: the path, the tuning (`None`: the workspace's)
/// and whether it runs on the balanced routing.
type Variant = (crate::ForwardPath, Option<Tuning>, bool);

/// Rounds of the prefill bench's timings, of the layer variants and of
/// cuBLAS (best of them each).
const PREFILL_ROUNDS: usize = 3;

/// Times the prefill path for `shape` at each token count (and the decode
/// path where it is still sensible), with cuBLAS on the same FLOPs. Each
/// variant's time is the best of three rounds (`PREFILL_ROUNDS`, alternating
/// order), each round the median of 5 calls after 2 warm-up calls; cuBLAS
/// is timed the same way in the same rounds. `tuning`: the workspace's
/// settings (the defaults if `None`), from which the variants derive.
pub fn prefill(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    ms: &[usize],
    tuning: Option<Tuning>,
) -> Result<Vec<PrefillResult>> {
    let act = if shape.name.starts_with("GPT-OSS") { Activation::GPT_OSS } else { Activation::Silu };
    let w = MoeWeights::random(gpu, stream, shape.e, shape.h, shape.i, act, 1.0 / 256.0, 9)?;
    let max_m = *ms.iter().max().unwrap_or(&1);
    let mut ws = Workspace::new(&w, stream, max_m, shape.topk)?;
    if let Some(t) = tuning {
        *ws.tuning_mut() = t;
    }
    let mut rng = Lcg(777);
    let pool: Vec<i32> = (0..shape.e as i32).collect();
    let mut res = Vec::new();
    for &m in ms {
        let mut x = stream.alloc_zeros::<bf16>(m * shape.h)?;
        fill(gpu, stream, &mut x, m as u32, 0x807F_807F, 0x3F00_3F00)?;
        let (ids, tw) = routing(&mut rng, &pool, m, shape.topk);
        let (ids, tw) = (stream.clone_htod(&ids)?, stream.clone_htod(&tw)?);
        let (ids_b, tw_b) = balanced_routing(m, shape.topk, shape.e);
        let (ids_b, tw_b) = (stream.clone_htod(&ids_b)?, stream.clone_htod(&tw_b)?);
        let mut out = stream.alloc_zeros::<bf16>(m * shape.h)?;
        // Times `path` with `tuning` (or the workspace's own) on the random
        // routing (or the balanced one), then puts the workspace's tuning back.
        let mut run = |(path, tuning, balanced): Variant, ws: &mut Workspace| -> Result<f64> {
            let own = *ws.tuning_mut();
            *ws.tuning_mut() = tuning.unwrap_or(own);
            ws.set_path(path);
            let (ids, tw) = if balanced { (&ids_b, &tw_b) } else { (&ids, &tw) };
            let t = time_ms(stream, 2, 5, || {
                w.forward(ws, stream, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut())
            });
            *ws.tuning_mut() = own;
            t
        };
        // The variants, timed in PREFILL_ROUNDS rounds (every other round in
        // reverse order), best of the rounds each: one pass in a fixed order
        // read the same kernels 7-19 % apart by their place in it (run 48).
        let d = *ws.tuning_mut();
        let wgmma = d.wgmma && gpu.arch().has_wgmma();
        let mut variants: Vec<Variant> = vec![(crate::ForwardPath::Prefill, None, false)];
        let dec_at = (m * shape.topk / shape.e <= 128).then(|| {
            variants.push((crate::ForwardPath::Decode, None, false));
            variants.len() - 1
        });
        let mma_sync_at = wgmma.then(|| {
            variants.push((crate::ForwardPath::Prefill, Some(Tuning { wgmma: false, ..d }), false));
            variants.len() - 1
        });
        // Pairs per tile (256: builds with the 128-row kernels, with their
        // 64-pair tails as the default width's).
        let mut widths = if wgmma { vec![64, 128] } else { vec![] };
        if wgmma && gpu.has_kernel("moe_pfw1_bf16_n256") {
            widths.push(256);
        }
        let width_at = variants.len();
        for &c in &widths {
            let narrow_tail = c == 256 && d.narrow_tail;
            variants.push((crate::ForwardPath::Prefill, Some(Tuning { wgmma_cols: Some(c), narrow_tail, ..d }), false));
        }
        let y32_at = d.y16.then(|| {
            variants.push((crate::ForwardPath::Prefill, Some(Tuning { y16: false, ..d }), false));
            variants.len() - 1
        });
        let stages_at = variants.len();
        for launches in 1..=3 {
            variants.push((crate::ForwardPath::Prefill, Some(Tuning { launches, ..d }), false));
        }
        let balanced_at = variants.len();
        variants.push((crate::ForwardPath::Prefill, None, true));
        // cuBLAS in every round too: first in the even rounds, last in the
        // odd ones (the layer variants reversed), best of the rounds as theirs.
        let mut cublas = CublasRef::new(gpu, stream, m * shape.topk, shape.h, shape.i)?;
        let mut cb = f64::INFINITY;
        let mut best = vec![f64::INFINITY; variants.len()];
        for round in 0..PREFILL_ROUNDS {
            if round % 2 == 0 {
                cb = cb.min(cublas.time_ms(stream)?);
            }
            for j in 0..variants.len() {
                let v = if round % 2 == 0 { j } else { variants.len() - 1 - j };
                best[v] = best[v].min(run(variants[v], &mut ws)?);
            }
            if round % 2 == 1 {
                cb = cb.min(cublas.time_ms(stream)?);
            }
        }
        let pf = best[0];
        let dec = dec_at.map(|i| best[i]);
        let mma_sync = mma_sync_at.map(|i| best[i]);
        let by_width: Vec<(u32, f64)> =
            widths.iter().enumerate().map(|(k, &c)| (c, best[width_at + k] * 1e3)).collect();
        let y32_us = y32_at.map(|i| best[i] * 1e3);
        let stages_us = [0, 1, 2].map(|k| best[stages_at + k] * 1e3);
        ws.set_path(crate::ForwardPath::Auto);
        let flops = 2.0 * (m * shape.topk) as f64 * 3.0 * shape.h as f64 * shape.i as f64;
        res.push(PrefillResult {
            shape: shape.name,
            m,
            us: pf * 1e3,
            decode_us: dec.map(|d| d * 1e3),
            mma_sync_us: mma_sync.map(|d| d * 1e3),
            by_width,
            y32_us,
            stages_us,
            balanced_us: best[balanced_at] * 1e3,
            tflops: flops / (pf * 1e-3) / 1e12,
            cublas_tflops: flops / (cb * 1e-3) / 1e12,
        });
    }
    Ok(res)
}

/// Formats prefill results as a Markdown table.
pub fn prefill_table(r: &[PrefillResult]) -> String {
    let mut s = String::from("| shape | M | prefill µs | decode-path µs | mma.sync-prefill µs | wgmma n64 / n128 [/ n256] µs | y f32 µs | route / +FC1 / +FC2 µs | balanced routing µs | TFLOP/s | cuBLAS bf16 TFLOP/s | of cuBLAS |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for x in r {
        let d = x.decode_us.map_or("-".to_string(), |d| format!("{d:.0}"));
        let ms = x.mma_sync_us.map_or("-".to_string(), |d| format!("{d:.0}"));
        let w = if x.by_width.is_empty() {
            "-".to_string()
        } else {
            x.by_width.iter().map(|(_, t)| format!("{t:.0}")).collect::<Vec<_>>().join(" / ")
        };
        let y32 = x.y32_us.map_or("-".to_string(), |d| format!("{d:.0}"));
        let st = x.stages_us.map(|t| format!("{t:.0}")).join(" / ");
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.2} |",
            x.shape,
            x.m,
            x.us,
            d,
            ms,
            w,
            y32,
            st,
            x.balanced_us,
            x.tflops,
            x.cublas_tflops,
            x.tflops / x.cublas_tflops
        );
    }
    s
}

/// JSON of prefill results.
pub fn prefill_json(r: &[PrefillResult]) -> String {
    let rows: Vec<String> = r
        .iter()
        .map(|x| {
            format!(
                "{{\"shape\":\"{}\",\"m\":{},\"prefill_us\":{:.3},\"decode_us\":{},\"mma_sync_us\":{},\"wgmma_us_by_cols\":{{{}}},\"y32_us\":{},\"stages_us\":[{}],\"balanced_us\":{:.3},\"tflops\":{:.1},\"cublas_tflops\":{:.1}}}",
                x.shape,
                x.m,
                x.us,
                x.decode_us.map_or("null".into(), |d| format!("{d:.3}")),
                x.mma_sync_us.map_or("null".into(), |d| format!("{d:.3}")),
                x.by_width.iter().map(|(c, t)| format!("\"{c}\":{t:.3}")).collect::<Vec<_>>().join(","),
                x.y32_us.map_or("null".into(), |d| format!("{d:.3}")),
                x.stages_us.map(|t| format!("{t:.3}")).join(","),
                x.balanced_us,
                x.tflops,
                x.cublas_tflops
            )
        })
        .collect();
    format!("{{\"prefill\":[{}]}}", rows.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every expert gets `m * topk / e` pairs (give or take one) and a
    /// token's experts are distinct.
    #[test]
    fn balanced_routing_spreads_pairs_evenly() {
        for (m, topk, e) in [(8192, 8, 128), (8192, 8, 256), (33, 4, 60), (7, 2, 8), (5, 8, 8)] {
            let (ids, w) = balanced_routing(m, topk, e);
            assert_eq!((ids.len(), w.len()), (m * topk, m * topk));
            let mut count = vec![0usize; e];
            for t in 0..m {
                let row = &ids[t * topk..(t + 1) * topk];
                for (j, &id) in row.iter().enumerate() {
                    assert!((0..e as i32).contains(&id));
                    assert!(!row[..j].contains(&id), "token {t} repeats expert {id}");
                    count[id as usize] += 1;
                }
            }
            let (lo, hi) = (count.iter().min().unwrap(), count.iter().max().unwrap());
            assert!(hi - lo <= 1 && *lo == m * topk / e, "{m} x {topk} over {e}: {lo}..{hi}");
        }
        // More choices than experts: none of them routed.
        assert!(balanced_routing(3, 4, 2).0.iter().all(|&id| id == -1));
    }
}
