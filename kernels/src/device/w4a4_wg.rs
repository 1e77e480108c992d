//! `w4a4_gemm_wg_*`: the W4A4 grouped GEMM on Hopper's warpgroup MMA
//! (`wgmma ... s8`, sm_90a builds), for tiles of 128 rows.
//!
//! Same schedule and epilogue as the `mma.sync` kernels ([`super::w4a4`]):
//! a block walks `128 x 128` tiles (rows of one expert x output channels),
//! K in stages of 256 staged as packed INT4 by a 4-deep `cp.async` ring.
//! Each thread copies exactly the 16-byte pieces it later reads itself, so
//! a stage's data needs no barrier before use. What changes is the math:
//!
//! - **A** (the activations, 64 rows per warpgroup) goes from the staged
//!   nibbles to registers, unpacked to s8 (`x 16`) as the `mma.sync` kernel
//!   unpacks them: per k-step of 32 a lane holds `lo`/`hi` of word `s` of its
//!   16-byte slice `t` of half `h`, the `m16n8k32` A fragment that is also
//!   `wgmma`'s.
//! - **B** (the weights) must be s8 in shared memory for `wgmma`: every
//!   thread unpacks one (row, half) of a stage into one of two s8 tiles, in
//!   the k order the A fragments imply: within k-step `(h, s)`, 4-byte word
//!   `j` of a row holds `lo` (j < 4) or `hi` (j >= 4) of word `s` of slice
//!   `j % 4`. Rows are 128 bytes (one half, 4 k-steps) with the 128-byte
//!   swizzle of [`super::wgmma::desc_sw128`]; the two halves are two such
//!   tiles.
//!
//! **Pipeline.** This unpacking (shared-memory stores the async proxy then
//! reads) is what bounds the kernel: a timing build without its stores ran
//! Mixtral's FC1 at 8192 rows in 2.0 ms instead of 3.1 (docs/gpu-results.md,
//! run 33). So it runs under the tensor work: a stage issues its first
//! half's 4 k-steps (one commit group each, at most 4 in flight), waits
//! until only those are in flight (the previous stage is then retired, in
//! every warpgroup past a barrier), unpacks the next stage into the s8 tile
//! the previous one used while they run, then issues its second half. Two
//! barriers per stage. The stage loop is unrolled 4 times (ptxas drains the
//! pipeline at a loop back-edge while register operands are in flight). The
//! sums carry the factor 256 of the unpacked operands, undone exactly in the
//! epilogue as in the `mma.sync` kernels.

use super::arch::*;
use super::w4a4::{
    epilogue, locate, row_scale, schedule, staged, unpack_hi, unpack_lo, Tile, OUT_BF16, OUT_F16, OUT_I32,
};
use super::wgmma;
use crate::launch::{
    gemm_wg_ring_bytes, gemm_wg_smem_bytes, gemm_wg_smem_for, gemm_wg_stages, GEMM_BK as BK, GEMM_BN as BN,
    GEMM_THREADS as THREADS, GEMM_WG_BM, GEMM_WG_S8_BYTES as S8_BYTES,
};
use crate::params::W4A4Params;

/// Bytes of one half (128 k) of the s8 weight tile: 128 rows of 128 bytes.
const HALF_BYTES: u32 = BN * 128;
/// Stages per iteration of the main loop.
const UNROLL: u32 = 4;
/// The dynamic shared memory the host gives every block.
const SMEM_BYTES: u32 = gemm_wg_smem_bytes();

/// 64-row `wgmma` tiles per warpgroup: 1 (`128`-row block tiles) or, in
/// `moe4_exp = "w4a4bm256"` builds, 2 (`256`-row tiles: the s8 unpacking of
/// the weights, the kernel's bound, serves twice the multiply-adds).
const MI: usize = if cfg!(moe4_exp = "w4a4bm256") { 2 } else { 1 };
/// Rows per block tile.
const BMT: u32 = GEMM_WG_BM * MI as u32;
/// Staging ring stages.
const STAGES: u32 = gemm_wg_stages(BMT);

