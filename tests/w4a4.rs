//! The W4A4 grouped GEMM and activation quantizer on the GPU against the
//! CPU: exact integer sums, scaled outputs, bit-exact quantization, ragged
//! experts (0, 1, 7, 300 rows; 0..36 rows: every tile height 16..128), one
//! row, K = 2880, N not a multiple of the
//! tile, malformed offsets; the sm_89 build (native s4 mma) too, and on
//! sm_90a both the `wgmma` and the `mma.sync` kernels.

mod common;
use common::*;
use half::{bf16, f16};
use moe4::quant::{quantize_int4_rows, quantize_int4_weights};
use moe4::reference::w4a4_grouped_gemm;
use moe4::{Arch, GemmArgs, Gpu, Half, W4A4};
use std::sync::Arc;

struct Problem {
    rows: usize,
    n: usize,
    k: usize,
    a: Vec<u8>,
    b: Vec<u8>,
    s_a: Vec<f32>,
    s_w: Vec<f32>,
    offsets: Vec<i64>,
    row_scale: Option<Vec<f32>>,
}

fn problem(rng: &mut Rng, counts: &[usize], n: usize, k: usize, with_row_scale: bool) -> Problem {
    let rows: usize = counts.iter().sum();
    let e = counts.len();
    let x = rng.vec(rows * k, 1.0);
    let qa = quantize_int4_rows(&x, rows, k).unwrap();
    let w = rng.vec(e * n * k, 0.05);
    let qb = quantize_int4_weights(&w, e, n, k).unwrap();
    let mut offsets = vec![0i64];
    for c in counts {
        offsets.push(offsets.last().unwrap() + *c as i64);
    }
    Problem {
        rows,
        n,
        k,
        a: qa.q,
        b: qb.q,
        s_a: qa.scale,
        s_w: qb.scale,
        offsets,
        row_scale: with_row_scale.then(|| (0..rows).map(|_| rng.uniform()).collect()),
    }
}

/// Runs `p` on every GEMM kernel family the build has for its tiles: on
/// sm_90a the `wgmma` kernels (128-row tiles) and the `mma.sync` ones.
fn run<T: Half>(gpu: &Arc<Gpu>, p: &Problem, label: &str) {
    run_on::<T>(gpu, p, label, true, 0);
    if gpu.arch().has_wgmma() {
        run_on::<T>(gpu, p, &format!("{label}, mma.sync"), false, 0);
    }
}

/// One kernel family (`wgmma` where the build has it, else `mma.sync`),
/// the 16-bit output written `out_offset` elements into its buffer.
fn run_on<T: Half>(gpu: &Arc<Gpu>, p: &Problem, label: &str, wgmma: bool, out_offset: usize) {
    let s = gpu.context().default_stream();
    let mut api = W4A4::new(gpu, &s).unwrap();
    api.set_wgmma(wgmma);
    let (a, b) = (s.clone_htod(&p.a).unwrap(), s.clone_htod(&p.b).unwrap());
    let (sa, sw) = (s.clone_htod(&p.s_a).unwrap(), s.clone_htod(&p.s_w).unwrap());
    let off = s.clone_htod(&p.offsets).unwrap();
    let rs = p.row_scale.as_ref().map(|r| s.clone_htod(r).unwrap());
    let (av, bv, sav, swv, ov) = (a.as_view(), b.as_view(), sa.as_view(), sw.as_view(), off.as_view());
    let rsv = rs.as_ref().map(|r| r.as_view());
    let args = GemmArgs { a: &av, b: &bv, s_a: &sav, s_w: &swv, offsets: &ov, row_scale: rsv.as_ref(), n: p.n, k: p.k };
    let (want_acc, want) =
        w4a4_grouped_gemm(&p.a, &p.b, &p.s_a, &p.s_w, &p.offsets, p.row_scale.as_deref(), p.rows, p.n, p.k).unwrap();

    // Exact integer accumulation (poisoned first).
    let mut acc = s.clone_htod(&vec![i32::MIN; p.rows * p.n]).unwrap();
    api.gemm_i32(&s, &args, &mut acc.as_view_mut()).unwrap();
    let got_acc = s.clone_dtoh(&acc).unwrap();
    let wrong = got_acc.iter().zip(&want_acc).filter(|(a, b)| a != b).count();
    assert_eq!(wrong, 0, "{label}: {wrong} of {} integer sums differ", got_acc.len());

    // Scaled 16-bit output.
    let poison = T::from_bits(if T::IS_BF16 { 0x7FC0 } else { 0x7E00 });
    let mut out = s.clone_htod(&vec![poison; out_offset + p.rows * p.n]).unwrap();
    api.gemm(&s, &args, &mut out.slice_mut(out_offset..)).unwrap();
    let got: Vec<f64> = s.clone_dtoh(&out).unwrap()[out_offset..].iter().map(|v| v.to_f32() as f64).collect();
    assert!(got.iter().all(|v| v.is_finite()), "{label}: unwritten outputs");
    let err = rel_l2(&got, &want);
    report(&format!("w4a4 {label} [{}]: rel L2 error {err:.2e}, integer sums exact", T::NAME));
    assert!(err < 1e-2, "{label}: {err}");
    assert_eq!(api.offset_error_count(&s).unwrap(), 0);
}

