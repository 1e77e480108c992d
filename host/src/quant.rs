//! CPU quantizers: weights to NVFP4 by NVIDIA ModelOpt's recipe, weights to
//! INT4 per channel, activations to INT4 per token.
//!
//! NVFP4 (DESIGN.md §3), per expert: `weight_scale_2 = amax / (6 * 448)`;
//! per 16-element block: `scale = e4m3(block_amax / (6 * weight_scale_2))`;
//! `code = e2m1(w / (scale * weight_scale_2))`, round half to even. A block
//! whose scale rounds to 0 gets codes 0.
//!
//! INT4 (symmetric, DESIGN.md §3): `scale = amax / 7` (f32),
//! `q = round_half_even(x / scale)` clamped to ±7; `amax = 0` gives scale 0
//! and q = 0; a NaN in the row gives a NaN scale (and q = 0), so the output
//! shows it. The GPU activation quantizer computes the same f32 operations
//! and matches this bit for bit.

use crate::error::{shape, unsupported, Error, Result};
use crate::nvfp4::{BlockScales, Nvfp4Weight};
use half::{bf16, f16};
use moe4_kernels::e2m1::{e2m1_from_f32, pack_pair, E2M1_MAX};
use moe4_kernels::e4m3::{e4m3_from_f32, e4m3_to_f32, E4M3_MAX};
use moe4_kernels::int4;

/// Element types the quantizers accept.
pub trait Element: Copy + Send + Sync {
    /// Widens to f32 (exact for bf16 and f16).
    fn f32(self) -> f32;
}
impl Element for f32 {
    fn f32(self) -> f32 {
        self
    }
}
impl Element for bf16 {
    fn f32(self) -> f32 {
        self.to_f32()
    }
}
impl Element for f16 {
    fn f32(self) -> f32 {
        self.to_f32()
    }
}

