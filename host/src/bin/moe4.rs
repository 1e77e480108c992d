//! `moe4`: the command-line tool.
//!
//! ```text
//! moe4 demo                      quantize a random Qwen3-30B-A3B layer, report its error
//! moe4 smoke                     single-instruction GPU checks against the CPU
//! moe4 bench <decode|prefill|w4a4|peak|tune|route|timeline|all> [--quick] [--json FILE]
//!            [--shape NAME[,NAME]] [--m N[,N]] [--tuning KEY=VALUE[,...]]
//!                                (--shape: a bench shape or NAME:H:I:E:K, e.g.
//!                                OLMoE:2048:1024:64:8; MOE4_LOG_LAUNCHES=1 prints
//!                                each launch configuration once)
//!                                (--tuning: decode, or prefill and its variants, under
//!                                those settings, see Tuning::with)
//!                                (timeline: where each kernel of a decode call starts,
//!                                waits and ends; needs a `trace` build in MOE4_PTX_FILE)
//! moe4 info                      the GPU and the PTX build moe4 picks for it
//! moe4 compare-ptx FILE          the layer on the loaded build and on the PTX in FILE (an
//!                                experimental build), on the same random inputs: the
//!                                outputs that differ in any bit, per case; fails if any
//! moe4 run [--checkpoint F --prefix P --layout L] [--activation A] [--inputs F] [--out F]
//!                                one MoE layer from a safetensors checkpoint on the GPU;
//!                                with no checkpoint, writes and runs a small random one
//! moe4 run-w4a4 [--inputs F] [--out F]
//!                                the W4A4 grouped GEMM on tensors from a safetensors file
//!                                (with no inputs, writes and runs a small random problem)
//! ```
//!
//! `run` inputs: `x` BF16/F16 `[M, H]`, `topk_ids` I32 `[M, k]`,
//! `topk_weights` F32 `[M, k]`; output: `out` (same dtype as `x`) and
//! `reference` (F32, moe4's f64 CPU reference on the same weights).
//! Layouts: `modelopt`, `fused:gate-up|up-gate|interleaved`,
//! `fused-swizzled:...`. Activations: `silu`, `clamped:LIMIT`, `gpt-oss`.
//!
//! `run-w4a4` inputs: `b` U8 `[E, N, K/2]`, `s_w` F32 `[E, N]`, `offsets`
//! I64 `[E + 1]`, and either `a` U8 `[rows, K/2]` + `s_a` F32 `[rows]` or
//! `x` BF16/F16 `[rows, K]` (quantized on the GPU); optional `row_scale`
//! F32 `[rows]`. Output: `out` BF16 `[rows, N]`, `acc` I32 `[rows, N]`.

