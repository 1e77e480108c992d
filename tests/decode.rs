//! The NVFP4 decode layer on the GPU against the f64 CPU reference on the
//! same quantized weights: model shapes (fewer experts where the whole layer
//! would be too slow for the reference), M in 1, 3, 8, 33, 64, the three
//! activations, bf16 and f16, ids with -1, all tokens on one expert,
//! out-of-range ids, graph replay == eager bit for bit. Outputs (and the
//! scratch between the kernels, h and y) are poisoned with NaN before every
//! run and every element must come back finite.

mod common;
use common::*;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaStream;
use half::{bf16, f16};
use moe4::nvfp4::Nvfp4Moe;
use moe4::reference::{moe_layer, Activation};
use moe4::{Arch, Gpu, Half, MoeWeights, Workspace};
use std::sync::Arc;

const TOL: f64 = 1e-2;

#[derive(Clone)]
struct Case<'a> {
    name: String,
    m: usize,
    topk: usize,
    ids: Vec<i32>,
    tw: Vec<f32>,
    x: Vec<f32>,
    layer: &'a Nvfp4Moe,
}

/// Runs one forward on the GPU (output poisoned first) and returns it as f64.
fn run_gpu<T: Half>(w: &MoeWeights, ws: &mut Workspace, s: &Arc<CudaStream>, c: &Case) -> Vec<f64> {
    let h = w.hidden();
    let x: Vec<T> = c.x.iter().map(|&v| T::from_f32(v)).collect();
    let xd = s.clone_htod(&x).unwrap();
    let (ids, tw) = (s.clone_htod(&c.ids).unwrap(), s.clone_htod(&c.tw).unwrap());
    let poison = vec![T::from_bits(if T::IS_BF16 { 0x7FC0 } else { 0x7E00 }); c.m * h];
    let mut out = s.clone_htod(&poison).unwrap();
    // The scratch too: no value an earlier run left there stands in for a
    // write this one skips.
    ws.poison_scratch(s).unwrap();
    w.forward(ws, s, &xd.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut()).unwrap();
    let got = s.clone_dtoh(&out).unwrap();
    let unwritten = got.iter().filter(|v| !v.to_f32().is_finite()).count();
    assert_eq!(unwritten, 0, "{}: {unwritten} outputs not written (or not finite)", c.name);
    got.iter().map(|v| v.to_f32() as f64).collect()
}

fn check<T: Half>(w: &MoeWeights, ws: &mut Workspace, s: &Arc<CudaStream>, c: &Case) -> f64 {
    // The reference sees the same 16-bit input the GPU does.
    let x16: Vec<f32> = c.x.iter().map(|&v| T::from_f32(v).to_f32()).collect();
    let want = moe_layer(c.layer, w.activation(), &x16, &c.ids, &c.tw, c.m, c.topk).unwrap();
    let got = run_gpu::<T>(w, ws, s, c);
    let err = rel_l2(&got, &want);
    report(&format!("decode {} [{}]: rel L2 error {err:.2e}", c.name, T::NAME));
    assert!(err < TOL, "{} [{}]: relative error {err} >= {TOL}", c.name, T::NAME);
    err
}

/// One forward of `c` (bf16 zeros as x) that must fail: its error.
fn forward_err(w: &MoeWeights, ws: &mut Workspace, s: &Arc<CudaStream>, c: &Case) -> moe4::Error {
    let x = s.clone_htod(&vec![bf16::ZERO; c.m * w.hidden()]).unwrap();
    let (ids, tw) = (s.clone_htod(&c.ids).unwrap(), s.clone_htod(&c.tw).unwrap());
    let mut out = s.alloc_zeros::<bf16>(c.m * w.hidden()).unwrap();
    w.forward(ws, s, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut()).unwrap_err()
}

fn case<'a>(rng: &mut Rng, layer: &'a Nvfp4Moe, name: &str, m: usize, topk: usize) -> Case<'a> {
    let (ids, tw) = routing(rng, m, layer.experts(), topk);
    Case { name: format!("{name} M={m}"), m, topk, ids, tw, x: rng.vec(m * layer.hidden(), 1.0), layer }
}

