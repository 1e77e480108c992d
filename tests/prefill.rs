//! The prefill path (tensor-core grouped GEMMs) against the f64 CPU
//! reference: M in 128, 1000, 4096; decode and prefill agree at the
//! crossover; skewed routing (half the pairs on one expert, 18432 pairs).

mod common;
use common::*;
use half::{bf16, f16};
use moe4::reference::{moe_layer, Activation};
use moe4::{ForwardPath, Half, MoeWeights, Tuning, Workspace};

fn reference<T: Half>(
    w: &moe4::nvfp4::Nvfp4Moe,
    act: Activation,
    x: &[f32],
    ids: &[i32],
    tw: &[f32],
    topk: usize,
) -> Vec<f64> {
    let x16: Vec<f32> = x.iter().map(|&v| T::from_f32(v).to_f32()).collect();
    moe_layer(w, act, &x16, ids, tw, x.len() / w.hidden(), topk).unwrap()
}

/// The prefill kernel variants this GPU's build has: on sm_90a the `wgmma`
/// kernels with 64 and 128 pairs per tile, 128 with the experts' last
/// groups of at most 64 pairs on 64-pair tiles (the `_mix` kernels), the
/// 128-row x 256-pair ones with and without 64-pair tails (one or two per
/// expert: `_mix256`; `_n256`), and the `mma.sync` ones; else the
/// `mma.sync` ones; y in 16 bits (the default) and in f32.
fn variants(gpu: &moe4::Gpu) -> Vec<(&'static str, Tuning)> {
    let base = Tuning::defaults(gpu);
    if !gpu.arch().has_wgmma() {
        return vec![("mma.sync", base), ("mma.sync y f32", Tuning { y16: false, ..base })];
    }
    let mut v = vec![
        ("wgmma n64", Tuning { wgmma: true, wgmma_cols: Some(64), ..base }),
        ("wgmma n128", Tuning { wgmma: true, wgmma_cols: Some(128), narrow_tail: false, ..base }),
        ("wgmma n128 + n64 tails", Tuning { wgmma: true, wgmma_cols: Some(128), narrow_tail: true, ..base }),
        ("wgmma n128 + n64 tails y f32", Tuning { wgmma: true, wgmma_cols: Some(128), y16: false, ..base }),
        ("mma.sync", Tuning { wgmma: false, ..base }),
        ("mma.sync y f32", Tuning { wgmma: false, y16: false, ..base }),
    ];
    // The 128-row x 256-pair kernels (sm_90a; a PTX file without them skips them).
    if gpu.has_kernel("moe_pfw1_bf16_n256") {
        v.extend([
            ("wgmma n256", Tuning { wgmma: true, wgmma_cols: Some(256), narrow_tail: false, ..base }),
            ("wgmma n256 + n64 tails", Tuning { wgmma: true, wgmma_cols: Some(256), narrow_tail: true, ..base }),
            ("wgmma n256 y f32", Tuning { wgmma: true, wgmma_cols: Some(256), narrow_tail: false, y16: false, ..base }),
            (
                "wgmma n256 + n64 tails y f32",
                Tuning { wgmma: true, wgmma_cols: Some(256), narrow_tail: true, y16: false, ..base },
            ),
        ]);
    }
    v
}

