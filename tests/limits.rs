//! The layer at the edges of what it accepts, on both paths, against the
//! f64 CPU reference: the most experts (`MAX_EXPERTS`) with the largest
//! top-k (`MAX_TOPK`), the smallest H and I (64: one K chunk per task),
//! one dimension 64 and the other 4096 each way, a single expert with
//! top-1, and every one of the most experts with a narrow prefill tail
//! (the routing's packed group counts at their largest). Each M is run on
//! the path `forward` picks and forced onto the other one (decode and
//! prefill kernels must both take every valid shape), with -1 and
//! out-of-range ids mixed in. Outputs are poisoned
//! before every run; every element must come back finite.

mod common;
use common::*;
use half::{bf16, f16};
use moe4::nvfp4::Nvfp4Moe;
use moe4::reference::{moe_layer, Activation};
use moe4::{ForwardPath, MoeWeights, Workspace, MAX_EXPERTS, MAX_TOPK};

const TOL: f64 = 1e-2;

/// Runs `layer` at each M on the automatic path and on both forced ones,
/// bf16 (and f16 at the first M), against the reference.
fn check_layer(layer: &Nvfp4Moe, topk: usize, ms: &[usize], name: &str, rng: &mut Rng) {
    let Some(gpu) = gpu(name) else { return };
    let s = gpu.context().default_stream();
    let (e, h) = (layer.experts(), layer.hidden());
    let act = Activation::Silu;
    let w = MoeWeights::new(&gpu, &s, layer, act).unwrap();
    let max_m = *ms.iter().max().unwrap();
    let mut ws = Workspace::new(&w, &s, max_m, topk).unwrap();
    ws.reset_invalid_id_count(&s).unwrap();
    let mut invalid = 0u64;
    for (n, &m) in ms.iter().enumerate() {
        let x = rng.vec(m * h, 1.0);
        let (mut ids, tw) = routing(rng, m, e, topk);
        // Another rank's experts (-1) and ids no expert has: both skipped.
        for p in (0..ids.len()).step_by(9) {
            ids[p] = -1;
        }
        let bad = ids.len() > 4;
        if bad {
            ids[4] = e as i32;
        }
        // The reference sees the same 16-bit input the GPU does (f16 at the
        // first M only).
        let want = |to16: fn(f32) -> f32| {
            let x16: Vec<f32> = x.iter().map(|&v| to16(v)).collect();
            moe_layer(layer, act, &x16, &ids, &tw, m, topk).unwrap()
        };
        let want_bf16 = want(|v| bf16::from_f32(v).to_f32());
        let want_f16 = (n == 0).then(|| want(|v| f16::from_f32(v).to_f32()));
        for path in [ForwardPath::Auto, ForwardPath::Decode, ForwardPath::Prefill] {
            ws.set_path(path);
            let label = format!("{name} E={e} H={h} I={} top-{topk} M={m} {path:?}", layer.intermediate());
            let mut runs = vec![("bf16", forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, &label), &want_bf16)];
            if let Some(want_f16) = &want_f16 {
                runs.push(("f16", forward::<f16>(&w, &mut ws, &s, &x, &ids, &tw, &label), want_f16));
            }
            for (t, got, want) in runs {
                let err = rel_l2(&got, want);
                report(&format!("limits {label} [{t}]: rel L2 error {err:.2e}"));
                assert!(err < TOL, "{label} [{t}]: relative error {err} >= {TOL}");
                invalid += bad as u64;
            }
        }
    }
    // Each run counted its one out-of-range id, none of the -1s.
    assert_eq!(ws.invalid_id_count(&s).unwrap(), invalid, "{name}: out-of-range ids counted");
}

#[test]
fn most_experts_with_the_largest_top_k() {
    let mut rng = Rng(1024);
    // 64 of 1024 experts per token: M = 1 routes in the FC kernels (64
    // pairs), 7 and 33 on one block, 300 (19200 pairs) on many.
    let layer = random_layer(&mut rng, MAX_EXPERTS, 64, 64);
    check_layer(&layer, MAX_TOPK, &[1, 7, 33, 300], "most_experts_with_the_largest_top_k", &mut rng);
}

#[test]
fn smallest_hidden_and_intermediate_sizes() {
    let mut rng = Rng(64);
    let layer = random_layer(&mut rng, 1, 64, 64);
    check_layer(&layer, 1, &[1, 33, 4096], "smallest_hidden_and_intermediate_sizes", &mut rng);
}

#[test]
fn small_hidden_wide_intermediate() {
    let mut rng = Rng(4096);
    let layer = random_layer(&mut rng, 4, 64, 4096);
    check_layer(&layer, 2, &[1, 7, 128, 1000], "small_hidden_wide_intermediate", &mut rng);
}

#[test]
fn wide_hidden_small_intermediate() {
    let mut rng = Rng(4097);
    let layer = random_layer(&mut rng, 4, 4096, 64);
    check_layer(&layer, 2, &[1, 7, 128, 1000], "wide_hidden_small_intermediate", &mut rng);
}

/// Every one of the most experts with a rest that takes narrow prefill
/// tiles, so the routing's packed narrow-group count reaches its largest
/// values (`moe4_kernels::groups`: 1024 narrow groups with 128-pair tiles,
/// 2048 with 256-pair ones, past the 10 bits that field had before run
/// 119): M = 2064 tokens of top-64 over 1024 experts, each expert exactly
/// 129 times (one 128-pair group and a 1-pair tail each), and M = 2048,
/// each expert 128 times, on the 256-pair tiles where the build has them
/// (two 64-pair tails each). Prefill against the reference.
#[test]
fn every_expert_with_a_narrow_tail() {
    let Some(gpu) = gpu("every_expert_with_a_narrow_tail") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(129);
    let (e, h, topk) = (MAX_EXPERTS, 64, MAX_TOPK);
    let layer = random_layer(&mut rng, e, h, 64);
    let act = Activation::Silu;
    let w = MoeWeights::new(&gpu, &s, &layer, act).unwrap();
    let mut ws = Workspace::new(&w, &s, 2064, topk).unwrap();
    ws.set_path(ForwardPath::Prefill);
    let n256 = gpu.has_kernel("moe_pfw1_bf16_n256");
    for (m, cols) in [(2064, None), (2048, n256.then_some(256))] {
        // Token t's experts 64 t .. 64 t + 63 (mod E): distinct per token,
        // every expert m * topk / E times.
        let ids: Vec<i32> = (0..m * topk).map(|p| (p % e) as i32).collect();
        let tw: Vec<f32> = (0..ids.len()).map(|_| 0.1 + rng.uniform()).collect();
        let x = rng.vec(m * h, 1.0);
        let x16: Vec<f32> = x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        let want = moe_layer(&layer, act, &x16, &ids, &tw, m, topk).unwrap();
        let tuning = ws.tuning_mut();
        tuning.wgmma_cols = cols;
        let label = format!("every_expert_with_a_narrow_tail M={m} pairs per expert {} cols {cols:?}", m * topk / e);
        let got = forward::<bf16>(&w, &mut ws, &s, &x, &ids, &tw, &label);
        let err = rel_l2(&got, &want);
        report(&format!("limits {label}: rel L2 error {err:.2e}"));
        assert!(err < TOL, "{label}: relative error {err} >= {TOL}");
    }
}
