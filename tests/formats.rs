//! CPU tests of the formats, converters and references (no GPU needed).

mod common;
use common::*;
use moe4::nvfp4::{BlockScales, Nvfp4Moe, W13Order};
use moe4::quant::{quantize_int4_rows, quantize_nvfp4};
use moe4::reference::{moe_layer, w4a4_grouped_gemm, Activation};
use moe4_kernels::int4;

#[test]
fn scale_layouts_convert_both_ways_for_awkward_shapes() {
    let mut rng = Rng(11);
    // rows not a multiple of 128, scale columns not a multiple of 4 (K = 2880 -> 180).
    for &(e, rows, k) in &[(2, 7, 16), (1, 129, 80), (3, 300, 2880)] {
        let w = quantize_nvfp4(&rng.vec(e * rows * k, 1.0), e, rows, k).unwrap();
        let packed = w.to_packed_u32();
        let swz = w.to_swizzled();
        assert!(matches!(packed.scales, BlockScales::PackedU32(_)));
        for v in [&packed, &swz] {
            v.validate("w").unwrap();
            for ex in 0..e {
                for r in 0..rows {
                    for c in 0..k / 16 {
                        assert_eq!(v.scale(ex, r, c), w.scale(ex, r, c));
                    }
                }
            }
        }
        assert_eq!(packed.to_linear(), w);
        assert_eq!(swz.to_linear(), w);
        assert_eq!(swz.to_packed_u32(), packed);
        // Swizzle padding is zero.
        if let BlockScales::Swizzled(s) = &swz.scales {
            let nonzero = s.iter().filter(|&&b| b != 0).count();
            let real = w.to_linear();
            let BlockScales::Linear(l) = &real.scales else { unreachable!() };
            assert_eq!(nonzero, l.iter().filter(|&&b| b != 0).count());
        }
    }
}

#[test]
fn w13_orders_round_trip() {
    let mut rng = Rng(5);
    let (e, h, i) = (3, 64, 32);
    let moe = random_layer(&mut rng, e, h, i);
    // Same global scale for gate and up, as one fused tensor has.
    let moe =
        Nvfp4Moe { up: moe4::nvfp4::Nvfp4Weight { global_scale: moe.gate.global_scale.clone(), ..moe.up }, ..moe };
    for order in [W13Order::GateUp, W13Order::UpGate, W13Order::Interleaved] {
        let w13 = moe.to_w13(order).unwrap();
        let back = Nvfp4Moe::from_w13(&w13.to_swizzled(), order, moe.down.clone()).unwrap();
        assert_eq!(back.gate, moe.gate.to_linear(), "{order:?}");
        assert_eq!(back.up, moe.up.to_linear(), "{order:?}");
        // Row r of FlashInfer's w13 is up row r.
        if order == W13Order::UpGate {
            assert_eq!(w13.code(1, 0, 5), moe.up.code(1, 0, 5));
            assert_eq!(w13.code(1, i, 5), moe.gate.code(1, 0, 5));
        }
        if order == W13Order::Interleaved {
            assert_eq!(w13.code(2, 7, 9), moe.up.code(2, 3, 9));
        }
    }
}

#[test]
fn bad_tensors_give_named_errors() {
    let mut rng = Rng(3);
    let mut w = quantize_nvfp4(&rng.vec(2 * 4 * 32, 1.0), 2, 4, 32).unwrap();
    w.codes.pop();
    let e = w.validate("gate").unwrap_err().to_string();
    assert!(e.contains("gate.codes") && e.contains("expected 128"), "{e}");
    let mut w = quantize_nvfp4(&rng.vec(2 * 4 * 32, 1.0), 2, 4, 32).unwrap();
    if let BlockScales::Linear(s) = &mut w.scales {
        s[3] = 0x7F; // NaN
    }
    let e = w.check_scales("down").unwrap_err().to_string();
    assert!(e.contains("down.scales") && e.contains("expert 0 row 1 block 1"), "{e}");
    if let BlockScales::Linear(s) = &mut w.scales {
        s[3] = 0xB8; // -1.0
    }
    assert!(w.check_scales("down").unwrap_err().to_string().contains("non-negative"));
}

/// The plainest possible f64 MoE: dequantize everything, loop.
#[allow(clippy::needless_range_loop)]
fn naive_layer(w: &Nvfp4Moe, act: Activation, x: &[f32], ids: &[i32], tw: &[f32], m: usize, topk: usize) -> Vec<f64> {
    let (e_n, h, i) = (w.experts(), w.hidden(), w.intermediate());
    let mut out = vec![0f64; m * h];
    for t in 0..m {
        for j in 0..topk {
            let e = ids[t * topk + j];
            if e < 0 || e as usize >= e_n {
                continue;
            }
            let e = e as usize;
            let mut hv = vec![0f64; i];
            for c in 0..i {
                let mut g = 0f64;
                let mut u = 0f64;
                for k in 0..h {
                    g += w.gate.value(e, c, k) * x[t * h + k] as f64;
                    u += w.up.value(e, c, k) * x[t * h + k] as f64;
                }
                hv[c] = act.apply(g, u);
            }
            for r in 0..h {
                let mut y = 0f64;
                for c in 0..i {
                    y += w.down.value(e, r, c) * hv[c];
                }
                out[t * h + r] += y * tw[t * topk + j] as f64;
            }
        }
    }
    out
}

#[test]
fn reference_layer_matches_a_plain_f64_loop() {
    let mut rng = Rng(77);
    // K = 2880 (GPT-OSS's hidden size, not a multiple of 128).
    for &(e, h, i, topk, ms) in &[(6, 2880, 64, 2, &[1usize, 7][..]), (5, 128, 96, 3, &[1, 7, 33][..])] {
        let w = random_layer(&mut rng, e, h, i);
        for &m in ms {
            for act in [Activation::Silu, Activation::ClampedSilu { limit: 0.05 }, Activation::GPT_OSS] {
                let x = rng.vec(m * h, 1.0);
                let (mut ids, tw) = routing(&mut rng, m, e, topk);
                ids[0] = -1; // skipped
                if ids.len() > 2 {
                    ids[2] = e as i32 + 3; // out of range: skipped
                }
                let fast = moe_layer(&w, act, &x, &ids, &tw, m, topk).unwrap();
                let slow = naive_layer(&w, act, &x, &ids, &tw, m, topk);
                let err = rel_l2(&fast, &slow);
                assert!(err < 1e-9, "E={e} H={h} I={i} M={m} {act:?}: {err}");
            }
        }
    }
}

#[test]
fn w4a4_reference_is_exact_on_hand_worked_values() {
    // One expert, one row, K = 4: a = [1, -2, 7, -8], b = [3, 3, -1, 1]:
    // 3 - 6 - 7 - 8 = -18.
    let a = vec![int4::pack_pair(1, -2), int4::pack_pair(7, -8)];
    let b = vec![int4::pack_pair(3, 3), int4::pack_pair(-1, 1)];
    let (acc, out) = w4a4_grouped_gemm(&a, &b, &[0.5], &[2.0], &[0, 1], Some(&[0.25]), 1, 1, 4).unwrap();
    assert_eq!(acc, vec![-18]);
    assert_eq!(out, vec![-18.0 * 0.5 * 2.0 * 0.25]);
    // Quantized rows round trip within half a step.
    let mut rng = Rng(9);
    let x = rng.vec(3 * 64, 1.0);
    let q = quantize_int4_rows(&x, 3, 64).unwrap();
    assert_eq!(q.q.len(), 96);
}