use half::bf16;
use half::f16;
use moe4::bench;
use moe4::checkpoint::{self, Checkpoint, CheckpointLayout, SafetensorsDtype as D, TensorData};
use moe4::nvfp4::Nvfp4Moe;
use moe4::nvfp4::W13Order;
use moe4::quant::quantize_nvfp4;
use moe4::reference::{moe_layer, Activation};
use moe4::{gpu_available, GemmArgs, Gpu, MoeWeights, Workspace, W4A4};
use moe4_kernels::launch::{fc_kernel_smem_bytes, FC_ROUTE_BYTES, FC_WARPS, FC_WARPS_WIDE};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("smoke") => smoke(),
        Some("bench") => bench_cmd(&args[1..]),
        Some("info") => info(),
        Some("compare-ptx") => compare_ptx(&args[1..]),
        Some("run") => run_layer(&args[1..]),
        Some("run-w4a4") => run_w4a4(&args[1..]),
        _ => {
            eprintln!("usage: moe4 <demo|smoke|bench KIND [--quick] [--json FILE] [--shape S] [--m N]|info|compare-ptx FILE|run ...|run-w4a4 ...> (see the crate docs)");
            return ExitCode::from(2);
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moe4: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res = Result<(), Box<dyn std::error::Error>>;

fn info() -> Res {
    if !gpu_available() {
        println!("no CUDA GPU visible");
        return Ok(());
    }
    let gpu = Gpu::new(0)?;
    let (maj, min) = gpu.context().compute_capability()?;
    println!("{}: compute capability {maj}.{min}, {} SMs, PTX build {}", gpu.name(), gpu.sm_count(), gpu.arch().name());
    Ok(())
}

/// `moe4 compare-ptx FILE`: the layer on the loaded build (the embedded one,
/// or `MOE4_PTX_FILE`'s) and on the PTX in FILE, on the same random layers
/// and inputs (ids with -1 and out-of-range values), under the routing and
/// warp settings the small batches choose between and at two prefill
/// sizes (1000 and 4096 tokens), both 16-bit types:
/// the number of outputs that differ in any bit, per case. Two builds of
/// the same arithmetic must agree bit for bit (a K split's partial tiles
/// are summed in a fixed order); the command fails where they do not.
fn compare_ptx(args: &[String]) -> Res {
    let path = args.first().ok_or("usage: moe4 compare-ptx FILE")?;
    if !gpu_available() {
        return Err("no CUDA GPU visible".into());
    }
    let a = Gpu::new(0)?;
    let ptx = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let b = Gpu::with_ptx(a.context().clone(), a.arch(), ptx)?;
    let stream = a.context().default_stream();
    println!("{} ({}): the loaded build against {path}", a.name(), a.arch().name());
    // Blocks per SM of the one-column-tile decode kernels in each build
    // (what the grids, hence the K splits, come from).
    for (name, warps, routing) in [
        ("moe_fc1_bf16_nt1", FC_WARPS, 0),
        ("moe_fc2_bf16_nt1", FC_WARPS, 0),
        ("moe_fc1_bf16_nt1_rt", FC_WARPS, FC_ROUTE_BYTES),
        ("moe_fc1_bf16_nt1_w8", FC_WARPS_WIDE, 0),
        ("moe_fc2_bf16_nt1_w8_rt", FC_WARPS_WIDE, FC_ROUTE_BYTES),
    ] {
        let smem = fc_kernel_smem_bytes(1, warps, 2) + routing;
        let per_sm = |g: &Gpu| g.resident_blocks(name, 32 * warps, smem).map(|n| n / g.sm_count());
        println!("  {name}: {} / {} blocks per SM", per_sm(&a)?, per_sm(&b)?);
    }
    let mut rng = Rng(7);
    let mut differing = 0usize;
    // (experts, hidden, intermediate, top-k): a many-expert and a few-expert layer.
    for (e, h, i, topk) in [(64usize, 1024usize, 512usize, 6usize), (8, 512, 1024, 2)] {
        let gen = |rng: &mut Rng, n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| rng.normal() * s).collect() };
        let layer = Nvfp4Moe {
            gate: quantize_nvfp4(&gen(&mut rng, e * i * h, 0.05), e, i, h)?,
            up: quantize_nvfp4(&gen(&mut rng, e * i * h, 0.05), e, i, h)?,
            down: quantize_nvfp4(&gen(&mut rng, e * h * i, 0.05), e, h, i)?,
        };
        let act = Activation::Silu;
        let (wa, wb) = (MoeWeights::new(&a, &stream, &layer, act)?, MoeWeights::new(&b, &stream, &layer, act)?);
        let most = 4096;
        let (mut wsa, mut wsb) = (Workspace::new(&wa, &stream, most, topk)?, Workspace::new(&wb, &stream, most, topk)?);
        // (1000 and 4096 tokens: the prefill path, its 128-pair and mixed
        // 256-pair kernels, under the default settings only.)
        for m in [1usize, 3, 10, 33, 64, 256, 1000, 4096] {
            let x: Vec<f32> = (0..m * h).map(|_| rng.normal()).collect();
            let mut ids: Vec<i32> = (0..m * topk).map(|_| (rng.uniform() * e as f32) as i32 % e as i32).collect();
            ids[0] = -1;
            if m > 2 {
                ids[topk] = e as i32 + 5;
            }
            let tw: Vec<f32> = (0..m * topk).map(|_| rng.uniform()).collect();
            // (Each build sizes its grids from its kernels' occupancy; the
            // K split, and so the order of the partial sums, follows the
            // grid. The last two settings give both builds one grid.)
            let tunings: &[&str] = if m > 256 {
                &[""]
            } else {
                &[
                    "",
                    "fc_route_pairs=0",
                    "fc_route_pairs=64,nt=1",
                    "wide=false",
                    "wide=true",
                    "wide=false,fc_blocks=264",
                    "wide=true,fc_blocks=132",
                ]
            };
            for &tuning in tunings {
                *wsa.tuning_mut() = moe4::Tuning::defaults(&a).with(tuning)?;
                *wsb.tuning_mut() = moe4::Tuning::defaults(&b).with(tuning)?;
                for half in [false, true] {
                    let (oa, ob) = if half {
                        both_builds::<f16>((&wa, &mut wsa), (&wb, &mut wsb), &stream, &x, &ids, &tw)?
                    } else {
                        both_builds::<bf16>((&wa, &mut wsa), (&wb, &mut wsb), &stream, &x, &ids, &tw)?
                    };
                    // Outputs are 16-bit: compare them two bytes at a time.
                    let n = oa.chunks(2).zip(ob.chunks(2)).filter(|(p, q)| p != q).count();
                    differing += n;
                    println!(
                        "  E={e} H={h} I={i} top-{topk} M={m} {} [{}]: {n} of {} outputs differ",
                        if half { "f16" } else { "bf16" },
                        if tuning.is_empty() { "defaults" } else { tuning },
                        oa.len() / 2
                    );
                }
            }
        }
    }
    if differing > 0 {
        return Err(format!("{differing} outputs differ between the two builds").into());
    }
    println!("every output equal bit for bit");
    Ok(())
}

/// [`forward_bytes`] of the same inputs (`x` in `T`) on two builds' weights
/// and workspaces: their output bytes.
fn both_builds<T: moe4::Half>(
    (wa, wsa): (&MoeWeights, &mut Workspace),
    (wb, wsb): (&MoeWeights, &mut Workspace),
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    x: &[f32],
    ids: &[i32],
    tw: &[f32],
) -> Result<(Vec<u8>, Vec<u8>), Box<dyn std::error::Error>> {
    let xb: Vec<u8> = x.iter().flat_map(|&v| T::from_f32(v).to_bits().to_le_bytes()).collect();
    Ok((forward_bytes::<T>(wa, wsa, stream, &xb, ids, tw)?.1, forward_bytes::<T>(wb, wsb, stream, &xb, ids, tw)?.1))
}