#[test]
fn prefill_against_the_reference() {
    let Some(gpu) = gpu("prefill_against_the_reference") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(55);
    // H = 2880: not a multiple of the 128- or 256-row block (a partial last
    // block); I = 192 likewise.
    for (e, h, i, topk, act) in [(8, 512, 256, 2, Activation::Silu), (6, 2880, 192, 3, Activation::GPT_OSS)] {
        let layer = random_layer(&mut rng, e, h, i);
        let w = MoeWeights::new(&gpu, &s, &layer, act).unwrap();
        let mut ws = Workspace::new(&w, &s, 4096, topk).unwrap();
        ws.set_path(ForwardPath::Prefill);
        for m in [128, 1000, 4096] {
            if h > 1000 && m > 1000 {
                continue; // keep the CPU reference quick
            }
            let x = rng.vec(m * h, 1.0);
            let (mut ids, tw) = routing(&mut rng, m, e, topk);
            for p in (0..ids.len()).step_by(7) {
                ids[p] = -1;
            }
            let want_bf16 = reference::<bf16>(&layer, act, &x, &ids, &tw, topk);
            let want_f16 = reference::<f16>(&layer, act, &x, &ids, &tw, topk);
            for (label, t) in variants(&gpu) {
                *ws.tuning_mut() = t;
                let got = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
                let err = rel_l2(&got, &want_bf16);
                report(&format!("prefill {label} bf16 E={e} H={h} I={i} M={m}: rel L2 error {err:.2e}"));
                assert!(err < 1e-2, "{label} bf16 M={m}: {err}");
                let got = forward::<f16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
                let err = rel_l2(&got, &want_f16);
                report(&format!("prefill {label} f16 E={e} H={h} I={i} M={m}: rel L2 error {err:.2e}"));
                assert!(err < 1e-2, "{label} f16 M={m}: {err}");
            }
        }
    }
}

#[test]
fn decode_and_prefill_agree_and_skew_is_handled() {
    let Some(gpu) = gpu("decode_and_prefill_agree_and_skew_is_handled") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(66);
    let (e, h, i, topk) = (16, 1024, 512, 4);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 4608, topk).unwrap();
    // Around the crossover: 32 pairs per expert.
    let m = 128;
    let x = rng.vec(m * h, 1.0);
    let (ids, tw) = routing(&mut rng, m, e, topk);
    ws.set_path(ForwardPath::Decode);
    let d = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
    ws.set_path(ForwardPath::Prefill);
    let p = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
    let want = reference::<bf16>(&layer, Activation::Silu, &x, &ids, &tw, topk);
    let (ed, ep, edp) = (rel_l2(&d, &want), rel_l2(&p, &want), rel_l2(&p, &d));
    report(&format!("crossover M={m}: decode {ed:.2e}, prefill {ep:.2e}, prefill vs decode {edp:.2e}"));
    assert!(ed < 1e-2 && ep < 1e-2 && edp < 1e-2);
    // Skewed: half of all pairs on expert 3 (4608 x 4 pairs).
    let m = 4608;
    let x = rng.vec(m * h, 1.0);
    let (mut ids, tw) = routing(&mut rng, m, e, topk);
    for t in 0..m {
        if t % 2 == 0 {
            // Slot 0 of even tokens -> 3 unless 3 is already one of its ids.
            if !ids[t * topk..(t + 1) * topk].contains(&3) {
                ids[t * topk] = 3;
            }
        }
    }
    ws.set_path(ForwardPath::Auto);
    let got = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
    let err = rel_l2(&got, &reference::<bf16>(&layer, Activation::Silu, &x, &ids, &tw, topk));
    report(&format!("skewed M={m} ({} pairs): rel L2 error {err:.2e}", m * topk));
    assert!(err < 1e-2, "{err}");
    // Bit-reproducible although the router's slot order is not.
    let again = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
    assert!(got.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "prefill output changed between runs");
}

