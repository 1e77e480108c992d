//! `moe_pf1_*`, `moe_pf2_*`: the prefill path's grouped GEMMs (many pairs
//! per expert).
//!
//! **Tile.** A block (4 warps) computes 128 weight rows (4 tasks of the
//! [`crate::tile`] layout, one per warp) x 64 of an expert's pairs; the
//! weights are the `mma` A operand (as in decode, so prefill reads the same
//! single copy of the weights), the 64 pairs' activations the B operand.
//! Per 64-k chunk, a 4-stage `cp.async` ring brings into shared memory the
//! block's codes (4 x 1 KiB) and scales (4 x 128 B) and the 64 activation
//! rows (8 KiB, gathered by pair; rows past the expert's pairs are zeros).
//! Activation row `r`'s 16-byte piece `q` is stored at piece `q ^ (r & 7)`,
//! so the 16-byte fragment reads of 8 lanes hit 8 different bank groups.
//!
//! **Math per chunk and warp:** 8 packed words decoded and scaled (as in
//! decode), then 4 k-steps x 2 row tiles x 8 column tiles = 64
//! `mma.m16n8k16`: the decode cost is spread over 8 column tiles.
//!
//! **Work.** Tiles = (column group of 64 pairs of an active expert, 128-row
//! block), counted from the router's group prefix on the device; blocks are
//! persistent. Epilogues as the decode kernels': FC1 applies the gated
//! activation and writes h (16-bit), FC2 writes alpha2 x routing weight x
//! acc to y (f32) for the combine kernel.

use super::arch::*;
use super::fc::{dequant_step, epilogue_fc1, epilogue_fc2, lane_scales, mma, post};
use crate::params::FcParams;
use crate::tile::{CHUNK_CODE_BYTES, CHUNK_SCALE_BYTES, KCHUNK, MTILES, TASK_ROWS};

/// Pairs per prefill tile (the router's group size for prefill).
pub const PF_COLS: u32 = crate::launch::PF_COLS;
const NT: usize = (PF_COLS / 8) as usize;
const WARPS: u32 = crate::launch::PF_THREADS / 32;
const STAGES: u32 = crate::launch::PF_STAGES;
const CODE_BYTES: u32 = WARPS * CHUNK_CODE_BYTES as u32; // 4 KiB
const SCALE_BYTES: u32 = WARPS * CHUNK_SCALE_BYTES as u32; // 512 B
const X_BYTES: u32 = PF_COLS * 2 * KCHUNK as u32; // 8 KiB
const STAGE_BYTES: u32 = CODE_BYTES + SCALE_BYTES + X_BYTES;