/// Normal-ish numbers from an LCG (sum of uniforms).
struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0
    }
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

fn demo() -> Res {
    let (e, h, i, topk, m) = (128usize, 2048usize, 768usize, 8usize, 8usize);
    println!("moe4 demo: a random Qwen3-30B-A3B-shaped MoE layer (E={e}, H={h}, I={i}, top-{topk}), {m} tokens");
    let t = std::time::Instant::now();
    let mut rng = Rng(2026);
    let scale = 1.0 / (h as f32).sqrt();
    let gen = |rng: &mut Rng, n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| rng.normal() * s).collect() };
    let gate = gen(&mut rng, e * i * h, scale);
    let up = gen(&mut rng, e * i * h, scale);
    let down = gen(&mut rng, e * h * i, 1.0 / (i as f32).sqrt());
    let layer = Nvfp4Moe {
        gate: quantize_nvfp4(&gate, e, i, h)?,
        up: quantize_nvfp4(&up, e, i, h)?,
        down: quantize_nvfp4(&down, e, h, i)?,
    };
    println!(
        "  quantized {:.0}M weights to NVFP4 (ModelOpt recipe) in {:.1} s",
        (3 * e * h * i) as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    // Tokens (bf16-representable), routing, and the unquantized layer as an
    // NVFP4 layer with exact weights would need 16-bit weights: compare the
    // quantized layer with the same math on the original f32 weights instead.
    let x: Vec<f32> = (0..m * h).map(|_| bf16::from_f32(rng.normal()).to_f32()).collect();
    let mut ids = Vec::new();
    let mut tw = Vec::new();
    for _ in 0..m {
        let mut chosen: Vec<i32> = Vec::new();
        while chosen.len() < topk {
            let c = (rng.uniform() * e as f32) as i32 % e as i32;
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        ids.extend(chosen);
        tw.extend((0..topk).map(|_| 1.0 / topk as f32));
    }
    let act = Activation::Silu;
    let q = moe_layer(&layer, act, &x, &ids, &tw, m, topk)?;
    let exact = unquantized_layer(&gate, &up, &down, (e, h, i), act, &x, &ids, &tw, topk);
    println!("  NVFP4 layer vs unquantized f32 layer: relative L2 error {:.4}", rel(&q, &exact));
    if gpu_available() {
        let gpu = Gpu::new(0)?;
        let stream = gpu.context().default_stream();
        let w = MoeWeights::new(&gpu, &stream, &layer, act)?;
        let mut ws = Workspace::new(&w, &stream, m, topk)?;
        let xd = stream.clone_htod(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())?;
        let (idd, twd) = (stream.clone_htod(&ids)?, stream.clone_htod(&tw)?);
        let mut out = stream.alloc_zeros::<bf16>(m * h)?;
        w.forward(&mut ws, &stream, &xd.as_view(), &idd.as_view(), &twd.as_view(), &mut out.as_view_mut())?;
        let got: Vec<f64> = stream.clone_dtoh(&out)?.iter().map(|v| v.to_f64()).collect();
        println!(
            "  GPU ({}, {}) vs the CPU reference on the same NVFP4 weights: relative L2 error {:.2e}",
            gpu.name(),
            gpu.arch().name(),
            rel(&got, &q)
        );
    } else {
        println!("  (no CUDA GPU here: the GPU forward pass was not run)");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn unquantized_layer(
    gate: &[f32],
    up: &[f32],
    down: &[f32],
    (_e, h, i): (usize, usize, usize),
    act: Activation,
    x: &[f32],
    ids: &[i32],
    tw: &[f32],
    topk: usize,
) -> Vec<f64> {
    let m = x.len() / h;
    let mut out = vec![0f64; m * h];
    for t in 0..m {
        let xr = &x[t * h..(t + 1) * h];
        for j in 0..topk {
            let e = ids[t * topk + j] as usize;
            let hv: Vec<f64> = (0..i)
                .map(|c| {
                    let row = |w: &[f32]| -> f64 {
                        w[(e * i + c) * h..][..h].iter().zip(xr).map(|(a, b)| *a as f64 * *b as f64).sum()
                    };
                    act.apply(row(gate), row(up))
                })
                .collect();
            for r in 0..h {
                let y: f64 = down[(e * h + r) * i..][..i].iter().zip(&hv).map(|(a, b)| *a as f64 * b).sum();
                out[t * h + r] += y * tw[t * topk + j] as f64;
            }
        }
    }
    out
}

fn smoke() -> Res {
    if !gpu_available() {
        return Err("no CUDA GPU visible".into());
    }
    let gpu = Gpu::new(0)?;
    println!("{} ({}):", gpu.name(), gpu.arch().name());
    let mut failed = false;
    for c in moe4::smoke::run(&gpu, 99)? {
        println!("  {:<55} {:>7} / {:<7} mismatches", c.name, c.mismatches, c.total);
        failed |= c.mismatches != 0;
    }
    if failed {
        Err("smoke checks failed".into())
    } else {
        Ok(())
    }
}

/// `NAME:H:I:E:K`: a bench shape of the caller's (the name is leaked: one
/// per command line).
fn parse_shape(spec: &str) -> Result<bench::Shape, Box<dyn std::error::Error>> {
    let parts: Vec<&str> = spec.split(':').collect();
    let bad = || format!("--shape {spec:?}: expected NAME:H:I:E:K (hidden, intermediate, experts, top-k)");
    if parts.len() != 5 {
        return Err(bad().into());
    }
    let n: Vec<usize> = parts[1..].iter().map(|p| p.parse()).collect::<Result<_, _>>().map_err(|_| bad())?;
    if n.contains(&0) || n[3] > n[2] {
        return Err(format!("{}: every size must be positive and top-k at most the experts", bad()).into());
    }
    let name: &'static str = Box::leak(parts[0].to_string().into_boxed_str());
    Ok(bench::Shape { name, h: n[0], i: n[1], e: n[2], topk: n[3] })
}

fn bench_cmd(args: &[String]) -> Res {
    let kind = args.first().map(String::as_str).unwrap_or("all");
    let quick = args.iter().any(|a| a == "--quick");
    let json_path = flag(args, "--json");
    // `--shape NAME[,NAME]` and `--m N[,N]` narrow a run to some shapes and
    // sizes (M for decode/prefill, rows for w4a4). A shape is one of
    // bench::SHAPES by name or `NAME:H:I:E:K` (hidden, intermediate,
    // experts, top-k), e.g. `Qwen1.5-MoE:2048:1408:60:4`.
    let shape_filter: Option<Vec<&str>> = flag(args, "--shape").map(|s| s.split(',').collect());
    let mut all_shapes: Vec<bench::Shape> = bench::SHAPES.to_vec();
    for spec in shape_filter.iter().flatten().filter(|n| n.contains(':')) {
        all_shapes.push(parse_shape(spec)?);
    }
    let shape_filter: Option<Vec<&str>> =
        shape_filter.map(|f| f.iter().map(|n| n.split(':').next().unwrap_or(n)).collect());
    if let Some(f) = &shape_filter {
        if let Some(bad) = f.iter().find(|n| !all_shapes.iter().any(|s| s.name == **n)) {
            let names: Vec<&str> = bench::SHAPES.iter().map(|s| s.name).collect();
            return Err(format!("unknown shape {bad:?} (one of {}, or NAME:H:I:E:K)", names.join(", ")).into());
        }
    }
    let m_filter: Option<Vec<usize>> = match flag(args, "--m") {
        Some(s) => Some(s.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|e| format!("--m {s:?}: {e}"))?),
        None => None,
    };
    let shapes: Vec<bench::Shape> =
        all_shapes.iter().copied().filter(|s| shape_filter.as_ref().is_none_or(|f| f.contains(&s.name))).collect();
    let sizes = |default: Vec<usize>| m_filter.clone().unwrap_or(default);
    if !gpu_available() {
        return Err("bench needs a CUDA GPU".into());
    }
    let gpu = Gpu::new(0)?;
    // A stream of our own: the legacy default stream cannot be captured.
    let stream = gpu.context().new_stream()?;
    // Graph capture with cudarc's multi-stream event tracking would record
    // events into the graph; one stream needs none.
    // SAFETY: this program uses a single stream.
    unsafe { gpu.context().disable_event_tracking() };
    println!("# moe4 bench on {} ({} SMs, PTX {})", gpu.name(), gpu.sm_count(), gpu.arch().name());
    let mut json = Vec::new();
    // `--tuning key=value,...` (moe4::Tuning::with): every decode point
    // under those settings, and the prefill workspace's settings, from
    // which every prefill variant of the table is derived; e.g. to time a
    // host rule against the defaults with one program.
    let tuning = flag(args, "--tuning").map(|t| moe4::Tuning::defaults(&gpu).with(t)).transpose()?;
    if let Some(t) = &tuning {
        println!("# tuning: {t:?}");
    }
    if kind == "decode" || kind == "all" {
        let copy = bench::copy_bandwidth(&stream)?;
        let ms = sizes(if quick { vec![1, 16, 64] } else { vec![1, 2, 4, 8, 16, 32, 64] });
        let mut all = Vec::new();
        for s in &shapes {
            let r = bench::decode(&gpu, &stream, *s, &ms, copy, tuning)?;
            for x in &r {
                eprintln!(
                    "  {} M={} {:.1} us {:.0} GB/s ({:.2}); floor {:.1} us ({:.2})",
                    x.shape,
                    x.m,
                    x.us,
                    x.gbps,
                    x.of_copy,
                    x.floor_us,
                    x.floor_of_copy()
                );
            }
            all.extend(r);
        }
        println!("\n## decode (NVFP4 W4A16, bf16)\n\n{}", bench::decode_table(&all, copy));
        json.push(bench::decode_json(&all, copy));
    }
    if kind == "tune" {
        // Decode variants on a few points: what each design choice buys.
        let copy = bench::copy_bandwidth(&stream)?;
        let points: &[(&str, &[usize])] = &[
            ("Qwen3-30B-A3B", &[1, 16, 64, 128, 256]),
            ("DeepSeek-V3", &[1, 16, 64, 256, 512]),
            ("GPT-OSS-120B", &[16, 64, 256, 512]),
            ("Mixtral-8x7B", &[8, 16, 32, 64, 128]),
        ];
        let variants = bench::tune_variants(moe4::Tuning::defaults(&gpu));
        let labels: Vec<&str> = variants.iter().map(|v| v.0).collect();
        let mut all = Vec::new();
        // --shape / --m: those shapes (any of SHAPES) at those M instead.
        let chosen: Vec<(&str, Vec<usize>)> = if shape_filter.is_some() || m_filter.is_some() {
            let names: Vec<&str> = if shape_filter.is_some() {
                shapes.iter().map(|s| s.name).collect()
            } else {
                points.iter().map(|p| p.0).collect()
            };
            names.into_iter().map(|n| (n, sizes(vec![1, 8, 64]))).collect()
        } else {
            points.iter().map(|(n, ms)| (*n, ms.to_vec())).collect()
        };
        for (name, ms) in &chosen {
            let s = all_shapes.iter().find(|s| s.name == *name).expect("shape");
            let r = bench::decode_variants(&gpu, &stream, *s, ms, copy, &variants)?;
            for (l, x) in &r {
                if let Some(x) = x {
                    eprintln!("  {} M={} [{l}] {:.1} us ({:.2})", x.shape, x.m, x.us, x.of_copy);
                }
            }
            all.extend(r);
        }
        println!(
            "\n## decode variants (µs per layer, fraction of copy BW {copy:.0} GB/s)\n\n{}",
            bench::tune_table(&all, &labels)
        );
        json.push(bench::tune_json(&all, copy));
    }
    if kind == "timeline" {
        // Where each kernel of a decode call starts, waits and ends (a
        // `trace` build's notes; MOE4_PTX_FILE).
        let names: Vec<&str> = if shape_filter.is_some() {
            shapes.iter().map(|s| s.name).collect()
        } else {
            vec!["Qwen3-30B-A3B", "GPT-OSS-120B", "DeepSeek-V3"]
        };
        let mut all = Vec::new();
        for name in names {
            let s = all_shapes.iter().find(|s| s.name == name).expect("shape");
            for t in moe4::timeline::decode_timeline(&gpu, &stream, *s, &sizes(vec![1, 2, 4, 8, 16, 64]), 15)? {
                eprintln!("  {} M={} {:.1} us (traced) clock {:.2} GHz", t.shape, t.m, t.call_us, t.clock_ghz);
                all.push(t);
            }
        }
        println!(
            "\n## decode timeline\n\n{}\n{}",
            moe4::timeline::timeline_summary(&all),
            moe4::timeline::timeline_table(&all)
        );
        json.push(moe4::timeline::timeline_json(&all));
    }
    if kind == "prefill" || kind == "all" {
        let ms = sizes(if quick { vec![128, 2048] } else { vec![16, 32, 64, 128, 512, 2048, 8192] });
        let mut all = Vec::new();
        for s in &shapes {
            let r = bench::prefill(&gpu, &stream, *s, &ms, tuning)?;
            for x in &r {
                eprintln!(
                    "  {} M={} prefill {:.0} us (y f32 {:?}, stages {:?}, balanced routing {:.0}) decode {:?} us {:.0} TFLOP/s (cuBLAS {:.0})",
                    x.shape, x.m, x.us, x.y32_us, x.stages_us, x.balanced_us, x.decode_us, x.tflops, x.cublas_tflops
                );
            }
            all.extend(r);
        }
        println!("\n## prefill (NVFP4 W4A16, bf16, whole layer)\n\n{}", bench::prefill_table(&all));
        json.push(bench::prefill_json(&all));
    }
    if kind == "route" || kind == "all" {
        let ms = sizes(vec![64, 128, 256, 320, 384, 512, 768, 1024, 2048, 3072, 4096, 8192]);
        let mut all = Vec::new();
        for s in &shapes {
            let r = bench::route(&gpu, &stream, *s, &ms)?;
            for x in &r {
                eprintln!(
                    "  {} M={} pairs={} one block {:.1} us many {:.1} us",
                    x.shape, x.m, x.pairs, x.one_block_us, x.many_blocks_us
                );
            }
            all.extend(r);
        }
        println!("\n## routing alone (µs per call)\n\n{}", bench::route_table(&all));
        json.push(bench::route_json(&all));
    }
    if kind == "peak" || kind == "w4a4" || kind == "all" {
        let p = bench::peaks(&gpu, &stream)?;
        println!("\n## mma.sync peaks\n\ns8 {:.0} TOPS, s4 {:.0} TOPS, f16 {:.0} TFLOP/s", p.0, p.1, p.2);
        if kind != "peak" {
            let rows = sizes(if quick { vec![8192] } else { vec![128, 1024, 8192] });
            let mut all = Vec::new();
            for s in &shapes {
                let r = bench::w4a4(&gpu, &stream, *s, &rows, p.0)?;
                for x in &r {
                    eprintln!(
                        "  {} {} rows={} fused {:.1} us base {:.1} us {:.0} TOPS",
                        x.shape, x.gemm, x.rows, x.fused_us, x.baseline_us, x.tops
                    );
                }
                all.extend(r);
            }
            println!("\n## W4A4 grouped GEMM (bf16 out)\n\n{}", bench::w4a4_table(&all, p));
            json.push(bench::w4a4_json(&all, p));
        }
    }
    if let Some(path) = json_path {
        std::fs::write(path, format!("[{}]\n", json.join(",")))?;
    }
    Ok(())
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn parse_layout(s: &str) -> Result<CheckpointLayout, Box<dyn std::error::Error>> {
    let order = |o: &str| match o {
        "gate-up" => Ok(W13Order::GateUp),
        "up-gate" => Ok(W13Order::UpGate),
        "interleaved" => Ok(W13Order::Interleaved),
        _ => Err(format!("unknown w13 order {o:?} (gate-up, up-gate, interleaved)")),
    };
    Ok(match s.split_once(':') {
        None if s == "modelopt" => CheckpointLayout::ModelOpt,
        Some(("fused", o)) => CheckpointLayout::Fused(order(o)?),
        Some(("fused-swizzled", o)) => CheckpointLayout::FusedSwizzled(order(o)?),
        _ => return Err(format!("unknown layout {s:?}").into()),
    })
}

fn parse_activation(s: &str) -> Result<Activation, Box<dyn std::error::Error>> {
    Ok(match s.split_once(':') {
        None if s == "silu" => Activation::Silu,
        None if s == "gpt-oss" => Activation::GPT_OSS,
        Some(("clamped", l)) => Activation::ClampedSilu { limit: l.parse()? },
        _ => return Err(format!("unknown activation {s:?} (silu, clamped:LIMIT, gpt-oss)").into()),
    })
}

fn halves<T: moe4::Half>(b: &[u8]) -> Vec<T> {
    b.chunks(2).map(|c| T::from_bits(u16::from_le_bytes([c[0], c[1]]))).collect()
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn run_layer(args: &[String]) -> Res {
    let act = parse_activation(flag(args, "--activation").unwrap_or("silu"))?;
    let dir = std::env::temp_dir().join(format!("moe4-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (ckpt, prefix, layout, inputs) = match flag(args, "--checkpoint") {
        Some(c) => (
            c.to_string(),
            flag(args, "--prefix").ok_or("--prefix is required with --checkpoint")?.to_string(),
            parse_layout(flag(args, "--layout").unwrap_or("modelopt"))?,
            flag(args, "--inputs").ok_or("--inputs is required with --checkpoint")?.to_string(),
        ),
        None => {
            // A small random layer and inputs, written as files first.
            let (e, h, i, m, topk) = (8usize, 256usize, 128usize, 5usize, 2usize);
            let mut rng = Rng(7);
            let mut q = |rows: usize, k: usize| {
                quantize_nvfp4(&(0..e * rows * k).map(|_| rng.normal() * 0.1).collect::<Vec<f32>>(), e, rows, k)
            };
            let layer = Nvfp4Moe { gate: q(i, h)?, up: q(i, h)?, down: q(h, i)? };
            let c = dir.join("layer.safetensors");
            checkpoint::save_modelopt(&c, "model.layers.0.mlp", &layer)?;
            let x: Vec<u8> = (0..m * h).flat_map(|_| bf16::from_f32(rng.normal()).to_le_bytes()).collect();
            let ids: Vec<u8> = (0..m * topk).flat_map(|j| (((j * 3) % e) as i32).to_le_bytes()).collect();
            let tw: Vec<u8> = (0..m * topk).flat_map(|_| 0.5f32.to_le_bytes()).collect();
            let inp = dir.join("inputs.safetensors");
            checkpoint::save_tensors(
                &inp,
                vec![
                    ("x".into(), TensorData { dtype: D::BF16, shape: vec![m, h], data: x }),
                    ("topk_ids".into(), TensorData { dtype: D::I32, shape: vec![m, topk], data: ids }),
                    ("topk_weights".into(), TensorData { dtype: D::F32, shape: vec![m, topk], data: tw }),
                ],
            )?;
            println!("wrote a random layer to {} and inputs to {}", c.display(), inp.display());
            (
                c.display().to_string(),
                "model.layers.0.mlp".to_string(),
                CheckpointLayout::ModelOpt,
                inp.display().to_string(),
            )
        }
    };
    let out_path =
        flag(args, "--out").map(String::from).unwrap_or_else(|| dir.join("out.safetensors").display().to_string());
    let layer = Checkpoint::open(&ckpt)?.load_moe(&prefix, layout)?;
    let inp = Checkpoint::open(&inputs)?;
    let x = inp.tensor("x")?;
    let ids_t = inp.tensor("topk_ids")?;
    let (m, h) = match x.shape() {
        [m, h] => (*m, *h),
        s => return Err(format!("x has shape {s:?}, expected [M, H]").into()),
    };
    if h != layer.hidden() {
        return Err(format!("x has H = {h}, the layer has H = {}", layer.hidden()).into());
    }
    let topk = match ids_t.shape() {
        [mm, k] if *mm == m => *k,
        s => return Err(format!("topk_ids has shape {s:?}, expected [{m}, k]").into()),
    };
    if ids_t.dtype() != D::I32 {
        return Err(format!("topk_ids has dtype {:?}, expected I32", ids_t.dtype()).into());
    }
    let ids: Vec<i32> = ids_t.data().chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    let tw_t = inp.tensor("topk_weights")?;
    if tw_t.dtype() != D::F32 || tw_t.shape() != [m, topk] {
        return Err(
            format!("topk_weights has {:?} {:?}, expected F32 [{m}, {topk}]", tw_t.dtype(), tw_t.shape()).into()
        );
    }
    let tw = f32s(tw_t.data());
    let gpu = Gpu::new(0)?;
    let stream = gpu.context().default_stream();
    let w = MoeWeights::new(&gpu, &stream, &layer, act)?;
    let mut ws = Workspace::new(&w, &stream, m.max(1), topk)?;
    let (xf, out_bytes) = match x.dtype() {
        D::BF16 => forward_bytes::<bf16>(&w, &mut ws, &stream, x.data(), &ids, &tw)?,
        D::F16 => forward_bytes::<f16>(&w, &mut ws, &stream, x.data(), &ids, &tw)?,
        d => return Err(format!("x has dtype {d:?}, expected BF16 or F16").into()),
    };
    let want = moe_layer(&layer, act, &xf, &ids, &tw, m, topk)?;
    let got: Vec<f64> = out_bytes
        .chunks(2)
        .map(|c| {
            if x.dtype() == D::BF16 {
                bf16::from_le_bytes([c[0], c[1]]).to_f64()
            } else {
                f16::from_le_bytes([c[0], c[1]]).to_f64()
            }
        })
        .collect();
    let invalid = ws.invalid_id_count(&stream)?;
    checkpoint::save_tensors(
        &out_path,
        vec![
            ("out".into(), TensorData { dtype: x.dtype(), shape: vec![m, h], data: out_bytes }),
            (
                "reference".into(),
                TensorData {
                    dtype: D::F32,
                    shape: vec![m, h],
                    data: want.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
                },
            ),
        ],
    )?;
    println!(
        "{}: E={} H={h} I={} M={m} top-{topk} on {} ({}): wrote {out_path}; relative L2 error vs the CPU reference {:.2e}; out-of-range ids {invalid}",
        prefix, layer.experts(), layer.intermediate(), gpu.name(), gpu.arch().name(), rel(&got, &want)
    );
    Ok(())
}

/// One forward pass on little-endian 16-bit input bytes: (x as f32, output bytes).
fn forward_bytes<T: moe4::Half>(
    w: &MoeWeights,
    ws: &mut Workspace,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    x: &[u8],
    ids: &[i32],
    tw: &[f32],
) -> Result<(Vec<f32>, Vec<u8>), Box<dyn std::error::Error>> {
    let xv: Vec<T> = halves(x);
    let xd = stream.clone_htod(&xv)?;
    let (idd, twd) = (stream.clone_htod(ids)?, stream.clone_htod(tw)?);
    let mut out = stream.alloc_zeros::<T>(xv.len())?;
    w.forward(ws, stream, &xd.as_view(), &idd.as_view(), &twd.as_view(), &mut out.as_view_mut())?;
    let bytes = stream.clone_dtoh(&out)?.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
    Ok((xv.iter().map(|v| v.to_f32()).collect(), bytes))
}

fn run_w4a4(args: &[String]) -> Res {
    let generated;
    let inputs = match flag(args, "--inputs") {
        Some(i) => i,
        None => {
            // A small random problem (ragged experts, one empty), as a file first.
            let (counts, n, k) = ([5usize, 0, 37, 130], 96usize, 256usize);
            let rows: usize = counts.iter().sum();
            let e = counts.len();
            let mut rng = Rng(3);
            let x: Vec<u8> = (0..rows * k).flat_map(|_| bf16::from_f32(rng.normal()).to_le_bytes()).collect();
            let w: Vec<f32> = (0..e * n * k).map(|_| rng.normal() * 0.05).collect();
            let qb = moe4::quant::quantize_int4_weights(&w, e, n, k)?;
            let mut off = vec![0i64];
            for c in counts {
                off.push(off.last().unwrap() + c as i64);
            }
            let p = std::env::temp_dir().join(format!("moe4-w4a4-{}.safetensors", std::process::id()));
            checkpoint::save_tensors(
                &p,
                vec![
                    ("x".into(), TensorData { dtype: D::BF16, shape: vec![rows, k], data: x }),
                    ("b".into(), TensorData { dtype: D::U8, shape: vec![e, n, k / 2], data: qb.q }),
                    (
                        "s_w".into(),
                        TensorData {
                            dtype: D::F32,
                            shape: vec![e, n],
                            data: qb.scale.iter().flat_map(|v| v.to_le_bytes()).collect(),
                        },
                    ),
                    (
                        "offsets".into(),
                        TensorData {
                            dtype: D::I64,
                            shape: vec![e + 1],
                            data: off.iter().flat_map(|v| v.to_le_bytes()).collect(),
                        },
                    ),
                ],
            )?;
            println!("wrote random W4A4 inputs to {}", p.display());
            generated = p.display().to_string();
            &generated
        }
    };
    let out_path = flag(args, "--out").unwrap_or("w4a4-out.safetensors");
    let inp = Checkpoint::open(inputs)?;
    let b = inp.tensor("b")?;
    let (e, n, kh) = match b.shape() {
        [e, n, kh] => (*e, *n, *kh),
        s => return Err(format!("b has shape {s:?}, expected [E, N, K/2]").into()),
    };
    let k = 2 * kh;
    let offsets: Vec<i64> =
        inp.tensor("offsets")?.data().chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    if offsets.len() != e + 1 {
        return Err(format!("offsets has {} values, expected E + 1 = {}", offsets.len(), e + 1).into());
    }
    let s_w = f32s(inp.tensor("s_w")?.data());
    let gpu = Gpu::new(0)?;
    let stream = gpu.context().default_stream();
    let api = W4A4::new(&gpu, &stream)?;
    let names = inp.names()?;
    let (a_dev, sa_dev, a_host, sa_host) = if names.iter().any(|n| n == "a") {
        let a = inp.tensor("a")?.data().to_vec();
        let sa = f32s(inp.tensor("s_a")?.data());
        (stream.clone_htod(&a)?, stream.clone_htod(&sa)?, a, sa)
    } else {
        let x = inp.tensor("x")?;
        let rows = x.shape()[0];
        let mut q = stream.alloc_zeros::<u8>(rows * k / 2)?;
        let mut sa = stream.alloc_zeros::<f32>(rows)?;
        let (qv, sv) = (&mut q.as_view_mut(), &mut sa.as_view_mut());
        match x.dtype() {
            D::BF16 => api.quantize(&stream, &stream.clone_htod(&halves::<bf16>(x.data()))?.as_view(), k, qv, sv)?,
            D::F16 => api.quantize(&stream, &stream.clone_htod(&halves::<f16>(x.data()))?.as_view(), k, qv, sv)?,
            d => return Err(format!("x has dtype {d:?}, expected BF16 or F16").into()),
        }
        let (ah, sh) = (stream.clone_dtoh(&q)?, stream.clone_dtoh(&sa)?);
        (q, sa, ah, sh)
    };
    let rows = a_host.len() / kh.max(1);
    let row_scale =
        names.iter().any(|n| n == "row_scale").then(|| inp.tensor("row_scale").map(|t| f32s(t.data()))).transpose()?;
    let (bd, swd, od) = (stream.clone_htod(b.data())?, stream.clone_htod(&s_w)?, stream.clone_htod(&offsets)?);
    let rsd = row_scale.as_ref().map(|r| stream.clone_htod(r)).transpose()?;
    let (av, bv, sav, swv, ov) = (a_dev.as_view(), bd.as_view(), sa_dev.as_view(), swd.as_view(), od.as_view());
    let rsv = rsd.as_ref().map(|r| r.as_view());
    let g = GemmArgs { a: &av, b: &bv, s_a: &sav, s_w: &swv, offsets: &ov, row_scale: rsv.as_ref(), n, k };
    let mut out = stream.alloc_zeros::<bf16>(rows * n)?;
    let mut acc = stream.alloc_zeros::<i32>(rows * n)?;
    api.gemm(&stream, &g, &mut out.as_view_mut())?;
    api.gemm_i32(&stream, &g, &mut acc.as_view_mut())?;
    let (o, a) = (stream.clone_dtoh(&out)?, stream.clone_dtoh(&acc)?);
    let (want_acc, want) = moe4::reference::w4a4_grouped_gemm(
        &a_host,
        b.data(),
        &sa_host,
        &s_w,
        &offsets,
        row_scale.as_deref(),
        rows,
        n,
        k,
    )?;
    let exact = a.iter().zip(&want_acc).filter(|(x, y)| x != y).count();
    let got: Vec<f64> = o.iter().map(|v| v.to_f64()).collect();
    checkpoint::save_tensors(
        out_path,
        vec![
            (
                "out".into(),
                TensorData {
                    dtype: D::BF16,
                    shape: vec![rows, n],
                    data: o.iter().flat_map(|v| v.to_le_bytes()).collect(),
                },
            ),
            (
                "acc".into(),
                TensorData {
                    dtype: D::I32,
                    shape: vec![rows, n],
                    data: a.iter().flat_map(|v| v.to_le_bytes()).collect(),
                },
            ),
        ],
    )?;
    println!(
        "w4a4: rows={rows} N={n} K={k} E={e}: wrote {out_path}; integer sums differing from the CPU: {exact}; relative L2 error of out: {:.2e}; bad offsets: {}",
        rel(&got, &want),
        api.offset_error_count(&stream)?
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_shape;

    #[test]
    fn custom_bench_shapes() {
        let s = parse_shape("OLMoE:2048:1024:64:8").unwrap();
        assert_eq!((s.name, s.h, s.i, s.e, s.topk), ("OLMoE", 2048, 1024, 64, 8));
        for bad in ["OLMoE:2048:1024:64", "X:2048:1024:64:8:1", "X:2048:0:64:8", "X:2048:1024:4:8", "X:a:1:1:1"] {
            assert!(parse_shape(bad).is_err(), "{bad}");
        }
    }
}