/// Copies this thread's own 16-byte pieces of stage `kt` of tile `t` to the
/// stage at `sbase` (the [`staged`] layout): the A pieces its lane reads
/// (rows `arow + 16 mi (+ 8)`, pieces `t`, `4 + t`) and the B pieces it
/// unpacks (row `bn`, pieces `4 bh .. 4 bh + 4`). A thread reads only what
/// it copied, so a stage needs no barrier between its copies landing and
/// their use. Zero-filled past the expert's rows, N and K.
#[inline(always)]
unsafe fn load_own(p: &W4A4Params, tl: &Tile, kt: u32, sbase: u32, arow: u32, t: u32, bn: u32, bh: u32) {
    let kb = p.k / 2;
    let k0 = kt * (BK / 2);
    unroll!(4 * MI, |i| {
        let (row, part) = (arow + 16 * (i as u32 / 4) + 8 * (i as u32 % 2), 4 * ((i as u32 / 2) % 2) + t);
        let kbyte = k0 + 16 * part;
        let r = tl.m0 + row;
        let ok = kbyte < kb && r < tl.r1;
        let src = if ok { p.a + r as u64 * kb as u64 + kbyte as u64 } else { p.b };
        cp_async16_zfill(staged(sbase, row, part), src, ok);
    });
    let n = tl.n0 + bn;
    unroll!(4, |j| {
        let part = 4 * bh + j as u32;
        let kbyte = k0 + 16 * part;
        let ok = kbyte < kb && n < p.n;
        let src = if ok { tl.b_expert + n as u64 * kb as u64 + kbyte as u64 } else { p.b };
        cp_async16_zfill(staged(sbase, BMT + bn, part), src, ok);
    });
}

/// Unpacks this thread's share of stage `kt`'s weights (row `bn`, half
/// `bh`, staged at `sbase`) into the s8 tile at `sb8`.
#[inline(always)]
unsafe fn unpack_b(sbase: u32, sb8: u32, bn: u32, bh: u32) {
    let mut w = [[0u32; 4]; 4];
    unroll!(4, |j| w[j] = lds_v4(staged(sbase, BMT + bn, 4 * bh + j as u32)));
    let row = sb8 + bh * HALF_BYTES + bn * 128;
    unroll!(4, |st| {
        let lo = [unpack_lo(w[0][st]), unpack_lo(w[1][st]), unpack_lo(w[2][st]), unpack_lo(w[3][st])];
        let hi = [unpack_hi(w[0][st]), unpack_hi(w[1][st]), unpack_hi(w[2][st]), unpack_hi(w[3][st])];
        let (q0, q1) = (2 * st as u32, 2 * st as u32 + 1);
        sts_v4(row + 16 * (q0 ^ (bn % 8)), lo);
        sts_v4(row + 16 * (q1 ^ (bn % 8)), hi);
    });
}

