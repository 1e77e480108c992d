//! W4A4 INT4 grouped GEMM over experts, with the per-token x per-channel
//! dequantization in the epilogue; the fused activation quantizer; and the
//! two-kernel baseline's dequant kernel (for the benchmark only).
//!
//! **GEMM tile** `BM x 128` (rows of one expert x output channels), K in
//! steps of 256, 8 warps as `WM` (rows) x `8 / WM` (columns), each warp
//! `BM / WM` rows x `8 NJ` columns. `BM` = 128, 64, 32 or 16, picked from the
//! rows per expert: with a few rows per expert (the MoE decode and
//! mid-size shapes) the tensor cores would otherwise multiply mostly
//! padding, and the kernel is bound by streaming the weights.
//! Operands stream global -> shared through a 4-stage `cp.async` ring
//! (16-byte copies, zero-filled past the expert's rows, past N and past K),
//! so no tile reads outside its buffers whatever the offsets say.
//!
//! **Who holds which k.** Per 128-k half of a stage a lane reads 16 bytes of
//! each of its rows: k `32t .. 32t+32`. On sm_90 (no int4 tensor cores: `m16n8k64
//! s4` is emulated) each 8-nibble word is unpacked to two s8x4 registers,
//! `(w << 4) & 0xF0F0F0F0` (even k) and `w & 0xF0F0F0F0` (odd k): exact
//! values times 16, so the `m16n8k32 s8` sum is 256x the int4 sum, undone
//! exactly in the epilogue. A and B unpack the same way, so they agree on
//! the k order inside each `mma`. On sm_89 the words feed the native
//! `m16n8k64 s4` directly.
//!
//! **Schedule.** Every block reads `offsets[E+1]` itself (no host copy),
//! clamps each segment into `0..rows` (a bad offset bumps `error_count`),
//! and walks the tiles `expert -> column tile -> row tile` from a prefix sum
//! in shared memory; empty experts have no tiles. Blocks are persistent.
//!
//! **Epilogue.** `out = s_a[m] * s_w[e][n] * acc (* row_scale[m])` in f32,
//! rounded once to f16/bf16; or (baseline) the exact i32 sum.

use super::arch::*;
use crate::params::{DequantParams, QuantParams, W4A4Params};

use crate::launch::{
    GEMM_BK as BK, GEMM_BN as BN, GEMM_MAX_EXPERTS as MAX_EXPERTS, GEMM_STAGES as STAGES, GEMM_THREADS as THREADS,
};

/// Output kinds of the GEMM epilogue.
pub(super) const OUT_BF16: u32 = 0;
pub(super) const OUT_F16: u32 = 1;
pub(super) const OUT_I32: u32 = 2;

#[cfg(not(moe4_arch = "sm_89"))]
#[inline(always)]
pub(super) fn unpack_lo(w: u32) -> u32 {
    (w << 4) & 0xF0F0_F0F0
}
#[cfg(not(moe4_arch = "sm_89"))]
#[inline(always)]
pub(super) fn unpack_hi(w: u32) -> u32 {
    w & 0xF0F0_F0F0
}

/// Shared-memory schedule at `sched` (per-expert tile prefix, segment
/// starts, segment ends, `E + 1` words each, then 32 words of scratch):
/// every block clamps the segments of `offsets` into `0..rows` (a bad offset
/// bumps `error_count`) and prefix-sums the experts' tiles (`BM`-row tiles x
/// column tiles). Returns the total tile count. Ends with a barrier.
#[inline(always)]
pub(super) unsafe fn schedule<const BM: u32>(p: &W4A4Params, sched: u32) -> u32 {
    let t0 = tid();
    let tile_pre = sched;
    let seg_lo = tile_pre + 4 * (MAX_EXPERTS + 1);
    let seg_hi = seg_lo + 4 * (MAX_EXPERTS + 1);
    let scratch = seg_hi + 4 * (MAX_EXPERTS + 1);
    let ne = p.n_experts;
    let n_tiles = p.n.div_ceil(BN);
    let per = ne.div_ceil(THREADS);
    let mut local = 0u32;
    let mut bad = 0u32;
    let mut i = 0;
    while i < per {
        let e = t0 * per + i;
        if e < ne {
            let lo = ldg_u64(p.offsets + 8 * e as u64) as i64;
            let hi = ldg_u64(p.offsets + 8 * (e + 1) as u64) as i64;
            let rows = p.rows as i64;
            let clo = lo.clamp(0, rows);
            let chi = hi.clamp(clo, rows);
            if clo != lo || chi != hi {
                bad += 1;
            }
            sts(seg_lo + 4 * e, clo as u32);
            sts(seg_hi + 4 * e, chi as u32);
            local += ((chi - clo) as u32).div_ceil(BM) * n_tiles;
        }
        i += 1;
    }
    if bad != 0 && bid() == 0 {
        atomic_add_u32(p.error_count, bad);
    }
    let (before, total) = block_exclusive_sum(local, scratch);
    let mut run = before;
    let mut i = 0;
    while i < per {
        let e = t0 * per + i;
        if e < ne {
            sts(tile_pre + 4 * e, run);
            run += (lds(seg_hi + 4 * e) - lds(seg_lo + 4 * e)).div_ceil(BM) * n_tiles;
        }
        i += 1;
    }
    if t0 == 0 {
        sts(tile_pre + 4 * ne, total);
    }
    sync();
    total
}