/// Quantizes `w` (`[experts, rows, k]`, row-major) to NVFP4 with linear
/// scales. Fails on a non-finite weight or a K that is not a multiple of 16.
pub fn quantize_nvfp4<T: Element>(w: &[T], experts: usize, rows: usize, k: usize) -> Result<Nvfp4Weight> {
    if k == 0 || !k.is_multiple_of(16) {
        return Err(unsupported("K", k, "must be a positive multiple of 16 (NVFP4 blocks)"));
    }
    shape(format!("weights [{experts}, {rows}, {k}]"), experts * rows * k, w.len())?;
    let per = rows * k;
    let mut codes = vec![0u8; experts * per / 2];
    let mut scales = vec![0u8; experts * per / 16];
    let mut global = vec![0f32; experts];
    // Experts in parallel: each writes only its own slices.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(experts.max(1));
    let chunk = experts.div_ceil(threads.max(1)).max(1);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = codes
            .chunks_mut(chunk * per / 2)
            .zip(scales.chunks_mut(chunk * per / 16))
            .zip(global.chunks_mut(chunk))
            .enumerate()
            .map(|(ci, ((c, sc), g))| {
                s.spawn(move || {
                    for (j, ge) in g.iter_mut().enumerate() {
                        let e = ci * chunk + j;
                        let src = &w[e * per..(e + 1) * per];
                        let (c, sc) =
                            (&mut c[j * per / 2..(j + 1) * per / 2], &mut sc[j * per / 16..(j + 1) * per / 16]);
                        *ge = quantize_expert(src, e, k, c, sc)?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("quantizer thread")).collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(Nvfp4Weight { experts, rows, k, codes, scales: BlockScales::Linear(scales), global_scale: global })
}

fn quantize_expert<T: Element>(src: &[T], e: usize, k: usize, codes: &mut [u8], scales: &mut [u8]) -> Result<f32> {
    let mut amax = 0f32;
    for (i, v) in src.iter().enumerate() {
        let v = v.f32();
        if !v.is_finite() {
            return Err(Error::InvalidValue {
                what: "weights".into(),
                detail: format!("expert {e} row {} column {} is {v}", i / k, i % k),
            });
        }
        amax = amax.max(v.abs());
    }
    let ws2 = amax / (E2M1_MAX * E4M3_MAX);
    let mut vals = [0f32; 16];
    for (b, block) in src.chunks(16).enumerate() {
        for (o, v) in vals.iter_mut().zip(block) {
            *o = v.f32();
        }
        let bamax = vals.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = if ws2 > 0.0 { e4m3_from_f32(bamax / (E2M1_MAX * ws2)) } else { 0 };
        scales[b] = s;
        let denom = e4m3_to_f32(s) * ws2;
        for p in 0..8 {
            let (lo, hi) = if denom > 0.0 {
                (e2m1_from_f32(vals[2 * p] / denom), e2m1_from_f32(vals[2 * p + 1] / denom))
            } else {
                (0, 0)
            };
            codes[8 * b + p] = pack_pair(lo, hi);
        }
    }
    Ok(ws2)
}

/// INT4 tensor with one f32 scale per row: `value = q * scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Int4Rows {
    /// Rows.
    pub rows: usize,
    /// Row length.
    pub k: usize,
    /// `[rows, k/2]` packed, element `2i` in the low nibble.
    pub q: Vec<u8>,
    /// `[rows]` scales.
    pub scale: Vec<f32>,
}

/// The symmetric INT4 scale of a row: `amax / 7` (NaN if the row has a NaN).
pub fn int4_scale<T: Element>(row: &[T]) -> f32 {
    let mut amax = 0f32;
    for v in row {
        let a = v.f32().abs();
        if a.is_nan() || amax.is_nan() {
            amax = f32::NAN;
        } else {
            amax = amax.max(a);
        }
    }
    amax / 7.0
}

/// `round_half_even(x / scale)` clamped to ±7 (0 where the scale is 0 or
/// the quotient is NaN), as the GPU computes it.
pub fn int4_code(x: f32, scale: f32) -> i8 {
    if scale == 0.0 {
        return 0;
    }
    let q = (x / scale).round_ties_even();
    if q.is_nan() {
        0
    } else {
        q.clamp(-7.0, 7.0) as i8
    }
}

/// Quantizes `[rows, k]` row by row to INT4 (per-token activations, or
/// per-channel weights when the rows are output channels). `k` must be even.
pub fn quantize_int4_rows<T: Element>(x: &[T], rows: usize, k: usize) -> Result<Int4Rows> {
    if !k.is_multiple_of(2) {
        return Err(unsupported("K", k, "must be even (two INT4 values per byte)"));
    }
    shape(format!("rows [{rows}, {k}]"), rows * k, x.len())?;
    let mut q = vec![0u8; rows * k / 2];
    let mut scale = vec![0f32; rows];
    for r in 0..rows {
        let row = &x[r * k..(r + 1) * k];
        let s = int4_scale(row);
        scale[r] = s;
        for i in 0..k / 2 {
            q[r * k / 2 + i] = int4::pack_pair(int4_code(row[2 * i].f32(), s), int4_code(row[2 * i + 1].f32(), s));
        }
    }
    Ok(Int4Rows { rows, k, q, scale })
}

/// Quantizes stacked expert weights `[E, n, k]` per output channel: returns
/// packed `[E, n, k/2]` and scales `[E, n]`.
pub fn quantize_int4_weights<T: Element>(w: &[T], experts: usize, n: usize, k: usize) -> Result<Int4Rows> {
    quantize_int4_rows(w, experts * n, k)
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;
    use moe4_kernels::e2m1::e2m1_to_f32;

    #[test]
    fn hand_worked_block() {
        // One expert, one row of 16: amax 6 -> ws2 = 6/2688 = 1/448; block
        // scale = e4m3(6 / (6/448)) = 448; codes = w / (448/448) = w.
        let w: Vec<f32> = vec![0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -6.0, 0.25, 0.75, 2.5, 5.0, -3.5];
        let q = quantize_nvfp4(&w, 1, 1, 16).unwrap();
        assert_eq!(q.global_scale[0], 6.0 / 2688.0);
        assert_eq!(q.scale(0, 0, 0), 0x7E);
        let want_codes = [0u8, 1, 2, 3, 4, 5, 6, 7, 9, 10, 15, 0, 2, 4, 6, 14];
        for (i, &c) in want_codes.iter().enumerate() {
            assert_eq!(q.code(0, 0, i), c, "element {i} ({})", w[i]);
        }
    }

    #[test]
    fn hand_worked_two_blocks_with_a_small_block() {
        // Block 0 amax 12, block 1 amax 0.75. ws2 = 12/2688 = 1/224.
        // Block 0 scale: 12/(6/224) = 448 -> 0x7E, step = 448/224 = 2.
        // Block 1 scale: 0.75/(6/224) = 28 -> e4m3(28) = 28 (0x5E), step = 28/224 = 0.125.
        let mut w = vec![0f32; 32];
        w[0] = 12.0;
        w[1] = -3.0; // -3 / 2 = -1.5 -> code 11
        w[16] = 0.75; // 0.75 / 0.125 = 6 -> code 7
        w[17] = 0.2; // 1.6 -> 1.5 (code 3)
        let q = quantize_nvfp4(&w, 1, 1, 32).unwrap();
        assert_eq!(q.scale(0, 0, 0), 0x7E);
        assert_eq!(e4m3_to_f32(q.scale(0, 0, 1)), 28.0);
        assert_eq!([q.code(0, 0, 0), q.code(0, 0, 1), q.code(0, 0, 16), q.code(0, 0, 17)], [7, 11, 7, 3]);
        assert!((q.value(0, 0, 17) - 0.1875).abs() < 1e-7); // ws2 is an f32
    }

    #[test]
    fn zero_expert_and_zero_block() {
        let w = vec![0f32; 64];
        let q = quantize_nvfp4(&w, 2, 2, 16).unwrap();
        assert_eq!(q.global_scale, vec![0.0, 0.0]);
        assert!(q.codes.iter().all(|&c| c == 0));
    }

    #[test]
    fn rejects_bad_input() {
        let mut w = vec![1f32; 32];
        w[17] = f32::NAN;
        let e = quantize_nvfp4(&w, 1, 2, 16).unwrap_err().to_string();
        assert!(e.contains("row 1 column 1"), "{e}");
        assert!(quantize_nvfp4(&w, 1, 1, 24).is_err());
        assert!(quantize_nvfp4(&w[..16], 1, 2, 16).is_err());
    }

    /// xorshift in [-1, 1)
    fn rand(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
            })
            .collect()
    }

    #[test]
    fn nvfp4_error_is_bounded_per_block() {
        // Each element's error is at most half a step of its block (plus the
        // scale's own rounding): |w - deq| <= 0.5 * 2 * s*ws2 where s >= amax/6
        // within e4m3's 1/16 relative precision.
        let (e, r, k) = (3, 5, 64);
        let w = rand(e * r * k, 7);
        let q = quantize_nvfp4(&w, e, r, k).unwrap();
        let mut num = 0f64;
        let mut den = 0f64;
        for ex in 0..e {
            for row in 0..r {
                for b in 0..k / 16 {
                    let blk = &w[((ex * r + row) * k + 16 * b)..][..16];
                    let bamax = blk.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
                    let step = e4m3_to_f32(q.scale(ex, row, b)) as f64 * q.global_scale[ex] as f64;
                    for i in 0..16 {
                        let d = q.value(ex, row, 16 * b + i);
                        let x = blk[i] as f64;
                        // Largest E2M1 gap is 2 steps (4 -> 6): error <= 1 step,
                        // and saturation at 6 steps costs at most 6/16 of amax.
                        assert!((d - x).abs() <= step + bamax * 0.07 + 1e-12, "{x} -> {d} (step {step})");
                        num += (d - x) * (d - x);
                        den += x * x;
                    }
                }
            }
        }
        let rel = (num / den).sqrt();
        assert!(rel < 0.12, "relative error {rel}");
        assert!(rel > 0.01, "suspiciously exact: {rel}");
    }

    #[test]
    fn int4_rows_round_trip_and_bounds() {
        let x = rand(4 * 64, 3);
        let q = quantize_int4_rows(&x, 4, 64).unwrap();
        for r in 0..4 {
            let s = q.scale[r];
            let amax = x[r * 64..(r + 1) * 64].iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(s, amax / 7.0);
            for i in 0..64 {
                let v = int4::value_at(&q.q[r * 32..], i) as f32 * s;
                assert!((v - x[r * 64 + i]).abs() <= 0.5 * s + 1e-6);
            }
        }
        // Hand-worked: amax 7 -> scale 1; 2.5 -> 2 (even), 3.5 -> 4, -7 -> -7.
        let row = [7.0f32, 2.5, 3.5, -7.0, 0.49, -0.5, 1.5, 0.0];
        let q = quantize_int4_rows(&row, 1, 8).unwrap();
        let got: Vec<i8> = (0..8).map(|i| int4::value_at(&q.q, i)).collect();
        assert_eq!(got, vec![7, 2, 4, -7, 0, 0, 2, 0]);
        // Zero row and NaN row.
        let z = quantize_int4_rows(&[0f32; 4], 1, 4).unwrap();
        assert_eq!(z.scale[0], 0.0);
        let n = quantize_int4_rows(&[1.0, f32::NAN, 2.0, 3.0], 1, 4).unwrap();
        assert!(n.scale[0].is_nan());
        assert_eq!(n.q, vec![0, 0]);
        let _ = e2m1_to_f32(0);
    }
}