#[inline(always)]
unsafe fn gemm_wg<const OUT: u32>(p: &W4A4Params) {
    const { assert!(S8_BYTES == 2 * HALF_BYTES && BN == 128 && BK == 256) };
    const { assert!(gemm_wg_smem_for(BMT) <= SMEM_BYTES) };
    let t0 = tid();
    let (warp, lane) = (t0 / 32, t0 % 32);
    let (g, t) = (lane / 4, lane % 4);
    let stage_bytes = (BMT + BN) * (BK / 2);
    // [s8 tiles: 2 x 32 KiB, 1024-aligned][staging ring][schedule]
    let s8 = (smem() + 1023) & !1023;
    let ring = s8 + 2 * S8_BYTES;
    let sched = ring + gemm_wg_ring_bytes(BMT);
    let nk = p.k.div_ceil(BK);
    let total = schedule::<BMT>(p, sched);
    // This thread's share of the B unpacking: weight row `bn`, half `bh`.
    let (bn, bh) = (t0 / 2, t0 % 2);
    // This warp's A rows: `arow + 16 mi` (and + 8) for 64-row tile `mi` of
    // its warpgroup, as the 16-row tiles of the generic epilogue.
    let arow = (BMT / 8) * warp + g;

    let mut tile = bid();
    while tile < total {
        let tl = locate::<BMT>(p, sched, tile);
        let mut acc = [[[0i32; 4]; 16]; MI];
        let mut s = 0;
        while s < STAGES {
            if s < nk {
                load_own(p, &tl, s, ring + s * stage_bytes, arow, t, bn, bh);
            }
            cp_async_commit();
            s += 1;
        }
        // Stage 0's s8 tile.
        cp_async_wait::<{ STAGES - 1 }>();
        unpack_b(ring, s8, bn, bh);
        // One 256-k stage: its two halves of 4 k-steps (one commit group
        // each), with stage kt + 1's unpacking between them.
        let stage = |kt: u32, acc: &mut [[[i32; 4]; 16]; MI]| {
            let sbase = ring + (kt % STAGES) * stage_bytes;
            let sb8 = s8 + (kt % 2) * S8_BYTES;
            // Stage kt's s8 tile (every thread's share) is complete and
            // visible to the async proxy.
            wgmma::fence_proxy_async();
            sync();
            unroll!(2, |h| {
                // This lane's A words of half h, rows arow + 16 mi (+ 8).
                let mut araw = [[[0u32; 4]; 2]; MI];
                unroll!(MI, |mi| {
                    araw[mi][0] = lds_v4(staged(sbase, arow + 16 * mi as u32, 4 * h as u32 + t));
                    araw[mi][1] = lds_v4(staged(sbase, arow + 16 * mi as u32 + 8, 4 * h as u32 + t));
                });
                unroll!(4, |st| {
                    // At most 4 groups in flight: a step's A registers are
                    // free 4 steps later.
                    wgmma::wait::<3>();
                    wgmma::fence();
                    let desc = wgmma::desc_sw128(sb8 + h as u32 * HALF_BYTES + 32 * st as u32);
                    unroll!(MI, |mi| {
                        let (w0, w8) = (araw[mi][0][st], araw[mi][1][st]);
                        let a = [unpack_lo(w0), unpack_lo(w8), unpack_hi(w0), unpack_hi(w8)];
                        wgmma::mma_s8_n128(&mut acc[mi], a, desc, true);
                    });
                    wgmma::commit();
                });
                if h == 0 {
                    // Only this half's 4 groups are in flight: stage kt - 1
                    // is retired here, and in every warpgroup past the
                    // barrier, so its s8 tile takes stage kt + 1 while this
                    // half's wgmmas run.
                    wgmma::wait::<4>();
                    sync();
                    if kt + 1 < nk {
                        cp_async_wait::<{ STAGES - 2 }>();
                        unpack_b(ring + ((kt + 1) % STAGES) * stage_bytes, s8 + ((kt + 1) % 2) * S8_BYTES, bn, bh);
                    }
                }
            });
            // This thread is done with stage kt's slot: refill it.
            let next = kt + STAGES;
            if next < nk {
                load_own(p, &tl, next, sbase, arow, t, bn, bh);
            }
            cp_async_commit();
        };
        // ptxas drains the wgmma pipeline at every loop back-edge (the A
        // operands live in registers), so the loop body is UNROLL stages.
        let mut kt = 0;
        while kt < nk {
            unroll!(UNROLL as usize, |u| {
                if kt + (u as u32) < nk {
                    stage(kt + u as u32, &mut acc)
                }
            });
            kt += UNROLL;
        }
        wgmma::wait::<0>();
        unroll!(MI, |mi| wgmma::hold_i32(&mut acc[mi]));
        cp_async_wait::<0>();
        sync(); // every warp is done with the ring and the s8 tiles
        if OUT == OUT_I32 {
            epilogue::<BMT, MI, 8, 16, OUT>(p, &acc, tl.e, tl.m0, tl.r1, tl.n0);
        } else {
            epilogue_staged::<OUT>(p, &acc, &tl, ring);
        }
        // The next tile's prologue overwrites what the epilogue read.
        sync();
        tile += gdim();
    }
}