/// One GEMM tile: its expert, the expert's row end, the tile's first row
/// and column, the expert's weights.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub e: u32,
    pub r1: u32,
    pub m0: u32,
    pub n0: u32,
    pub b_expert: u64,
}

/// Tile `tile` of the [`schedule`] at `sched`.
#[inline(always)]
pub(super) unsafe fn locate<const BM: u32>(p: &W4A4Params, sched: u32, tile: u32) -> Tile {
    let tile_pre = sched;
    let seg_lo = tile_pre + 4 * (MAX_EXPERTS + 1);
    let seg_hi = seg_lo + 4 * (MAX_EXPERTS + 1);
    // Expert of this tile: the last e with tile_pre[e] <= tile.
    let (mut lo, mut hi) = (0u32, p.n_experts);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if lds(tile_pre + 4 * mid) <= tile {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let e = lo;
    let (r0, r1) = (lds(seg_lo + 4 * e), lds(seg_hi + 4 * e));
    let mtiles = (r1 - r0).div_ceil(BM);
    let local = tile - lds(tile_pre + 4 * e);
    let (nt_i, mt_i) = (local / mtiles, local % mtiles);
    Tile { e, r1, m0: r0 + mt_i * BM, n0: nt_i * BN, b_expert: p.b + e as u64 * p.n as u64 * (p.k / 2) as u64 }
}

/// Copies stage `kt` (256 k) of tile `t` to `sbase`: the `BM` A rows, then
/// the `BN` B rows, 8 x 16 bytes each, chunk `part` of row `row` at chunk
/// `part ^ 4 (row & 1)` (the 16-byte reads of two neighbouring rows then hit
/// disjoint banks); zero-filled past the expert's rows, N and K.
#[inline(always)]
unsafe fn load_stage<const BM: u32>(p: &W4A4Params, t: &Tile, kt: u32, sbase: u32) {
    let kb = p.k / 2;
    let chunks = (BM + BN) * (BK / 32);
    let mut c = tid();
    while c < chunks {
        let (row, part) = (c / (BK / 32), c % (BK / 32));
        let kbyte = kt * (BK / 2) + 16 * part;
        let kvalid = kbyte < kb;
        let (src, valid) = if row < BM {
            let r = t.m0 + row;
            (p.a + r as u64 * kb as u64 + kbyte as u64, kvalid && r < t.r1)
        } else {
            let n = t.n0 + row - BM;
            (t.b_expert + n as u64 * kb as u64 + kbyte as u64, kvalid && n < p.n)
        };
        cp_async16_zfill(sbase + row * (BK / 2) + 16 * (part ^ ((row & 1) << 2)), if valid { src } else { p.b }, valid);
        c += THREADS;
    }
}

/// Shared address of 16-byte chunk `part` of staged row `row` (the layout
/// [`load_stage`] writes).
#[inline(always)]
pub(super) fn staged(sbase: u32, row: u32, part: u32) -> u32 {
    sbase + row * (BK / 2) + 16 * (part ^ ((row & 1) << 2))
}

#[inline(always)]
unsafe fn gemm<const BM: u32, const MI: usize, const WM: u32, const NJ: usize, const OUT: u32>(p: &W4A4Params) {
    let t0 = tid();
    let (warp, lane) = (t0 / 32, t0 % 32);
    let (g, t) = (lane / 4, lane % 4);
    let (wm, wn) = (warp / (8 / WM), warp % (8 / WM));
    let stage_bytes = (BM + BN) * (BK / 2);
    let base = smem();
    let sched = base + STAGES * stage_bytes;
    let nk = p.k.div_ceil(BK);
    let total = schedule::<BM>(p, sched);

    let mut tile = bid();
    while tile < total {
        let tl = locate::<BM>(p, sched, tile);
        let (e, r1, m0, n0) = (tl.e, tl.r1, tl.m0, tl.n0);
        let load = |kt: u32, stage: u32| load_stage::<BM>(p, &tl, kt, base + stage * stage_bytes);

        let mut acc = [[[0i32; 4]; NJ]; MI];
        let mut s = 0;
        while s < STAGES - 1 {
            if s < nk {
                load(s, s);
            }
            cp_async_commit();
            s += 1;
        }
        let mut kt = 0;
        while kt < nk {
            cp_async_wait::<{ STAGES - 2 }>();
            sync();
            let sbase = base + (kt % STAGES) * stage_bytes;
            // This warp's rows: BM/WM * wm + 16 mi + g (+8); columns 8 NJ wn + 8 nj + g.
            let at = |row: u32, half: u32| staged(sbase, row, 4 * half + t);
            let mut araw = [[[[0u32; 4]; 2]; MI]; 2];
            let mut braw = [[[0u32; 4]; NJ]; 2];
            unroll!(2, |h| {
                unroll!(MI, |mi| {
                    let row = (BM / WM) * wm + 16 * mi as u32 + g;
                    araw[h][mi][0] = lds_v4(at(row, h as u32));
                    araw[h][mi][1] = lds_v4(at(row + 8, h as u32));
                });
                unroll!(NJ, |nj| {
                    let col = 8 * NJ as u32 * wn + 8 * nj as u32 + g;
                    braw[h][nj] = lds_v4(at(BM + col, h as u32));
                });
            });
            // Issue the next stage before the math.
            let next = kt + STAGES - 1;
            if next < nk {
                load(next, next % STAGES);
            }
            cp_async_commit();
            compute_tile::<MI, NJ>(&mut acc, &araw[0], &braw[0]);
            compute_tile::<MI, NJ>(&mut acc, &araw[1], &braw[1]);
            kt += 1;
        }
        cp_async_wait::<0>();
        sync(); // all warps done reading before the next tile's prologue

        epilogue::<BM, MI, WM, NJ, OUT>(p, &acc, e, m0, r1, n0);
        tile += gdim();
    }
}

#[cfg(not(moe4_arch = "sm_89"))]
#[inline(always)]
fn compute_tile<const MI: usize, const NJ: usize>(
    acc: &mut [[[i32; 4]; NJ]; MI],
    araw: &[[[u32; 4]; 2]; MI],
    braw: &[[u32; 4]; NJ],
) {
    // Four m16n8k32 s8 steps; step s takes word s of each 16-byte row slice.
    unroll!(4, |s| {
        let mut b = [[0u32; 2]; NJ];
        unroll!(NJ, |nj| b[nj] = [unpack_lo(braw[nj][s]), unpack_hi(braw[nj][s])]);
        unroll!(MI, |mi| {
            let (w0, w8) = (araw[mi][0][s], araw[mi][1][s]);
            let a = [unpack_lo(w0), unpack_lo(w8), unpack_hi(w0), unpack_hi(w8)];
            unroll!(NJ, |nj| mma_s8(&mut acc[mi][nj], a, b[nj][0], b[nj][1]));
        });
    });
}

#[cfg(moe4_arch = "sm_89")]
#[inline(always)]
fn compute_tile<const MI: usize, const NJ: usize>(
    acc: &mut [[[i32; 4]; NJ]; MI],
    araw: &[[[u32; 4]; 2]; MI],
    braw: &[[u32; 4]; NJ],
) {
    // Two native m16n8k64 s4 steps; step s takes words 2s (k 0..8 of the
    // lane's 16) and 2s+1 (k 8..16) of each row slice.
    unroll!(2, |s| {
        unroll!(MI, |mi| {
            let a = [araw[mi][0][2 * s], araw[mi][1][2 * s], araw[mi][0][2 * s + 1], araw[mi][1][2 * s + 1]];
            unroll!(NJ, |nj| mma_s4(&mut acc[mi][nj], a, braw[nj][2 * s], braw[nj][2 * s + 1]));
        });
    });
}

/// log2 of the factor the unpacked-s8 `mma` sum carries (16 * 16).
#[cfg(not(moe4_arch = "sm_89"))]
const ACC_SHIFT: u32 = 8;
#[cfg(moe4_arch = "sm_89")]
const ACC_SHIFT: u32 = 0;

/// The scale of output row `row` in the 16-bit epilogues: `s_a[row]` (times
/// the routing weight `row_scale[row]` where given), over the factor the
/// accumulators carry.
#[inline(always)]
pub(super) unsafe fn row_scale(p: &W4A4Params, row: u32) -> f32 {
    let mut sa = ldg_f32(p.s_a + 4 * row as u64) * (1.0 / (1u32 << ACC_SHIFT) as f32);
    if p.row_scale != 0 {
        sa *= ldg_f32(p.row_scale + 4 * row as u64);
    }
    sa
}

#[inline(always)]
pub(super) unsafe fn epilogue<const BM: u32, const MI: usize, const WM: u32, const NJ: usize, const OUT: u32>(
    p: &W4A4Params,
    acc: &[[[i32; 4]; NJ]; MI],
    e: u32,
    m0: u32,
    r1: u32,
    n0: u32,
) {
    let lane = tid() % 32;
    let warp = tid() / 32;
    let (g, t) = (lane / 4, lane % 4);
    let (wm, wn) = (warp / (8 / WM), warp % (8 / WM));
    unroll!(MI, |mi| {
        unroll!(2, |h| {
            let row = m0 + (BM / WM) * wm + 16 * mi as u32 + g + 8 * h as u32;
            if row < r1 {
                let sa = if OUT != OUT_I32 { row_scale(p, row) } else { 0.0 };
                unroll16!(NJ, |nj| {
                    let col = n0 + 8 * NJ as u32 * wn + 8 * nj as u32 + 2 * t;
                    if col < p.n {
                        let (v0, v1) = (acc[mi][nj][2 * h], acc[mi][nj][2 * h + 1]);
                        let o = row as u64 * p.n as u64 + col as u64;
                        if OUT == OUT_I32 {
                            stg_v2(p.out + 4 * o, (v0 >> ACC_SHIFT) as u32, (v1 >> ACC_SHIFT) as u32);
                        } else {
                            let sw = p.s_w + 4 * (e as u64 * p.n as u64 + col as u64);
                            let y0 = sa * ldg_f32(sw) * v0 as f32;
                            let y1 = sa * ldg_f32(sw + 4) * v1 as f32;
                            let packed = if OUT == OUT_BF16 { pack_bf16x2(y0, y1) } else { pack_f16x2(y0, y1) };
                            stg_u32(p.out + 2 * o, packed);
                        }
                    }
                });
            }
        });
    });
}

macro_rules! gemm_kernels {
    ($($name:ident: $bm:literal, $mi:literal, $wm:literal, $nj:literal, $out:ident;)*) => {$(
        /// W4A4 grouped GEMM instance (`BM`, output kind); see the module docs.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`W4A4Params`] documents,
        /// `n_experts <= 1024`; 256 threads and [`crate::launch::gemm_smem_bytes`] of
        /// dynamic shared memory per block.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: W4A4Params) {
            gemm::<$bm, $mi, $wm, $nj, $out>(&p)
        }
    )*};
}

