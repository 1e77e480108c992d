//! Loading NVFP4 layers from safetensors checkpoints: write-then-load round
//! trips (ModelOpt and fused layouts, every w13 order, swizzled scales),
//! named errors for truncated / mis-typed / missing / mis-shaped tensors,
//! and a 2 GiB file that is mapped, not read.

mod common;
use common::*;
use moe4::checkpoint::{save_modelopt, save_tensors, Checkpoint, CheckpointLayout, SafetensorsDtype as D, TensorData};
use moe4::nvfp4::{BlockScales, Nvfp4Moe, W13Order};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("moe4-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn layer() -> Nvfp4Moe {
    let mut rng = Rng(21);
    let mut l = random_layer(&mut rng, 3, 64, 32);
    // Gate and up with different global scales: kept exactly.
    l.up.global_scale.iter_mut().for_each(|g| *g *= 1.37);
    l
}

fn linear(m: &Nvfp4Moe) -> Nvfp4Moe {
    Nvfp4Moe { gate: m.gate.to_linear(), up: m.up.to_linear(), down: m.down.to_linear() }
}

#[test]
fn modelopt_round_trip_is_bit_exact() {
    let l = layer();
    let p = tmp("modelopt.safetensors");
    save_modelopt(&p, "model.layers.7.mlp", &l).unwrap();
    let back = Checkpoint::open(&p).unwrap().load_moe("model.layers.7.mlp", CheckpointLayout::ModelOpt).unwrap();
    assert_eq!(back, linear(&l));
    assert_ne!(back.gate.global_scale, back.up.global_scale);
}

fn fused_tensors(l: &Nvfp4Moe, order: W13Order, swizzled: bool, two_globals: bool) -> Vec<(String, TensorData)> {
    // One global scale per fused tensor unless two_globals ([E, 2]).
    let mut l2 = l.clone();
    if !two_globals {
        l2.up.global_scale = l2.gate.global_scale.clone();
    }
    let w13 = Nvfp4Moe {
        up: moe4::nvfp4::Nvfp4Weight { global_scale: l2.gate.global_scale.clone(), ..l2.up.clone() },
        ..l2.clone()
    }
    .to_w13(order)
    .unwrap();
    let (e, i, h) = (l.experts(), l.intermediate(), l.hidden());
    let scales = |w: &moe4::nvfp4::Nvfp4Weight| -> Vec<u8> {
        match if swizzled { w.to_swizzled().scales } else { w.to_linear().scales } {
            BlockScales::Linear(v) | BlockScales::Swizzled(v) => v,
            BlockScales::PackedU32(_) => unreachable!(),
        }
    };
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let g13 = if two_globals {
        let (first, second) = match order {
            W13Order::UpGate => (&l2.up.global_scale, &l2.gate.global_scale),
            _ => (&l2.gate.global_scale, &l2.up.global_scale),
        };
        (f32s(&first.iter().zip(second).flat_map(|(a, b)| [*a, *b]).collect::<Vec<_>>()), vec![e, 2])
    } else {
        (f32s(&w13.global_scale), vec![e])
    };
    let sshape = |rows: usize, k: usize| {
        if swizzled {
            vec![e, moe4_kernels::scale_layout::swizzled_len(rows, k / 16)]
        } else {
            vec![e, rows, k / 16]
        }
    };
    vec![
        ("mlp.w13_weight".into(), TensorData { dtype: D::U8, shape: vec![e, 2 * i, h / 2], data: w13.codes.clone() }),
        ("mlp.w13_weight_scale".into(), TensorData { dtype: D::F8_E4M3, shape: sshape(2 * i, h), data: scales(&w13) }),
        ("mlp.w13_weight_scale_2".into(), TensorData { dtype: D::F32, shape: g13.1, data: g13.0 }),
        ("mlp.w2_weight".into(), TensorData { dtype: D::U8, shape: vec![e, h, i / 2], data: l.down.codes.clone() }),
        ("mlp.w2_weight_scale".into(), TensorData { dtype: D::F8_E4M3, shape: sshape(h, i), data: scales(&l.down) }),
        (
            "mlp.w2_weight_scale_2".into(),
            TensorData { dtype: D::F32, shape: vec![e], data: f32s(&l.down.global_scale) },
        ),
    ]
}

#[test]
fn fused_layouts_round_trip_in_every_order() {
    let l = layer();
    for order in [W13Order::GateUp, W13Order::UpGate, W13Order::Interleaved] {
        for swizzled in [false, true] {
            for two in [false, true] {
                let p = tmp(&format!("fused-{order:?}-{swizzled}-{two}.safetensors"));
                save_tensors(&p, fused_tensors(&l, order, swizzled, two)).unwrap();
                let layout =
                    if swizzled { CheckpointLayout::FusedSwizzled(order) } else { CheckpointLayout::Fused(order) };
                let back = Checkpoint::open(&p).unwrap().load_moe("mlp", layout).unwrap();
                let mut want = linear(&l);
                if !two {
                    want.up.global_scale = want.gate.global_scale.clone();
                }
                for (n, a, b) in
                    [("gate", &back.gate, &want.gate), ("up", &back.up, &want.up), ("down", &back.down, &want.down)]
                {
                    assert!(a.codes == b.codes, "{n} codes {order:?} swizzled={swizzled} [E,2]={two}");
                    assert!(a.scales == b.scales, "{n} scales {order:?} swizzled={swizzled} [E,2]={two}");
                    assert_eq!(a.global_scale, b.global_scale, "{n} global {order:?} swizzled={swizzled} [E,2]={two}");
                }
            }
        }
    }
}

