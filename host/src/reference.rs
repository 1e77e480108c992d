//! CPU references in f64, on the *same quantized* weights the GPU uses:
//! the MoE layer exactly as DESIGN.md §4 defines it, and the W4A4 grouped
//! GEMM. They are the yardstick of every GPU test; they favour clarity and
//! use all cores, not speed tricks.

use crate::error::{shape, unsupported, Result};
use crate::nvfp4::Nvfp4Moe;
use moe4_kernels::int4;

/// The gated activation applied to FC1's two halves (DESIGN.md §4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// `silu(g) * u`.
    Silu,
    /// `silu(min(g, limit)) * clamp(u, -limit, limit)` (seed 004).
    ClampedSilu {
        /// Clamp limit.
        limit: f32,
    },
    /// GPT-OSS: `g' * sigmoid(alpha g') * (u' + 1)`, `g' = min(g, limit)`,
    /// `u' = clamp(u, -limit, limit)`.
    GptOss {
        /// Sigmoid slope (1.702 in GPT-OSS).
        alpha: f32,
        /// Clamp limit (7 in GPT-OSS).
        limit: f32,
    },
}

impl Activation {
    /// GPT-OSS's constants: alpha 1.702, limit 7.
    pub const GPT_OSS: Activation = Activation::GptOss { alpha: 1.702, limit: 7.0 };

    /// Applies the activation in f64. NaN propagates.
    pub fn apply(self, g: f64, u: f64) -> f64 {
        fn sigmoid(x: f64) -> f64 {
            1.0 / (1.0 + (-x).exp())
        }
        // min/max that keep NaN (f64::min would drop it).
        fn min_nan(a: f64, b: f64) -> f64 {
            if a.is_nan() || a < b {
                a
            } else {
                b
            }
        }
        fn max_nan(a: f64, b: f64) -> f64 {
            if a.is_nan() || a > b {
                a
            } else {
                b
            }
        }
        match self {
            Activation::Silu => g * sigmoid(g) * u,
            Activation::ClampedSilu { limit } => {
                let l = limit as f64;
                let (g, u) = (min_nan(g, l), max_nan(min_nan(u, l), -l));
                g * sigmoid(g) * u
            }
            Activation::GptOss { alpha, limit } => {
                let l = limit as f64;
                let (g, u) = (min_nan(g, l), max_nan(min_nan(u, l), -l));
                g * sigmoid(alpha as f64 * g) * (u + 1.0)
            }
        }
    }
}

/// The MoE layer in f64: for every (m, j) with `0 <= topk_ids[m, j] < E`,
/// `y = alpha2-scaled down(act(gate x, up x)) * topk_weights[m, j]`, and
/// `out[m] = sum over j in order`. Ids outside `0..E` (including -1) are
/// skipped. `x` is `[m, H]` (exact f32 of the 16-bit input); returns
/// `[m, H]`.
pub fn moe_layer(
    w: &Nvfp4Moe,
    act: Activation,
    x: &[f32],
    topk_ids: &[i32],
    topk_weights: &[f32],
    m: usize,
    topk: usize,
) -> Result<Vec<f64>> {
    let (e_n, h, inter) = (w.experts(), w.hidden(), w.intermediate());
    shape("x", m * h, x.len())?;
    shape("topk_ids", m * topk, topk_ids.len())?;
    shape("topk_weights", m * topk, topk_weights.len())?;
    if topk == 0 {
        return Err(unsupported("top-k", 0, "must be at least 1"));
    }
    // Pairs grouped by expert, so each expert's rows are decoded once.
    let mut by_expert: Vec<Vec<usize>> = vec![Vec::new(); e_n];
    for (p, &id) in topk_ids.iter().enumerate() {
        if id >= 0 && (id as usize) < e_n {
            by_expert[id as usize].push(p);
        }
    }
    // Work items of at most 64 rows, so few experts still use every core.
    const ROWS: usize = 64;
    let experts: Vec<(usize, &Vec<usize>)> = by_expert.iter().enumerate().filter(|(_, v)| !v.is_empty()).collect();
    // Phase 1: h = act(gate x, up x) for every valid pair, [pair][I].
    let items1: Vec<(usize, usize)> =
        experts.iter().flat_map(|&(e, _)| (0..inter.div_ceil(ROWS)).map(move |c| (e, c))).collect();
    let parts1 = parallel(&items1, |&(e, c0)| {
        let pairs = &by_expert[e];
        let mut row = vec![0f64; h];
        let mut part = Vec::new();
        for c in c0 * ROWS..((c0 + 1) * ROWS).min(inter) {
            w.gate.row_f64(e, c, &mut row);
            let g: Vec<f64> = pairs.iter().map(|&p| dot(&row, &x[(p / topk) * h..][..h])).collect();
            w.up.row_f64(e, c, &mut row);
            for (q, &p) in pairs.iter().enumerate() {
                part.push((p, c, act.apply(g[q], dot(&row, &x[(p / topk) * h..][..h]))));
            }
        }
        part
    });
    let mut hbuf = vec![0f64; m * topk * inter];
    for (p, c, v) in parts1.into_iter().flatten() {
        hbuf[p * inter + c] = v;
    }
    // Phase 2: y = down(h) * routing weight, [pair][H].
    let items2: Vec<(usize, usize)> =
        experts.iter().flat_map(|&(e, _)| (0..h.div_ceil(ROWS)).map(move |c| (e, c))).collect();
    let parts2 = parallel(&items2, |&(e, r0)| {
        let pairs = &by_expert[e];
        let mut row = vec![0f64; inter];
        let mut part = Vec::new();
        for r in r0 * ROWS..((r0 + 1) * ROWS).min(h) {
            w.down.row_f64(e, r, &mut row);
            for &p in pairs {
                let acc: f64 = row.iter().zip(&hbuf[p * inter..(p + 1) * inter]).map(|(a, b)| a * b).sum();
                part.push((p, r, acc * topk_weights[p] as f64));
            }
        }
        part
    });
    let mut yv = vec![0f64; m * topk * h];
    let mut valid = vec![false; m * topk];
    for (p, r, v) in parts2.into_iter().flatten() {
        yv[p * h + r] = v;
        valid[p] = true;
    }
    let y: Vec<Option<&[f64]>> = (0..m * topk).map(|p| valid[p].then(|| &yv[p * h..(p + 1) * h])).collect();
    // Combine in k order.
    let mut out = vec![0f64; m * h];
    for t in 0..m {
        for j in 0..topk {
            if let Some(v) = &y[t * topk + j] {
                for (o, a) in out[t * h..(t + 1) * h].iter_mut().zip(v.iter()) {
                    *o += a;
                }
            }
        }
    }
    Ok(out)
}