#[test]
fn model_shapes_against_the_reference() {
    let Some(gpu) = gpu("model_shapes_against_the_reference") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(2024);
    // (name, H, I, experts used, top-k, activation)
    let shapes = [
        ("Qwen3-30B-A3B", 2048, 768, 128, 8, Activation::Silu),
        ("DeepSeek-V3 (8 of 256 experts)", 7168, 2048, 8, 8, Activation::Silu),
        ("DeepSeek-V4-Pro (6 of 384 experts)", 7168, 3072, 6, 6, Activation::ClampedSilu { limit: 10.0 }),
        ("DeepSeek-V4-Flash (8 of 256 experts)", 4096, 2048, 8, 6, Activation::Silu),
        ("GPT-OSS-120B (16 of 128 experts, K=2880)", 2880, 2880, 16, 4, Activation::GPT_OSS),
        ("Mixtral-8x7B (2 of 8 experts)", 4096, 14336, 2, 2, Activation::Silu),
    ];
    for (name, h, i, e, topk, act) in shapes {
        let layer = random_layer(&mut rng, e, h, i);
        let w = MoeWeights::new(&gpu, &s, &layer, act).unwrap();
        let mut ws = Workspace::new(&w, &s, 64, topk).unwrap();
        for m in [1, 33, 64] {
            let c = case(&mut rng, &layer, name, m, topk);
            check::<bf16>(&w, &mut ws, &s, &c);
        }
        let c = case(&mut rng, &layer, name, 8, topk);
        check::<f16>(&w, &mut ws, &s, &c);
    }
}

#[test]
fn every_m_activation_and_dtype() {
    let Some(gpu) = gpu("every_m_activation_and_dtype") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(99);
    let (e, h, i, topk) = (16, 512, 320, 4);
    let layer = random_layer(&mut rng, e, h, i);
    for act in [Activation::Silu, Activation::ClampedSilu { limit: 0.3 }, Activation::GPT_OSS] {
        let w = MoeWeights::new(&gpu, &s, &layer, act).unwrap();
        let mut ws = Workspace::new(&w, &s, 64, topk).unwrap();
        for m in [1, 3, 8, 33, 64] {
            let mut c = case(&mut rng, &layer, &format!("{act:?}"), m, topk);
            // Some pairs have no expert (another rank's, under EP).
            for p in (0..c.ids.len()).step_by(5) {
                c.ids[p] = -1;
            }
            check::<bf16>(&w, &mut ws, &s, &c);
            check::<f16>(&w, &mut ws, &s, &c);
        }
    }
}

#[test]
fn skewed_and_degenerate_routing() {
    let Some(gpu) = gpu("skewed_and_degenerate_routing") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(7);
    let (e, h, i) = (32, 256, 192);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let topk = 8;
    let mut ws = Workspace::new(&w, &s, 256, topk).unwrap();
    // The three routings: in the FC kernels' shared memory (the default up
    // to FC_ROUTE_MAX_PAIRS pairs; one column tile forced, so that one
    // expert's pairs fill several groups), one block, and many (forced; M =
    // 256 spreads expert 5's pairs over two blocks).
    let d = moe4::Tuning::defaults(&gpu);
    let routings = [
        (", routed in the FC kernels", moe4::Tuning { nt: Some(1), ..d }),
        (", one-block routing", moe4::Tuning { fc_route_pairs: Some(0), route_blocks_from: Some(usize::MAX), ..d }),
        (", many-block routing", moe4::Tuning { fc_route_pairs: Some(0), route_blocks_from: Some(0), ..d }),
    ];
    for (many, tuning) in routings {
        *ws.tuning_mut() = tuning;
        // Every token on one expert (k slots all the same expert: 8 * M
        // pairs on expert 5, more than one column-tile group).
        for m in [1, 7, 64, 256] {
            let mut c = case(&mut rng, &layer, &format!("all pairs on expert 5{many}"), m, topk);
            c.ids.iter_mut().for_each(|id| *id = 5);
            check::<bf16>(&w, &mut ws, &s, &c);
            // The router places an expert's pairs in whatever order its
            // atomics land; the output must not depend on it, bit for bit.
            let first = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            for rep in 0..3 {
                let again = run_gpu::<bf16>(&w, &mut ws, &s, &c);
                let diff = first.iter().zip(&again).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                assert_eq!(diff, 0, "M={m}{many} rerun {rep}: {diff} outputs differ");
            }
        }
        // All ids -1: the output is exactly zero (and written). (M = 2:
        // 16 pairs, which the routing kernel routes in one warp; M = 3: 24,
        // in the whole block.)
        for m in [2, 3] {
            let mut c = case(&mut rng, &layer, &format!("all ids -1{many}"), m, topk);
            c.ids.iter_mut().for_each(|id| *id = -1);
            let got = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            assert!(got.iter().all(|&v| v == 0.0), "M={m}{many}");
        }
        // Out-of-range ids: skipped like -1, counted, no fault (M = 2: 16
        // pairs, one warp of the routing kernel; M = 7: 56 pairs, routed in
        // the FC kernels by default; M = 33: 264).
        for m in [2, 7, 33] {
            ws.reset_invalid_id_count(&s).unwrap();
            let mut c = case(&mut rng, &layer, &format!("out-of-range ids{many}"), m, topk);
            let bad = [(0usize, 32i32), (3, 1000), (9, -2), (40, i32::MIN), (55, i32::MAX), (100, 65536)];
            let bad: Vec<_> = bad.iter().filter(|(p, _)| *p < m * topk).collect();
            c.ids[1] = -1;
            for &&(p, v) in &bad {
                c.ids[p] = v;
            }
            check::<bf16>(&w, &mut ws, &s, &c);
            assert_eq!(ws.invalid_id_count(&s).unwrap(), bad.len() as u64, "M={m}{many}");
        }
    }
    // Too many tokens is an error, not a fault.
    let c = case(&mut rng, &layer, "over capacity", 257, topk);
    let e = forward_err(&w, &mut ws, &s, &c);
    assert!(e.to_string().contains("257") && e.to_string().contains("256"), "{e}");
}

