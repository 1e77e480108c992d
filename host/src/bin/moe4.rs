//! `moe4`: the command-line tool.
//!
//! ```text
//! moe4 demo                      quantize a random Qwen3-30B-A3B layer, report its error
//! moe4 smoke                     single-instruction GPU checks against the CPU
//! moe4 bench <decode|w4a4|peak|all> [--quick] [--json FILE]
//! moe4 info                      the GPU and the PTX build moe4 picks for it
//! ```

use half::bf16;
use moe4::bench;
use moe4::nvfp4::Nvfp4Moe;
use moe4::quant::quantize_nvfp4;
use moe4::reference::{moe_layer, Activation};
use moe4::{gpu_available, Gpu, MoeWeights, Workspace};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("smoke") => smoke(),
        Some("bench") => bench_cmd(&args[1..]),
        Some("info") => info(),
        _ => {
            eprintln!("usage: moe4 <demo|smoke|bench KIND [--quick] [--json FILE]|info>");
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

fn bench_cmd(args: &[String]) -> Res {
    let kind = args.first().map(String::as_str).unwrap_or("all");
    let quick = args.iter().any(|a| a == "--quick");
    let json_path = args.iter().position(|a| a == "--json").and_then(|i| args.get(i + 1));
    if !gpu_available() {
        return Err("bench needs a CUDA GPU".into());
    }
    let gpu = Gpu::new(0)?;
    let stream = gpu.context().default_stream();
    // Graph capture with cudarc's multi-stream event tracking would record
    // events into the graph; one stream needs none.
    // SAFETY: this program uses a single stream.
    unsafe { gpu.context().disable_event_tracking() };
    println!("# moe4 bench on {} ({} SMs, PTX {})", gpu.name(), gpu.sm_count(), gpu.arch().name());
    let mut json = Vec::new();
    if kind == "decode" || kind == "all" {
        let copy = bench::copy_bandwidth(&stream)?;
        let ms: Vec<usize> = if quick { vec![1, 16, 64] } else { vec![1, 2, 4, 8, 16, 32, 64] };
        let mut all = Vec::new();
        for s in bench::SHAPES {
            let r = bench::decode(&gpu, &stream, *s, &ms, copy)?;
            for x in &r {
                eprintln!("  {} M={} {:.1} us {:.0} GB/s ({:.2})", x.shape, x.m, x.us, x.gbps, x.of_copy);
            }
            all.extend(r);
        }
        println!("\n## decode (NVFP4 W4A16, bf16)\n\n{}", bench::decode_table(&all, copy));
        json.push(bench::decode_json(&all, copy));
    }
    if kind == "peak" || kind == "w4a4" || kind == "all" {
        let p = bench::peaks(&gpu, &stream)?;
        println!("\n## mma.sync peaks\n\ns8 {:.0} TOPS, s4 {:.0} TOPS, f16 {:.0} TFLOP/s", p.0, p.1, p.2);
        if kind != "peak" {
            let rows: Vec<usize> = if quick { vec![8192] } else { vec![128, 1024, 8192] };
            let mut all = Vec::new();
            for s in bench::SHAPES {
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
