//! Helpers shared by the integration tests: the GPU gate (skip visibly, or
//! fail under MOE4_REQUIRE_GPU=1), random data, error norms.
#![allow(dead_code)]

use moe4::nvfp4::Nvfp4Moe;
use moe4::quant::quantize_nvfp4;
use moe4::{gpu_available, Gpu, Half, MoeWeights, Workspace};
use std::io::Write;
use std::sync::Arc;

/// The GPU for a GPU test, or `None` (after saying so on stderr, which the
/// test harness does not capture) when there is none. With
/// `MOE4_REQUIRE_GPU=1` a missing GPU fails the test instead.
pub fn gpu(test: &str) -> Option<Arc<Gpu>> {
    if gpu_available() {
        let g = Gpu::new(0).expect("open GPU 0");
        return Some(g);
    }
    if std::env::var("MOE4_REQUIRE_GPU").as_deref() == Ok("1") {
        panic!("{test}: MOE4_REQUIRE_GPU=1 but no CUDA GPU is visible");
    }
    let _ = writeln!(
        std::io::stderr(),
        "moe4: SKIPPED {test}: no CUDA GPU (set MOE4_REQUIRE_GPU=1 to make this a failure)"
    );
    None
}

/// A small, fast PRNG (tests must not depend on a crate's stream).
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Roughly normal, mean 0, variance 1/3.
    pub fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * scale).collect()
    }
}

/// A random layer, quantized with the ModelOpt recipe. Rows get different
/// magnitudes so block scales vary.
pub fn random_layer(rng: &mut Rng, e: usize, h: usize, i: usize) -> Nvfp4Moe {
    let mut w = |rows: usize, k: usize| {
        let mut v = rng.vec(e * rows * k, 1.0 / (k as f32).sqrt());
        for (r, row) in v.chunks_mut(k).enumerate() {
            let s = 0.25 + ((r * 2654435761) % 1000) as f32 / 500.0;
            row.iter_mut().for_each(|x| *x *= s);
        }
        quantize_nvfp4(&v, e, rows, k).expect("quantize")
    };
    Nvfp4Moe { gate: w(i, h), up: w(i, h), down: w(h, i) }
}

/// Routing with `topk` distinct experts per token drawn from `0..e`.
pub fn routing(rng: &mut Rng, m: usize, e: usize, topk: usize) -> (Vec<i32>, Vec<f32>) {
    let mut ids = Vec::new();
    let mut w = Vec::new();
    for _ in 0..m {
        let mut chosen: Vec<i32> = Vec::new();
        while chosen.len() < topk {
            let c = rng.below(e) as i32;
            if !chosen.contains(&c) || topk > e {
                chosen.push(c);
            }
        }
        let raw: Vec<f32> = (0..topk).map(|_| 0.1 + rng.uniform()).collect();
        let sum: f32 = raw.iter().sum();
        ids.extend(chosen);
        w.extend(raw.iter().map(|v| v / sum));
    }
    (ids, w)
}

/// ||a - b|| / ||b||.
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// Prints a measured figure so test logs keep it (stderr is not captured).
pub fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "moe4: {line}");
}

/// One forward of `x` ([M, H] as f32, converted to `T`) with `ids`, `tw`
/// on the workspace's path and tuning, the output and the scratch between
/// the kernels poisoned first (nothing an earlier run wrote can stand in
/// for a write this one skips); the output as f64, every element checked
/// finite (`label` names the call in the failure).
pub fn forward<T: Half>(
    w: &MoeWeights,
    ws: &mut Workspace,
    s: &Arc<cudarc::driver::CudaStream>,
    x: &[f32],
    ids: &[i32],
    tw: &[f32],
    label: &str,
) -> Vec<f64> {
    let h = w.hidden();
    let m = x.len() / h;
    let xd = s.clone_htod(&x.iter().map(|&v| T::from_f32(v)).collect::<Vec<_>>()).unwrap();
    let (idd, twd) = (s.clone_htod(ids).unwrap(), s.clone_htod(tw).unwrap());
    let mut out = s.clone_htod(&vec![T::from_f32(f32::NAN); m * h]).unwrap();
    ws.poison_scratch(s).unwrap();
    w.forward(ws, s, &xd.as_view(), &idd.as_view(), &twd.as_view(), &mut out.as_view_mut()).unwrap();
    let got: Vec<f64> = s.clone_dtoh(&out).unwrap().iter().map(|v| v.to_f32() as f64).collect();
    let unwritten = got.iter().filter(|v| !v.is_finite()).count();
    assert_eq!(unwritten, 0, "{label}: {unwritten} outputs not written (or not finite)");
    got
}