/// Captures one forward of `c` (bf16, the workspace's tuning) in a CUDA
/// graph and checks that three replays equal `eager` bit for bit (`None`:
/// an eager call with the same tuning first); returns the eager output.
fn graph_equals_eager(
    w: &MoeWeights,
    ws: &mut Workspace,
    s: &Arc<CudaStream>,
    c: &Case,
    eager: Option<&[bf16]>,
    label: &str,
) -> Vec<bf16> {
    let n = c.m * w.hidden();
    let x = s.clone_htod(&c.x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()).unwrap();
    let (ids, tw) = (s.clone_htod(&c.ids).unwrap(), s.clone_htod(&c.tw).unwrap());
    let eager = match eager {
        Some(e) => e.to_vec(),
        None => {
            let mut out = s.alloc_zeros::<bf16>(n).unwrap();
            w.forward(ws, s, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut()).unwrap();
            s.clone_dtoh(&out).unwrap()
        }
    };
    let mut out = s.clone_htod(&vec![bf16::NAN; n]).unwrap();
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
    w.forward(ws, s, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut()).unwrap();
    let graph = s.end_capture(CUgraphInstantiate_flags(0)).unwrap().unwrap();
    for rep in 0..3 {
        graph.launch().unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        let diff = got.iter().zip(&eager).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(diff, 0, "{label}, replay {rep}: {diff} outputs differ from eager");
    }
    eager
}

#[test]
fn graph_replay_equals_eager_bit_for_bit() {
    let Some(gpu) = gpu("graph_replay_equals_eager_bit_for_bit") else { return };
    let ctx = gpu.context().clone();
    let s = ctx.new_stream().unwrap();
    // SAFETY: this test uses one stream for everything it captures.
    unsafe { ctx.disable_event_tracking() };
    let mut rng = Rng(31337);
    let layer = random_layer(&mut rng, 64, 1024, 512);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 48, 6).unwrap();
    // 48 tokens: the graph of the default (one-block) routing, then of the
    // many-block one, both against the same eager call.
    let c = case(&mut rng, &layer, "graph", 48, 6);
    ws.tuning_mut().route_blocks_from = Some(usize::MAX);
    let eager = graph_equals_eager(&w, &mut ws, &s, &c, None, "one-block routing");
    ws.tuning_mut().route_blocks_from = Some(0);
    graph_equals_eager(&w, &mut ws, &s, &c, Some(&eager), "many-block routing");
    // 8 tokens (48 pairs): routed in the FC kernels' shared memory.
    *ws.tuning_mut() = moe4::Tuning::defaults(&gpu);
    let c = case(&mut rng, &layer, "graph", 8, 6);
    graph_equals_eager(&w, &mut ws, &s, &c, None, "M=8 routed in the FC kernels");
    unsafe { ctx.enable_event_tracking() };
}

#[test]
fn sm89_build_on_this_gpu() {
    let Some(gpu) = gpu("sm89_build_on_this_gpu") else { return };
    if gpu.arch() == Arch::Sm89 {
        return;
    }
    let g89 = Gpu::with_arch(gpu.context().clone(), Arch::Sm89).unwrap();
    let s = g89.context().default_stream();
    let mut rng = Rng(8989);
    let layer = random_layer(&mut rng, 16, 2880, 256);
    let w = MoeWeights::new(&g89, &s, &layer, Activation::GPT_OSS).unwrap();
    let mut ws = Workspace::new(&w, &s, 33, 4).unwrap();
    let c = case(&mut rng, &layer, "sm_89 PTX", 33, 4);
    check::<bf16>(&w, &mut ws, &s, &c);
    check::<f16>(&w, &mut ws, &s, &c);
}