#[test]
fn ragged_experts_exact_and_scaled() {
    let Some(gpu) = gpu("ragged_experts_exact_and_scaled") else { return };
    let mut rng = Rng(4);
    let p = problem(&mut rng, &[0, 1, 7, 300], 256, 512, true);
    run::<bf16>(&gpu, &p, "ragged 0/1/7/300, N=256 K=512");
    run::<f16>(&gpu, &p, "ragged 0/1/7/300, N=256 K=512");
    let p = problem(&mut rng, &[1], 64, 128, false);
    run::<bf16>(&gpu, &p, "M=1");
    // K not a multiple of 128, N not a multiple of the 128-column tile.
    let p = problem(&mut rng, &[5, 0, 130, 33], 200, 2880, false);
    run::<bf16>(&gpu, &p, "K=2880 N=200");
    // Many experts, many empty; big segments use the 128-row tiles.
    let mut counts = vec![0usize; 64];
    for (i, c) in counts.iter_mut().enumerate() {
        *c = if i % 3 == 0 { 0 } else { 40 + (i * 37) % 300 };
    }
    let p = problem(&mut rng, &counts, 384, 1024, true);
    run::<bf16>(&gpu, &p, "64 experts");
    let p = problem(&mut rng, &[1000, 900], 128, 256, false);
    run::<bf16>(&gpu, &p, "2 experts x ~1000 rows (128-row tiles)");
    // Few rows per expert (16-row tiles, several per expert where it has
    // more than 16), N not a multiple of 128.
    let counts: Vec<usize> = (0..32).map(|i| (i * 5) % 37).collect();
    let p = problem(&mut rng, &counts, 520, 768, true);
    run::<bf16>(&gpu, &p, "32 experts x 0..36 rows (16-row tiles)");
    run::<f16>(&gpu, &p, "32 experts x 0..36 rows (16-row tiles)");
}

#[test]
fn sm89_native_int4_path() {
    let Some(gpu) = gpu("sm89_native_int4_path") else { return };
    if gpu.arch() == Arch::Sm89 {
        return;
    }
    let g89 = Gpu::with_arch(gpu.context().clone(), Arch::Sm89).unwrap();
    let mut rng = Rng(89);
    let p = problem(&mut rng, &[3, 0, 70, 129], 136, 320, true);
    run::<bf16>(&g89, &p, "sm_89 PTX (mma s4)");
}