/// Row stride of the staged output tile (256 bytes of 16-bit values plus 16
/// of padding: the 8 rows a warp writes at once then hit distinct banks).
const OUT_STRIDE: u32 = 272;

/// 16-bit epilogue through shared memory: each thread scales and packs its
/// accumulators into the tile at `stage` (the staging ring, free after the
/// k-loop), then the block writes the tile out in full 16-byte pieces (a row
/// segment of 256 contiguous bytes), instead of 4-byte pieces per lane.
/// Requires `out` 16-byte aligned (the host checks).
#[inline(always)]
unsafe fn epilogue_staged<const OUT: u32>(p: &W4A4Params, acc: &[[[i32; 4]; 16]; MI], tl: &Tile, stage: u32) {
    const { assert!(gemm_wg_ring_bytes(BMT) >= BMT * OUT_STRIDE) };
    let t0 = tid();
    let (warp, lane) = (t0 / 32, t0 % 32);
    let (g, t) = (lane / 4, lane % 4);
    // Tile row of (mi, h): as the A rows of the k-loop.
    let trow = |mi: usize, h: usize| (BMT / 8) * warp + 16 * mi as u32 + g + 8 * h as u32;
    let mut sa = [[0f32; 2]; MI];
    unroll!(MI, |mi| {
        unroll!(2, |h| {
            let row = tl.m0 + trow(mi, h);
            if row < tl.r1 {
                sa[mi][h] = row_scale(p, row);
            }
        });
    });
    unroll16!(16, |nj| {
        let col = tl.n0 + 8 * nj as u32 + 2 * t;
        let (mut w0, mut w1) = (0f32, 0f32);
        if col < p.n {
            let sw = p.s_w + 4 * (tl.e as u64 * p.n as u64 + col as u64);
            (w0, w1) = (ldg_f32(sw), ldg_f32(sw + 4));
        }
        unroll!(MI, |mi| {
            unroll!(2, |h| {
                let s = sa[mi][h];
                let (y0, y1) = (s * w0 * acc[mi][nj][2 * h] as f32, s * w1 * acc[mi][nj][2 * h + 1] as f32);
                let packed = if OUT == OUT_BF16 { pack_bf16x2(y0, y1) } else { pack_f16x2(y0, y1) };
                sts(stage + trow(mi, h) * OUT_STRIDE + 4 * (4 * nj as u32 + t), packed);
            });
        });
    });
    sync();
    // BMT rows x 16 pieces of 16 bytes; N is a multiple of 8, so a piece is
    // wholly inside or outside.
    unroll!(8 * MI, |i| {
        let piece = t0 + THREADS * i as u32;
        let (r, q) = (piece / 16, piece % 16);
        let (row, col) = (tl.m0 + r, tl.n0 + 8 * q);
        if row < tl.r1 && col < p.n {
            let v = lds_v4(stage + r * OUT_STRIDE + 16 * q);
            stg_v4(p.out + 2 * (row as u64 * p.n as u64 + col as u64), v);
        }
    });
}

macro_rules! gemm_wg_kernels {
    ($($name:ident: $out:ident;)*) => {$(
        /// W4A4 grouped GEMM on `wgmma` (128-row tiles, output kind); see
        /// the module docs.
        ///
        /// # Safety
        /// `p` must describe device buffers as [`W4A4Params`] documents,
        /// `n_experts <= 1024`; 256 threads and
        /// [`crate::launch::gemm_wg_smem_bytes`] of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: W4A4Params) {
            gemm_wg::<$out>(&p)
        }
    )*};
}

gemm_wg_kernels! {
    w4a4_gemm_wg_bf16: OUT_BF16;
    w4a4_gemm_wg_f16: OUT_F16;
    w4a4_gemm_wg_i32: OUT_I32;
}