/// A small case for compute-sanitizer (memcheck, racecheck):
/// `compute-sanitizer --tool racecheck <decode test binary> sanitizer_case`.
#[test]
fn sanitizer_case() {
    let Some(gpu) = gpu("sanitizer_case") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(5);
    let layer = random_layer(&mut rng, 8, 256, 128);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 9, 4).unwrap();
    let mut c = case(&mut rng, &layer, "sanitizer", 9, 4);
    c.ids[3] = -1;
    c.ids[5] = 77;
    // 36 pairs: routed in the FC kernels' shared memory by default.
    check::<bf16>(&w, &mut ws, &s, &c);
    // 20 pairs: the same, by the blocks' first warps (up to 32 pairs).
    let mut c20 = case(&mut rng, &layer, "sanitizer, FC routing in one warp", 5, 4);
    c20.ids[2] = -1;
    c20.ids[7] = 77;
    check::<bf16>(&w, &mut ws, &s, &c20);
    ws.tuning_mut().fc_route_pairs = Some(0);
    c.name = "sanitizer, one-block routing".into();
    check::<bf16>(&w, &mut ws, &s, &c);
    ws.tuning_mut().route_blocks_from = Some(0);
    c.name = "sanitizer, many-block routing".into();
    check::<bf16>(&w, &mut ws, &s, &c);
    // Up to 16 pairs the routing kernel routes in one warp.
    ws.tuning_mut().route_blocks_from = None;
    let mut c3 = case(&mut rng, &layer, "sanitizer, one-warp routing", 3, 4);
    c3.ids[1] = -1;
    c3.ids[6] = 77;
    check::<bf16>(&w, &mut ws, &s, &c3);
    // The 64-row-task kernels (two and four column tiles).
    for nt in [2, 4] {
        *ws.tuning_mut() = moe4::Tuning { nt: Some(nt), task_rows: Some(64), ..moe4::Tuning::defaults(&gpu) };
        c.name = format!("sanitizer, NT={nt}, 64-row tasks");
        check::<bf16>(&w, &mut ws, &s, &c);
    }
    // FC2 in slices, where the build has its kernels (moe4_exp = "fc2sl"):
    // two slices (FC2 has two chunks here), both routings.
    if gpu.has_kernel("moe_fc2_bf16_nt1_sl") {
        let d = moe4::Tuning::defaults(&gpu);
        let mut c = case(&mut rng, &layer, "sanitizer, FC2 slices", 3, 4);
        c.ids[2] = -1;
        for fc_route_pairs in [None, Some(0)] {
            *ws.tuning_mut() = moe4::Tuning { fc2_slices: Some(3), fc_route_pairs, ..d };
            check::<bf16>(&w, &mut ws, &s, &c);
        }
    }
    // FC2 waiting per column group, where the build has the `_dp` kernels
    // (moe4_exp = "deps"): the whole grid and one block, after the routing
    // kernel and routed in the FC kernels (`_rt_dp`).
    if gpu.has_kernel("moe_fc2_bf16_nt1_dp") {
        let d = moe4::Tuning::defaults(&gpu);
        let rt = Some(moe4_kernels::launch::FC_ROUTE_MAX_PAIRS);
        for (fc_route_pairs, fc_blocks) in [(Some(0), None), (Some(0), Some(1)), (rt, None), (rt, Some(1))] {
            *ws.tuning_mut() = moe4::Tuning { deps: Some(true), fc_route_pairs, nt: Some(1), fc_blocks, ..d };
            c.name = format!(
                "sanitizer, FC2 per-group waits, FC routing up to {fc_route_pairs:?} pairs, grid {fc_blocks:?}"
            );
            check::<bf16>(&w, &mut ws, &s, &c);
        }
    }
    // FC1 on 6-warp blocks, where the build has them (moe4_exp = "w6"):
    // after the routing kernel (the whole grid; one block: whole rounds,
    // then 3-way splits) and routed in the FC kernels.
    if gpu.has_kernel("moe_fc1_bf16_nt1_w6") {
        let d = moe4::Tuning::defaults(&gpu);
        for (fc_route_pairs, fc_blocks) in [(Some(0), None), (Some(0), Some(1)), (None, None)] {
            *ws.tuning_mut() = moe4::Tuning { w6: Some(true), fc_route_pairs, nt: Some(1), fc_blocks, ..d };
            c.name = format!("sanitizer, 6-warp FC1, FC routing up to {fc_route_pairs:?} pairs, grid {fc_blocks:?}");
            check::<bf16>(&w, &mut ws, &s, &c);
        }
    }
    // Whole rounds, then split ones (the ring reused across the two
    // phases, the reduction area in the second).
    two_phase_walk(&gpu, &s, &[(3, false, 1, 32), (1, true, 1, 32)]);
}