gemm_kernels! {
    w4a4_gemm_bm128_bf16: 128, 4, 2, 4, OUT_BF16;
    w4a4_gemm_bm128_f16: 128, 4, 2, 4, OUT_F16;
    w4a4_gemm_bm128_i32: 128, 4, 2, 4, OUT_I32;
    w4a4_gemm_bm64_bf16: 64, 2, 2, 4, OUT_BF16;
    w4a4_gemm_bm64_f16: 64, 2, 2, 4, OUT_F16;
    w4a4_gemm_bm64_i32: 64, 2, 2, 4, OUT_I32;
    w4a4_gemm_bm32_bf16: 32, 1, 2, 4, OUT_BF16;
    w4a4_gemm_bm32_f16: 32, 1, 2, 4, OUT_F16;
    w4a4_gemm_bm32_i32: 32, 1, 2, 4, OUT_I32;
    w4a4_gemm_bm16_bf16: 16, 1, 1, 2, OUT_BF16;
    w4a4_gemm_bm16_f16: 16, 1, 1, 2, OUT_F16;
    w4a4_gemm_bm16_i32: 16, 1, 1, 2, OUT_I32;
}

#[inline(always)]
unsafe fn quantize<const BF16: bool>(p: &QuantParams) {
    let lane = tid() % 32;
    let row = bid() * (bdim() / 32) + tid() / 32;
    if row >= p.rows {
        return;
    }
    let x = p.x + 2 * row as u64 * p.k as u64;
    let groups = p.k / 8;
    // amax, NaN-propagating.
    let mut amax = 0f32;
    let mut i = lane;
    while i < groups {
        let v = ldg_v4(x + 16 * i as u64);
        let mut q = 0;
        while q < 4 {
            amax = max_nan(amax, from_half_bits::<BF16>(v[q]).abs());
            amax = max_nan(amax, from_half_bits::<BF16>(v[q] >> 16).abs());
            q += 1;
        }
        i += 32;
    }
    let mut m = 16;
    while m > 0 {
        amax = max_nan(amax, f32::from_bits(shfl_xor(amax.to_bits(), m)));
        m /= 2;
    }
    let scale = div_rn(amax, 7.0);
    let out = p.q + row as u64 * (p.k / 2) as u64;
    let mut i = lane;
    while i < groups {
        let v = ldg_v4(x + 16 * i as u64);
        let mut word = 0u32;
        let mut q = 0;
        while q < 8 {
            let h = from_half_bits::<BF16>(v[q / 2] >> (16 * (q % 2)));
            let c = if scale == 0.0 { 0 } else { rint_i32(div_rn(h, scale)).clamp(-7, 7) };
            word |= ((c as u32) & 15) << (4 * q);
            q += 1;
        }
        stg_u32(out + 4 * i as u64, word);
        i += 32;
    }
    if lane == 0 {
        stg_u32(p.scale + 4 * row as u64, scale.to_bits());
    }
}