#[test]
fn quantizer_is_bit_exact() {
    let Some(gpu) = gpu("quantizer_is_bit_exact") else { return };
    let s = gpu.context().default_stream();
    let api = W4A4::new(&gpu, &s).unwrap();
    let mut rng = Rng(12);
    for (rows, k) in [(1usize, 64usize), (37, 2880), (300, 1024)] {
        let mut x = rng.vec(rows * k, 3.0);
        // A zero row and a row with ties (x/scale = .5 exactly).
        if rows > 2 {
            x[k..2 * k].iter_mut().for_each(|v| *v = 0.0);
            for (j, v) in x[2 * k..3 * k].iter_mut().enumerate() {
                *v = [7.0, 2.5, -0.5, 1.5, -3.5][j % 5];
            }
        }
        macro_rules! one {
            ($t:ty) => {{
                let xt: Vec<$t> = x.iter().map(|&v| <$t>::from_f32(v)).collect();
                let want = quantize_int4_rows(&xt, rows, k).unwrap();
                let xd = s.clone_htod(&xt).unwrap();
                let mut q = s.clone_htod(&vec![0xAAu8; rows * k / 2]).unwrap();
                let mut sc = s.clone_htod(&vec![f32::NAN; rows]).unwrap();
                api.quantize(&s, &xd.as_view(), k, &mut q.as_view_mut(), &mut sc.as_view_mut()).unwrap();
                let (gq, gs) = (s.clone_dtoh(&q).unwrap(), s.clone_dtoh(&sc).unwrap());
                let bad_q = gq.iter().zip(&want.q).filter(|(a, b)| a != b).count();
                let bad_s = gs.iter().zip(&want.scale).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                report(&format!(
                    "quantizer {rows}x{k} [{}]: {bad_q} code bytes, {bad_s} scales differ",
                    stringify!($t)
                ));
                assert_eq!((bad_q, bad_s), (0, 0));
            }};
        }
        one!(bf16);
        one!(f16);
    }
}

/// 128-row tiles (the `wgmma` kernels on sm_90a): ragged segments that end
/// mid-tile, an empty expert, N not a multiple of 128, K = 2880 (a partial
/// last 256-k stage), 12 stages through the 4-deep ring.
#[test]
fn wgmma_tiles_exact_and_scaled() {
    let Some(gpu) = gpu("wgmma_tiles_exact_and_scaled") else { return };
    let mut rng = Rng(9);
    let p = problem(&mut rng, &[300, 0, 129, 517], 264, 2880, true);
    run::<bf16>(&gpu, &p, "128-row tiles 300/0/129/517, N=264 K=2880");
    run::<f16>(&gpu, &p, "128-row tiles 300/0/129/517, N=264 K=2880");
    // An output 4 bytes past a 16-byte boundary (the wgmma kernel's 16-byte
    // stores cannot take it; the call must still be right).
    run_on::<bf16>(&gpu, &p, "128-row tiles, output at +4 bytes", true, 2);
    // More tiles (21 x 12 = 252) than resident blocks: each block runs
    // several, the next one's first stages copied during this one's epilogue.
    let p = problem(&mut rng, &[900, 800, 700], 1536, 768, true);
    run_on::<bf16>(&gpu, &p, "252 128-row tiles (several per block), N=1536 K=768", true, 0);
    run_on::<f16>(&gpu, &p, "252 128-row tiles (several per block), N=1536 K=768", true, 0);
}

#[test]
fn malformed_offsets_are_clamped_and_counted() {
    let Some(gpu) = gpu("malformed_offsets_are_clamped_and_counted") else { return };
    let s = gpu.context().default_stream();
    let api = W4A4::new(&gpu, &s).unwrap();
    let mut rng = Rng(1);
    let p = problem(&mut rng, &[10, 10, 10], 64, 128, false);
    // Decreasing, negative and past-the-end bounds.
    let offsets = vec![-5i64, 20, 12, 1_000_000];
    let (a, b) = (s.clone_htod(&p.a).unwrap(), s.clone_htod(&p.b).unwrap());
    let (sa, sw) = (s.clone_htod(&p.s_a).unwrap(), s.clone_htod(&p.s_w).unwrap());
    let off = s.clone_htod(&offsets).unwrap();
    let (av, bv, sav, swv, ov) = (a.as_view(), b.as_view(), sa.as_view(), sw.as_view(), off.as_view());
    let args = GemmArgs { a: &av, b: &bv, s_a: &sav, s_w: &swv, offsets: &ov, row_scale: None, n: 64, k: 128 };
    let mut out = s.alloc_zeros::<bf16>(30 * 64).unwrap();
    api.gemm(&s, &args, &mut out.as_view_mut()).unwrap();
    s.synchronize().unwrap();
    assert!(api.offset_error_count(&s).unwrap() > 0);
    // Errors for shapes the kernel cannot take name the limit.
    let bad = GemmArgs { k: 96, ..args };
    let e = api.gemm(&s, &bad, &mut out.as_view_mut()).unwrap_err().to_string();
    assert!(e.contains("K = 96") && e.contains("64"), "{e}");
}