/// The decode FC kernels on small grids `(blocks, 8 warps, column tiles,
/// task rows)`, so that a small layer takes several rounds per warp: whole
/// tasks first, then the last ones split across warps (checked: both
/// phases run, in FC1 and FC2).
fn two_phase_walk(gpu: &Arc<Gpu>, s: &Arc<CudaStream>, grids: &[(u32, bool, usize, u32)]) {
    use moe4_kernels::launch::{fc_split, FC_WARPS, FC_WARPS_WIDE};
    let mut rng = Rng(77);
    // Five tokens on five experts, one each: five groups of one pair.
    let (e, h, i, m) = (8, 1088, 320, 5);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(gpu, s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, s, m, 1).unwrap();
    let c = Case {
        name: String::new(),
        m,
        topk: 1,
        ids: (0..m as i32).collect(),
        tw: (0..m).map(|t| 0.5 + t as f32 / 8.0).collect(),
        x: rng.vec(m * h, 1.0),
        layer: &layer,
    };
    for &(blocks, wide, nt, rows) in grids {
        let warps = if wide { FC_WARPS_WIDE } else { FC_WARPS };
        // (tasks, chunks) of FC1 (2I rows, K = H) and FC2 (H rows, K = I).
        for (tasks, nchunks) in [(5 * 2 * i as u32 / rows, h as u32 / 64), (5 * h as u32 / rows, i as u32 / 64)] {
            let split = fc_split(tasks, nchunks, warps, blocks);
            assert!(split.whole > 0 && split.ks > 1, "{blocks} blocks, {warps} warps: {tasks} tasks: {split:?}");
        }
        let d = moe4::Tuning::defaults(gpu);
        *ws.tuning_mut() =
            moe4::Tuning { fc_blocks: Some(blocks), wide: Some(wide), nt: Some(nt), task_rows: Some(rows), ..d };
        let name = format!("two-phase walk, {blocks} blocks of {warps} warps, NT={nt}, {rows}-row tasks");
        check::<bf16>(&w, &mut ws, s, &Case { name: name.clone(), ..c.clone() });
        check::<f16>(&w, &mut ws, s, &Case { name, ..c.clone() });
    }
}

#[test]
fn two_phase_walk_against_the_reference() {
    let Some(gpu) = gpu("two_phase_walk_against_the_reference") else { return };
    let s = gpu.context().default_stream();
    two_phase_walk(
        &gpu,
        &s,
        &[
            (3, false, 1, 32),
            (2, false, 1, 32),
            (5, true, 1, 32),
            (1, true, 1, 32),
            (3, false, 2, 64),
            (2, false, 4, 32),
        ],
    );
}

