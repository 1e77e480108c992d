//! The GPU smoke test: single instructions and the decode kernels' dequant
//! step, compared bit for bit with the CPU. `cargo test --test smoke` runs
//! it (skipping without a GPU), `moe4 smoke` prints it.

use crate::error::Result;
use crate::gpu::Gpu;
use half::{bf16, f16};
use moe4_kernels::decode::unpack_code;
use moe4_kernels::e2m1::e2m1_to_f32;
use moe4_kernels::e4m3::{e4m3_is_nan, e4m3_to_f32};
use std::sync::Arc;

/// One check: how many of `total` values differed from the CPU.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Values that differ.
    pub mismatches: usize,
    /// Values compared.
    pub total: usize,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u32
    }
}

/// Runs every smoke check on `gpu`.
pub fn run(gpu: &Arc<Gpu>, seed: u64) -> Result<Vec<Check>> {
    let s = gpu.context().default_stream();
    let mut rng = Rng(seed | 1);
    let mut checks = Vec::new();

    // mma m16n8k16 (f16 and bf16): small integers, so every product and sum
    // is exact in f32 and the order of accumulation cannot matter.
    for bf in [false, true] {
        let av: Vec<i32> = (0..16 * 16).map(|_| (rng.next() % 9) as i32 - 4).collect();
        let bv: Vec<i32> = (0..8 * 16).map(|_| (rng.next() % 9) as i32 - 4).collect();
        let cv: Vec<f32> = (0..16 * 8).map(|_| ((rng.next() % 64) as i32 - 32) as f32).collect();
        let pack = |v: &[i32]| -> Vec<u32> {
            v.chunks(2)
                .map(|p| {
                    let h = |x: i32| {
                        if bf {
                            bf16::from_f32(x as f32).to_bits()
                        } else {
                            f16::from_f32(x as f32).to_bits()
                        }
                    };
                    h(p[0]) as u32 | (h(p[1]) as u32) << 16
                })
                .collect()
        };
        let (a, b, c) = (s.clone_htod(&pack(&av))?, s.clone_htod(&pack(&bv))?, s.clone_htod(&cv)?);
        let d = s.alloc_zeros::<f32>(128)?;
        let name = if bf { "smoke_mma_bf16" } else { "smoke_mma_f16" };
        let args: [&dyn crate::gpu::ArgRef; 4] = [&ptr(&a, &s), &ptr(&b, &s), &ptr(&c, &s), &ptr(&d, &s)];
        // SAFETY: one warp; A 16x8, B 8x8 words, C/D 16x8 f32, as the kernel reads.
        unsafe { gpu.launch_args(&s, name, 1, 32, &args)? };
        let got = s.clone_dtoh(&d)?;
        let mut bad = 0;
        for r in 0..16 {
            for n in 0..8 {
                let want = cv[r * 8 + n] + (0..16).map(|k| (av[r * 16 + k] * bv[n * 16 + k]) as f32).sum::<f32>();
                bad += (got[r * 8 + n] != want) as usize;
            }
        }
        checks.push(Check {
            name: if bf { "mma.m16n8k16 bf16" } else { "mma.m16n8k16 f16" },
            mismatches: bad,
            total: 128,
        });
    }

    // mma s8 (m16n8k32) and s4 (m16n8k64): A 16 rows x 32 bytes, B 8 x 32.
    for s4 in [false, true] {
        let ab: Vec<u32> = (0..16 * 8).map(|_| rng.next()).collect();
        let bb: Vec<u32> = (0..8 * 8).map(|_| rng.next()).collect();
        let cv: Vec<i32> = (0..128).map(|_| (rng.next() % 2001) as i32 - 1000).collect();
        let (a, b, c) = (s.clone_htod(&ab)?, s.clone_htod(&bb)?, s.clone_htod(&cv)?);
        let d = s.alloc_zeros::<i32>(128)?;
        let name = if s4 { "smoke_mma_s4" } else { "smoke_mma_s8" };
        let args: [&dyn crate::gpu::ArgRef; 4] = [&ptr(&a, &s), &ptr(&b, &s), &ptr(&c, &s), &ptr(&d, &s)];
        // SAFETY: as above, i32 accumulators.
        unsafe { gpu.launch_args(&s, name, 1, 32, &args)? };
        let got = s.clone_dtoh(&d)?;
        let elem = |words: &[u32], row: usize, k: usize| -> i32 {
            if s4 {
                let w = words[row * 8 + k / 8];
                (((w >> (4 * (k % 8))) & 15) as i32) << 28 >> 28
            } else {
                let w = words[row * 8 + k / 4];
                ((w >> (8 * (k % 4))) & 255) as u8 as i8 as i32
            }
        };
        let kk = if s4 { 64 } else { 32 };
        let mut bad = 0;
        for r in 0..16 {
            for n in 0..8 {
                let want = cv[r * 8 + n] + (0..kk).map(|k| elem(&ab, r, k) * elem(&bb, n, k)).sum::<i32>();
                bad += (got[r * 8 + n] != want) as usize;
            }
        }
        checks.push(Check {
            name: if s4 { "mma.m16n8k64 s4" } else { "mma.m16n8k32 s8" },
            mismatches: bad,
            total: 128,
        });
    }

    // cvt.rn.f16x2.e4m3x2 over all 65,536 pairs.
    let inp: Vec<u16> = (0..=u16::MAX).collect();
    let di = s.clone_htod(&inp)?;
    let dout = s.alloc_zeros::<u32>(inp.len())?;
    let n = inp.len() as u32;
    let args: [&dyn crate::gpu::ArgRef; 3] = [&ptr(&di, &s), &ptr(&dout, &s), &n];
    // SAFETY: n inputs and outputs.
    unsafe { gpu.launch_args(&s, "smoke_cvt_e4m3", n.div_ceil(256), 256, &args)? };
    let got = s.clone_dtoh(&dout)?;
    let mut bad = 0;
    for (i, g) in got.iter().enumerate() {
        for (half, byte) in [(g & 0xFFFF, i & 255), (g >> 16, i >> 8)] {
            let v = f16::from_bits(half as u16);
            let want = e4m3_to_f32(byte as u8);
            let ok = if want.is_nan() {
                v.is_nan()
            } else {
                v.to_f32() == want && v.is_sign_negative() == want.is_sign_negative()
            };
            bad += !ok as usize;
        }
    }
    checks.push(Check { name: "cvt.rn.f16x2.e4m3x2 (all 65536 inputs)", mismatches: bad, total: 2 * got.len() });

    // The FC kernels' dequant step: every code in every slot, every scale.
    let mut words = Vec::new();
    let mut scales = Vec::new();
    for sb in 0u32..=0x7E {
        for code in 0u32..16 {
            // All slots hold `code`, then a random word; row-g scale sb,
            // row-g+8 scale (sb * 7 + 3) % 0x7F (never NaN).
            let same = moe4_kernels::decode::pack_word([code as u8; 8]);
            let other = (sb * 7 + 3) % 0x7F;
            let sc = sb | other << 8;
            words.push(same);
            scales.push(sc);
            words.push(rng.next());
            scales.push(sc);
        }
    }
    // A zero scale must still give zeros: the loader clears such blocks' codes.
    let nwords = words.len() as u32;
    let (dw, ds) = (s.clone_htod(&words)?, s.clone_htod(&scales)?);
    let (ob, of) = (s.alloc_zeros::<u32>(4 * words.len())?, s.alloc_zeros::<u32>(4 * words.len())?);
    let args: [&dyn crate::gpu::ArgRef; 5] = [&ptr(&dw, &s), &ptr(&ds, &s), &ptr(&ob, &s), &ptr(&of, &s), &nwords];
    // SAFETY: n words and scales in, 4n words out each.
    unsafe { gpu.launch_args(&s, "smoke_dequant", nwords.div_ceil(128), 128, &args)? };
    let (gb, gf) = (s.clone_dtoh(&ob)?, s.clone_dtoh(&of)?);
    let (mut bad_b, mut bad_f, mut total) = (0, 0, 0);
    for i in 0..words.len() {
        for o in 0..4 {
            for h in 0..2 {
                let code = unpack_code(words[i], o, h);
                let sbyte = (scales[i] >> (8 * (o & 1))) as u8;
                if e4m3_is_nan(sbyte) {
                    continue;
                }
                total += 1;
                let v = e2m1_to_f32(code) as f64 * e4m3_to_f32(sbyte) as f64;
                let got_b = bf16::from_bits((gb[4 * i + o] >> (16 * h)) as u16);
                let got_f = f16::from_bits((gf[4 * i + o] >> (16 * h)) as u16);
                // Zero scales: only the f16 path is exact by itself (the bf16
                // path relies on the loader clearing the block's codes).
                if sbyte != 0 && got_b.to_f64() != v * 2f64.powi(-7) {
                    bad_b += 1;
                }
                if got_f.to_f64() != v * 2f64.powi(-14) {
                    bad_f += 1;
                }
            }
        }
    }
    checks.push(Check { name: "E2M1 x E4M3 dequant, bf16 path (all codes x scales)", mismatches: bad_b, total });
    checks.push(Check { name: "E2M1 x E4M3 dequant, f16 path (all codes x scales)", mismatches: bad_f, total });
    // wgmma m64n256k16 (sm_90a builds; a PTX file without it skips it): A from
    // registers, B by a 128-byte-swizzled descriptor over 256 rows; small
    // integers, exact in f32.
    if gpu.has_kernel("smoke_wgmma_n256_bf16") {
        let av: Vec<i32> = (0..64 * 16).map(|_| (rng.next() % 9) as i32 - 4).collect();
        let bv: Vec<i32> = (0..256 * 16).map(|_| (rng.next() % 9) as i32 - 4).collect();
        let pack = |v: &[i32]| -> Vec<u32> {
            let h = |x: i32| bf16::from_f32(x as f32).to_bits() as u32;
            v.chunks(2).map(|p| h(p[0]) | h(p[1]) << 16).collect()
        };
        let (a, b) = (s.clone_htod(&pack(&av))?, s.clone_htod(&pack(&bv))?);
        let d = s.alloc_zeros::<f32>(64 * 256)?;
        let args: [&dyn crate::gpu::ArgRef; 3] = [&ptr(&a, &s), &ptr(&b, &s), &ptr(&d, &s)];
        // SAFETY: one warpgroup; A 64x8 and B 256x8 words, D 64x256 f32,
        // 256 128-byte rows of shared memory plus alignment, as the kernel
        // reads and writes.
        unsafe { gpu.launch_args_smem(&s, "smoke_wgmma_n256_bf16", 1, 128, 256 * 128 + 1024, &args)? };
        let got = s.clone_dtoh(&d)?;
        let mut bad = 0;
        for r in 0..64 {
            for n in 0..256 {
                let want = (0..16).map(|k| (av[r * 16 + k] * bv[n * 16 + k]) as f32).sum::<f32>();
                bad += (got[r * 256 + n] != want) as usize;
            }
        }
        checks.push(Check {
            name: "wgmma m64n256k16 bf16 (A registers, B swizzled smem)",
            mismatches: bad,
            total: 64 * 256,
        });
    }
    // One TMA tile and one 1-D bulk copy (sm_90a builds): a 64 x 256 box
    // of a 16-bit [rows][cols] array with the 128-byte swizzle, as the
    // TMA-fed FC2 loads a chunk of h, and 4 KiB as it loads codes. Box row
    // r's 16-byte piece q must land at piece q ^ (r % 8) of its 128-byte
    // row, the layout `smoke_wgmma_n256_bf16`'s B is written in.
    if gpu.has_kernel("smoke_tma_tile") {
        checks.extend(tma_tile(gpu, &s)?);
    }
    s.synchronize()?;
    Ok(checks)
}