fn expect_err(p: &std::path::Path, needle: &[&str]) {
    let e = match Checkpoint::open(p).and_then(|c| c.load_moe("m", CheckpointLayout::ModelOpt)) {
        Ok(_) => panic!("loaded a bad checkpoint"),
        Err(e) => e.to_string(),
    };
    for n in needle {
        assert!(e.contains(n), "error {e:?} lacks {n:?}");
    }
}

#[test]
fn bad_checkpoints_name_the_tensor() {
    let l = layer();
    let good = tmp("good.safetensors");
    save_modelopt(&good, "m", &l).unwrap();
    // Truncated file: the last tensor's bytes are cut off.
    let bytes = std::fs::read(&good).unwrap();
    let cut = tmp("truncated.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    expect_err(&cut, &["truncated"]);
    // Wrong dtype, missing expert, shape off by one: rebuild from tensors.
    let ck = Checkpoint::open(&good).unwrap();
    let all: Vec<(String, TensorData)> = ck
        .names()
        .unwrap()
        .into_iter()
        .map(|n| {
            let t = ck.tensor(&n).unwrap();
            let d = TensorData { dtype: t.dtype(), shape: t.shape().to_vec(), data: t.data().to_vec() };
            (n, d)
        })
        .collect();
    let variant = |name: &str, f: &dyn Fn(&str, TensorData) -> Option<TensorData>| {
        let p = tmp(name);
        let ts: Vec<(String, TensorData)> = all
            .iter()
            .filter_map(|(n, t)| {
                f(n, TensorData { dtype: t.dtype, shape: t.shape.clone(), data: t.data.clone() })
                    .map(|t| (n.clone(), t))
            })
            .collect();
        save_tensors(&p, ts).unwrap();
        p
    };
    let p = variant("dtype.safetensors", &|n, mut t| {
        if n == "m.experts.1.up_proj.weight_scale" {
            t.dtype = D::BF16;
            t.shape[1] /= 2;
        }
        Some(t)
    });
    expect_err(&p, &["m.experts.1.up_proj.weight_scale", "BF16", "F8_E4M3"]);
    let p = variant("missing.safetensors", &|n, t| (!n.starts_with("m.experts.1.")).then_some(t));
    expect_err(&p, &["m.experts.1.gate_proj.weight", "missing"]);
    let p = variant("missing-scale.safetensors", &|n, t| (n != "m.experts.2.down_proj.weight_scale_2").then_some(t));
    expect_err(&p, &["m.experts.2.down_proj.weight_scale_2", "missing"]);
    let p = variant("shape.safetensors", &|n, mut t| {
        if n == "m.experts.2.gate_proj.weight" {
            t.shape[0] -= 1;
            t.data.truncate(t.shape.iter().product());
        }
        Some(t)
    });
    expect_err(&p, &["m.experts.2.gate_proj.weight", "[31, 32]", "[32, 32]"]);
}

fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_two_gib_file_is_mapped_not_read() {
    let l = layer();
    let small = tmp("small.safetensors");
    save_modelopt(&small, "m", &l).unwrap();
    let ck = Checkpoint::open(&small).unwrap();
    let mut ts: Vec<(String, TensorData)> = ck
        .names()
        .unwrap()
        .into_iter()
        .map(|n| {
            let t = ck.tensor(&n).unwrap();
            (n.clone(), TensorData { dtype: t.dtype(), shape: t.shape().to_vec(), data: t.data().to_vec() })
        })
        .collect();
    // A 2 GiB tensor of another layer, written as a sparse hole: the header
    // says it is there; its bytes are never touched by loading layer "m".
    let big = 2usize << 30;
    ts.push(("other.layer.weight".into(), TensorData { dtype: D::U8, shape: vec![big], data: Vec::new() }));
    let p = tmp("big.safetensors");
    // Write the header by hand: safetensors' serializer would need the bytes.
    write_sparse(&p, &ts, big);
    let before = rss_kib();
    let ck = Checkpoint::open(&p).unwrap();
    let back = ck.load_moe("m", CheckpointLayout::ModelOpt).unwrap();
    assert_eq!(back, linear(&l));
    assert!(std::fs::metadata(&p).unwrap().len() > big as u64);
    if let (Some(a), Some(b)) = (before, rss_kib()) {
        report(&format!("2 GiB checkpoint: resident memory grew by {} KiB while loading", b.saturating_sub(a)));
        assert!(b.saturating_sub(a) < 64 * 1024, "loading read {} KiB", b - a);
    }
}

/// A safetensors file whose tensors with empty `data` are holes (zeros).
fn write_sparse(p: &std::path::Path, ts: &[(String, TensorData)], big: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let mut header = String::from("{");
    let mut off = 0usize;
    let mut order: Vec<&(String, TensorData)> = ts.iter().collect();
    order.sort_by_key(|(n, _)| n.clone());
    for (i, (n, t)) in order.iter().enumerate() {
        let len = if t.data.is_empty() { big } else { t.data.len() };
        let dt = format!("{:?}", t.dtype);
        header += &format!(
            "{}\"{n}\":{{\"dtype\":\"{dt}\",\"shape\":{:?},\"data_offsets\":[{off},{}]}}",
            if i > 0 { "," } else { "" },
            t.shape,
            off + len
        );
        off += len;
    }
    header += "}";
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::fs::File::create(p).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    for (_, t) in order {
        if t.data.is_empty() {
            f.seek(SeekFrom::Current(big as i64)).unwrap();
        } else {
            f.write_all(&t.data).unwrap();
        }
    }
    f.set_len(8 + header.len() as u64 + off as u64).unwrap();
}