/// Every kernel variant the benchmark compares computes the same layer:
/// without programmatic launch, 4- and 8-warp kernels (K split up to 4 or
/// 8 ways), forced column-tile counts (several groups per expert, partly
/// empty tiles), 32- and 64-row tasks.
#[test]
fn tuning_variants_against_the_reference() {
    let Some(gpu) = gpu("tuning_variants_against_the_reference") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(4242);
    let (e, h, i, topk) = (8, 640, 384, 4);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 40, topk).unwrap();
    let d = moe4::Tuning::defaults(&gpu);
    let variants = [
        ("no PDL", moe4::Tuning { pdl: false, ..d }),
        ("FC2 waits for all of FC1", moe4::Tuning { deps: Some(false), ..d }),
        ("4 warps", moe4::Tuning { wide: Some(false), ..d }),
        ("8 warps", moe4::Tuning { wide: Some(true), ..d }),
        ("NT=1", moe4::Tuning { nt: Some(1), ..d }),
        ("NT=2", moe4::Tuning { nt: Some(2), ..d }),
        ("NT=4", moe4::Tuning { nt: Some(4), ..d }),
        ("NT=2 32-row tasks", moe4::Tuning { nt: Some(2), task_rows: Some(32), ..d }),
        ("NT=2 64-row tasks", moe4::Tuning { nt: Some(2), task_rows: Some(64), ..d }),
        ("NT=4 32-row tasks", moe4::Tuning { nt: Some(4), task_rows: Some(32), ..d }),
        ("NT=4 64-row tasks", moe4::Tuning { nt: Some(4), task_rows: Some(64), ..d }),
        ("many-block routing", moe4::Tuning { route_blocks_from: Some(0), ..d }),
        ("one-block routing", moe4::Tuning { fc_route_pairs: Some(0), ..d }),
        ("FC routing up to 8 pairs", moe4::Tuning { fc_route_pairs: Some(8), ..d }),
        // Small grids: many rounds per warp, whole tasks then split ones.
        ("1 block", moe4::Tuning { fc_blocks: Some(1), ..d }),
        ("3 blocks", moe4::Tuning { fc_blocks: Some(3), ..d }),
        ("5 blocks 8 warps", moe4::Tuning { fc_blocks: Some(5), wide: Some(true), ..d }),
        ("7 blocks NT=2", moe4::Tuning { fc_blocks: Some(7), nt: Some(2), ..d }),
        ("2 blocks NT=4 64-row tasks", moe4::Tuning { fc_blocks: Some(2), nt: Some(4), task_rows: Some(64), ..d }),
    ];
    for (label, t) in variants {
        for m in [1, 5, 40] {
            *ws.tuning_mut() = t;
            let c = case(&mut rng, &layer, &format!("variant {label}"), m, topk);
            check::<bf16>(&w, &mut ws, &s, &c);
        }
    }
    // Column tiles other than 1, 2 and 4 (no kernels): an error naming
    // the value, before any launch.
    for nt in [0, 3, 8] {
        *ws.tuning_mut() = moe4::Tuning { nt: Some(nt), ..d };
        let c = case(&mut rng, &layer, &format!("NT={nt}"), 5, topk);
        let err = forward_err(&w, &mut ws, &s, &c).to_string();
        assert!(err.contains("column tiles") && err.contains(&nt.to_string()), "{err}");
    }
}

/// FC2 reading each column group's h once FC1 has finished that group
/// (the `_dp` kernels of builds with `moe4_exp = "deps"`, forced on;
/// skipped with a message on builds without them) gives the same output,
/// bit for bit, as FC2 waiting for the whole of FC1, on small grids (many
/// rounds, FC2's blocks resident while FC1's last ones run) and large, 4-
/// and 8-warp kernels, NT = 1 and 2, with and without PDL; and calls cut
/// short after FC1 or FC2 (the benchmark's stage timings) leave the
/// counters zero for the next call.
#[test]
fn fc2_per_group_waits_equal_the_whole_wait() {
    let Some(gpu) = gpu("fc2_per_group_waits_equal_the_whole_wait") else { return };
    if !gpu.has_kernel("moe_fc2_bf16_nt1_dp") {
        report("fc2_per_group_waits_equal_the_whole_wait: SKIPPED, this PTX build has no `_dp` FC kernels");
        return;
    }
    let s = gpu.context().default_stream();
    let mut rng = Rng(9090);
    let (e, h, i, topk) = (16, 512, 256, 4);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 64, topk).unwrap();
    // After the routing kernel, and routed in the FC kernels themselves
    // (the `_rt_dp` instances: one column tile, up to FC_ROUTE_MAX_PAIRS
    // pairs; larger M there take the routing kernel).
    let own = moe4::Tuning::defaults(&gpu);
    let d = moe4::Tuning { fc_route_pairs: Some(0), ..own };
    let rt = moe4::Tuning { fc_route_pairs: Some(moe4_kernels::launch::FC_ROUTE_MAX_PAIRS), nt: Some(1), ..own };
    let tunings = [
        ("default", d),
        ("routed in the FC kernels", rt),
        ("routed in the FC kernels, 1 block", moe4::Tuning { fc_blocks: Some(1), ..rt }),
        ("routed in the FC kernels, 3 blocks 8 warps", moe4::Tuning { fc_blocks: Some(3), wide: Some(true), ..rt }),
        ("routed in the FC kernels, 4 warps", moe4::Tuning { wide: Some(false), ..rt }),
        ("1 block", moe4::Tuning { fc_blocks: Some(1), ..d }),
        ("3 blocks 8 warps", moe4::Tuning { fc_blocks: Some(3), wide: Some(true), ..d }),
        ("4 warps", moe4::Tuning { wide: Some(false), ..d }),
        ("NT=2", moe4::Tuning { nt: Some(2), ..d }),
        ("no PDL", moe4::Tuning { pdl: false, ..d }),
    ];
    for (label, t) in tunings {
        for m in [1, 7, 33, 64] {
            let c = case(&mut rng, &layer, &format!("per-group waits, {label}"), m, topk);
            *ws.tuning_mut() = moe4::Tuning { deps: Some(false), ..t };
            let whole = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            *ws.tuning_mut() = moe4::Tuning { deps: Some(true), ..t };
            check::<bf16>(&w, &mut ws, &s, &c);
            let per_group = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            let diff = whole.iter().zip(&per_group).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(diff, 0, "{}: {diff} outputs differ between the whole wait and per-group waits", c.name);
        }
    }
    // Calls that stop after FC1 and after FC2, then whole ones.
    for m in [5, 40] {
        let c = case(&mut rng, &layer, "after calls cut short", m, topk);
        let x = s.clone_htod(&c.x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>()).unwrap();
        let (ids, tw) = (s.clone_htod(&c.ids).unwrap(), s.clone_htod(&c.tw).unwrap());
        let mut out = s.alloc_zeros::<bf16>(m * h).unwrap();
        for launches in [2, 3] {
            *ws.tuning_mut() = moe4::Tuning { launches, deps: Some(true), ..d };
            w.forward(&mut ws, &s, &x.as_view(), &ids.as_view(), &tw.as_view(), &mut out.as_view_mut()).unwrap();
        }
        *ws.tuning_mut() = moe4::Tuning { deps: Some(true), ..d };
        check::<bf16>(&w, &mut ws, &s, &c);
    }
}