/// bf16 rows -> INT4 + per-row scale (one warp per row).
///
/// # Safety
/// `p` must describe device buffers as [`QuantParams`] documents; `k % 64 == 0`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn w4a4_quantize_bf16(p: QuantParams) {
    quantize::<true>(&p)
}

/// f16 rows -> INT4 + per-row scale (one warp per row).
///
/// # Safety
/// As [`w4a4_quantize_bf16`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn w4a4_quantize_f16(p: QuantParams) {
    quantize::<false>(&p)
}

#[inline(always)]
unsafe fn dequant<const BF16: bool>(p: &DequantParams) {
    let n2 = p.n / 2;
    let i = bid() * bdim() + tid();
    if i >= p.rows * n2 {
        return;
    }
    let (row, col) = (i / n2, 2 * (i % n2));
    // Expert of this row: the last e with offsets[e] <= row.
    let (mut lo, mut hi) = (0u32, p.n_experts);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if ldg_u64(p.offsets + 8 * mid as u64) as i64 <= row as i64 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let o = row as u64 * p.n as u64 + col as u64;
    let sa = ldg_f32(p.s_a + 4 * row as u64);
    let sw = p.s_w + 4 * (lo as u64 * p.n as u64 + col as u64);
    let y0 = sa * ldg_f32(sw) * ldg_u32(p.acc + 4 * o) as i32 as f32;
    let y1 = sa * ldg_f32(sw + 4) * ldg_u32(p.acc + 4 * o + 4) as i32 as f32;
    let packed = if BF16 { pack_bf16x2(y0, y1) } else { pack_f16x2(y0, y1) };
    stg_u32(p.out + 2 * o, packed);
}

/// Baseline second kernel: i32 accumulators -> bf16 with both scales.
///
/// # Safety
/// `p` must describe device buffers as [`DequantParams`] documents.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn w4a4_dequant_bf16(p: DequantParams) {
    dequant::<true>(&p)
}

/// Baseline second kernel: i32 accumulators -> f16 with both scales.
///
/// # Safety
/// As [`w4a4_dequant_bf16`].
#[no_mangle]
pub unsafe extern "ptx-kernel" fn w4a4_dequant_f16(p: DequantParams) {
    dequant::<false>(&p)
}