/// Experts with exactly chosen pair counts, so every tile shape occurs:
/// 1, 63, 64, 65, 128, 129, 192, 193, 255, 256, 257, 321, 384 and 385
/// pairs (full and partial last groups of 64, 128 and 256 columns, groups
/// of one pair, rests of 1, 65, 128 and 129 after a 256-pair group: one or
/// two 64-pair tails or none), an expert
/// with none, and ids of -1 and out of range between them; every variant
/// against the reference, each twice (the output is the same bit for bit).
#[test]
fn prefill_every_tile_width() {
    let Some(gpu) = gpu("prefill_every_tile_width") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(88);
    let counts = [1usize, 63, 64, 65, 128, 0, 129, 192, 193, 255, 256, 257, 321, 384, 385];
    let (e, h, i, topk) = (counts.len(), 256, 192, 2);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    // The pairs, expert by expert, then shuffled over (token, k) slots;
    // the odd slot left over is -1, and a few more are -1 or out of range.
    let mut ids: Vec<i32> = counts.iter().enumerate().flat_map(|(x, &c)| vec![x as i32; c]).collect();
    ids.push(-1);
    ids.push(e as i32 + 5);
    if !ids.len().is_multiple_of(topk) {
        ids.push(-1);
    }
    for a in (1..ids.len()).rev() {
        ids.swap(a, rng.below(a + 1));
    }
    let m = ids.len() / topk;
    let tw: Vec<f32> = (0..ids.len()).map(|_| 0.1 + rng.uniform()).collect();
    let x = rng.vec(m * h, 1.0);
    let mut ws = Workspace::new(&w, &s, m, topk).unwrap();
    ws.set_path(ForwardPath::Prefill);
    let want = reference::<bf16>(&layer, Activation::Silu, &x, &ids, &tw, topk);
    for (label, t) in variants(&gpu) {
        *ws.tuning_mut() = t;
        let got = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
        let err = rel_l2(&got, &want);
        report(&format!("prefill tile widths {label} M={m}: rel L2 error {err:.2e}"));
        assert!(err < 1e-2, "{label}: {err}");
        let again = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
        assert!(got.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "{label}: output changed");
    }
    // f16 on the default prefill kernels.
    *ws.tuning_mut() = Tuning::defaults(&gpu);
    let got = forward::<f16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill");
    let err = rel_l2(&got, &reference::<f16>(&layer, Activation::Silu, &x, &ids, &tw, topk));
    report(&format!("prefill tile widths default f16 M={m}: rel L2 error {err:.2e}"));
    assert!(err < 1e-2, "f16: {err}");
}

/// Every prefill kernel variant, each with `tune` applied to it, against
/// the reference on a random bf16 layer `(e, h, i)` with `m` tokens of
/// `topk` pairs (the rng seeded with `seed`); `what` names the case in the
/// report.
fn every_variant(
    gpu: &std::sync::Arc<moe4::Gpu>,
    what: &str,
    seed: u64,
    (e, h, i, topk, m): (usize, usize, usize, usize, usize),
    tune: impl Fn(Tuning) -> Tuning,
) {
    let s = gpu.context().default_stream();
    let mut rng = Rng(seed);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, m, topk).unwrap();
    ws.set_path(ForwardPath::Prefill);
    let x = rng.vec(m * h, 1.0);
    let (ids, tw) = routing(&mut rng, m, e, topk);
    let want = reference::<bf16>(&layer, Activation::Silu, &x, &ids, &tw, topk);
    for (label, t) in variants(gpu) {
        *ws.tuning_mut() = tune(t);
        let err = rel_l2(&forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, "prefill"), &want);
        report(&format!("prefill {what} {label}: rel L2 error {err:.2e}"));
        assert!(err < 1e-2, "{label}: {err}");
    }
}

/// A small prefill case for compute-sanitizer (`scripts/gpu-run.sh
/// sanitize`): every kernel variant once, partial tiles in rows and columns.
#[test]
fn prefill_sanitizer_case() {
    let Some(gpu) = gpu("prefill_sanitizer_case") else { return };
    every_variant(&gpu, "sanitizer case", 77, (4, 320, 192, 2, 150), |t| t);
}

/// The smallest K (one 64-k chunk per tile in both GEMMs): the pipelines'
/// prologues and lags are longer than a tile, so every kernel runs its
/// hand-over across tile boundaries; several tiles per block.
#[test]
fn prefill_one_chunk_k() {
    let Some(gpu) = gpu("prefill_one_chunk_k") else { return };
    // Few blocks, so each runs many tiles.
    every_variant(&gpu, "K = 64", 91, (5, 64, 64, 2, 700), |t| Tuning { fc_blocks: Some(3), ..t });
}