/// FC1 on 6-warp blocks (builds with the `_w6` kernels, `moe4_exp =
/// "w6"`; skipped with a message on builds without them): grids whose
/// walk splits a task 3 and 6 ways (and runs whole rounds first), after
/// the routing kernel and routed in the FC kernels, both 16-bit types.
#[test]
fn six_warp_fc1_against_the_reference() {
    use moe4_kernels::launch::{fc_split_div, FC_WARPS_SIX};
    let Some(gpu) = gpu("six_warp_fc1_against_the_reference") else { return };
    if !gpu.has_kernel("moe_fc1_bf16_nt1_w6") {
        report("six_warp_fc1_against_the_reference: SKIPPED, this PTX build has no 6-warp FC1 kernels");
        return;
    }
    let s = gpu.context().default_stream();
    let mut rng = Rng(66);
    // Five tokens on five experts: 100 FC1 tasks of 17 chunks.
    let (e, h, i, m) = (8, 1088, 320, 5);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, m, 1).unwrap();
    let c = Case {
        name: String::new(),
        m,
        topk: 1,
        ids: (0..m as i32).collect(),
        tw: (0..m).map(|t| 0.5 + t as f32 / 8.0).collect(),
        x: rng.vec(m * h, 1.0),
        layer: &layer,
    };
    let d = moe4::Tuning::defaults(&gpu);
    let mut seen = Vec::new();
    for blocks in [1, 5, 9, 100] {
        let split = fc_split_div(5 * 2 * i as u32 / 32, h as u32 / 64, FC_WARPS_SIX, blocks);
        seen.push(split.ks);
        *ws.tuning_mut() =
            moe4::Tuning { w6: Some(true), fc_blocks: Some(blocks), fc_route_pairs: Some(0), nt: Some(1), ..d };
        let name = format!("6-warp FC1, {blocks} blocks: {split:?}");
        check::<bf16>(&w, &mut ws, &s, &Case { name: name.clone(), ..c.clone() });
        check::<f16>(&w, &mut ws, &s, &Case { name, ..c.clone() });
    }
    assert!(seen.contains(&3) && seen.contains(&6), "splits {seen:?}");
    // Routed in the FC kernels' shared memory (the `_rt` 6-warp kernels),
    // the whole grid and one block.
    for fc_blocks in [None, Some(1)] {
        *ws.tuning_mut() = moe4::Tuning { w6: Some(true), fc_blocks, nt: Some(1), ..d };
        let name = format!("6-warp FC1, FC routing, grid {fc_blocks:?}");
        check::<bf16>(&w, &mut ws, &s, &Case { name: name.clone(), ..c.clone() });
        check::<f16>(&w, &mut ws, &s, &Case { name, ..c.clone() });
    }
    // Two column tiles: no 6-warp kernel; forced, an error, not a fault.
    *ws.tuning_mut() = moe4::Tuning { w6: Some(true), nt: Some(2), ..d };
    let err = forward_err(&w, &mut ws, &s, &c);
    assert!(err.to_string().contains("6-warp FC1"), "{err}");
}