/// Runs `f` over `items` on all cores; results in item order.
fn parallel<I: Sync, R: Send>(items: &[I], f: impl Fn(&I) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(it) = items.get(i) else { break };
                        mine.push((i, f(it)));
                    }
                    mine
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().expect("reference thread")).collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

fn dot(w: &[f64], x: &[f32]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * *b as f64).sum()
}

/// The W4A4 grouped GEMM: for every expert `e` and row `m` in
/// `offsets[e]..offsets[e+1]`, `acc[m, n] = sum_k a[m, k] * b[e][n, k]`
/// (exact i32) and `out = s_a[m] * s_w[e][n] * acc (* row_scale[m])` in f64.
/// Rows outside every segment stay 0. Returns (acc, out).
#[allow(clippy::too_many_arguments)]
pub fn w4a4_grouped_gemm(
    a: &[u8],
    b: &[u8],
    s_a: &[f32],
    s_w: &[f32],
    offsets: &[i64],
    row_scale: Option<&[f32]>,
    rows: usize,
    n: usize,
    k: usize,
) -> Result<(Vec<i32>, Vec<f64>)> {
    let experts = offsets.len().saturating_sub(1);
    shape("a", rows * k / 2, a.len())?;
    shape("b", experts * n * k / 2, b.len())?;
    shape("s_a", rows, s_a.len())?;
    shape("s_w", experts * n, s_w.len())?;
    let mut acc = vec![0i32; rows * n];
    let mut out = vec![0f64; rows * n];
    let unpack = |bytes: &[u8]| -> Vec<i32> { (0..k).map(|i| int4::value_at(bytes, i) as i32).collect() };
    for e in 0..experts {
        let (lo, hi) = (offsets[e].clamp(0, rows as i64) as usize, offsets[e + 1].clamp(0, rows as i64) as usize);
        let bw: Vec<Vec<i32>> = (0..n).map(|c| unpack(&b[(e * n + c) * k / 2..][..k / 2])).collect();
        for r in lo..hi.max(lo) {
            let av = unpack(&a[r * k / 2..][..k / 2]);
            for c in 0..n {
                let s: i32 = av.iter().zip(&bw[c]).map(|(x, y)| x * y).sum();
                acc[r * n + c] = s;
                let mut v = s_a[r] as f64 * s_w[e * n + c] as f64 * s as f64;
                if let Some(rs) = row_scale {
                    v *= rs[r] as f64;
                }
                out[r * n + c] = v;
            }
        }
    }
    Ok((acc, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_by_hand() {
        let s = |x: f64| 1.0 / (1.0 + (-x).exp());
        assert!((Activation::Silu.apply(1.0, 2.0) - 2.0 * s(1.0)).abs() < 1e-15);
        let c = Activation::ClampedSilu { limit: 7.0 };
        assert!((c.apply(10.0, -20.0) - 7.0 * s(7.0) * -7.0).abs() < 1e-12);
        let g = Activation::GPT_OSS;
        let a = 1.702f32 as f64;
        assert!((g.apply(2.0, 1.0) - 2.0 * s(a * 2.0) * 2.0).abs() < 1e-12);
        assert!((g.apply(9.0, 9.0) - 7.0 * s(a * 7.0) * 8.0).abs() < 1e-12);
        assert!(g.apply(f64::NAN, 1.0).is_nan());
        assert!(c.apply(1.0, f64::NAN).is_nan());
    }
}