#[inline(always)]
unsafe fn prefill<const FC1: bool, const BF16: bool>(p: &FcParams) {
    // Programmatic dependent launch: the previous kernel in the stream is
    // complete (its writes visible) after this; then let the next launch.
    griddep_wait();
    griddep_launch_dependents();
    let t0 = tid();
    let (warp, lane) = (t0 / 32, t0 % 32);
    let (g, t) = (lane / 4, lane % 4);
    let groups = ldg_u32_coherent(p.n_active + 4);
    let tpe = p.rows / TASK_ROWS as u32;
    let tpb = tpe.div_ceil(WARPS); // 128-row blocks per expert
    let nchunks = p.k / KCHUNK as u32;
    let tiles = groups * tpb;
    let base = smem();
    let post = post::<BF16>();

    let mut tile = bid();
    while tile < tiles {
        let (gi, rb) = (tile / tpb, tile % tpb);
        let rec = p.groups + 16 * gi as u64;
        let (e, slot0, n_cols) = (ldg_u32_coherent(rec), ldg_u32_coherent(rec + 4), ldg_u32_coherent(rec + 8));
        // Tasks of this block; warps past the expert's rows only copy.
        let task0 = rb * WARPS;
        let ntask = if tpe - task0 < WARPS { tpe - task0 } else { WARPS };
        let code0 = p.codes + (e * tpe + task0) as u64 * nchunks as u64 * CHUNK_CODE_BYTES as u64;
        let scale0 = p.scales + (e * tpe + task0) as u64 * nchunks as u64 * CHUNK_SCALE_BYTES as u64;
        // This thread's 4 activation rows (r = t0 / 8 + 16 q), 16-byte piece t0 % 8.
        let piece = t0 % 8;
        let mut xrow = [0u64; 4];
        unroll!(4, |q| {
            let r = t0 / 8 + 16 * q as u32;
            if r < n_cols {
                let slot = slot0 + r;
                let row = if FC1 { ldg_u32_coherent(p.sorted_pairs + 4 * slot as u64) / p.topk } else { slot };
                xrow[q] = p.input + 2 * row as u64 * p.k as u64 + 16 * piece as u64;
            }
        });

        let load = |c: u32, stage: u32| {
            let sb = base + stage * STAGE_BYTES;
            // Codes: 4 tasks x 1 KiB, 2 x 16 B per thread; scales: 4 x 128 B.
            unroll!(2, |q| {
                let idx = t0 + 128 * q as u32; // 16-byte piece of the 4 KiB
                let task = idx / 64;
                let valid = task < ntask;
                let src = code0
                    + (task as u64 * nchunks as u64 + c as u64) * CHUNK_CODE_BYTES as u64
                    + 16 * (idx % 64) as u64;
                cp_async16_zfill(sb + 16 * idx, if valid { src } else { p.codes }, valid);
            });
            if t0 < 32 {
                let task = t0 / 8;
                let valid = task < ntask;
                let src = scale0
                    + (task as u64 * nchunks as u64 + c as u64) * CHUNK_SCALE_BYTES as u64
                    + 16 * (t0 % 8) as u64;
                cp_async16_zfill(sb + CODE_BYTES + 16 * t0, if valid { src } else { p.scales }, valid);
            }
            unroll!(4, |q| {
                let r = t0 / 8 + 16 * q as u32;
                let valid = xrow[q] != 0;
                let src = xrow[q] + c as u64 * (2 * KCHUNK) as u64;
                cp_async16_zfill(
                    sb + CODE_BYTES + SCALE_BYTES + r * 128 + 16 * (piece ^ (r & 7)),
                    if valid { src } else { p.input },
                    valid,
                );
            });
        };

        let mut acc = [[[0f32; 4]; NT]; MTILES];
        let mut s = 0;
        while s < STAGES - 1 {
            if s < nchunks {
                load(s, s);
            }
            cp_async_commit();
            s += 1;
        }
        let mut c = 0;
        while c < nchunks {
            cp_async_wait::<{ STAGES - 2 }>();
            sync();
            let sb = base + (c % STAGES) * STAGE_BYTES;
            let next = c + STAGES - 1;
            if next < nchunks {
                load(next, next % STAGES);
            }
            cp_async_commit();
            if warp < ntask {
                let wa = [lds_v4(sb + warp * 1024 + 16 * lane), lds_v4(sb + warp * 1024 + 512 + 16 * lane)];
                let sc = lane_scales::<BF16>(lds(sb + CODE_BYTES + warp * 128 + 4 * lane));
                let xb = sb + CODE_BYTES + SCALE_BYTES;
                unroll!(2, |h| {
                    // Activation words of steps 2h, 2h+1 for every column tile.
                    let mut b = [[0u32; 4]; NT];
                    unroll!(NT, |j| {
                        let r = 8 * j as u32 + g;
                        b[j] = lds_v4(xb + r * 128 + 16 * ((2 * t + h as u32) ^ (r & 7)));
                    });
                    unroll!(2, |sh| {
                        let step = 2 * h + sh;
                        unroll!(MTILES, |mt| {
                            let a = dequant_step::<BF16>(wa[mt][step], sc[mt][0], sc[mt][1]);
                            unroll!(NT, |j| mma::<BF16>(&mut acc[mt][j], a, b[j][2 * sh], b[j][2 * sh + 1]));
                        });
                    });
                });
            }
            c += 1;
        }
        cp_async_wait::<0>();
        sync();
        if warp < ntask {
            let r = task0 + warp;
            if FC1 {
                epilogue_fc1::<BF16, NT, false>(p, &acc, e, r, slot0, n_cols, post);
            } else {
                epilogue_fc2::<BF16, NT>(p, &acc, e, r, slot0, n_cols, post);
            }
        }
        tile += gdim();
    }
}

macro_rules! pf_kernels {
    ($($name:ident: $fc1:literal, $bf16:literal;)*) => {$(
        /// Prefill GEMM instance `(FC1?, bf16?)`; see the module docs.
        ///
        /// # Safety
        /// `p` as [`FcParams`] documents, routed with `group = PF_COLS`;
        /// 128 threads, `PF_STAGES * stage` bytes of dynamic shared memory.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(p: FcParams) {
            prefill::<$fc1, $bf16>(&p)
        }
    )*};
}

pf_kernels! {
    moe_pf1_bf16: true, true;
    moe_pf1_f16: true, false;
    moe_pf2_bf16: false, true;
    moe_pf2_f16: false, false;
}