/// FC2 in slices (builds with the `_sl` kernels, `moe4_exp = "fc2sl"`;
/// skipped with a message on builds without them): forced slice counts
/// (2, 3, 7, all 16 chunks, more than the chunks), with the FC kernels'
/// own routing and the routing kernel, on small grids too (several tasks
/// per warp), both 16-bit types, -1 ids; and a call whose y cannot hold
/// the slices is an error, not a fault.
#[test]
fn sliced_fc2_against_the_reference() {
    let Some(gpu) = gpu("sliced_fc2_against_the_reference") else { return };
    if !gpu.has_kernel("moe_fc2_bf16_nt1_sl") {
        report("sliced_fc2_against_the_reference: SKIPPED, this PTX build has no sliced FC2 kernels");
        return;
    }
    let s = gpu.context().default_stream();
    let mut rng = Rng(5151);
    let (e, h, i, topk) = (8, 640, 1024, 4);
    let layer = random_layer(&mut rng, e, h, i);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 40, topk).unwrap();
    let d = moe4::Tuning::defaults(&gpu);
    for n in [2, 3, 7, 16, 40] {
        for (routing, fc_route_pairs) in [("FC routing", None), ("routing kernel", Some(0))] {
            for fc_blocks in [None, Some(1), Some(3)] {
                let t = moe4::Tuning { fc2_slices: Some(n), fc_route_pairs, fc_blocks, ..d };
                *ws.tuning_mut() = t;
                for m in [1, 5] {
                    let mut c = case(&mut rng, &layer, &format!("{n} slices, {routing}, grid {fc_blocks:?}"), m, topk);
                    c.ids[1] = -1;
                    check::<bf16>(&w, &mut ws, &s, &c);
                    check::<f16>(&w, &mut ws, &s, &c);
                }
            }
        }
    }
    // 40 tokens fill y: no room for a second slice per pair.
    *ws.tuning_mut() = moe4::Tuning { fc2_slices: Some(2), ..d };
    let c = case(&mut rng, &layer, "no room", 40, topk);
    let err = forward_err(&w, &mut ws, &s, &c);
    assert!(err.to_string().contains("FC2 slices"), "{err}");
}

/// The small-batch path (routing in the FC kernels' shared memory, no
/// routing launch) gives the same output bit for bit as the routing
/// kernel: each pair's y comes from its own column whatever its slot, and
/// the combine sums y over k in k order. With -1 and out-of-range ids, a
/// token without a valid id, an expert repeated within a token, both
/// 16-bit types, and 4- and 8-warp kernels.
#[test]
fn fc_routing_equals_the_routing_kernel_bit_for_bit() {
    let Some(gpu) = gpu("fc_routing_equals_the_routing_kernel_bit_for_bit") else { return };
    let s = gpu.context().default_stream();
    let mut rng = Rng(99);
    let (e, topk) = (64, 6);
    let layer = random_layer(&mut rng, e, 1024, 512);
    let w = MoeWeights::new(&gpu, &s, &layer, Activation::Silu).unwrap();
    let mut ws = Workspace::new(&w, &s, 10, topk).unwrap();
    let d = moe4::Tuning::defaults(&gpu);
    for m in [1, 3, 10] {
        let mut c = case(&mut rng, &layer, "FC routing", m, topk);
        c.ids[0] = -1;
        if m > 1 {
            // Token 1: no valid id; the last token: one expert twice.
            c.ids[topk..2 * topk].copy_from_slice(&[-1, 64, -1, 1000, -1, -7]);
            let last = (m - 1) * topk;
            c.ids[last + 1] = c.ids[last + 2];
        }
        for wide in [false, true] {
            let fc = moe4::Tuning { wide: Some(wide), fc_route_pairs: Some(64), ..d };
            let kernels = moe4::Tuning { wide: Some(wide), fc_route_pairs: Some(0), ..d };
            *ws.tuning_mut() = fc;
            let a = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            let a16 = run_gpu::<f16>(&w, &mut ws, &s, &c);
            *ws.tuning_mut() = kernels;
            let b = run_gpu::<bf16>(&w, &mut ws, &s, &c);
            let b16 = run_gpu::<f16>(&w, &mut ws, &s, &c);
            let diff = a.iter().zip(&b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            let diff16 = a16.iter().zip(&b16).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!((diff, diff16), (0, 0), "M={m} wide={wide}: outputs differ (bf16, f16)");
            if m > 1 {
                assert!(a[1024..2048].iter().all(|&v| v == 0.0), "M={m}: token 1 has no valid id");
            }
        }
        check::<bf16>(&w, &mut ws, &s, &c);
    }
}