fn ptr<T>(b: &cudarc::driver::CudaSlice<T>, s: &cudarc::driver::CudaStream) -> u64 {
    use cudarc::driver::DevicePtr;
    b.device_ptr(s).0
}

/// The `smoke_tma_tile` checks (see [`run`]): the tile, and the 1-D copy.
fn tma_tile(gpu: &Arc<Gpu>, s: &Arc<cudarc::driver::CudaStream>) -> Result<[Check; 2]> {
    // A 300 x 192 array of distinct values; the boxes start at column 64.
    let (rows, cols, x0) = (300usize, 192usize, 64usize);
    let v: Vec<u16> = (0..rows * cols).map(|i| i as u16).collect();
    let src = s.clone_htod(&v)?;
    let map = crate::tma::TensorMap2d::bf16_rows(ptr(&src, s), rows as u64, cols as u64)?;
    let dmap = s.clone_htod(&map.0)?;
    let words: Vec<u32> = (0..1024u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let bulk = s.clone_htod(&words)?;
    let out = s.alloc_zeros::<u32>(8192 + 1024 + 1)?;
    let (mp, bp, op) = (ptr(&dmap, s), ptr(&bulk, s), ptr(&out, s));
    let (mut bad, mut bad1) = (0, 0);
    // A box inside the array, then one whose last rows lie past its end
    // (they read as zero).
    for y0 in [20usize, 200] {
        let (x, y) = (x0 as u32, y0 as u32);
        let args: [&dyn crate::gpu::ArgRef; 5] = [&mp, &x, &y, &bp, &op];
        // SAFETY: one block of 256 threads with the shared memory the
        // kernel documents; `dmap` a CUtensorMap in global memory, `bulk`
        // 4096 bytes, `out` 9217 words.
        unsafe { gpu.launch_args_smem(s, "smoke_tma_tile", 1, 256, 32768 + 4096 + 1024 + 8, &args)? };
        let got = s.clone_dtoh(&out)?;
        // A copy that never completed (the kernel's bounded wait ran
        // out): every element counts as wrong.
        let done = got[9216] == 1;
        for r in 0..256 {
            for q in 0..8 {
                for e in 0..8 {
                    // Half e of piece q of box row r: element x0 + 8 q + e
                    // of row y0 + r, stored at piece q ^ (r % 8).
                    let want = if y0 + r < rows { v[(y0 + r) * cols + x0 + 8 * q + e] } else { 0 };
                    let at = r * 64 + 8 * (q ^ (r % 8)) + e;
                    let word = got[at / 2];
                    let have = if at % 2 == 0 { word as u16 } else { (word >> 16) as u16 };
                    bad += (have != want || !done) as usize;
                }
            }
        }
        bad1 += (0..1024).filter(|&i| got[8192 + i] != words[i] || !done).count();
    }
    Ok([
        Check {
            name: "TMA 2-D tile, 128-byte swizzle (64 x 256 box; inside, past the end)",
            mismatches: bad,
            total: 2 * 256 * 64,
        },
        Check { name: "cp.async.bulk 1-D (4 KiB)", mismatches: bad1, total: 2 * 1024 },
    ])
}
